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

Group-local (`version_group_keys`, `version_input`): a group's outputs — its members' valid_since/valid_until,
the VERSION_NEXT / ACTIVE_OF / SUPPORTS / CONTRADICTS among them, the removed R2G CONTRADICTS between them, its
review rows — depend on its members, their edges (roles, SUPPORTS / SAME_AS touching them, edges of the ids it
would write), the tenant's Entities (subject, speaker → PERSON) and, for Preferences, the Facts of their messages.
Node ids unique per tenant. Tested in tests/test_consolidation_contracts.py::
test_version_facts_of_some_groups_are_the_full_runs_rows_of_those_groups.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import combinations

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from jobs.schema import REVIEW_QUEUE
from jobs.version_groups import (
    GROUP_KEY,
    VERSION_GROUPS,
    VERSION_PLACES,
    EdgeRows,
    KeptRows,
    VersionReuse,
    fold_name,
    group_members,
    group_signatures,
)
from r2g.ids import edge_id, stable_id
from r2g.partition_graph import edge_weight
from r2g.schema import EDGES, NODES
from raw_store.frames import as_frame, columns_of, take_columns
from raw_store.lake import conform
from raw_store.schema import TS

VERSION_NEXT = "jobs.versions.version_next.v1"
ACTIVE_OF = "jobs.versions.active_of.v1"
CONTRADICTS = "jobs.versions.contradicts.v1"
SUPPORTS = "jobs.versions.repeat.v1"
REVIEW = "jobs.versions.near_tie.v1"
PROVENANCE_PREFIX = "jobs.versions."
NEAR_TIE = "contradiction_near_tie"


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
    groups: pa.Table = field(default_factory=VERSION_GROUPS.empty_table)  # the multi-claim groups' signatures
    places: pa.Table = field(default_factory=VERSION_PLACES.empty_table)  # their members'
    made: pa.Table = field(default_factory=EDGES.empty_table)  # the edges this job made (the tail of `edges`)
    kept_groups: int = 0  # groups whose rows came from `reuse`

    def reuse(self) -> VersionReuse:
        """What a later version_facts may keep of this result."""
        return VersionReuse(self.groups, self.places, self.made, self.review_queue)


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


# ---------------------------------------------------------------- grouping (the members: jobs.version_groups)


def version_group_keys(nodes: pa.Table, edges: pa.Table, config: VersionConfig = VersionConfig()) -> pa.Table:
    """(tenant, id, type, subject, canon, patient, modality) of every node version_facts places in a group.

    Contract (tests/test_consolidation_contracts.py): version_facts over version_input(nodes, edges, G) gives,
    for the members of the groups G, the same node rows, the same edges touching them, the same removed R2G
    CONTRADICTS and the same review rows as the full run."""
    nodes, edges = conform(nodes, NODES), conform(edges, EDGES)
    members, _ = group_members(nodes, EdgeRows(_base(edges)).roles(), config)
    return members.select("tenant", "id", *GROUP_KEY[1:]).to_arrow()


def version_input(
    nodes: pa.Table, edges: pa.Table, keys: pa.Table, config: VersionConfig = VersionConfig()
) -> tuple[pa.Table, pa.Table]:
    """The rows version_facts needs to redo the groups in `keys` (rows of version_group_keys): their members, the
    Entities of their tenants (subjects and speakers), the Facts of their Preferences' messages, and every edge
    touching one of these Facts/Preferences (roles, SUPPORTS / SAME_AS, R2G CONTRADICTS, earlier runs' edges)."""
    nodes, edges = conform(nodes, NODES), conform(edges, EDGES)
    n = as_frame(nodes.select(["tenant", "id", "type", "conv_id", "msg_id"])).with_row_index("_row")
    wanted = as_frame(keys.select(["tenant", "id"])).unique()
    chosen = n.join(wanted, on=["tenant", "id"], how="semi", nulls_equal=True)
    messages = chosen.filter(pl.col("type") == "Preference").select("tenant", "conv_id", "msg_id").unique()
    same_message = n.filter(pl.col("type") == "Fact").join(
        messages, on=["tenant", "conv_id", "msg_id"], how="semi", nulls_equal=True
    )
    tenants = wanted.select("tenant").unique()
    ents = n.filter(pl.col("type") == "Entity").join(tenants, on="tenant", how="semi", nulls_equal=True)
    carriers = pl.concat([chosen, same_message]).select("tenant", "id").unique()
    rows = pl.concat([chosen, same_message, ents]).get_column("_row").unique().sort()
    e = as_frame(edges.select(["tenant", "src", "dst"])).with_row_index("_row")
    touching = (
        pl.concat(
            [
                e.join(carriers, left_on=["tenant", "src"], right_on=["tenant", "id"], how="semi", nulls_equal=True),
                e.join(carriers, left_on=["tenant", "dst"], right_on=["tenant", "id"], how="semi", nulls_equal=True),
            ]
        )
        .get_column("_row")
        .unique()
        .sort()
    )
    return nodes.take(rows.to_arrow()), edges.take(touching.to_arrow())


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
    support_edges: dict[tuple[str, str], list[str]],
    cfg: VersionConfig,
) -> dict[tuple, float]:
    """prio(claim) = a*source_trust + b*recency_score + c*evidence_support + d*consistency, each in [0, 1].

    source_trust: the best of its sightings (speaker_trust, else self / other); recency_score:
    exp(-(newest claim's latest sighting - its latest sighting) / tau); evidence_support: n / (n + k) with
    n = its sightings' frequency + the SUPPORTS/SAME_AS edges touching them (not those to a member holding
    another claim); consistency: (agree + 1) / (agree + disagree + 2) over the group's members outside
    this segment — the subject's other statements on the attribute, 0.5 when there are none.
    """
    named = {fold_name(k): v for k, v in cfg.speaker_trust}
    subject = fold_name(subject_title)

    def trust(m: _Member) -> float:
        speaker = fold_name(m.speaker)
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

    validity: dict[tuple[str, str], tuple[datetime | None, datetime | None]] = field(default_factory=dict)
    place: dict[tuple[str, str], tuple[tuple, int]] = field(default_factory=dict)  # → (group key, segment)
    edges: dict[tuple[str, str], dict] = field(default_factory=dict)  # (tenant, edge id) → row
    review: list[dict] = field(default_factory=list)

    def add(self, row: dict) -> None:
        self.edges[(row["tenant"], row["id"])] = row

    def support(self, tenant: str, src: _Member, dst: _Member) -> None:
        """src -SUPPORTS-> dst (a repeat of one claim); version_facts drops it where the input holds that edge."""
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
    support_edges: dict[tuple[str, str], list[str]],
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
    """`table` sorted by (id, tenant), stable; as it is when its ids already increase strictly (R2G's do)."""
    ids = table.column("id")
    if table.num_rows < 2 or (
        ids.null_count == 0 and pc.all(pc.less(ids.slice(0, table.num_rows - 1), ids.slice(1))).as_py()
    ):
        return table
    return table.take(pc.sort_indices(table, [("id", "ascending"), ("tenant", "ascending")]))


def _base(edges: pa.Table) -> pa.Table:
    """The input edges this job did not make (its own are recomputed)."""
    ours = pc.starts_with(edges.column("provenance").fill_null(""), PROVENANCE_PREFIX)
    return edges.filter(pc.invert(ours)) if pc.any(ours).as_py() else edges


def _python_members(rows: pl.DataFrame) -> dict[tuple, list[_Member]]:
    """{group key: members in (t, id) order} for the groups that need the full rules (several claims)."""
    groups: dict[tuple, list[_Member]] = {}
    for r in rows.iter_rows(named=True):
        key = tuple(r[k] for k in GROUP_KEY)
        groups.setdefault(key, []).append(
            _Member(
                r["id"],
                r["tenant"],
                r["type"],
                r["t"],
                (r["affirmative"], r["obj"]),
                r["conf"],
                r["frequency"],
                r["speaker"],
                r["raw_refs"] or [],
            )
        )
    return groups


def version_facts(
    nodes: pa.Table, edges: pa.Table, config: VersionConfig = VersionConfig(), reuse: VersionReuse | None = None
) -> VersionResult:
    """Version chains, contradictions and their review queue over R2G's nodes and edges (see the module doc).

    Edges this job made on an earlier run (provenance jobs.versions.*) are recomputed, so running it on its
    own output changes nothing. Output nodes are sorted by id; output edges are the input's (less those dropped) in
    their order, then this job's by (tenant, id): the same input rows in another order give the same rows in
    another order (graph_steps sorts its stage by key).
    Vectorised: groups are formed in polars; a group whose members all make one claim is one version (valid
    from its first member on, no edges), so only groups with two or more claims run the rules in Python — and of
    those, with `reuse` (an earlier result's), only the groups whose signature (VERSION_GROUPS) changed: the others
    keep what they made then, which is what the rules would make again.
    """
    nodes, edges = conform(nodes, NODES), conform(edges, EDGES)
    base = _base(edges)
    del edges  # base is the only reference kept (see the take at the end)
    e = EdgeRows(base)
    members, entities = group_members(nodes, e.roles(), config)
    members = members.with_columns(pl.struct("affirmative", "obj").n_unique().over(GROUP_KEY).alias("_claims"))
    single = members.filter(pl.col("_claims") == 1)
    multi = members.filter(pl.col("_claims") > 1).drop("_claims")
    signatures = group_signatures(multi, e.touching(multi.get_column("id")), entities)
    # the groups kept from `reuse`: where member ids are unique, a member's place is its group's alone
    kept_keys = signatures.clear().select(GROUP_KEY)
    if reuse is not None and multi.select("tenant", "id").is_unique().all():
        kept_keys = signatures.join(
            as_frame(conform(reuse.groups, VERSION_GROUPS)), on=[*GROUP_KEY, "rows", "h"], how="semi", nulls_equal=True
        ).select(GROUP_KEY)
    kept = multi.join(kept_keys, on=GROUP_KEY, how="semi", nulls_equal=True).select("tenant", "id", *GROUP_KEY[1:])
    run = multi.join(kept_keys, on=GROUP_KEY, how="anti", nulls_equal=True) if kept.height else multi

    groups = _python_members(run)
    ids = run.select("tenant", "id").unique()
    # each multi-claim member's SUPPORTS / SAME_AS neighbours (either direction), gathered in polars (a dict built
    # edge by edge took 7.7 s at 1M messages); a neighbour listed twice counts once in _prio
    links = e.of_types(["SUPPORTS", "SAME_AS"])
    ends = pl.concat(
        [
            links.select("tenant", pl.col(a).alias("id"), pl.col(b).alias("_o"))
            for a, b in (("src", "dst"), ("dst", "src"))
        ]
    )
    near = ends.join(ids, on=["tenant", "id"], how="semi", nulls_equal=True).group_by(["tenant", "id"]).agg("_o")
    support_edges: dict[tuple[str, str], list[str]] = dict(
        zip(zip(near.get_column("tenant").to_list(), near.get_column("id").to_list()), near.get_column("_o").to_list())
    )
    titles = {(t, i): title for t, i, title in entities.select("tenant", "id", "title").iter_rows()}
    out = _Out()
    for key in sorted(groups):
        _version_group(key, groups[key], titles[(key[0], key[2])], support_edges, out, config)
    # a repeat's SUPPORTS is not added where the input already holds an edge of that id (a kept group's were
    # dropped when made: an input edge of that id touches its member, so its signature holds it)
    made = pl.DataFrame(
        [(t, i) for (t, i), r in out.edges.items() if r["provenance"] == SUPPORTS],
        schema={"tenant": pl.String, "id": pl.String},
        orient="row",
    )
    for t, i in made.join(
        e.of_keys(made).select("tenant", "id"), on=["tenant", "id"], how="semi", nulls_equal=True
    ).iter_rows():
        del out.edges[(t, i)]

    # what the kept groups made: their members' places and validity, their edges (each ends on a member of its
    # group), their review rows (each names its group's members)
    reused = KeptRows.of(reuse, kept)
    # R2G's CONTRADICTS between members of different segments were a change over time, not a conflict; and a row
    # of ours replaces an input row of the same id
    group_no = multi.select(GROUP_KEY).unique(maintain_order=True).with_row_index("_g")
    number = {tuple(r[:-1]): r[-1] for r in group_no.select(*GROUP_KEY, "_g").iter_rows()} if groups else {}
    places = pl.concat(  # every multi-claim member's group, segment and validity: the run's, then the kept
        [
            pl.DataFrame(
                [(t, i, number[key], seg, *out.validity[(t, i)]) for (t, i), (key, seg) in out.place.items()],
                schema={**dict.fromkeys(("tenant", "id"), pl.String), "_g": pl.UInt32, "segment": pl.Int32}
                | dict.fromkeys(("valid_since", "valid_until"), pl.Datetime("us")),
                orient="row",
            ),
            reused.places.join(kept, on=["tenant", "id"], nulls_equal=True)
            .join(group_no, on=GROUP_KEY, nulls_equal=True)
            .select("tenant", "id", "_g", "segment", "valid_since", "valid_until"),
        ]
    )
    place = places.select("tenant", "id", "_g", pl.col("segment").cast(pl.Int64).alias("_s"))
    added = pa.concat_tables(
        [pa.Table.from_pylist([out.edges[k] for k in sorted(out.edges)], schema=EDGES), reused.edges]
    )
    if reused.edges.num_rows:
        added = added.take(pc.sort_indices(added, [("tenant", "ascending"), ("id", "ascending")]))
    ours = as_frame(added.select(["tenant", "id"]))
    over_time = (
        e.of_types(["CONTRADICTS"])
        .join(place.rename({"id": "src", "_g": "_ga", "_s": "_sa"}), on=["tenant", "src"], nulls_equal=True)
        .join(place.rename({"id": "dst", "_g": "_gb", "_s": "_sb"}), on=["tenant", "dst"], nulls_equal=True)
        .filter((pl.col("_ga") == pl.col("_gb")) & (pl.col("_sa") != pl.col("_sb")))
    )
    replaced = e.of_keys(ours)
    dropped = pl.concat([over_time.get_column("_row"), replaced.get_column("_row")]).unique()

    validity = (
        pl.concat(
            [
                single.group_by(GROUP_KEY, maintain_order=True)
                .agg("id", pl.col("t").min().alias("_since"))
                .explode("id")
                .select("tenant", "id", "_since", pl.lit(None, dtype=pl.Datetime("us")).alias("_until")),
                places.select(
                    "tenant", "id", pl.col("valid_since").alias("_since"), pl.col("valid_until").alias("_until")
                ),
            ]
        )
        .unique(subset=["tenant", "id"], keep="last", maintain_order=True)
        .with_columns(pl.lit(True).alias("_placed"))
    )
    v = as_frame(nodes.select(["tenant", "id", "valid_since", "valid_until"])).join(
        validity, on=["tenant", "id"], how="left", maintain_order="left", nulls_equal=True
    )
    placed = pl.col("_placed").fill_null(False)
    v = v.select(
        pl.when(placed).then("_since").otherwise("valid_since").alias("valid_since"),
        pl.when(placed).then("_until").otherwise("valid_until").alias("valid_until"),
    )
    out_nodes = nodes
    for name in ("valid_since", "valid_until"):
        out_nodes = out_nodes.set_column(
            nodes.schema.get_field_index(name), name, v.get_column(name).to_arrow().cast(TS)
        )
    queue = pa.concat_tables([pa.Table.from_pylist(out.review, schema=REVIEW_QUEUE), reused.review])
    queue = queue.take(pc.sort_indices(queue, [("id", "ascending")]))
    # base without the dropped rows, in its order, then ours: not sorted into one order, which took a sort and a
    # scattered take of every edge (12 s at 1M messages) only for the graph steps to sort the stage by key again
    # the frames over every edge (and member) are not needed past here: let go before the copy below, not held
    # through it (~2 GB of a 1M-message lake's edge keys)
    del e, links, ends, members, single, multi, v
    if dropped.len():
        keep = np.ones(base.num_rows, dtype=bool)
        keep[dropped.to_numpy()] = False
        schema, columns = base.schema, columns_of(base)
        del base  # (the edges of the graph: let go a column at a time as the kept rows are taken, a column per core)
        base = take_columns(columns, pa.array(np.flatnonzero(keep)), schema)
    return VersionResult(
        _sorted(out_nodes),
        pa.concat_tables([base, added]),
        queue,
        groups=conform(signatures.to_arrow(), VERSION_GROUPS),
        places=conform(places.drop("_g").to_arrow(), VERSION_PLACES),
        made=added,
        kept_groups=kept_keys.height,
    )
