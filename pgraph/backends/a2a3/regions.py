"""Task-level argument views: the bounding box over a task's SPMD blocks, without block indices.

The runtime sees one tensor view per kernel argument of a task. pgraph models it as the
bounding box over the task's blocks of the per-block region (`pgraph.expand.tasks.task_args`,
`ArgBox`); the C++ passes `src.view(shapes, offsets)` with exactly that box so the
TensorMap overlap test sees the same regions. Indirect regions are their bounding box.

A dimension that does not use a block index is printed as written. One that does (e.g. the
K slice `ks*1024 +: 1024` with `ks = i % 5` over 50 blocks) is reduced by finding a block
index whose lower bound is the minimum (and one whose upper bound is the maximum) for every
value of the loop and task indices; that index is substituted, giving an expression of the
loop and task indices only. The search is exhaustive over the loop/task values, so the
printed bound is exact; when no single block works (or the space is too large to check) the
emitter falls back to a small min/max loop over the blocks in the generated code.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import attrs

from pgraph import records
from pgraph.expr import Expr, Num, compile_expr, free_vars, substitute
from pgraph.ir import program as ir
from pgraph.ir.bounds import slice_bounds
from pgraph.kinds import CarryKind, DimKind
from pgraph.source import Span

from .cexpr import simplify, sub

#: Largest (loop x task x block) index space searched for a block-free bound.
SEARCH_LIMIT = 400_000


@records.value
@attrs.frozen(repr=False, eq=False)
class DimBox:
    """One view dimension: `lo` and `size` (expressions of loop/task indices).

    When `fallback` is set, `lo`/`hi` still use block indices and the emitter computes the
    min of `lo` and the max of `hi` over the blocks at run time.
    """

    lo: Expr
    size: Expr
    hi: Expr | None = None
    fallback: bool = False


@records.value
@attrs.frozen(repr=False, eq=False)
class ArgView:
    """The task-level view of one tensor argument: whole tensor or a box."""

    param: ir.Param
    tensor: str
    shape: tuple[int, ...]
    whole: bool
    dims: tuple[DimBox, ...]


def region_shape(p: ir.Program, name: str) -> tuple[int, ...]:
    """Shape of a tensor or of a tensor carry alias."""
    carry = p.carries.get(name)
    if carry is not None and carry.kind is CarryKind.TENSOR:
        return p.tensors[carry.init].shape
    return p.tensors[name].shape


def env_space(p: ir.Program, d: ir.Dispatch) -> list[ir.IAxis]:
    """The loop and task axes a dispatch's expressions may use (outermost first)."""
    return [*(p.loops[lid].axis for lid in d.loops), *d.task_axes]


def _values(axes: list[ir.IAxis]) -> Iterator[dict[str, int]]:
    for combo in itertools.product(*(range(a.lo, a.hi) for a in axes)):
        yield {a.var: v for a, v in zip(axes, combo, strict=True)}


def _bounds(dim: ir.Dim, n: int, span: Span) -> tuple[Expr, Expr, Expr]:
    """(lo, hi, size) expressions of one region dimension (hi exclusive), its `slice_bounds`
    with hi and size simplified."""
    sb = slice_bounds(dim.kind, dim.a, dim.b, (0, n), span)
    return sb.lo, simplify(sb.hi), simplify(sb.size)


def task_views(p: ir.Program, d: ir.Dispatch) -> list[ArgView]:
    """One ArgView per tensor argument of `d`, in parameter order."""
    block_vars = {a.var for a in d.block_axes}
    envs = env_space(p, d)
    out = []
    for arg in d.args:
        if arg.region is None:
            continue
        shape = region_shape(p, arg.region.tensor)
        dims_ir = arg.region.dims or tuple(ir.Dim(DimKind.ALL, None, None) for _ in shape)
        dims = []
        for dim, n in zip(dims_ir, shape, strict=True):
            lo, hi, size = _bounds(dim, n, arg.span)
            if not ((free_vars(lo) | free_vars(hi)) & block_vars):
                dims.append(DimBox(simplify(lo), size))
            else:
                dims.append(_reduce_blocks(lo, hi, envs, list(d.block_axes)))
        whole = all(isinstance(b.lo, Num) and b.lo.value == 0 and isinstance(b.size, Num) and b.size.value == n
                    and not b.fallback for b, n in zip(dims, shape, strict=True))
        out.append(ArgView(arg.param, arg.region.tensor, shape, whole, tuple(dims)))
    return out


def _reduce_blocks(lo: Expr, hi: Expr, envs: list[ir.IAxis], blocks: list[ir.IAxis]) -> DimBox:
    """Block-free (lo, size) of min over blocks of `lo` and max of `hi`, or a fallback."""
    n_env = 1
    for a in envs:
        n_env *= a.size
    block_list = list(_values(blocks))
    if n_env * len(block_list) > SEARCH_LIMIT or not block_list:
        return DimBox(lo, sub(hi, lo), hi, True)
    flo, fhi = compile_expr(lo), compile_expr(hi)
    cand_lo = set(range(len(block_list)))
    cand_hi = set(range(len(block_list)))
    sizes = set()
    for env in _values(envs):
        los = [flo({**env, **b}) for b in block_list]
        his = [fhi({**env, **b}) for b in block_list]
        mn, mx = min(los), max(his)
        cand_lo &= {i for i, v in enumerate(los) if v == mn}
        cand_hi &= {i for i, v in enumerate(his) if v == mx}
        sizes.add(mx - mn)
        if not cand_lo or not cand_hi:
            return DimBox(lo, sub(hi, lo), hi, True)
    blo = block_list[min(cand_lo)]
    bhi = block_list[min(cand_hi)]
    lo_e = simplify(substitute(lo, {k: Num(v, lo.span) for k, v in blo.items()}))
    hi_e = simplify(substitute(hi, {k: Num(v, hi.span) for k, v in bhi.items()}))
    size = Num(sizes.pop(), lo.span) if len(sizes) == 1 else sub(hi_e, lo_e)
    return DimBox(lo_e, size)
