"""Index builders: DuckDB tables + per-tenant FTS, recall's per-tenant index (graph included), atomic swap."""

from __future__ import annotations

from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from r2g.schema import NODES
from raw_store.lake import Lake
from recall.index import FTS_IGNORE, _per_tenant_fts, build_indexes
from recall.store import connect, node_docs_table, raw_docs_table, tenant_slug
from recall.tenant_index import open_tenant_index, tenant_dir
from recall_fixtures import LakeBuilder


def graph_edges(lake: Lake, tenant: str) -> tuple[list[str], list[tuple]]:
    """(vertex ids, (src, type, dst, weight) edges) of the tenant's graph in recall's index."""
    g = open_tenant_index(lake.index_dir, tenant).graph()
    ids = g.ids(range(g.n))
    edges = []
    for v in range(g.n):
        nbr, code, w = g.incident(v)
        edges += [
            (ids[v], g.type_of(c), ids[u], x) for u, c, x in zip(nbr.tolist(), code.tolist(), w.tolist()) if not c & 1
        ]
    return ids, sorted(edges)


def _two_tenant_lake(root, extra_word: str = "") -> Lake:
    b = LakeBuilder(root)
    ra = b.conversation(
        "alice", "c1", [("m1", "Alice", f"I went hiking in the Alps {extra_word}"), ("m2", "Bob", "小明在公园里踢足球")]
    )
    rb = b.conversation("bob", "c9", [("m1", "Bob", "hiking is boring")])
    b.node("alice", "ep1", "Episode", "hiking Alps", "Alice went hiking in the Alps", ("hiking", "alps"), (ra["m1"],))
    b.node("alice", "ep2", "Episode", "小明踢足球", "小明在公园里踢足球", ("足球",), (ra["m2"],))
    b.node("alice", "ent1", "Entity", "Alps")
    b.node("bob", "ep9", "Episode", "hiking boring", "hiking is boring", ("hiking",), (rb["m1"],))
    b.edge("alice", "ep1", "ent1", "MENTIONS", 0.9)
    b.edge("alice", "ep1", ra["m1"]["raw_id"], "DERIVED_FROM")
    b.edge("alice", "ep1", "ep2", "TEMPORAL_NEXT", 0.3)
    return b.write()


def test_build_views_the_lake_tables_and_counts(tmp_path):
    lake = _two_tenant_lake(tmp_path)
    stats = build_indexes(lake, full=True)
    assert stats["tables"]["nodes"] == 4 and stats["tables"]["edges"] == 3
    assert stats["tables"]["rejects"] == 0  # missing Parquet → empty table with the schema
    assert stats["tenants"] == 2 and stats["seconds"] >= 0
    con = duckdb.connect(str(lake.duckdb_path), read_only=True)
    try:
        kinds = dict(
            con.execute(
                "SELECT table_name, table_type FROM information_schema.tables WHERE table_schema = 'main'"
            ).fetchall()
        )
        for name in ("nodes", "edges", "raw_chunks", "messages", "rejects", "tenants"):
            assert kinds[name] == "VIEW"  # over the lake's Parquet files: no copy
        for name in (node_docs_table(tenant_slug("alice")), raw_docs_table(tenant_slug("alice"))):
            assert kinds[name] == "BASE TABLE"  # the documents of the full-text index (fts_main_…)
        assert con.execute("SELECT count(*) FROM rejects").fetchone()[0] == 0
        assert sorted(con.execute("SELECT tenant, slug FROM tenants").fetchall()) == [
            ("alice", tenant_slug("alice")),
            ("bob", tenant_slug("bob")),
        ]
    finally:
        con.close()


def test_duckdb_file_keeps_its_strings_zstd_compressed(tmp_path):
    # the documents and the FTS index's ids are most of the file: zstd keeps them ~5x smaller than DuckDB's FSST
    lake = _two_tenant_lake(tmp_path)
    con = duckdb.connect(str(lake.duckdb_path), read_only=True)
    try:
        assert con.execute("SELECT tags FROM duckdb_databases() WHERE database_name = 'memory'").fetchone() == (
            {"storage_version": "v1.2.0+"},
        )
        for slug in (tenant_slug("alice"), tenant_slug("bob")):
            for table in (node_docs_table(slug), f"fts_main_{node_docs_table(slug)}.docs"):
                compression = con.execute(
                    f"SELECT column_name, list(DISTINCT compression) FROM pragma_storage_info('{table}') "
                    "WHERE segment_type = 'VARCHAR' GROUP BY 1"
                ).fetchall()
                assert compression and all(c == ["ZSTD"] for _, c in compression), (table, compression)
    finally:
        con.close()


def test_per_tenant_fts_indexes_chinese_and_english(tmp_path):
    lake = _two_tenant_lake(tmp_path)
    con = connect(lake.duckdb_path, read_only=True)
    try:
        t = node_docs_table(tenant_slug("alice"))
        q = f"SELECT id FROM {t} WHERE fts_main_{t}.match_bm25(id, ?) IS NOT NULL ORDER BY id"
        assert con.execute(q, ["足球"]).fetchall() == [("ep2",)]
        assert con.execute(q, ["hike"]).fetchall() == [("ep1",)]  # porter stemming
        tb = node_docs_table(tenant_slug("bob"))
        assert con.execute(
            f"SELECT id FROM {tb} WHERE fts_main_{tb}.match_bm25(id, 'hiking') IS NOT NULL"
        ).fetchall() == [("ep9",)]
        r = raw_docs_table(tenant_slug("alice"))
        assert (
            con.execute(f"SELECT count(*) FROM {r} WHERE fts_main_{r}.match_bm25(id, '公园') IS NOT NULL").fetchone()[0]
            == 1
        )
    finally:
        con.close()


def test_graph_per_tenant_without_raw_endpoints(tmp_path):
    lake = _two_tenant_lake(tmp_path)
    ids, edges = graph_edges(lake, "alice")
    assert sorted(ids) == ["ent1", "ep1", "ep2"]
    assert open_tenant_index(lake.index_dir, "alice").nodes(["ent1"])["ent1"]["type"] == "Entity"
    assert edges == [("ep1", "MENTIONS", "ent1", 0.9), ("ep1", "TEMPORAL_NEXT", "ep2", 0.3)]
    assert graph_edges(lake, "bob") == (["ep9"], [])
    assert not lake.graph_dir.exists()  # no igraph pickles any more


def test_empty_lake_builds(tmp_path):
    lake = Lake(tmp_path)
    stats = build_indexes(lake)
    assert stats["tenants"] == 0 and all(v == 0 for v in stats["tables"].values())
    assert lake.duckdb_path.exists()


def test_rebuild_swaps_atomically_and_old_reader_keeps_working(tmp_path):
    lake = _two_tenant_lake(tmp_path)
    old = connect(lake.duckdb_path, read_only=True)
    t = node_docs_table(tenant_slug("alice"))
    q = f"SELECT id FROM {t} WHERE fts_main_{t}.match_bm25(id, ?) IS NOT NULL"
    assert old.execute(q, ["hiking"]).fetchall() == [("ep1",)]

    b = LakeBuilder(tmp_path)
    ra = b.conversation("alice", "c1", [("m1", "Alice", "we sailed to Corsica")])
    b.node("alice", "ep7", "Episode", "sailing Corsica", "we sailed to Corsica", ("sailing",), (ra["m1"],))
    b.write()  # rebuilds the index while `old` is open

    assert old.execute(q, ["hiking"]).fetchall() == [("ep1",)]  # old file, still readable
    new = connect(lake.duckdb_path, read_only=True)
    try:
        assert new.execute(q, ["hiking"]).fetchall() == []
        assert new.execute(q, ["sailing"]).fetchall() == [("ep7",)]
    finally:
        new.close()
        old.close()
    leftovers = [p.name for p in lake.lake.rglob("*") if p.name.startswith(".") or p.suffix in (".tmp", ".wal")]
    assert leftovers == []
    # bob is gone from the lake: his recall index (graph included) must not linger
    assert not tenant_dir(lake.index_dir, "bob").exists()
    assert open_tenant_index(lake.index_dir, "bob") is None


def test_connect_read_only_without_file_raises(tmp_path):
    from recall.store import IndexNotBuilt

    with pytest.raises(IndexNotBuilt):
        connect(tmp_path / "nope.duckdb", read_only=True)


def test_only_memctls_own_connections_skip_the_extension_check_and_only_once_checked(tmp_path):
    """DuckDB checks the fts extension's signature (~0.1 s a load); memctl's own connections skip it once this
    process has loaded the file with the check. A read-only connection, where `memctl sql` runs user SQL, always
    checks: it can never load an unsigned extension."""
    from recall import store

    def allowed(con: duckdb.DuckDBPyConnection) -> bool:
        return con.execute("SELECT current_setting('allow_unsigned_extensions')").fetchone()[0]

    store._CHECKED.clear()
    first, second = connect(None, read_only=False), connect(None, read_only=False)
    assert (allowed(first), allowed(second)) == (False, True)
    lake = _two_tenant_lake(tmp_path)
    reader = connect(lake.duckdb_path, read_only=True)
    assert not allowed(reader)
    tampered = bytearray(Path(store.fts_extension_path()).read_bytes())
    tampered[-1] ^= 0xFF  # the signature's last byte
    unsigned = tmp_path / "tampered.duckdb_extension"
    unsigned.write_bytes(tampered)
    with pytest.raises(duckdb.Error, match="signature is either missing or invalid"):
        reader.execute(f"LOAD '{unsigned}'")
    for con in (first, second, reader):
        con.close()


def test_fts_ignore_pattern_keeps_letters_and_digits_of_every_script():
    from recall.index import FTS_IGNORE
    from recall.store import connect

    con = connect(None, read_only=False)
    con.execute("CREATE TABLE d(id VARCHAR, doc VARCHAR)")
    con.execute(
        "INSERT INTO d VALUES ('zh', '小明 在 公园 踢 足球'), ('fr', 'Zoë met us at the café'), "
        "('ru', 'встреча в Москве'), ('code', 'printer error 0x00000709')"
    )
    con.execute(
        f"PRAGMA create_fts_index('d', 'id', 'doc', stemmer='porter', stopwords='english', "
        f"ignore='{FTS_IGNORE}', overwrite=1)"
    )
    for query, expected in [("足球", "zh"), ("café", "fr"), ("zoë", "fr"), ("москве", "ru"), ("0x00000709", "code")]:
        hits = con.execute(
            "SELECT id FROM (SELECT id, fts_main_d.match_bm25(id, ?) AS s FROM d) WHERE s IS NOT NULL", [query]
        ).fetchall()
        assert hits == [(expected,)], query


def test_the_duckdb_file_is_kept_while_its_views_see_the_lake(tmp_path):
    lake = _two_tenant_lake(tmp_path)
    before = lake.duckdb_path.stat().st_ino
    b = LakeBuilder(tmp_path)  # another partition with one more node: the views see it without a rebuild
    ra = b.conversation("alice", "c2", [("m1", "Alice", "we sailed to Corsica")])
    b.node("alice", "ep7", "Episode", "sailing Corsica", "we sailed to Corsica", ("sailing",), (ra["m1"],))
    from raw_store.tables import write_import

    write_import(lake, {"nodes": (pa.Table.from_pylist(b.nodes, schema=NODES), NODES)}, key="more")
    assert build_indexes(lake)["rebuilt"] is False and lake.duckdb_path.stat().st_ino == before
    con = connect(lake.duckdb_path, read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM nodes WHERE tenant = 'alice'").fetchone()[0] == 4
        assert con.execute("SELECT n_nodes FROM tenants WHERE tenant = 'alice'").fetchone()[0] == 4
    finally:
        con.close()
    assert build_indexes(lake, full=True)["rebuilt"] is True and lake.duckdb_path.stat().st_ino != before


def test_node_documents_are_segmented_once_and_reused_while_unchanged(tmp_path, monkeypatch):
    """A Chinese document no partition holds (this lake has no partitions) is made once: the recall index and the
    DuckDB file share it, and the next full build takes it from the index folder's cache."""
    import polars as pl

    from r2g import lake_graph
    from r2g.schema import DOCS
    from raw_store.lake import read_table

    lake = _two_tenant_lake(tmp_path)  # built its indexes once already
    (lake.index_dir / "node_docs.parquet").unlink()
    made: list[int] = []
    real = lake_graph.make_docs
    monkeypatch.setattr(
        lake_graph, "make_docs", lambda f, k: (made.append(f.height) if k == "node" else None) or real(f, k)
    )
    build_indexes(lake, full=True)
    assert sum(made) == 4  # each node once, though both indexes were built from scratch
    cache = pl.from_arrow(read_table(lake.index_dir / "node_docs.parquet", DOCS))
    assert cache["id"].to_list() == ["ep2"]  # only what costs: the document holding Han
    made.clear()
    build_indexes(lake, full=True)
    assert sum(made) == 3  # the English ones again (microseconds), not the Chinese one
    con = connect(lake.duckdb_path, read_only=True)
    try:
        hits = con.execute(f"SELECT id FROM {node_docs_table(tenant_slug('alice'))} WHERE doc LIKE '%足球%'").fetchall()
    finally:
        con.close()
    assert hits == [("ep2",)]


def test_a_file_run_makes_the_documents_of_its_rows_holding_han_but_not_of_concepts(monkeypatch):
    """file_docs: a partition keeps the documents of its nodes and raw passages that hold Han, and not of its
    Concepts (the concept dictionary's bilingual labels, the same in every file: the index build makes them once per
    lake). A file of English messages, concept hits included, needs no jieba."""
    from r2g import tokens
    from r2g.lake_graph import file_docs, make_docs
    from raw_store.frames import as_frame
    from raw_store.schema import RAW_CHUNKS

    def node(id_: str, type_: str, title: str, text: str, keywords: list[str]) -> dict:
        return {"tenant": "t", "id": id_, "type": type_, "title": title, "text": text, "keywords": keywords}

    def chunk(id_: str, text: str, mime: str | None) -> dict:
        return {"tenant": "t", "id": id_, "text": text, "mime": mime}

    english = [
        node("fact_en", "Fact", "bob likes tea", "Bob likes green tea.", ["tea"]),
        node("concept", "Concept", "Coffee & tea / 咖啡与茶", "Topic: Coffee & tea / 咖啡与茶", ["coffee", "咖啡"]),
    ]
    chinese = [
        node("fact_zh", "Fact", "小明喜欢咖啡", "小明喜欢喝咖啡。", ["咖啡"]),
        node("alias_zh", "Entity", "Xiaoming", "Xiaoming (person)", ["小明"]),
    ]
    en_chunks = [chunk("raw_en", "Bob likes green tea.", "text/plain"), chunk("raw_img", "照片", "image/png")]
    zh_chunks = [chunk("raw_zh", "小明喜欢喝咖啡。", None)]

    asked = []  # the jieba tokenizers asked for (r2g.tokens.han_tokens asks for one per text it segments)
    tokenizer = tokens.jieba_tokenizer
    monkeypatch.setattr(tokens, "jieba_tokenizer", lambda: asked.append(1) or tokenizer())
    nodes, chunks = pa.Table.from_pylist(english, schema=NODES), pa.Table.from_pylist(en_chunks, schema=RAW_CHUNKS)
    node_docs, raw_docs = file_docs(nodes, chunks)
    assert node_docs.num_rows == 0 and raw_docs.num_rows == 0
    assert not asked  # no jieba

    nodes = pa.Table.from_pylist(english + chinese, schema=NODES)
    chunks = pa.Table.from_pylist(en_chunks + zh_chunks, schema=RAW_CHUNKS)
    node_docs, raw_docs = file_docs(nodes, chunks)
    assert node_docs.column("id").to_pylist() == ["fact_zh", "alias_zh"]
    assert raw_docs.column("id").to_pylist() == ["raw_zh"]
    rows = as_frame(nodes).filter(pl.col("id").is_in(["fact_zh", "alias_zh"]))
    assert node_docs.equals(make_docs(rows, "node"))
    assert asked


def test_raw_passages_are_segmented_once_for_both_indexes(tmp_path, monkeypatch):
    """The raw passages' documents are made once per build (lake_docs: the partitions' where they hold them) and
    shared by recall's index and the DuckDB file; recall's index equals one whose segments segment every passage."""
    from r2g import lake_graph
    from r2g.lake_graph import read_graph_tables, read_lake_table
    from recall import segment_build
    from recall.index_build import build_recall_indexes

    lake = _two_tenant_lake(tmp_path / "lake")
    made: list[int] = []
    real_make = lake_graph.make_docs
    monkeypatch.setattr(
        lake_graph, "make_docs", lambda f, k: (made.append(f.height) if k == "raw" else None) or real_make(f, k)
    )
    segmented: list[str] = []
    real_segment = segment_build.segment_for_fts
    monkeypatch.setattr(
        segment_build, "segment_for_fts", lambda t, memo=None: segmented.append(t) or real_segment(t, memo)
    )
    build_indexes(lake, full=True)
    passages = read_lake_table(lake, "raw_chunks", ["id"]).num_rows
    assert sum(made) == passages and segmented == []
    monkeypatch.setattr(lake_graph, "make_docs", real_make)
    nodes, edges = read_graph_tables(lake, "consolidated")
    tables = {
        "nodes": nodes,
        "edges": edges,
        "raw_chunks": read_lake_table(lake, "raw_chunks"),
        "messages": read_lake_table(lake, "messages"),
    }
    build_recall_indexes(tmp_path / "alone", tables, compact=True)  # no documents given: each segment makes its own
    assert len(segmented) == passages
    for tenant in ("alice", "bob"):
        assert (
            open_tenant_index(tmp_path / "alone", tenant).contents()
            == open_tenant_index(lake.index_dir, tenant).contents()
        )


_FTS_WORDS = [
    "the",
    "cats",
    "running",
    "ran",
    "cat",
    "Fast",
    "é",
    "naïve",
    "小明",
    "足球",
    "a",
    "B12",
    "x.y",
    "Ünïcode",
]


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.none() | st.lists(st.sampled_from(_FTS_WORDS), max_size=8).map(" ".join),
        min_size=1,
        max_size=10,
    )
)
def test_fts_tables_filled_from_postings_are_create_fts_indexs(docs: list) -> None:
    """Random documents (empty, None, stop words only, repeated and non-ASCII words, Han): the tables _per_tenant_fts
    fills from recall's postings hold what DuckDB's create_fts_index makes over the same table — each document's
    row and length, each term's df, every occurrence, the statistics — and its match_bm25 scores them alike. The
    occurrences lie term by term (a query's terms are a few row groups of the table, not all of them)."""
    frame = pl.DataFrame(
        {"id": [f"n{i:02d}" for i in range(len(docs))], "doc": docs}, schema={"id": pl.String, "doc": pl.String}
    )
    con = connect(None, read_only=False)
    try:
        _per_tenant_fts(con, frame, "ours")
        con.register("_src", frame.to_arrow())
        con.execute("CREATE TABLE theirs AS SELECT * FROM _src")
        con.execute(
            f"PRAGMA create_fts_index('theirs', 'id', 'doc', stemmer='porter', stopwords='english', "
            f"ignore='{FTS_IGNORE}', overwrite=1)"
        )
        questions = {
            "docs": "SELECT docid, name, len FROM {s}.docs ORDER BY docid",
            "dict": "SELECT term, df FROM {s}.dict ORDER BY term",
            "terms": "SELECT t.docid, d.term, t.fieldid, count(*) FROM {s}.terms t JOIN {s}.dict d USING (termid) "
            "GROUP BY ALL ORDER BY ALL",
            "stats": "SELECT num_docs, avgdl FROM {s}.stats",
            "stopwords": "SELECT sw FROM {s}.stopwords ORDER BY sw",
        }
        for name, sql in questions.items():
            assert (
                con.execute(sql.format(s="fts_main_ours")).fetchall()
                == con.execute(sql.format(s="fts_main_theirs")).fetchall()
            ), name
        stored = con.execute("SELECT termid, docid FROM fts_main_ours.terms").fetchall()  # in insertion order
        assert stored == sorted(stored)
        for q in ("cat running", "小明 足球", "the", "naive fast x"):
            scores = [
                con.execute(f"SELECT id, round(fts_main_{t}.match_bm25(id, ?), 9) FROM {t} ORDER BY id", [q]).fetchall()
                for t in ("ours", "theirs")
            ]
            assert scores[0] == scores[1], q
    finally:
        con.close()


def test_a_full_build_tokenizes_each_tenants_documents_once_for_both_indexes(tmp_path, monkeypatch):
    """build_indexes(full=True): recall's base segments and the DuckDB file's FTS indexes are over the same node and
    raw documents, and their postings are built once (a build per tenant and kind), not twice; outside a build nothing
    is kept."""
    import recall.postings as postings

    lake = _two_tenant_lake(tmp_path)
    built = []
    real = postings._build_postings
    monkeypatch.setattr(postings, "_build_postings", lambda docs, ignore: built.append(len(docs)) or real(docs, ignore))
    build_indexes(lake, full=True)
    assert sorted(built) == [1, 1, 1, 3]  # per tenant its node and raw documents: bob 1 + 1, alice 3 nodes + 1 chunk
    assert postings._SHARED is None
    con = connect(lake.duckdb_path, read_only=True)
    try:
        hits = con.execute(
            f"SELECT id FROM {node_docs_table(tenant_slug('alice'))} "
            f"WHERE fts_main_{node_docs_table(tenant_slug('alice'))}.match_bm25(id, 'hiking') IS NOT NULL"
        ).fetchall()
    finally:
        con.close()
    assert hits == [("ep1",)]


def test_postings_are_kept_only_when_the_duckdb_file_is_due(tmp_path, monkeypatch):
    """A build whose DuckDB file is not due (an append's) builds recall's postings without digesting or keeping them;
    the same build with the file due keeps them for it."""
    import recall.index as index
    import recall.postings as postings

    lake = _two_tenant_lake(tmp_path)
    digested = []
    real_digest, real_plan = postings._digest, index._duckdb_plan
    monkeypatch.setattr(
        postings, "_digest", lambda docs, ignore: digested.append(len(docs)) or real_digest(docs, ignore)
    )
    due = {"value": False}
    monkeypatch.setattr(index, "_duckdb_plan", lambda *a: {**real_plan(*a), "due": due["value"]})
    stats = build_indexes(lake, full=True)  # recall's bases are built; the DuckDB file is not
    assert not stats["rebuilt"]
    assert digested == []
    due["value"] = True
    assert build_indexes(lake, full=True)["rebuilt"]
    assert sorted(digested) == [1, 1, 1, 1, 1, 1, 3, 3]  # per tenant and kind: built for recall, found for DuckDB


def test_the_postings_digest_tells_document_lists_apart_exactly() -> None:
    """Lists whose text runs together alike, None and "", another order: each digests apart; equal lists alike."""
    from recall.postings import _digest

    lists = [["ab", "c"], ["a", "bc"], ["abc"], [None, "abc"], ["", "abc"], ["c", "ab"], [], [None], [""]]
    digests = [_digest(docs, "i") for docs in lists]
    assert len(set(digests)) == len(lists)
    assert _digest(["ab", "c"], "i") == digests[0] != _digest(["ab", "c"], "j")


def test_the_duckdb_files_counts_of_nodes_and_edges_are_its_views_rows(sample_lake: Path, tmp_path: Path) -> None:
    """build_indexes takes the rows of `nodes` and `edges` from the graph it has in hand rather than scanning the
    views: the same numbers as the views give, over a consolidated lake whose overlays upsert and remove rows."""
    import shutil

    import pyarrow.parquet as pq

    from raw_store.lake import write_table
    from raw_store.tables import REMOVED
    from recall.index import SQL_TABLES

    root = tmp_path / "data"
    shutil.copytree(sample_lake, root, ignore=shutil.ignore_patterns("dagster_home"))
    lake = Lake(root)
    folder = root / "lake" / "consolidated"
    for name in ("nodes", "edges"):  # a few rows of the R2G graph removed by the consolidated layer
        upserted = pq.read_table(folder / f"{name}.parquet", columns=["tenant", "id"])
        assert upserted.num_rows  # and some replaced by it
        part = next(p for p in sorted((root / "lake" / "parts").glob(f"*/{name}.parquet")))
        gone = pq.read_table(part, columns=["tenant", "id"]).slice(0, 2)
        write_table(gone, folder / f"{name}_removed.parquet", REMOVED)
    stats = build_indexes(lake, SQL_TABLES, full=True)
    con = duckdb.connect(str(lake.duckdb_path), read_only=True)
    try:
        for name, rows in stats["tables"].items():
            assert con.execute(f"SELECT count(*) FROM {name}").fetchone() == (rows,), name
    finally:
        con.close()
    assert stats["tables"]["nodes"] > 0 and stats["tables"]["edges"] > 0


def test_the_graphs_counts_are_kept_by_the_index_build_until_a_graph_file_changes(
    sample_lake: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """build_indexes keeps the rows of `nodes` and `edges` per (tenant, type), counted in the graph it holds, with a
    stamp of the files it read them from. grouped_counts (what `memctl materialize` prints) answers from them, with
    no scan of the views, while those files are unchanged; once one is replaced it counts over the files again."""
    import shutil

    import pyarrow.parquet as pq

    from r2g import lake_graph
    from r2g.lake_graph import grouped_counts, read_lake_table
    from raw_store.lake import write_table
    from raw_store.tables import REMOVED
    from recall.index import SQL_TABLES

    def counted(lake: Lake, name: str, cols: list[str]) -> list[dict]:
        table = pl.from_arrow(read_lake_table(lake, name, cols))
        return table.group_by(cols).agg(pl.len().cast(pl.Int64).alias("rows")).sort(cols).to_dicts()

    root = tmp_path / "data"
    shutil.copytree(sample_lake, root, ignore=shutil.ignore_patterns("dagster_home"))
    lake = Lake(root)
    scans: list[str] = []
    real = lake_graph._key_scan
    monkeypatch.setattr(lake_graph, "_key_scan", lambda lk: scans.append("scan") or real(lk))
    assert grouped_counts(lake, "nodes", ["tenant", "type"]).height and scans == ["scan"]  # copied: other paths
    build_indexes(lake, SQL_TABLES)
    scans.clear()
    for name in ("nodes", "edges"):
        for cols in (["tenant", "type"], ["type"], ["tenant"]):
            assert grouped_counts(lake, name, cols).sort(cols).to_dicts() == counted(lake, name, cols), (name, cols)
    assert grouped_counts(lake, "messages", ["tenant"]).height and scans == ["scan"]  # the graph's counts only

    # the consolidated layer now removes two rows of a partition (a file replaced, as every write replaces one)
    part = sorted((root / "lake" / "parts").glob("*/edges.parquet"))[0]
    write_table(
        pq.read_table(part, columns=["tenant", "id"]).slice(0, 2),
        root / "lake/consolidated/edges_removed.parquet",
        REMOVED,
    )
    scans.clear()
    after = grouped_counts(lake, "edges", ["tenant", "type"])
    assert scans == ["scan"] and after.sort(["tenant", "type"]).to_dicts() == counted(lake, "edges", ["tenant", "type"])
    assert after.get_column("rows").sum() == read_lake_table(lake, "edges", ["tenant"]).num_rows
