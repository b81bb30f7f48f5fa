"""Scale-out: `memctl materialize` on the dask executor (a LocalCluster of 2 worker processes).

A 5-file inbox (each of five formats once, three tenants), built from the sample logs, goes through the
default executor (`auto`: so small an inbox runs in-process), the module's one reference; then
through `auto` with its threshold at 0, so its files fan out onto a LocalCluster of 2 workers. The per-file runs
must land on both workers and overlap in time, and the lake's Parquet tables, manifests and raw blobs must be the
same bytes as the in-process run's.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import dagster as dg
import pytest

from assets.run import WORKER_TAG
from tests.test_reliability import lake_fingerprint

pytestmark = pytest.mark.scale

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "data" / "inbox"
N_FILES = 5  # each format once: both workers take a file at once, so their runs overlap; each costs a Dagster run
TENANTS = ("demo", "research", "team")
FORMATS = ("transcript", "jsonl", "whatsapp", "qq", "locomo")


def _turns() -> list[tuple[str, str]]:
    """(speaker, text) of the English and Chinese sample logs, in file order."""
    en = [
        line.split("] ", 1)[1].split(": ", 1)
        for line in (SAMPLES / "demo" / "weekend_en.txt").read_text("utf-8").splitlines()
        if line.strip()
    ]
    zh = [
        (r["speaker"], r["text"])
        for r in map(json.loads, (SAMPLES / "demo" / "family_zh.jsonl").read_text("utf-8").splitlines())
        if r
    ]
    return [(s, t) for s, t in en + zh]


def _file(i: int, turns: list[tuple[str, str]]) -> tuple[str, bytes]:
    """Inbox file number i: the sample turns rotated by i plus one line of its own, in format i % 5."""
    k = i % len(turns)
    lines = turns[k:] + turns[:k] + [("Caroline", f"Meetup number {i} is at Riverside Park on Saturday.")]
    start = datetime(2024, 3, 1, 9, 0) + timedelta(days=i)
    stamps = [start + timedelta(minutes=3 * n) for n in range(len(lines))]
    fmt = FORMATS[i % len(FORMATS)]
    name = f"{TENANTS[i % len(TENANTS)]}/chat_{i:02d}"
    if fmt == "transcript":
        body = "".join(f"[{t:%Y-%m-%d %H:%M:%S}] {s}: {x}\n" for (s, x), t in zip(lines, stamps))
        return f"{name}.txt", body.encode()
    if fmt == "jsonl":
        body = "".join(
            json.dumps(
                {"conv_id": f"c{i}", "msg_id": f"m{n}", "speaker": s, "ts": t.isoformat(), "text": x},
                ensure_ascii=False,
            )
            + "\n"
            for n, ((s, x), t) in enumerate(zip(lines, stamps))
        )
        return f"{name}.jsonl", body.encode()
    if fmt == "whatsapp":
        body = "".join(f"[{t:%d/%m/%Y, %H:%M:%S}] {s}: {x}\n" for (s, x), t in zip(lines, stamps))
        return f"{name}.txt", body.encode()
    if fmt == "qq":
        rule = "=" * 64
        head = f"消息记录（此消息记录为文本格式，不支持重新导入）\n\n{rule}\n消息分组:我的好友\n{rule}\n消息对象:群{i}\n{rule}\n\n"
        body = "".join(f"{t:%Y-%m-%d %H:%M:%S} {s}({10000 + len(s)})\n{x}\n\n" for (s, x), t in zip(lines, stamps))
        return f"{name}.txt", ("\ufeff" + head + body).encode()
    sample = json.loads((SAMPLES / "research" / "garden_club.json").read_text("utf-8"))[0]
    conv = sample["conversation"]
    conv["session_1"] = [*conv["session_1"], {"speaker": conv["speaker_a"], "dia_id": "D1:99", "text": lines[-1][1]}]
    return f"{name}.json", json.dumps([{**sample, "sample_id": f"garden-{i}"}], ensure_ascii=False).encode()


def scale_inbox(n: int = N_FILES) -> dict[str, bytes]:
    """n small chat files in five formats and three tenants (deterministic)."""
    turns = _turns()
    return dict(_file(i, turns) for i in range(n))


def _root(path: Path, files: dict[str, bytes]) -> Path:
    for rel, data in files.items():
        (path / "inbox" / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / "inbox" / rel).write_bytes(data)
    return path


def _users_environ(mp: pytest.MonkeyPatch) -> None:
    """No MEMCTL_* variable and no DAGSTER_HOME, as in a user's shell. `materialize()` sets DAGSTER_HOME to the
    instance of the lake it builds, which pytest does not see: set it here first, so that the test's end puts it back
    as it was (usually unset) instead of leaving the lake's to the modules after this one."""
    for k in [k for k in os.environ if k.startswith("MEMCTL_")]:
        mp.delenv(k)
    mp.setenv("DAGSTER_HOME", "")
    mp.delenv("DAGSTER_HOME")


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The scale inbox built by the default executor (`auto`, two workers) as `memctl materialize` runs it, in this
    process (the CLI's own path is the rest of the suite's; a CLI process here cost a cold start, ~10 CPU-s):
    the data dir whose tables and blobs the cluster's build must equal."""
    from assets.run import ExecutorConfig, materialize
    from raw_store.lake import Lake

    root = _root(tmp_path_factory.mktemp("reference"), scale_inbox())
    with pytest.MonkeyPatch.context() as mp:
        _users_environ(mp)
        mp.setenv("MEMCTL_WORKERS", "2")
        summary = materialize(Lake(root), progress=False, executor=ExecutorConfig.from_env())
    assert summary.ok
    return root


def test_scale_inbox_covers_formats_and_tenants() -> None:
    from raw_store.readers import detect_format

    files = scale_inbox()
    assert len(files) == N_FILES and scale_inbox() == files
    assert {rel.split("/")[0] for rel in files} == set(TENANTS)
    assert {detect_format(data, rel) for rel, data in files.items()} == {
        "transcript",
        "canonical_jsonl",
        "whatsapp",
        "qq",
        "locomo_json",
    }


def test_the_executor_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from assets.run import ExecutorConfig

    for k in [k for k in os.environ if k.startswith("MEMCTL_")]:
        monkeypatch.delenv(k)
    assert ExecutorConfig.from_env() == ExecutorConfig(kind="auto", workers=os.cpu_count() or 1)
    monkeypatch.setenv("MEMCTL_EXECUTOR", "Dask")
    monkeypatch.setenv("MEMCTL_WORKERS", "2")
    monkeypatch.setenv("MEMCTL_DASK_SCHEDULER", "tcp://10.0.0.5:8786")
    assert ExecutorConfig.from_env() == ExecutorConfig(kind="dask", workers=2, scheduler="tcp://10.0.0.5:8786")
    for name, value in (("MEMCTL_EXECUTOR", "threads"), ("MEMCTL_WORKERS", "0")):
        monkeypatch.setenv(name, value)
        with pytest.raises(ValueError, match=name):
            ExecutorConfig.from_env()
        monkeypatch.delenv(name)


def test_auto_executor_fans_out_onto_a_cluster_only_when_the_input_is_worth_one(
    reference: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default executor: a small inbox runs in this process; past AUTO_PARALLEL_BYTES the files go to a
    LocalCluster of one worker process per core (the dask executor's own path, which MEMCTL_EXECUTOR=dask takes
    for any input: tests/test_postgres_storage.py runs it through the CLI). The file runs land on both workers
    and overlap in time, and the lake is the same bytes. (One cluster build here: a second, through the CLI with
    MEMCTL_EXECUTOR=dask, proved the same things again for a fifth of the suite's CPU on scale-out.)"""
    from assets import run
    from assets.run import ExecutorConfig, materialize
    from raw_store.lake import Lake

    _users_environ(monkeypatch)
    # small: the reference, built with the default executor and two workers. Every file ran in that process: a file
    # run on a dask worker carries WORKER_TAG.
    small = reference
    with dg.DagsterInstance.from_config(str(small / "dagster_home")) as instance:
        runs = [r.dagster_run for r in instance.get_run_records()]
    assert len([r for r in runs if "dagster/partition" in r.tags]) == N_FILES
    assert not [r.tags[WORKER_TAG] for r in runs if WORKER_TAG in r.tags]

    monkeypatch.setattr(run, "AUTO_PARALLEL_BYTES", 0)
    big = _root(tmp_path / "big", scale_inbox())
    summary = materialize(Lake(big), progress=False, executor=ExecutorConfig(kind="auto", workers=2))
    assert summary.ok and summary.lake_rebuilt
    assert len({o.worker.split(" pid=")[0] for o in summary.placements.values()}) == 2
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    fingerprint = lake_fingerprint(big)
    assert fingerprint == lake_fingerprint(small)
    assert sum(p.startswith("lake/parts/") for p in fingerprint) >= N_FILES
    assert any(p.startswith("raw/") for p in fingerprint)

    # where the file runs went, as their Dagster run records tell
    with dg.DagsterInstance.from_config(str(big / "dagster_home")) as instance:
        records = [r for r in instance.get_run_records() if WORKER_TAG in r.dagster_run.tags]
    assert len(records) == N_FILES and all(r.dagster_run.status == dg.DagsterRunStatus.SUCCESS for r in records)
    spans = [(r.dagster_run.tags[WORKER_TAG], r.start_time, r.end_time) for r in records]
    addresses = {w.split(" pid=")[0] for w, _, _ in spans}
    pids = {w.split(" pid=")[1] for w, _, _ in spans}
    assert len(addresses) == 2 and len(pids) == 2 and str(os.getpid()) not in pids, spans
    # in parallel, not only spread: a run on one worker overlaps a run on the other
    assert any(wa != wb and a0 < b1 and b0 < a1 for wa, a0, a1 in spans for wb, b0, b1 in spans)


def test_a_run_where_sigint_is_ignored_leaves_sigterm_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`memctl materialize &` in a script runs with SIGINT ignored (as does a pytest-xdist worker). Dagster's in-process
    run, restoring SIGINT's handler, also set SIGTERM to it, so SIGTERM was ignored from the first run on: `kill`
    no longer stopped memctl, and the processes it started next inherited that (dask workers; Dagster's compute-log
    `tail`, which then outlived every run by Dagster's 30 s wait for it: 60 s a file run on this module's cluster)."""
    from assets.run import ExecutorConfig, materialize
    from raw_store.lake import Lake

    _users_environ(monkeypatch)
    rel, data = next(iter(scale_inbox(1).items()))
    root = _root(tmp_path / "one", {rel: data})
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        summary = materialize(Lake(root), progress=False, executor=ExecutorConfig(kind="in_process"))
        assert summary.ok and summary.lake_rebuilt
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
        ignored = subprocess.run(  # what a process started now inherits: its SigIgn mask, SIGTERM's bit (15)
            ["sh", "-c", "grep SigIgn /proc/self/status"], capture_output=True, text=True, check=True
        ).stdout.split()[1]
        assert not int(ignored, 16) & (1 << (signal.SIGTERM - 1)), ignored
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)


_POOL = "import pyarrow as pa; print(pa.default_memory_pool().backend_name)"


@pytest.mark.parametrize("chosen", [None, "system"])
def test_memctl_processes_allocate_arrow_memory_with_jemalloc_unless_told_otherwise(chosen: str | None) -> None:
    """Arrow's own default pool (mimalloc) kept the pages the lake-wide steps freed (a 2-message append to a 100k lake
    peaked at 2.71 GB, 2.19 GB with jemalloc): a process that imports memctl's assets, and every process it starts
    (workers, subprocesses), allocates with jemalloc, also where pyarrow was imported first. A pool the user names
    in $ARROW_DEFAULT_MEMORY_POOL is kept."""
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    if chosen:
        env["ARROW_DEFAULT_MEMORY_POOL"] = chosen
    script = f"import pyarrow, assets.cli, subprocess, sys; {_POOL}; subprocess.run([sys.executable, '-c', {_POOL!r}])"
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == [chosen or "jemalloc"] * 2, out


@pytest.mark.parametrize("told", [None, "1"])
def test_a_file_run_in_this_process_annotates_on_every_core_then_lets_the_workers_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, told: str | None
) -> None:
    """A file run in `memctl materialize`'s own process (a lone file: a big export dropped alone) spreads its NLP over
    one annotate process per core (r2g.nlp.file_run_workers, at most 4), or as many as $MEMCTL_NLP_WORKERS says; the
    pool is let go before the file's graph step, and the annotations are the ones one process gives."""
    from assets import ingest, run
    from assets.run import ExecutorConfig, materialize
    from r2g import extract, nlp
    from r2g.pipeline import annotations_from_table
    from r2g.schema import ANNOTATIONS
    from raw_store.frames import usable_cores
    from raw_store.lake import Lake, read_table
    from raw_store.schema import MESSAGES

    _users_environ(monkeypatch)
    if told:
        monkeypatch.setenv("MEMCTL_NLP_WORKERS", told)
    monkeypatch.setattr(nlp, "PARALLEL_MIN_TEXTS", 4)  # this file's 12 texts are "many"
    rows = [
        {"conv_id": "c1", "speaker": s, "ts": f"2024-03-0{1 + i // 6} 10:{i:02d}:00", "text": t}
        for i, (s, t) in enumerate(
            [("Ann", f"I met Mel at the climbing gym on day {k}.") for k in range(6)]
            + [("小明", f"第{k}天我们在公园里踢足球。") for k in range(6)]
        )
    ]
    root = _root(tmp_path, {"demo/big_export.jsonl": "".join(json.dumps(r) + "\n" for r in rows).encode()})
    pools: dict[str, list[object]] = {"graph step": [], "lake run": []}  # the annotate pool as each starts
    lake_run = run._InProcess.lake
    monkeypatch.setattr(
        ingest, "build_graph", lambda *a: pools["graph step"].append(nlp._pool_state) or extract.build_graph(*a)
    )
    monkeypatch.setattr(
        run._InProcess,
        "lake",
        lambda self, full=False: pools["lake run"].append(nlp._pool_state) or lake_run(self, full),
    )

    summary = materialize(Lake(root), progress=False, executor=ExecutorConfig.from_env())
    assert summary.ok and summary.ran == ["demo/big_export.jsonl"]
    assert pools == {"graph step": [None], "lake run": [None]}
    with dg.DagsterInstance.get() as instance:
        meta = instance.get_latest_materialization_event(dg.AssetKey("file_annotations")).asset_materialization.metadata
    assert meta["cache_misses"].value == 12
    assert meta["nlp_processes"].value == (int(told) if told else min(4, usable_cores()))
    part = Lake(root).part_dir("demo/big_export.jsonl")
    stored = annotations_from_table(read_table(part / "annotations.parquet", ANNOTATIONS))
    messages = read_table(part / "messages.parquet", MESSAGES)
    alone, _ = nlp.annotate(messages.column("text").to_pylist(), messages.column("lang").to_pylist(), workers=1)
    by_sha = dict(zip(messages.column("text_sha").to_pylist(), alone))
    assert {sha: a.to_json() for sha, a in stored.items()} == {sha: a.to_json() for sha, a in by_sha.items()}


def test_the_auto_executor_keeps_a_file_holding_most_of_the_input_in_this_process() -> None:
    """`auto` fans files out to a cluster when there are two or more, 1 MiB of them, and none holds LONE_FILE_SHARE
    of the bytes: a big export beside a few small files runs here, its NLP on every core, not on one worker's one."""
    from assets.run import AUTO_PARALLEL_BYTES, LONE_FILE_SHARE, fans_out

    mib = AUTO_PARALLEL_BYTES
    assert fans_out([mib, mib, mib], 2)
    assert not fans_out([mib, mib, mib], 1)  # one worker
    assert not fans_out([3 * mib], 2)  # one file
    assert not fans_out([mib // 4, mib // 4], 2)  # too little to start a cluster for
    small = [2 * mib, mib]  # beside a big file of 8 MiB (0.73 of the input) or of 6 MiB (0.67)
    assert LONE_FILE_SHARE == 0.7 and not fans_out([8 * mib, *small], 4) and fans_out([6 * mib, *small], 4)
    # a rule change redoes the big file's graph step only: no NLP to spread, so the files still fan out
    assert fans_out([8 * mib, *small], 4, [False, True, True]) and not fans_out([8 * mib, *small], 4, [True] * 3)
