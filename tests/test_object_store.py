"""The lake on object storage: `MEMCTL_DATA=s3://bucket/prefix` against an S3 server on loopback (moto).

The real CLI runs in subprocesses as two "machines" (two local cache folders) sharing one bucket:
machine A materializes the sample inbox into S3; its tables and blobs must be the same bytes as a run
on a local folder, and nothing durable may land on A's disk. Machine B then answers a recall with the
cited line (building its own index cache from the Parquet tables in S3) and builds the lake again with a new
inbox file and the hits it logged; A finds that build current and answers from it; a forget request and a
corrupt blob work through the bucket alone.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.test_reliability import lake_fingerprint

pytestmark = pytest.mark.objectstore

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "data" / "inbox"
QUESTION = "Where did Xiaoming play football?"
CITED = "Oh, and my neighbour Xiaoming played football in Riverside Park on Saturday."


@pytest.fixture(scope="module")
def s3():
    """(endpoint, boto3 client, requests) of a moto S3 server on a free loopback port; `requests` lists the
    (method, path and query) of every request it has answered, in order."""
    pytest.importorskip("moto.server")
    boto3 = pytest.importorskip("boto3")
    pytest.importorskip("s3fs")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    # moto's S3 app itself, served as ThreadedMotoServer serves its dispatcher: the dispatcher only picks this same
    # app, by matching the Host header against every AWS service's URL patterns on every request (a quarter of the
    # server's CPU in this test, in this process)
    from moto.moto_server.werkzeug_app import MotoRequestHandler, create_backend_app
    from werkzeug.serving import make_server

    requests: list[tuple[str, str]] = []

    class Handler(MotoRequestHandler):
        def handle_one_request(self) -> None:
            super().handle_one_request()
            if getattr(self, "command", None):  # not a connection closed before a request
                requests.append((self.command, self.path))

    server = make_server("127.0.0.1", 0, create_backend_app("s3"), threaded=True, request_handler=Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    host, port = server.server_address[:2]
    endpoint = f"http://{host}:{port}"
    client = boto3.client(
        "s3", endpoint_url=endpoint, aws_access_key_id="test", aws_secret_access_key="test", region_name="us-east-1"
    )
    try:
        yield endpoint, client, requests
    finally:
        server.shutdown()
        thread.join()


def _env(endpoint: str, data: str, cache: Path, host: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMCTL_", "DAGSTER_", "AWS_"))}
    return {
        **env,
        "MEMCTL_DATA": data,
        "MEMCTL_CACHE_DIR": str(cache),
        "MEMCTL_HOST": host,
        "MEMCTL_STORAGE_OPTIONS": json.dumps(
            {"endpoint_url": endpoint, "key": "test", "secret": "test", "client_kwargs": {"region_name": "us-east-1"}}
        ),
        "MEMCTL_NLP_WORKERS": "1",
        "PYTHONHASHSEED": "0",
    }


def _start(env: dict, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "assets.cli", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(proc: subprocess.Popen, code: int = 0) -> subprocess.CompletedProcess:
    stdout, stderr = proc.communicate(timeout=600)
    args = proc.args[3:] if isinstance(proc.args, list) else proc.args
    assert proc.returncode == code, f"memctl {' '.join(args)} failed:\n{stdout[-3000:]}\n{stderr[-3000:]}"
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


def _memctl(env: dict, *args: str, code: int = 0) -> subprocess.CompletedProcess:
    return _finish(_start(env, *args), code)


def _objects(client, bucket: str, prefix: str) -> dict[str, bytes]:
    out = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for o in page.get("Contents", ()):
            out[o["Key"][len(prefix) :]] = client.get_object(Bucket=bucket, Key=o["Key"])["Body"].read()
    return out


def _s3_fingerprint(objects: dict[str, bytes]) -> dict[str, str]:
    """The same view as tests.test_reliability.lake_fingerprint, over the bucket's objects."""
    return {
        k: hashlib.sha256(v).hexdigest()
        for k, v in sorted(objects.items())
        if (
            k.startswith("lake/")
            and k.endswith((".parquet", ".json"))
            and k != "lake/_state.json"
            and not k.rsplit("/", 1)[-1].startswith(".")
            and not k.startswith("lake/recall/")
            and k != "lake/node_docs.parquet"
        )
        or (k.startswith("raw/") and k.endswith(".blob.zst"))
    }


@pytest.mark.timeout(900)
def test_a_lake_on_s3_serves_two_machines(s3, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    endpoint, client, requests = s3
    bucket = "memctl-" + uuid.uuid4().hex[:8]
    client.create_bucket(Bucket=bucket)
    data = f"s3://{bucket}/team/lake"
    for path in sorted(SAMPLES.rglob("*")):
        if path.is_file():
            client.put_object(
                Bucket=bucket, Key=f"team/lake/inbox/{path.relative_to(SAMPLES).as_posix()}", Body=path.read_bytes()
            )
    a = _env(endpoint, data, tmp_path / "cache_a", "machine-a")
    b = _env(endpoint, data, tmp_path / "cache_b", "machine-b")

    # Machine A materializes into the bucket; a local-folder run of the same inbox is the reference (the session's
    # sample lake, built meanwhile if no other module has built it yet).
    on_s3 = _start(a, "materialize", "--quiet")
    local = request.getfixturevalue("sample_lake")
    first = _finish(on_s3)
    assert "ingested now: 3" in first.stdout and "lake rebuilt: yes" in first.stdout
    objects = _objects(client, bucket, "team/lake/")
    reference = lake_fingerprint(local)
    assert any(k.startswith("raw/") for k in reference) and "lake/consolidated/state.parquet" in reference
    assert _s3_fingerprint(objects) == reference

    assert not (local.parent / "unused_cache").exists()  # a local lake uses no cache folder, even when one is set

    # Nothing durable on A's disk: only its index cache, NLP cache and Dagster instance.
    (cache_a,) = (tmp_path / "cache_a").iterdir()
    kept = {p.relative_to(cache_a).as_posix() for p in cache_a.rglob("*") if p.is_file()}
    assert {"lake/memory.duckdb", "cache/nlp.sqlite"} <= kept
    # (lake/tenants.parquet is the index's own table of tenants, lake/node_docs.parquet its cache of segmented
    # documents, both made on this machine)
    assert not [
        k
        for k in kept
        if (k.endswith((".blob.zst", ".parquet")) and k not in ("lake/tenants.parquet", "lake/node_docs.parquet"))
        or k.startswith(("inbox/", "raw/"))
    ]

    # Machine B: a recall builds B's index cache from the bucket's tables and cites the line from the bucket's blob.
    out = _memctl(b, "recall", QUESTION, "--tenant", "demo", "--json")
    assert "index cache rebuilt" in out.stderr
    top = json.loads(out.stdout)[0]
    assert top["citations"][0]["excerpt"] == CITED and top["citations"][0]["verified"] is True
    hits = [k for k in _objects(client, bucket, "team/lake/feedback/hits/") if k.endswith(".machine-b.jsonl")]
    assert hits == [f"demo/{hits[0].split('/')[1]}"], hits
    second = _memctl(b, "recall", QUESTION, "--tenant", "demo", "--json", "--no-log")
    assert "index cache rebuilt" not in second.stderr  # cache current: not rebuilt again

    # DuckDB reads the Parquet tables in the bucket (fsspec registered; no httpfs), from one listing of the tables:
    # no object's size asked apart (a HEAD per file per query was 628 of this command's 668 requests)
    sql = "SELECT (SELECT count(*) FROM nodes) AS nodes, (SELECT count(*) FROM messages) AS messages"
    before = len(requests)
    in_place = json.loads(_memctl(b, "sql", sql, "--parquet", "--json").stdout)
    made = requests[before:]
    assert not [r for r in made if r[0] == "HEAD"], made
    assert {m for m, _ in made} == {"GET"}, made
    # the listings and each Parquet file's own reads, nothing else: DuckDB fetches a small file whole once per scan,
    # and the views scan an overlay file once per layer that reads it (up to ~10 reads of lake/r2g/nodes.parquet)
    listings = [p for _, p in made if "list-type=" in p]
    objects = [p.split("?")[0] for _, p in made if "list-type=" not in p]
    assert len(listings) <= 12 and objects and all(o.endswith(".parquet") for o in objects), made
    assert len(objects) <= 4 * len(set(objects)), made
    in_index = json.loads(_memctl(b, "sql", sql, "--json").stdout)
    assert in_place == in_index and in_place[0]["messages"] == 25

    # A new file in the bucket's inbox, then B's materialize: only the new file runs, and the lake-wide tables are
    # rebuilt with it and with the hit B logged (the feedback table in the bucket holds it).
    client.put_object(
        Bucket=bucket,
        Key="team/lake/inbox/demo/late.txt",
        Body=b"[2023-05-09 10:00:00] Caroline: Xiaoming joined the Riverside football club today.\n",
    )
    again = _memctl(b, "materialize", "--quiet")
    assert "ingested now: 1" in again.stdout and "lake rebuilt: yes" in again.stdout
    feedback = pq.read_table(io.BytesIO(_objects(client, bucket, "team/lake/lake/feedback.parquet")[""])).to_pylist()
    from_b = [f for f in feedback if (f["source_file"] or "").endswith(".machine-b.jsonl")]
    assert {(f["kind"], f["query"]) for f in from_b} == {("hit", QUESTION)}, feedback
    assert {f["node_id"] for f in from_b} == {
        r["node_id"] for r in json.loads(out.stdout) if not r["node_id"].startswith("raw_")
    }
    assert "lake rebuilt: no" in _memctl(a, "materialize", "--quiet").stdout  # A sees B's build as current
    out = json.loads(_memctl(a, "recall", "football club", "--tenant", "demo", "--json", "--no-log").stdout)
    assert any("joined the Riverside football club" in c["excerpt"] for r in out for c in r["citations"])

    # A corrupt blob in the bucket: verify quarantines it there, and the next materialize re-puts it — here the one a
    # forget request runs (one lake build for both: issue 18, the suite's time). Forgetting works through the bucket:
    # the request, the tombstones and the deletions are objects there.
    objects = _objects(client, bucket, "team/lake/")
    key = next(k for k in sorted(objects) if k.startswith("raw/research/") and k.endswith(".blob.zst"))
    client.put_object(Bucket=bucket, Key=f"team/lake/{key}", Body=b"not zstd")
    report = json.loads(_memctl(a, "verify", "--json", code=1).stdout)  # 1: corruption was found
    assert [c["path"] for c in report["corrupt"]] == [key] and report["reingest"] == ["research/garden_club.json"]
    assert list(_objects(client, bucket, "team/lake/quarantine/")) == [key]

    forgot = _memctl(b, "forget", "--tenant", "demo", "--conv", "late", "--reason", "test", "--quiet")
    assert "1 messages" in forgot.stdout and "1 raw blobs deleted" in forgot.stdout, forgot.stdout
    after = _objects(client, bucket, "team/lake/")
    assert [k for k in after if k.startswith("forget/") and k.endswith(".json")]
    assert [k for k in after if k.startswith("raw/demo/") and k.endswith(".tomb")]
    out = json.loads(_memctl(a, "recall", "football club", "--tenant", "demo", "--json", "--no-log").stdout)
    assert not any("joined the Riverside football club" in c["excerpt"] for r in out for c in r["citations"])
    assert after[key] == objects[key]  # the quarantined blob is back, the same bytes
