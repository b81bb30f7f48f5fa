"""Steps 1–3 of jobs.communities (the contexts, their items, the co-occurring pairs), on integer codes.

`ContextCodes` numbers the nodes and finds every context's items as code pairs; `context_items` (jobs.communities)
and `context_pairs` give them as strings. The edges go to polars a slice at a time and only their codes are kept, and
the pairs are counted on codes: at 1M messages the topics step's working set over the graph went from +3.6-4.4 to
+0.7 GB, the same tables (tests/test_consolidation_golden.py runs both orders of the nodes against the reference).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl
import pyarrow as pa

from jobs.community_concepts import CONCEPT_SUBTYPE
from r2g.schema import EDGES, NODES, ROLE_EDGES
from raw_store.frames import as_frame, of_types, sliced, sorted_by
from raw_store.lake import conform

_CARRIER_TYPES = ("Fact", "Preference", "Task")  # attach to the Episode they derive from
_LINK_EDGES = frozenset({"MENTIONS", "ABOUT"}) | ROLE_EDGES  # context → item
_CONTEXT_EDGES = _LINK_EDGES | {"DERIVED_FROM"}  # what steps 1–2 read
_DERIVE_DEPTH = 3  # Task → Fact → Episode is the longest R2G chain


@dataclass
class ContextCodes:
    """Steps 1–2 on integer codes: `kind` holds the (tenant, id) of every node but this job's Concepts, once each, and
    a node's code is its row there; `pairs` holds the unique (context, item) code pairs. A context's items are of its
    tenant (every join below is on the tenant). `by_code`: the nodes came in (tenant, id) order without nulls, so
    codes sort as their strings do."""

    kind: pl.DataFrame
    pairs: pl.DataFrame
    by_code: bool

    @classmethod
    def of(
        cls, nodes: pa.Table, edges: pa.Table, member_types: Sequence[str], skip_subtypes: Sequence[str]
    ) -> ContextCodes:
        n = as_frame(conform(nodes, NODES).select(["tenant", "id", "type", "subtype"]))
        # every node but this job's Concepts, one row per (tenant, id) (the last), numbered: the joins below run on
        # these integer codes, not on (tenant, id) strings
        kind = (
            n.filter(~((pl.col("type") == "Concept") & (pl.col("subtype") == CONCEPT_SUBTYPE)).fill_null(False))
            .unique(subset=["tenant", "id"], keep="last", maintain_order=True)
            .with_row_index("_k")
        )
        skipped = ((pl.col("type") == "Entity") & pl.col("subtype").is_in(list(skip_subtypes))).fill_null(False)
        flags = kind.select(
            (pl.col("type").is_in(list(member_types)) & ~skipped).fill_null(False).alias("member"),
            (pl.col("type") == "Episode").fill_null(False).alias("episode"),
            pl.col("type").is_in(list(_CARRIER_TYPES)).fill_null(False).alias("carrier_type"),
        )
        member, episode = flags.get_column("member"), flags.get_column("episode")
        code = kind.select("tenant", "id", "_k")

        def coded(e: pl.DataFrame) -> pl.DataFrame:
            return (
                e.filter(pl.col("src") != pl.col("dst"))
                .join(code.rename({"id": "src", "_k": "s"}), on=["tenant", "src"], nulls_equal=True)
                .join(code.rename({"id": "dst", "_k": "d"}), on=["tenant", "dst"], nulls_equal=True)
                .select("s", "d", pl.col("type") == "DERIVED_FROM")
            )

        # the edges' strings go to polars a slice at a time, only their codes are kept (every step after is a set)
        e = sliced(of_types(conform(edges, EDGES).select(["tenant", "src", "dst", "type"]), _CONTEXT_EDGES), coded)
        derived = e.filter(pl.col("type")).select("s", "d").unique()
        links = e.filter(~pl.col("type"))
        links = (
            links.filter(member.gather(links.get_column("d")))
            .select(pl.col("s").alias("carrier"), pl.col("d").alias("item"))
            .unique()
        )
        # a member carrier also attaches itself (wherever it sits), a carrier with links attaches what it points to
        own = kind.filter(flags.get_column("member") & flags.get_column("carrier_type")).select(
            pl.col("_k").alias("carrier"), pl.col("_k").alias("item")
        )
        linking = links.select("carrier").unique()
        linking = linking.filter(member.gather(linking.get_column("carrier"))).select(
            "carrier", pl.col("carrier").alias("item")
        )
        attached = pl.concat([links, own, linking]).unique()
        carriers = attached.select("carrier").unique()
        is_episode = episode.gather(carriers.get_column("carrier"))
        found = [carriers.filter(is_episode).select("carrier", pl.col("carrier").alias("context"))]
        frontier = carriers.filter(~is_episode).select("carrier", pl.col("carrier").alias("node"))
        reached_parts = []
        for _ in range(_DERIVE_DEPTH):  # walks through non-Episodes reach exactly what the BFS reached
            step = (
                frontier.join(derived, left_on="node", right_on="s")
                .select("carrier", pl.col("d").alias("node"))
                .unique()
            )
            at_episode = episode.gather(step.get_column("node"))
            reached_parts.append(step.filter(at_episode).select("carrier", pl.col("node").alias("context")))
            frontier = step.filter(~at_episode)
        reached = pl.concat(reached_parts).unique()
        alone = (
            carriers.filter(~is_episode)
            .join(reached, on="carrier", how="anti")
            .select("carrier", pl.col("carrier").alias("context"))
        )
        pairs = pl.concat([*found, reached, alone]).join(attached, on="carrier").select("context", "item").unique()
        # nodes in (tenant, id) order (the graph steps' input is): their codes sort as their strings do, and a context's
        # items are of its tenant, so the integer pairs are sorted instead of the strings (11 s at 1M messages)
        no_nulls = not kind.select(pl.col("tenant").is_null().any() | pl.col("id").is_null().any()).item()
        by_code = no_nulls and sorted_by(kind, ["tenant", "id"])
        if by_code:
            pairs = pairs.sort(["context", "item"])
        return cls(kind.select("tenant", "id"), pairs, by_code)

    def items(self) -> pa.Table:
        """context_items' table: the code pairs as (tenant, context, item) strings, sorted."""
        tenant, ids, pairs = self.kind.get_column("tenant"), self.kind.get_column("id"), self.pairs
        items = pl.DataFrame(
            {
                "tenant": tenant.gather(pairs.get_column("context")),
                "context": ids.gather(pairs.get_column("context")),
                "item": ids.gather(pairs.get_column("item")),
            }
        )
        return (items if self.by_code else items.sort(["tenant", "context", "item"])).to_arrow()

    def item_pairs(self) -> pa.Table:
        """context_pairs(self.items()) where codes sort as their strings do (`by_code`): the self join, the a < b
        test, the counts and the order run on the codes and only the result's ids are strings. The join of (tenant,
        context) strings held every co-occurring pair's strings: RSS climbed 0.85 GB in it during a full
        consolidation at 1M messages."""
        assert self.by_code, "codes that sort as their strings do (else context_pairs of the items)"
        c = self.pairs
        pairs = (
            c.join(c, on="context", suffix="_b")
            .filter(pl.col("item") < pl.col("item_b"))
            .group_by(["item", "item_b"])
            .agg(pl.len().cast(pl.Int64).alias("weight"))
            .sort(["item", "item_b"])
        )
        tenant, ids = self.kind.get_column("tenant"), self.kind.get_column("id")
        a, b = pairs.get_column("item"), pairs.get_column("item_b")
        return pl.DataFrame(
            {"tenant": tenant.gather(a), "a": ids.gather(a), "b": ids.gather(b), "weight": pairs.get_column("weight")}
        ).to_arrow()


def context_pairs(items: pa.Table) -> pa.Table:
    """(tenant, a, b, weight): step 3 — for each pair a < b of items sharing contexts, how many they share.

    Weights add over disjoint sets of contexts: the pairs of a lake are the sum of its batches' pairs
    (aggregate_pairs), so communities_from_pairs can run from an incrementally kept pair table."""
    i = as_frame(items.select(["tenant", "context", "item"]))
    pairs = (
        i.join(i, on=["tenant", "context"], suffix="_b", nulls_equal=True)
        .filter(pl.col("item") < pl.col("item_b"))
        .group_by(["tenant", "item", "item_b"])
        .agg(pl.len().cast(pl.Int64).alias("weight"))
        .rename({"item": "a", "item_b": "b"})
        .sort(["tenant", "a", "b"])
    )
    return pairs.to_arrow()


def aggregate_pairs(*batches: pa.Table) -> pa.Table:
    """The pair tables of several batches of contexts, summed per (tenant, a, b)."""
    parts = [as_frame(b.select(["tenant", "a", "b", "weight"])) for b in batches if b.num_rows]
    if not parts:
        return pl.DataFrame(schema={"tenant": pl.String, "a": pl.String, "b": pl.String, "weight": pl.Int64}).to_arrow()
    return (
        pl.concat(parts)
        .group_by(["tenant", "a", "b"])
        .agg(pl.col("weight").sum())
        .sort(["tenant", "a", "b"])
        .to_arrow()
    )
