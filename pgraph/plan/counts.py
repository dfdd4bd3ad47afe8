"""Cost counts: tasks, dummies, blocks and edges, per layer and for the whole program."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from pgraph.ir.instances import Instance
from pgraph.kinds import DECLARED, Provenance, TaskKind
from pgraph.plan.base import Fact, Pass, Plan, layer_share


@attrs.frozen
class Counts(Fact):
    """Task, dummy, block and edge counts: whole program, one layer (None without a layer loop),
    the layer count, and one row per phase (with its per-layer counts)."""

    summary: dict[str, int]
    per_layer: dict[str, int] | None
    layers: int
    phases: list[dict[str, Any]]


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
        if inst.kind is TaskKind.ALLOC or not member(inst):
            continue
        w = inst.weight if weighted else layer_share(plan, inst)
        chosen[inst.id] = w
        if inst.kind is TaskKind.DUMMY:
            out["dummy_tasks"] += w
        else:
            out["tasks"] += w
            out["blocks"] += w * inst.blocks
    for _, v, data in g.graph.edges(data=True):
        if v not in chosen:
            continue
        w = chosen[v]
        prov = data["prov"]
        if prov & DECLARED:
            out["explicit_edges"] += w
            out["duplicate_dep_entries"] += w * max(data["entries"] - 1, 0)
        if Provenance.INFERRED in prov:
            out["inferred_edges"] += w
    return out


class CountsPass(Pass):
    """Produces Counts: whole program, one layer-loop iteration, and per phase."""

    name = "counts"
    produces = (Counts,)

    def run(self, plan: Plan) -> None:
        summary = count(plan, lambda inst: True, weighted=True)
        per_layer = count(plan, plan.in_layer, weighted=False) if plan.representative_iteration() is not None else None
        lid = plan.layer_loop
        layers = plan.program.loops[lid].axis.size if lid is not None else 0
        phases = []
        names = [*plan.program.phases]
        if any(d.phase is None for d in plan.program.dispatches):
            names.append("(none)")
        phase_of = {d.name: d.phase for d in plan.program.dispatches}
        for name in names:
            key = None if name == "(none)" else name

            def member(inst: Instance, key: str | None = key) -> bool:
                return phase_of.get(inst.dispatch) == key

            row: dict[str, Any] = {"phase": name, **count(plan, member, weighted=True)}
            if per_layer is not None:

                def in_phase_layer(inst: Instance, member: Callable[[Instance], bool] = member) -> bool:
                    return member(inst) and plan.in_layer(inst)

                row["per_layer"] = count(plan, in_phase_layer, weighted=False)
            phases.append(row)
        plan.put(Counts(summary, per_layer, layers, phases))
