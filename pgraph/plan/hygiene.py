"""Graph hygiene notes: duplicate dep entries folded into one edge."""

from __future__ import annotations

from collections import defaultdict

from pgraph.diagnostics import Note
from pgraph.plan.base import Pass, Plan


class DuplicateDepsPass(Pass):
    """PG016: a dep list whose entries name one producer task more than once (folded)."""

    name = "duplicate-deps"

    def run(self, plan: Plan) -> None:
        g = plan.graph
        per_dispatch: dict[str, int] = defaultdict(int)
        spans: dict[str, object] = {}
        for u, v, data in g.graph.edges(data=True):
            extra = data["entries"] - 1
            inst = g.instances[v]
            if extra <= 0 or not (plan.in_layer(inst) or plan.layer_loop is None or not inst.iters):
                continue
            per_dispatch[inst.dispatch] += extra
            spans.setdefault(inst.dispatch, data.get("span"))
        total = sum(per_dispatch.values())
        for name in sorted(per_dispatch, key=lambda n: plan.program.dispatch(n).order):
            d = plan.program.dispatch(name)
            scope = "per layer" if d.loops else "in the entry"
            plan.bag.add(
                "PG016",
                f"{per_dispatch[name]} duplicate dep entr{'y' if per_dispatch[name] == 1 else 'ies'} of '{name}' "
                f"fold into existing edges ({scope})",
                spans[name],  # type: ignore[arg-type]
                [Note(f"{total} duplicate entries fold away per layer in this program")] if d.loops else [],
                hint="harmless: several selected tiles map to one task (e.g. every tile of an SPMD wave)",
            )
        plan.facts["duplicate_dep_entries_per_layer"] = total
