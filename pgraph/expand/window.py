"""Which loops have identical iterations, so that a two-iteration window expansion is exact.

A loop whose iterations provably produce the same edges is expanded for its first two
iterations only (`pgraph.expand.expander`): iteration `lo` stands for itself, `lo + 1` for
the remaining ones. Only deps and the regions the TensorMap compares decide edges, so a loop
is identical when neither depends on its variable, an auto-scope `out` argument does not
add a TensorMap entry per iteration on a buffer that outlives it, and the per-iteration
slabs of persistent written buffers are disjoint.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pgraph.expand.compiled import BoxFn, region_function, safe_values
from pgraph.expr import free_vars
from pgraph.fastpath import reference_mode
from pgraph.ir import program as ir
from pgraph.ir.instances import boxes_overlap, flat
from pgraph.ir.queries import AllIterations, Box, Evaluator, Window, axis_values, outlives_iteration, roots
from pgraph.kinds import AccessKind, CarryKind, Direction, ScopeMode

#: Evaluations allowed for the per-iteration slab check before falling back to full expansion.
SLAB_CHECK_BUDGET = 200_000


def identical_loops(p: ir.Program) -> set[int]:
    """The loops whose iterations are identical (see the module docstring).

    The TensorMap sees the call's argument regions, so those count as well as the accesses.
    An auto-scope `out` argument (OUTPUT_EXISTING: insert without lookup, older entries stay)
    on a buffer that outlives one iteration makes the iterations differ: every iteration adds
    an entry, and each later reader gets one more edge.
    """
    auto = [d for d in p.dispatches if p.scopes[d.scope].mode is ScopeMode.AUTO]
    written = {r for d in auto for a in d.accesses if a.kind is not AccessKind.READ for r in roots(p, a.region.tensor)}
    written |= {r for d in auto for a in d.args if a.region is not None and a.param.direction is not Direction.IN
                for r in roots(p, a.region.tensor)}
    written_any = {r for d in p.dispatches for a in d.accesses if a.kind is not AccessKind.READ
                   for r in roots(p, a.region.tensor)}
    out = set()
    for loop in p.loops:
        if (_identical(p, loop, written) and slabs_disjoint(p, loop, written_any)
                and not _seen_from_outside(p, loop, written_any) and not _carry_aliases(p, loop)
                and not _carry_init_after(p, loop)):
            out.add(loop.id)
    return out


def _touches(d: ir.Dispatch) -> list[tuple[bool, ir.RegionRef]]:
    """(writes, region) of every access and tensor argument of a dispatch."""
    out = [(a.kind is not AccessKind.READ, a.region) for a in d.accesses]
    out += [(a.param.direction is not Direction.IN, a.region) for a in d.args if a.region is not None]
    return out


def _seen_from_outside(p: ir.Program, loop: ir.Loop, written: set[str]) -> bool:
    """A region that uses the loop variable, on a written buffer some task outside the loop also
    touches: that task meets a different slab in every iteration (`g[:, ((L + 2) % 4) * 4 +: 4]`
    against a writer of `g` after the loop), which two expanded iterations do not show."""
    var = loop.axis.var
    varying: set[str] = set()
    for d in p.dispatches:
        if loop.id in d.loops:
            for _, r in _touches(d):
                if any(e is not None and var in free_vars(e) for dim in r.dims or () for e in (dim.a, dim.b)):
                    varying |= roots(p, r.tensor) & written
    if not varying:
        return False
    return any(roots(p, r.tensor) & varying for d in p.dispatches if loop.id not in d.loops for _, r in _touches(d))


def _carry_aliases(p: ir.Program, loop: ir.Loop) -> bool:
    """A tensor carry of the loop whose INIT buffer the loop also touches under another name, one
    side writing: iteration lo reaches INIT through the carry, later iterations do not, so the
    first iteration's accesses meet every later one (a TensorMap entry of iteration lo read by
    all of them), not only its neighbour's."""
    inside = [d for d in p.dispatches if loop.id in d.loops]
    for c in loop.carries:
        if c.name not in p.carries or p.carries[c.name].kind is not CarryKind.TENSOR:
            continue
        init_roots = roots(p, c.init)
        via, direct = False, False  # (some write through the carry, some write by name)
        through, by_name = False, False
        for d in inside:
            for w, r in _touches(d):
                if _through_carry(p, r, c.name):
                    through = True
                    via = via or w
                elif roots(p, r.tensor) & init_roots:
                    by_name = True
                    direct = direct or w
        if through and by_name and (via or direct):
            return True
    return False


def _through_carry(p: ir.Program, region: ir.RegionRef, carry: str) -> bool:
    """True when `region` names the tensor carry `carry` or a view of it."""
    t = p.tensors.get(region.tensor)
    return region.tensor == carry or (t is not None and t.base == carry)


def _carry_init_after(p: ir.Program, loop: ir.Loop) -> bool:
    """A task after the loop that touches the INIT buffer of a tensor carry the loop uses: only
    iteration lo reaches INIT through the carry, so that task has an edge from iteration lo's
    task alone, while the window lets an edge out of the loop from iteration lo's copy stand for
    every iteration (the critical path took the latest of all iterations: 10400 where --full
    gives 10010, tests/unit/test_window_exact.py)."""
    inside = [d for d in p.dispatches if loop.id in d.loops]
    if not inside:
        return False
    last = max(d.order for d in inside)
    after = [d for d in p.dispatches if d.order > last and loop.id not in d.loops]
    for c in loop.carries:
        if c.name not in p.carries or p.carries[c.name].kind is not CarryKind.TENSOR:
            continue
        if not any(_through_carry(p, r, c.name) for d in inside for _, r in _touches(d)):
            continue
        init_roots = roots(p, c.init)
        if any(roots(p, r.tensor) & init_roots for d in after for _, r in _touches(d)
               if not _through_carry(p, r, c.name)):
            return True
    return False


def _identical(p: ir.Program, loop: ir.Loop, written: set[str]) -> bool:
    var = loop.axis.var
    for d in p.dispatches:
        if loop.id not in d.loops:
            continue
        exprs = [e for dep in d.deps for sel in dep.sels or () for e in (sel.a, sel.b)]
        if p.scopes[d.scope].mode is ScopeMode.AUTO:
            regions = [a.region for a in d.accesses] + [a.region for a in d.args if a.region is not None]
            exprs += [e for r in regions if roots(p, r.tensor) & written for dim in r.dims or () for e in (dim.a, dim.b)]
            if any(a.region is not None and a.param.direction is Direction.OUT
                   and outlives_iteration(p, a.region.tensor, loop.id) for a in d.args):
                return False
        if any(e is not None and var in free_vars(e) for e in exprs):
            return False
    return True


def slabs_disjoint(p: ir.Program, loop: ir.Loop, written: set[str]) -> bool:
    """Regions that use the loop variable on a written buffer that outlives one iteration must
    give every iteration its own slab (e.g. `k_cache[L*CACHE_ROWS +: CACHE_ROWS, :]`).

    The window expands two iterations, so it only sees conflicts between neighbours; `g[L % 4]`
    makes iterations 0 and 4 clash unseen. Each such region's bounding box is evaluated for
    every iteration (over all task, block and item indices); overlapping boxes of different
    iterations, or a region too costly to evaluate, make the loop expand in full. `written`
    holds the roots of every buffer some task writes (the same for every loop).
    """
    var = loop.axis.var
    ev = Evaluator()
    reference = reference_mode("compiled-regions")  # the compiled region functions are a fast path beside the Evaluator
    boxes: dict[str, list[tuple[int, str, tuple[tuple[int, int], ...]]]] = {}
    budget = SLAB_CHECK_BUDGET
    for d in p.dispatches:
        if loop.id not in d.loops:
            continue
        for acc in d.accesses:
            region = acc.region
            exprs = [e for dim in region.dims or () for e in (dim.a, dim.b) if e is not None]
            if not any(var in free_vars(e) for e in exprs):
                continue
            if not (roots(p, region.tensor) & written) or not outlives_iteration(p, region.tensor, loop.id):
                continue
            axes = [*d.task_axes, *d.block_axes, *(ir.IAxis(i.var, i.lo, i.hi, acc.span) for i in acc.items)]
            free = set().union(*(free_vars(e) for e in exprs)) - {var} - {a.var for a in axes}
            budget -= math.prod(a.size for a in axes) * loop.axis.size
            if free or budget < 0:
                return False  # another loop's variable, or too many points: expand in full
            if region.tensor in p.carries:
                return False  # a tensor carry's slabs per inner iteration: expand in full
            tensor = p.tensors[region.tensor]
            fast = region_function(region, tensor.shape) if not reference and safe_values(
                [(a.lo, a.hi) for a in axes] + [(loop.axis.lo, loop.axis.hi)]) else None
            for value in range(loop.axis.lo, loop.axis.hi):
                box = _bbox(ev, fast, region, tensor.shape, axes, var, value)
                if box is None:
                    return False
                boxes.setdefault(tensor.root, []).append((value, tensor.name, box))
    return all(_disjoint_across_iterations(entries, p) for entries in boxes.values())


def _bbox(ev: Evaluator, fast: BoxFn | None, region: ir.RegionRef, shape: tuple[int, ...], axes: list[ir.IAxis],
          var: str, value: int) -> Box | None:
    """`Evaluator.region_bbox` of `region` at loop value `value`, through the compiled region
    function when it answers at every point (else the Evaluator decides, None on any failure)."""
    if fast is None:
        return ev.region_bbox(region, shape, axes, {var: value})
    env = {var: value}
    boxes = []
    try:
        if len(axes) == 1:  # (one block or task axis: most regions)
            one = axes[0].var
            for v in range(axes[0].lo, axes[0].hi):
                env[one] = v
                boxes.append(fast(env))
        else:
            for values in axis_values(axes):
                for a, v in zip(axes, values):
                    env[a.var] = v
                boxes.append(fast(env))
    except Exception:  # noqa: BLE001 - the Evaluator gives the exact answer
        return ev.region_bbox(region, shape, axes, {var: value})
    if not boxes:
        return None
    # per dimension: the least start and the greatest end over the points
    return tuple((min(dim)[0], max(hi for _, hi in dim)) for dim in zip(*boxes))


def _disjoint_across_iterations(entries: list[tuple[int, str, Box]], p: ir.Program) -> bool:
    """True when no two boxes of different iterations overlap (a sweep, not every pair: the
    check must stay linear in the layer count). One tensor name: per dimension, swept in the
    one with the most distinct intervals; views of one buffer: flat element intervals."""
    names = {t for _, t, _ in entries}
    live = [(v, t, b) for v, t, b in entries if not any(lo >= hi for lo, hi in b)]
    if not live:
        return True
    if len(names) == 1 and live[0][2]:
        rank = len(live[0][2])
        dim = max(range(rank), key=lambda d: (len({b[d] for _, _, b in live}), -d))
        keyed = [(b[dim][0], b[dim][1], v, t, b) for v, t, b in live]
    else:
        keyed = [(*flat(b, p.tensors[t].shape), v, t, b) for v, t, b in live]
    keyed.sort(key=lambda e: (e[0], e[1]))
    active: list[tuple[int, int, int, str, Box]] = []
    for e in keyed:
        active = [o for o in active if o[1] > e[0]]
        for o in active:
            if o[2] != e[2] and boxes_overlap(o[4], o[3], e[4], e[3], p.tensors):
                return False
        active.append(e)
    return True


def nested_loops(p: ir.Program) -> set[int]:
    """The loops inside another loop of more than one iteration: they are expanded in full.

    An edge between two iterations of the outer loop joins copies of the inner loop that are
    not paired iteration by iteration (the last inner iteration of one outer iteration feeds
    every inner iteration of the next), which the two-iteration copies of the inner loop do not
    weigh exactly: the dep-pool figures would differ from `--full` (differential seeds 2760,
    4028, 4316, 4601, 6195, 8119, 9406, 9744, 9821). The real specs have no such loops."""
    size = {lp.id: lp.axis.size for lp in p.loops}
    return {lid for d in p.dispatches for k, lid in enumerate(d.loops)
            if any(size[o] > 1 for o in d.loops[:k])}


def make_window(p: ir.Program, full: bool) -> Window:
    """Every loop's enumerated iterations: all of them with `full` or when the loop differs per
    iteration or has at most two, else the two-iteration window with its weights."""
    same = set() if full else identical_loops(p) - nested_loops(p)
    its: dict[int, Sequence[tuple[int, int]]] = {}
    for lp in p.loops:
        a = lp.axis
        if lp.id not in same or a.size <= 2:
            its[lp.id] = AllIterations(a.lo, a.hi)
        else:
            its[lp.id] = [(a.lo, 1), (a.lo + 1, a.size - 1)]
    return Window(its)
