"""Which loops have identical iterations, so the window expansion (two iterations) is exact."""


from __future__ import annotations

import itertools
import math

import attrs

from pgraph.ir import program as ir
from pgraph.ir.expr import EvalError, compile_expr, free_vars
from pgraph.ir.instances import boxes_overlap
from pgraph.ir.lower_base import LowerState


class LoopIdentity(LowerState):
    """`mark_identical_loops` and the checks it relies on."""

    def mark_identical_loops(self) -> None:
        """A loop's iterations are identical (window expansion is exact) when neither its deps nor
        the regions of auto-scope tasks on written buffers depend on the loop variable: only those
        decide edges (explicit edges, and the TensorMap's inferred ones); index spaces are constant.

        The TensorMap sees the call's argument regions, so those count as well as the accesses.
        An auto-scope `out` argument (OUTPUT_EXISTING: insert without lookup, older entries stay)
        on a buffer that outlives one iteration also makes the iterations differ: every
        iteration adds an entry, and each later reader gets one more edge.
        """
        auto = [d for d in self.dispatches if self.scopes[d.scope].mode == "auto"]
        written = {r for d in auto for a in d.accesses if a.kind != "read" for r in self.roots(a.region.tensor)}
        written |= {r for d in auto for a in d.args if a.region is not None and a.param.direction != "in"
                    for r in self.roots(a.region.tensor)}
        written_any = {r for d in self.dispatches for a in d.accesses if a.kind != "read"
                       for r in self.roots(a.region.tensor)}
        for loop in self.loops:
            var = loop.axis.var
            same = True
            for d in self.dispatches:
                if loop.id not in d.loops:
                    continue
                exprs = [e for dep in d.deps for sel in dep.sels or () for e in (sel.a, sel.b)]
                if self.scopes[d.scope].mode == "auto":
                    regions = [a.region for a in d.accesses] + [a.region for a in d.args if a.region is not None]
                    exprs += [e for r in regions if self.roots(r.tensor) & written
                              for dim in r.dims or () for e in (dim.a, dim.b)]
                    if any(a.region is not None and a.param.direction == "out"
                           and self.outlives_iteration(a.region.tensor, loop.id) for a in d.args):
                        same = False
                        break
                if any(e is not None and var in free_vars(e) for e in exprs):
                    same = False
                    break
            if same and not self.slabs_disjoint(loop, written_any):
                same = False
            self.loops[loop.id] = attrs.evolve(loop, identical=same)

    #: Evaluations allowed for the per-iteration slab check before falling back to full expansion.
    SLAB_CHECK_BUDGET = 200_000

    def slabs_disjoint(self, loop: ir.Loop, written: set[str]) -> bool:
        """Regions that use the loop variable on a written buffer that outlives one iteration must
        give every iteration its own slab (e.g. `k_cache[L*CACHE_ROWS +: CACHE_ROWS, :]`).

        The window expands two iterations, so it only sees conflicts between neighbours; `g[L % 4]`
        makes iterations 0 and 4 clash unseen. Each such region's bounding box is evaluated for
        every iteration (over all task, block and item indices); overlapping boxes of different
        iterations, or a region too costly to evaluate, make the loop expand in full. `written`
        holds the roots of every buffer some task writes (the same for every loop).
        """
        var = loop.axis.var
        boxes: dict[str, list[tuple[int, str, list[tuple[int, int]]]]] = {}
        budget = self.SLAB_CHECK_BUDGET
        for d in self.dispatches:
            if loop.id not in d.loops:
                continue
            for acc in d.accesses:
                region = acc.region
                exprs = [e for dim in region.dims or () for e in (dim.a, dim.b) if e is not None]
                if not any(var in free_vars(e) for e in exprs):
                    continue
                if not (self.roots(region.tensor) & written) or not self.outlives_iteration(region.tensor, loop.id):
                    continue
                axes = [*d.task_axes, *d.block_axes, *(ir.IAxis(i.var, i.lo, i.hi, acc.span) for i in acc.items)]
                free = set().union(*(free_vars(e) for e in exprs)) - {var} - {a.var for a in axes}
                points = math.prod(a.size for a in axes) * loop.axis.size
                budget -= points
                if free or budget < 0:
                    return False  # another loop's variable, or too many points: expand in full
                tensor = self.tensors[region.tensor]
                for value in range(loop.axis.lo, loop.axis.hi):
                    box = self.region_bbox(region, tensor.shape, axes, {var: value})
                    if box is None:
                        return False
                    boxes.setdefault(tensor.base or tensor.name, []).append((value, tensor.name, box))
        for entries in boxes.values():
            for i, (va, ta, ba) in enumerate(entries):
                for vb, tb, bb in entries[i + 1:]:
                    if va != vb and boxes_overlap(ba, ta, bb, tb, self.tensors):
                        return False
        return True

    def region_bbox(self, region: ir.RegionRef, shape: tuple[int, ...], axes: list[ir.IAxis],
                    env0: dict[str, int]) -> list[tuple[int, int]] | None:
        """Bounding box of `region` over every value of `axes` (None if an expression fails)."""
        box: list[tuple[int, int]] | None = None
        dims = [(dim.kind, compile_expr(dim.a) if dim.a is not None else None,   # type: ignore[arg-type]
                 compile_expr(dim.b) if dim.b is not None else None, n)           # type: ignore[arg-type]
                for dim, n in zip(region.dims or (), shape)]
        for values in itertools.product(*(range(a.lo, a.hi) for a in axes)):
            env = dict(env0)
            env.update({a.var: v for a, v in zip(axes, values)})
            cur = []
            for kind, fa, fb, n in dims:
                try:
                    if kind == "all":
                        lo, hi = 0, n
                    elif kind == "index":
                        lo = fa(env)  # type: ignore[misc]
                        hi = lo + 1
                    elif kind == "extent":
                        lo = fa(env)  # type: ignore[misc]
                        hi = lo + fb(env)  # type: ignore[misc]
                    else:
                        lo, hi = fa(env), fb(env)  # type: ignore[misc]
                except EvalError:
                    return None
                cur.append((lo, hi))
            box = cur if box is None else [(min(a[0], b[0]), max(a[1], b[1])) for a, b in zip(box, cur)]
        return box

    def roots(self, name: str) -> set[str]:
        """The buffers `name` may stand for: its root tensor, or for a tensor carry the carry and
        the roots of INIT and NEXT (a write through `cur` writes h0 or h)."""
        carry = self.carries.get(name)
        if carry is None or carry.kind != "tensor":
            return {self.root_of(name)}
        return {carry.name, self.root_of(carry.init), self.root_of(carry.next)}

    def outlives_iteration(self, name: str, lid: int) -> bool:
        """True when tensor `name` is one buffer for every iteration of loop `lid` (external, or
        allocated outside the loop); a carry alias names the previous iteration's buffer."""
        if name in self.carries:
            return False
        t = self.tensors.get(name)
        if t is None:
            return False
        root = self.tensors.get(t.base, t) if t.base else t
        return root.storage == "external" or lid not in root.loops
