"""Recall latency bench, part 2: one deterministic tenant — chat turns ingested through the real CAS, then its graph.

See bench/recall_latency.py for what is generated and why.
"""

from __future__ import annotations

import bisect
import json
import random
import re
import time
from collections import Counter, defaultdict
from datetime import datetime, timedelta
from pathlib import Path

import pyarrow as pa

from bench.latency_corpus import (
    CONCEPT_SHARE,
    CONVS_PER_FILE,
    EDGE_WEIGHT,
    EN_FUNCTION,
    EN_GLUE,
    EN_VERBS,
    EN_WHEN,
    EN_WORDS,
    ENTITY_MIX,
    ENTITY_SHARE,
    EPISODE_SHARE,
    FIRST_NAMES,
    LOC_SUFFIXES,
    OBJ_ADJECTIVES,
    OBJ_NOUNS,
    PROVENANCE,
    SURNAMES,
    TENANT,
    USER,
    ZH_CITIES,
    ZH_ENTITY_SHARE,
    ZH_GIVEN,
    ZH_GLUE,
    ZH_LOC_SUFFIXES,
    ZH_OBJ_ADJECTIVES,
    ZH_OBJ_NOUNS,
    ZH_SHARE,
    ZH_SURNAMES,
    ZH_VERBS,
    ZH_WHEN,
    ZH_WORDS,
    Clause,
    Corpus,
    Entity,
    Size,
    Tenant,
    Turn,
    Zipf,
    _unique_combos,
    pseudo_words,
)
from r2g.ids import edge_ids, stable_id
from r2g.schema import EDGES, NODES
from raw_store.cas import RawStore
from raw_store.ingest import ingest_bytes
from raw_store.lake import Lake
from raw_store.schema import MESSAGES, RAW_CHUNKS, RAW_REFS
from raw_store.tables import write_import


class Generator:
    """One deterministic tenant: chat turns, then the graph over them."""

    def __init__(self, size: Size, seed: int) -> None:
        self.size = size
        self.r = random.Random(f"recall-latency:{seed}:{size.nodes}:{size.edges}")
        n = size.nodes
        self.n_episodes = round(EPISODE_SHARE * n)
        self.n_entities = max(20, round(ENTITY_SHARE * n))
        self.n_concepts = max(5, round(CONCEPT_SHARE * n))
        self.n_facts = n - self.n_episodes - self.n_entities - self.n_concepts
        if self.n_facts < 0:
            raise ValueError(f"{n} nodes is too few for a tenant (want at least ~100)")
        n_vocab = max(2_000, n // 4)  # vocabulary grows with the corpus (Heaps' law, roughly)
        avoid = set(EN_WORDS) | {w.lower() for w in FIRST_NAMES + SURNAMES + LOC_SUFFIXES + OBJ_NOUNS}
        self.vocab = list(EN_WORDS) + pseudo_words(n_vocab - len(EN_WORDS), self.r, avoid)
        self.words_en, self.words_zh = Zipf(self.vocab), Zipf(list(ZH_WORDS))
        self._make_entities()

    # -- entities and concepts --------------------------------------------------------------

    def _entity(self, subtype: str, title: str, lang: str, time: datetime | None = None) -> Entity:
        keywords = (
            ([title] if lang == "zh" else title.lower().split())
            if subtype != "TIME"
            else [p for p in re.split(r"[-W]", title) if p]
        )
        return Entity(stable_id("n", TENANT, "Entity", subtype, title), subtype, title, lang, keywords, time)

    def _make_entities(self) -> None:
        """Entities (the user, PERSON / LOC / OBJECT per language, TIME), each pool in Zipf order; Concepts."""
        counts = {sub: round(share * self.n_entities) for sub, share in ENTITY_MIX}
        self._make_times(counts["TIME"])
        counts["TIME"] = len(self.time_entities)
        counts["OBJECT"] = self.n_entities - counts["PERSON"] - counts["LOC"] - counts["TIME"]
        self.user = self._entity("PERSON", USER, "en")
        pools = self._named_pools(counts)
        self.pools = {lang: {sub: Zipf(es) for sub, es in subs.items()} for lang, subs in pools.items()}
        self.named = {lang: [e for es in subs.values() for e in es] for lang, subs in pools.items()}
        self.entities = [self.user] + self.named["en"] + self.named["zh"] + list(self.time_entities.values())
        self.r.shuffle(self.entities)
        self.all_entities = Zipf(self.entities)
        # Concepts: vocabulary words across the ranks (a frequent word's concept is a hub)
        picks = sorted(self.r.sample(range(10, len(self.vocab)), min(self.n_concepts, len(self.vocab) - 10)))
        self.concepts = {self.vocab[i]: stable_id("n", TENANT, "Concept", self.vocab[i]) for i in picks}
        self.concept_zipf = Zipf(list(self.concepts.values()))

    def _make_times(self, wanted: int) -> None:
        """Up to `wanted` TIME entities among the days, ISO weeks and months of 2023–2024; the first day always."""
        days = [datetime(2023, 1, 1) + timedelta(days=d) for d in range(730)]
        times = [("day", d, d.strftime("%Y-%m-%d")) for d in days]
        times += [("week", d, d.strftime("%G-W%V")) for d in days[::7]]
        times += [("month", d, d.strftime("%Y-%m")) for d in days if d.day == 1]
        first_day = times[0][0], times[0][2]
        rest = sorted((kind, title) for kind, _, title in times[1:])
        kept = set(self.r.sample(rest, min(max(wanted, 1), len(times)) - 1)) | {first_day}
        self.time_entities = {
            (kind, title): self._entity("TIME", title, "en", d) for kind, d, title in times if (kind, title) in kept
        }
        self.time_keys = {
            kind: sorted(t for k, t in self.time_entities if k == kind) for kind in ("day", "week", "month")
        }

    def _named_pools(self, counts: dict[str, int]) -> dict[str, dict[str, list[Entity]]]:
        """lang → subtype → distinct named entities (8 % Chinese), in random order; the user is one PERSON more."""
        r = self.r
        more = lambda k: [w.capitalize() for w in pseudo_words(k, r, set(self.vocab))]  # noqa: E731
        zh_given = list(ZH_GIVEN) + [a + b for a in ZH_GIVEN for b in ZH_GIVEN]
        pools: dict[str, dict[str, list[Entity]]] = {"en": {}, "zh": {}}
        for sub in ("PERSON", "LOC", "OBJECT"):
            n_zh = max(3, round(ZH_ENTITY_SHARE * counts[sub]))
            n_en = counts[sub] - n_zh - (1 if sub == "PERSON" else 0)
            if sub == "PERSON":
                en = _unique_combos(n_en, FIRST_NAMES, SURNAMES, " ", r, more)
                zh = _unique_combos(n_zh, list(ZH_SURNAMES), zh_given, "", r, lambda k: [])
            elif sub == "LOC":
                en = [" ".join(reversed(x.split(" "))) for x in _unique_combos(n_en, LOC_SUFFIXES, [], " ", r, more)]
                zh = _unique_combos(
                    n_zh,
                    ZH_CITIES,
                    ZH_LOC_SUFFIXES,
                    "",
                    r,
                    lambda k: [c + s for c in ZH_GIVEN for s in ZH_LOC_SUFFIXES][:k],
                )
            else:
                en = _unique_combos(n_en, OBJ_ADJECTIVES, OBJ_NOUNS, " ", r, lambda k: pseudo_words(k, r, set()))
                zh = _unique_combos(
                    n_zh,
                    ZH_OBJ_ADJECTIVES,
                    ZH_OBJ_NOUNS,
                    "",
                    r,
                    lambda k: [a + n for a in ZH_GIVEN for n in ZH_OBJ_NOUNS][:k],
                )
            pools["en"][sub] = [self._entity(sub, t, "en") for t in en]
            pools["zh"][sub] = [self._entity(sub, t, "zh") for t in zh]
        return pools

    def _time_entity(self, ts: datetime, back_days: int, kind: str) -> Entity:
        d = ts - timedelta(days=back_days)
        title = {"day": d.strftime("%Y-%m-%d"), "week": d.strftime("%G-W%V"), "month": d.strftime("%Y-%m")}[kind]
        keys = self.time_keys[kind] or self.time_keys["day"]
        if (kind, title) not in self.time_entities:  # not kept on this size: the nearest kept one
            title = keys[min(bisect.bisect_left(keys, title), len(keys) - 1)]
            kind = kind if self.time_keys[kind] else "day"
        return self.time_entities[(kind, title)]

    # -- chat --------------------------------------------------------------------------------

    def _clause(self, lang: str, speaker: Entity, ts: datetime, text: list[str], names: list) -> Clause:
        """Append one clause to `text` (a list of pieces); returns it with its character span."""
        r, pool = self.r, self.pools[lang]
        start = pos = sum(map(len, text))
        first = len(text)

        def put(piece: str, entity: Entity | None = None) -> None:
            nonlocal pos
            if entity is not None:
                names.append((entity, pos, pos + len(piece)))
            text.append(piece)
            pos += len(piece)

        agent = speaker if r.random() < 0.5 else pool["PERSON"].draw(r)[0]
        patient = pool["OBJECT"].draw(r)[0] if r.random() < 0.7 else None
        place = pool["LOC"].draw(r)[0] if r.random() < 0.5 else None
        when = r.choice(EN_WHEN if lang == "en" else ZH_WHEN) if r.random() < 0.5 else None
        time_entity = self._time_entity(ts, when[1], when[2]) if when else None
        if lang == "en":
            verb, lemma = r.choice(EN_VERBS)
            put("I" if agent is speaker else agent.title, None if agent is speaker else agent)
            put(f" {verb} ")
            obj = patient.title if patient is not None else self.words_en.draw(r)[0]
            put("the " if patient is not None else "")
            put(obj, patient)
            if place is not None:
                put(" at ")
                put(place.title, place)
            if when is not None:
                put(f" {when[0]}")
            filler = self.words_en.draw(r, r.randint(3, 9))
            glued = [w if r.random() < 0.6 else f"{r.choice(EN_GLUE)} {w}" for w in filler]
            if r.random() < 0.2:
                friend = pool["PERSON"].draw(r)[0]
                put(", with ")
                put(friend.title, friend)
            put(", " + " ".join(glued) + ". ")
        else:
            verb, lemma = r.choice(ZH_VERBS)
            put("我" if agent is speaker else agent.title, None if agent is speaker else agent)
            if when is not None:
                put(when[0])
            if place is not None:
                put("在")
                put(place.title, place)
            put(verb)
            obj = patient.title if patient is not None else self.words_zh.draw(r)[0]
            put(obj, patient)
            filler = self.words_zh.draw(r, r.randint(2, 6))
            put("，" + "".join(w if r.random() < 0.6 else r.choice(ZH_GLUE) + w for w in filler) + "。")
        words = (
            [w for piece in text[first:] for w in re.findall(r"[a-z]+", piece.lower()) if w not in EN_FUNCTION]
            if lang == "en"
            else filler
        )
        return Clause(start, pos, agent, lemma, obj, patient, place, time_entity, words)

    def chat(self) -> list[Turn]:
        """Conversations of 50–300 turns until there is one turn per Episode."""
        r, turns, conv_no = self.r, [], 0
        while len(turns) < self.n_episodes:
            lang = "zh" if conv_no == 1 or r.random() < ZH_SHARE else "en"
            others = [e for e in self.pools[lang]["PERSON"].draw(r, r.randint(1, 2)) if e is not self.user]
            speakers = [self.user] + list(dict.fromkeys(others))
            ts = datetime(2023, 1, 1) + timedelta(minutes=r.randrange(2 * 365 * 24 * 60 - 30 * 24 * 60))
            conv_id = f"conv{conv_no:05d}"
            for k in range(min(r.randint(50, 300), self.n_episodes - len(turns))):
                ts += timedelta(seconds=r.randint(5, 1800)) if r.random() > 0.03 else timedelta(days=r.randint(1, 6))
                speaker = r.choice(speakers)
                pieces: list[str] = []
                names: list[tuple[Entity, int, int]] = []
                clauses = [self._clause(lang, speaker, ts, pieces, names) for _ in range(r.choice((1, 1, 2, 2, 3)))]
                text = "".join(pieces).strip()
                words = [w for c in clauses for w in c.words]
                turns.append(Turn(conv_id, f"m{k}", speaker, ts, lang, text, words, names, clauses))
            conv_no += 1
        return turns

    # -- raw layer ---------------------------------------------------------------------------

    def ingest(self, turns: list[Turn], lake: Lake) -> dict:
        """Canonical JSONL files → ingest_bytes (real chunker + CAS); sets each turn's raw_ref; writes the tables."""
        store = RawStore(lake.root)
        by_conv: dict[str, list[Turn]] = defaultdict(list)
        for t in turns:
            by_conv[t.conv_id].append(t)
        convs = list(by_conv)
        messages, chunks = [], []
        for f in range(0, len(convs), CONVS_PER_FILE):
            lines = [
                json.dumps(
                    {
                        "conv_id": t.conv_id,
                        "msg_id": t.msg_id,
                        "speaker": t.speaker.title,
                        "role": "user",
                        "ts": t.ts.isoformat(),
                        "text": t.text,
                    },
                    ensure_ascii=False,
                )
                for c in convs[f : f + CONVS_PER_FILE]
                for t in by_conv[c]
            ]
            source = f"{TENANT}/chat_{f // CONVS_PER_FILE:04d}.jsonl"
            result = ingest_bytes(("\n".join(lines) + "\n").encode("utf-8"), source, TENANT, store)
            messages.append(result.messages)
            chunks.append(result.raw_chunks)
        msgs, raw = pa.concat_tables(messages), pa.concat_tables(chunks)
        where = {
            (c, m): refs[0]
            for c, m, refs in zip(
                msgs.column("conv_id").to_pylist(),
                msgs.column("msg_id").to_pylist(),
                msgs.column("raw_refs").to_pylist(),
            )
        }
        for t in turns:
            t.ref = where[(t.conv_id, t.msg_id)]
        write_import(lake, {"messages": (msgs, MESSAGES), "raw_chunks": (raw, RAW_CHUNKS)}, key="chat")
        return {
            "messages": msgs.num_rows,
            "raw_chunks": raw.num_rows,
            "raw_bytes": sum(raw.column("len_bytes").to_pylist()),
        }

    # -- graph -------------------------------------------------------------------------------

    def graph(self, turns: list[Turn], lake: Lake) -> dict:
        """Nodes and exactly size.edges edges over the ingested turns, written as the lake's tables."""
        nodes: list[dict] = []
        core: list[tuple] = []  # (src, type, dst, ts, refs): always kept
        optional: dict[tuple, tuple] = {}  # text-grounded MENTIONS / ABOUT: trimmed when over the edge budget
        episodes = self._episodes(turns, nodes, core, optional)
        facts = self._facts(turns, nodes, core)
        if len(core) > self.size.edges:
            raise ValueError(
                f"{self.size.label}: the turns and facts alone need {len(core):,} edges; ask for at least that many"
            )
        kept = list(optional.items())
        room = self.size.edges - len(core)
        if len(kept) > room:
            kept = [kept[i] for i in sorted(self.r.sample(range(len(kept)), room))]
        for (src, etype, dst), (ts, refs, e) in kept:
            core.append((src, etype, dst, ts, refs))
            if e is not None:
                self._mention(e, ts, refs[0])
        edges = core + self._implicit(room - len(kept), episodes + facts, {(s, y, d) for s, y, d, _, _ in core})
        nodes += self._entity_nodes() + self._concept_nodes(edges)
        write_import(
            lake,
            {
                "nodes": (pa.Table.from_pylist(nodes, schema=_used(NODES, nodes)), NODES),
                "edges": (_edge_table(edges), EDGES),
            },
            key="graph",
        )
        return {"nodes": Counter(n["type"] for n in nodes), "edges": Counter(y for _, y, _, _, _ in edges)}

    def _episodes(
        self, turns: list[Turn], nodes: list[dict], core: list[tuple], optional: dict[tuple, tuple]
    ) -> list[tuple[str, datetime, dict]]:
        """An Episode per turn with its DERIVED_FROM, speaker MENTIONS and TEMPORAL_NEXT edges (core) and
        its named MENTIONS and ABOUT edges (optional); returns (id, ts, raw_ref) per Episode."""
        out, prev = [], {}
        for t in turns:
            eid = stable_id("n", TENANT, "Episode", t.conv_id, t.msg_id)
            ref = dict(t.ref)
            title = f"{t.speaker.title}: {t.text[:64]}" + ("…" if len(t.text) > 64 else "")
            nodes.append(
                _node(
                    eid,
                    "Episode",
                    "turn",
                    title,
                    t.text,
                    list(dict.fromkeys(t.words))[:12],
                    t.ts,
                    [ref],
                    t,
                    [e.title for e, _, _ in t.names],
                )
            )
            out.append((eid, t.ts, ref))
            core.append((eid, "DERIVED_FROM", ref["raw_id"], t.ts, [ref]))
            core.append((eid, "MENTIONS", t.speaker.id, t.ts, [ref]))
            self._mention(t.speaker, t.ts, ref)
            if t.conv_id in prev:
                core.append((prev[t.conv_id], "TEMPORAL_NEXT", eid, t.ts, []))
            prev[t.conv_id] = eid
            for e, s, end in t.names:
                if e is not t.speaker:
                    optional.setdefault((eid, "MENTIONS", e.id), (t.ts, [_span(t, s, end)], e))
            for w in list(dict.fromkeys(w for w in t.words if w in self.concepts))[:3]:
                optional.setdefault((eid, "ABOUT", self.concepts[w]), (t.ts, [ref], None))
        return out

    def _facts(self, turns: list[Turn], nodes: list[dict], core: list[tuple]) -> list[tuple[str, datetime, dict]]:
        """Facts on n_facts clauses drawn at random, with DERIVED_FROM their Episode and their role edges."""
        clauses = [(t, c) for t in turns for c in t.clauses]
        out = []
        for i in sorted(self.r.sample(range(len(clauses)), min(self.n_facts, len(clauses)))):
            t, c = clauses[i]
            fid = stable_id("n", TENANT, "Fact", t.conv_id, t.msg_id, str(c.start))
            span = _span(t, c.start, c.end)
            nodes.append(
                _node(
                    fid,
                    "Fact",
                    "event",
                    f"{c.agent.title} {c.verb} {c.obj}",
                    t.text[c.start : c.end].strip(),
                    list(dict.fromkeys([c.verb, *c.words[:8]])),
                    c.when.time if c.when else t.ts,
                    [span],
                    t,
                    [e.title for e in (c.agent, c.patient, c.place, c.when) if e],
                )
            )
            out.append((fid, t.ts, span))
            core.append((fid, "DERIVED_FROM", stable_id("n", TENANT, "Episode", t.conv_id, t.msg_id), t.ts, [span]))
            for etype, e in (("AGENT", c.agent), ("PATIENT", c.patient), ("LOCATION", c.place), ("TIME", c.when)):
                if e is not None:
                    core.append((fid, etype, e.id, t.ts, [span]))
                    self._mention(e, t.ts, span)
        return out

    def _implicit(self, n: int, sources: list[tuple[str, datetime, dict]], have: set) -> list[tuple]:
        """`n` more edges than the text names: 2/3 MENTIONS of Zipf-popular entities, 1/3 ABOUT popular concepts."""
        r, out = self.r, []
        while len(out) < n:
            src, ts, ref = r.choice(sources)
            if r.random() < 2 / 3:
                e = self.all_entities.draw(r)[0]
                etype, dst = "MENTIONS", e.id
            else:
                e, etype, dst = None, "ABOUT", self.concept_zipf.draw(r)[0]
            if (src, etype, dst) in have:
                continue
            have.add((src, etype, dst))
            out.append((src, etype, dst, ts, [ref]))
            if e is not None:
                self._mention(e, ts, ref)
        return out

    def _mention(self, e: Entity, ts: datetime, ref: dict) -> None:
        e.mentions += 1
        e.seen = [min(e.seen[0], ts), max(e.seen[1], ts)] if e.seen else [ts, ts]
        if len(e.refs) < 5:
            e.refs.append(ref)

    def _entity_nodes(self) -> list[dict]:
        out = []
        for e in self.entities:
            first, last = e.seen or [datetime(2023, 1, 1)] * 2
            out.append(
                {
                    "id": e.id,
                    "tenant": TENANT,
                    "type": "Entity",
                    "subtype": e.subtype,
                    "title": e.title,
                    "text": f"{e.title} ({e.subtype})",
                    "keywords": e.keywords,
                    "lang": e.lang,
                    "time_start": e.time,
                    "first_seen": first,
                    "last_seen": last,
                    "status": "active",
                    "raw_refs": e.refs,
                    "provenance": PROVENANCE,
                    "aliases": [e.title],
                    "mentions": e.mentions,
                    "frequency": e.mentions,
                    "importance": 0.5,
                    "confidence": 0.8,
                    "tier": "short",
                    "category": "fact",
                }
            )
        return out

    def _concept_nodes(self, edges: list[tuple]) -> list[dict]:
        seen: dict[str, list] = {}
        for _src, etype, dst, ts, refs in edges:
            if etype == "ABOUT":
                s = seen.setdefault(dst, [ts, ts, [], 0])
                s[0], s[1], s[3] = min(s[0], ts), max(s[1], ts), s[3] + 1
                if len(s[2]) < 5:
                    s[2] += refs
        out = []
        for word, cid in self.concepts.items():
            first, last, refs, n = seen.get(cid, [datetime(2023, 1, 1), datetime(2023, 1, 1), [], 0])
            out.append(
                {
                    "id": cid,
                    "tenant": TENANT,
                    "type": "Concept",
                    "subtype": "topic",
                    "title": word.capitalize(),
                    "text": f"Topic: {word.capitalize()}",
                    "keywords": [word],
                    "lang": "en",
                    "first_seen": first,
                    "last_seen": last,
                    "status": "active",
                    "raw_refs": refs,
                    "provenance": PROVENANCE,
                    "mentions": n,
                    "frequency": n,
                    "importance": 0.5,
                    "confidence": 0.7,
                    "tier": "short",
                    "category": "fact",
                }
            )
        return out

    def corpus(self, turns: list[Turn]) -> Corpus:
        counts = Counter(w for t in turns if t.lang == "en" for w in t.words)
        popular = sorted(self.entities, key=lambda e: -e.mentions)[:50]
        named = {lang: [e for e in es if e.subtype != "TIME"] for lang, es in self.named.items()}
        return Corpus(turns, named, [e for e in popular if e.subtype != "TIME"], self.vocab, counts)


def _span(t: Turn, start: int, end: int) -> dict:
    """The raw_ref of characters [start, end) of a turn's text inside its chunk."""
    b0, b1 = len(t.text[:start].encode("utf-8")), len(t.text[:end].encode("utf-8"))
    return {"raw_id": t.ref["raw_id"], "offset": t.ref["offset"] + b0, "length": b1 - b0}


def _node(
    nid: str,
    ntype: str,
    subtype: str,
    title: str,
    text: str,
    keywords: list[str],
    time_start: datetime,
    refs: list[dict],
    t: Turn,
    entities: list[str],
) -> dict:
    """A NODES row of a node drawn from turn `t` (an Episode or a Fact)."""
    return {
        "id": nid,
        "tenant": TENANT,
        "type": ntype,
        "subtype": subtype,
        "title": title,
        "text": text,
        "keywords": keywords,
        "entities": entities,
        "lang": t.lang,
        "time_start": time_start,
        "first_seen": t.ts,
        "last_seen": t.ts,
        "status": "active",
        "raw_refs": refs,
        "provenance": PROVENANCE,
        "conv_id": t.conv_id,
        "msg_id": t.msg_id,
        "speaker": t.speaker.title,
        "importance": 0.5,
        "confidence": 1.0 if ntype == "Episode" else 0.7,
        "frequency": 1,
        "tier": "short",
        "category": "episode" if ntype == "Episode" else "fact",
    }


def _used(schema: pa.Schema, rows: list[dict]) -> pa.Schema:
    """The schema restricted to the columns the rows use (write_table fills the rest with nulls)."""
    used = {k for row in rows for k in row}
    return pa.schema([f for f in schema if f.name in used])


def _edge_table(edges: list[tuple]) -> pa.Table:
    src, etype, dst, ts, refs = (list(col) for col in zip(*edges))
    return pa.table(
        {
            "id": edge_ids([(TENANT, s, y, d) for s, y, d in zip(src, etype, dst)]),
            "tenant": [TENANT] * len(src),
            "src": src,
            "dst": dst,
            "type": etype,
            "weight": [EDGE_WEIGHT[y] for y in etype],
            "confidence": [0.8] * len(src),
            "valid_since": pa.array(ts, pa.timestamp("us")),
            "raw_refs": pa.array(refs, RAW_REFS),
            "provenance": [PROVENANCE] * len(src),
        }
    )


def generate_tenant(size: Size, seed: int, root: Path) -> Tenant:
    """Generate, ingest and write one tenant's lake tables under `root` (indexes not built)."""
    lake = Lake(root)
    lake.lake.mkdir(parents=True, exist_ok=True)
    gen = Generator(size, seed)
    t0 = time.perf_counter()
    turns = gen.chat()
    t1 = time.perf_counter()
    raw = gen.ingest(turns, lake)
    t2 = time.perf_counter()
    graph = gen.graph(turns, lake)
    t3 = time.perf_counter()
    stats = {**raw, **graph, "seconds": {"chat": t1 - t0, "ingest": t2 - t1, "graph": t3 - t2}}
    return Tenant(size, gen.corpus(turns), stats)
