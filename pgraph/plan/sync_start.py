"""PG119: a sync_start grid wider than the cores its shape can have free, given what may run beside it.

A sync_start cohort launches all-or-nothing on idle cores (simpler: Tier 0; a global drain
holds other work off the cores until enough are idle). Two cases are decidable without timing:

- error: the grid has more blocks than units of its shape the target can ever have idle at
  once. A MIX block takes a whole cluster: its AIC and both AIVs, so MIX has
  min(clusters, aic, aiv // 2) units (PG113 checks the block count against `clusters` and
  `aiv` only). The grid never starts: the simulator reports the stall, the runtime code 7.
- note: the grid needs every unit of its shape, and tasks that may be running beside it (no
  ordering path either way, on cores its shape uses) exist. It can start only once none of
  them holds a core, and while it waits the drain keeps every other task off those cores.

The runtime's early-dispatch rule (a consumer is staged only once every producer is fully
published, simpler #1326) means no task staged early can hold cores while waiting for the
grid itself, so those two cases are the decidable ones; how long the grid waits is timing
(`pgraph sim`: its core and scheduler waits).
"""

from __future__ import annotations

from pgraph.diagnostics import Edit, Fix, Severity
from pgraph.ir.program import Dispatch
from pgraph.kinds import Core, TaskKind
from pgraph.plan.base import Pass, Plan
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


class SyncStartStarvedPass(Pass):
    """PG119 (error or note, see the module docstring)."""

    name = "sync-start-starved"
    requires = (Reach,)

    def run(self, plan: Plan) -> None:
        p, g = plan.program, plan.graph
        target = p.target
        reported: set[str] = set()
        reach = plan.get(Reach)
        core_of = {}
        for inst in g.instances:
            if inst.kind in (TaskKind.ALLOC, TaskKind.DUMMY):
                continue
            d = p.dispatch(inst.dispatch)
            core_of[inst.id] = p.kernels[d.kernel].core if d.kernel else Core.AIV
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
            names = ", ".join(g.instances[u].label for u in beside[:4]) + (", ..." if len(beside) > 4 else "")
            what = "clusters" if core is Core.MIX else f"{core.upper()} cores"
            plan.bag.add("PG119", f"sync_start grid '{inst.label}' needs all {units} {what} at once, and "
                         f"{len(beside)} task(s) may be running beside it ({names}): it starts only once none of "
                         "them holds a core, and the drain keeps other work off the cores until then", d.span,
                         severity=Severity.NOTE,
                         hint="order those tasks before or after the grid (a dep), or leave a unit free (fewer blocks)"
                              "; `pgraph sim` shows how long the grid waits")
