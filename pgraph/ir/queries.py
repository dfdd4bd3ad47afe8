"""Queries on the Program IR: the one evaluator of regions, selections, buffers and windows.

Every stage that needs to know what a region, a dep selection or a name means at given
index values asks here: the expander (instances), the checks (shapes, waves), the NumPy
binder (per-block views) and the a2a3 backend (views). Nothing here reports a diagnostic;
failures are exceptions (`RegionError`, `pgraph.expr.EvalError`) the caller turns into one.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence

import attrs

from pgraph import records
from pgraph.expr import Compiled, EvalError, Expr, Num, compile_expr, evaluate, free_vars
from pgraph.ir import program as ir
from pgraph.ir.bounds import slice_bounds
from pgraph.kinds import CarryKind, DimKind, NodeKind, Storage, TaskKind
from pgraph.source import Span

Box = tuple[tuple[int, int], ...]
BufferKey = tuple[str, tuple[int, ...]]
Env = Mapping[str, int]
#: one slice's compiled bounds (lo, hi) and, when both are numbers, their values
_Bound = tuple[Compiled, Compiled, tuple[int, int] | None]
#: the slices of a region or a dep selection: (kind, a, b, whole) each, and a span for the numbers
_Slices = tuple[list[tuple[DimKind, Expr | None, Expr | None, tuple[int, int]]], Span]

__all__ = ["Box", "BufferKey", "Evaluator", "EvalError", "RegionError", "axis_values", "representative_iteration"]


class RegionError(Exception):
    """A region evaluates to a negative extent or leaves its tensor (PG006 / PG007 at the caller)."""

    def __init__(self, kind: str, tensor: str, lo: int, hi: int, size: int) -> None:
        super().__init__(f"{tensor}: {lo}..{hi} of {size}")
        self.kind = kind          # 'negative' or 'bounds'
        self.tensor = tensor
        self.lo = lo
        self.hi = hi
        self.size = size


def axis_values(axes: Sequence[ir.IAxis]) -> Iterator[tuple[int, ...]]:
    """Every index tuple of `axes`, row-major (empty ranges give none)."""
    return itertools.product(*(range(a.lo, a.hi) for a in axes))


def representative_iteration(axis: ir.IAxis) -> int | None:
    """The iteration of a loop that stands for 'one iteration' in reports and pictures.

    The second iteration when there are two or more (the window expansion weights it for the
    remaining ones, and it receives carried values like every later iteration), the only one
    when there is one, None for an empty loop.
    """
    if axis.size <= 0:
        return None
    return axis.lo + 1 if axis.size >= 2 else axis.lo


class Evaluator:
    """Evaluates IR expressions with a cache of compiled closures (one per expression node)."""

    def __init__(self) -> None:
        self._compiled: dict[int, tuple[Expr, Compiled]] = {}
        self._slices: dict[int, tuple[object, tuple[object, ...], list[_Bound]]] = {}

    def compiled(self, expr: Expr) -> Compiled:
        """`expr` compiled to `env -> int` (cached by node identity)."""
        hit = self._compiled.get(id(expr))
        if hit is not None and hit[0] is expr:
            return hit[1]
        f = compile_expr(expr)
        self._compiled[id(expr)] = (expr, f)  # the node is kept alive, so its id stays unique
        return f

    def __call__(self, expr: Expr, env: Env) -> int:
        return self.compiled(expr)(env)

    def interval(self, kind: DimKind, a: Expr | None, b: Expr | None, env: Env, whole: tuple[int, int] = (0, 0),
                 span: Span | None = None) -> tuple[int, int]:
        """[lo, hi) of one slice or tile selection at `env`, by `pgraph.ir.bounds.slice_bounds`
        (ALL is `whole`). Raises EvalError; the interval is not checked."""
        sb = slice_bounds(kind, a, b, whole, span or _span_of(a, b))
        return self(sb.lo, env), self(sb.hi, env)

    def _bounds(self, key: object, context: tuple[object, ...], slices: Callable[[], _Slices]) -> list[_Bound]:
        """Per slice of `key` (a region or a dep's selections) in `context` (the tensor's shape, the
        tile axes), its bounds compiled (`slice_bounds`), cached by the node: `slices()` gives the
        (kind, a, b, whole) of each and the span, on a miss only.

        A slice whose bounds are numbers (`:`, `0:4`) keeps their values, to be used without a call.
        """
        hit = self._slices.get(id(key))
        if hit is not None and hit[0] is key and hit[1] == context:
            return hit[2]
        items, span = slices()
        out = []
        for kind, a, b, whole in items:
            sb = slice_bounds(kind, a, b, whole, span)
            const = (sb.lo.value, sb.hi.value) if isinstance(sb.lo, Num) and isinstance(sb.hi, Num) else None
            out.append((self.compiled(sb.lo), self.compiled(sb.hi), const))
        self._slices[id(key)] = (key, context, out)  # the key is kept alive, so its id stays unique
        return out

    def region_box(self, region: ir.RegionRef, shape: tuple[int, ...], env: Env) -> Box:
        """The box ((lo, hi) per dimension) of `region` on a tensor of `shape` at `env`.

        Raises RegionError for a negative extent or a box outside the tensor, EvalError for an
        expression that cannot be evaluated (a missing name, division by zero). The hot path of
        expansion: each region's bounds are compiled once.
        """
        if region.dims is None:
            return tuple((0, n) for n in shape)
        box = []
        dims = region.dims
        bounds = self._bounds(region, shape, lambda: ([(d.kind, d.a, d.b, (0, n)) for d, n in zip(dims, shape)],
                                                      region.span))
        for (flo, fhi, const), n in zip(bounds, shape):
            if const is not None and 0 <= const[0] <= const[1] <= n:
                box.append(const)
                continue
            lo = flo(env)
            hi = fhi(env)
            if hi < lo:
                raise RegionError("negative", region.tensor, lo, hi, n)
            if lo < 0 or hi > n:
                raise RegionError("bounds", region.tensor, lo, hi, n)
            box.append((lo, hi))
        return tuple(box)

    def selection(self, sels: Sequence[ir.DepSel] | None, axes: Sequence[ir.IAxis], env: Env) -> list[range]:
        """Per tile axis, the range of tile indices a dep selects (None: every tile).

        Ranges are not clipped: a selection outside the axis is the caller's PG026, and one
        written backwards (hi < lo) is kept as the empty `range(lo, hi)`, the caller's PG006.
        """
        if sels is None:
            return [range(a.lo, a.hi) for a in axes]
        if not sels:
            return []
        bounds = self._bounds(sels, tuple(axes), lambda: ([(s.kind, s.a, s.b, (a.lo, a.hi)) for s, a in zip(sels, axes)],
                                                          sels[0].span))
        out = []
        for flo, fhi, _ in bounds:
            out.append(range(flo(env), fhi(env)))  # a backwards range stays so: the caller reports it (PG006)
        return out

    def region_bbox(self, region: ir.RegionRef, shape: tuple[int, ...], axes: Sequence[ir.IAxis],
                    env0: Env) -> Box | None:
        """Bounding box of `region` over every value of `axes` (None if an expression fails or
        the region leaves the tensor at some point; empty axes give None)."""
        box: list[tuple[int, int]] | None = None
        for values in axis_values(axes):
            env = dict(env0)
            env.update({a.var: v for a, v in zip(axes, values)})
            try:
                cur = self.region_box(region, shape, env)
            except (EvalError, RegionError):
                return None
            box = list(cur) if box is None else [(min(a[0], b[0]), max(a[1], b[1])) for a, b in zip(box, cur)]
        return tuple(box) if box is not None else None


def region_shape(region: ir.RegionRef, shape: tuple[int, ...]) -> list[int] | None:
    """The shape a region passes (single indices drop their dimension), with every free index at 0.

    A kept dimension's size is `slice_bounds`' `size`. None when a size cannot be evaluated that way.
    """
    if region.dims is None:
        return list(shape)
    out = []
    for dim, full in zip(region.dims, shape):
        if dim.kind is DimKind.INDEX:
            continue
        size = slice_bounds(dim.kind, dim.a, dim.b, (0, full), region.span).size
        try:
            value = evaluate(size, _zeros(size))
        except EvalError:
            return None
        out.append(value)
    return out


def _zeros(expr: Expr) -> dict[str, int]:
    return {name: 0 for name in free_vars(expr)}


def _span_of(a: Expr | None, b: Expr | None) -> Span:
    """The span of a slice's first expression (a slice without one needs the caller's span)."""
    e = a if a is not None else b
    if e is None:
        raise ValueError("a slice without expressions (`:`) needs the span of its region or dep")
    return e.span


def submission_order(p: ir.Program) -> Iterator[tuple[ir.Dispatch, dict[str, int]]]:
    """Every task of `p` in submission order, with its loop and task index values, every loop
    iteration expanded (no regions are evaluated: this is cheap even for 40 layers).

    The order is the expander's (`pgraph.expand.tasks.expand_tree`): the program
    tree in order, each scope-level loop iteration by iteration, an `interleave` block group by
    group and index by index, and an empty SPMD grid submitting nothing. (A dep-carrying dummy
    whose deps all turn out invalid is listed too: it has no kernel.)
    """
    def emit(d: ir.Dispatch, env: dict[str, int], only: tuple[int, ...] | None = None
             ) -> Iterator[tuple[ir.Dispatch, dict[str, int]]]:
        if d.kind is TaskKind.SPMD and not d.block_count:
            return
        for index in (axis_values(d.task_axes) if only is None else [only]):
            yield d, {**env, **{a.var: x for a, x in zip(d.task_axes, index)}}

    def walk(node: ir.Node, env: dict[str, int]) -> Iterator[tuple[ir.Dispatch, dict[str, int]]]:
        if node.kind is NodeKind.LOOP:
            axis = p.loops[node.ident].axis  # type: ignore[index]
            for v in range(axis.lo, axis.hi):
                yield from children(node.children, {**env, axis.var: v})
        elif node.kind is NodeKind.DISPATCH:
            yield from emit(p.dispatch(node.ident), env)  # type: ignore[arg-type]
        elif node.kind is NodeKind.SCOPE:
            yield from children(node.children, env)

    def children(kids: tuple[ir.Node, ...], env: dict[str, int]) -> Iterator[tuple[ir.Dispatch, dict[str, int]]]:
        i = 0
        while i < len(kids):
            d = p.dispatch(kids[i].ident) if kids[i].kind is NodeKind.DISPATCH else None  # type: ignore[arg-type]
            if d is None or d.interleave is None:
                yield from walk(kids[i], env)
                i += 1
                continue
            members = []
            while i < len(kids) and kids[i].kind is NodeKind.DISPATCH:
                dm = p.dispatch(kids[i].ident)  # type: ignore[arg-type]
                if dm.interleave != d.interleave:
                    break
                members.append(dm)
                i += 1
            for group in ir.interleave_groups(members):
                for index in axis_values(group[0].task_axes):
                    for member in group:
                        yield from emit(member, env, index)

    yield from walk(p.tree, {})


def instance_env(p: ir.Program, d: ir.Dispatch, iters: Sequence[int], index: Sequence[int]) -> dict[str, int]:
    """Loop and task index values of the task of `d` at loop iterations `iters`, task index `index`."""
    env = {p.loops[lid].axis.var: v for lid, v in zip(d.loops, iters)}
    env.update({a.var: v for a, v in zip(d.task_axes, index)})
    return env


def kernel_at(p: ir.Program, d: ir.Dispatch, env: Env) -> str | None:
    """The kernel task `d` calls at loop/task index values `env` (a `kernels` table: its member
    at the evaluated index); None for a dummy. Raises EvalError, or IndexError when the index
    leaves the table (PG039 reports it before any backend runs)."""
    if d.kernel_table is None or d.kernel_index is None:
        return d.kernel
    members = p.kernel_tables[d.kernel_table].members
    i = evaluate(d.kernel_index, env)
    if not 0 <= i < len(members):
        raise IndexError(f"kernel table '{d.kernel_table}' has {len(members)} entries, index {i}")
    return members[i]


# ---- names and buffers ---------------------------------------------------------------


def tensor_of(p: ir.Program, name: str) -> ir.Tensor | None:
    """The tensor a region name stands for: the tensor itself, or a tensor carry's initial tensor."""
    t = p.tensors.get(name)
    if t is not None:
        return t
    carry = p.carries.get(name)
    if carry is not None and carry.kind is CarryKind.TENSOR:
        return p.tensors.get(carry.init)
    return None


def root(p: ir.Program, name: str) -> str:
    """The buffer a name's elements live in: a tensor's root (a view's base), a tensor carry's own name."""
    t = p.tensors.get(name)
    if t is not None:
        return t.root
    return name


def roots(p: ir.Program, name: str) -> set[str]:
    """The buffers `name` may stand for: its root tensor, or for a tensor carry the carry and the
    roots of INIT and NEXT (a write through `cur` writes hidden0 in layer 0, a layer's output later)."""
    carry = p.carries.get(name)
    if carry is None or carry.kind is not CarryKind.TENSOR:
        return {root(p, name)}
    return {carry.name, root(p, carry.init), root(p, carry.next)}


def outlives_iteration(p: ir.Program, name: str, lid: int) -> bool:
    """True when tensor `name` is one buffer for every iteration of loop `lid` (external, or
    allocated outside the loop). A tensor carry names another buffer in each iteration of its own
    loop, and one buffer through every iteration of a loop inside it."""
    carry = p.carries.get(name)
    if carry is not None:
        return carry.kind is CarryKind.TENSOR and p.carry_loop(name).id != lid
    t = p.tensors.get(name)
    if t is None:
        return False
    base = p.tensors.get(t.root, t)
    return base.storage is Storage.EXTERNAL or lid not in base.loops


def resolve_buffer(p: ir.Program, name: str, iters_by_loop: Mapping[int, int],
                   last_iteration: Callable[[int], int | None]) -> tuple[str, BufferKey]:
    """Resolve a tensor or tensor carry name to (tensor name, buffer instance key).

    A buffer instance key is (root tensor, the iterations of the loops that allocate it
    anew); external tensors have one instance. A carry in iteration `v` of its loop is INIT in
    the first iteration and NEXT of iteration `v - 1` afterwards; after the loop it is NEXT of
    the last iteration (`last_iteration(loop)`, None when the loop runs no iteration).
    """
    carry = p.carries.get(name)
    if carry is not None and carry.kind is CarryKind.TENSOR:
        lp = p.carry_loop(name)
        value = iters_by_loop.get(lp.id)
        if value is None:
            last = last_iteration(lp.id)
            if last is None:
                return resolve_buffer(p, carry.init, iters_by_loop, last_iteration)
            return resolve_buffer(p, carry.next, {**iters_by_loop, lp.id: last}, last_iteration)
        if value == lp.axis.lo:
            return resolve_buffer(p, carry.init, iters_by_loop, last_iteration)
        return resolve_buffer(p, carry.next, {**iters_by_loop, lp.id: value - 1}, last_iteration)
    t = p.tensors[name]
    base = p.tensors[t.root]
    if base.storage is Storage.EXTERNAL:
        return name, (base.name, ())
    its = []
    for lid in base.loops:
        v = iters_by_loop.get(lid)
        if v is None:
            v = last_iteration(lid)
        its.append(v if v is not None else 0)
    return name, (base.name, tuple(its))


class AllIterations(Sequence[tuple[int, int]]):
    """Every iteration lo..hi-1 of a loop as (value, 1) pairs, without materialising them: a
    loop of 2**32 iterations costs nothing until the work guard (PG031) has refused it."""

    __slots__ = ("lo", "hi")

    def __init__(self, lo: int, hi: int) -> None:
        self.lo, self.hi = lo, max(hi, lo)

    def __len__(self) -> int:
        return self.hi - self.lo

    def __getitem__(self, i):  # type: ignore[no-untyped-def, override]
        if isinstance(i, slice):
            return [(v, 1) for v in range(self.lo, self.hi)[i]]
        return (range(self.lo, self.hi)[i], 1)

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return ((v, 1) for v in range(self.lo, self.hi))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, AllIterations):
            return (self.lo, self.hi) == (other.lo, other.hi)
        return isinstance(other, Sequence) and len(other) == len(self) and list(other) == list(self)

    def __hash__(self) -> int:
        return hash((self.lo, self.hi))

    def __repr__(self) -> str:
        return f"AllIterations({self.lo}, {self.hi})"


@records.value
@attrs.frozen(repr=False, eq=False)
class Window:
    """Which iterations of each loop an expansion enumerates, with the weight each stands for.

    `iterations[loop]` is [(value, weight), ...]: every iteration with weight 1, or the window
    [(lo, 1), (lo + 1, size - 1)] of a loop whose iterations are identical.
    """

    iterations: dict[int, Sequence[tuple[int, int]]]

    def last(self, lid: int) -> int | None:
        """The last enumerated iteration of loop `lid` (None: the loop runs no iteration)."""
        its = self.iterations.get(lid, [])
        return its[-1][0] if its else None

    def weight(self, lid: int, value: int) -> int:
        """How many iterations `value` stands for (1 outside the window)."""
        its = self.iterations.get(lid, [])
        if isinstance(its, AllIterations):
            return 1
        return dict(its).get(value, 1)
