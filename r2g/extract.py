"""build_graph: one partition's messages + annotations → node and edge tables (SPEC §5).

Runs the rules of r2g.rules over every message and turns their drafts into rows:
Episode per turn, Entities deduplicated by (tenant, subtype, normalised name),
Facts per predicate clause, Preferences, and the role / MENTIONS / DERIVED_FROM /
TEMPORAL_NEXT / CAUSES / CAUSED_BY edges. Ids are hashes of natural keys and
rows are sorted by id, so the same input always yields identical tables. The messages and the raw_refs of their
spans come from r2g.message_refs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from itertools import groupby

import pyarrow as pa

from r2g import rules as R
from r2g.ids import stable_id
from r2g.message_refs import Msg, Ref, read_messages, span_refs
from r2g.nlp import Annotation, paused_gc
from r2g.partition_graph import PartitionGraph, node_row
from r2g.time_values import TimeValue

# ---------------------------------------------------------------- per message


@dataclass
class Coref:
    """Coreference context of one message within its conversation (r2g.rule.coref.v1)."""

    names: dict[str, str]
    you: str | None
    third: str | None


def _person_mentions(ann: Annotation, text: str) -> list[str]:
    return [text[ann.idx[s] : ann.idx[e - 1] + len(ann.tokens[e - 1])] for s, e, label in ann.ents if label == "PERSON"]


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
    role = {r.type: r.target.norm for r in reversed(f.roles)}  # the first role of each type
    return (
        role.get("AGENT", ""),
        "not" if f.negation else "",
        f.modality or "",
        f.predicate_norm,
        role.get("PATIENT", ""),
        role.get("LOCATION", ""),
        _day_bucket(msg, f.time),
    )


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


def _message_graph(g: PartitionGraph, msg: Msg, ann: Annotation, coref: Coref) -> list[str]:
    """Run every rule on one message and add its rows to `g`; returns its Episode ids in text order."""
    ctx = R.MessageCtx(
        msg.tenant,
        msg.conv_id,
        msg.msg_id,
        msg.speaker,
        msg.ts,
        ann.lang,
        msg.text,
        ann,
        names=coref.names,
        you=coref.you,
        third=coref.third,
    )
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
        bchars = [
            (ann.idx[sents[lo][0]], ann.idx[sents[hi - 1][1] - 1] + len(ann.tokens[sents[hi - 1][1] - 1]))
            for lo, hi in blocks
        ]
        # blocks tile the text: each runs to where the next begins (the whitespace between belongs to it)
        starts = [0] + [lo for lo, _ in bchars[1:]]
        bchars = list(zip(starts, starts[1:] + [len(msg.text)]))
        ep_ids = [
            stable_id("n", msg.tenant, "Episode", msg.conv_id, msg.msg_id, f"block{k}") for k in range(len(blocks))
        ]
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
        draft = R.episode_rule(
            ctx, len(mentioned[b]), n_facts, n_prefs, blocks[b] if len(ep_ids) > 1 else None, len(ep_ids)
        )
        refs = span_refs(msg, lo, hi) if len(ep_ids) > 1 else whole
        g.nodes[ep_id] = node_row(
            id=ep_id,
            tenant=msg.tenant,
            type="Episode",
            subtype="block" if len(ep_ids) > 1 else "turn",
            title=draft.title,
            text=draft.text,
            keywords=draft.keywords,
            entities=list(ent_titles[b]),
            lang=ann.lang,
            time_start=msg.ts,
            time_end=msg.ts,
            time_granularity=gran,
            time_text=None,
            importance=draft.importance,
            confidence=1.0,
            frequency=1,
            sentiment=None,
            first_seen=msg.ts,
            last_seen=msg.ts,
            tier="short",
            category="episode",
            status="active",
            raw_refs=refs,
            provenance=R.TOPIC_BLOCK if len(ep_ids) > 1 else R.EPISODE,
            conv_id=msg.conv_id,
            msg_id=msg.msg_id,
            speaker=msg.speaker,
            predicate_norm=None,
            negation=None,
            modality=None,
            aliases=[],
            mentions=None,
        )
        for eid, (conf, mrefs) in mentioned[b].items():
            g.edge(msg, ep_id, "MENTIONS", eid, conf, R.MENTIONS, mrefs)
        for rid in dict.fromkeys(r[0] for r in refs):
            g.edge(
                msg,
                ep_id,
                "DERIVED_FROM",
                rid,
                R.CONF[R.DERIVED_FROM],
                R.DERIVED_FROM,
                [r for r in refs if r[0] == rid],
            )

    def derive(nid: str, refs: list[Ref], start: int) -> None:
        """nid -DERIVED_FROM-> its Episode (block). Not to the RawChunks too: the node's raw_refs cite its
        exact bytes, and its Episode's DERIVED_FROM edges lead to the chunks."""
        g.edge(
            msg,
            nid,
            "DERIVED_FROM",
            ep_ids[_block_of(bchars, start) if len(ep_ids) > 1 else 0],
            R.CONF[R.DERIVED_FROM],
            R.DERIVED_FROM,
            refs,
        )

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
            rconf = R.CONF[role.provenance] if role.type in ("TIME", "LOCATION") or role.provenance == R.COREF else conf
            g.edge(msg, fid, role.type, eid, rconf, role.provenance, refs)
        for ref in f.mentions:
            eid = g.entity_id(msg, ref)
            if eid not in g.entities:
                eid = g.entity(msg, ref)
            titles[g.entities[eid].title] = None
            if eid not in role_targets:  # (edge_table drops the rest of such repeats)
                g.edge(
                    msg,
                    fid,
                    "MENTIONS",
                    eid,
                    R.CONF[R.MENTIONS],
                    R.MENTIONS,
                    span_refs(msg, ref.start, ref.end) if ref.start >= 0 else refs,
                )
        t = f.time
        imp = R.importance("Fact", msg.text[f.start : f.end], ann.lang, f.keywords, n_roles=len(f.roles))
        g.counted(
            msg,
            node_row(
                id=fid,
                tenant=msg.tenant,
                type="Fact",
                subtype=f.subtype,
                title=f.title,
                text=R.clip(msg.text[f.start : f.end], R.SUMMARY_MAX_CHARS),
                keywords=f.keywords,
                entities=list(titles),
                lang=ann.lang,
                time_start=t.start if t else None,
                time_end=t.end if t else None,
                time_granularity=t.granularity if t else "unspecified",
                time_text=f.time_text,
                importance=imp,
                confidence=conf,
                frequency=1,
                sentiment=None,
                first_seen=msg.ts,
                last_seen=msg.ts,
                tier="short",
                category="fact",
                status="active",
                raw_refs=refs,
                provenance=f.provenance,
                conv_id=msg.conv_id,
                msg_id=msg.msg_id,
                speaker=msg.speaker,
                predicate_norm=f.predicate_norm,
                negation=f.negation,
                modality=f.modality,
                aliases=[],
                mentions=None,
            ),
        )
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
        g.counted(
            msg,
            node_row(
                id=pid,
                tenant=msg.tenant,
                type="Preference",
                subtype=p.subtype,
                title=R.clip(who + p.text, 80),
                text=p.text,
                keywords=p.keywords,
                entities=list(titles),
                lang=ann.lang,
                time_start=msg.ts,
                time_end=None,
                time_granularity="minute" if msg.ts else "unspecified",
                time_text=None,
                importance=R.importance("Preference", p.text, ann.lang, p.keywords, n_entities=len(p.mentions)),
                confidence=R.CONF[R.PREFERENCE],
                frequency=1,
                sentiment=None,
                first_seen=msg.ts,
                last_seen=msg.ts,
                tier="short",
                category="fact",
                status="active",
                raw_refs=refs,
                provenance=R.PREFERENCE,
                conv_id=msg.conv_id,
                msg_id=msg.msg_id,
                speaker=msg.speaker,
                predicate_norm=None,
                negation=p.subtype == "dislike",
                modality=None,
                aliases=[],
                mentions=None,
            ),
        )
        derive(pid, refs, p.start)

    task_ids: list[tuple[str, int, int]] = []
    for tk in tasks:
        tid = stable_id("n", msg.tenant, "Task", spk_norm, tk.subtype, _norm_text(tk.text), _day_bucket(msg, tk.time))
        task_ids.append((tid, tk.start, tk.end))
        refs = span_refs(msg, tk.start, tk.end)
        t = tk.time
        g.counted(
            msg,
            node_row(
                id=tid,
                tenant=msg.tenant,
                type="Task",
                subtype=tk.subtype,
                title=R.clip(who + tk.text, 80),
                text=tk.text,
                keywords=tk.keywords,
                entities=[],
                lang=ann.lang,
                time_start=t.start if t else None,
                time_end=t.end if t else None,
                time_granularity=t.granularity if t else "unspecified",
                time_text=tk.time_text,
                importance=R.importance("Task", tk.text, ann.lang, tk.keywords),
                confidence=R.CONF[R.TASK],
                frequency=1,
                sentiment=None,
                first_seen=msg.ts,
                last_seen=msg.ts,
                tier="short",
                category="fact",
                status="open",
                raw_refs=refs,
                provenance=R.TASK,
                conv_id=msg.conv_id,
                msg_id=msg.msg_id,
                speaker=msg.speaker,
                predicate_norm=facts[tk.fact].predicate_norm if tk.fact is not None else None,
                negation=False,
                modality=facts[tk.fact].modality if tk.fact is not None else None,
                aliases=[],
                mentions=None,
            ),
        )
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
        g = PartitionGraph()
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
                R.CONF[R.TEMPORAL_NEXT],
                R.TEMPORAL_NEXT,
                g.nodes[dst]["time_start"],
                [],
            ]
        tables = g.node_table(), g.edge_table()
        # the working graph freed here by reference counting, not traversed by the collection gc.enable() sets off
        # (all of it was allocated while the collector was paused): GC over three files of 8,112 messages 0.74 → 0.37 s
        del g, episodes, msgs, tenant_of
    return tables
