"""The arguments of one task: tensor views (`regions.ArgView`) and scalar values as C++.

The C++ passes the tensor itself when the task-level box is the whole tensor, else
`src.view(shapes, offsets)` with exactly that box, so the TensorMap overlap test sees the same
regions; a bound no single SPMD block attains is a min/max loop over the blocks at run time.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from contextlib import ExitStack

from pgraph.expr import Expr, Name, Num, compile_expr, free_vars, show
from pgraph.ir import program as ir
from pgraph.kinds import InternalError

from .cexpr import CxxPrinter, Interval, interval, simplify
from .context import Context, printer, tensor_ref
from .dtypes import scalar_ctype
from .layout import axis_range
from .regions import ArgView
from .writer import Writer


def tensor_arg_lines(ctx: Context, view: ArgView, d: ir.Dispatch, ranges: dict[str, Interval]) -> tuple[list[str], str]:
    """The lines declaring the argument passed to add_*, and its C++ expression: the tensor
    itself or a named view of it (`Names.view`)."""
    base = tensor_ref(ctx, view.tensor, d)
    if view.whole:
        return [], base
    name = ctx.names.view[(d.name, view.param.name)]
    pr = printer(ctx, ranges)
    w = Writer()
    if any(b.fallback for b in view.dims):
        w.extend(fallback_lines(ctx, view, name, d, ranges))
    shapes, offsets = [], []
    for i, b in enumerate(view.dims):
        if b.fallback:
            offsets.append(f"(uint32_t){name}_lo{i}")
            shapes.append(f"(uint32_t)({name}_hi{i} - {name}_lo{i})")
            continue
        where = f"{d.span.location()}: the view of '{view.tensor}' passed to '{view.param.name}' of '{d.name}'"
        offsets.append(u32(pr, b.lo, f"{where}: offset {i}"))
        shapes.append(u32(pr, b.size, f"{where}: extent {i}"))
    nd = len(view.dims)
    w.line(f"uint32_t {name}_shapes[{nd}] = {{{', '.join(shapes)}}};")
    w.line(f"uint32_t {name}_offsets[{nd}] = {{{', '.join(offsets)}}};")
    w.line(f"ChipTensor {name} = {base}.view({name}_shapes, {name}_offsets);")
    return w.lines, name


def fallback_lines(ctx: Context, view: ArgView, name: str, d: ir.Dispatch, ranges: dict[str, Interval]) -> list[str]:
    """Min/max over the SPMD blocks at run time, for bounds no single block attains."""
    inner = dict(ranges)
    inner.update({a.var: axis_range(a) for a in d.block_axes})
    pr = printer(ctx, inner)
    dims = [(i, b) for i, b in enumerate(view.dims) if b.fallback]
    w = Writer()
    for i, _ in dims:
        w.line(f"int64_t {name}_lo{i} = INT64_MAX;")
        w.line(f"int64_t {name}_hi{i} = INT64_MIN;")
    with ExitStack() as loops:
        for a in d.block_axes:
            v = ctx.names.var[a.var]
            loops.enter_context(w.block(f"for (int64_t {v} = {a.lo}; {v} < {a.hi}; ++{v})"))
        for i, b in dims:
            assert b.hi is not None
            w.line(f"if ({pr(b.lo)} < {name}_lo{i}) {name}_lo{i} = {pr(b.lo)};")
            w.line(f"if ({pr(b.hi)} > {name}_hi{i}) {name}_hi{i} = {pr(b.hi)};")
    return w.lines


def scalar_value(ctx: Context, arg: ir.Arg, ranges: dict[str, Interval]) -> str:
    """The `add_scalar` operand: the value cast to the parameter's type (`to_u64` for a float)."""
    assert arg.scalar is not None
    ctype = scalar_ctype(arg.param.dtype)
    if ctype is None:
        raise InternalError(f"scalar parameter '{arg.param.name}' is {arg.param.dtype}: no C++ scalar type "
                            "(PG011 should have rejected it)")
    text = printer(ctx, ranges)(arg.scalar)
    if ctype in ("float", "double"):
        return f"to_u64(({ctype})({text}))"
    e = simplify(arg.scalar)
    if isinstance(e, Name) and e.id in ctx.p.scalars and ctx.p.scalars[e.id].dtype == arg.param.dtype:
        return text
    return f"({ctype})({text})"


def u32(pr: CxxPrinter, e: Expr, what: str) -> str:
    """A uint32_t view bound: a literal as is, anything else cast after an interval check.

    simpler's view shapes/offsets are 32-bit here (TensorCreateInfo takes `uint32_t shapes[]`);
    a bound that may leave 0..2^32-1 is refused rather than silently wrapped.
    """
    e = simplify(e)
    if isinstance(e, Num):
        if not 0 <= e.value < 2**32:
            raise InternalError(f"{what} is {e.value}, which does not fit uint32_t (PG114 should have rejected it)")
        return str(e.value)
    iv = interval(e, pr.ranges)
    if iv.lo is None or iv.hi is None or iv.lo < 0 or iv.hi >= 2**32:
        lo, hi = _exact_range(e, pr.ranges)
        if lo < 0 or hi >= 2**32:
            raise InternalError(f"{what} takes values {lo}..{hi}, outside uint32_t (PG114 should have rejected it)")
    return f"(uint32_t)({pr(e)})"


def _exact_range(e: Expr, ranges: Mapping[str, Interval]) -> tuple[int, int]:
    """Min and max of `e` over every combination of its index values (bounded ranges only)."""
    names = sorted(free_vars(e))
    bounds: list[tuple[int, int]] = []
    for n in names:
        iv = ranges.get(n)
        if iv is None or iv.lo is None or iv.hi is None:
            raise InternalError(f"cannot bound '{show(e)}' (an unbounded value in a view bound)")
        bounds.append((iv.lo, iv.hi))
    f = compile_expr(e)
    values = [f(dict(zip(names, combo, strict=True)))
              for combo in itertools.product(*(range(lo, hi + 1) for lo, hi in bounds))]
    return (min(values), max(values)) if values else (0, 0)
