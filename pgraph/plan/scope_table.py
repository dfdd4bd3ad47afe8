"""The scope table: depth, ring (min(depth, 3)), mode, tasks and heap bytes per scope."""

from __future__ import annotations

from typing import Any

import attrs

from pgraph import records
from pgraph.ir.limits import heap_bytes
from pgraph.kinds import Storage
from pgraph.plan.base import Fact, Pass, Plan


@records.value
@attrs.frozen(repr=False, eq=False)
class ScopeTable(Fact):
    """One row per scope: id, kind, mode, depth, ring, source line, dispatches, allocations, heap bytes."""

    rows: list[dict[str, Any]]


class ScopeTablePass(Pass):
    """Produces ScopeTable, with per-instance allocation bytes rounded as the target packs outputs."""

    name = "scope-table"
    produces = (ScopeTable,)

    def run(self, plan: Plan) -> None:
        p = plan.program
        align = p.target["output_align"]
        rows = []
        for s in p.scopes:
            allocs = [t for t in p.tensors.values() if t.storage is Storage.ALLOC and t.scope == s.id]
            rows.append({
                "scope": s.id,
                "kind": str(s.kind),
                "mode": str(s.mode),
                "depth": s.depth,
                "ring": s.ring,
                "line": s.span.line,
                "dispatches": sum(1 for d in p.dispatches if d.scope == s.id),
                "allocations": len(allocs),
                "heap_bytes": sum(heap_bytes(t.nbytes, align) for t in allocs),
            })
        plan.put(ScopeTable(rows))
