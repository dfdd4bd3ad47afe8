"""How much work an expansion will do, counted from the Program before expanding anything.

The unit is what the expander (`pgraph.expand.expander`) does per step and counts in `ExpansionState.work`:
one per block of a task (its index environment), one per region evaluated (each argument
region and each item of each access, per block), and one per dep tile scanned (each tile a
dep of each expanded instance selects, `edges.dep_producers`). The estimate counts the tiles
each dep really selects, per task and per expanded iteration, not the tile space of its
target: a dep selection that uses task indices or loop variables is evaluated over the
values of the variables it uses (cheap: no region, no instance), and only a selection
whose variables span more than DEP_ENUMERATION_BUDGET points is bounded by its target's tile
space. tests/unit/test_scale.py checks `expansion_work` against `ExpansionState.work`.
"""

from __future__ import annotations

import itertools
import math

from pgraph.expr import EvalError, free_vars
from pgraph.ir import program as ir
from pgraph.ir.queries import Evaluator, Window
from pgraph.kinds import DepKind, TaskKind

#: Most work one expansion may take, in the units above. The 40-layer 351,050-task prefill
#: spec fully expanded needs 4,009,716; expanding runs at roughly 2 to 3 us and
#: 0.3 KB per unit, so 12 million is about half a minute and 4 GB at most. A runaway bound
#: (10**6 tasks where 85 were meant) is far beyond it, and PG031 stops it first.
MAX_EXPANSION_WORK = 6_000_000

#: Tasks a program may submit fully expanded (every loop iteration): the critical path and the
#: counts walk the window once per iteration it stands for, so a loop of 2**32 layers would run
#: for hours although its window is two layers. 50 million is 140 times the largest real graph
#: (the 351,050-task prefill, docs/upstream.md §10.2).
MAX_PROGRAM_TASKS = 50_000_000

#: Points a dep selection is evaluated at before its target's tile space bounds it instead.
DEP_ENUMERATION_BUDGET = 100_000


def instance_iterations(window: Window, d: ir.Dispatch) -> int:
    """Expanded iterations of the loops around `d` (the product of their window sizes)."""
    return math.prod(len(window.iterations[lid]) for lid in d.loops)


def item_count(acc: ir.Access) -> int:
    """Regions one access evaluates per block: the product of its item-loop ranges."""
    return math.prod(max(it.hi - it.lo, 0) for it in acc.items)


def block_work(d: ir.Dispatch) -> int:
    """Work per block: its environment, each argument region, each access item."""
    return 1 + sum(1 for a in d.args if a.region is not None) + sum(item_count(acc) for acc in d.accesses)


def instances(window: Window, d: ir.Dispatch) -> int:
    """How many instances expanding `d` submits (an empty SPMD grid submits none)."""
    if d.kind is TaskKind.SPMD and d.block_count == 0:
        return 0
    return instance_iterations(window, d) * d.task_count


def last_iteration_work(p: ir.Program, window: Window, d: ir.Dispatch) -> int:
    """The bounds check of the skipped last iteration of each windowed loop around `d`
    (`tasks.check_last_iterations`: its accesses only, the other loops at their first iteration)."""
    if d.kind is TaskKind.DUMMY or not all(window.iterations[lid] for lid in d.loops):
        return 0
    checked = sum(1 for lid in d.loops if window.iterations[lid][-1][0] != p.loops[lid].axis.hi - 1)
    items = sum(item_count(acc) for acc in d.accesses)
    return checked * d.task_count * d.block_count * items


def _tile_space(p: ir.Program, name: str) -> int:
    ts = p.tilesets.get(name)
    return math.prod(a.size for a in ts.axes) if ts is not None else 0


def carry_dep_work(p: ir.Program, window: Window, d: ir.Dispatch, dep: ir.DepRef) -> int:
    """Tiles a carry dep scans over every instance: INIT's tiles in the loop's first iteration,
    NEXT's in later ones and after the loop (INIT's when the loop runs no iteration)."""
    carry = p.carries[dep.target]
    lp = p.carry_loop(dep.target)
    init, nxt = _tile_space(p, carry.init), _tile_space(p, carry.next)
    if lp.id not in d.loops:
        per = init if window.last(lp.id) is None else nxt
        return instances(window, d) * per
    others = math.prod(len(window.iterations[lid]) for lid in d.loops if lid != lp.id) * d.task_count
    if d.kind is TaskKind.SPMD and d.block_count == 0:
        return 0
    its = window.iterations[lp.id]
    if not its:
        return 0
    first = init if its[0][0] == lp.axis.lo else nxt
    return others * (first + (len(its) - 1) * nxt)   # only the first value can be the loop's lo


def tile_dep_work(p: ir.Program, window: Window, d: ir.Dispatch, dep: ir.DepRef, ev: Evaluator) -> int:
    """Tiles a tile dep selects over every instance of `d` (see the module docstring)."""
    ts = p.tilesets.get(dep.target)
    n = instances(window, d)
    if ts is None or n == 0:
        return 0
    names: set[str] = set()
    for sel in dep.sels or ():
        for e in (sel.a, sel.b):
            if e is not None:
                names |= free_vars(e)
    loop_axes = {p.loops[lid].axis.var: lid for lid in d.loops}
    task_axes = {a.var: a for a in d.task_axes}
    if names - set(loop_axes) - set(task_axes):
        return n * _tile_space(p, dep.target)  # a name the lowering did not resolve: bound it
    used_loops = [lid for var, lid in loop_axes.items() if var in names]
    used_axes = [a for var, a in task_axes.items() if var in names]
    points = math.prod(len(window.iterations[lid]) for lid in used_loops) * math.prod(a.size for a in used_axes)
    if points > DEP_ENUMERATION_BUDGET:
        return n * _tile_space(p, dep.target)
    rest = n // points if points else 0
    total = 0
    loop_values = [[v for v, _ in window.iterations[lid]] for lid in used_loops]
    for lv in itertools.product(*loop_values):
        env = {p.loops[lid].axis.var: v for lid, v in zip(used_loops, lv)}
        for tv in itertools.product(*(range(a.lo, a.hi) for a in used_axes)):
            env.update({a.var: v for a, v in zip(used_axes, tv)})
            total += selected_tiles(ev, dep, ts, env)
    return total * rest


def selected_tiles(ev: Evaluator, dep: ir.DepRef, ts: ir.TileSet, env: dict[str, int]) -> int:
    """Tiles `dep` selects at `env`, as `edges.dep_producers` enumerates them (0 when a range
    leaves the tile space or an expression fails: the expansion records an issue instead)."""
    try:
        ranges = ev.selection(dep.sels, ts.axes, env)
    except EvalError:
        return 0
    sizes = [_range_size(r) for r in ranges]   # len() of a range past sys.maxsize raises OverflowError
    for r, n, axis in zip(ranges, sizes, ts.axes):
        if n and (r.start < axis.lo or r.stop > axis.hi):
            return 0
    return math.prod(sizes)


def _range_size(r: range) -> int:
    """len(r) for any size (ranges here step by +1 or -1)."""
    if r.step > 0:
        return max(0, (r.stop - r.start + r.step - 1) // r.step)
    return max(0, (r.start - r.stop - r.step - 1) // -r.step)


def dispatch_work(p: ir.Program, window: Window, d: ir.Dispatch, ev: Evaluator | None = None) -> int:
    """The work expanding `d` takes under `window`: blocks, regions and dep tiles."""
    ev = ev or Evaluator()
    n = instances(window, d)
    work = 0 if d.kind is TaskKind.DUMMY else n * d.block_count * block_work(d)
    work += last_iteration_work(p, window, d)
    for dep in d.deps:
        if dep.kind is DepKind.CARRY:
            work += carry_dep_work(p, window, d, dep)
        else:
            work += tile_dep_work(p, window, d, dep, ev)
    return work


def expansion_work(p: ir.Program, window: Window) -> dict[str, int]:
    """dispatch_work of every dispatch, by name."""
    ev = Evaluator()
    return {d.name: dispatch_work(p, window, d, ev) for d in p.dispatches}


def program_tasks(p: ir.Program) -> dict[str, int]:
    """Per dispatch, the instances it submits with every loop fully expanded (no window)."""
    out: dict[str, int] = {}
    for d in p.dispatches:
        if d.kind is TaskKind.SPMD and d.block_count == 0:
            out[d.name] = 0
            continue
        out[d.name] = math.prod(p.loops[lid].axis.size for lid in d.loops) * d.task_count
    return out
