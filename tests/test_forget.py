"""Forgetting end to end (seed 004 §6.4, §24): `memctl forget` by conversation, speaker, time window, node, topic
and whole tenant, each through a real materialization; afterwards recall, SQL and the raw store return nothing of
it, the audit row proves what went, and the next materialization does not bring it back from the inbox.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import sqlite3
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pytest

from assets.cli import main
from jobs.forget import ForgetRequest, ForgetRules, load_requests
from jobs.integrity import forgotten_stay_forgotten
from r2g.lake_graph import read_lake_table
from r2g.schema import ANNOTATIONS, AUDIT, EDGES, NODES
from raw_store.cas import RawStore
from raw_store.errors import BlobForgotten
from raw_store.lake import Lake
from raw_store.readers import Message
from raw_store.tables import read_parts
from recall.engine import recall
from recall.store import tenant_sql
from recall.tenant_index import tenant_dir

ROOT = Path(__file__).resolve().parent.parent
EXTRA = [  # a second demo conversation with a speaker and a day of its own
    {
        "conv_id": "trip",
        "speaker": "Kai",
        "ts": "2024-05-01 09:00:00",
        "text": "Kai booked the ferry to Bergen for the fjord trip.",
    },
    {"conv_id": "trip", "speaker": "Ann", "ts": "2024-05-01 09:05:00", "text": "Great, I will pack the red tent."},
    {
        "conv_id": "trip",
        "speaker": "Kai",
        "ts": "2024-05-09 18:00:00",
        "text": "The lighthouse keeper in Bergen sold us smoked salmon.",
    },
]


def _cli(lake: Lake, *args: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(["--data", str(lake.root), *args])
    return rc, out.getvalue()


def _sql(lake: Lake, tenant: str, query: str) -> list[tuple]:
    con = tenant_sql(lake, tenant)
    try:
        return con.execute(query).fetchall()
    finally:
        con.close()


def _audit(lake: Lake) -> dict[str, dict]:
    return {r["scope"]: r for r in read_lake_table(lake, "audit").to_pylist()}


def _texts(lake: Lake, tenant: str) -> list[str]:
    return [r[0] for r in _sql(lake, tenant, "SELECT text FROM messages")]


def _recall_dump(lake: Lake, query: str, tenant: str) -> str:
    return json.dumps([r.to_json() for r in recall(query, tenant, k=10, lake=lake)], ensure_ascii=False)


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("forget") / "data"
    shutil.copytree(ROOT / "data" / "inbox", root / "inbox")
    (root / "inbox" / "demo" / "trip.jsonl").write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in EXTRA), "utf-8"
    )
    with pytest.MonkeyPatch.context() as env:
        env.setenv("MEMCTL_DATA", str(root))
        env.setenv("DAGSTER_HOME", str(root / "dagster_home"))
        lk = Lake(root)
        assert _cli(lk, "materialize", "--quiet")[0] == 0
        yield lk


def test_forget_a_conversation(lake: Lake) -> None:
    store = RawStore(lake.root)
    family = [r for r in read_lake_table(lake, "messages").to_pylist() if r["conv_id"] == "family"]
    chunks = {r["id"]: r for r in read_lake_table(lake, "raw_chunks").to_pylist()}
    blob = chunks[family[0]["raw_id"]]
    assert "小明在公园里踢足球" in _recall_dump(lake, "小明在哪里踢足球", "demo")

    rc, out = _cli(lake, "forget", "--tenant", "demo", "--conv", "family", "--reason", "user request", "--quiet")
    assert rc == 0 and "5 messages" in out
    # recall, SQL and the raw store hold nothing of it
    assert "踢足球" not in _recall_dump(lake, "小明在哪里踢足球", "demo")
    assert "公园" not in "".join(_texts(lake, "demo"))
    assert _sql(lake, "demo", "SELECT count(*) FROM nodes WHERE conv_id = 'family'") == [(0,)]
    with pytest.raises(BlobForgotten):
        RawStore(lake.root).read("demo", blob["path"], blob["sha256"])
    assert not (lake.root / blob["path"]).exists()
    # the audit row is the deletion proof; the tombstone says when and why
    row = _audit(lake)["conv"]
    assert row["messages"] == 5 and row["nodes"] and row["edges"] > 0 and row["blobs"] == [blob["id"]]
    assert row["reason"] == "user request" and row["index_entries"] >= len(row["nodes"])
    tombs = _sql(lake, "demo", "SELECT raw_id, reason FROM tombstones")
    assert (blob["id"], f"forget {row['request_id']}: user request") in tombs
    assert store.verify("demo").ok


def test_the_inbox_does_not_bring_it_back(lake: Lake) -> None:
    rc, out = _cli(lake, "materialize", "--quiet")
    assert rc == 0 and "ingested now: 0" in out
    # the source file changes (a new line in the forgotten conversation): re-ingested, still forgotten
    with (lake.inbox / "demo" / "family_zh.jsonl").open("a", encoding="utf-8") as f:
        f.write(
            json.dumps(
                {"conv_id": "family", "speaker": "妈妈", "ts": "2024-03-04 10:00:00", "text": "小明又去公园踢足球了。"},
                ensure_ascii=False,
            )
            + "\n"
        )
    rc, out = _cli(lake, "materialize", "--quiet")
    assert rc == 0 and "ingested now: 1" in out
    assert not any("公园" in t for t in _texts(lake, "demo"))
    assert "踢足球了" not in _recall_dump(lake, "小明 公园 踢足球", "demo")
    manifest = next(
        json.loads(p.read_text())
        for p in lake.parts.glob("*/manifest.json")
        if json.loads(p.read_text())["source_file"] == "demo/family_zh.jsonl"
    )
    assert manifest["forgotten"] == 6 and manifest["messages"] == 3


def test_forget_a_speaker_and_a_window(lake: Lake) -> None:
    assert "ferry" in _recall_dump(lake, "ferry Bergen", "demo")
    rc, _ = _cli(lake, "forget", "--tenant", "demo", "--speaker", "kai", "--quiet")  # case-insensitive
    assert rc == 0
    assert "ferry" not in _recall_dump(lake, "ferry Bergen", "demo")
    assert "salmon" not in " ".join(_texts(lake, "demo")) and "red tent" in " ".join(_texts(lake, "demo"))
    rc, _ = _cli(lake, "forget", "--tenant", "demo", "--from", "2024-05-01", "--to", "2024-05-01", "--quiet")
    assert rc == 0 and "red tent" not in " ".join(_texts(lake, "demo"))
    assert _audit(lake)["window"]["messages"] == 1


def test_forget_a_node_and_a_topic(lake: Lake) -> None:
    facts = _sql(lake, "demo", "SELECT id, title FROM nodes WHERE type = 'Fact' ORDER BY id")
    fact_id, _ = facts[0]
    rc, _ = _cli(lake, "forget", "--tenant", "demo", "--node", fact_id, "--quiet")
    assert rc == 0
    assert _sql(lake, "demo", f"SELECT count(*) FROM nodes WHERE id = '{fact_id}'") == [(0,)]
    assert _sql(lake, "demo", f"SELECT count(*) FROM edges WHERE src = '{fact_id}' OR dst = '{fact_id}'") == [(0,)]
    assert fact_id not in _recall_dump(lake, facts[0][1], "demo")
    # its message stays: the node was forgotten, not the turn; so its blob is still cited and kept
    assert _audit(lake)["node"]["blobs"] == []

    concepts = _sql(
        lake,
        "demo",
        "SELECT c.id, count(*) FROM nodes c JOIN edges e ON e.dst = c.id AND e.type = 'ABOUT' "
        "WHERE c.type = 'Concept' GROUP BY c.id ORDER BY count(*) DESC, c.id",
    )
    topic, n_about = concepts[0]
    about = {r[0] for r in _sql(lake, "demo", f"SELECT src FROM edges WHERE type = 'ABOUT' AND dst = '{topic}'")}
    rc, _ = _cli(lake, "forget", "--tenant", "demo", "--topic", topic, "--quiet")
    assert rc == 0
    left = {r[0] for r in _sql(lake, "demo", "SELECT id FROM nodes")}
    assert topic not in left and not (about & left) and len(about) == n_about
    assert set(_audit(lake)["topic"]["nodes"]) >= about | {topic}


def test_forget_a_whole_tenant(lake: Lake) -> None:
    assert recall("garden", "research", k=3, lake=lake)
    rc, out = _cli(lake, "forget", "--tenant", "research", "--all", "--reason", "right to be forgotten", "--quiet")
    assert rc == 0
    for table in ("nodes", "edges", "messages", "raw_chunks"):
        assert _sql(lake, "research", f"SELECT count(*) FROM {table}") == [(0,)], table
    assert not list((lake.raw / "research").rglob("*.blob.zst"))
    assert list((lake.raw / "research").rglob("*.tomb"))
    assert not tenant_dir(lake.index_dir, "research").exists()
    rc = main(["--data", str(lake.root), "recall", "garden", "--tenant", "research"])
    assert rc == 2  # an unknown tenant now
    assert "research" not in {r[0] for r in _sql(lake, "demo", "SELECT tenant FROM tenants")}
    # the other tenant is untouched
    assert recall("football park", "demo", k=3, lake=lake)


def test_nothing_forgotten_is_back_and_the_nlp_cache_is_purged(lake: Lake) -> None:
    nodes, edges = read_lake_table(lake, "nodes"), read_lake_table(lake, "edges")
    audit = read_lake_table(lake, "audit")
    named = ForgetRules(load_requests(lake)).node_ids
    assert audit.num_rows == 6 and forgotten_stay_forgotten(audit, nodes, edges, named).passed
    assert not forgotten_stay_forgotten(audit, nodes.slice(0, 0), edges, named).failures
    import hashlib

    sha = hashlib.sha256("小明在公园里踢足球，晚饭前会回来。".encode()).hexdigest()
    con = sqlite3.connect(lake.cache / "nlp.sqlite")
    try:  # the NLP index holds no row of the forgotten text …
        assert con.execute("SELECT count(*) FROM seen WHERE sha = ?", [bytes.fromhex(sha)]).fetchone()[0] == 0
        assert con.execute("SELECT count(*) FROM seen").fetchone()[0] > 0
    finally:
        con.close()
    # … and no partition's annotations hold it any more (the files were re-ingested without it)
    assert sha not in set(read_parts(lake, "annotations", ANNOTATIONS, ["text_sha"]).column("text_sha").to_pylist())
    assert len(load_requests(lake)) == 6


def test_bad_requests_are_clear_errors(lake: Lake, capsys: pytest.CaptureFixture) -> None:
    assert main(["--data", str(lake.root), "forget", "--tenant", "demo", "--conv", "nope", "--quiet"]) == 2
    assert "no message in conversation 'nope'" in capsys.readouterr().err
    assert main(["--data", str(lake.root), "forget", "--tenant", "demo", "--node", "n_missing", "--quiet"]) == 2
    assert main(["--data", str(lake.root), "forget", "--tenant", "ghost", "--all", "--quiet"]) == 2
    assert main(["--data", str(lake.root), "forget", "--tenant", "demo", "--to", "2024-01-01", "--all"]) == 2


def test_new_lines_may_name_what_a_forgotten_conversation_named(lake: Lake) -> None:
    # (last of the lake's steps: one more inbox file would make every forget above re-run one more file)
    # a new conversation names the places of the forgotten one: its Entities come back from the new line (their ids
    # are hashes of their names), which is new content, not the forgotten one — the build must not be blocked
    gone = set(_audit(lake)["conv"]["nodes"])
    (lake.inbox / "demo" / "later.jsonl").write_text(
        json.dumps(
            {
                "conv_id": "later",
                "speaker": "爸爸",
                "ts": "2024-03-09 10:00:00",
                "text": "我下周去北京看奶奶，顺便去公园。",
            },
            ensure_ascii=False,
        )
        + "\n",
        "utf-8",
    )
    rc, out = _cli(lake, "materialize", "--quiet")
    assert rc == 0 and "ingested now: 1" in out and "lake rebuilt: yes" in out, out
    back = {r[0]: r[1] for r in _sql(lake, "demo", "SELECT id, title FROM nodes")}
    assert gone & set(back), "the new line should re-derive some node of the forgotten conversation"
    nodes, edges = read_lake_table(lake, "nodes"), read_lake_table(lake, "edges")
    named = ForgetRules(load_requests(lake)).node_ids
    assert forgotten_stay_forgotten(read_lake_table(lake, "audit"), nodes, edges, named).passed
    # what comes back cites the new line only: recall finds it, and nothing of the forgotten conversation
    dump = _recall_dump(lake, "北京 奶奶 公园", "demo")
    assert "顺便去公园" in dump and "踢足球" not in dump and "饺子" not in dump


def _graph(nodes: list[tuple[str, str, list[str]]], edges: list[tuple[str, str, str]]) -> tuple[pa.Table, pa.Table]:
    """(tenant, id, cited raw ids) nodes and (id, src, dst) edges of tenant t, every other column null."""
    n = [
        {"tenant": t, "id": i, "raw_refs": [{"raw_id": r, "offset": 0, "length": 1} for r in refs]}
        for t, i, refs in nodes
    ]
    e = [{"tenant": "t", "id": i, "src": s, "dst": d} for i, s, d in edges]
    return pa.Table.from_pylist(n, schema=NODES), pa.Table.from_pylist(e, schema=EDGES)


def test_the_check_tells_new_content_from_forgotten_content() -> None:
    audit = pa.Table.from_pylist(
        [
            {"request_id": "f_conv", "tenant": "t", "scope": "conv", "nodes": ["day", "place"], "blobs": ["raw_old"]},
            {"request_id": "f_node", "tenant": "t", "scope": "node", "nodes": ["fact"], "blobs": []},
        ],
        schema=AUDIT,
    )
    named = {("t", "fact")}

    def problems(nodes, edges) -> list[tuple[str, str]]:
        outcome = forgotten_stay_forgotten(audit, *_graph(nodes, edges), named)
        assert outcome.passed == (outcome.failures == 0) and outcome.checked == 4
        return sorted((x["id"], x["problem"]) for x in outcome.examples)

    # the conversation's day comes back from a new line: new content, and an edge may point at it
    assert problems([("t", "day", ["raw_new"]), ("t", "x", [])], [("e1", "x", "day")]) == []
    # … but not citing the blob that request deleted, nor in another tenant's name
    assert problems([("t", "day", ["raw_new", "raw_old"])], []) == [("day", "node back citing a deleted blob")]
    assert problems([("u", "day", ["raw_old"])], []) == []
    # a node a node request names never comes back, whatever it cites, and no edge may touch it
    assert problems([("t", "fact", ["raw_new"])], []) == [("fact", "node back")]
    assert problems([("t", "x", [])], [("e2", "x", "fact")]) == [("e2", "edge to a forgotten node")]


def test_rules_cover_by_scope_case_and_window() -> None:
    t = datetime(2024, 5, 1, 12)
    rules = ForgetRules(
        [
            ForgetRequest("a", "speaker", "Kai"),
            ForgetRequest("a", "window", None, start=datetime(2024, 5, 1), end=datetime(2024, 5, 1, 23, 59, 59)),
            ForgetRequest("b", "conv", "c1"),
            ForgetRequest("c", "node", "n1", nodes=("n1",), turns=(("c9", "m9"),)),
        ]
    )

    def msg(tenant: str, conv: str = "c0", msg_id: str = "m0", speaker: str = "Ann", ts: datetime | None = None):
        return Message(tenant, conv, msg_id, 0, speaker, "user", ts, "x", None, "f", 1, "canonical_jsonl")

    assert rules.message(msg("a", speaker=" KAI ")) and rules.message(msg("a", ts=t))
    assert rules.message(msg("a", ts=datetime(2024, 5, 2))) is None and rules.message(msg("a")) is None
    assert rules.message(msg("b", conv="c1")) and rules.message(msg("a", conv="c1")) is None  # per tenant
    assert rules.message(msg("c", conv="c9", msg_id="m9")) and rules.message(msg("c", conv="c9")) is None
