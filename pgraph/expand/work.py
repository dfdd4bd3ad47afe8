"""How much work an expansion will do, estimated from the Program before expanding anything."""

from __future__ import annotations

import math

from pgraph.ir import program as ir
from pgraph.ir.queries import Window
from pgraph.kinds import DepKind

#: Most work one expansion may take: region evaluations (expanded tasks x blocks x (1 + args +
#: access items)) plus the dep tiles each task scans. The HEAD decode spec needs 28,488 (window)
#: and 379,174 (full=True, 40 layers); a bound mutated to 10**6 would otherwise run for minutes
#: and take gigabytes (about 10 us and 10 KB per unit), so PG031 stops it first.
MAX_EXPANSION_WORK = 1_000_000


def iteration_count(p: ir.Program, window: Window, lid: int) -> int:
    """How many iterations of loop `lid` get evaluated (a window: 2, plus the last one's bounds check)."""
    its = window.iterations[lid]
    if len(its) < p.loops[lid].axis.size:
        return len(its) + 1
    return len(its)


def dispatch_work(p: ir.Program, window: Window, d: ir.Dispatch) -> int:
    """Upper estimate of the region evaluations and dep-tile scans that expanding `d` takes."""
    tasks = math.prod(iteration_count(p, window, lid) for lid in d.loops) * d.task_count
    items = sum(math.prod(max(it.hi - it.lo, 0) for it in acc.items) for acc in d.accesses)
    tiles = 0
    for dep in d.deps:
        carry = p.carries.get(dep.target) if dep.kind is DepKind.CARRY else None
        names = (carry.init, carry.next) if carry else (dep.target,)
        tiles += max((math.prod(a.size for a in p.tilesets[n].axes) for n in names if n in p.tilesets), default=1)
    return tasks * (max(d.block_count, 1) * (1 + len(d.args) + items) + tiles)


def expansion_work(p: ir.Program, window: Window) -> dict[str, int]:
    """dispatch_work of every dispatch, by name."""
    return {d.name: dispatch_work(p, window, d) for d in p.dispatches}
