"""Agent write-ops (SPEC §9): JSONL op batches from external agents, validated and applied to nodes/edges.

An ops file is JSONL, one op per line. Two shapes are read (both may mix in one file):

  seed 000 tool calls (App. A)  {"tool": "create_memory", "arguments": {...}}
                                also "name" for "tool", "args" for "arguments", arguments as a JSON
                                string, and the chat-completions form {"type": "function",
                                "function": {"name": …, "arguments": "<json>"}}
  seed 001 ops (Write API)      {"op": "create", "type": "Fact", "fields": {...}, "ref": "c1"}  (flat, as
                                applyExtractionBatch takes them) or {"op": "create", "args": {...}}

Op names: create_memory, link_memories (seed 000); create, edit, delete, link_upsert, link_delete,
compact (seed 001). Envelope keys besides the op name and its arguments: `ref` (a batch-local name the
op defines: create_memory, create and compact only), `ts` (ISO-8601 time of the agent's call; anchors
relative times such as 今天, else `at`), `tenant` (must equal the inbox tenant: the host binds it, the
agent never picks it), `id` / `call_id` / `type: "function"` of a tool call (ignored).

Naming a node where an op expects one (nodeId, sourceNodeId, targetNodeId, childIds[], and
link_memories' source/target):
  "n_…" or {"id": "n_…"}   a node id of the op's tenant
  "$m1" or {"ref": "m1"}   the node an earlier op of the same batch defined with "ref": "m1"
                           (seed 001's sourceRef / targetRef take the bare name "m1")
  free text                link_memories only (seed 000 `*_memory_description`): first the nodes this
                           batch created (best share of the text's character bigrams ≥ match_threshold,
                           latest op on ties), then `resolve(tenant, text)` (the pipeline wires recall)

Applying (`apply_ops`): ops run in order; each is all-or-nothing and an error never aborts the
batch — the op becomes an OPS_REJECTED row with a coded reason (seed 001's BAD_ARGS,
CHILD_NOT_FOUND, CHILD_HAS_PARENT; NOT_FOUND for a node that is missing, archived, forgotten or
another tenant's — which one is never revealed; OP_FAILED when `resolve` raises). New node ids
hash (tenant, batch_id, op_index) and edge ids (tenant, src, type, dst), so applying a batch again
creates nothing new: nodes, edges and cold edges come out identical (pass the cold edges back in),
and so do the applied and rejected rows — except for an op writing to a node that a later op of the
same batch archived, which the re-run rejects NOT_FOUND (the graph is still unchanged). To make a
re-run see what the first run saw, a node a create op of the batch makes is invisible until that op
has run, and a create op whose node exists already is replayed: reported as applied, writing nothing
(not even an edge deleted since), its targets allowed to be archived by now.

Nothing is dropped: `delete` archives (status "archived"); `link_delete` moves the edge to the
COLD_EDGES table (reason names the op) rather than deleting it. Seed 000 §12's "staged" memories
are plain active nodes with tier/category null (consolidation fills them), so recall finds them at
once and the read API does not treat them as archived.

  schema.py   error codes, op names, OpsConfig, the arguments' JSON Schemas (check_args, edge_type_for)
  parse.py    an ops file's lines → Ops and parse-time rejects (parse_ops, read_batch, looks_like_ops)
  refs.py     naming a node: id, batch ref or free-text description
  graph.py    the op tenants' nodes and edges, indexed, and what one op would write
  apply.py    apply_ops: one method per op, all-or-nothing, OPS_APPLIED / OPS_REJECTED rows
"""

from __future__ import annotations

from jobs.ops.apply import OpsResult, apply_ops
from jobs.ops.parse import Op, OpsBatch, batch_id_for, looks_like_ops, parse_line, parse_ops, read_batch
from jobs.ops.schema import (
    ARG_SCHEMAS,
    BAD_ARGS,
    CHILD_HAS_PARENT,
    CHILD_NOT_FOUND,
    CLEARABLE,
    CODES,
    CREATE_MEMORY,
    DEFAULT_CONFIG,
    DIRECTIONS,
    INVERSE,
    LINK_MEMORIES,
    LINK_RELATIONS,
    MEMORY_TYPES,
    NODE_FIELDS,
    NODE_REF,
    NOT_FOUND,
    OP_FAILED,
    OP_NAMES,
    REF_NAME,
    RELATION_ALIASES,
    SEED000_OPS,
    SEED001_OPS,
    SEED001_SCHEMAS,
    SYMMETRIC,
    OpsConfig,
    check_args,
    edge_type_for,
    parse_when,
    provenance,
)

__all__ = [
    "Op",
    "OpsBatch",
    "read_batch",
    "OpsResult",
    "OpsConfig",
    "DEFAULT_CONFIG",
    "parse_ops",
    "parse_line",
    "apply_ops",
    "looks_like_ops",
    "batch_id_for",
    "check_args",
    "edge_type_for",
    "provenance",
    "CREATE_MEMORY",
    "LINK_MEMORIES",
    "SEED001_SCHEMAS",
    "ARG_SCHEMAS",
    "CODES",
    "BAD_ARGS",
    "NOT_FOUND",
    "CHILD_NOT_FOUND",
    "CHILD_HAS_PARENT",
    "OP_FAILED",
    # the vocabulary of the arguments, public as before the split
    "OP_NAMES",
    "SEED000_OPS",
    "SEED001_OPS",
    "DIRECTIONS",
    "MEMORY_TYPES",
    "LINK_RELATIONS",
    "RELATION_ALIASES",
    "INVERSE",
    "SYMMETRIC",
    "NODE_FIELDS",
    "CLEARABLE",
    "NODE_REF",
    "REF_NAME",
    "parse_when",
]
