"""The read API's views (recall.read_api): the frozen dataclasses a session returns, how a node row becomes one,
and the schema it describes.

Views are frozen; their collections are tuples and `MappingProxyType`s. `SCHEMA` is `ReadApi.get_schema()`:
NODES/EDGES columns, node and edge types, and per node type the columns R2G always fills and its natural key.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType
from typing import Any

from r2g.schema import EDGE_TYPES, EDGES, NODE_TYPES, NODES

DERIVED_FROM = "DERIVED_FROM"  # child → parent
SEMANTIC_CONTAINS = "SEMANTIC_CONTAINS"  # parent (rollup) → child
INTERNAL_EDGE_TYPES = frozenset({DERIVED_FROM, SEMANTIC_CONTAINS})
TABLE_NAME = "nodes"
LIVE_STATUS = ("active", "open")  # the statuses of a live (not archived) node


@dataclass(frozen=True)
class NodeView:
    """One node. `fields` holds every other NODES column except tenant (lists as tuples)."""

    id: str
    type: str
    level: str  # 'episodic' | 'semantic'
    title: str
    time: datetime | None  # timeline position: time_start, else first_seen
    archived: bool
    parent_ids: tuple[str, ...]  # nodes this one is DERIVED_FROM
    children_ids: tuple[str, ...]  # nodes DERIVED_FROM this one, archived ones included
    fields: Mapping[str, Any]


@dataclass(frozen=True)
class EdgeView:
    """One stored edge as written by R2G (dst may be a RawChunk id for DERIVED_FROM)."""

    id: str
    src: str
    dst: str
    type: str
    weight: float | None  # R2G-4 weight of the stored edge, not a projection count
    confidence: float | None


@dataclass(frozen=True)
class NeighborView:
    node: NodeView
    edge_type: str
    direction: str  # 'out': source -> node; 'in': node -> source


@dataclass(frozen=True)
class RelationCount:
    relation: str
    direction: str
    count: int


@dataclass(frozen=True)
class SampleNeighbor:
    id: str
    type: str
    title: str
    to_time: datetime | None


@dataclass(frozen=True)
class EdgeSummary:
    degree: int
    relations: tuple[RelationCount, ...]
    sample_neighbors: tuple[SampleNeighbor, ...]


@dataclass(frozen=True)
class NodeBrief:
    id: str
    level: str
    type: str
    table_name: str
    title: str
    summary: str
    key_values: Mapping[str, Any]  # the type's primary-key columns that have a value
    row_values: Mapping[str, Any]  # every other column with a value (raw_refs left out: cite via recall)
    time: datetime | None
    child_count: int  # active children
    edge_summary: EdgeSummary | None


@dataclass(frozen=True)
class RankedView:
    node: NodeView
    score: float  # matched query tokens / query tokens (porter stems)
    bm25: float
    score_mode: str = "keyword"


@dataclass(frozen=True)
class CompactionGroup:
    key: str  # the conversation or Concept id the children share
    depth: int  # rollup depth of the children (0: Episodes)
    child_ids: tuple[str, ...]
    fan_in: int


@dataclass(frozen=True)
class NodeTypeSpec:
    type: str
    table_name: str
    table_columns: tuple[str, ...]
    required_columns: tuple[str, ...]
    primary_key_columns: tuple[str, ...]
    level: str
    compression_mode: str  # 'hierarchical' | 'none'


@dataclass(frozen=True)
class SchemaView:
    node_columns: tuple[str, ...]
    edge_columns: tuple[str, ...]
    node_types: tuple[NodeTypeSpec, ...]
    edge_types: tuple[str, ...]
    internal_edge_types: tuple[str, ...]


_COMMON_REQUIRED = ("id", "tenant", "type", "title", "status", "provenance")
# type -> (columns R2G always fills beyond the common ones, natural-key columns its id is hashed from;
# aliases too where a type keeps them, so that names can be matched). Source: r2g/extract.py.
_TYPE_COLUMNS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "Episode": (("text", "raw_refs", "conv_id", "msg_id"), ("conv_id", "msg_id")),
    "Entity": (("subtype", "aliases", "mentions"), ("subtype", "title", "aliases")),
    "Fact": (
        ("text", "raw_refs", "predicate_norm", "negation", "conv_id", "msg_id"),
        ("predicate_norm", "negation", "modality", "time_start"),
    ),
    "Preference": (("subtype", "text", "raw_refs", "negation"), ("speaker", "subtype", "text")),
    "Task": (("subtype", "text", "raw_refs"), ("speaker", "subtype", "text", "time_start")),
    "Concept": (("subtype", "keywords"), ("title", "aliases")),
    "Meta": ((), ("subtype", "title")),
}
_HIERARCHICAL = frozenset({"Episode"})

SCHEMA = SchemaView(
    node_columns=tuple(NODES.names),
    edge_columns=tuple(EDGES.names),
    node_types=tuple(
        NodeTypeSpec(
            type=t,
            table_name=TABLE_NAME,
            table_columns=tuple(NODES.names),
            required_columns=_COMMON_REQUIRED + _TYPE_COLUMNS[t][0],
            primary_key_columns=_TYPE_COLUMNS[t][1],
            level="episodic" if t == "Episode" else "semantic",
            compression_mode="hierarchical" if t in _HIERARCHICAL else "none",
        )
        for t in NODE_TYPES
    ),
    edge_types=tuple(EDGE_TYPES),
    internal_edge_types=tuple(sorted(INTERNAL_EDGE_TYPES)),
)


# ---------------------------------------------------------------- a NodeView from a row of read_api's view query

VIEW_COLUMNS = tuple(c for c in NODES.names if c != "tenant")
_TOP_LEVEL = frozenset({"id", "type", "title"})


def freeze(value: Any) -> Any:
    """A deep read-only copy: mappings become MappingProxyType, lists tuples."""
    if isinstance(value, Mapping):
        return MappingProxyType({k: freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    return value


def node_view(row: tuple) -> NodeView:
    values = dict(zip(VIEW_COLUMNS, row))
    t, level, parents, children = row[len(VIEW_COLUMNS) :]
    status = values["status"]
    return NodeView(
        id=values["id"],
        type=values["type"],
        level=level,
        title=values["title"] or "",
        time=t,
        archived=status is not None and status not in LIVE_STATUS,
        parent_ids=tuple(parents or ()),
        children_ids=tuple(children or ()),
        fields=freeze({k: v for k, v in values.items() if k not in _TOP_LEVEL}),
    )


def timeline_key(view: NodeView) -> tuple:
    return (view.time is None, view.time or datetime.min, view.id)


def recency_order(views: Iterable[NodeView]) -> list[NodeView]:
    """Newest first (ties by id), undated last."""
    by_id = sorted(views, key=lambda v: v.id)
    dated = sorted((v for v in by_id if v.time is not None), key=lambda v: v.time or datetime.min, reverse=True)
    return dated + [v for v in by_id if v.time is None]
