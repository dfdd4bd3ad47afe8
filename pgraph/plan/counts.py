"""Cost counts: tasks, dummies, blocks and edges, per layer and for the whole program."""

from __future__ import annotations

from collections.abc import Callable

from pgraph.ir.instances import Instance
from pgraph.plan.base import Pass, Plan, layer_share

EXPLICIT = {"explicit", "carried"}


def count(plan: Plan, member: Callable[[Instance], bool], weighted: bool) -> dict[str, int]:
    """Counts over the instances `member` selects (weights scale window-expanded loops).

    `weighted=False` counts one layer: an instance stands for itself times the weights of
    loops nested inside the layer loop.

    tasks: submitted compute tasks (an SPMD grid is 1; alloc tasks excluded);
    dummy_tasks; blocks (at 1, spmd(n) n, dummy 0, a MIX block counts 1);
    explicit_edges: distinct explicit/carried (producer, consumer) pairs whose consumer is
    selected; inferred_edges: distinct TensorMap-inferred pairs; duplicate_dep_entries:
    dep entries that folded into an existing pair.
    """
    g = plan.graph
    out = dict(tasks=0, dummy_tasks=0, blocks=0, explicit_edges=0, inferred_edges=0, duplicate_dep_entries=0)
    chosen: dict[int, int] = {}
    for inst in g.instances:
        if inst.kind == "alloc" or not member(inst):
            continue
        w = inst.weight if weighted else layer_share(plan, inst)
        chosen[inst.id] = w
        if inst.kind == "dummy":
            out["dummy_tasks"] += w
        else:
            out["tasks"] += w
            out["blocks"] += w * inst.blocks
    for _, v, data in g.graph.edges(data=True):
        if v not in chosen:
            continue
        w = chosen[v]
        prov = data["prov"]
        if prov & EXPLICIT:
            out["explicit_edges"] += w
            out["duplicate_dep_entries"] += w * max(data["entries"] - 1, 0)
        if "inferred" in prov:
            out["inferred_edges"] += w
    return out


class CountsPass(Pass):
    """Records `summary` (whole program), `per_layer` (one layer-loop iteration) and `phases`."""

    name = "counts"

    def run(self, plan: Plan) -> None:
        plan.facts["summary"] = count(plan, lambda inst: True, weighted=True)
        if plan.representative_iteration() is not None:
            plan.facts["per_layer"] = count(plan, plan.in_layer, weighted=False)
        else:
            plan.facts["per_layer"] = None
        lid = plan.layer_loop
        plan.facts["layers"] = plan.program.loops[lid].axis.size if lid is not None else 0
        phases = []
        names = [*plan.program.phases]
        if any(d.phase is None for d in plan.program.dispatches):
            names.append("(none)")
        per_layer = plan.facts["per_layer"] is not None
        for name in names:
            key = None if name == "(none)" else name

            def member(inst: Instance, key: str | None = key) -> bool:
                return plan.program.dispatch(inst.dispatch).phase == key

            row = {"phase": name, **count(plan, member, weighted=True)}
            if per_layer:

                def in_phase_layer(inst: Instance, member: Callable[[Instance], bool] = member) -> bool:
                    return member(inst) and plan.in_layer(inst)

                row["per_layer"] = count(plan, in_phase_layer, weighted=False)
            phases.append(row)
        plan.facts["phases"] = phases
