"""PG119: a sync_start grid wider than the cores its shape can have free, given what may run beside it.

A sync_start cohort launches all-or-nothing on idle cores (simpler: Tier 0; a global drain
holds other work off the cores until enough are idle). Two cases are decidable without timing:

- error: the grid has more blocks than units of its shape the target can ever have idle at
  once. A MIX block takes a whole cluster: its AIC and both AIVs, so MIX has
  min(clusters, aic, aiv // 2) units (PG113 checks the block count against `clusters` and
  `aiv` only). The grid never starts: the simulator reports the stall, the runtime code 7.
- warning (forward progress): the grid needs every unit of its shape, and a task beside it
  (no ordering path either way, on cores its shape uses) is an early-dispatch candidate with a
  producer not ordered before the grid: it can be staged on one of the grid's units as soon as
  that producer is placed, and it then holds the unit, doing nothing, until the producer ends.
  The grid cannot start for as long as its producer runs, however long that is, and the drain
  keeps every other task off the cores meanwhile. The planner's critical path charges the grid
  that wait (the `SyncStartHolders` fact: the holder's producer's cost plus its own), and
  `pgraph sim` books it as the grid's cohort wait, naming the holders.
- note: the grid needs every unit of its shape, and tasks that may be running beside it exist,
  none of which can be staged there: it starts only once none of them holds a core, which is
  ordinary core contention (each holds its unit only for its own kernel).

The runtime's early-dispatch rule (a consumer is staged only once every producer is fully
published, simpler #1326) means no task staged early can hold cores while waiting for the
grid itself (no deadlock), so those are the decidable cases; how long the grid waits is timing
(`pgraph sim`: its cohort wait).
"""

from __future__ import annotations

import attrs

from pgraph import records
from pgraph.diagnostics import Edit, Fix, Severity
from pgraph.ir.program import Dispatch
from pgraph.kinds import WAIT, Core, TaskKind
from pgraph.plan.base import Fact, Pass, Plan
from pgraph.plan.early_dispatch import EarlyState, EarlyStatus
from pgraph.plan.reach import Reach

#: core kinds each shape occupies
USES = {Core.AIC: {Core.AIC}, Core.AIV: {Core.AIV}, Core.MIX: {Core.AIC, Core.AIV}}


def shape_units(target: dict[str, int], core: Core) -> int:
    """Units of a kernel's shape the target has: AIC cores, AIV cores, or whole clusters for MIX."""
    match core:
        case Core.AIC:
            return target["aic"]
        case Core.AIV:
            return target["aiv"]
        case Core.MIX:
            return min(target["clusters"], target["aic"], target["aiv"] // 2)


def _fewer(d: Dispatch, units: int) -> Fix | None:
    """The fix 'use at most `units` blocks' for a grid over one block axis: its upper bound lowered."""
    if len(d.block_axes) != 1:
        return None
    a = d.block_axes[0]
    return Fix((Edit(a.span, f"{a.var} in {a.lo}..{a.lo + units}"),))


@records.value
@attrs.frozen(repr=False, eq=False)
class SyncStartHolders(Fact):
    """Per full-width sync_start grid instance id: the tasks that can be staged early on one of
    its units and hold it while a producer runs, each as (holder id, the ids of its producers not
    ordered before the grid). Instances with no holder are absent."""

    holders: dict[int, tuple[tuple[int, tuple[int, ...]], ...]]


def staged_holders(plan: Plan, grid: int, core_of: dict[int, Core], candidates: list[int]
                   ) -> tuple[tuple[int, tuple[int, ...]], ...]:
    """The early candidates beside `grid` (no ordering path either way, on cores it uses) with a
    WAIT producer that is not ordered before it: (holder, those producers), in id order."""
    reach = plan.get(Reach)
    pred = plan.graph.pred
    uses = USES[core_of[grid]]
    out = []
    for u in candidates:
        if u == grid or not USES[core_of[u]] & uses or reach.ordered(u, grid):
            continue
        prods = tuple(sorted(pr for pr, data in pred[u].items()
                             if data.prov & WAIT and pr != grid and not reach.before(pr, grid)))
        if prods:
            out.append((u, prods))
    return tuple(out)


class SyncStartStarvedPass(Pass):
    """PG119 (error, warning or note, see the module docstring); the SyncStartHolders fact."""

    name = "sync-start-starved"
    requires = (Reach, EarlyStatus)
    produces = (SyncStartHolders,)

    def run(self, plan: Plan) -> None:
        p, g = plan.program, plan.graph
        target = p.target
        reported: set[str] = set()
        reach = plan.get(Reach)
        status = plan.get(EarlyStatus).status
        core_of = {}
        for inst in g.instances:
            if inst.kind in (TaskKind.ALLOC, TaskKind.DUMMY):
                continue
            d = p.dispatch(inst.dispatch)
            core_of[inst.id] = p.kernels[d.kernel].core if d.kernel else Core.AIV
        candidates = [u for u in core_of if status.get(u, (None,))[0] is EarlyState.CANDIDATE]
        holders: dict[int, tuple[tuple[int, tuple[int, ...]], ...]] = {}
        for inst in g.instances:
            if inst.id not in core_of:
                continue
            d = p.dispatch(inst.dispatch)
            if d.sync_start and inst.blocks > 1 and inst.blocks == shape_units(target, core_of[inst.id]):
                found = staged_holders(plan, inst.id, core_of, candidates)
                if found:
                    holders[inst.id] = found
        plan.put(SyncStartHolders(holders))
        for inst in g.instances:
            if inst.id not in core_of or inst.dispatch in reported:
                continue
            d = p.dispatch(inst.dispatch)
            if not d.sync_start or inst.blocks <= 1:
                continue
            core = core_of[inst.id]
            units = shape_units(target, core)
            limit = target["aiv"] if core is Core.AIV else target["clusters"]
            if units < inst.blocks <= limit:
                reported.add(inst.dispatch)
                plan.bag.add("PG119", f"sync_start grid '{d.name}' has {inst.blocks} MIX blocks, but a MIX block takes "
                             f"a whole cluster (1 AIC + 2 AIV) and the target has only {units} such clusters "
                             f"({target['clusters']} clusters, {target['aic']} AIC, {target['aiv']} AIV): it can "
                             "never start", d.span, severity=Severity.ERROR,
                             hint=f"use at most {units} blocks, or a target with {inst.blocks} full clusters",
                             fix=_fewer(d, units))
                continue
            if inst.blocks != units:
                continue
            uses = USES[core]
            related = reach.related(inst.id)
            beside = [u for u, c in core_of.items() if u != inst.id and USES[c] & uses and u not in related]
            if not beside:
                continue
            reported.add(inst.dispatch)
            what = "clusters" if core is Core.MIX else f"{core.upper()} cores"
            held = next((holders[i.id] for i in g.instances if i.dispatch == inst.dispatch and i.id in holders), None)
            if held is not None:
                first, prods = held[0]
                more = f" (and {len(held) - 1} more)" if len(held) > 1 else ""
                plan.bag.add("PG119", f"sync_start grid '{inst.label}' needs all {units} {what} at once, and "
                             f"'{g.instances[first].label}'{more} may be staged early on one of them while its producer "
                             f"'{g.instances[prods[0]].label}' runs: the grid cannot start until that producer and "
                             "the staged task have finished, and the drain keeps other work off the cores meanwhile",
                             d.span, severity=Severity.WARNING,
                             hint=f"order '{g.instances[first].dispatch}' after the grid (a dep on "
                                  f"'{d.name}'), or its producer '{g.instances[prods[0]].dispatch}' before the grid; "
                                  "`pgraph sim` shows how long the grid waits (its cohort wait)")
                continue
            names = ", ".join(g.instances[u].label for u in beside[:4]) + (", ..." if len(beside) > 4 else "")
            plan.bag.add("PG119", f"sync_start grid '{inst.label}' needs all {units} {what} at once, and "
                         f"{len(beside)} task(s) may be running beside it ({names}): it starts only once none of "
                         "them holds a core, and the drain keeps other work off the cores until then", d.span,
                         severity=Severity.NOTE,
                         hint="order those tasks before or after the grid (a dep), or leave a unit free (fewer blocks)"
                              "; `pgraph sim` shows how long the grid waits")
