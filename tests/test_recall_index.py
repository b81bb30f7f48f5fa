"""Recall's per-tenant index: BM25 equal to DuckDB FTS, base + deltas = a fresh base, atomic swaps, isolation."""

from __future__ import annotations

import itertools
import json
import logging
import os
import shutil
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pytest

from raw_store.lake import Lake
from recall import graph_csr, index_build, index_commit, postings, recall, segment
from recall.graph_csr import NO_TIME
from recall.index import build_indexes
from recall.query import query_keywords
from recall.store import tenant_reader
from recall.tenant_index import FORMAT, TenantIndex, Version, open_tenant_index, recall_dir, tenant_dir
from recall_fixtures import LakeBuilder

ROOT = Path(__file__).resolve().parents[1]
EVAL = Path(__file__).resolve().parents[2] / "shared" / "eval"
T0 = datetime(2023, 3, 1, 9, 0)


# --------------------------------------------------------------------------- BM25 = DuckDB FTS


def _locomo_lake(root: Path, path: Path, convs: int) -> tuple[Lake, dict[str, list[str]]]:
    """A lake of real LoCoMo turns: one tenant per conversation, an Episode per turn, a chunk per session."""
    b = LakeBuilder(root)
    questions = {}
    for sample in json.loads(path.read_text("utf-8"))[:convs]:
        tenant, conv = sample["sample_id"], sample["conversation"]
        sessions = sorted(
            int(k.split("_")[1])
            for k in conv
            if k.startswith("session_") and k.count("_") == 1 and isinstance(conv[k], list)
        )
        for n in sessions:
            turns = [(t["dia_id"], t["speaker"], t["text"]) for t in conv[f"session_{n}"]]
            refs = b.conversation(tenant, f"s{n}", turns, start=T0 + timedelta(days=n))
            for msg_id, speaker, text in turns:
                b.node(
                    tenant,
                    f"ep_{msg_id}",
                    "Episode",
                    f"{speaker}: {text[:40]}",
                    text,
                    (),
                    (refs[msg_id],),
                    T0 + timedelta(days=n),
                    first_seen=T0 + timedelta(days=n),
                )
        questions[tenant] = [qa["question"] for qa in sample["qa"]]
    return b.write(), questions


def _ranked(hits: list[tuple[str, float]]) -> list[str]:
    """Ids by score rounded to 1e-6, then id: the order both engines agree on whatever their sum order."""
    return [i for i, _ in sorted(hits, key=lambda h: (-round(h[1], 6), h[0]))]


@pytest.mark.parametrize("name, convs", [("locomo_dev.json", 2), ("zh_dev.json", 2)])
def test_bm25_scores_equal_duckdb_fts_on_a_real_corpus(tmp_path: Path, name: str, convs: int) -> None:
    if not (EVAL / name).exists():
        pytest.skip(f"{EVAL / name} not here")
    lake, questions = _locomo_lake(tmp_path, EVAL / name, convs)
    compared = 0
    for tenant, qs in questions.items():
        sql, idx = tenant_reader(lake, tenant), open_tenant_index(lake.index_dir, tenant)
        try:
            info = sql.info()
            assert (idx.info().n_nodes, idx.info().n_chunks) == (info.n_nodes, info.n_chunks)
            for q in qs:
                query = " ".join(query_keywords(q))
                for kind, limit in (("node_bm25", info.n_nodes), ("raw_bm25", 10)):
                    want, got = getattr(sql, kind)(info, query, limit), getattr(idx, kind)(info, query, limit)
                    assert _ranked(got) == _ranked(want), (kind, q)
                    w = dict(want)
                    assert all(abs(s - w[i]) <= 1e-9 * max(1.0, abs(s)) for i, s in got), (kind, q)
                    compared += len(got)
        finally:
            sql.close()
    assert compared > 1000


def test_bm25_reads_the_ids_of_the_first_tied_rows_only_and_ranks_alike(tmp_path: Path) -> None:
    """Node rows are stored in id order, so of the documents tied at the cut only the first `limit` rows of a
    segment can make the top: the same top (ids, scores, order) as reading every tied id, from fewer ids read.
    Chat repeats itself ("ok", "haha", "see you"): hundreds of equal documents, one score."""
    rng = np.random.default_rng(5)
    phrases = ["see you tomorrow", "haha ok", "coffee this morning", "the climbing gym again", "ok"]
    b = LakeBuilder(tmp_path)
    turns = [(f"m{i}", "Ann", str(rng.choice(phrases))) for i in range(600)]
    refs = b.conversation("t1", "c1", turns, start=T0)
    for msg_id, speaker, text in turns:  # ids in no relation to the text: ties spread over the rows
        b.node(
            "t1", f"ep_{rng.integers(10**9)}_{msg_id}", "Episode", f"{speaker}: {text}", text, (), (refs[msg_id],), T0
        )
    lake = b.write()
    index = open_tenant_index(lake.index_dir, "t1")
    v = index.v
    n, avgdl = v.stats("node")
    asked: dict[bool, int] = {True: 0, False: 0}
    for q in ["see you", "ok", "coffee gym", "climbing haha", "tomorrow morning ok"]:
        for limit in (1, 7, 50, 1000):
            got = {}
            for ordered in (True, False):

                def ids(s: int, rows: np.ndarray, ordered: bool = ordered, some: bool = limit < n) -> list[str]:
                    asked[ordered] += len(rows) if some else 0  # (a limit past every document reads all)
                    return v.segments[s].node_ids(rows)

                got[ordered] = postings.bm25(
                    v.node_parts(), n, avgdl, index._terms(q), ids, limit, rows_in_id_order=ordered
                )
            assert got[True] == got[False], (q, limit)
            assert [i for i, _ in got[True]] == _ranked(got[True])[:limit]
    assert asked[True] < asked[False] / 4


def test_bm25_takes_each_documents_length_from_beside_its_posting(tmp_path: Path) -> None:
    """A query reads the lengths of the documents its terms name from the postings (`post_len`, doc_len[post_doc]),
    not the segment's per-document array: with that array zeroed after the averages are taken, the scores are the
    same. The lengths are a byte each where every document is under 256 terms."""
    b = LakeBuilder(tmp_path)
    turns = [(f"m{i}", "Ann", text) for i, text in enumerate(["see you tomorrow at the gym"] * 3 + ["ok", "gym ok"])]
    refs = b.conversation("t1", "c1", turns, start=T0)
    for msg_id, speaker, text in turns:
        b.node("t1", f"ep_{msg_id}", "Episode", f"{speaker}: {text}", text, (), (refs[msg_id],), T0)
    index = open_tenant_index(b.write().index_dir, "t1")
    v = index.v
    n, avgdl = v.stats("node")

    def ids(s: int, rows: np.ndarray) -> list[str]:
        return v.segments[s].node_ids(rows)

    before = postings.bm25(v.node_parts(), n, avgdl, index._terms("gym ok tomorrow"), ids, 10)
    for part in v.node_parts():
        p = part.postings
        assert p.post_len.dtype == np.uint8 and np.array_equal(p.post_len, p.doc_len[p.doc])
        p.doc_len = np.zeros_like(p.doc_len)
    after = postings.bm25(v.node_parts(), n, avgdl, index._terms("gym ok tomorrow"), ids, 10)
    assert len(before) == 4 and len({s for _, s in before}) == 2 and after == before


def test_postings_built_chunk_by_chunk_equal_one_fts_index_over_all_documents(monkeypatch) -> None:
    from recall import postings
    from recall.index import FTS_IGNORE

    docs = [
        "Caroline went to the LGBTQ support group",
        None,
        "",
        "the and of",  # stop-words only: length 0
        "café Zoë naïve déjà-vu 3.5 dollars",
        "我 今天 下午 买 了 一双 跑鞋",
        "running runs ran runner",
        "support group support GROUP",
        "Melanie",
    ] * 3
    whole, tokenize = postings.build_postings(docs, FTS_IGNORE)
    # one chunk at a time, and several at once (each in its own DuckDB on one thread): the same arrays
    for chars, workers in itertools.product((1, 30, 100), (1, 3)):
        monkeypatch.setattr(postings, "CHUNK_CHARS", chars)
        monkeypatch.setattr(postings, "CHUNK_WORKERS", workers)
        assert len(postings._chunk_bounds(docs, chars)) > workers
        parts, again = postings.build_postings(docs, FTS_IGNORE)
        assert again == tokenize and parts.terms.equals(whole.terms)
        for a, b in ((parts.term_ptr, whole.term_ptr), (parts.doc, whole.doc), (parts.tf, whole.tf)):
            assert a.dtype == b.dtype and np.array_equal(a, b)
        assert np.array_equal(parts.doc_len, whole.doc_len)


# --------------------------------------------------------------------------- base + deltas = fresh base


def _tenant_rows(
    b: LakeBuilder,
    tenant: str,
    convs: range,
    removed: set[str] = frozenset(),
    changed: dict[str, dict] | None = None,
    weights: dict[tuple, float] | None = None,
) -> None:
    """A small graph per conversation: Episodes (TEMPORAL_NEXT), a Fact per turn (AGENT → person), shared
    Entities (aliases), a topic; `removed` node ids left out, `changed` node fields overridden."""
    words = ["garden", "coffee", "guitar", "hiking", "museum", "pottery", "kayak", "bakery", "chess", "jazz"]
    people = {"ann": ("Ann Lee", ["Annie"]), "bo": ("Bo Chen", ["陈博"]), "cy": ("Cy Park", [])}
    changed = changed or {}
    seen: set[tuple] = set()

    def node(nid, *args, **kw):
        if nid not in removed:
            named = dict(zip(("type", "title", "text", "keywords", "refs", "time"), args))
            b.node(tenant, nid, **{**named, **kw, **changed.get(nid, {})})

    def edge(src, dst, etype, w):
        if src not in removed and dst not in removed and (src, etype, dst) not in seen:
            seen.add((src, etype, dst))
            b.edge(tenant, src, dst, etype, (weights or {}).get((src, etype, dst), w))

    for key, (name, aliases) in people.items():
        node(
            f"ent_{key}",
            "Entity",
            name,
            f"{name} (PERSON)",
            (name.lower(),),
            subtype="PERSON",
            aliases=aliases,
            first_seen=T0,
            last_seen=T0,
        )
    node("topic_out", "Concept", "Outdoors", "Topic: outdoors", ("hiking", "kayak"), first_seen=T0)
    for c in convs:
        start = T0 + timedelta(days=3 * c)
        who = list(people)[c % 3]
        turns = [
            (
                f"m{c}_{i}",
                people[who][0],
                f"{people[who][0]} talked about the {words[(c + i) % 10]} and the "
                f"{words[(c * 3 + i) % 10]} {'小明在公园里踢足球' if i == 2 else ''}{'' if tenant == 'alice' else tenant}",
            )
            for i in range(4)
        ]
        refs = b.conversation(tenant, f"c{c}", turns, start=start)
        prev = None
        for i, (mid, speaker, text) in enumerate(turns):
            ts = start + timedelta(minutes=i)
            ep, fact = f"ep_{mid}", f"f_{mid}"
            node(
                ep,
                "Episode",
                f"{speaker}: {text[:30]}",
                text,
                (words[(c + i) % 10],),
                (refs[mid],),
                ts,
                first_seen=ts,
                last_seen=ts,
                conv_id=f"c{c}",
                msg_id=mid,
                speaker=speaker,
                importance=0.5,
            )
            node(
                fact,
                "Fact",
                f"{speaker} like {words[(c + i) % 10]}",
                f"likes {words[(c + i) % 10]}",
                (words[(c + i) % 10],),
                ({**refs[mid], "length": 12},),
                ts,
                first_seen=ts,
                last_seen=ts,
                conv_id=f"c{c}",
                msg_id=mid,
                frequency=1 + i,
            )
            edge(fact, ep, "DERIVED_FROM", 1.0)
            edge(fact, f"ent_{who}", "AGENT", 0.8)
            edge(ep, f"ent_{who}", "MENTIONS", 0.95)
            edge(ep, refs[mid]["raw_id"], "DERIVED_FROM", 1.0)
            if words[(c + i) % 10] in ("hiking", "kayak"):
                edge(ep, "topic_out", "ABOUT", 0.7)
            if prev:
                edge(prev, ep, "TEMPORAL_NEXT", 1.0)
            prev = ep


QUERIES = [
    "garden coffee",
    "Ann Lee guitar",
    "Annie",
    "陈博 足球",
    "hiking kayak outdoors",
    "museum pottery jazz",
    "what did Bo Chen say about the bakery",
    "chess",
    "0x00000709 error",
]


def _answers(lake: Lake, tenant: str) -> list:
    out = []
    for q in QUERIES:
        for depth in (1, 2):
            out.append([r.to_json() for r in recall(q, tenant, k=8, expand_depth=depth, lake=lake)])
        out.append([r.to_json() for r in recall(q, tenant, k=5, lake=lake, as_of=T0 + timedelta(days=7))])
    return out


def _build(root: Path, rounds: list[dict]) -> tuple[Lake, list[dict]]:
    """Write and index each round's tables in turn (tenants "alice", "bob"); returns the lake and the build stats."""
    stats = []
    for spec in rounds:
        b = LakeBuilder(root)
        for tenant, kw in spec.items():
            _tenant_rows(b, tenant, **kw)
        lake = b.write(index=False)
        stats.append(build_indexes(lake)["graphs"])
    return lake, stats


ROUNDS: list[dict[str, dict[str, Any]]] = [
    {"alice": {"convs": range(0, 6)}, "bob": {"convs": range(0, 2)}},
    # changed doc text, changed weight fields, a removed Fact and a removed Entity, an edge weight, a new conversation
    {
        "alice": {
            "convs": range(0, 7),
            "removed": {"f_m1_2", "ent_cy"},
            "changed": {
                "ep_m0_1": {"text": "Ann repaired the telescope"},
                "f_m2_0": {"importance": 0.9},
                "ent_ann": {"aliases": ["Annie", "A. Lee"]},
            },
            "weights": {("ep_m3_0", "MENTIONS", "ent_ann"): 0.4},
        },
        "bob": {"convs": range(0, 2), "changed": {"ep_m1_3": {"status": "forgotten"}}},
    },
    # a conversation forgotten (its chunk, messages and nodes gone), a removed node back; bob gone
    {"alice": {"convs": range(1, 7), "removed": {"ent_cy"}, "changed": {"ep_m0_1": {"text": "x"}}}},
]


def _without_len_sum(p):
    import copy

    q = copy.copy(p)
    q.len_sum = None
    return q


def test_base_plus_deltas_answers_exactly_like_a_fresh_base(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(index_build, "COMPACT_SHARE", 100.0)  # these small changes stay deltas
    inc, stats = _build(tmp_path / "inc", ROUNDS)
    assert [s["alice"]["mode"] for s in stats] == ["base", "delta", "delta"]
    assert stats[1]["bob"]["mode"] == "delta" and "bob" not in stats[2]
    fresh, _ = _build(tmp_path / "fresh", [ROUNDS[-1]])
    a, f = open_tenant_index(inc.index_dir, "alice"), open_tenant_index(fresh.index_dir, "alice")
    assert len(a.v.segments) == 3 and len(f.v.segments) == 1
    assert a.contents() == f.contents()
    for idx in (a, f):  # the gathered neighbour lists the first hop reads = one incident() a slot
        g = idx.graph()
        vs = np.array([*range(g.n), g.n - 1, 0], np.int64)  # every slot, repeats, removed ones
        ptr, nbr, code, w = g.incident_many(vs)
        for i, v in enumerate(vs.tolist()):
            one = g.incident(v)
            assert [x.tolist() for x in one] == [x[ptr[i] : ptr[i + 1]].tolist() for x in (nbr, code, w)]
        assert ptr[-1] > 100
    # first_seen by slot: looked up over the deltas (each slot's current row), the fresh base's column as it is
    ga, gf = a.graph(), f.graph()
    ids = f.v.ids_of_slots(np.arange(gf.n))
    slots = a.v.slots_of(ids)
    assert (slots >= 0).all() and not isinstance(ga.first_seen, np.ndarray)
    assert ga.first_seen[slots].tolist() == np.asarray(gf.first_seen[np.arange(gf.n)]).tolist()
    assert len(set(ga.first_seen[slots].tolist())) > 5
    assert [int(ga.first_seen[int(v)]) for v in slots[:5]] == ga.first_seen[slots[:5]].tolist()
    gone = np.setdiff1d(np.arange(ga.n), slots)  # slots of removed nodes: no current row, no time
    assert len(gone) and set(ga.first_seen[gone].tolist()) == {NO_TIME}

    # each node's current neighbour list over the deltas (the newest segment listing or removing its slot) is the
    # fresh base's, neighbours named by id; a removed node's slot has none
    def lists(g, vs):
        ptr, nbr, code, w = g.incident_many(vs)
        names = g.ids(nbr) if len(nbr) else []
        return [sorted(zip(names[a:z], code[a:z].tolist(), w[a:z].tolist())) for a, z in zip(ptr[:-1], ptr[1:])]

    # BM25's document count and mean length from the segments' kept length sums (less a base's dead documents),
    # as from every live length, and as where the sums are not kept (a segment written before they were)
    for kind in ("node", "raw"):
        parts = a.v.node_parts() if kind == "node" else a.v.raw_parts()
        live = [p.postings.doc_len if p.live is None else p.postings.doc_len[p.live] for p in parts]
        n = sum(map(len, live))
        assert n and a.v.stats(kind) == f.v.stats(kind) == (n, sum(int(x.sum()) for x in live) / n)
        assert all(p.postings.len_sum is not None for p in parts) and any(p.live is not None for p in parts)
        unkept = [postings.Part(_without_len_sum(p.postings), p.live) for p in parts]
        assert postings.live_stats(unkept) == a.v.stats(kind)
    want = lists(gf, np.arange(gf.n))
    assert sum(map(len, want)) > 100
    for dense_after in (10**9, 0):  # searched over the deltas' slot lists, then from the per-slot owner arrays
        monkeypatch.setattr(graph_csr, "DENSE_AFTER", dense_after)
        ga = a.v._build_graph()  # a new graph: its lookups counted from none
        assert lists(ga, slots) == want
        assert ga.degree(gone).tolist() == [0] * len(gone)
        assert [len(ga.incident(int(v))[0]) for v in slots] == list(map(len, want))
        assert (ga._dense is None) == (dense_after > 0)
    answers = _answers(inc, "alice")
    assert answers == _answers(fresh, "alice")
    assert sum(map(len, answers)) > 50
    # the removed tenant: no folder, no answers
    assert open_tenant_index(inc.index_dir, "bob") is None and not tenant_dir(inc.index_dir, "bob").exists()
    assert recall("garden", "bob", lake=inc) == []


def test_a_compressed_base_with_deltas_answers_like_an_uncompressed_fresh_base(tmp_path: Path, monkeypatch) -> None:
    """Text compressed in every segment that can train a dictionary (the base, not the small deltas): the same
    contents and answers as a fresh base stored without compression."""
    monkeypatch.setattr(index_build, "COMPACT_SHARE", 100.0)
    monkeypatch.setattr(segment, "ZSTD_MIN_ROWS", 16)
    inc, stats = _build(tmp_path / "inc", ROUNDS)
    assert [s["alice"]["mode"] for s in stats] == ["base", "delta", "delta"]
    a = open_tenant_index(inc.index_dir, "alice")
    base = a.v.segments[0]
    assert base.nodes.schema.field("text").type == pa.binary() and "id" not in base.nodes.column_names
    assert base.messages.schema.field("text").type == pa.binary()
    monkeypatch.setattr(segment, "ZSTD_MIN_ROWS", 10**9)
    fresh, _ = _build(tmp_path / "fresh", [ROUNDS[-1]])
    f = open_tenant_index(fresh.index_dir, "alice")
    assert f.v.segments[0].nodes.schema.field("text").type == pa.string()
    assert a.contents() == f.contents()
    assert _answers(inc, "alice") == _answers(fresh, "alice")


def test_each_delta_matches_a_fresh_base_of_its_round(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(index_build, "COMPACT_SHARE", 100.0)
    for i in range(1, len(ROUNDS) + 1):
        inc, _ = _build(tmp_path / "inc", [ROUNDS[i - 1]])  # the same lake, one round further each time
        fresh, _ = _build(tmp_path / f"fresh{i}", [ROUNDS[i - 1]])
        for tenant in ROUNDS[i - 1]:
            assert (
                open_tenant_index(inc.index_dir, tenant).contents()
                == open_tenant_index(fresh.index_dir, tenant).contents()
            ), (i, tenant)
            assert _answers(inc, tenant) == _answers(fresh, tenant), (i, tenant)


def test_deltas_compact_into_a_base_past_the_threshold_and_unchanged_tables_write_nothing(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setattr(index_build, "COMPACT_SHARE", 0.2)
    lake, stats = _build(
        tmp_path,
        [
            ROUNDS[0],
            ROUNDS[0],
            {"alice": {"convs": range(0, 6), "changed": {"f_m2_0": {"importance": 0.9}}}},
            ROUNDS[1],
        ],
    )
    modes = [s["alice"]["mode"] for s in stats]
    assert modes == ["base", "unchanged", "delta", "base"], modes  # round 2 touches < 20 %, round 3 more
    idx = open_tenant_index(lake.index_dir, "alice")
    assert len(idx.v.segments) == 1


def test_deltas_past_the_segment_limit_merge_into_one_delta_over_the_base(tmp_path: Path, monkeypatch) -> None:
    """At MAX_SEGMENTS the deltas are rewritten as one delta of what changed since the base (the base kept as it
    is), where that is still under COMPACT_SHARE of it; it answers like a fresh base of the same tables. Past the
    share, the compaction is a new base."""
    monkeypatch.setattr(index_build, "COMPACT_SHARE", 100.0)
    monkeypatch.setattr(index_build, "MAX_SEGMENTS", 3)
    lake, stats = _build(tmp_path / "inc", [ROUNDS[0], ROUNDS[1], ROUNDS[2]])
    folder = tenant_dir(lake.index_dir, "alice")
    first = json.loads((folder / (folder / "CURRENT").read_text()).read_text())["segments"]
    assert [s["alice"]["mode"] for s in stats] == ["base", "delta", "delta"] and len(first) == 3
    _, stats = _build(tmp_path / "inc", [ROUNDS[1]])  # a 4th segment: the deltas merge
    assert stats[0]["alice"]["mode"] == "delta" and stats[0]["alice"]["reason"].startswith("merged 2 deltas (")
    current = json.loads((folder / (folder / "CURRENT").read_text()).read_text())
    assert current["segments"][0] == first[0] and len(current["segments"]) == 2
    assert sorted(p.name for p in folder.iterdir() if p.is_dir()) == current["segments"]  # the old deltas removed
    fresh, _ = _build(tmp_path / "fresh", [ROUNDS[1]])
    assert (
        open_tenant_index(lake.index_dir, "alice").contents() == open_tenant_index(fresh.index_dir, "alice").contents()
    )
    assert _answers(lake, "alice") == _answers(fresh, "alice")
    # the merged delta numbers new nodes from the base's slots on: a next delta builds on it as on any other
    _, stats = _build(tmp_path / "inc", [ROUNDS[2]])
    assert stats[0]["alice"]["mode"] == "delta" and stats[0]["alice"]["segments"] == 3
    fresh2, _ = _build(tmp_path / "fresh2", [ROUNDS[2]])
    assert (
        open_tenant_index(lake.index_dir, "alice").contents() == open_tenant_index(fresh2.index_dir, "alice").contents()
    )
    assert _answers(lake, "alice") == _answers(fresh2, "alice")
    # more changed since the base than the share allows: a new base
    _build(tmp_path / "inc", [ROUNDS[1]])
    monkeypatch.setattr(index_build, "COMPACT_SHARE", 0.01)
    _, stats = _build(tmp_path / "inc", [ROUNDS[2]])
    assert stats[0]["alice"]["mode"] == "base" and "changed since the base" in stats[0]["alice"]["reason"]
    assert len(json.loads((folder / (folder / "CURRENT").read_text()).read_text())["segments"]) == 1
    assert _answers(lake, "alice") == _answers(fresh2, "alice")


def _shared_chunk_lake(root: Path, extra: int) -> tuple[Lake, dict[str, str]]:
    """Two conversations of the same bytes on the same day (one content-addressed RawChunk, two raw_chunks rows),
    then one conversation a word for `extra` words; the lake and {raw_id: text}."""
    b = LakeBuilder(root)
    same = [("m1", "Ann", "we met at the usual place"), ("m2", "Bo", "see you there then")]
    b.conversation("alice", "c_a", same)
    b.conversation("alice", "c_b", same)
    for i, word in enumerate(SHARED_CHUNK_WORDS[:extra]):
        b.conversation("alice", f"c{i}", [(f"w{i}", "Ann", f"I bought a {word} today")], datetime(2023, 5, 2 + i, 9))
    return b.write(index=False), {c["id"]: c["text"] for c in b.chunks}


SHARED_CHUNK_WORDS = [
    "zebra",
    "xylophone",
    "trombone",
    "lantern",
    "hammock",
    "compass",
    "walnut",
    "violin",
    "kettle",
    "blanket",
    "saddle",
    "teapot",
    "bicycle",
]


def test_a_chunk_two_conversations_share_is_one_raw_document(tmp_path: Path, monkeypatch) -> None:
    """The raw passage documents line up with the chunk rows they cite when the raw_chunks table holds one
    content-addressed chunk twice (it made one document per row: a passage sorted after it was cited as the chunk
    rows before it, and a base with a delta failed to compute its raw statistics)."""
    monkeypatch.setattr(index_build, "COMPACT_SHARE", 100.0)
    lake, _ = _shared_chunk_lake(tmp_path / "inc", 12)
    assert build_indexes(lake)["graphs"]["alice"]["mode"] == "base"
    lake, texts = _shared_chunk_lake(tmp_path / "inc", 13)
    assert build_indexes(lake)["graphs"]["alice"]["mode"] == "delta"
    idx = open_tenant_index(lake.index_dir, "alice")
    base = idx.v.segments[0]
    assert len(base.raw_doc_chunk) == len(base.raw_postings.doc_len) == base.chunks.num_rows == 13
    info = idx.info()
    for word in [*SHARED_CHUNK_WORDS, "usual place"]:
        hits = idx.raw_bm25(info, word, 3)
        assert hits, word
        assert word in texts[hits[0][0]], word
    fresh, _ = _shared_chunk_lake(tmp_path / "fresh", 13)
    build_indexes(fresh)
    assert idx.contents() == open_tenant_index(fresh.index_dir, "alice").contents()


# --------------------------------------------------------------------------- atomic swap


def test_a_reader_keeps_its_version_while_deltas_and_a_compaction_replace_it(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(index_build, "COMPACT_SHARE", 100.0)
    lake, _ = _build(tmp_path, [ROUNDS[0]])
    old = open_tenant_index(lake.index_dir, "alice")
    before = old.contents()
    old_segments = [seg.folder for seg in old.v.segments]
    _build(tmp_path, [ROUNDS[1]])  # a delta
    monkeypatch.setattr(index_build, "COMPACT_SHARE", 0.0)
    _build(tmp_path, [ROUNDS[2]])  # a compaction: only the new base is kept
    assert not any(p.exists() for p in old_segments)  # the old base and delta are deleted at once
    _build(tmp_path, [ROUNDS[1]])
    assert old.contents() == before  # still served from its mapped files
    new = open_tenant_index(lake.index_dir, "alice")
    assert new.v is not old.v and new.contents() != before and len(new.v.segments) == 1
    assert [r.to_json() for r in recall("garden coffee", "alice", lake=lake)]
    folder = tenant_dir(lake.index_dir, "alice")
    assert not [p.name for p in folder.iterdir() if p.name.startswith(".")]
    assert len(list(folder.glob("m*.json"))) <= index_commit.KEEP_VERSIONS


def test_a_forced_compaction_reads_nothing_of_the_version_it_replaces(tmp_path: Path, monkeypatch) -> None:
    """build_indexes(full=True) writes new bases without first taking the current version's state (its frames of
    every node, list, chunk and message group: ~0.7 GB and seconds at 1M messages), and they hold what a fresh base
    of the same tables holds; an ordinary build does compare."""
    monkeypatch.setattr(index_build, "COMPACT_SHARE", 100.0)
    lake, _ = _build(tmp_path / "inc", ROUNDS[:2])  # a base and a delta
    taken: list[str] = []
    state = index_build.current_state
    monkeypatch.setattr(index_build, "current_state", lambda v: taken.append(v.tenant) or state(v))
    stats = build_indexes(lake, full=True)["graphs"]
    assert taken == [] and {s["mode"] for s in stats.values()} == {"base"}
    assert {s["reason"] for s in stats.values()} == {"forced"}
    fresh, _ = _build(tmp_path / "fresh", [ROUNDS[1]])
    for tenant in ("alice", "bob"):
        a, f = open_tenant_index(lake.index_dir, tenant), open_tenant_index(fresh.index_dir, tenant)
        assert len(a.v.segments) == 1 and a.contents() == f.contents()
    assert build_indexes(lake)["graphs"]["alice"]["mode"] == "unchanged" and sorted(taken) == ["alice", "bob"]


def test_a_segment_is_built_from_frames_its_tenants_prepared_tables_no_longer_hold(tmp_path: Path, monkeypatch) -> None:
    """A base writer takes the prepared frames (Prepared.take) and makes the neighbour lists before build_segment
    starts: the half-edges (~1 GB at 1M messages) are not held while the documents, postings and files are made,
    and build_segment is the last holder of the nodes, chunks and message pieces, which it frees as it goes. A
    delta takes the half-edges and message pieces too. The stats and manifests still count every row."""
    from recall import segment_build

    made: list[index_build.Prepared] = []
    held: list[dict[str, Any]] = []
    prepare, build_segment = index_build.prepare, segment_build.build_segment
    monkeypatch.setattr(index_build, "prepare", lambda *a: made.append(prepare(*a)) or made[-1])

    def watched(folder, kind, *args):
        p = made[-1]
        held.append({"kind": kind, **{n: getattr(p, n).height for n in ("half", "nodes", "messages", "chunks")}})
        return build_segment(folder, kind, *args)

    monkeypatch.setattr(index_build, "build_segment", watched)
    monkeypatch.setattr(index_build, "COMPACT_SHARE", 100.0)
    lake, _ = _build(tmp_path / "inc", ROUNDS[:2])  # a base, then a delta
    assert [h["kind"] for h in held] == ["base", "base", "delta", "delta"]
    for h in held:
        assert h["half"] == 0 and h["messages"] == 0, h
        if h["kind"] == "base":
            assert h["nodes"] == 0 and h["chunks"] == 0, h
    stats = build_indexes(lake, full=True)["graphs"]
    fresh, _ = _build(tmp_path / "fresh", [ROUNDS[1]])
    for tenant in ("alice", "bob"):
        a, f = open_tenant_index(lake.index_dir, tenant), open_tenant_index(fresh.index_dir, tenant)
        assert a.contents() == f.contents() and stats[tenant]["edges"] > 0
        assert a.v.manifest["n_nodes"] == stats[tenant]["vertices"] > 0 and a.v.manifest["n_chunks"] > 0


def test_a_compaction_leaves_one_base_on_disk(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(index_build, "COMPACT_SHARE", 100.0)
    lake, _ = _build(tmp_path, [ROUNDS[0], ROUNDS[1]])  # a base and a delta
    folder = tenant_dir(lake.index_dir, "alice")
    monkeypatch.setattr(index_build, "COMPACT_SHARE", 0.0)
    _build(tmp_path, [ROUNDS[2]])
    current = json.loads((folder / (folder / "CURRENT").read_text()).read_text())
    assert (
        sorted(p.name for p in folder.iterdir() if p.is_dir()) == current["segments"] and len(current["segments"]) == 1
    )
    assert [p.name for p in folder.glob("m*.json")] == [(folder / "CURRENT").read_text()]


@pytest.mark.parametrize("when", ["manifest", "adjacency", "half_removed"])
def test_a_reader_opening_a_version_a_writer_removes_opens_the_new_one(tmp_path: Path, monkeypatch, when) -> None:
    """A reader that read CURRENT just before a compaction removed that version (its manifest, or its segment while
    the reader was mapping it, or half of that segment: the writer's rmtree still going) opens CURRENT again and gets
    the new version, whole: its graph too, not a segment taken for damaged."""
    from recall import tenant_index

    monkeypatch.setattr(index_build, "COMPACT_SHARE", 0.0)
    lake, _ = _build(tmp_path, [ROUNDS[0]])
    folder = tenant_dir(lake.index_dir, "alice")
    stale = (folder / "CURRENT").read_text()
    raced: list[str] = []

    def race() -> None:
        if not raced:
            raced.append(stale)
            _build(tmp_path, [ROUNDS[2]])  # commits a new base and removes the version the reader is opening
            assert not (folder / stale).exists()

    halfway: list[Path] = []
    if when == "half_removed":
        # the writer's removal stopped after meta.json and the graph's files: the other files are still there
        real_rmtree = shutil.rmtree

        def partial_rmtree(path: Any, *a: Any, **k: Any) -> None:
            if Path(path).parent != folder or not Path(path).name[1:].isdigit():
                return real_rmtree(path, *a, **k)
            halfway.append(Path(path))
            for f in Path(path).glob("adj_*.npy"):
                f.unlink()

        monkeypatch.setattr(shutil, "rmtree", partial_rmtree)  # the module index_commit removes segments with

    if when == "manifest":
        real_read = Path.read_text

        def read_text(self: Path, *a: Any, **k: Any) -> str:
            text = real_read(self, *a, **k)
            if self == folder / "CURRENT" and not raced:
                race()
            return text

        monkeypatch.setattr(Path, "read_text", read_text)
    else:  # "adjacency", "half_removed": the writer runs while the reader maps the old segment's graph
        from recall.graph_csr import Adjacency as real_adjacency

        def adjacency(seg_folder: Path, *a: Any) -> Any:
            race()
            return real_adjacency(seg_folder, *a)

        monkeypatch.setattr(segment, "Adjacency", adjacency)
    reader = open_tenant_index(lake.index_dir, "alice")
    assert raced and reader is not None
    assert reader.v.manifest["name"] == (folder / "CURRENT").read_text() != stale
    assert all(seg.adjacency is not None for seg in reader.v.segments)
    monkeypatch.undo()
    assert (when == "half_removed") == bool(halfway) and all((p / "chunks.arrow").exists() for p in halfway)
    for p in halfway:
        shutil.rmtree(p)
    fresh = tenant_index.TenantIndex(tenant_index.Version(folder, tenant_index.read_current(folder), "alice"))
    assert reader.contents() == fresh.contents()


def test_a_writer_builds_a_base_where_current_names_a_manifest_that_is_gone(tmp_path: Path) -> None:
    lake, _ = _build(tmp_path, [ROUNDS[0]])
    folder = tenant_dir(lake.index_dir, "alice")
    (folder / (folder / "CURRENT").read_text()).unlink()  # damaged by hand: readers are told, not shown "no index"
    with pytest.raises(FileNotFoundError):
        open_tenant_index(lake.index_dir, "alice")
    _, stats = _build(tmp_path, [ROUNDS[1]])
    assert stats[0]["alice"]["mode"] == "base"
    assert [r.to_json() for r in recall("garden coffee", "alice", lake=lake)]


def test_a_killed_writers_leftovers_are_cleaned_and_the_next_write_succeeds(tmp_path: Path) -> None:
    lake, _ = _build(tmp_path, [ROUNDS[0]])
    folder = tenant_dir(lake.index_dir, "alice")
    current = (folder / "CURRENT").read_text()
    gen = int(current[1:7])
    (folder / f".s{gen + 1:06d}.abc").mkdir()  # killed while writing a segment
    (folder / f"s{gen + 1:06d}").mkdir()  # killed after renaming it, before the manifest
    (folder / f"s{gen + 1:06d}" / "junk").write_bytes(b"x")
    (folder / ".CURRENT.xyz.tmp").write_bytes(b"m999999.json")
    assert open_tenant_index(lake.index_dir, "alice").contents()  # readers never see any of it
    _build(tmp_path, [ROUNDS[1]])
    assert not [p.name for p in folder.iterdir() if p.name.startswith(".")]
    assert (folder / "CURRENT").read_text() == f"m{gen + 1:06d}.json"
    assert open_tenant_index(lake.index_dir, "alice").contents()


# --------------------------------------------------------------------------- tenant isolation


def test_no_read_without_a_tenant_and_no_folder_serves_another_tenant(tmp_path: Path) -> None:
    lake, _ = _build(tmp_path, [ROUNDS[0]])
    with pytest.raises(ValueError):
        open_tenant_index(lake.index_dir, "")
    assert open_tenant_index(lake.index_dir, "mallory") is None
    # a folder copied under another tenant's name is refused: the manifest names its tenant
    shutil.copytree(tenant_dir(lake.index_dir, "alice"), tenant_dir(lake.index_dir, "mallory"))
    with pytest.raises(ValueError, match="another tenant"):
        open_tenant_index(lake.index_dir, "mallory")
    # the same node ids in two tenants: each reader sees its own rows, graph and chunks only
    a, b = open_tenant_index(lake.index_dir, "alice"), open_tenant_index(lake.index_dir, "bob")
    assert a.nodes(["ep_m0_0"])["ep_m0_0"]["raw_refs"] != b.nodes(["ep_m0_0"])["ep_m0_0"]["raw_refs"]
    b_chunks = {r["raw_id"] for r in b.nodes(["ep_m0_0"])["ep_m0_0"]["raw_refs"]}
    assert a.chunks(sorted(b_chunks)) == {} and a.messages_in(sorted(b_chunks)) == []
    assert "ep_m5_0" in a.contents()["nodes"] and "ep_m5_0" not in b.contents()["nodes"]
    assert all(
        n.startswith(("ep_m0", "ep_m1", "f_m0", "f_m1", "ent_", "topic"))
        for r in recall("garden coffee guitar", "bob", k=20, lake=lake)
        for n in [r.node_id]
    )


def test_recall_on_a_lake_indexed_before_the_recall_index_answers_from_duckdb(tmp_path: Path) -> None:
    lake, _ = _build(tmp_path, [ROUNDS[0]])
    shutil.rmtree(recall_dir(lake.index_dir))
    trace: list = []
    got = recall("garden coffee", "alice", lake=lake, trace=trace)
    assert got and all(r.citations for r in got if r.type != "Entity")
    assert next(s for s in trace if s["stage"] == "expand")["detail"]["graph"] == "missing"


def test_prepare_hashes_are_stable_and_see_every_column_recall_reads(tmp_path: Path) -> None:
    b = LakeBuilder(tmp_path)
    _tenant_rows(b, "alice", range(0, 2))
    lake = b.write(index=False)
    from r2g.lake_graph import read_lake_table

    tables = [read_lake_table(lake, n) for n in ("nodes", "edges", "raw_chunks", "messages")]
    assert tables[0].num_rows >= 2
    one, two = index_build.prepare(*tables), index_build.prepare(*tables)
    assert one.nodes["hash"].to_list() == two.nodes["hash"].to_list()
    nodes = tables[0].to_pylist()
    for column, value in (
        ("sentiment", 0.3),
        ("aliases", ["x"]),
        ("raw_refs", [{"raw_id": "raw_x", "offset": 1, "length": 2}]),
        ("keywords", ["new"]),
        ("last_seen", T0 + timedelta(days=400)),
        ("speaker", "Zed"),
    ):
        edited = [dict(n) for n in nodes]
        edited[0][column] = value
        p = index_build.prepare(pa.Table.from_pylist(edited, schema=tables[0].schema), *tables[1:])
        assert p.nodes["hash"].to_list() != one.nodes["hash"].to_list(), column


def test_node_documents_and_mmr_tokens_from_one_segmentation_equal_their_definitions() -> None:
    from recall.index import node_doc
    from recall.query_tokens import search_tokens
    from recall.segment_build import docs_with_mmr, node_docs

    titles, texts, keywords = [], [], []
    for name in ("zh_dev.json", "locomo_dev.json"):
        if not (EVAL / name).exists():
            continue
        for sample in json.loads((EVAL / name).read_text("utf-8"))[:1]:
            for key, turns in sample["conversation"].items():
                if key.startswith("session_") and isinstance(turns, list):
                    for t in turns:
                        titles.append(f"{t['speaker']}: {t['text'][:30]}")
                        texts.append(t["text"])
                        keywords.append(t["text"].split()[:2] + (["足球"] if len(titles) % 5 == 0 else []))
    titles += ["小明", None, "Ann", "café 咖啡", ""]
    texts += [None, "踢足球", "likes tea", "Zoë's 咖啡馆 AT&T", ""]
    keywords += [["x"], None, ["茶"], ["c#", "卡拉OK"], []]
    docs, mmr = node_docs(titles, texts, keywords, node_doc)
    assert docs == [node_doc(*row) for row in zip(titles, texts, keywords)]
    for title, text, tokens in zip(titles, texts, mmr):
        assert tokens is None or tokens == search_tokens(f"{title or ''} {text or ''}")
    assert sum(t is not None for t in mmr) >= 3  # the built-in rows alone give three (eval files may be absent)
    # the same from documents made once by the index build (every other node's document given, the rest made)
    ids = [f"n{i:05d}" for i in range(len(titles))]
    rows = pl.DataFrame(
        {"id": ids, "title": titles, "text": texts, "keywords": keywords},
        schema={"id": pl.Utf8, "title": pl.Utf8, "text": pl.Utf8, "keywords": pl.List(pl.Utf8)},
    )
    given = pl.DataFrame({"id": ids[::2], "doc": docs[::2]})
    assert docs_with_mmr(rows, given, node_doc) == (docs, mmr)
    # an id given twice still gives one document (document i of the postings is node row i)
    assert docs_with_mmr(rows, pl.concat([given, given.head(3)]), node_doc) == (docs, mmr)


def test_an_index_of_another_format_is_not_read_and_recall_answers_from_duckdb(tmp_path: Path) -> None:
    lake, _ = _build(tmp_path, [ROUNDS[0]])
    folder = tenant_dir(lake.index_dir, "alice")
    manifest = folder / (folder / "CURRENT").read_text()
    manifest.write_text(manifest.read_text().replace('"format": ', '"format": 9'))  # 3 → 93
    (folder / ".CURRENT.tmp").write_text((folder / "CURRENT").read_text())
    (folder / ".CURRENT.tmp").replace(folder / "CURRENT")  # readers reopen
    trace: list = []
    assert recall("garden coffee", "alice", lake=lake, trace=trace)
    assert next(s for s in trace if s["stage"] == "expand")["detail"]["graph"] == "missing"
    _, stats = _build(tmp_path, [ROUNDS[0]])  # the next build makes a base of this format
    assert stats[0]["alice"]["mode"] == "base"
    assert open_tenant_index(lake.index_dir, "alice").v.manifest["format"] == FORMAT


def test_recall_imports_neither_pandas_nor_igraph(tmp_path: Path) -> None:
    """A query (with and without hits, then through the CLI) loads no pandas (~0.3 s: some pyarrow calls import
    it), no igraph (which imports matplotlib, ~1 s), no DuckDB and no jsonschema (~90 ms each: recall reads its own
    index, and the CLI parses --since without the tool schema): all would land on a cold `memctl recall`."""
    lake, _ = _build(tmp_path, [ROUNDS[0]])
    heavy = ("pandas", "igraph", "matplotlib", "duckdb", "jsonschema")
    code = (
        "import contextlib, io, sys\nfrom pathlib import Path\nfrom raw_store.lake import Lake\nfrom recall import recall\n"
        "from assets.cli import main\n"
        f"lake = Lake(Path({str(lake.root)!r}))\n"
        "hits = [len(recall(q, 'alice', k=8, lake=lake)) for q in [*sys.argv[1:], 'zzzqqq nothing']]\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        f"    rc = main(['--data', {str(lake.root)!r}, 'recall', sys.argv[1], '--tenant', 'alice', '--json', '--no-log',"
        " '--since', '2020-01-01'])\n"
        "assert rc == 0 and out.getvalue().startswith('['), out.getvalue()\n"
        f"print(hits, sorted(m for m in {heavy!r} if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, *QUERIES], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout
    hits, loaded = out.strip().rsplit("] ", 1)
    assert loaded == "[]", out
    assert sum(int(n) for n in hits.strip("[").split(",")) > 10 and hits.endswith(", 0"), out


def _random_advice(folder: Path) -> dict[str, set[bool]]:
    """Per file of `folder` this process has mapped: whether each map is advised for random reads (VmFlags "rr" in
    /proc/self/smaps: MADV_RANDOM)."""
    out: dict[str, set[bool]] = {}
    path = None
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split(maxsplit=5)
        if (
            len(head) >= 5 and "-" in head[0] and ":" in head[3]
        ):  # a mapping's header: range perms offset dev inode [path]
            path = Path(head[5]) if len(head) == 6 else None
        elif line.startswith("VmFlags:") and path is not None and path.parent == folder:
            out.setdefault(path.name, set()).add("rr" in line.split()[1:])
    return out


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="reads the maps' advice from Linux's /proc")
def test_a_query_maps_the_index_for_random_reads_and_the_writer_for_whole_columns(tmp_path: Path) -> None:
    """A query reads a few rows spread over whole columns: its maps are advised MADV_RANDOM, so a cold page fault
    reads one page, not the device's read-ahead window (at 1M messages a cold query read ~1 GB of the 1.3 GB
    index). The writer's comparison scans whole columns and keeps read-ahead."""
    lake, _ = _build(tmp_path, [ROUNDS[0]])
    reader = open_tenant_index(lake.index_dir, "alice")
    assert reader is not None
    seg = reader.v.folder / reader.v.manifest["segments"][0]
    advice = _random_advice(seg)
    mapped_files = {
        "nodes.arrow",
        "node_rec.npy",
        "nodes.keys.npy",
        "node_post_doc.npy",
        "adj_nbr.npy",
        "chunks.arrow",
        "messages.arrow",
    }
    assert mapped_files <= advice.keys()
    assert all(flags == {True} for flags in advice.values()), advice

    scan = TenantIndex(Version(reader.v.folder, reader.v.manifest, "alice", random=False))
    both = _random_advice(seg)
    assert all(both[name] == {True, False} for name in mapped_files), both
    ids = scan.v.segments[0].node_ids(np.arange(scan.v.segments[0].nodes.num_rows))
    assert len(ids) > 10 and scan.nodes(ids) == reader.nodes(ids)  # the same rows either way


def test_segments_without_fences_answer_alike_and_the_next_write_adds_their_fences(tmp_path: Path, monkeypatch) -> None:
    """A base and a delta written before segments kept fences (their *.fence.npy removed) answer every query as
    the fenced ones do; the next index write adds the kept segments' fences, byte for byte the ones they had."""
    from recall import tenant_index
    from recall.sorted_keys import fence_path
    from recall.store import FileCache

    monkeypatch.setattr(index_build, "COMPACT_SHARE", 100.0)  # the rounds stay deltas over one base
    lake, stats = _build(tmp_path, ROUNDS[:2])
    assert [s["alice"]["mode"] for s in stats] == ["base", "delta"]
    fenced = _answers(lake, "alice")
    folder = open_tenant_index(lake.index_dir, "alice").v.folder
    fences = {p: p.read_bytes() for p in folder.glob("s*/*.fence.npy")}
    names = {p.name for p in fences}
    assert {"nodes.keys.fence.npy", "adj_slot.fence.npy", "chunks.keys.fence.npy", "node_terms.keys.fence.npy"} <= names
    for p in fences:
        p.unlink()
    monkeypatch.setattr(tenant_index, "_VERSIONS", FileCache())  # the versions this process opened are read again
    reader = open_tenant_index(lake.index_dir, "alice")
    assert all(s.node_keys.fence is None for s in reader.v.segments)
    assert _answers(lake, "alice") == fenced
    _, stats = _build(tmp_path, ROUNDS[2:])
    assert stats[0]["alice"]["mode"] == "delta"
    kept = [p for p in fences if p.parent.exists()]
    assert kept and all(p.read_bytes() == fences[p] for p in kept)
    assert all(fence_path(p).exists() for p in folder.glob("s*/*.keys.npy"))


def test_an_index_of_another_format_answers_through_duckdb_and_says_so_once(tmp_path: Path, caplog) -> None:
    """After an upgrade, before `memctl materialize` rebuilds the index, recall still answers (from the DuckDB file,
    without graph expansion), and says why once per index, not once per query."""
    lake, _ = _build(tmp_path, [ROUNDS[0]])
    folder = tenant_dir(lake.index_dir, "alice")
    manifest = json.loads((folder / (folder / "CURRENT").read_text("utf-8").strip()).read_text("utf-8"))
    (folder / "m_older.json").write_text(json.dumps({**manifest, "format": FORMAT - 1}), "utf-8")
    (folder / "CURRENT.tmp").write_text("m_older.json", "utf-8")
    os.replace(folder / "CURRENT.tmp", folder / "CURRENT")
    with caplog.at_level(logging.WARNING, logger="recall.engine"):
        answers = [recall("garden coffee", "alice", lake=lake) for _ in range(3)]
    said = [r.getMessage() for r in caplog.records if r.name == "recall.engine"]
    assert len(said) == 1 and f"format {FORMAT - 1}, this code reads {FORMAT}" in said[0], said
    assert "memctl materialize" in said[0]
    assert answers[0] and answers[1] == answers[0] == answers[2]
