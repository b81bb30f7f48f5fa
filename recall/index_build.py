"""Build a tenant's recall index from its current tables: a new base, or only a delta of what changed.

Input is the tenant's logical tables as Arrow (nodes: NODES, edges: EDGES, raw_chunks: RAW_CHUNKS,
messages: MESSAGES), passed by the caller. Every unit recall reads gets a hash (polars `hash_rows`,
fixed seed): a node row (with the keywords its document is made of), a node's neighbour list, a chunk
row, the messages of one chunk. The hashes are stored with the segments, so an update compares the
new tables with what the current version holds and writes a *delta* segment with only the changed,
added and removed units. When the deltas grow past COMPACT_SHARE of the base or reach MAX_SEGMENTS
segments, they are first merged: one delta of what changed since the base replaces them (the base is
kept as it is, a unit changed twice counts once), as an LSM tree merges its small runs. Only when that
is still past COMPACT_SHARE of the base (or on request, or when the hashes are not comparable: another
format or polars version) are the tables built into a new *base*: the compaction.

Every version is written under temp names, fsynced and renamed into place, then CURRENT (recall.index_commit).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable, MutableMapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

from r2g.schema import EDGES, NODES
from raw_store.frames import as_frame
from raw_store.lake import conform
from raw_store.schema import MESSAGES, RAW_CHUNKS
from recall.index_commit import clean_temp, commit_version, fsync_dir, generation, locked
from recall.segment import MESSAGE_ROW_COLS, NODE_ROW_COLS, SEG_CHUNKS, add_fences
from recall.segment_build import adjacency_arrays, build_segment, fts_settings
from recall.store import tenant_slug
from recall.tenant_index import FORMAT, Version, read_current, recall_dir, tenant_dir

COMPACT_SHARE = 0.15  # deltas holding more than this share of the base's units → compact into a new base
MAX_SEGMENTS = 8
HASH_SEED = 20261124


# --------------------------------------------------------------------------- the tables, prepared


@dataclass
class Prepared:
    """The tenant's tables as recall reads them, each row or group with its hash (nothing sorted yet: a delta
    sorts only the rows it writes)."""

    nodes: pl.DataFrame  # active nodes, one row per id, in id order: id, keywords, NODE_ROW_COLS, hash
    newest: datetime | None  # newest node time over all nodes (any status), or None
    # half-edges between active nodes: node, nbr (codes: rows of `nodes`), dir, type (an Enum), weight, h
    half: pl.DataFrame
    adj: pl.DataFrame  # per node with edges: node (code), hash
    chunks: pl.DataFrame  # id, path, sha256, conv_id, ts, passage, text, hash
    messages: pl.DataFrame  # one row per message piece: piece, piece_offset, piece_length, MESSAGE_ROW_COLS, h
    msg: pl.DataFrame  # per piece: key, hash

    def take(self, name: str) -> pl.DataFrame:
        """The frame `name`, left empty here: a writer takes each so that it is freed once used, not held here."""
        frame = getattr(self, name)
        setattr(self, name, frame.clear())
        return frame


def _hash(df: pl.DataFrame, cols: list[str]) -> pl.Series:
    return df.select(cols).hash_rows(seed=HASH_SEED)


def _group_hash(df: pl.DataFrame, key: str) -> pl.DataFrame:
    """One hash per `key` over the row hashes `h` of its rows, whatever their order: their wrapping sum and
    their count (a multiset hash)."""
    g = df.group_by(key).agg(pl.col("h").sum().alias("sum"), pl.len().alias("n"))
    return g.select(pl.col(key), _hash(g, ["sum", "n"]).alias("hash"))


def _half_edges(e: pl.DataFrame, node: str, nbr: str, direction: int, types: pl.Enum) -> pl.DataFrame:
    """One end's half-edges of the edges `e` (with `<end>_code` columns): node, nbr, dir, type, weight, h. The hash
    is of the ids (node, nbr, dir, type, weight, edge id), as when the half-edges held the id strings."""
    d = pl.lit(direction, pl.UInt8)
    return e.select(
        pl.col(f"{node}_code").alias("node"),
        pl.col(f"{nbr}_code").alias("nbr"),
        d.alias("dir"),
        pl.col("type").cast(types),
        "weight",
        e.select(node, nbr, d, "type", "weight", "id").hash_rows(seed=HASH_SEED).alias("h"),
    )


# The graph columns an index is made of (prepare): the index step reads only these (r2g.lake_graph.read_graph_tables)
NODE_COLUMNS = ("id", "keywords", *NODE_ROW_COLS)
EDGE_COLUMNS = ("id", "src", "dst", "type", "weight")


def prepare(nodes: pa.Table, edges: pa.Table, raw_chunks: pa.Table, messages: pa.Table) -> Prepared:
    _, inactive, _ = fts_settings()
    node_cols = list(NODE_COLUMNS)
    n = as_frame(conform(nodes, _fields(NODES, node_cols)))
    newest = n.select(pl.coalesce("time_start", "last_seen", "first_seen").max()).item() if n.height else None
    n = n.filter(pl.col("id").is_not_null() & (pl.col("status").is_null() | ~pl.col("status").is_in(inactive)))
    n = n.unique("id", keep="first", maintain_order=True).sort("id")
    n = n.with_columns(_hash(n, node_cols).alias("hash"))

    # the half-edges name their nodes by code (row in `n`, so code order is id order), not by id string: the
    # joins and the sort of _adjacency run on integers (3.3M half-edges at 100k messages). An id that is no
    # active node finds no code: its edges are dropped. Looked up by a join (a cast to an Enum of the ids gave the
    # same codes at ~1.8x the time: 1.2-1.4 against 0.7-0.8 s for 1.8M edges)
    codes = n.select(pl.col("id"), pl.int_range(n.height, dtype=pl.UInt32).alias("_code"))
    e = as_frame(conform(edges, _fields(EDGES, EDGE_COLUMNS)))
    for end in ("src", "dst"):
        e = e.join(codes.rename({"id": end, "_code": f"{end}_code"}), on=end, how="inner", maintain_order="left")
    e = e.with_columns(pl.col("weight").fill_null(1.0), pl.col("type").fill_null(""))
    types = pl.Enum(e["type"].unique().sort())
    half = pl.concat([_half_edges(e, "src", "dst", 0, types), _half_edges(e, "dst", "src", 1, types)])
    del e
    adj = _group_hash(half, "node")

    c = as_frame(conform(raw_chunks, RAW_CHUNKS).select(["id", "path", "sha256", "conv_id", "ts", "mime", "text"]))
    c = c.filter(pl.col("id").is_not_null()).unique("id", keep="first", maintain_order=True)
    # passages are chat text; an agent ops file kept whole for its citations is not one (as recall.index)
    c = c.with_columns((pl.col("mime").is_null() | pl.col("mime").str.starts_with("text/plain")).alias("passage"))
    c = c.with_columns(_hash(c, ["id", "path", "sha256", "conv_id", "ts", "passage"]).alias("hash"))

    m = as_frame(conform(messages, MESSAGES).select(list(MESSAGE_ROW_COLS))).with_row_index("_mi")
    # a message lies in the chunks of its valid raw_refs (recall.citations.as_refs), else in its raw_id's; one row
    # per piece, with the piece's span in that chunk (what a citation slices)
    valid = (pl.col("raw_id").fill_null("") != "") & pl.col("offset").is_not_null() & pl.col("length").is_not_null()
    refs = (
        m.select("_mi", pl.col("raw_refs").alias("ref"))
        .explode("ref")
        .unnest("ref")
        .filter(valid)
        .select(
            "_mi",
            pl.col("raw_id").alias("piece"),
            pl.col("offset").alias("piece_offset"),
            pl.col("length").alias("piece_length"),
        )
    )
    bare = (
        m.join(refs.select("_mi").unique(), on="_mi", how="anti")
        .filter(valid)
        .select(
            "_mi",
            pl.col("raw_id").alias("piece"),
            pl.col("offset").alias("piece_offset"),
            pl.col("length").alias("piece_length"),
        )
    )
    msgs = pl.concat([refs, bare]).join(m, on="_mi").drop("_mi")
    msgs = msgs.with_columns(_hash(msgs, ["piece", "piece_offset", "piece_length", *MESSAGE_ROW_COLS]).alias("h"))
    msg = _group_hash(msgs, "piece").rename({"piece": "key"})
    return Prepared(n, newest, half, adj, c, msgs, msg)


# --------------------------------------------------------------------------- what the current version holds


@dataclass
class Current:
    version: Version
    nodes: pl.DataFrame  # live: id, slot, hash
    slots: pl.DataFrame  # every id that has a slot in this version (live or removed): id, slot
    adj: pl.DataFrame  # live lists: slot, hash
    chunks: pl.DataFrame  # live: id, hash
    msg: pl.DataFrame  # live groups: key, hash
    base_units: int
    delta_units: int


def current_state(v: Version) -> Current:
    node_parts, slot_parts, adj_parts, chunk_parts, msg_parts = [], [], [], [], []
    for s, seg in enumerate(v.segments):
        ids = as_frame(seg.node_rows(np.arange(seg.nodes.num_rows), ("id", "slot", "hash")))
        slot_parts.append(ids.select("id", "slot"))
        live = v.node_live(s)
        node_parts.append(ids if live is None else ids.filter(pl.Series(live)))
        adjacency = seg.require_adjacency()
        adj_parts.append(
            pl.DataFrame(
                {
                    "slot": np.asarray(adjacency.slot, np.int64),
                    "hash": np.asarray(adjacency.hash),
                    "seg": np.full(len(adjacency.slot), s),
                }
            )
        )
        cl = v.chunk_live(s)
        ch = as_frame(seg.rows(seg.chunks, SEG_CHUNKS, np.arange(seg.chunks.num_rows), ("id", "hash")))
        chunk_parts.append(ch if cl is None else ch.filter(pl.Series(cl)))
        msg_parts.append(
            pl.DataFrame(
                {
                    "key": pl.Series(seg.msg_key_strings.to_pylist(), dtype=pl.Utf8),
                    "hash": np.asarray(seg.msg_hash),
                    "seg": np.full(len(seg.msg_hash), s),
                }
            )
        )
    slots = pl.concat(slot_parts).unique("id", keep="first").with_columns(pl.col("slot").cast(pl.Int64))
    # adjacency: the newest list per slot, minus slots removed after it
    adj = pl.concat(adj_parts).sort("seg").unique("slot", keep="last")
    gone = _removed_after(v)
    adj = adj.join(gone, on="slot", how="left").filter(
        pl.col("gone_seg").is_null() | (pl.col("gone_seg") < pl.col("seg"))
    )
    msg = pl.concat(msg_parts).sort("seg").unique("key", keep="last")
    removed_msgs = pl.DataFrame(
        {
            "key": [k for seg in v.segments for k in seg.removed_msgs],
            "gone_seg": [s for s, seg in enumerate(v.segments) for _ in seg.removed_msgs],
        },
        schema={"key": pl.Utf8, "gone_seg": pl.Int64},
    )
    msg = msg.join(removed_msgs.group_by("key").agg(pl.col("gone_seg").max()), on="key", how="left").filter(
        pl.col("gone_seg").is_null() | (pl.col("gone_seg") < pl.col("seg"))
    )
    base = v.segments[0]
    units = lambda seg: seg.nodes.num_rows + len(seg.adjacency.slot) + seg.chunks.num_rows + len(seg.msg_hash)  # noqa: E731
    deltas = sum(
        units(seg) + len(seg.removed_slots) + len(seg.removed_chunks) + len(seg.removed_msgs) for seg in v.segments[1:]
    )
    return Current(
        v,
        pl.concat(node_parts).with_columns(pl.col("slot").cast(pl.Int64)),
        slots,
        adj.select("slot", "hash"),
        pl.concat(chunk_parts),
        msg.select("key", "hash"),
        units(base),
        deltas,
    )


def base_version(v: Version) -> Version:
    """`v`'s base segment alone, as the version it was before any delta (slots past the base's are free again;
    the edge type list is `v`'s: a delta only appends to its base's, so the base's codes keep their meaning)."""
    base = v.segments[0]
    manifest = {**v.manifest, "segments": v.manifest["segments"][:1], "n_slots": base.nodes.num_rows}
    return Version(v.folder, manifest, v.tenant, random=False)


def _removed_after(v: Version) -> pl.DataFrame:
    """The last segment that removed each slot (slot, gone_seg)."""
    rows = [(int(x), s) for s, seg in enumerate(v.segments) for x in np.asarray(seg.removed_slots).tolist()]
    df = pl.DataFrame(rows, schema={"slot": pl.Int64, "gone_seg": pl.Int64}, orient="row")
    return df.group_by("slot").agg(pl.col("gone_seg").max())


# --------------------------------------------------------------------------- base, delta, commit
# (writing one segment: recall.segment_build; the version's files, lock and commit: recall.index_commit)


def _edge_types(half: pl.DataFrame, before: list[str] | None = None) -> list[str]:
    """Edge type names: a base's sorted; a delta's are its base's, then any new ones (codes stay valid)."""
    present = sorted(set(half["type"].unique().to_list()) - {None})
    if before is None:
        return present
    return list(before) + [t for t in present if t not in set(before)]


def _write_base(folder: Path, p: Prepared, meta: dict, docs: Callable | None = None) -> dict:
    """A base of every row of `p`, taking its frames (Prepared.take): held by no name here, build_segment frees each
    once used."""
    n, units = p.nodes.height, p.nodes.height + p.adj.height + p.chunks.height + p.msg.height
    # a base numbers its nodes in id order (p.nodes's): slot = row = code (the reader relies on it)
    slot = pl.int_range(pl.len(), dtype=pl.Int64).alias("slot")
    edge_types, empty = _edge_types(p.half), np.zeros(0, np.int64)
    adjacency = adjacency_arrays(p.nodes.select(slot), p.take("half"), p.take("adj"), empty, edge_types)
    out = build_segment(
        folder,
        "base",
        p.take("nodes").with_columns(slot),
        adjacency,
        p.take("chunks"),
        p.take("messages"),
        p.take("msg"),
        empty,
        [],
        [],
        meta,
        docs,
    )
    return {**out, "n_slots": n, "edge_types": edge_types, "units": units}


@dataclass
class Delta:
    slot_of: pl.DataFrame  # id, slot of every current node, in Prepared.nodes's order (row = code)
    n_slots: int
    nodes: pl.DataFrame  # changed and added rows, with slot
    removed_slots: np.ndarray
    adj: pl.DataFrame  # node (code), hash of the lists to write
    empty_slots: np.ndarray  # slots that lost all their edges
    chunks: pl.DataFrame
    removed_chunks: list[str]
    msg: pl.DataFrame  # key, hash of the groups to write
    removed_msgs: list[str]

    @property
    def units(self) -> int:
        return (
            self.nodes.height
            + len(self.removed_slots)
            + self.adj.height
            + len(self.empty_slots)
            + self.chunks.height
            + len(self.removed_chunks)
            + self.msg.height
            + len(self.removed_msgs)
        )


def diff(p: Prepared, cur: Current) -> Delta:
    """What a delta over `cur` must hold for the tables of `p`."""
    # in p.nodes's order (row = the node's code in p.half and p.adj); new nodes take the next slots in that order
    slot_of = p.nodes.select("id").join(cur.slots, on="id", how="left", maintain_order="left")
    fresh = pl.col("slot").is_null()
    n_slots = cur.version.n_slots + slot_of.get_column("slot").null_count()
    slot_of = slot_of.with_columns(
        pl.when(fresh)
        .then(fresh.cast(pl.Int64).cum_sum() - 1 + cur.version.n_slots)
        .otherwise(pl.col("slot"))
        .alias("slot")
    )

    old = cur.nodes.select("id", pl.col("hash").alias("old"))
    nodes = (
        p.nodes.join(old, on="id", how="left")
        .filter(pl.col("old").is_null() | (pl.col("old") != pl.col("hash")))
        .drop("old")
        .join(slot_of, on="id", how="left")
    )
    removed = cur.nodes.join(p.nodes.select("id"), on="id", how="anti")["slot"].to_numpy().astype(np.int64)

    new_adj = p.adj.with_columns(slot_of.get_column("slot").gather(p.adj.get_column("node")))
    old_adj = cur.adj.filter(~pl.col("slot").is_in(pl.Series(removed).implode())).rename({"hash": "old"})
    adj = (
        new_adj.join(old_adj, on="slot", how="left")
        .filter(pl.col("old").is_null() | (pl.col("old") != pl.col("hash")))
        .select("node", "hash")
    )
    empty = old_adj.join(new_adj.select("slot"), on="slot", how="anti")["slot"].to_numpy().astype(np.int64)

    old_c = cur.chunks.rename({"hash": "old"})
    chunks = (
        p.chunks.join(old_c, on="id", how="left")
        .filter(pl.col("old").is_null() | (pl.col("old") != pl.col("hash")))
        .drop("old")
    )
    removed_chunks = cur.chunks.join(p.chunks.select("id"), on="id", how="anti")["id"].to_list()

    old_m = cur.msg.rename({"hash": "old"})
    msg = (
        p.msg.join(old_m, on="key", how="left")
        .filter(pl.col("old").is_null() | (pl.col("old") != pl.col("hash")))
        .select("key", "hash")
    )
    removed_msgs = cur.msg.join(p.msg.select("key"), on="key", how="anti")["key"].to_list()
    return Delta(
        slot_of, n_slots, nodes, np.sort(removed), adj, np.sort(empty), chunks, removed_chunks, msg, removed_msgs
    )


def _write_delta(folder: Path, p: Prepared, cur: Current, d: Delta, meta: dict, docs: Callable | None = None) -> dict:
    edge_types = _edge_types(p.half, cur.version.edge_types)
    adjacency = adjacency_arrays(d.slot_of, p.take("half"), d.adj, d.empty_slots, edge_types)
    messages = p.take("messages").join(d.msg.select(pl.col("key").alias("piece")), on="piece", how="semi")
    out = build_segment(
        folder,
        "delta",
        d.nodes,
        adjacency,
        d.chunks,
        messages,
        d.msg,
        d.removed_slots,
        d.removed_chunks,
        d.removed_msgs,
        meta,
        docs,
    )
    return {**out, "n_slots": d.n_slots, "edge_types": edge_types, "units": d.units}


def compatible(manifest: dict) -> bool:
    """Whether a version's hashes can be compared with this process's (same format, same polars)."""
    return manifest.get("format") == FORMAT and manifest.get("polars") == pl.__version__


def write_tenant_index(
    index_dir: Path,
    tenant: str,
    nodes: pa.Table,
    edges: pa.Table,
    raw_chunks: pa.Table,
    messages: pa.Table,
    *,
    compact: bool = False,
    docs: Callable[[pl.DataFrame, str], pl.DataFrame] | None = None,
) -> dict:
    """Bring `tenant`'s recall index up to these tables (the tenant's rows only): nothing when they hold no
    change, else a delta segment; at MAX_SEGMENTS segments or past COMPACT_SHARE of the base, the deltas merged
    into one over the base, or a new base when what changed since the base is past COMPACT_SHARE of it
    (`compact=True`: always a new base). `docs(rows, kind)`: the FTS documents (id, doc) of the nodes (kind
    "node") or raw passages ("raw") of the ids it is given, where the caller makes them (the rest are made here).
    Returns {"mode": "unchanged" | "delta" | "base", "version", …}."""
    t0 = time.perf_counter()
    return _write_prepared(index_dir, tenant, prepare(nodes, edges, raw_chunks, messages), t0, compact, docs)


def _write_prepared(
    index_dir: Path,
    tenant: str,
    p: Prepared,
    t0: float,
    compact: bool,
    docs: Callable[[pl.DataFrame, str], pl.DataFrame] | None,
) -> dict:
    """write_tenant_index on the tenant's tables once prepared (the Arrow tables they came from can be freed)."""
    folder = tenant_dir(index_dir, tenant)
    folder.mkdir(parents=True, exist_ok=True)
    # what the stats and the manifest count, taken before a writer takes p's frames (Prepared.take)
    n_nodes, half_edges, n_chunks = p.nodes.height, p.half.height, int(p.chunks["passage"].sum())
    with locked(folder):
        clean_temp(folder)
        try:
            manifest = read_current(folder)
        except FileNotFoundError:  # CURRENT names a manifest that is gone (no writer can have removed it: we hold
            manifest = None  # LOCK): the folder was damaged by hand, and a new base is built, as for a first build
        # the comparison reads whole columns: mapped for sequential reads (read-ahead), not a query's random ones;
        # none for a compaction, which compares nothing (the frames of every unit: ~0.7 GB, seconds at 1M messages)
        ok = compatible(manifest) and not compact if manifest else False
        cur = current_state(Version(folder, manifest, tenant, random=False)) if ok and manifest else None
        d: Delta | None = None
        gen = generation(manifest) + 1
        name = f"s{gen:06d}"
        meta = {"tenant": tenant, "format": FORMAT}
        tmp = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=folder))
        tmp.rmdir()
        mode, reason = "base", "first build" if manifest is None else "forced" if compact else "incompatible"
        try:
            if cur is not None and manifest is not None and not compact:  # (cur is read from the manifest)
                d = diff(p, cur)
                if not d.units:
                    return {
                        "mode": "unchanged",
                        "reason": "",
                        "version": manifest["name"],
                        "segments": len(manifest["segments"]),
                        "units": 0,
                        "nodes": n_nodes,
                        "half_edges": half_edges,
                        "seconds": _since(t0),
                        "parts": {},
                    }
                if cur.delta_units + d.units > COMPACT_SHARE * max(cur.base_units, 1):
                    reason = f"deltas {cur.delta_units + d.units} > {COMPACT_SHARE:.0%} of {cur.base_units}"
                elif len(cur.version.segments) + 1 > MAX_SEGMENTS:
                    reason = f"{MAX_SEGMENTS} segments"
                else:
                    mode, reason = "delta", ""
                if mode == "base" and len(cur.version.segments) > 1:
                    # the deltas merged into one over the base, as an LSM tree merges its small runs: what
                    # changed since the base (a unit changed twice counts once), where that is still small
                    cur = current_state(base_version(cur.version))
                    d = diff(p, cur)
                    if d.units <= COMPACT_SHARE * max(cur.base_units, 1):
                        n = len(manifest["segments"]) - 1
                        mode, reason = "delta", f"merged {n} delta{'s' * (n != 1)} ({reason})"
                    else:
                        reason = f"{reason}; {d.units} changed since the base > {COMPACT_SHARE:.0%} of it"
            if mode == "delta" and cur is not None and d is not None and manifest is not None:  # (chosen only then)
                out = _write_delta(tmp, p, cur, d, meta, docs)
                segments = [*cur.version.manifest["segments"], name]
            else:
                cur = d = None  # a base needs nothing of the version it replaces: not held while it is built
                out = _write_base(tmp, p, meta, docs)
                segments = [name]
            if (folder / name).exists():  # a killed writer's segment that no manifest names
                shutil.rmtree(folder / name)
            os.replace(tmp, folder / name)
            add_fences(*(folder / kept for kept in segments[:-1]))  # segments written before fences were kept
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        version = commit_version(
            folder,
            gen,
            {
                "format": FORMAT,
                "tenant": tenant,
                "segments": segments,
                "n_slots": out["n_slots"],
                "edge_types": out["edge_types"],
                "tokenize": out["tokenize"] or (manifest or {}).get("tokenize", ""),
                "n_nodes": n_nodes,
                "n_chunks": n_chunks,
                "newest": p.newest.isoformat() if p.newest is not None else None,
                "polars": pl.__version__,
            },
        )
        return {
            "mode": mode,
            "reason": reason,
            "version": version,
            "segments": len(segments),
            "units": out["units"],
            "nodes": n_nodes,
            "half_edges": half_edges,
            "seconds": _since(t0),
            "parts": out["seconds"],
        }


def _since(t0: float) -> float:
    return round(time.perf_counter() - t0, 3)


# --------------------------------------------------------------------------- every tenant of a lake


def build_recall_indexes(
    index_dir: Path,
    tables: MutableMapping[str, pa.Table],
    *,
    compact: bool = False,
    docs: Callable[[pl.DataFrame, str], pl.DataFrame] | None = None,
) -> dict:
    """Every tenant's recall index from the lake-wide `tables` (nodes, edges, raw_chunks, messages); the
    index of a tenant no longer in them is removed. `docs(rows, kind)`: the node ("node") or raw passage ("raw")
    documents (tenant, id, doc) of the rows (tenant, id) it is given, where the caller makes them (else each
    segment makes its own).

    `tables` is emptied: each table is taken out as it is split by tenant, and a tenant's tables are dropped once
    prepared, so the Arrow tables (the edges: 0.4 GB at 100k messages) are freed before the segments are built
    when the caller holds them nowhere else.
    Returns {tenant: write_tenant_index's stats}."""
    root = recall_dir(index_dir)
    root.mkdir(parents=True, exist_ok=True)
    names = ("nodes", "edges", "raw_chunks", "messages")
    split = {n: _by_tenant(tables.pop(n)) for n in names}
    tenants = sorted(set().union(*(split[n] for n in names)) - {None, ""})
    schemas = {"nodes": NODES, "edges": EDGES, "raw_chunks": RAW_CHUNKS, "messages": MESSAGES}
    stats = {}
    for tenant in tenants:
        t0 = time.perf_counter()
        mine = (
            None
            if docs is None
            else (lambda rows, kind, t=tenant: docs(rows.select(pl.lit(t).alias("tenant"), "id"), kind))
        )
        prepared = prepare(*(_take(split[n], tenant, schemas[n]) for n in names))
        stats[tenant] = _write_prepared(index_dir, tenant, prepared, t0, compact, mine)
        del prepared  # (not held while the next tenant's is made)
    keep = {tenant_slug(t) for t in tenants}
    for p in root.iterdir():
        if p.is_dir() and not p.name.startswith(".") and p.name not in keep:
            remove_tenant_index(index_dir, p)
    fsync_dir(root)
    return stats


def _fields(schema: pa.Schema, columns: Sequence[str]) -> pa.Schema:
    """The fields of `schema` named by `columns`, in that order: conformed to these, a table read with only the
    columns an index uses is not padded with nulls for the others."""
    return pa.schema([schema.field(c) for c in columns])


def _take(split: dict[str, pa.Table], tenant: str, schema: pa.Schema) -> pa.Table:
    """The tenant's table, taken out of `split` (an empty one when it has no rows there)."""
    table = split.pop(tenant, None)
    return table if table is not None else schema.empty_table()


def _by_tenant(table: pa.Table) -> dict[str, pa.Table]:
    if table.num_rows == 0:
        return {}
    tenants = table.column("tenant").unique().to_pylist()
    if len(tenants) == 1:
        return {tenants[0]: table}
    df = as_frame(table)
    return {key[0]: part.to_arrow() for key, part in df.partition_by("tenant", as_dict=True).items()}


def remove_tenant_index(index_dir: Path, folder: Path | str) -> None:
    """Remove one tenant's index folder (a tenant name or the folder): renamed away first, so a reader that
    opens it later finds no tenant, and a reader holding its files keeps them."""
    folder = folder if isinstance(folder, Path) else tenant_dir(index_dir, folder)
    if not folder.exists():
        return
    gone = folder.parent / f".{folder.name}.removed.{os.getpid()}"
    os.replace(folder, gone)
    fsync_dir(folder.parent)
    shutil.rmtree(gone, ignore_errors=True)
