"""End to end: sample inbox (+ bad input) → `materialize` all assets through Dagster → cited recall.

One real run per module (real spaCy, real DuckDB file, real igraph, real Dagster
instance); the tests then read what it produced.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from assets.cli import main
from assets.run import materialize
from r2g.lake_graph import read_lake_table
from raw_store.lake import Lake, scan_inbox, value_counts
from recall.tenant_index import recall_dir

ROOT = Path(__file__).resolve().parent.parent
EN_LINE = "Oh, and my neighbour Xiaoming played football in Riverside Park on Saturday."
ZH_LINE = "小明在公园里踢足球，晚饭前会回来。"


def _fingerprint(lake: Lake) -> dict[str, str]:
    return {
        p.relative_to(lake.root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(lake.lake.rglob("*.parquet"))
    }


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("memctl") / "data"
    shutil.copytree(ROOT / "data" / "inbox", root / "inbox")
    messy = root / "inbox" / "messy"
    messy.mkdir()
    (messy / "half_good.jsonl").write_text(
        '{"conv_id": "c1", "speaker": "Ann", "ts": "2024-01-02 10:00:00", "text": "The backup server is in Oslo."}\n'
        '{"conv_id": "c1", "speaker": "Bob", "ts": "2024-01-02 10:01:00", "text": "broken line\n',
        "utf-8",
    )
    (messy / "latin1.txt").write_bytes("Zoë: café ünïcode".encode("latin-1"))
    (messy / "empty.txt").write_bytes(b"")
    saved = {k: os.environ.get(k) for k in ("MEMCTL_DATA", "DAGSTER_HOME", "MEMCTL_VECTORS")}
    os.environ["MEMCTL_VECTORS"] = "static"  # stage B's vectors built (opt-in), for test_recall_gets_vector_hits
    os.environ["MEMCTL_DATA"] = str(root)
    os.environ["DAGSTER_HOME"] = str(root / "dagster_home")
    lk = Lake(root)
    first = materialize(lk, progress=False)
    yield lk, first
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def test_first_run_builds_everything(lake) -> None:
    lk, summary = lake
    assert summary.ok, (summary.failed, summary.lake_failed)
    assert summary.lake_rebuilt and len(summary.ran) == summary.files == 6
    # no lake-wide copies: the partitions' files, the merge and consolidation overlays, the state table
    assert not any(lk.table(name).exists() for name in ("raw_chunks", "messages", "nodes", "edges", "rejects"))
    for name, rows in (("raw_chunks", 1), ("messages", 1), ("nodes", 1), ("edges", 1), ("rejects", 1)):
        assert read_lake_table(lk, name).num_rows >= rows, name
    assert (lk.lake / "consolidated" / "state.parquet").exists() and (lk.lake / "r2g" / "nodes.parquet").exists()
    assert lk.duckdb_path.exists() and any(recall_dir(lk.index_dir).iterdir())


def test_bad_input_becomes_rejects_while_the_rest_lands(lake) -> None:
    lk, _ = lake
    rejects = read_lake_table(lk, "rejects").to_pylist()
    by_file = {(r["source_file"], r["reason"]) for r in rejects}
    assert ("messy/half_good.jsonl", "E_JSON_PARSE") in by_file
    assert ("messy/latin1.txt", "E_READ_UTF8") in by_file
    assert ("messy/empty.txt", "E_READ_EMPTY") in by_file
    assert all(r["raw_id"] for r in rejects)  # the rejected bytes are kept in the CAS
    texts = read_lake_table(lk, "messages").column("text").to_pylist()
    assert "The backup server is in Oslo." in texts


@pytest.mark.parametrize(
    "query, line, msg_id",
    [
        ("Where did Xiaoming play football?", EN_LINE, "L7"),
        ("小明在哪里踢足球？", ZH_LINE, "m1"),
    ],
)
def test_recall_cites_the_original_line(lake, query: str, line: str, msg_id: str) -> None:
    from recall import recall

    lk, _ = lake
    results = recall(query, "demo", k=5, lake=lk)
    cited = [(c.msg_id, c.excerpt) for r in results[:3] for c in r.citations]
    assert (msg_id, line) in cited, cited


@pytest.mark.parametrize(
    "query, msg_id",
    [
        ("Which sport did the neighbour do at the weekend?", "L7"),  # "sport", "weekend": not in the line
        ("小明周末做什么运动？", "m1"),  # 运动: not in 小明在公园里踢足球
    ],
)
def test_recall_gets_vector_hits(lake, query: str, msg_id: str) -> None:
    """The static tables set-up distilled embed the sample's turns at build time ($MEMCTL_VECTORS=static), and with stage B on
    (`--vectors`) a question in other words than the line finds it through its vector."""
    from recall import RecallConfig, recall

    lk, _ = lake
    trace: list = []
    results = recall(query, "demo", k=5, lake=lk, trace=trace, config=RecallConfig(vectors_enabled=True))
    stage = next(t for t in trace if t["stage"] == "vectors")
    assert stage["detail"]["state"] == "ok" and stage["n"] > 0, stage
    hit = [r for r in results if r.breakdown.get("vector", 0) > 0 and any(c.msg_id == msg_id for c in r.citations)]
    assert hit, [(r.title, r.breakdown) for r in results]


def test_recall_never_crosses_tenants(lake) -> None:
    from recall import recall

    lk, _ = lake
    for r in recall("Xiaoming football park tomato compost", "research", k=20, lake=lk):
        for c in r.citations:
            assert c.conv_id == "garden-club", c


def test_rerun_changes_no_byte_and_reannotates_nothing(lake) -> None:
    lk, _ = lake
    before = _fingerprint(lk)
    again = materialize(lk, progress=False)
    assert again.ok and again.ran == [] and not again.lake_rebuilt
    assert _fingerprint(lk) == before


def test_new_file_runs_only_its_partition_and_hits_the_nlp_cache(lake) -> None:
    lk, _ = lake
    shutil.copyfile(lk.inbox / "demo" / "weekend_en.txt", lk.inbox / "demo" / "weekend_copy.txt")
    summary = materialize(lk, progress=False)
    assert summary.ok and summary.ran == ["demo/weekend_copy.txt"] and summary.lake_rebuilt
    with dg.DagsterInstance.get() as instance:
        event = instance.get_latest_materialization_event(dg.AssetKey("file_annotations"))
    meta = event.asset_materialization.metadata
    assert event.asset_materialization.partition == "demo/weekend_copy.txt"
    assert meta["cache_misses"].value == 0 and meta["cache_hits"].value == 10


def _memctl(lk: Lake, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "MEMCTL_DATA": str(lk.root)}
    return subprocess.run(
        [sys.executable, "-m", "assets.cli", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )


def _memctl_here(lk: Lake, *args: str) -> subprocess.CompletedProcess:
    """`memctl --data <lake> *args` run by assets.cli.main in this process: its exit code and output, as _memctl
    gives them. The CLI as a process (startup, exit codes, pipes) is what the _memctl tests check."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(["--data", str(lk.root), *args])
        except SystemExit as e:  # argparse's own errors
            code = e.code if isinstance(e.code, int) else 1
    return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())


def test_cli_recall_json_contract(lake) -> None:
    lk, _ = lake
    out = _memctl(lk, "recall", "Where did Xiaoming play football?", "--tenant", "demo", "--json")
    assert out.returncode == 0, out.stderr
    results = json.loads(out.stdout)
    assert results and {"node_id", "type", "title", "score", "citations"} <= set(results[0])
    cites = [c for r in results for c in r["citations"]]
    assert cites and {"raw_id", "conv_id", "msg_id", "speaker", "ts", "excerpt"} <= set(cites[0])
    assert any(c["excerpt"] == EN_LINE and c["speaker"] == "Melanie" for c in cites)


def test_cli_recall_filters_and_the_search_memories_tool(lake) -> None:
    lk, _ = lake
    facts = _memctl_here(
        lk, "recall", "Xiaoming football", "--tenant", "demo", "--types", "Fact", "--json", "--budget-tokens", "300"
    )
    assert facts.returncode == 0, facts.stderr
    got = json.loads(facts.stdout)
    assert got and {r["type"] for r in got} == {"Fact"}
    # nothing of the sample logs is dated in 1999
    old = _memctl_here(lk, "recall", "Xiaoming football", "--tenant", "demo", "--until", "1999-12-31", "--json")
    assert old.returncode == 0 and json.loads(old.stdout) == []
    bad = _memctl_here(lk, "recall", "football", "--tenant", "demo", "--since", "last Tuesday")
    assert bad.returncode == 2 and "ISO-8601" in bad.stderr and "Traceback" not in bad.stderr
    tools = _memctl_here(lk, "tools")
    assert json.loads(tools.stdout)[0]["function"]["name"] == "search_memories"
    call = _memctl(lk, "tools", '{"query": "Where did Xiaoming play football?", "max_results": 3}', "--tenant", "demo")
    assert call.returncode == 0, call.stderr
    cites = [c for r in json.loads(call.stdout)["results"] for c in r["citations"]]
    assert any(c["excerpt"] == EN_LINE for c in cites)
    refused = _memctl_here(lk, "tools", '{"query": "x", "max_results": 0}', "--tenant", "demo")
    assert refused.returncode == 1 and json.loads(refused.stdout)["error"]["code"] == "BAD_ARGS"


def test_grouped_counts_count_the_tables_as_they_read(lake) -> None:
    """`memctl stats` and materialize's summary count with DuckDB over the files; the counts are those of the
    tables as read_lake_table assembles them (overlays applied, forgotten and merged rows counted once)."""
    import polars as pl

    from r2g.lake_graph import GRAPH_TABLES, UNION_TABLES, grouped_counts

    lk, _ = lake
    for name in [*UNION_TABLES, *GRAPH_TABLES]:
        cols = ["tenant", "type"] if name in GRAPH_TABLES else ["tenant"]
        want = pl.from_arrow(read_lake_table(lk, name, cols)).group_by(cols).agg(pl.len().cast(pl.Int64).alias("rows"))
        got = grouped_counts(lk, name, cols)
        assert got.sort(cols).to_dicts() == want.sort(cols).to_dicts(), name
        assert got.get_column("rows").sum() == read_lake_table(lk, name, ["tenant"]).num_rows > 0, name
    rejects = grouped_counts(lk, "rejects", ["tenant", "reason"])
    assert rejects.filter(pl.col("reason") == "E_READ_EMPTY").get_column("rows").to_list() == [1]
    assert grouped_counts(lk, "audit", ["tenant"]).height == 0  # a lake-wide table: no forget request, no rows
    # the merge step's metadata counts the same way (Dagster stores a JSON value's keys sorted)
    with dg.DagsterInstance.get() as instance:
        for name in ("r2g_nodes", "r2g_edges"):
            meta = instance.get_latest_materialization_event(dg.AssetKey(name)).asset_materialization.metadata
            types = read_lake_table(lk, name, ["type"])
            assert meta["type"].value == value_counts(types, "type"), name
            assert meta["dagster/row_count"].value == types.num_rows, name


def test_concept_documents_are_the_index_builds_made_once_per_lake(lake) -> None:
    """The file runs leave Concepts' documents out of the partitions (r2g.lake_graph.file_docs: bilingual labels,
    the same in every file); the index build makes them and keeps them in its cache, so the DuckDB file's full-text
    table holds for each Concept the document make_docs gives, its Chinese label segmented."""
    import duckdb
    import polars as pl

    from r2g.lake_graph import make_docs, part_docs
    from r2g.schema import DOCS
    from raw_store.frames import as_frame
    from raw_store.lake import read_table
    from recall.store import node_docs_table, tenant_slug

    lk, _ = lake
    nodes = as_frame(read_lake_table(lk, "nodes", ["tenant", "id", "type", "title", "text", "keywords"]))
    concepts = nodes.filter((pl.col("type") == "Concept") & pl.col("title").str.contains("[\u4e00-\u9fff]"))
    assert concepts.height > 0
    assert part_docs(lk, "node").join(concepts, on=["tenant", "id"], how="semi").height == 0
    cached = as_frame(read_table(lk.index_dir / "node_docs.parquet", DOCS))
    assert cached.join(concepts, on=["tenant", "id"], how="semi").height == concepts.height
    want = as_frame(make_docs(concepts.drop("type"), "node"))
    con = duckdb.connect(str(lk.duckdb_path), read_only=True)
    try:
        for tenant in concepts.get_column("tenant").unique().to_list():
            mine = want.filter(pl.col("tenant") == tenant).sort("id")
            rows = con.execute(
                f"SELECT id, doc FROM {node_docs_table(tenant_slug(tenant))} WHERE list_contains(?, id) ORDER BY id",
                [mine.get_column("id").to_list()],
            ).fetchall()
            assert rows == list(zip(mine.get_column("id").to_list(), mine.get_column("doc").to_list()))
    finally:
        con.close()


def test_cli_sql_stats_and_clear_errors(lake, tmp_path: Path) -> None:
    lk, _ = lake
    out = _memctl_here(lk, "sql", "SELECT count(*) AS n FROM nodes WHERE tenant = 'demo'", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)[0]["n"] > 0
    stats = _memctl_here(lk, "stats", "--json")
    assert json.loads(stats.stdout)["tables"]["rejects"]["by_reason"]["E_READ_EMPTY"] == 1
    bad_sql = _memctl_here(lk, "sql", "SELEC nonsense")
    assert bad_sql.returncode == 2 and len(bad_sql.stderr.strip().splitlines()) == 1
    env = {**os.environ, "MEMCTL_DATA": str(tmp_path / "nothing")}
    missing = subprocess.run(
        [sys.executable, "-m", "assets.cli", "recall", "x", "--tenant", "demo"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert missing.returncode == 2 and "materialize" in missing.stderr
    assert "Traceback" not in missing.stderr
    unknown = _memctl_here(lk, "recall", "football", "--tenant", "nobody")
    assert unknown.returncode == 2 and "unknown tenant 'nobody'" in unknown.stderr
    assert "known: demo, messy, research;" in unknown.stderr  # the names, as `memctl stats` shows them
    assert set(json.loads(stats.stdout)["tenants"]) == {"demo", "messy", "research"}
    # --tenant: a sandbox holding only that tenant's rows, with no way back to the shared index
    scoped = _memctl_here(lk, "sql", "SELECT DISTINCT tenant FROM nodes", "--json", "--tenant", "research")
    assert scoped.returncode == 0 and json.loads(scoped.stdout) == [{"tenant": "research"}]
    escape = _memctl_here(lk, "sql", f"ATTACH '{lk.duckdb_path}' AS x", "--tenant", "research")
    assert escape.returncode == 2 and "Permission" in escape.stderr


def test_citations_quote_the_whole_line_and_highlight_the_node_span(lake) -> None:
    from recall import recall

    lk, _ = lake
    results = recall("Xiaoming", "demo", k=10, lake=lk, types=["Entity"])
    entity = next(r for r in results if r.title == "Xiaoming")
    c = next(c for c in entity.citations if c.msg_id == "L7")
    assert c.excerpt == EN_LINE and c.verified
    start, end = c.highlight
    assert c.excerpt[start:end] == "Xiaoming"


def test_cli_output_piped_into_head_ends_quietly(lake) -> None:
    lk, _ = lake
    env = {**os.environ, "MEMCTL_DATA": str(lk.root)}
    # far more output than a pipe buffer holds, so the writer does hit the closed pipe
    cmd = f"{sys.executable} -m assets.cli sql 'SELECT range AS n FROM range(200000)' | head -n 3"
    out = subprocess.run(cmd, shell=True, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert out.stdout.splitlines()[0].strip() == "n"
    assert "Traceback" not in out.stderr and "BrokenPipe" not in out.stderr


def test_a_changed_rule_rederives_only_the_graph_from_stored_annotations(lake, monkeypatch) -> None:
    """A new R2G rule version re-runs file_graph for every partition — not chunking, not NLP."""
    lk, _ = lake
    annotations = {p: p.stat().st_mtime_ns for p in lk.parts.rglob("annotations.parquet")}
    chunks = {p: p.stat().st_mtime_ns for p in lk.parts.rglob("messages.parquet")}
    monkeypatch.setattr("r2g.pipeline.graph_version", lambda: "r2g.test-bump")
    monkeypatch.setattr("assets.ingest.graph_version", lambda: "r2g.test-bump")
    summary = materialize(lk, progress=False)
    keys = sorted(scan_inbox(lk.inbox))
    assert summary.ok and summary.ran == [] and summary.lake_rebuilt
    assert len(summary.rederived) == len(keys) > 0
    assert {p: p.stat().st_mtime_ns for p in lk.parts.rglob("annotations.parquet")} == annotations
    assert {p: p.stat().st_mtime_ns for p in lk.parts.rglob("messages.parquet")} == chunks
    with dg.DagsterInstance.get() as instance:
        runs = instance.get_runs(filters=dg.RunsFilter(tags={"memctl/rederive": "graph"}))
    assert len(runs) == len(summary.rederived)
    assert all(r.step_keys_to_execute == ["file_graph"] for r in runs)
    monkeypatch.undo()
    back = materialize(lk, progress=False)  # the real version again: rebuilt once more, same bytes as before
    assert back.ok and len(back.rederived) == len(keys)
