"""The groups of fact versioning (jobs.versions, "Grouping" in its module doc): every versioned Fact / Preference
as a row of its group (tenant, type, subject, attribute) with its claim and time, from the NODES / EDGES tables."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from jobs.schema import REVIEW_QUEUE
from r2g.link import LIGHT_VERBS, canonical_predicate
from r2g.schema import EDGES
from raw_store.frames import as_frame, take_rows
from raw_store.lake import conform
from raw_store.schema import TS

if TYPE_CHECKING:
    from jobs.versions import VersionConfig

_DEFAULT_CONF = 0.5  # a node with no confidence (hand-made rows)
GROUP_KEY = ["tenant", "type", "subject", "canon", "patient", "modality"]
_ROLES = ("AGENT", "PATIENT", "LOCATION")


class EdgeRows:
    """The input edges' key columns (id, tenant, src, dst, type) as version_facts reads them: only the rows a step
    uses go to polars, found by type or by id in Arrow, each with its row number (`_row`). A frame of every edge was
    ~2.5 GB at 1M messages (15.7M edges); the rules read the role, SUPPORTS / SAME_AS and CONTRADICTS edges, the edges
    of the multi-claim members and those of the ids the step makes."""

    def __init__(self, edges: pa.Table) -> None:
        self.edges = edges.select(["id", "tenant", "src", "dst", "type"])

    def _taken(self, mask: pa.ChunkedArray | pa.Array) -> pl.DataFrame:
        rows = pc.indices_nonzero(mask.combine_chunks() if isinstance(mask, pa.ChunkedArray) else mask)
        frame = as_frame(take_rows(self.edges, rows.cast(pa.int64())))
        return frame.with_columns(pl.Series("_row", rows.cast(pa.uint32())))

    def of_types(self, types: Sequence[str]) -> pl.DataFrame:
        """The edges of `types`, in table order."""
        return self._taken(pc.is_in(self.edges.column("type"), value_set=pa.array(list(types), pa.string())))

    def roles(self) -> pl.DataFrame:
        return self.of_types(_ROLES)

    def touching(self, ids: pl.Series) -> pl.DataFrame:
        """The edges whose src or dst is one of `ids` (of any tenant: a join on (tenant, end) picks them)."""
        value_set = ids.unique().to_arrow().cast(pa.string())
        column = self.edges.column
        return self._taken(
            pc.or_(pc.is_in(column("src"), value_set=value_set), pc.is_in(column("dst"), value_set=value_set))
        )

    def of_keys(self, keys: pl.DataFrame) -> pl.DataFrame:
        """The edges whose (tenant, id) is a row of `keys` (nulls equal), in table order."""
        value_set = keys.get_column("id").unique().to_arrow().cast(pa.string())
        found = self._taken(pc.is_in(self.edges.column("id"), value_set=value_set))
        return found.join(
            keys.select("tenant", "id"), on=["tenant", "id"], how="semi", nulls_equal=True, maintain_order="left"
        )


def fold_name(s: str | None) -> str:
    return " ".join((s or "").lower().split())


def _mapped(
    col: str, fn: Callable[[str], str], values: pl.Series, dtype: pl.DataType | type[pl.DataType]
) -> pl.DataFrame:
    """(col, fn(value)) over the distinct values: Python string rules run once per distinct string."""
    distinct = values.unique().drop_nulls()
    return pl.DataFrame({col: distinct, "_out": pl.Series([fn(v) for v in distinct.to_list()], dtype=dtype)})


def _roles(edges: pl.DataFrame) -> pl.DataFrame:
    """(tenant, id, AGENT, PATIENT, LOCATION): the smallest dst of each role edge type out of each node."""
    return (
        edges.filter(pl.col("type").is_in(_ROLES))
        .group_by(["tenant", "src"])
        .agg(*(pl.col("dst").filter(pl.col("type") == role).min().alias(role) for role in _ROLES))
        .rename({"src": "id"})
    )


def _with_roles(rows: pl.DataFrame, roles: pl.DataFrame) -> pl.DataFrame:
    """`rows` plus their AGENT / PATIENT / LOCATION columns (see _roles)."""
    return rows.join(roles, on=["tenant", "id"], how="left", maintain_order="left", nulls_equal=True)


def _entities(n: pl.DataFrame) -> pl.DataFrame:
    """(tenant, id, title, subtype) of the Entities, one row per id (the last, as a dict keyed by id keeps)."""
    return (
        n.filter(pl.col("type") == "Entity")
        .select("tenant", "id", "title", "subtype")
        .unique(subset=["tenant", "id"], keep="last", maintain_order=True)
    )


def _with_subject(rows: pl.DataFrame, entities: pl.DataFrame) -> pl.DataFrame:
    """`rows` (with AGENT, speaker) plus `subject`: the AGENT when it is an Entity, else the PERSON Entity named
    like the speaker (case and spaces folded; of several, the largest id)."""
    persons = entities.filter(pl.col("subtype") == "PERSON")
    titles = _mapped("title", fold_name, persons.get_column("title"), pl.String)
    by_name = (
        persons.join(titles, on="title", how="left")
        .with_columns(pl.col("_out").fill_null(""))
        .group_by(["tenant", "_out"])
        .agg(pl.col("id").max().alias("_speaker_entity"))
        .rename({"_out": "_speaker_norm"})
    )
    speakers = _mapped("speaker", fold_name, rows.get_column("speaker"), pl.String).rename({"_out": "_speaker_norm"})
    known = entities.select("tenant", pl.col("id").alias("AGENT"), pl.lit(True).alias("_agent_ok")).unique()
    rows = (
        rows.join(known, on=["tenant", "AGENT"], how="left", maintain_order="left", nulls_equal=True)
        .join(speakers, on="speaker", how="left", maintain_order="left")
        .with_columns(pl.col("_speaker_norm").fill_null(""))
        .join(
            by_name.filter(pl.col("_speaker_norm") != ""),
            on=["tenant", "_speaker_norm"],
            how="left",
            maintain_order="left",
            nulls_equal=True,
        )
    )
    return rows.with_columns(
        pl.when(pl.col("_agent_ok").fill_null(False)).then("AGENT").otherwise("_speaker_entity").alias("subject")
    ).drop("_agent_ok", "_speaker_norm", "_speaker_entity")


_NODE_COLS = [
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


_MEMBER_COLS = [*GROUP_KEY, "id", "t", "affirmative", "obj", "conf", "frequency", "speaker", "raw_refs"]


def group_members(nodes: pa.Table, edges: pl.DataFrame, cfg: VersionConfig) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Every versioned Fact / Preference as a row of its group (tenant, type, subject, canon, patient, modality)
    with its claim (affirmative, obj) and time t, in (t, id) order, so each group's members are (sorting by the
    six group columns too cost ~6 s at 1M messages); and the Entities (see jobs.versions' module doc)."""
    n = as_frame(nodes.select(_NODE_COLS))
    entities = _entities(n)
    roles = _roles(edges)
    canon = pl.DataFrame({"predicate_norm": n.get_column("predicate_norm").unique().drop_nulls()})
    folded = [canonical_predicate(v) for v in canon.get_column("predicate_norm").to_list()]
    canon = canon.with_columns(
        pl.Series("canon", [c for c, _ in folded], dtype=pl.String),
        pl.Series("_flip", [f for _, f in folded], dtype=pl.Boolean),
    )
    facts = n.filter((pl.col("type") == "Fact") & pl.col("predicate_norm").is_not_null()).sort(
        "id", maintain_order=True
    )
    facts = _with_subject(_with_roles(facts, roles), entities).join(
        canon, on="predicate_norm", how="left", maintain_order="left"
    )
    patient = pl.col("PATIENT").fill_null("")
    light = (
        (patient == "") & ~pl.col("canon").str.contains("_", literal=True) & pl.col("canon").is_in(sorted(LIGHT_VERBS))
    )
    affirmative = pl.col("negation").fill_null(False) == pl.col("_flip")
    single = pl.col("canon").is_in(sorted(cfg.single_valued)) & (patient == "")
    obj = pl.when(single).then(pl.col("LOCATION").fill_null("")).otherwise(pl.lit(""))
    # a Fact with an attribute (even an undated one: a Preference may take it); "I work": no claim on the value
    attributed = facts.with_columns(
        patient.alias("patient"), pl.col("modality").fill_null(""), affirmative.alias("affirmative"), obj.alias("obj")
    ).filter(pl.col("subject").is_not_null() & ~light & ~(single & (pl.col("obj") == "") & pl.col("affirmative")))
    fact_members = attributed.with_columns(pl.lit("Fact").alias("type"))

    # a Preference takes the attribute of the Fact made from the same words (same message, inside its span)
    located = attributed.filter(pl.col("raw_refs").list.len() > 0).select(
        "tenant",
        "conv_id",
        "msg_id",
        pl.col("raw_refs").list.first().struct.field("raw_id"),
        pl.col("raw_refs").list.first().struct.field("offset").alias("_off"),
        pl.col("id").alias("_fid"),
    )
    attrs = attributed.select("tenant", pl.col("id").alias("_fid"), "canon", "patient", "modality", "obj").unique(
        subset=["tenant", "_fid"], keep="last", maintain_order=True
    )
    prefs = n.filter(pl.col("type") == "Preference").sort("id", maintain_order=True).with_row_index("_p")
    spans = (
        prefs.select("_p", "tenant", "conv_id", "msg_id", "raw_refs")
        .filter(pl.col("raw_refs").list.len() > 0)
        .explode("raw_refs")
        .unnest("raw_refs")
        .join(located, on=["tenant", "conv_id", "msg_id", "raw_id"], how="inner", nulls_equal=True)
        .filter((pl.col("offset") <= pl.col("_off")) & (pl.col("_off") < pl.col("offset") + pl.col("length")))
        .sort(["_p", "_off", "_fid"])
        .group_by("_p", maintain_order=True)
        .first()
        .select("_p", "_fid")
    )
    prefs = (
        _with_subject(_with_roles(prefs.drop("modality"), roles), entities)
        .join(spans, on="_p", how="inner", maintain_order="left")
        .join(attrs, on=["tenant", "_fid"], how="left", maintain_order="left", nulls_equal=True)
        .filter(pl.col("subject").is_not_null())
        .with_columns((~pl.col("negation").fill_null(False)).alias("affirmative"), pl.lit("Preference").alias("type"))
    )
    members = pl.concat(
        [
            m.select(
                *GROUP_KEY,
                "id",
                pl.coalesce("time_start", "first_seen").alias("t"),
                "affirmative",
                "obj",
                pl.col("confidence").fill_null(_DEFAULT_CONF).cast(pl.Float64).alias("conf"),
                pl.max_horizontal(pl.col("frequency").fill_null(1), 1).cast(pl.Int64).alias("frequency"),
                pl.col("speaker").fill_null(""),
                "raw_refs",
            )
            for m in (fact_members, prefs)
        ]
    )
    members = members.filter(pl.col("t").is_not_null()).sort(["t", "id"], maintain_order=True)
    return members, entities


# ---------------------------------------------------------------- reuse: what a group made, kept while its signature holds

# A multi-claim group's signature (version_facts' `reuse`): its key, members and a hash of what its rules read
VERSION_GROUPS = pa.schema([*((k, pa.string()) for k in GROUP_KEY), ("rows", pa.int64()), ("h", pa.uint64())])
# A multi-claim group's member: its segment and the validity the rules gave it
VERSION_PLACES = pa.schema(
    [("tenant", pa.string()), ("id", pa.string()), ("segment", pa.int32()), ("valid_since", TS), ("valid_until", TS)]
)


@dataclass(frozen=True)
class VersionReuse:
    """What an earlier version_facts made for its multi-claim groups: a group whose VERSION_GROUPS row is the same
    again keeps its members' places and validity, its edges and its review rows instead of running the rules."""

    groups: pa.Table  # VERSION_GROUPS
    places: pa.Table  # VERSION_PLACES
    edges: pa.Table  # EDGES version_facts made (VersionResult.made)
    review: pa.Table  # REVIEW_QUEUE


def group_signatures(multi: pl.DataFrame, e: pl.DataFrame, entities: pl.DataFrame) -> pl.DataFrame:
    """VERSION_GROUPS of the multi-claim groups: per group its member count and a hash of all the rules read for
    it — its members' rows in (t, id) order, every input edge with an end on one of them (roles, SUPPORTS /
    SAME_AS, R2G's CONTRADICTS, an edge of an id the group would make) and its subject's title."""
    terms = (pl.struct("_h", "_i").hash(seed=11) // (1 << 24)).sum()  # 40-bit terms: < 2^24 summands never overflow
    rows = multi.with_columns(
        pl.struct(pl.all()).hash(seed=7).alias("_h"), pl.int_range(pl.len()).over(GROUP_KEY).alias("_i")
    )
    own = rows.group_by(GROUP_KEY).agg(pl.len().cast(pl.Int64).alias("rows"), terms.alias("_m"))
    # per member its group (renamed: an edge has columns "id" and "type" of its own); each edge ending on a member
    # found by a join per end, hashed once found: ~2 GB less at 1M messages than hashing every edge first
    group = [f"_g{k}" for k in GROUP_KEY[1:]]
    member = multi.select(
        "tenant", pl.col("id").alias("_m"), *(pl.col(k).alias(g) for k, g in zip(GROUP_KEY[1:], group))
    )
    touching = (
        pl.concat(
            [
                e.join(member, left_on=["tenant", end], right_on=["tenant", "_m"], nulls_equal=True).select(
                    "tenant", *group, pl.struct("id", "src", "dst", "type").hash(seed=3).alias("_h")
                )
                for end in ("src", "dst")
            ]
        )
        .with_columns(pl.lit(0, pl.Int64).alias("_i"))
        .group_by(["tenant", *group])
        .agg(terms.alias("_x"))
        .rename(dict(zip(group, GROUP_KEY[1:])))
    )
    titles = entities.select("tenant", pl.col("id").alias("subject"), pl.col("title").hash(seed=5).alias("_t"))
    out = own.join(touching, on=GROUP_KEY, how="left", nulls_equal=True).join(
        titles, on=["tenant", "subject"], how="left", nulls_equal=True
    )
    return out.select(*GROUP_KEY, "rows", pl.struct("rows", "_m", "_x", "_t").hash(seed=13).alias("h")).sort(
        GROUP_KEY, nulls_last=True
    )


@dataclass
class KeptRows:
    """The rows `reuse` holds for the kept groups' members (`kept`: tenant, id): their places, the edges their
    groups made (each ends on a member of its group) and their review rows (each names its group's members)."""

    places: pl.DataFrame
    edges: pa.Table
    review: pa.Table

    @classmethod
    def of(cls, reuse: VersionReuse | None, kept: pl.DataFrame) -> KeptRows:
        if reuse is None or not kept.height:
            return cls(as_frame(VERSION_PLACES.empty_table()), EDGES.empty_table(), REVIEW_QUEUE.empty_table())
        ids = kept.select("tenant", "id")
        places = as_frame(conform(reuse.places, VERSION_PLACES)).join(
            ids, on=["tenant", "id"], how="semi", nulls_equal=True
        )
        edges = conform(reuse.edges, EDGES)
        hit = (
            as_frame(edges.select(["tenant", "dst"]))
            .with_row_index("_r")
            .join(ids, left_on=["tenant", "dst"], right_on=["tenant", "id"], how="semi", nulls_equal=True)
        )
        review = conform(reuse.review, REVIEW_QUEUE)
        first = (
            as_frame(review.select(["tenant", "node_ids"]))
            .with_row_index("_r")
            .select("_r", "tenant", pl.col("node_ids").list.first().alias("id"))
        )
        named = first.join(ids, on=["tenant", "id"], how="semi", nulls_equal=True)
        return cls(
            places,
            edges.take(hit.get_column("_r").sort().to_arrow()),
            review.take(named.get_column("_r").sort().to_arrow()),
        )
