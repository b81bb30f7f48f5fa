"""Naming nodes within a batch: a node id, a batch-local ref ("$m1", {"ref": "m1"}) or, for link_memories, a
free-text description (this batch's new memories by character bigrams, then the host's `resolve`)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from jobs.ops.graph import _LIVE, _Graph
from jobs.ops.parse import Op
from jobs.ops.schema import _REF_RE, NOT_FOUND, OP_FAILED, OpsConfig, _Reject
from r2g.ids import stable_id


def _bigrams(text: str) -> set[str]:
    s = "".join(ch for ch in text.lower() if ch.isalnum())
    return {s[i : i + 2] for i in range(len(s) - 1)} or ({s} if s else set())


class _Resolver:
    """The state of a batch being applied that naming a node needs, and the lookups over it."""

    def __init__(
        self,
        graph: _Graph,
        batch_id: str,
        at: datetime,
        resolve: Callable[[str, str], str | None] | None,
        config: OpsConfig,
    ) -> None:
        self.g, self.batch_id, self.at, self.resolve, self.cfg = graph, batch_id, at, resolve, config
        # (tenant, ref) → (node id, op index); the id is None when the op that defined the ref made no node (an edit)
        self.refs: dict[tuple[str, str], tuple[str | None, int]] = {}
        self.created: dict[str, list[tuple[int, str]]] = {}  # tenant → [(op index, node id)] in op order
        # The ids this batch's create ops will make. Until its op has run, such a node is invisible
        # (a re-run finds it in the input already), so a re-run sees what the first run saw.
        self.batch_nodes: set[tuple[str, str]] = set()
        self.made: set[tuple[str, str]] = set()
        # A create op whose node exists already ran before (a re-applied batch): it is replayed — its
        # targets may since have been archived, and it writes nothing, not even an edge deleted since.
        self.replaying = False

    # -- naming nodes --
    def node_id(self, op: Op) -> str:
        return stable_id("n", op.tenant, "jobs.ops", self.batch_id, str(op.index))

    def visible(self, tenant: str, nid: str) -> dict | None:
        """The node as this point of the batch sees it: a node of a later create op of the batch is not there yet."""
        if (tenant, nid) in self.batch_nodes and (tenant, nid) not in self.made:
            return None
        return self.g.node(tenant, nid)

    def visible_live(self, tenant: str, nid: str) -> dict | None:
        row = self.visible(tenant, nid)
        return row if row is not None and row.get("status") in _LIVE else None

    def by_ref(self, op: Op, name: str, code: str) -> str:
        hit = self.refs.get((op.tenant, name.removeprefix("$")))
        if hit is None:
            raise _Reject(code, f"ref {name!r} is not defined by an earlier op of this batch")
        if hit[0] is None:
            raise _Reject(code, f"ref {name!r} names no node: the op at line {hit[1]} made none")
        return hit[0]

    def target(
        self, op: Op, value: Any, code: str = NOT_FOUND, ref_key: bool = False, archived_ok: bool = False
    ) -> str:
        """The live (or, with `archived_ok`, archived) node of op's tenant that `value` names (id, "$ref",
        {"ref"}, {"id"}; a bare ref name when `ref_key`)."""
        if ref_key:
            nid = self.by_ref(op, value, code)
        elif isinstance(value, dict):
            nid = self.by_ref(op, value["ref"], code) if "ref" in value else value["id"]
        elif value.startswith("$") and _REF_RE.match(value[1:]):
            nid = self.by_ref(op, value, code)
        else:
            nid = value
        row = self.visible(op.tenant, nid)
        archived_ok = archived_ok or self.replaying
        if row is None or not (row.get("status") in _LIVE or (archived_ok and row.get("status") == "archived")):
            raise _Reject(code, f"no live node {nid!r} in this tenant")
        return nid

    def memory(self, op: Op, value: Any) -> tuple[str, str]:
        """link_memories' end: (node id, how it was found: ref | id | batch | recall)."""
        if isinstance(value, dict) or (value.startswith("$") and _REF_RE.match(value[1:])):
            return self.target(op, value), "ref" if isinstance(value, str) or "ref" in value else "id"
        if self.visible_live(op.tenant, value) is not None:
            return value, "id"
        want = _bigrams(value)
        best: tuple[float, int, str] | None = None
        for index, nid in self.created.get(op.tenant, ()):
            row = self.g.live(op.tenant, nid)
            if row is None or not want:
                continue
            share = len(want & _bigrams(f"{row['title'] or ''} {row['text'] or ''}")) / len(want)
            if share >= self.cfg.match_threshold and (best is None or (share, index) > best[:2]):
                best = (share, index, nid)
        if best is not None:
            return best[2], "batch"
        if self.resolve is not None:
            try:
                resolved = self.resolve(op.tenant, value)
            except Exception as e:  # the host's resolver: reported on the op, never aborting the batch
                raise _Reject(OP_FAILED, f"resolve failed: {type(e).__name__}: {e}") from None
            if resolved is not None and self.visible_live(op.tenant, resolved) is not None:
                return resolved, "recall"
        raise _Reject(NOT_FOUND, f"no memory of this tenant matches {value!r}")
