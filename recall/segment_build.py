"""One segment of a tenant's recall index (recall.index_build) from prepared frames: the nodes' FTS documents and
MMR tokens, BM25 postings of nodes and raw passages, entity names, CSR neighbour lists and message groups, written
by recall.segment.write_segment."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

from r2g.tokens import han_in, has_han, segment_for_fts
from recall.graph_csr import AdjacencyArrays
from recall.postings import build_postings
from recall.query_tokens import jieba_tokens
from recall.segment import MESSAGE_ROW_COLS, NODE_ROW_COLS, SEG_CHUNKS, SEG_MESSAGES, SEG_NODES, write_segment


def fts_settings() -> tuple[str, tuple[str, ...], Callable[..., str]]:
    # recall.index imports recall.index_build, which imports this module; its constants are read at call time
    from recall.index import FTS_IGNORE, INACTIVE_STATUS, node_doc

    return FTS_IGNORE, INACTIVE_STATUS, node_doc


def node_docs(
    titles: list, texts: list, keywords: list, node_doc: Callable[..., str]
) -> tuple[list[str], list[list[str] | None]]:
    """Each node's FTS document (recall.index.node_doc) and, for a node whose title or text holds Han, the search
    tokens MMR compares it by (search_tokens(title + " " + text)), from one segmentation: jieba segments the
    space-separated parts of a text holding Han one by one, so the document is those tokens followed by the
    keywords' (tests/test_recall_index.py checks both against the definitions)."""
    docs: list[str] = []
    mmr: list[list[str] | None] = []
    memo: dict[str, list[str]] = {}  # jieba once per distinct piece (r2g.tokens.han_tokens)
    for title, text, kw in zip(titles, texts, keywords):
        head = f"{title or ''} {text or ''}"
        if has_han(head):
            tokens = jieba_tokens(head, memo)
            docs.append(" ".join(tokens + jieba_tokens(" ".join(kw or []), memo)))
            mmr.append(tokens)
        else:
            docs.append(node_doc(title, text, kw))
            mmr.append(None)
    return docs, mmr


def with_given_docs(rows: pl.DataFrame, given: pl.DataFrame) -> pl.DataFrame:
    """`rows` (id, …) with the `doc` of `given` (id, doc), in their order and one row each: document i of a segment's
    postings is row i, so an id `given` holds twice (a chunk two conversations share) still gives one document."""
    docs = given.select("id", "doc").unique("id", keep="first", maintain_order=True)
    return rows.join(docs, on="id", how="left", maintain_order="left")


def docs_with_mmr(
    nodes: pl.DataFrame, given: pl.DataFrame | None, node_doc: Callable[[str | None, str | None, list[str] | None], str]
) -> tuple[list[str], list[list[str] | None]]:
    """node_docs' documents and MMR tokens for `nodes` (id, title, text, keywords), taking the documents from `given`
    (id, doc: recall.index made them once for the whole build) where it has the node: a document holding Han is
    jieba_tokens(title + " " + text) followed by the keywords' tokens, so MMR's tokens are the document's tokens
    minus as many at the end as the keywords make (only the short keywords are segmented again)."""
    if given is None or nodes.height == 0:
        return node_docs(nodes["title"].to_list(), nodes["text"].to_list(), nodes["keywords"].to_list(), node_doc)
    rows = with_given_docs(nodes.select("id", "title", "text", "keywords"), given)
    docs: list[str] = rows.get_column("doc").to_list()
    mmr: list[list[str] | None] = [None] * rows.height  # a node whose title and text hold no Han: none
    n_kw: dict[str, int] = {}  # keyword strings repeat (entity names): ~half of a lake's Han nodes share one
    memo: dict[str, list[str]] = {}  # and their pieces repeat across strings (r2g.tokens.han_tokens)
    # only the rows with work to do go through Python: a document to make, or MMR tokens (title or text holds Han;
    # has_han of both, found by polars)
    han = han_in(pl.col("title")) | han_in(pl.col("text"))
    rows = rows.with_row_index("_i")
    for i, title, text, kw in (
        rows.filter(pl.col("doc").is_null()).select("_i", "title", "text", "keywords").iter_rows()
    ):
        (docs[i],), (mmr[i],) = node_docs([title], [text], [kw], node_doc)
    for i, kw, doc in rows.filter(pl.col("doc").is_not_null() & han).select("_i", "keywords", "doc").iter_rows():
        words, joined = doc.split(), " ".join(kw or [])
        if joined not in n_kw:
            n_kw[joined] = len(jieba_tokens(joined, memo))
        mmr[i] = words[: len(words) - n_kw[joined]]
    return docs, mmr


def build_segment(
    folder: Path,
    kind: str,
    nodes: pl.DataFrame,
    adjacency: AdjacencyArrays,
    chunks: pl.DataFrame,
    messages: pl.DataFrame,
    msg: pl.DataFrame,
    removed_slots: np.ndarray,
    removed_chunks: list[str],
    removed_msgs: list[str],
    meta: dict,
    docs: Callable[[pl.DataFrame, str], pl.DataFrame] | None = None,
) -> dict:
    """Write one segment: `nodes` (with slots), the neighbour lists `adjacency` (adjacency_arrays), chunks, message
    groups, and what it removes. Returns counts and seconds per part. Each frame is let go here once used: handed
    over as the only reference (a base's are its tenant's every row), it is freed before the next part is made."""
    ignore, _, node_doc = fts_settings()
    t = time.perf_counter()
    timings = {}
    nodes = nodes.sort("id")
    chunks = chunks.sort("id")
    given = docs(nodes.select("id"), "node") if docs is not None and nodes.height else None
    documents, mmr = docs_with_mmr(nodes, given, node_doc)
    del given  # the intermediates go as soon as they are used (a segment is built in memory)
    timings["segment_docs"] = time.perf_counter() - t
    t = time.perf_counter()
    node_postings, tokenize = build_postings(documents, ignore)
    del documents
    timings["node_fts"] = time.perf_counter() - t
    t = time.perf_counter()
    node_table = (
        nodes.select("id", "slot", "hash", *NODE_ROW_COLS)
        # through Arrow's large lists: polars' own conversion of 383k Python lists (most None) took 1.9 s, this 0.5
        .with_columns(pl.Series("mmr", pa.array(mmr, pa.large_list(pa.large_string()))))
        .to_arrow()
        .cast(SEG_NODES)
    )
    del mmr
    names = _names(nodes)
    n_nodes = nodes.height
    del nodes
    passage = chunks["passage"].to_numpy().astype(bool) if chunks.height else np.zeros(0, bool)
    raw_doc_chunk = np.flatnonzero(passage).astype(np.int32)
    passages = chunks.filter(pl.col("passage")).select("id", "text")
    if docs is not None and passages.height:  # the partitions' documents: jieba ran on them when the file came
        passages = with_given_docs(passages, docs(passages.select("id"), "raw"))
    else:
        passages = passages.with_columns(pl.lit(None, pl.String).alias("doc"))
    memo: dict[str, list[str]] = {}
    raw_docs = [
        segment_for_fts(x or "", memo) if d is None else d for x, d in passages.select("text", "doc").iter_rows()
    ]
    timings["graph_rows"] = time.perf_counter() - t
    t = time.perf_counter()
    raw_postings, raw_tokenize = build_postings(raw_docs, ignore)
    del raw_docs, passages
    timings["raw_fts"] = time.perf_counter() - t
    t = time.perf_counter()
    n_chunks = chunks.height
    chunk_table = chunks.select("id", "path", "sha256", "conv_id", "ts", "hash").to_arrow().cast(SEG_CHUNKS)
    del chunks
    # a chunk's messages by conv_id, seq (Citer's order), ties by content: the same order whatever the input order
    messages = messages.sort(["piece", "conv_id", "seq", "msg_id", "raw_id", "offset", "h"], nulls_last=True)
    counts = messages.group_by("piece", maintain_order=True).len()
    msg = counts.rename({"piece": "key"}).join(msg, on="key", how="left")
    msg_ptr = np.r_[0, np.cumsum(counts["len"].to_numpy())].astype(np.int64)
    n_pieces = messages.height
    message_table = (
        messages.select("piece", "piece_offset", "piece_length", *MESSAGE_ROW_COLS).to_arrow().cast(SEG_MESSAGES)
    )
    del messages, counts
    write_segment(
        folder,
        kind=kind,
        nodes=node_table,
        node_postings=node_postings,
        names=names,
        adjacency=adjacency,
        chunks=chunk_table,
        raw_doc_chunk=raw_doc_chunk,
        raw_postings=raw_postings,
        messages=message_table,
        msg_keys=pa.array(msg["key"].to_list(), pa.string()),
        msg_ptr=msg_ptr,
        msg_hash=msg["hash"].to_numpy().astype(np.uint64) if msg.height else np.zeros(0, np.uint64),
        removed_slots=removed_slots,
        removed_chunks=removed_chunks,
        removed_msgs=removed_msgs,
        meta={
            **meta,
            "tokenize": tokenize or raw_tokenize,
            "nodes": n_nodes,
            "adjacency_lists": len(adjacency.slot),
            "half_edges": len(adjacency.nbr),
            "chunks": n_chunks,
            "message_pieces": n_pieces,
            "removed": {"slots": len(removed_slots), "chunks": len(removed_chunks), "msgs": len(removed_msgs)},
        },
    )
    timings["write"] = time.perf_counter() - t
    return {"tokenize": tokenize or raw_tokenize, "seconds": {k: round(v, 3) for k, v in timings.items()}}


def _names(nodes: pl.DataFrame) -> pa.Table:
    """(lower-cased title or alias, slot) of the Entities, sorted by name then slot (Python's lower(), as the query)."""
    ents = nodes.filter(pl.col("type") == "Entity").select("slot", "title", "aliases")
    pairs: set[tuple[str, int]] = set()
    for slot, title, aliases in zip(ents["slot"].to_list(), ents["title"].to_list(), ents["aliases"].to_list()):
        for name in [title, *(aliases or [])]:
            if name:
                pairs.add((name.lower(), slot))
    rows = sorted(pairs, key=lambda p: (p[0].encode("utf-8"), p[1]))
    return pa.table(
        {"name": pa.array([r[0] for r in rows], pa.string()), "slot": pa.array([r[1] for r in rows], pa.int32())}
    )


def adjacency_arrays(
    slot_of: pl.DataFrame, half: pl.DataFrame, adj: pl.DataFrame, empty_slots: np.ndarray, edge_types: list[str]
) -> AdjacencyArrays:
    """CSR lists of `adj`'s nodes from their half-edges, plus empty lists. A list is ordered by neighbour id, then
    out before in, then type name, then the half-edge's hash: the same order whichever segment writes it.

    `half` and `adj` name nodes by code, a row of `slot_of` (recall.index_build.Prepared); codes are in id order,
    so the neighbour's code orders by its id. All of it runs on integer arrays, none on the id strings."""
    slot = slot_of.get_column("slot").to_numpy().astype(np.int64)
    lists = pl.DataFrame(
        {
            "node_slot": np.r_[slot[adj.get_column("node").to_numpy()], empty_slots.astype(np.int64)],
            "hash": np.r_[adj.get_column("hash").to_numpy(), np.zeros(len(empty_slots), np.uint64)].astype(np.uint64),
        }
    ).sort("node_slot")
    wanted = np.zeros(len(slot), bool)
    wanted[adj.get_column("node").to_numpy()] = True
    keep = wanted[half.get_column("node").to_numpy()]
    h = half if keep.all() else half.filter(keep)  # a base writes every list
    del keep
    node = slot[h.get_column("node").to_numpy()]
    nbr = h.get_column("nbr").to_numpy()
    direction = h.get_column("dir").to_numpy()
    # each type's code in this version's list and its rank by name, by the type column's Enum codes
    types = h.get_column("type")
    assert isinstance(types.dtype, pl.Enum)  # (recall.index_build.prepare makes it one)
    names, ranked = types.dtype.categories.to_list(), sorted(edge_types)
    physical = types.to_physical().to_numpy()
    tcode = np.array([edge_types.index(t) for t in names], np.int64)[physical]
    trank = np.array([ranked.index(t) for t in names], np.int64)[physical]
    order = (
        pl.DataFrame({"s": node, "n": nbr, "d": direction, "t": trank, "h": h.get_column("h").to_numpy()})
        .select(pl.arg_sort_by("s", "n", "d", "t", "h"))
        .to_series()
        .to_numpy()
    )
    node = node[order]
    counts = np.searchsorted(node, lists.get_column("node_slot").to_numpy(), side="right") - np.searchsorted(
        node, lists.get_column("node_slot").to_numpy(), side="left"
    )
    return AdjacencyArrays(
        slot=lists.get_column("node_slot").to_numpy().astype(np.int32),
        ptr=np.r_[0, np.cumsum(counts)].astype(np.int64),
        nbr=slot[nbr[order]].astype(np.int32),
        code=(tcode[order] * 2 + direction[order]).astype(np.uint16),
        w=h.get_column("weight").to_numpy()[order].astype(np.float64),
        hash=lists.get_column("hash").to_numpy().astype(np.uint64),
    )
