"""build_graph: one partition's messages + annotations → node and edge tables (SPEC §5).

Runs the rules of r2g.rules over every message and turns their drafts into rows:
Episode per turn, Entities deduplicated by (tenant, subtype, normalised name),
Facts per predicate clause, Preferences, and the role / MENTIONS / DERIVED_FROM /
TEMPORAL_NEXT / CAUSES / CAUSED_BY edges. Ids are hashes of natural keys and
rows are sorted by id, so the same input always yields identical tables. The messages and the raw_refs of their
spans come from r2g.message_refs.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from itertools import groupby
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from r2g import rules as R
from r2g.concepts import ConceptDict, ConceptHit, load_concepts
from r2g.ids import edge_ids, stable_id
from r2g.message_refs import Msg, Ref, read_messages, span_refs
from r2g.nlp import Annotation, paused_gc
from r2g.schema import EDGES, NODES, ROLE_EDGES
from r2g.time_values import TimeValue
from r2g.tokens import search_tokens
from raw_store.schema import RAW_REFS, TS

ENTITY_REF_CAP = 5       # raw_refs kept per Entity within one partition (merge caps lake-wide at 20)
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
    hit: Any = None          # Concept: the dictionary hit that created it


def _ts_min(a: datetime | None, b: datetime | None) -> datetime | None:
    return b if a is None else a if b is None else min(a, b)


def _ts_max(a: datetime | None, b: datetime | None) -> datetime | None:
    return b if a is None else a if b is None else max(a, b)


def _node(**kw: Any) -> dict:
    """A NODES row holding the columns given; node_table's from_pylist makes the others null."""
    return kw


class _Graph:
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
        key = (msg.tenant, ref.subtype, ref.name, ref.time)   # memo key: the id is a function of it
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
                eid, msg.tenant, ref.subtype, ref.name, msg.lang, ref.provenance, msg.ts, msg.ts,
                confidence=R.CONF.get(ref.provenance, 0.7), time=ref.time)
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
            acc = self.concepts[cid] = _EntityAcc(cid, msg.tenant, "topic", hit.key, msg.lang, R.CONCEPT,
                                                  msg.ts, msg.ts, confidence=R.CONF[R.CONCEPT])
            acc.hit = hit
        acc.first_seen = _ts_min(acc.first_seen, msg.ts)
        acc.last_seen = _ts_max(acc.last_seen, msg.ts)
        acc.aliases[hit.term] = None
        acc.mentions += 1
        acc.msgs.add((msg.conv_id, msg.msg_id))
        if len(acc.text_refs) < ENTITY_REF_CAP:
            acc.text_refs.extend(refs)
        return cid

    def edge(self, msg: Msg, src: str, etype: str, dst: str, conf: float, provenance: str,
             refs: list[Ref]) -> None:
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
        tenants, srcs, types, dsts = zip(*keys)   # columns in one C-level pass
        confs, provenance, since, refs = zip(*(self.edges[k] for k in keys))
        weight = {c: edge_weight(c) for c in set(confs)}
        table = pa.table({
            "id": edge_ids(keys), "tenant": tenants, "src": srcs, "dst": dsts, "type": types,
            "weight": [weight[c] for c in confs], "confidence": confs,
            "valid_since": pa.array(since, type=TS), "valid_until": pa.nulls(len(keys), type=TS),
            "raw_refs": pa.array(refs, type=RAW_REFS), "provenance": provenance,
        }, schema=EDGES)
        return table.take(pc.sort_indices(table.column("id")))

    def entity_rows(self) -> list[dict]:
        rows = []
        for acc in self.entities.values():
            aliases = sorted(acc.aliases)
            t = acc.time
            kw = list(dict.fromkeys(w for a in aliases for w in _alias_tokens(a)))
            rows.append(_node(
                id=acc.id, tenant=acc.tenant, type="Entity", subtype=acc.subtype, title=acc.title,
                text=f"{acc.title} ({acc.subtype})", keywords=kw, entities=[], lang=acc.lang,
                time_start=t.start if t else None, time_end=t.end if t else None,
                time_granularity=t.granularity if t else None, time_text=t.text if t else None,
                importance=entity_importance(acc.mentions), confidence=acc.confidence, frequency=len(acc.msgs),
                first_seen=acc.first_seen, last_seen=acc.last_seen, tier="short", category="fact", status="active",
                raw_refs=list(dict.fromkeys(acc.text_refs + acc.msg_refs))[:ENTITY_REF_CAP],
                provenance=acc.provenance, aliases=aliases, mentions=acc.mentions))
        return rows

    def concept_rows(self) -> list[dict]:
        rows = []
        for acc in self.concepts.values():
            concept = self.concept_dict[acc.hit.key]
            title = " / ".join(x for x in dict.fromkeys((concept.label_en, concept.label_zh)) if x)
            rows.append(_node(
                id=acc.id, tenant=acc.tenant, type="Concept", subtype="topic", title=title,
                text=f"Topic: {title}", keywords=concept.keywords(), entities=[], lang=acc.lang,
                time_granularity="unspecified", importance=concept_importance(acc.mentions),
                confidence=acc.confidence, frequency=len(acc.msgs), first_seen=acc.first_seen,
                last_seen=acc.last_seen, tier="short", category="fact", status="active",
                raw_refs=list(dict.fromkeys(acc.text_refs))[:ENTITY_REF_CAP],
                provenance=R.CONCEPT, aliases=sorted(acc.aliases), mentions=acc.mentions))
        return rows

    def node_table(self) -> pa.Table:
        """The NODES table, sorted by id."""
        for r in self.nodes.values():
            r.pop("_msgs", None)
        rows = list(self.nodes.values()) + self.entity_rows() + self.concept_rows()
        rows.sort(key=lambda r: r["id"])
        return pa.Table.from_pylist(rows, schema=NODES)


# ---------------------------------------------------------------- per message

@dataclass
class Coref:
    """Coreference context of one message within its conversation (r2g.rule.coref.v1)."""

    names: dict[str, str]
    you: str | None
    third: str | None


def _person_mentions(ann: Annotation, text: str) -> list[str]:
    return [text[ann.idx[s]:ann.idx[e - 1] + len(ann.tokens[e - 1])] for s, e, label in ann.ents if label == "PERSON"]


def _conversation_coref(msgs: list[Msg], annotations: Mapping[str, Annotation]) -> list[Coref]:
    """Per message of one conversation (in order): name variants, the addressee and the one recent third person.

    "you" is the other participant of a two-party conversation, else the previous
    turn's speaker; he/she resolve only when exactly one other person was named in
    this or the two turns before (evidence, not guesswork).
    """
    speakers = list(dict.fromkeys(m.speaker for m in msgs if m.speaker))
    mentioned = [_person_mentions(annotations[m.text_sha], m.text) for m in msgs]
    names = R.name_variants([n for ns in mentioned for n in ns], speakers)

    def canon(n: str) -> str:
        return names.get(" ".join(n.lower().split()), n)

    out = []
    for k, m in enumerate(msgs):
        you: str | None
        if len(speakers) == 2 and m.speaker in speakers:
            you = speakers[1 - speakers.index(m.speaker)]
        else:
            prev = next((msgs[j].speaker for j in range(k - 1, -1, -1) if msgs[j].speaker != m.speaker), None)
            you = prev or None
        recent = [canon(n) for j in range(max(0, k - 2), k + 1) for n in mentioned[j]]
        others = {n for n in recent if n not in (m.speaker, you)}
        out.append(Coref(names, you, next(iter(others)) if len(others) == 1 else None))
    return out


def _fact_fingerprint(msg: Msg, f: R.FactDraft) -> tuple:
    """Dedup key (R2G-4): normalised statement (agent, polarity, modality, predicate, patient, place) + day bucket."""
    role = {r.type: r.target.norm for r in reversed(f.roles)}   # the first role of each type
    return (role.get("AGENT", ""), "not" if f.negation else "", f.modality or "", f.predicate_norm,
            role.get("PATIENT", ""), role.get("LOCATION", ""), _day_bucket(msg, f.time))


def _day_bucket(msg: Msg, t: TimeValue | None) -> str:
    if t is not None and t.granularity != "recurring":
        return t.start.date().isoformat()
    return msg.ts.date().isoformat() if msg.ts is not None else f"conv:{msg.conv_id}"


def _norm_text(s: str) -> str:
    return " ".join(s.lower().split())


def _block_of(blocks_chars: list[tuple[int, int]], start: int) -> int:
    for k, (lo, hi) in enumerate(blocks_chars):
        if lo <= start < hi:
            return k
    return len(blocks_chars) - 1


def _message_graph(g: _Graph, msg: Msg, ann: Annotation, coref: Coref) -> list[str]:
    """Run every rule on one message and add its rows to `g`; returns its Episode ids in text order."""
    ctx = R.MessageCtx(msg.tenant, msg.conv_id, msg.msg_id, msg.speaker, msg.ts, ann.lang, msg.text, ann,
                       names=coref.names, you=coref.you, third=coref.third)
    zh = ann.lang == "zh"
    times = R.time_rule(ctx)
    ner = R.entity_zh_rule(ctx) if zh else R.entity_en_rule(ctx)
    facts = R.fact_zh_rule(ctx, times) if zh else R.fact_en_rule(ctx, times, ner)
    prefs = R.preference_rule(ctx, ner)
    tasks = R.task_rule(ctx, facts)
    speaker = R.speaker_rule(ctx)
    hits = g.concept_dict.match(ann.tokens, ann.lemma, ann.lang)

    # a fact may read a time differently (a bare weekday in a future clause is the coming one): its reading wins
    fact_times = {(r.target.start, r.target.end): r.target for f in facts for r in f.roles if r.type == "TIME"}
    time_ents = [fact_times.get((tr.start, tr.end)) or tr.entity() for tr in times if tr.value is not None]
    mention_refs = [ref for _, _, ref in ner] + [ref for ref in time_ents if ref is not None]
    whole = span_refs(msg, -1, -1)
    g.raw_ids.update(r[0] for r in whole)

    # topic blocks of a long text (one block = the whole turn for ordinary messages)
    blocks = R.topic_blocks(ctx)
    sents = [(s, e) for s, e in ann.sents if e > s]
    if len(blocks) > 1:
        bchars = [(ann.idx[sents[lo][0]], ann.idx[sents[hi - 1][1] - 1] + len(ann.tokens[sents[hi - 1][1] - 1]))
                  for lo, hi in blocks]
        # blocks tile the text: each runs to where the next begins (the whitespace between belongs to it)
        starts = [0] + [lo for lo, _ in bchars[1:]]
        bchars = list(zip(starts, starts[1:] + [len(msg.text)]))
        ep_ids = [stable_id("n", msg.tenant, "Episode", msg.conv_id, msg.msg_id, f"block{k}")
                  for k in range(len(blocks))]
    else:
        bchars = [(0, len(msg.text))]
        ep_ids = [stable_id("n", msg.tenant, "Episode", msg.conv_id, msg.msg_id)]

    # entities mentioned in the text, then the speaker
    ent_titles: list[dict[str, None]] = [{} for _ in ep_ids]
    mentioned: list[dict[str, tuple[float, list[Ref]]]] = [{} for _ in ep_ids]
    for ref in mention_refs:
        eid = g.entity(msg, ref)
        b = _block_of(bchars, ref.start)
        ent_titles[b][g.entities[eid].title] = None
        mentioned[b].setdefault(eid, (R.CONF[R.MENTIONS], span_refs(msg, ref.start, ref.end)))
    if speaker is not None:
        eid = g.entity(msg, speaker)
        for b in range(len(ep_ids)):
            ent_titles[b][g.entities[eid].title] = None
            # authorship is weaker evidence than an in-text mention; keeps the speaker reachable from the turn
            mentioned[b].setdefault(eid, (0.6, span_refs(msg, *bchars[b]) if len(ep_ids) > 1 else whole))

    gran = "minute" if msg.ts is not None else "unspecified"
    for b, ep_id in enumerate(ep_ids):
        lo, hi = bchars[b]
        n_facts = sum(1 for f in facts if lo <= f.start < hi)
        n_prefs = sum(1 for p in prefs if lo <= p.start < hi)
        draft = R.episode_rule(ctx, len(mentioned[b]), n_facts, n_prefs,
                               blocks[b] if len(ep_ids) > 1 else None, len(ep_ids))
        refs = span_refs(msg, lo, hi) if len(ep_ids) > 1 else whole
        g.nodes[ep_id] = _node(
            id=ep_id, tenant=msg.tenant, type="Episode", subtype="block" if len(ep_ids) > 1 else "turn",
            title=draft.title, text=draft.text, keywords=draft.keywords, entities=list(ent_titles[b]), lang=ann.lang,
            time_start=msg.ts, time_end=msg.ts, time_granularity=gran, time_text=None,
            importance=draft.importance, confidence=1.0, frequency=1, sentiment=None,
            first_seen=msg.ts, last_seen=msg.ts, tier="short", category="episode", status="active",
            raw_refs=refs, provenance=R.TOPIC_BLOCK if len(ep_ids) > 1 else R.EPISODE,
            conv_id=msg.conv_id, msg_id=msg.msg_id, speaker=msg.speaker,
            predicate_norm=None, negation=None, modality=None, aliases=[], mentions=None)
        for eid, (conf, mrefs) in mentioned[b].items():
            g.edge(msg, ep_id, "MENTIONS", eid, conf, R.MENTIONS, mrefs)
        for rid in dict.fromkeys(r[0] for r in refs):
            g.edge(msg, ep_id, "DERIVED_FROM", rid, R.CONF[R.DERIVED_FROM], R.DERIVED_FROM,
                   [r for r in refs if r[0] == rid])

    def derive(nid: str, refs: list[Ref], start: int) -> None:
        """nid -DERIVED_FROM-> its Episode (block). Not to the RawChunks too: the node's raw_refs cite its
        exact bytes, and its Episode's DERIVED_FROM edges lead to the chunks."""
        g.edge(msg, nid, "DERIVED_FROM", ep_ids[_block_of(bchars, start) if len(ep_ids) > 1 else 0],
               R.CONF[R.DERIVED_FROM],
               R.DERIVED_FROM, refs)

    fact_ids: list[str] = []
    for f in facts:
        fid = stable_id("n", msg.tenant, "Fact", *_fact_fingerprint(msg, f))
        fact_ids.append(fid)
        refs = span_refs(msg, f.start, f.end)
        conf = R.CONF[f.provenance]
        titles: dict[str, None] = {}
        role_targets: set[str] = set()
        for role in f.roles:
            eid = g.entity(msg, role.target)
            role_targets.add(eid)
            titles[g.entities[eid].title] = None
            rconf = R.CONF[role.provenance] if role.type in ("TIME", "LOCATION") or role.provenance == R.COREF \
                else conf
            g.edge(msg, fid, role.type, eid, rconf, role.provenance, refs)
        for ref in f.mentions:
            eid = g.entity_id(msg, ref)
            if eid not in g.entities:
                eid = g.entity(msg, ref)
            titles[g.entities[eid].title] = None
            if eid not in role_targets:   # (edge_table drops the rest of such repeats)
                g.edge(msg, fid, "MENTIONS", eid, R.CONF[R.MENTIONS], R.MENTIONS,
                       span_refs(msg, ref.start, ref.end) if ref.start >= 0 else refs)
        t = f.time
        imp = R.importance("Fact", msg.text[f.start:f.end], ann.lang, f.keywords, n_roles=len(f.roles))
        g.counted(msg, _node(
            id=fid, tenant=msg.tenant, type="Fact", subtype=f.subtype, title=f.title,
            text=R.clip(msg.text[f.start:f.end], R.SUMMARY_MAX_CHARS), keywords=f.keywords, entities=list(titles),
            lang=ann.lang, time_start=t.start if t else None, time_end=t.end if t else None,
            time_granularity=t.granularity if t else "unspecified", time_text=f.time_text,
            importance=imp, confidence=conf, frequency=1, sentiment=None,
            first_seen=msg.ts, last_seen=msg.ts, tier="short", category="fact", status="active",
            raw_refs=refs, provenance=f.provenance, conv_id=msg.conv_id, msg_id=msg.msg_id, speaker=msg.speaker,
            predicate_norm=f.predicate_norm, negation=f.negation, modality=f.modality, aliases=[], mentions=None))
        derive(fid, refs, f.start)

    for cause, effect in R.cause_rule(facts):
        refs = span_refs(msg, min(facts[cause].start, facts[effect].start), max(facts[cause].end, facts[effect].end))
        g.edge(msg, fact_ids[cause], "CAUSES", fact_ids[effect], R.CONF[R.CAUSE], R.CAUSE, refs)
        g.edge(msg, fact_ids[effect], "CAUSED_BY", fact_ids[cause], R.CONF[R.CAUSE], R.CAUSE, refs)

    who = f"{msg.speaker}: " if msg.speaker else ""
    spk_norm = _norm_text(msg.speaker or "")
    pref_ids: list[tuple[str, int, int]] = []
    for p in prefs:
        month = msg.ts.strftime("%Y-%m") if msg.ts is not None else f"conv:{msg.conv_id}"
        pid = stable_id("n", msg.tenant, "Preference", spk_norm, p.subtype, _norm_text(p.text), month)
        pref_ids.append((pid, p.start, p.end))
        refs = span_refs(msg, p.start, p.end)
        titles = {}
        for ref in p.mentions:
            eid = g.entity_id(msg, ref)
            titles[g.entities[eid].title] = None
            g.edge(msg, pid, "MENTIONS", eid, R.CONF[R.MENTIONS], R.MENTIONS, span_refs(msg, ref.start, ref.end))
        if speaker is not None:
            g.edge(msg, pid, "AGENT", g.entity_id(msg, speaker), R.CONF[R.PREFERENCE], R.PREFERENCE, refs)
        g.counted(msg, _node(
            id=pid, tenant=msg.tenant, type="Preference", subtype=p.subtype, title=R.clip(who + p.text, 80),
            text=p.text, keywords=p.keywords, entities=list(titles), lang=ann.lang,
            time_start=msg.ts, time_end=None, time_granularity="minute" if msg.ts else "unspecified",
            time_text=None, importance=R.importance("Preference", p.text, ann.lang, p.keywords,
                                                    n_entities=len(p.mentions)),
            confidence=R.CONF[R.PREFERENCE], frequency=1, sentiment=None,
            first_seen=msg.ts, last_seen=msg.ts, tier="short", category="fact", status="active",
            raw_refs=refs, provenance=R.PREFERENCE, conv_id=msg.conv_id, msg_id=msg.msg_id, speaker=msg.speaker,
            predicate_norm=None, negation=p.subtype == "dislike", modality=None, aliases=[], mentions=None))
        derive(pid, refs, p.start)

    task_ids: list[tuple[str, int, int]] = []
    for tk in tasks:
        tid = stable_id("n", msg.tenant, "Task", spk_norm, tk.subtype, _norm_text(tk.text), _day_bucket(msg, tk.time))
        task_ids.append((tid, tk.start, tk.end))
        refs = span_refs(msg, tk.start, tk.end)
        t = tk.time
        g.counted(msg, _node(
            id=tid, tenant=msg.tenant, type="Task", subtype=tk.subtype, title=R.clip(who + tk.text, 80),
            text=tk.text, keywords=tk.keywords, entities=[], lang=ann.lang,
            time_start=t.start if t else None, time_end=t.end if t else None,
            time_granularity=t.granularity if t else "unspecified", time_text=tk.time_text,
            importance=R.importance("Task", tk.text, ann.lang, tk.keywords), confidence=R.CONF[R.TASK],
            frequency=1, sentiment=None, first_seen=msg.ts, last_seen=msg.ts, tier="short", category="fact",
            status="open", raw_refs=refs, provenance=R.TASK, conv_id=msg.conv_id, msg_id=msg.msg_id,
            speaker=msg.speaker, predicate_norm=facts[tk.fact].predicate_norm if tk.fact is not None else None,
            negation=False, modality=facts[tk.fact].modality if tk.fact is not None else None, aliases=[],
            mentions=None))
        if speaker is not None:
            g.edge(msg, tid, "AGENT", g.entity_id(msg, speaker), R.CONF[R.TASK], R.TASK, refs)
        if tk.fact is not None:
            g.edge(msg, tid, "DERIVED_FROM", fact_ids[tk.fact], R.CONF[R.TASK], R.TASK, refs)
            for tr in facts[tk.fact].roles:
                if tr.type == "TIME":
                    g.edge(msg, tid, "TIME", g.entity_id(msg, tr.target), R.CONF[R.TIME], R.TIME, refs)
        derive(tid, refs, tk.start)

    # topics: Concept per dictionary hit; ABOUT from the block, and from the facts/preferences/tasks holding it
    for hit in hits:
        cs = ann.idx[hit.tok_start]
        ce = ann.idx[hit.tok_end - 1] + len(ann.tokens[hit.tok_end - 1])
        hrefs = span_refs(msg, cs, ce)
        cid = g.concept(msg, hit, hrefs)
        g.edge(msg, ep_ids[_block_of(bchars, cs)], "ABOUT", cid, R.CONF[R.CONCEPT], R.CONCEPT, hrefs)
        for nid, lo, hi in [(fid, f.start, f.end) for fid, f in zip(fact_ids, facts)] + pref_ids + task_ids:
            if lo <= cs and ce <= hi:
                g.edge(msg, nid, "ABOUT", cid, R.CONF[R.CONCEPT], R.CONCEPT, hrefs)
    return ep_ids


def build_graph(messages: pa.Table, annotations: Mapping[str, Annotation]) -> tuple[pa.Table, pa.Table]:
    """Nodes (r2g.schema.NODES) and edges (EDGES) of one partition, sorted by id.

    `messages`: raw_store.schema.MESSAGES rows (any tenants/conversations);
    `annotations`: Annotation per messages.text_sha (KeyError if one is missing).
    Every edge endpoint is a node of the result or a raw_id of the messages' raw_refs.
    """
    with paused_gc():
        g = _Graph()
        episodes: list[tuple[str, str, int, int, str]] = []
        msgs = read_messages(messages)
        for _, group in groupby(msgs, key=lambda m: (m.tenant, m.conv_id)):
            conv = list(group)
            for msg, coref in zip(conv, _conversation_coref(conv, annotations)):
                for b, ep_id in enumerate(_message_graph(g, msg, annotations[msg.text_sha], coref)):
                    episodes.append((msg.tenant, msg.conv_id, msg.seq, b, ep_id))
        tenant_of = {e[-1]: e[0] for e in episodes}
        for src, dst in R.temporal_next_rule(episodes):
            g.edges[(tenant_of[src], src, "TEMPORAL_NEXT", dst)] = [
                R.CONF[R.TEMPORAL_NEXT], R.TEMPORAL_NEXT, g.nodes[dst]["time_start"], []]
        return g.node_table(), g.edge_table()
