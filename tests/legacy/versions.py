# Frozen reference: jobs/versions.py as of commit 9d258c2, before vectorisation. The golden harness
# (bench/consolidation_golden.py) and the differential tests compare the library against it; not library code.
"""Fact versions and conflicts (seed 004 §7.1 version chain, §7.2 prio score; seed 003 "a change over time is
not a contradiction"): pure functions over the NODES / EDGES tables.

Grouping. Facts, and Preferences, are grouped by (tenant, type, subject, attribute):
- subject = the Fact's AGENT entity (the smallest id, as r2g.link does), else the speaker's PERSON entity;
  no subject → not versioned;
- attribute = the canonical predicate (r2g.link.canonical_predicate folds love/hate/… onto like with a
  polarity flip) + the PATIENT + the modality — the key r2g.link groups on, so every R2G SUPPORTS /
  CONTRADICTS lies inside one group. A single-valued predicate (VersionConfig.single_valued: live, work)
  with no PATIENT holds one place at a time: its LOCATION is part of the claim, not of the attribute, so
  "live in Paris" → "live in Berlin" is a change of one attribute (an affirmative one with no LOCATION,
  "I work", claims nothing about the value and is skipped; "work on a project" has a PATIENT and is an
  ordinary attribute);
- a claim = (affirmative?, object for single-valued attributes); two members DIFFER when their claims do;
- Preferences carry no predicate: a Preference takes the attribute and object of the Fact R2G made from
  the same words (same message, the Fact's first raw_ref inside the Preference's span) and its polarity
  from `negation` (subtype dislike). They form their own chains (type is part of the key), so a Fact and
  the Preference stated in the same sentence never count twice as evidence;
- light verbs with no object are skipped (r2g.link.LIGHT_VERBS: "I went" says nothing comparable), and
  so are members with no time at all (they cannot be ordered).

Versions. Members are ordered by t = time_start, else first_seen, then id. Consecutive members with the
same claim form a run (repeats: one claim told again, not a version). Where the claim changes, the gap
between the two runs decides: more than `window` apart → a new VERSION (a change over time); within the
window → the runs are concurrent and belong to one segment, whose claims CONTRADICT each other (both
ways, between each claim's latest sighting there, weight = the source's prio). Each segment has one
winning claim (the only one, or the best prio of §7.2; a near tie also goes to the review queue);
consecutive segments won by the same claim are one version. A version's head is the first member of its
winning claim in its first segment; heads are linked older -VERSION_NEXT-> newer; every member of a
version's claim gets valid_since = its head's time and valid_until = the next head's time (null for the
current version); members of losing claims get neither (they stay on the chain through CONTRADICTS,
never active). A group with two versions or a contradiction is a chain: one ACTIVE_OF edge from the
subject to the current head, and repeats SUPPORTS their head (unless an edge of that id exists), so a
chain is one connected piece.

R2G's CONTRADICTS between members of different segments are removed: they were a change over time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import combinations

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from jobs.integrity import CheckOutcome
from jobs.schema import REVIEW_QUEUE
from r2g.ids import edge_id, stable_id
from r2g.partition_graph import edge_weight
from r2g.schema import EDGES, NODES
from raw_store.lake import conform
from raw_store.schema import TS
from tests.legacy.link import LIGHT_VERBS, canonical_predicate

VERSION_NEXT = "jobs.versions.version_next.v1"
ACTIVE_OF = "jobs.versions.active_of.v1"
CONTRADICTS = "jobs.versions.contradicts.v1"
SUPPORTS = "jobs.versions.repeat.v1"
REVIEW = "jobs.versions.near_tie.v1"
PROVENANCE_PREFIX = "jobs.versions."
NEAR_TIE = "contradiction_near_tie"
_DEFAULT_CONF = 0.5  # a node with no confidence (hand-made rows)


@dataclass(frozen=True)
class VersionConfig:
    """Defaults and where they come from (seed 004 §7.2 gives the prio formula but no numbers).

    window: seed 004 R2G-5's ±1 day event window (r2g.link.SAME_EVENT_WINDOW): differing claims at most a
        day apart are concurrent (a contradiction), further apart a change (a version).
    a/b/c/d: weights of source_trust, recency_score, evidence_support, consistency; our choice, in the
        0.5/0.3/0.2 spirit of R2G-4's edge weight, summing to 1 so prio lies in [0, 1] (an edge weight).
        Trust and evidence weigh most: who said it and how often; recency and consistency break ties.
    near_tie_margin: |prio_a - prio_b| below this → review_queue (seed: "分差低于阈值"); 0.05 is one
        extra sighting's worth of evidence at most, so a claim repeated once more still wins outright.
    recency_tau: recency_score = exp(-(t_newest - t_claim) / tau), relative to the newer claim; concurrent
        claims lie within `window`, so tau = window spreads the score over that range (seed §6.1 form).
    evidence_k: evidence_support = n / (n + k), n = sightings (frequency) + SUPPORTS/SAME_AS edges.
    trust_self / trust_other: source_trust of a claim its subject makes about themself (R2G-4's
        SOURCE_TRUST_USER = 1.0) and of one someone else makes about them (reported speech, a bot's
        guess). NODES has no role column, so "user > assistant" is approximated by self > other;
        `speaker_trust` ((speaker name, trust), …) is the seed's configurable whitelist / reputation.
    single_valued: canonical predicates holding one place (LOCATION) at a time; our choice, kept short.
    """

    window: timedelta = timedelta(days=1)
    a_source_trust: float = 0.3
    b_recency: float = 0.2
    c_evidence: float = 0.3
    d_consistency: float = 0.2
    near_tie_margin: float = 0.05
    recency_tau: timedelta = timedelta(days=1)
    evidence_k: float = 1.0
    trust_self: float = 1.0
    trust_other: float = 0.7
    speaker_trust: tuple[tuple[str, float], ...] = ()
    single_valued: frozenset[str] = frozenset({"live", "reside", "work"})


@dataclass
class VersionResult:
    nodes: pa.Table  # r2g.schema.NODES: valid_since / valid_until set on versioned Facts/Preferences
    edges: pa.Table  # r2g.schema.EDGES: + VERSION_NEXT / ACTIVE_OF / CONTRADICTS / SUPPORTS
    review_queue: pa.Table  # jobs.schema.REVIEW_QUEUE: near-tie contradictions


@dataclass
class _Member:
    id: str
    tenant: str
    type: str
    t: datetime
    claim: tuple[bool, str]  # (affirmative, object of a single-valued attribute or "")
    conf: float
    frequency: int
    speaker: str
    raw_refs: list
    segment: int = -1


# ---------------------------------------------------------------- grouping


def _first_roles(edges: pl.DataFrame) -> dict[tuple[str, str, str], str]:
    """(tenant, src, role type) → smallest dst, for AGENT / PATIENT / LOCATION."""
    roles = (
        edges.filter(pl.col("type").is_in(["AGENT", "PATIENT", "LOCATION"]))
        .group_by(["tenant", "src", "type"])
        .agg(pl.col("dst").min())
    )
    return {(tn, s, t): d for tn, s, t, d in roles.iter_rows()}


def _norm(s: str | None) -> str:
    return " ".join((s or "").lower().split())


def _groups(
    nodes: pa.Table, edges: pl.DataFrame, cfg: VersionConfig
) -> tuple[dict[tuple, list[_Member]], dict[tuple[str, str], dict]]:
    """{(tenant, type, subject, canon, patient, modality): members} and the entity rows by (tenant, id)."""
    n = pl.from_arrow(
        nodes.select(
            [
                "id",
                "tenant",
                "type",
                "title",
                "predicate_norm",
                "negation",
                "modality",
                "time_start",
                "first_seen",
                "confidence",
                "frequency",
                "speaker",
                "conv_id",
                "msg_id",
                "raw_refs",
                "subtype",
            ]
        )
    )
    roles = _first_roles(edges)
    entities = {
        (r["tenant"], r["id"]): r
        for r in n.filter(pl.col("type") == "Entity").select(["id", "tenant", "title", "subtype"]).to_dicts()
    }
    speaker_entity = {
        (r["tenant"], _norm(r["title"])): i for (_, i), r in sorted(entities.items()) if r["subtype"] == "PERSON"
    }

    def subject(r: dict) -> str | None:
        agent = roles.get((r["tenant"], r["id"], "AGENT"))
        if agent is not None and (r["tenant"], agent) in entities:
            return agent
        return speaker_entity.get((r["tenant"], _norm(r["speaker"]))) if _norm(r["speaker"]) else None

    def member(r: dict, claim: tuple[bool, str]) -> _Member | None:
        t = r["time_start"] or r["first_seen"]
        if t is None:
            return None
        return _Member(
            r["id"],
            r["tenant"],
            r["type"],
            t,
            claim,
            _DEFAULT_CONF if r["confidence"] is None else float(r["confidence"]),
            max(1, r["frequency"] or 1),
            r["speaker"] or "",
            r["raw_refs"] or [],
        )

    groups: dict[tuple, list[_Member]] = {}
    fact_attr: dict[tuple[str, str], tuple[tuple, str]] = {}  # (tenant, fact id) → (attribute, object)
    facts = n.filter((pl.col("type") == "Fact") & pl.col("predicate_norm").is_not_null())
    for r in facts.sort("id").to_dicts():
        subj = subject(r)
        if subj is None:
            continue
        canon, flip = canonical_predicate(r["predicate_norm"])
        patient = roles.get((r["tenant"], r["id"], "PATIENT"), "")
        if not patient and "_" not in canon and canon in LIGHT_VERBS:
            continue
        affirmative = not (bool(r["negation"]) != flip)
        obj = ""
        if canon in cfg.single_valued and not patient:
            obj = roles.get((r["tenant"], r["id"], "LOCATION"), "")
            if not obj and affirmative:  # "I work" says nothing about where: no claim on the value
                continue
        attr = (canon, patient, r["modality"] or "")
        fact_attr[(r["tenant"], r["id"])] = (attr, obj)
        m = member(r, (affirmative, obj))
        if m is not None:
            groups.setdefault((r["tenant"], "Fact", subj, *attr), []).append(m)

    # a Preference takes the attribute of the Fact made from the same words (same message, inside its span)
    located: dict[tuple, list[tuple[str, int, str]]] = {}
    for r in facts.select(["id", "tenant", "conv_id", "msg_id", "raw_refs"]).to_dicts():
        if r["raw_refs"] and (r["tenant"], r["id"]) in fact_attr:
            ref = r["raw_refs"][0]
            located.setdefault((r["tenant"], r["conv_id"], r["msg_id"]), []).append(
                (ref["raw_id"], ref["offset"], r["id"])
            )
    for r in n.filter(pl.col("type") == "Preference").sort("id").to_dicts():
        subj = subject(r)
        inside = sorted(
            (off, fid)
            for p in (r["raw_refs"] or [])
            for raw_id, off, fid in located.get((r["tenant"], r["conv_id"], r["msg_id"]), [])
            if raw_id == p["raw_id"] and p["offset"] <= off < p["offset"] + p["length"]
        )
        if subj is None or not inside:
            continue
        attr, obj = fact_attr[(r["tenant"], inside[0][1])]
        m = member(r, (not bool(r["negation"]), obj))
        if m is not None:
            groups.setdefault((r["tenant"], "Preference", subj, *attr), []).append(m)
    for members in groups.values():
        members.sort(key=lambda m: (m.t, m.id))
    return groups, entities


def _segments(members: list[_Member], window: timedelta) -> list[list[_Member]]:
    """Split time-ordered members where the claim changes more than `window` after the previous member."""
    segs: list[list[_Member]] = [[members[0]]]
    for prev, m in zip(members, members[1:]):
        if m.claim != prev.claim and m.t - prev.t > window:
            segs.append([])
        segs[-1].append(m)
    for i, seg in enumerate(segs):
        for m in seg:
            m.segment = i
    return segs


# ---------------------------------------------------------------- prio (seed 004 §7.2)


def _prio(
    claims: dict[tuple, list[_Member]],
    group: list[_Member],
    seg_index: int,
    subject_title: str,
    support_edges: dict[tuple[str, str], set[str]],
    cfg: VersionConfig,
) -> dict[tuple, float]:
    """prio(claim) = a*source_trust + b*recency_score + c*evidence_support + d*consistency, each in [0, 1].

    source_trust: the best of its sightings (speaker_trust, else self / other); recency_score:
    exp(-(newest claim's latest sighting - its latest sighting) / tau); evidence_support: n / (n + k) with
    n = its sightings' frequency + the SUPPORTS/SAME_AS edges touching them (not those to a member holding
    another claim); consistency: (agree + 1) / (agree + disagree + 2) over the group's members outside
    this segment — the subject's other statements on the attribute, 0.5 when there are none.
    """
    named = {_norm(k): v for k, v in cfg.speaker_trust}
    subject = _norm(subject_title)

    def trust(m: _Member) -> float:
        speaker = _norm(m.speaker)
        return named.get(speaker, cfg.trust_self if speaker == subject else cfg.trust_other)

    newest = max(m.t for ms in claims.values() for m in ms)
    tau = cfg.recency_tau.total_seconds() or 1.0
    claim_of = {m.id: m.claim for m in group}
    others = [m for m in group if m.segment != seg_index]
    out = {}
    for claim, ms in claims.items():
        recency = math.exp(-(newest - ms[-1].t).total_seconds() / tau)
        support = {
            frozenset((m.id, o))
            for m in ms
            for o in support_edges.get((m.tenant, m.id), ())
            if claim_of.get(o, claim) == claim
        }
        n = sum(m.frequency for m in ms) + len(support)
        agree = sum(1 for m in others if m.claim == claim)
        consistency = (agree + 1) / (len(others) + 2)
        out[claim] = round(
            cfg.a_source_trust * max(trust(m) for m in ms)
            + cfg.b_recency * recency
            + cfg.c_evidence * n / (n + cfg.evidence_k)
            + cfg.d_consistency * consistency,
            6,
        )
    return out


# ---------------------------------------------------------------- the job


def _edge(
    tenant: str,
    src: _Member | str,
    etype: str,
    dst: _Member,
    weight: float,
    conf: float,
    since: datetime,
    refs: list,
    rule: str,
) -> dict:
    s = src if isinstance(src, str) else src.id
    return {
        "id": edge_id(tenant, s, etype, dst.id),
        "tenant": tenant,
        "src": s,
        "dst": dst.id,
        "type": etype,
        "weight": round(min(1.0, max(0.0, weight)), 6),
        "confidence": round(min(1.0, max(0.0, conf)), 6),
        "valid_since": since,
        "valid_until": None,
        "raw_refs": refs,
        "provenance": rule,
    }


@dataclass
class _Out:
    """What the groups add: node validity, edges, review rows; where each member sits (for R2G's links)."""

    base_ids: set[tuple[str, str]]  # (tenant, edge id) of the input edges
    validity: dict[tuple[str, str], tuple[datetime | None, datetime | None]] = field(default_factory=dict)
    place: dict[tuple[str, str], tuple[tuple, int]] = field(default_factory=dict)  # → (group key, segment)
    edges: dict[tuple[str, str], dict] = field(default_factory=dict)  # (tenant, edge id) → row
    review: list[dict] = field(default_factory=list)

    def add(self, row: dict) -> None:
        self.edges[(row["tenant"], row["id"])] = row

    def support(self, tenant: str, src: _Member, dst: _Member) -> None:
        """src -SUPPORTS-> dst (a repeat of one claim), unless the input already holds that edge."""
        if (tenant, edge_id(tenant, src.id, "SUPPORTS", dst.id)) not in self.base_ids:
            conf = min(src.conf, dst.conf)
            self.add(_edge(tenant, src, "SUPPORTS", dst, edge_weight(conf), conf, src.t, src.raw_refs, SUPPORTS))


def _contradiction(
    key: tuple,
    claims: dict[tuple, list[_Member]],
    prio: dict[tuple, float],
    subject_title: str,
    out: _Out,
    cfg: VersionConfig,
) -> tuple:
    """CONTRADICTS both ways between a segment's claims, a review row on a near tie; returns the winner."""
    tenant = key[0]
    # each claim's latest sighting in the segment stands for it: the sightings actually concurrent
    anchor = {c: ms[-1] for c, ms in claims.items()}
    order = sorted(claims, key=lambda c: (prio[c], anchor[c].t, anchor[c].id), reverse=True)
    for c1, c2 in combinations(order, 2):
        a, b = anchor[c1], anchor[c2]
        for src, dst, c in ((a, b, c1), (b, a, c2)):
            out.add(
                _edge(
                    tenant,
                    src,
                    "CONTRADICTS",
                    dst,
                    prio[c],
                    min(a.conf, b.conf),
                    max(a.t, b.t),
                    src.raw_refs,
                    CONTRADICTS,
                )
            )
    tied = [c for c in order if prio[order[0]] - prio[c] < cfg.near_tie_margin]
    if len(tied) > 1:
        ids = [anchor[c].id for c in tied]
        out.review.append(
            {
                "id": stable_id("rq", tenant, NEAR_TIE, *sorted(ids)),
                "tenant": tenant,
                "kind": NEAR_TIE,
                "node_ids": ids,
                "scores": [prio[c] for c in tied],
                "reason": f"prio gap {prio[tied[0]] - prio[tied[1]]:.3f} < {cfg.near_tie_margin} between concurrent "
                f"claims on {key[3]} of {subject_title}",
                "created_at": max(anchor[c].t for c in tied),
                "provenance": REVIEW,
            }
        )
    return order[0]


def _version_group(
    key: tuple,
    members: list[_Member],
    subject_title: str,
    support_edges: dict[tuple[str, str], set[str]],
    out: _Out,
    cfg: VersionConfig,
) -> None:
    """One (tenant, type, subject, attribute) group: its segments, versions, and — for a chain — its edges."""
    tenant, subject = key[0], key[2]
    versions: list[tuple[tuple, _Member, list[_Member]]] = []  # (claim, head, members of its claim)
    contradicted = False
    for si, seg in enumerate(_segments(members, cfg.window)):
        claims: dict[tuple, list[_Member]] = {}
        for m in seg:
            claims.setdefault(m.claim, []).append(m)
            out.place[(tenant, m.id)] = (key, si)
            out.validity[(tenant, m.id)] = (None, None)
        winner = seg[0].claim
        if len(claims) > 1:
            contradicted = True
            prio = _prio(claims, members, si, subject_title, support_edges, cfg)
            winner = _contradiction(key, claims, prio, subject_title, out, cfg)
        if versions and versions[-1][0] == winner:
            versions[-1][2].extend(claims[winner])
        else:
            versions.append((winner, claims[winner][0], list(claims[winner])))
    for i, (_, head, ms) in enumerate(versions):
        until = versions[i + 1][1].t if i + 1 < len(versions) else None
        for m in ms:
            out.validity[(tenant, m.id)] = (head.t, until)
    if len(versions) < 2 and not contradicted:
        return
    for (_, older, _), (_, newer, _) in zip(versions, versions[1:]):
        conf = min(older.conf, newer.conf)
        out.add(
            _edge(tenant, older, "VERSION_NEXT", newer, edge_weight(conf), conf, newer.t, newer.raw_refs, VERSION_NEXT)
        )
    head = versions[-1][1]
    out.add(
        _edge(tenant, subject, "ACTIVE_OF", head, edge_weight(head.conf), head.conf, head.t, head.raw_refs, ACTIVE_OF)
    )
    # repeats support their version's head, a losing claim's its latest sighting: a chain is one connected piece
    for _, h, ms in versions:
        for m in ms:
            if m is not h:
                out.support(tenant, m, h)
    winners = {m.id for _, _, ms in versions for m in ms}
    anchor = {(m.segment, m.claim): m for m in members}
    for m in members:
        if m.id not in winners and anchor[(m.segment, m.claim)] is not m:
            out.support(tenant, m, anchor[(m.segment, m.claim)])


def _sorted(table: pa.Table) -> pa.Table:
    return table.take(pc.sort_indices(table, [("id", "ascending"), ("tenant", "ascending")]))


def version_facts(nodes: pa.Table, edges: pa.Table, config: VersionConfig = VersionConfig()) -> VersionResult:
    """Version chains, contradictions and their review queue over R2G's nodes and edges (see the module doc).

    Edges this job made on an earlier run (provenance jobs.versions.*) are recomputed, so running it on its
    own output changes nothing. Output rows are sorted by id.
    """
    nodes, edges = conform(nodes, NODES), conform(edges, EDGES)
    base = edges.filter(pc.invert(pc.starts_with(edges.column("provenance").fill_null(""), PROVENANCE_PREFIX)))
    e = pl.from_arrow(base.select(["id", "tenant", "src", "dst", "type"]))
    groups, entities = _groups(nodes, e, config)
    support_edges: dict[tuple[str, str], set[str]] = {}
    for tn, s, d in e.filter(pl.col("type").is_in(["SUPPORTS", "SAME_AS"])).select(["tenant", "src", "dst"]).rows():
        support_edges.setdefault((tn, s), set()).add(d)
        support_edges.setdefault((tn, d), set()).add(s)
    out = _Out(base_ids=set(e.select(["tenant", "id"]).rows()))
    for key in sorted(groups):
        _version_group(key, groups[key], entities[(key[0], key[2])]["title"], support_edges, out, config)

    # R2G's CONTRADICTS between members of different segments were a change over time, not a conflict
    def keep(tenant: str, eid: str, src: str, dst: str, etype: str) -> bool:
        a, b = out.place.get((tenant, src)), out.place.get((tenant, dst))
        over_time = etype == "CONTRADICTS" and a is not None and b is not None and a[0] == b[0] and a[1] != b[1]
        return not over_time and (tenant, eid) not in out.edges  # a row of ours replaces one of the same id

    kept = base.filter(
        pa.array([keep(*r) for r in e.select(["tenant", "id", "src", "dst", "type"]).rows()], type=pa.bool_())
    )
    added = pa.Table.from_pylist([out.edges[k] for k in sorted(out.edges)], schema=EDGES)

    keys = zip(nodes.column("tenant").to_pylist(), nodes.column("id").to_pylist())
    olds = zip(nodes.column("valid_since").to_pylist(), nodes.column("valid_until").to_pylist())
    validity = [out.validity.get(k, old) for k, old in zip(keys, olds)]
    out_nodes = nodes
    for i, name in enumerate(("valid_since", "valid_until")):
        out_nodes = out_nodes.set_column(
            nodes.schema.get_field_index(name), name, pa.array([v[i] for v in validity], TS)
        )
    queue = pa.Table.from_pylist(sorted(out.review, key=lambda r: r["id"]), schema=REVIEW_QUEUE)
    return VersionResult(_sorted(out_nodes), _sorted(conform(pa.concat_tables([kept, added]), EDGES)), queue)


# ---------------------------------------------------------------- check


def one_active_per_chain(nodes: pa.Table, edges: pa.Table) -> CheckOutcome:
    """Every version chain has exactly one ACTIVE_OF edge, to its newest version.

    A chain is a connected piece of one tenant's Facts/Preferences over VERSION_NEXT, CONTRADICTS,
    SUPPORTS and SAME_AS edges holding at least one VERSION_NEXT or CONTRADICTS edge (pieces of mere
    repeats are not chains); its ACTIVE_OF target must have no outgoing VERSION_NEXT. A stray ACTIVE_OF
    into no chain is its own one-node chain and passes. `checked` counts chains.
    """
    e = pl.from_arrow(edges.select(["tenant", "src", "dst", "type"]))
    kinds = pl.from_arrow(nodes.select(["tenant", "id", "type"]))
    versioned = set(kinds.filter(pl.col("type").is_in(["Fact", "Preference"])).select(["tenant", "id"]).iter_rows())
    parent: dict[tuple[str, str], tuple[str, str]] = {}

    def find(x: tuple[str, str]) -> tuple[str, str]:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    marked: set[tuple[str, str]] = set()
    has_next: set[tuple[str, str]] = set()
    links = e.filter(pl.col("type").is_in(["VERSION_NEXT", "CONTRADICTS", "SUPPORTS", "SAME_AS"]))
    for tenant, s, d, t in links.sort(["tenant", "src", "dst", "type"]).iter_rows():
        a, b = (tenant, s), (tenant, d)
        if a not in versioned or b not in versioned:
            continue
        parent[find(a)] = find(b)
        if t in ("VERSION_NEXT", "CONTRADICTS"):
            marked.add(a)
        if t == "VERSION_NEXT":
            has_next.add(a)
    chains = {find(x) for x in marked}
    active: dict[tuple[str, str], list[str]] = {}
    bad: list[dict] = []
    for tenant, s, d, _ in e.filter(pl.col("type") == "ACTIVE_OF").sort(["tenant", "src", "dst"]).iter_rows():
        root = find((tenant, d)) if (tenant, d) in parent else (tenant, d)
        active.setdefault(root, []).append(d)
        if (tenant, d) in has_next:
            bad.append(
                {"tenant": tenant, "chain": root[1], "problem": "ACTIVE_OF to a superseded version", "active": [d]}
            )
    for root in sorted(chains | set(active)):
        got = active.get(root, [])
        if len(got) != 1:
            bad.append({"tenant": root[0], "chain": root[1], "problem": f"{len(got)} ACTIVE_OF edges", "active": got})
    return CheckOutcome(passed=not bad, checked=len(chains | set(active)), failures=len(bad), examples=bad[:5])
