"""Cost counts: tasks, dummies, blocks and edges, per layer and for the whole program."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from pgraph import records
from pgraph.ir.instances import Instance
from pgraph.kinds import DECLARED, PROVENANCE_FLAGS, Provenance, TaskKind
from pgraph.plan.base import Fact, Pass, Plan, layer_share


@records.value
@attrs.frozen(repr=False, eq=False)
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
    for _, v, data in g.edges():
        if v not in chosen:
            continue
        w = chosen[v]
        prov = data.prov
        if prov & DECLARED:
            out["explicit_edges"] += w
            out["duplicate_dep_entries"] += w * max(data.entries - 1, 0)
        if Provenance.INFERRED in prov:
            out["inferred_edges"] += w
    return out


def _zero() -> dict[str, int]:
    return dict(tasks=0, dummy_tasks=0, blocks=0, explicit_edges=0, inferred_edges=0, duplicate_dep_entries=0)


class CountsPass(Pass):
    """Produces Counts: whole program, one layer-loop iteration, and per phase.

    The same figures as `count` with each selection, gathered in one walk over the instances
    and one over the edges (a --full prefill has 351,091 instances and 2.2 million edges).
    """

    name = "counts"
    produces = (Counts,)

    def run(self, plan: Plan) -> None:
        g = plan.graph
        has_layer = plan.representative_iteration() is not None
        phase_of = {d.name: d.phase for d in plan.program.dispatches}
        whole, layer = _zero(), _zero()
        by_phase: dict[str | None, dict[str, int]] = {}
        by_phase_layer: dict[str | None, dict[str, int]] = {}
        # per instance: (weight, phase row, layer weight or 0)
        chosen: dict[int, tuple[int, dict[str, int], dict[str, int] | None, int]] = {}
        for inst in g.instances:
            if inst.kind is TaskKind.ALLOC:
                continue
            ph = phase_of.get(inst.dispatch)
            row = by_phase.setdefault(ph, _zero())
            lrow = by_phase_layer.setdefault(ph, _zero()) if has_layer else None
            w = inst.weight
            lw = layer_share(plan, inst) if has_layer and plan.in_layer(inst) else 0
            chosen[inst.id] = (w, row, lrow, lw)
            for target, weight in ((whole, w), (row, w), (layer, lw), (lrow, lw)):
                if target is None or not weight:
                    continue
                if inst.kind is TaskKind.DUMMY:
                    target["dummy_tasks"] += weight
                else:
                    target["tasks"] += weight
                    target["blocks"] += weight * inst.blocks
        # per consumer: its declared edges, their duplicate entries and its inferred edges
        for v, preds in g.pred.items():
            got = chosen.get(v)
            if got is None or not preds:
                continue
            explicit = extra = inferred = 0
            for data in preds.values():
                declared, _, is_inferred = PROVENANCE_FLAGS[data.prov]
                if declared:
                    explicit += 1
                    if data.entries > 1:
                        extra += data.entries - 1
                if is_inferred:
                    inferred += 1
            w, row, lrow, lw = got
            for target, weight in ((whole, w), (row, w), (layer, lw), (lrow, lw)):
                if target is None or not weight:
                    continue
                target["explicit_edges"] += weight * explicit
                target["duplicate_dep_entries"] += weight * extra
                target["inferred_edges"] += weight * inferred
        lid = plan.layer_loop
        layers = plan.program.loops[lid].axis.size if lid is not None else 0
        phases = []
        names: list[str] = [*plan.program.phases]
        if any(d.phase is None for d in plan.program.dispatches):
            names.append("(none)")
        for name in names:
            key = None if name == "(none)" else name
            entry: dict[str, Any] = {"phase": name, **by_phase.get(key, _zero())}
            if has_layer:
                entry["per_layer"] = by_phase_layer.get(key, _zero())
            phases.append(entry)
        plan.put(Counts(whole, layer if has_layer else None, layers, phases))
