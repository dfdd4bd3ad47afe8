"""Region boxes and dep selections compiled to Python functions: the expander's hot path.

`pgraph.ir.queries.Evaluator` evaluates a region dimension by dimension through one closure
per expression node, checking every +, -, * against MAX_INT_BITS. The expander evaluates the
same few regions millions of times (351,050 tasks in a `--full` prefill), so each region is
also compiled once into one function of plain Python arithmetic. That function is only a
fast path: whenever it cannot give the exact answer (a name it does not find, a division by
zero, a box outside its tensor, a function call that raises) it raises, and the caller
evaluates the region again with the Evaluator, which produces the diagnostic. A region is
compiled only when the fast path cannot overflow where the Evaluator would refuse: literals
below 2**SAFE_BITS, at most MAX_MULS multiplications per expression, and (checked by the
caller per dispatch) index values below 2**SAFE_BITS, so no intermediate reaches MAX_INT_BITS.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from types import CodeType
from typing import Any

from pgraph.expr import BinOp, Expr, Func, Name, Neg, Not, Num, compile_expr
from pgraph.ir import program as ir
from pgraph.ir.bounds import slice_bounds
from pgraph.kinds import DimKind
from pgraph.source import Span

Env = Mapping[str, int]
BoxFn = Callable[[Env], tuple[tuple[int, int], ...]]
SelFn = Callable[[Env], list[range]]

#: Largest magnitude (in bits) of a literal or an index value the fast path accepts.
SAFE_BITS = 62
#: Most multiplications one compiled expression may hold: (2**124)**17 stays below 2**4096.
MAX_MULS = 16

_CMP = {"==", "!=", "<", "<=", ">", ">="}


class _Fallback(Exception):
    """The fast path cannot answer: evaluate with the Evaluator."""


def _source(expr: Expr, ns: dict[str, Any], muls: list[int], known: Mapping[int, str] | None = None) -> str | None:
    """Python source of `expr` over `env` (None when it cannot be compiled safely); a node of
    `known` (by identity) is the local variable named there, already computed."""
    if known and id(expr) in known:
        return known[id(expr)]
    if isinstance(expr, Num):
        return repr(expr.value) if expr.value.bit_length() <= SAFE_BITS else None
    if isinstance(expr, Name):
        return f"env[{expr.id!r}]"
    if isinstance(expr, Neg):
        inner = _source(expr.operand, ns, muls, known)
        return None if inner is None else f"(-{inner})"
    if isinstance(expr, Not):
        inner = _source(expr.operand, ns, muls, known)
        return None if inner is None else f"int(not {inner})"
    if isinstance(expr, Func):
        key = f"_f{len(ns)}"
        ns[key] = compile_expr(expr)  # the exact semantics (and errors) of the Evaluator
        return f"{key}(env)"
    assert isinstance(expr, BinOp)
    left, right = _source(expr.left, ns, muls, known), _source(expr.right, ns, muls, known)
    if left is None or right is None:
        return None
    op = expr.op
    if op == "*":
        muls[0] += 1
    if op in ("+", "-", "*"):
        return f"({left} {op} {right})"
    if op == "/":
        return f"({left} // {right})"  # floor division; ZeroDivisionError falls back
    if op == "%":
        return f"({left} % {right})"
    if op in _CMP:
        return f"int({left} {op} {right})"
    if op == "and":
        return f"int(bool({left}) and bool({right}))"
    if op == "or":
        return f"int(bool({left}) or bool({right}))"
    return None


@functools.cache
def _code(source: str) -> CodeType:
    """The compiled module of a function's `source`: regions of the same shape on different
    tensors or loops repeat their text (27 distinct of 60 in the decode spec), and a compile
    costs ~0.1 ms where running the code object in a fresh namespace costs ~1 µs."""
    return compile(source, "<pgraph.expand.compiled>", "exec")


def _expr(expr: Expr | None, ns: dict[str, Any], known: Mapping[int, str] | None = None) -> str | None:
    if expr is None:
        return None
    muls = [0]
    src = _source(expr, ns, muls, known)
    return src if src is not None and muls[0] <= MAX_MULS else None


def _interval(kind: DimKind, a: Expr | None, b: Expr | None, whole: tuple[int, int], span: Span,
              ns: dict[str, Any], i: int) -> list[str] | None:
    """Source lines setting l{i}, h{i} of one dimension or selection, its `slice_bounds` (the
    upper bound reads l{i} where it holds the lower bound's node: `a` is evaluated once)."""
    sb = slice_bounds(kind, a, b, whole, span)
    lo, hi = _expr(sb.lo, ns), _expr(sb.hi, ns, {id(sb.lo): f"l{i}"})
    return None if lo is None or hi is None else [f"l{i} = {lo}", f"h{i} = {hi}"]


def region_function(region: ir.RegionRef, shape: tuple[int, ...]) -> BoxFn | None:
    """`env -> box` of `region` on a tensor of `shape`, raising when the Evaluator must decide
    (a box outside the tensor or with a negative extent included); None if not compilable."""
    if region.dims is None:
        whole = tuple((0, n) for n in shape)
        return lambda env: whole
    ns: dict[str, Any] = {"_Fallback": _Fallback}
    body: list[str] = []
    checks, parts = [], []
    for i, (dim, n) in enumerate(zip(region.dims, shape)):
        lines = _interval(dim.kind, dim.a, dim.b, (0, n), region.span, ns, i)
        if lines is None:
            return None
        body += lines
        checks.append(f"0 <= l{i} <= h{i} <= {n}")
        parts.append(f"(l{i}, h{i})")
    if not parts:
        return lambda env: ()
    src = ["def box(env):", *(f"    {line}" for line in body),
           f"    if {' and '.join(checks)}:", f"        return ({', '.join(parts)},)", "    raise _Fallback"]
    exec(_code("\n".join(src)), ns)  # noqa: S102 - source built above from the IR's own nodes
    fn: BoxFn = ns["box"]
    return fn


def selection_function(sels: Sequence[ir.DepSel] | None, axes: Sequence[ir.IAxis]) -> SelFn | None:
    """`env -> [range per tile axis]` of a dep selection, as `Evaluator.selection` gives it."""
    if sels is None:
        full = [range(a.lo, a.hi) for a in axes]
        return lambda env: full
    ns: dict[str, Any] = {}
    body: list[str] = []
    parts = []
    for i, (sel, axis) in enumerate(zip(sels, axes)):
        if sel.kind is DimKind.ALL:
            ns[f"_r{i}"] = range(axis.lo, axis.hi)
            parts.append(f"_r{i}")
            continue
        lines = _interval(sel.kind, sel.a, sel.b, (axis.lo, axis.hi), sel.span, ns, i)
        if lines is None:
            return None
        body += lines
        parts.append(f"range(l{i}, h{i})")
    src = ["def sel(env):", *(f"    {line}" for line in body), f"    return [{', '.join(parts)}]"]
    exec(_code("\n".join(src)), ns)  # noqa: S102 - source built above from the IR's own nodes
    fn: SelFn = ns["sel"]
    return fn


def safe_values(axes: Sequence[tuple[int, int]]) -> bool:
    """True when every index value of these (lo, hi) ranges is below 2**SAFE_BITS in magnitude."""
    return all(max(abs(lo), abs(hi)).bit_length() <= SAFE_BITS for lo, hi in axes)
