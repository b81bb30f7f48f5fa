"""One partition's graph as rows (r2g.extract.build_graph): the accumulator that deduplicates Entities and
Concepts and keys edges, and the R2G-4 edge weight and the importance curves its rows get."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from r2g import rules as R
from r2g.concepts import ConceptDict, ConceptHit, load_concepts
from r2g.ids import edge_ids, stable_id
from r2g.message_refs import Msg, Ref, span_refs
from r2g.schema import EDGES, NODES, ROLE_EDGES
from r2g.tokens import search_tokens
from raw_store.schema import RAW_REFS, TS

ENTITY_REF_CAP = 5  # raw_refs kept per Entity within one partition (merge caps lake-wide at 20)
SOURCE_TRUST_USER = 1.0  # R2G-4 source_trust of user/chat text
RECENCY_AT_INGEST = 1.0  # R2G-4 recency_boost at ingest time (decay is a later job)


def edge_weight(conf: float, source_trust: float = SOURCE_TRUST_USER, recency: float = RECENCY_AT_INGEST) -> float:
    """R2G-4: 0.5*conf_extract + 0.3*source_trust + 0.2*recency_boost."""
    return round(0.5 * conf + 0.3 * source_trust + 0.2 * recency, 6)


def entity_importance(mentions: int) -> float:
    """Entity importance grows with the log of its mention count, in [0.3, 1]."""
    return round(min(1.0, 0.3 + 0.1 * math.log2(1 + max(0, mentions))), 6)


def concept_importance(mentions: int) -> float:
    """Concept importance: a topic that keeps coming up matters more, in [0.5, 1]."""
    return round(min(1.0, 0.5 + 0.05 * math.log2(1 + max(0, mentions))), 6)


@lru_cache(maxsize=1 << 16)
def _alias_tokens(alias: str) -> tuple[str, ...]:
    """Search tokens of an Entity alias (jieba for Chinese): the same names recur in every partition."""
    return tuple(search_tokens(alias))


# ---------------------------------------------------------------- accumulators


@dataclass
class _EntityAcc:
    id: str
    tenant: str
    subtype: str
    title: str
    lang: str
    provenance: str
    first_seen: datetime | None
    last_seen: datetime | None
    aliases: dict[str, None] = field(default_factory=dict)
    mentions: int = 0
    msgs: set = field(default_factory=set)
    text_refs: list[Ref] = field(default_factory=list)
    msg_refs: list[Ref] = field(default_factory=list)
    confidence: float = 0.0
    time: Any = None
    hit: Any = None  # Concept: the dictionary hit that created it


def _ts_min(a: datetime | None, b: datetime | None) -> datetime | None:
    return b if a is None else a if b is None else min(a, b)


def _ts_max(a: datetime | None, b: datetime | None) -> datetime | None:
    return b if a is None else a if b is None else max(a, b)


def node_row(**kw: Any) -> dict:
    """A NODES row holding the columns given; node_table's from_pylist makes the others null."""
    return kw


class PartitionGraph:
    """Row accumulator for one partition: nodes keyed by id; edges keyed by (tenant, src, type, dst), their
    ids hashed in one pass when the table is built (edges are most of the rows, and most repeat)."""

    def __init__(self) -> None:
        self.nodes: dict[str, dict] = {}
        self.entities: dict[str, _EntityAcc] = {}
        self.concepts: dict[str, _EntityAcc] = {}
        self.concept_dict: ConceptDict = load_concepts()
        # (tenant, src, type, dst) → [confidence, provenance, valid_since, raw_refs]
        self.edges: dict[tuple[str, str, str, str], list] = {}
        self.raw_ids: set[str] = set()
        self._entity_ids: dict[tuple, str] = {}
        self._concept_ids: dict[tuple[str, str], str] = {}

    def entity_id(self, msg: Msg, ref: R.EntityRef) -> str:
        """Entities dedup by (tenant, subtype, normalised name); a TIME by its ISO value."""
        key = (msg.tenant, ref.subtype, ref.name, ref.time)  # memo key: the id is a function of it
        eid = self._entity_ids.get(key)
        if eid is None:
            norm = ref.time.iso if ref.time is not None else ref.norm
            eid = self._entity_ids[key] = stable_id("n", msg.tenant, "Entity", ref.subtype, norm)
        return eid

    def entity(self, msg: Msg, ref: R.EntityRef) -> str:
        """Upsert the Entity of a mention; returns its id."""
        eid = self.entity_id(msg, ref)
        acc = self.entities.get(eid)
        if acc is None:
            acc = self.entities[eid] = _EntityAcc(
                eid,
                msg.tenant,
                ref.subtype,
                ref.name,
                msg.lang,
                ref.provenance,
                msg.ts,
                msg.ts,
                confidence=R.CONF.get(ref.provenance, 0.7),
                time=ref.time,
            )
        ts = msg.ts
        if ts is not None:
            if acc.first_seen is None or ts < acc.first_seen:
                acc.first_seen = ts
            if acc.last_seen is None or ts > acc.last_seen:
                acc.last_seen = ts
        acc.aliases[ref.name] = None
        if ref.alias:
            acc.aliases[ref.alias] = None
        if ref.time is not None:
            acc.aliases[ref.time.text] = None
        acc.mentions += 1
        acc.msgs.add((msg.conv_id, msg.msg_id))
        conf = R.CONF.get(ref.provenance, 0.7)
        if conf > acc.confidence:
            acc.confidence = conf
        if ref.start >= 0:
            if len(acc.text_refs) < ENTITY_REF_CAP:
                acc.text_refs.extend(span_refs(msg, ref.start, ref.end))
        elif len(acc.msg_refs) < ENTITY_REF_CAP:
            acc.msg_refs.extend(msg.pieces)
        return eid

    def counted(self, msg: Msg, row: dict) -> None:
        """Add a Fact/Preference/Task row; a fingerprint repeat (same id) merges into the first sighting:
        frequency counts the messages saying it, raw_refs gain the new span (capped), last_seen moves on."""
        old = self.nodes.get(row["id"])
        if old is None:
            row["_msgs"] = {(msg.conv_id, msg.msg_id)}
            self.nodes[row["id"]] = row
            return
        if (msg.conv_id, msg.msg_id) not in old["_msgs"]:
            old["_msgs"].add((msg.conv_id, msg.msg_id))
            old["frequency"] += 1
        old["raw_refs"] = list(dict.fromkeys(old["raw_refs"] + row["raw_refs"]))[:ENTITY_REF_CAP]
        old["last_seen"] = _ts_max(old["last_seen"], msg.ts)
        old["first_seen"] = _ts_min(old["first_seen"], msg.ts)
        old["importance"] = max(old["importance"], row["importance"])
        old["keywords"] = list(dict.fromkeys(old["keywords"] + row["keywords"]))

    def concept(self, msg: Msg, hit: ConceptHit, refs: list[Ref]) -> str:
        """Upsert the Concept of a topic-dictionary hit (one per concept key and tenant); returns its id."""
        cid = self._concept_ids.get((msg.tenant, hit.key))
        if cid is None:
            cid = self._concept_ids[(msg.tenant, hit.key)] = stable_id("n", msg.tenant, "Concept", hit.key)
        acc = self.concepts.get(cid)
        if acc is None:
            acc = self.concepts[cid] = _EntityAcc(
                cid, msg.tenant, "topic", hit.key, msg.lang, R.CONCEPT, msg.ts, msg.ts, confidence=R.CONF[R.CONCEPT]
            )
            acc.hit = hit
        acc.first_seen = _ts_min(acc.first_seen, msg.ts)
        acc.last_seen = _ts_max(acc.last_seen, msg.ts)
        acc.aliases[hit.term] = None
        acc.mentions += 1
        acc.msgs.add((msg.conv_id, msg.msg_id))
        if len(acc.text_refs) < ENTITY_REF_CAP:
            acc.text_refs.extend(refs)
        return cid

    def edge(self, msg: Msg, src: str, etype: str, dst: str, conf: float, provenance: str, refs: list[Ref]) -> None:
        """Add an edge; a repeat of the same (src, type, dst) keeps the higher-confidence derivation."""
        if src == dst:
            return
        key = (msg.tenant, src, etype, dst)
        old = self.edges.get(key)
        if old is None or old[0] < conf:
            self.edges[key] = [conf, provenance, msg.ts, refs]

    def edge_table(self) -> pa.Table:
        """The EDGES table, sorted by id. A MENTIONS edge whose pair also has a role edge (a Fact's AGENT,
        a Preference's AGENT, …) is left out: the role says more."""
        roles = {(k[1], k[3]) for k in self.edges if k[2] in ROLE_EDGES}
        keys = [k for k in self.edges if k[2] != "MENTIONS" or (k[1], k[3]) not in roles]
        if not keys:
            return EDGES.empty_table()
        tenants, srcs, types, dsts = zip(*keys)  # columns in one C-level pass
        confs, provenance, since, refs = zip(*(self.edges[k] for k in keys))
        weight = {c: edge_weight(c) for c in set(confs)}
        table = pa.table(
            {
                "id": edge_ids(keys),
                "tenant": tenants,
                "src": srcs,
                "dst": dsts,
                "type": types,
                "weight": [weight[c] for c in confs],
                "confidence": confs,
                "valid_since": pa.array(since, type=TS),
                "valid_until": pa.nulls(len(keys), type=TS),
                "raw_refs": pa.array(refs, type=RAW_REFS),
                "provenance": provenance,
            },
            schema=EDGES,
        )
        return table.take(pc.sort_indices(table.column("id")))

    def entity_rows(self) -> list[dict]:
        rows = []
        for acc in self.entities.values():
            aliases = sorted(acc.aliases)
            t = acc.time
            kw = list(dict.fromkeys(w for a in aliases for w in _alias_tokens(a)))
            rows.append(
                node_row(
                    id=acc.id,
                    tenant=acc.tenant,
                    type="Entity",
                    subtype=acc.subtype,
                    title=acc.title,
                    text=f"{acc.title} ({acc.subtype})",
                    keywords=kw,
                    entities=[],
                    lang=acc.lang,
                    time_start=t.start if t else None,
                    time_end=t.end if t else None,
                    time_granularity=t.granularity if t else None,
                    time_text=t.text if t else None,
                    importance=entity_importance(acc.mentions),
                    confidence=acc.confidence,
                    frequency=len(acc.msgs),
                    first_seen=acc.first_seen,
                    last_seen=acc.last_seen,
                    tier="short",
                    category="fact",
                    status="active",
                    raw_refs=list(dict.fromkeys(acc.text_refs + acc.msg_refs))[:ENTITY_REF_CAP],
                    provenance=acc.provenance,
                    aliases=aliases,
                    mentions=acc.mentions,
                )
            )
        return rows

    def concept_rows(self) -> list[dict]:
        rows = []
        for acc in self.concepts.values():
            concept = self.concept_dict[acc.hit.key]
            title = " / ".join(x for x in dict.fromkeys((concept.label_en, concept.label_zh)) if x)
            rows.append(
                node_row(
                    id=acc.id,
                    tenant=acc.tenant,
                    type="Concept",
                    subtype="topic",
                    title=title,
                    text=f"Topic: {title}",
                    keywords=concept.keywords(),
                    entities=[],
                    lang=acc.lang,
                    time_granularity="unspecified",
                    importance=concept_importance(acc.mentions),
                    confidence=acc.confidence,
                    frequency=len(acc.msgs),
                    first_seen=acc.first_seen,
                    last_seen=acc.last_seen,
                    tier="short",
                    category="fact",
                    status="active",
                    raw_refs=list(dict.fromkeys(acc.text_refs))[:ENTITY_REF_CAP],
                    provenance=R.CONCEPT,
                    aliases=sorted(acc.aliases),
                    mentions=acc.mentions,
                )
            )
        return rows

    def node_table(self) -> pa.Table:
        """The NODES table, sorted by id."""
        for r in self.nodes.values():
            r.pop("_msgs", None)
        rows = list(self.nodes.values()) + self.entity_rows() + self.concept_rows()
        rows.sort(key=lambda r: r["id"])
        return pa.Table.from_pylist(rows, schema=NODES)
