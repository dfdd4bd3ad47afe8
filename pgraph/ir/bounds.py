"""The slice -> interval rule, once: what interval a region dimension or a dep selection names.

Every place that turns a slice into an interval asks `slice_bounds` and gets expressions: the
Evaluator (`ir/queries.py`) compiles and evaluates them, the expander's compiled regions
(`expand/compiled.py`) turn them into Python source, the a2a3 backend (`backends/a2a3/regions.py`,
`deps.py`) simplifies and prints them as C++. So the rule of docs/language.md §11.1 (regions)
and of the dep selections (§12) is written here and nowhere else.
"""

from __future__ import annotations

from typing import NamedTuple

from pgraph.expr import BinOp, Expr, Num
from pgraph.kinds import DimKind
from pgraph.source import Span

__all__ = ["SliceBounds", "slice_bounds"]


class SliceBounds(NamedTuple):
    """The half-open interval `[lo, hi)` one slice names, and its `size` (`hi - lo` as written).

    All three are expressions of the slice's own expressions (no new names), in elements of
    the dimension for a region, in tile indices for a dep selection. `size` is given beside
    `lo` and `hi` so that a caller needing the extent does not rebuild it: it is `b` for
    `a +: b`, `b - a` for `a:b`, 1 for an index and the whole extent for `:`/`*`.
    """

    lo: Expr
    hi: Expr
    size: Expr


def slice_bounds(kind: DimKind, a: Expr | None, b: Expr | None, whole: tuple[int, int], span: Span) -> SliceBounds:
    """`[lo, hi)` of one region dimension (`ir.Dim`) or dep selection (`ir.DepSel`), symbolically.

    Inputs: the slice's `kind` and expressions `a`, `b` (as `ir.Dim` / `ir.DepSel` hold them:
    `a` for INDEX, `a` and `b` for RANGE and EXTENT, neither for ALL); `whole`, the `(lo, hi)`
    the dimension spans, which ALL selects (`(0, n)` for a tensor dimension of size n, the
    axis' `(lo, hi)` for a tile axis); `span`, the source position given to the numbers this
    function creates.

    The rule (half-open, the language has no step and no negative-index wrap-around):

    | kind   | slice    | lo       | hi        | size      |
    |--------|----------|----------|-----------|-----------|
    | ALL    | `:`, `*` | whole lo | whole hi  | hi - lo   |
    | INDEX  | `e`      | e        | e + 1     | 1         |
    | RANGE  | `a:b`, `a..b` | a   | b         | b - a     |
    | EXTENT | `a +: n` | a        | a + n     | n         |

    `hi` of INDEX and EXTENT shares the node `a` with `lo` (`BinOp("+", a, ...)`), so a
    compiler may evaluate `a` once. Nothing is checked here: an interval with `hi < lo` (a
    negative extent, PG006), a negative `lo` or one past the dimension (PG007, PG026) are the
    caller's to report once the expressions have values; evaluating them raises
    `pgraph.expr.EvalError` like any expression (the `+` and `-` built here are checked
    against MAX_INT_BITS like the language's own). Raises AssertionError when an expression
    the kind needs is missing (the IR verifier guarantees it is not).
    """
    match kind:
        case DimKind.ALL:
            return SliceBounds(Num(whole[0], span), Num(whole[1], span), Num(whole[1] - whole[0], span))
        case DimKind.INDEX:
            assert a is not None
            return SliceBounds(a, BinOp("+", a, Num(1, a.span), a.span), Num(1, a.span))
        case DimKind.EXTENT:
            assert a is not None and b is not None
            return SliceBounds(a, BinOp("+", a, b, a.span), b)
        case DimKind.RANGE:
            assert a is not None and b is not None
            return SliceBounds(a, b, BinOp("-", b, a, b.span))
    raise AssertionError(kind)  # pragma: no cover - DimKind is closed
