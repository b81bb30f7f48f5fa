"""BM25 postings of one index segment, equal to DuckDB's FTS tables over its documents, and BM25 over several
segments.

Build: the segment's documents are indexed CHUNK_CHARS of text at a time exactly as `PRAGMA create_fts_index`
indexes the SQL-side tables of `recall.index` (porter stemmer, English stop-words, FTS_IGNORE): vectorised without
DuckDB (recall.fts_tokens._python_chunk_postings), or, for a chunk holding a character Python's Unicode tables do
not assign, by create_fts_index in a throwaway DuckDB whose `dict` / `terms` / `docs` tables are exported; the
chunks are put together as arrays:

  <name>_terms.arrow      the segment's terms (stems), sorted by UTF-8 bytes (Arrow IPC, one column)
  <name>_terms.keys.npy   their byte prefixes (recall.sorted_keys)
  <name>_term_ptr.npy     int64 [n_terms + 1]: CSR offsets of each term's postings
  <name>_post_doc.npy     int32: document rows, ascending within a term
  <name>_post_tf.npy      uint8: term frequency in that document (uint16 or int32 when some is larger)
  <name>_doc_len.npy      uint16 [n_docs]: document length in terms (DuckDB's docs.len; stop-words not
                          counted; int32 when some is longer)
  <name>_post_len.npy     uint8: the length of each posting's document (doc_len[post_doc]; uint16 or int32 when
                          some is longer), read beside its tf: a query reads the lengths of the documents its terms
                          name, a few pages, not the segment's doc_len (the whole 6.9 MB at 1M messages, 1,685 of a
                          cold query's 4,110 index pages)

Query: the query string is tokenized and stemmed as DuckDB does (`stem(unnest(tokenize(q)), 'porter')`
with the index's own tokenize macro, kept in the segment's meta): in Python (PyStemmer's libstemmer "porter")
for the macro recall.index writes, by DuckDB itself for any other; and scored with
DuckDB's match_bm25 formula — k1 = 1.2, b = 0.75, idf = log10((N - df + 0.5) / (df + 0.5) + 1) — where
N, avgdl and df count the live documents of all segments together, so a base plus delta segments
scores exactly like one segment built from the same documents.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa

from recall.fts_tokens import (
    PYTHON_TOKENIZE,
    STEMMER,
    _python_chunk_postings,
    python_stems,
)
from recall.sorted_keys import SortedKeys, map_file, mapped, narrow

T = TypeVar("T")

K1 = 1.2
B = 0.75
STOPWORDS = "english"


@dataclass
class PostingsArrays:
    """What one build produces (in memory), before it is written."""

    terms: pa.Array
    term_ptr: np.ndarray
    doc: np.ndarray
    tf: np.ndarray
    doc_len: np.ndarray


# Documents are indexed this many characters at a time (a chunk's tokens, exploded, are a few times its text; DuckDB's
# FTS build, where a chunk goes to it, holds over ten times its input), and a document's terms and length do not
# depend on the other documents, so the postings of the chunks, put together, are those of one index over all.
CHUNK_CHARS = 8_000_000
# Chunks indexed at once (a DuckDB's on one thread): polars' string kernels and create_fts_index each keep about one
# core busy, and the chunks are independent (100k messages: the node documents' 7 chunks in 1.2 s instead of 1.7
# one after another). At most 4: each holds its chunk's tokens.
CHUNK_WORKERS = min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


# within shared_postings(): what build_postings built, by the digest of its documents and settings
_SHARED: dict[bytes, tuple[PostingsArrays, str]] | None = None


@contextmanager
def shared_postings() -> Iterator[None]:
    """Within it, build_postings keeps what it builds and gives it again for the same documents: one index build
    makes recall's base segments and the DuckDB file's FTS indexes over the same node and raw documents, whose
    tokenizing and stemming it otherwise did twice (17 of 74 s at 100k messages). Let go on leaving the outermost."""
    global _SHARED
    outer = _SHARED is not None
    if not outer:
        _SHARED = {}
    try:
        yield
    finally:
        if not outer:
            _SHARED = None


def _digest(docs: Sequence[str | None], ignore: str) -> bytes:
    """A digest of the documents in order and the settings: each document's length (-1 for None), then their text
    (the lengths split it back into the documents, so two lists digest alike only if they are equal). 0.35 s for
    383k documents; an Arrow array of them first took 1.2 s."""
    h = hashlib.sha256(f"{STEMMER}\x00{STOPWORDS}\x00{ignore}\x00".encode())
    h.update(np.fromiter((-1 if d is None else len(d) for d in docs), np.int64, len(docs)).tobytes())
    h.update("".join(d for d in docs if d).encode("utf-8", "surrogatepass"))
    return h.digest()


def build_postings(docs: Sequence[str | None], ignore: str) -> tuple[PostingsArrays, str]:
    """Postings of `docs` (row i = document i) from DuckDB FTS indexes over them, and the indexes' tokenize macro
    (SQL text) for the query side. An empty document still counts (length 0), as in DuckDB. Within
    shared_postings(), the same documents give the arrays built the first time, once (then they are let go: the
    DuckDB file takes each base's arrays once); callers do not modify them."""
    shared = _SHARED
    if shared is None:
        return _build_postings(docs, ignore)
    key = _digest(docs, ignore)
    if key in shared:
        return shared.pop(key)
    shared[key] = out = _build_postings(docs, ignore)
    return out


def _build_postings(docs: Sequence[str | None], ignore: str) -> tuple[PostingsArrays, str]:
    n = len(docs)
    if not n:
        return _empty(), ""
    doc_len = np.zeros(n, dtype=np.int32)
    chunks = []  # (the chunk's terms by its term id, term ids, rows, tf) of each chunk
    bounds = _chunk_bounds(docs, CHUNK_CHARS)
    # each chunk vectorised without DuckDB (_python_chunk_postings); a chunk holding a document Python cannot read
    # in DuckDBs; either way CHUNK_WORKERS chunks at once (polars' string kernels on one core each)
    made = _side_by_side(lambda b: _python_chunk_postings(docs[b[0] : b[1]], ignore), bounds)
    left = [b for b, m in zip(bounds, made, strict=True) if m is None]
    by_duckdb = iter(_duckdb_chunks(docs, left, ignore) if left else ())
    for (lo, hi), (macro, lens, terms, termid, row, tf) in zip(
        bounds, [m if m is not None else next(by_duckdb) for m in made], strict=True
    ):
        tokenize = macro  # the same SQL for every chunk
        doc_len[lo:hi] = lens
        chunks.append((terms, termid, row + np.int32(lo), tf))
    vocab = sorted({t for terms, *_ in chunks for t in terms if t is not None})  # code point = UTF-8 byte order
    if not vocab:
        return PostingsArrays(
            pa.array([], pa.string()), np.zeros(1, np.int64), np.zeros(0, np.int32), np.zeros(0, np.int32), doc_len
        ), tokenize
    rank_of = {t: i for i, t in enumerate(vocab)}
    rank = np.concatenate(
        [np.array([-1 if t is None else rank_of[t] for t in terms], np.int32)[termid] for terms, termid, _, _ in chunks]
    )
    rows = np.concatenate([row for _, _, row, _ in chunks])
    tfs = np.concatenate([tf for *_, tf in chunks])
    del chunks
    order = np.lexsort((rows, rank))  # by term, then document
    return PostingsArrays(
        pa.array(vocab, pa.string()),
        np.r_[0, np.cumsum(np.bincount(rank, minlength=len(vocab)))].astype(np.int64),
        rows[order],
        tfs[order],
        doc_len,
    ), tokenize


def _duckdb_chunks(
    docs: Sequence[str | None], bounds: list[tuple[int, int]], ignore: str
) -> list[tuple[str, np.ndarray, list[str | None], np.ndarray, np.ndarray, np.ndarray]]:
    """_chunk_postings of each chunk, CHUNK_WORKERS at once, in chunk order: the same arrays however many run."""
    threads = 1 if min(CHUNK_WORKERS, len(bounds)) > 1 else None
    return _side_by_side(lambda b: _chunk_postings(docs[b[0] : b[1]], ignore, threads), bounds)


def _side_by_side(fn: Callable[[tuple[int, int]], T], bounds: list[tuple[int, int]]) -> list[T]:
    """[fn(b) for b in bounds], CHUNK_WORKERS at once (one alone: in this thread), in order."""
    workers = min(CHUNK_WORKERS, len(bounds))
    if workers < 2:
        return [fn(b) for b in bounds]
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(fn, bounds))


def _chunk_bounds(docs: Sequence[str | None], chars: int) -> list[tuple[int, int]]:
    """[lo, hi) row ranges of about `chars` characters each (at least one document each)."""
    ends = np.cumsum(np.fromiter((len(d) if d else 0 for d in docs), np.int64, len(docs)))
    cuts = np.unique(np.searchsorted(ends, np.arange(chars, int(ends[-1]) + 1, chars), side="right"))
    bounds = [0, *(int(c) for c in cuts if 0 < c < len(docs)), len(docs)]
    return list(zip(bounds[:-1], bounds[1:]))


def _chunk_postings(
    docs: Sequence[str | None], ignore: str, threads: int | None = None
) -> tuple[str, np.ndarray, list[str | None], np.ndarray, np.ndarray, np.ndarray]:
    """One DuckDB FTS index over `docs`: (tokenize macro, document lengths, terms by term id, and the postings as
    term ids, rows and term frequencies). `threads`: DuckDB's threads for it (default: its own, one per core)."""
    from recall.store import connect

    n = len(docs)
    con = connect(None, read_only=False)
    try:
        con.execute("SET preserve_insertion_order = false")
        if threads:
            con.execute(f"SET threads = {int(threads)}")
        src = pa.table({"row": pa.array(np.arange(n, dtype=np.int32)), "doc": pa.array(docs, pa.string())})
        con.register("_src", src)
        con.execute("CREATE TABLE d AS SELECT * FROM _src")
        con.unregister("_src")
        del src
        con.execute(
            f"PRAGMA create_fts_index('d', 'row', 'doc', stemmer='{STEMMER}', stopwords='{STOPWORDS}', "
            f"ignore='{ignore}', overwrite=1)"
        )
        got = con.execute(
            "SELECT macro_definition FROM duckdb_functions() WHERE schema_name = 'fts_main_d' "
            "AND function_name = 'tokenize'"
        ).fetchone()
        assert got is not None  # create_fts_index defines the macro
        lens = con.execute("SELECT name, len FROM fts_main_d.docs").fetchnumpy()
        doc_len = np.zeros(n, dtype=np.int32)
        doc_len[lens["name"].astype(np.int64)] = lens["len"]
        words = con.execute("SELECT termid, term FROM fts_main_d.dict").fetchnumpy()
        terms: list[str | None] = [None] * (int(words["termid"].max()) + 1 if len(words["termid"]) else 0)
        for i, t in zip(words["termid"].tolist(), words["term"].tolist()):
            terms[i] = t
        post = con.execute("""
            SELECT terms.termid AS termid, docs.name AS row, count(*) AS tf
            FROM fts_main_d.terms AS terms
            JOIN fts_main_d.docs AS docs ON docs.docid = terms.docid
            GROUP BY terms.termid, docs.name""").fetchnumpy()
    finally:
        con.close()
    return (
        got[0],
        doc_len,
        terms,
        post["termid"].astype(np.int32),
        post["row"].astype(np.int32),
        post["tf"].astype(np.int32),
    )


# occurrences inserted into a DuckDB FTS `terms` table at a time (three int64 columns: ~0.2 GB a batch)
FILL_BATCH = 8_000_000


def fill_fts(con: Any, schema: str, ids: pa.Array, p: PostingsArrays) -> None:
    """Fill the tables of the DuckDB FTS index `schema` (made by create_fts_index over an empty table: its macros,
    fields and stop words) with what create_fts_index makes over documents `ids` (row i = document i of `p`):
    docs (docid = row, name = id, len), dict (termid, term, df), terms (one row per occurrence, fieldid 0), stats
    (the documents' count and mean length), so match_bm25 and recall.store's BM25 score them as over its own tables.
    The occurrences are written term by term, each term's documents ascending (the postings' own order), where
    create_fts_index writes them document by document: the same rows, but a query's `termid IN (…)` then reads only
    the row groups its terms lie in (DuckDB's min/max per row group), not every row group of the table. Memory: the
    arrays and one batch of occurrences, where create_fts_index holds over ten times its documents' text and does
    not spill."""
    n, terms = len(p.doc_len), len(p.terms)
    con.register(
        "_fts_docs", pa.table({"docid": pa.array(np.arange(n, dtype=np.int64)), "name": ids, "len": p.doc_len})
    )
    con.execute(f"INSERT INTO {schema}.docs SELECT docid, name, len FROM _fts_docs")
    con.unregister("_fts_docs")
    df = np.diff(p.term_ptr)
    con.register("_fts_dict", pa.table({"termid": np.arange(terms, dtype=np.int64), "term": p.terms, "df": df}))
    con.execute(f"INSERT INTO {schema}.dict SELECT termid, term, df FROM _fts_dict")
    con.unregister("_fts_dict")
    term_of = np.repeat(np.arange(terms, dtype=np.int32), df)
    ends = np.cumsum(p.tf, dtype=np.int64)
    lo = 0
    while lo < len(p.doc):
        hi = int(np.searchsorted(ends, ends[lo] - p.tf[lo] + FILL_BATCH, side="right"))
        hi = max(hi, lo + 1)
        tf = p.tf[lo:hi]
        batch = pa.table({"docid": np.repeat(p.doc[lo:hi], tf), "termid": np.repeat(term_of[lo:hi], tf)})
        con.register("_fts_terms", batch)
        con.execute(f"INSERT INTO {schema}.terms SELECT docid, 0, termid FROM _fts_terms")
        con.unregister("_fts_terms")
        lo = hi
    con.execute(f"DELETE FROM {schema}.stats")
    con.execute(f"INSERT INTO {schema}.stats SELECT count(*), avg(len) FROM {schema}.docs")


def _empty() -> PostingsArrays:
    return PostingsArrays(
        pa.array([], pa.string()),
        np.zeros(1, np.int64),
        np.zeros(0, np.int32),
        np.zeros(0, np.int32),
        np.zeros(0, np.int32),
    )


def write_postings(folder: Path, name: str, p: PostingsArrays) -> None:
    """The segment's files for `p` (see the module docstring); the caller fsyncs the folder."""
    with pa.OSFile(str(folder / f"{name}_terms.arrow"), "wb") as f:
        with pa.ipc.new_file(f, pa.schema([("term", pa.string())])) as w:
            w.write_table(pa.table({"term": p.terms}))
    SortedKeys.write(folder / f"{name}_terms.keys.npy", p.terms)
    for suffix, arr in (
        ("term_ptr", p.term_ptr),
        ("post_doc", p.doc),
        ("post_tf", narrow(p.tf, (np.uint8, np.uint16, np.int32))),
        ("doc_len", narrow(p.doc_len, (np.uint16, np.int32))),
        ("post_len", narrow(p.doc_len[p.doc], (np.uint8, np.uint16, np.int32))),
    ):
        np.save(folder / f"{name}_{suffix}.npy", arr)


class Postings:
    """One segment's postings, memory-mapped."""

    def __init__(self, folder: Path, name: str, random: bool = True, len_sum: int | None = None) -> None:
        terms = pa.ipc.open_file(pa.py_buffer(map_file(folder / f"{name}_terms.arrow", random))).read_all()
        self.terms = SortedKeys.open(folder / f"{name}_terms.keys.npy", terms.column("term"), random)
        self.term_ptr = mapped(folder / f"{name}_term_ptr.npy", random)
        self.doc = mapped(folder / f"{name}_post_doc.npy", random)
        self.tf = mapped(folder / f"{name}_post_tf.npy", random)
        self.doc_len = mapped(folder / f"{name}_doc_len.npy", random)
        self.post_len = mapped(folder / f"{name}_post_len.npy", random)
        self.len_sum = len_sum  # the sum of doc_len, when the segment keeps it

    def lookup(self, terms: Sequence[str]) -> list[tuple[np.ndarray, np.ndarray, np.ndarray] | None]:
        """(doc rows, tf, their documents' lengths) of each term, None when the segment does not hold it."""
        out: list[tuple[np.ndarray, np.ndarray, np.ndarray] | None] = []
        for j in self.terms.find(terms).tolist():
            if j < 0:
                out.append(None)
            else:
                a, z = int(self.term_ptr[j]), int(self.term_ptr[j + 1])
                out.append((self.doc[a:z], self.tf[a:z], self.post_len[a:z]))
        return out


@dataclass
class Part:
    """One segment's postings and which of its documents are live (None: all)."""

    postings: Postings
    live: np.ndarray | None


def live_stats(parts: Sequence[Part]) -> tuple[int, float]:
    """(N, avgdl) over the live documents of all parts (DuckDB: num_docs = all docs, avgdl = avg(len))."""
    n, total = 0, 0
    for p in parts:
        lens, whole = p.postings.doc_len, p.postings.len_sum
        if whole is None:  # every length read (a cold start reads a 1M lake's 3.4M node lengths from disk)
            whole = int(lens.sum(dtype=np.int64))
        if p.live is None:
            n += len(lens)
            total += whole
        else:  # the segment's sum less its dead documents' lengths: few of a base's are dead
            dead = np.flatnonzero(~p.live)
            n += len(lens) - len(dead)
            total += whole - int(lens[dead].sum(dtype=np.int64))
    return n, (total / n if n else 0.0)


def bm25(
    parts: Sequence[Part],
    n_docs: int,
    avgdl: float,
    terms: Sequence[str],
    ids: Callable[[int, np.ndarray], list[str]],
    limit: int,
    *,
    rows_in_id_order: bool = False,
) -> list[tuple[str, float]]:
    """Top `limit` (id, score) over the parts' live documents, best first; equal scores (to 9 decimals) by id,
    as TenantReader._bm25 orders them. `terms`: the query's distinct stems; `ids(part, rows)`: their ids.

    Per document the terms' contributions are summed in sorted term order, so the same documents give the
    same floats whichever segment holds them.

    `rows_in_id_order`: within a part, a later row has a larger id (node rows are stored sorted by id). Of the
    documents tied at the cut only a part's first `limit` rows can then be among the top, and only their ids are
    read: a common term ties thousands of documents at one score (2,531 ids read for 50 seeds in a query at 1M
    messages, a page of node ids each on a cold disk)."""
    if not n_docs or not terms or limit <= 0:
        return []
    terms = sorted(set(terms))
    hits = [p.postings.lookup(terms) for p in parts]
    rows: list[list[np.ndarray]] = [[] for _ in parts]
    contrib: list[list[np.ndarray]] = [[] for _ in parts]
    for t in range(len(terms)):
        kept: list[tuple[np.ndarray, np.ndarray, np.ndarray] | None] = []
        for i, p in enumerate(parts):
            h = hits[i][t]
            if h is None:
                kept.append(None)
                continue
            doc, tf, length = h
            if p.live is not None:
                keep = p.live[doc]
                doc, tf, length = doc[keep], tf[keep], length[keep]
            kept.append((doc, tf, length))
        df = sum(len(k[0]) for k in kept if k is not None)
        if not df:
            continue
        # DuckDB's match_bm25, operation for operation (log is log10 in DuckDB)
        idf = np.log10((((n_docs - df) + 0.5) / (df + 0.5)) + 1)
        for i, k in enumerate(kept):
            if k is None or not len(k[0]):
                continue
            doc, tf, length = k
            tf, length = tf.astype(np.float64), length.astype(np.float64)
            rows[i].append(np.asarray(doc))
            contrib[i].append(idf * ((tf * (K1 + 1)) / (tf + (K1 * ((1 - B) + (B * (length / avgdl)))))))
    cands: list[tuple[int, np.ndarray, np.ndarray]] = []
    for i in range(len(parts)):
        if not rows[i]:
            continue
        n_rows = len(parts[i].postings.doc_len)
        if sum(map(len, rows[i])) * 8 > n_rows:
            # many postings: add them up in a dense array, term after term (a term's documents are distinct)
            acc = np.zeros(n_rows)
            hit = np.zeros(n_rows, bool)
            for r, c in zip(rows[i], contrib[i]):
                acc[r] += c
                hit[r] = True
            uniq = np.flatnonzero(hit)
            cands.append((i, uniq, acc[uniq]))
        else:
            r = np.concatenate(rows[i])
            c = np.concatenate(contrib[i])
            uniq, inv = np.unique(r, return_inverse=True)
            cands.append((i, uniq, np.bincount(inv, weights=c, minlength=len(uniq))))  # sums in term order
    if not cands:
        return []
    rounded = np.concatenate([np.round(s, 9) for _, _, s in cands])
    if len(rounded) > limit:
        cut = -np.partition(-rounded, limit - 1)[limit - 1]  # the limit-th best; ties at the cut all go on
    else:
        cut = -np.inf
    out: list[tuple[float, str, float]] = []
    for i, r, s in cands:
        rounded_s = np.round(s, 9)
        keep = rounded_s >= cut
        if rows_in_id_order:  # r ascends: the tied rows' first `limit` are the part's smallest tied ids
            tied = np.flatnonzero(rounded_s == cut)
            keep[tied[limit:]] = False
        if keep.any():
            rr, ss = r[keep], s[keep]
            out.extend((float(x), name, float(y)) for x, name, y in zip(np.round(ss, 9), ids(i, rr), ss))
    out.sort(key=lambda x: (-x[0], x[1]))
    return [(name, score) for _, name, score in out[:limit]]


class QueryTerms:
    """The query side of DuckDB's FTS: tokenize with the index's own macro, then stem. In Python when the macro
    is PYTHON_TOKENIZE (no DuckDB on the query path), else in DuckDB itself."""

    def __init__(self, tokenize_sql: str) -> None:
        self._sql = tokenize_sql
        self._python = tokenize_sql == PYTHON_TOKENIZE
        self._con: Any = None  # the DuckDB connection, opened on first need
        self._lock = threading.Lock()

    def stems(self, query: str) -> tuple[str, ...]:
        """The query's distinct stems, sorted (what match_bm25 joins to the dictionary)."""
        return _cached_stems(self, query)

    def _stems(self, query: str) -> tuple[str, ...]:
        if self._python:
            got = python_stems(query)
            if got is not None:
                return got
        return self.duckdb_stems(query)

    def duckdb_stems(self, query: str) -> tuple[str, ...]:
        """The same, always asked of DuckDB."""
        literal = "'" + query.replace("'", "''") + "'"  # a bound parameter would make DuckDB import pandas
        with self._lock:
            if self._con is None:
                from recall.store import connect

                self._con = connect(None, read_only=False)
                self._con.execute(f"CREATE MACRO memctl_tokenize(s) AS {self._sql}")
            rows = self._con.execute(
                f"SELECT DISTINCT stem(unnest(memctl_tokenize({literal})), '{STEMMER}') AS t"
            ).fetchall()
        return tuple(sorted(r[0] for r in rows if r[0]))


@lru_cache(maxsize=4096)
def _cached_stems(qt: QueryTerms, query: str) -> tuple[str, ...]:
    return qt._stems(query)


_QUERY_TERMS: dict[str, QueryTerms] = {}
_QT_LOCK = threading.Lock()


def query_terms(tokenize_sql: str) -> QueryTerms:
    """One QueryTerms per tokenize macro per process (a DuckDB connection, opened on first use)."""
    with _QT_LOCK:
        qt = _QUERY_TERMS.get(tokenize_sql)
        if qt is None:
            qt = _QUERY_TERMS[tokenize_sql] = QueryTerms(tokenize_sql)
        return qt
