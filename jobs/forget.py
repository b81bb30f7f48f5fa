"""Selective forgetting (seed 004 §6.4, §24): by node, conversation, speaker, topic, time window, or a whole tenant.

A forget request is a durable rule, `$MEMCTL_DATA/forget/<id>.json`, not a one-off delete: every later
materialization applies it, so nothing forgotten comes back from the inbox.

- Messages it covers (conversation / speaker / window / all, and the turns of the Episodes a node or topic
  request names) are dropped at ingest, before chunking: they never reach a RawChunk, the NLP step, the
  graph or an index again. A whole-tenant request drops the tenant's rejects too.
- Nodes it names (node / topic: the Concept and every node ABOUT it) are dropped when the lake-wide graph is
  merged, with every edge touching them.
- After the rebuild, `collect` deletes the raw blobs the request covered that nothing still cites (a blob is
  kept while any RawChunk, reject or node of the tenant still points at it), leaving a tombstone per blob,
  purges the NLP cache of forgotten texts no kept message shares, and writes the `audit` row: the ids of the
  nodes removed, the count of edges and index entries withdrawn, the raw ids deleted (the deletion proof).

Pure functions over tables except `save_request`, `load_requests` and `collect`, which touch the data
directory; times are the request's own `requested_at`, never the wall clock of a later run.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from r2g.ids import stable_id
from r2g.lake_graph import read_graph_columns, read_lake_table
from r2g.schema import AUDIT
from raw_store.cas import RawStore, raw_id_for, tenant_dir
from raw_store.lake import Lake, file_bytes, read_parquet, read_table, write_bytes_atomic, write_table
from raw_store.readers import Message, Reject
from raw_store.schema import FORGOTTEN, TOMBSTONES
from raw_store.tables import read_parts

SCOPES = ("node", "conv", "speaker", "topic", "window", "all")
FORGET_DIR = "forget"
_SNAPSHOT = ".snapshot.parquet"


@dataclass(frozen=True)
class ForgetRequest:
    tenant: str
    scope: str  # SCOPES
    value: str | None  # node id / conv id / speaker / Concept id; None for window and all
    start: datetime | None = None  # window (naive UTC, inclusive)
    end: datetime | None = None
    reason: str = ""
    requested_at: datetime | None = None
    # resolved when the request is made, against the lake as it was then:
    nodes: tuple[str, ...] = ()  # node / topic: the node ids to drop
    turns: tuple[tuple[str, str], ...] = ()  # (conv_id, msg_id) of Episodes among them: their turns go too
    blobs: tuple[str, ...] = field(default=())  # raw ids that held forgotten content then (deletion candidates)

    @property
    def id(self) -> str:
        return stable_id("fgt", self.tenant, self.scope, self.value, _iso(self.start), _iso(self.end))

    def to_json(self) -> dict:
        d = asdict(self)
        d.update(
            id=self.id,
            start=_iso(self.start),
            end=_iso(self.end),
            requested_at=_iso(self.requested_at),
            nodes=list(self.nodes),
            turns=[list(t) for t in self.turns],
            blobs=list(self.blobs),
        )
        return d

    @classmethod
    def from_json(cls, d: dict) -> ForgetRequest:
        return cls(
            tenant=d["tenant"],
            scope=d["scope"],
            value=d.get("value"),
            start=_dt(d.get("start")),
            end=_dt(d.get("end")),
            reason=d.get("reason") or "",
            requested_at=_dt(d.get("requested_at")),
            nodes=tuple(d.get("nodes") or ()),
            turns=tuple(tuple(t) for t in d.get("turns") or ()),
            blobs=tuple(d.get("blobs") or ()),
        )


def _iso(t: datetime | None) -> str | None:
    return t.isoformat() if t is not None else None


def _dt(s: str | None) -> datetime | None:
    return datetime.fromisoformat(s) if s else None


# -- the durable request set -------------------------------------------------------------------


def forget_dir(lake: Lake) -> Path:
    return lake.root / FORGET_DIR


def load_requests(lake: Lake) -> list[ForgetRequest]:
    """Every forget request ever made, in id order."""
    folder = forget_dir(lake)
    if not folder.is_dir():
        return []
    return [ForgetRequest.from_json(json.loads(file_bytes(p))) for p in sorted(folder.glob("fgt_*.json"))]


def save_request(lake: Lake, request: ForgetRequest) -> Path:
    """Write the request (atomically) and a snapshot of the tenant's node, edge and raw ids, from which
    `collect` later proves what was removed."""
    folder = forget_dir(lake)
    path = folder / f"{request.id}.json"
    write_bytes_atomic(path, json.dumps(request.to_json(), ensure_ascii=False, sort_keys=True, indent=1).encode())
    snap = pa.table({"kind": [], "id": []}, schema=pa.schema([("kind", pa.string()), ("id", pa.string())]))
    kinds, ids = [], []
    for kind, name in (("node", "nodes"), ("edge", "edges")):
        t = read_lake_table(lake, name, ["tenant", "id"])
        for i in _ids_of(t, request.tenant, "id"):
            kinds.append(kind)
            ids.append(i)
    snap = pa.table({"kind": kinds, "id": ids}, schema=snap.schema)
    write_table(snap, folder / f"{request.id}{_SNAPSHOT}", snap.schema)
    return path


def forget_version(requests: Iterable[ForgetRequest]) -> str:
    """A hash of the request set: a partition built under another set re-runs (raw_store.lake.stale_partitions)."""
    ids = sorted(r.id for r in requests)
    return "fgt." + hashlib.sha256("|".join(ids).encode()).hexdigest()[:12] if ids else ""


def _ids_of(table: pa.Table, tenant: str, column: str) -> list[str]:
    if table.num_rows == 0:
        return []
    return table.filter(pc.equal(table.column("tenant"), tenant)).column(column).to_pylist()


# -- resolving a request against the lake as it is ---------------------------------------------


def resolve(
    lake: Lake,
    tenant: str,
    scope: str,
    value: str | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
    reason: str = "",
    requested_at: datetime | None = None,
) -> ForgetRequest:
    """The request with what it covers now: the node ids (node / topic), the Episode turns among them, and the
    raw ids holding forgotten content. ValueError when the scope's argument is missing or names nothing."""
    if scope not in SCOPES:
        raise ValueError(f"unknown scope {scope!r} (one of {', '.join(SCOPES)})")
    if scope in ("node", "conv", "speaker", "topic") and not (value or "").strip():
        raise ValueError(f"--{scope} needs a value")
    if scope == "window" and start is None and end is None:
        raise ValueError("a time window needs --from and/or --to")
    nodes, edges = read_graph_columns(
        lake,
        "consolidated",
        ["tenant", "id", "type", "conv_id", "msg_id", "raw_refs"],
        ["tenant", "type", "src", "dst"],
    )
    messages = read_lake_table(lake, "messages", ["tenant", "conv_id", "msg_id", "speaker", "ts", "raw_refs"])
    nodes = nodes.filter(pc.equal(nodes.column("tenant"), tenant)) if nodes.num_rows else nodes
    node_ids: list[str] = []
    if scope in ("node", "topic"):
        known = set(nodes.column("id").to_pylist())
        if value is None or value not in known:
            raise ValueError(f"no node {value!r} in tenant {tenant!r}")
        node_ids = [value]
        if scope == "topic":
            e = edges.filter(
                pc.and_(
                    pc.equal(edges.column("tenant"), tenant),
                    pc.and_(pc.equal(edges.column("type"), "ABOUT"), pc.equal(edges.column("dst"), value)),
                )
            )
            node_ids += sorted(set(e.column("src").to_pylist()) & known)
    chosen = set(node_ids)
    turns = sorted(
        {
            (r["conv_id"], r["msg_id"])
            for r in nodes.select(["id", "type", "conv_id", "msg_id"]).to_pylist()
            if r["id"] in chosen and r["type"] == "Episode" and r["conv_id"] and r["msg_id"]
        }
    )
    request = ForgetRequest(tenant, scope, value, start, end, reason, requested_at, tuple(node_ids), tuple(turns))
    rules = ForgetRules([request])
    blobs: set[str] = set()
    matched = 0
    for m in messages.filter(pc.equal(messages.column("tenant"), tenant)).to_pylist() if messages.num_rows else []:
        if rules.covering(tenant, m["conv_id"], m["msg_id"], m["speaker"], m["ts"]):
            matched += 1
            blobs.update(ref["raw_id"] for ref in m["raw_refs"] or ())
    if scope in ("conv", "speaker", "window") and not matched:
        what = {"conv": f"conversation {value!r}", "speaker": f"speaker {value!r}", "window": "that time window"}
        raise ValueError(f"tenant {tenant!r} has no message in {what[scope]}")
    for r in nodes.select(["id", "raw_refs"]).to_pylist():
        if r["id"] in chosen:
            blobs.update(ref["raw_id"] for ref in r["raw_refs"] or ())
    if scope == "all":
        for name, col in (("raw_chunks", "id"), ("rejects", "raw_id")):
            blobs.update(_ids_of(read_lake_table(lake, name, ["tenant", col]), tenant, col))
    return ForgetRequest(
        tenant, scope, value, start, end, reason, requested_at, tuple(node_ids), tuple(turns), tuple(sorted(blobs))
    )


# -- applying the rules --------------------------------------------------------------------------


class ForgetRules:
    """The request set as filters: which messages and rejects ingest drops, which nodes the merge drops."""

    def __init__(self, requests: Iterable[ForgetRequest]) -> None:
        self.requests = sorted(requests, key=lambda r: r.id)
        self._by_tenant: dict[str, list[ForgetRequest]] = {}
        for r in self.requests:
            self._by_tenant.setdefault(r.tenant, []).append(r)
        self.node_ids = {(r.tenant, n) for r in self.requests for n in r.nodes}

    def __bool__(self) -> bool:
        return bool(self.requests)

    def covering(self, tenant: str, conv_id: str, msg_id: str, speaker: str | None, ts: datetime | None) -> str | None:
        """The id of the first request (by id) that covers this message, or None."""
        for r in self._by_tenant.get(tenant, ()):
            if r.scope == "all" or (conv_id, msg_id) in r.turns:
                return r.id
            if r.scope == "conv" and conv_id == r.value:
                return r.id
            if (
                r.scope == "speaker"
                and speaker is not None
                and r.value is not None
                and speaker.strip().casefold() == r.value.strip().casefold()
            ):
                return r.id
            if (
                r.scope == "window"
                and ts is not None
                and (r.start is None or ts >= r.start)
                and (r.end is None or ts <= r.end)
            ):
                return r.id
        return None

    def message(self, m: Message) -> str | None:
        return self.covering(m.tenant, m.conv_id, m.msg_id, m.speaker, m.ts)

    def reject(self, r: Reject) -> str | None:
        return next((q.id for q in self._by_tenant.get(r.tenant, ()) if q.scope == "all"), None)

    def drop_nodes(self, nodes: pa.Table, edges: pa.Table) -> tuple[pa.Table, pa.Table]:
        """The graph without the nodes node/topic requests name, and without every edge touching one."""
        if not self.node_ids or nodes.num_rows == 0:
            return nodes, edges
        keys = [f"{t}\x1f{i}" for t, i in sorted(self.node_ids)]
        key_set = pa.array(keys)

        def keyed(table: pa.Table, column: str) -> pa.Array:
            return pc.binary_join_element_wise(table.column("tenant"), table.column(column), "\x1f")

        # a table none of whose rows go is kept as it is, not filtered into a copy of itself
        named = pc.is_in(keyed(nodes, "id"), key_set)
        if pc.any(named).as_py():
            nodes = nodes.filter(pc.invert(named))
        if edges.num_rows:
            touching = pc.or_(pc.is_in(keyed(edges, "src"), key_set), pc.is_in(keyed(edges, "dst"), key_set))
            if pc.any(touching).as_py():
                edges = edges.filter(pc.invert(touching))
        return nodes, edges


# -- after the rebuild: physical deletion, tombstones, audit ----------------------------------------


def collect(lake: Lake, requests: Iterable[ForgetRequest]) -> pa.Table:
    """Delete the requests' raw blobs nothing still cites (tombstoned), purge forgotten texts from the NLP
    cache, and return the AUDIT table (one row per request, the proof of what went). Idempotent: a request
    collected before keeps its audit row (its id snapshot is gone once the row is written).
    """
    store = RawStore(lake.root)
    requests = list(requests)
    if not requests:
        return AUDIT.empty_table()
    nodes, edges = read_graph_columns(lake, "consolidated", ["tenant", "id", "raw_refs"], ["tenant", "id"])
    chunks = read_lake_table(lake, "raw_chunks", ["tenant", "id"])
    rejects = read_lake_table(lake, "rejects", ["tenant", "raw_id"])
    messages = read_lake_table(lake, "messages", ["text_sha"])
    forgotten = _forgotten_rows(lake)
    audited = {r["request_id"]: r for r in read_table(lake.table("audit"), AUDIT).to_pylist()}
    cited: dict[str, set[str]] = {}  # per tenant, read once for all its requests
    paths: dict[str, dict[str, list[tuple[str, str]]]] = {}
    rows = []
    for req in sorted(requests, key=lambda r: r.id):
        if req.tenant not in cited:
            cited[req.tenant] = _cited(req.tenant, nodes, chunks, rejects)
            paths[req.tenant] = _blob_paths(lake, req.tenant)
        deleted = []
        for raw_id in req.blobs:
            if raw_id in cited[req.tenant]:
                continue
            for path, sha in paths[req.tenant].pop(raw_id, ()):
                store.delete(
                    req.tenant, path, sha, reason=f"forget {req.id}: {req.reason}".strip(), at=req.requested_at
                )
                deleted.append(raw_id)
        if deleted:
            _purge_nlp_cache(lake, req, messages, forgotten)
        before = _snapshot(lake, req)
        now_nodes = set(_ids_of(nodes, req.tenant, "id"))
        now_edges = set(_ids_of(edges, req.tenant, "id"))
        gone_nodes = sorted(before.get("node", set()) - now_nodes)
        gone_edges = before.get("edge", set()) - now_edges
        previous = audited.get(req.id)
        rows.append(
            {
                "request_id": req.id,
                "tenant": req.tenant,
                "scope": req.scope,
                "value": req.value,
                "window_start": req.start,
                "window_end": req.end,
                "reason": req.reason,
                "requested_at": req.requested_at,
                "messages": previous["messages"] if previous and not before else _forgotten_messages(forgotten, req),
                "nodes": previous["nodes"] if previous and not before else gone_nodes,
                "edges": previous["edges"] if previous and not before else len(gone_edges),
                "blobs": sorted(set(deleted) | set(previous["blobs"] if previous else ())),
                "index_entries": previous["index_entries"]
                if previous and not before
                else len(gone_nodes) + len(deleted),
            }
        )
        if before:
            # the proof is now in the audit row; the id snapshot has done its job
            (forget_dir(lake) / f"{req.id}{_SNAPSHOT}").unlink(missing_ok=True)
    return pa.Table.from_pylist(rows, schema=AUDIT)


def _cited(tenant: str, nodes: pa.Table, chunks: pa.Table, rejects: pa.Table) -> set[str]:
    """Raw ids the tenant's lake still needs: its RawChunks, reject blobs and every node raw_ref."""
    cited = set(_ids_of(chunks, tenant, "id")) | set(_ids_of(rejects, tenant, "raw_id"))
    if nodes.num_rows:
        mine = nodes.filter(pc.equal(nodes.column("tenant"), tenant))
        for refs in mine.column("raw_refs").to_pylist():
            cited.update(ref["raw_id"] for ref in refs or ())
    return cited


def _blob_paths(lake: Lake, tenant: str) -> dict[str, list[tuple[str, str]]]:
    """raw_id → [(store path, sha256)] of the tenant's blobs on disk (a chunk may exist under several days)."""
    out: dict[str, list[tuple[str, str]]] = {}
    base = lake.raw / tenant_dir(tenant)
    for full in sorted(base.rglob("raw_*.blob.zst"), key=lambda p: p.parts) if base.is_dir() else ():
        sha = full.name.removeprefix("raw_").removesuffix(".blob.zst")
        out.setdefault(raw_id_for(sha), []).append((full.relative_to(lake.root).as_posix(), sha))
    return out


def _snapshot(lake: Lake, req: ForgetRequest) -> dict[str, set[str]]:
    path = forget_dir(lake) / f"{req.id}{_SNAPSHOT}"
    try:
        t = read_parquet(path)
    except FileNotFoundError:
        return {}
    out: dict[str, set[str]] = {}
    for kind, i in zip(t.column("kind").to_pylist(), t.column("id").to_pylist()):
        out.setdefault(kind, set()).add(i)
    return out


def _forgotten_rows(lake: Lake) -> pa.Table:
    """What every partition dropped at ingest (request id and text hash per message; never the text)."""
    return read_parts(lake, "forgotten", FORGOTTEN)


def _forgotten_messages(t: pa.Table, req: ForgetRequest) -> int:
    return (
        int(pc.sum(pc.and_(pc.equal(t.column("request_id"), req.id), pc.is_valid(t.column("text_sha")))).as_py() or 0)
        if t.num_rows
        else 0
    )


def _purge_nlp_cache(lake: Lake, req: ForgetRequest, messages: pa.Table, t: pa.Table) -> None:
    """Drop the NLP index rows of texts only forgotten messages had (a kept message with the same text keeps it).
    The annotations themselves lived in the partitions' files, which the re-ingest rewrote without them."""
    from r2g.pipeline import PartAnnotations

    path = lake.cache / "nlp.sqlite"
    if not path.exists():
        return
    kept = set(messages.column("text_sha").to_pylist()) if messages.num_rows else set()
    forgotten = {
        sha
        for rid, sha in zip(t.column("request_id").to_pylist(), t.column("text_sha").to_pylist())
        if rid == req.id and sha
    }
    doomed = sorted(forgotten - kept)
    if doomed:
        PartAnnotations(path, lake.parts).drop(doomed)


def tombstones(lake: Lake) -> pa.Table:
    """The TOMBSTONES table: one row per forgotten blob, from the tombstone files beside where they were."""
    rows = []
    for path in sorted(lake.raw.rglob("raw_*.tomb"), key=lambda p: p.parts) if lake.raw.is_dir() else ():
        t = json.loads(file_bytes(path))
        rows.append({**t, "deleted_at": datetime.fromisoformat(t["deleted_at"])})
    return pa.Table.from_pylist(rows, schema=TOMBSTONES)
