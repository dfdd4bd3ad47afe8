"""The scope table: depth, ring (min(depth, 3)), mode, tasks and heap bytes per scope."""

from __future__ import annotations

from pgraph.plan.base import Pass, Plan
from pgraph.target import heap_bytes


class ScopeTablePass(Pass):
    """Records `scopes`: one row per scope with its ring and per-instance allocation bytes."""

    name = "scope-table"

    def run(self, plan: Plan) -> None:
        p = plan.program
        align = p.target["output_align"]
        rows = []
        for s in p.scopes:
            allocs = [t for t in p.tensors.values() if t.storage == "alloc" and t.scope == s.id]
            tasks = sum(1 for d in p.dispatches if d.scope == s.id)
            rows.append({
                "scope": s.id,
                "kind": s.kind,
                "mode": s.mode,
                "depth": s.depth,
                "ring": s.ring,
                "line": s.span.line,
                "dispatches": tasks,
                "allocations": len(allocs),
                "heap_bytes": sum(heap_bytes(t.nbytes, align) for t in allocs),
            })
        plan.facts["scopes"] = rows
