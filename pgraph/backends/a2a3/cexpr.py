"""Integer expressions as C++ (int64_t): simplification, value intervals and printing.

The Program IR keeps regions, deps and scalar arguments as `pgraph.expr` expressions
of loop, task and block indices. The a2a3 backend prints them as C++ `int64_t` arithmetic.
The language's `/` and `%` are floor division and modulo; C++ truncates toward zero, so
plain `/` and `%` are printed only where interval analysis proves the numerator >= 0 and
the divisor > 0 (always the case for tile arithmetic); otherwise the floor helpers
`pgraph_floordiv` / `pgraph_floormod` are used and the emitter defines them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import attrs

from pgraph import records
from pgraph.expr import BinOp, Expr, Func, Name, Neg, Not, Num, RuntimeDim, evaluate

#: C++ precedence levels used to drop redundant parentheses (higher binds tighter).
_PREC = {"or": 1, "and": 2, "==": 3, "!=": 3, "<": 4, "<=": 4, ">": 4, ">=": 4, "+": 5, "-": 5, "*": 6,
         "/": 6, "%": 6}


@records.value
@attrs.frozen(repr=False, eq=False)
class Interval:
    """A closed integer interval; None bounds are unbounded."""

    lo: int | None
    hi: int | None

    @property
    def nonneg(self) -> bool:
        """True when every value is >= 0."""
        return self.lo is not None and self.lo >= 0

    @property
    def positive(self) -> bool:
        """True when every value is > 0."""
        return self.lo is not None and self.lo > 0


UNBOUNDED = Interval(None, None)


def add(a: Expr, b: Expr) -> Expr:
    """`a + b`, folded and simplified."""
    return simplify(BinOp("+", a, b, a.span))


def sub(a: Expr, b: Expr) -> Expr:
    """`a - b`, folded and simplified."""
    return simplify(BinOp("-", a, b, a.span))


def mul(a: Expr, b: Expr) -> Expr:
    """`a * b`, folded and simplified."""
    return simplify(BinOp("*", a, b, a.span))


def simplify(e: Expr) -> Expr:
    """Fold constant subtrees and drop `+ 0`, `- 0`, `* 1`, `/ 1`; `* 0` becomes 0."""
    if isinstance(e, (Num, Name, RuntimeDim)):
        return e
    if isinstance(e, Neg):
        inner = simplify(e.operand)
        return Num(-inner.value, e.span) if isinstance(inner, Num) else Neg(inner, e.span)
    if isinstance(e, Not):
        inner = simplify(e.operand)
        return Num(int(not inner.value), e.span) if isinstance(inner, Num) else Not(inner, e.span)
    if isinstance(e, Func):
        args = tuple(simplify(a) for a in e.args)
        if all(isinstance(a, Num) for a in args):
            return Num(evaluate(Func(e.name, args, e.span), {}), e.span)
        return Func(e.name, args, e.span)
    left, right = simplify(e.left), simplify(e.right)
    if isinstance(left, Num) and isinstance(right, Num):
        return Num(evaluate(BinOp(e.op, left, right, e.span), {}), e.span)
    lz = isinstance(left, Num) and left.value == 0
    rz = isinstance(right, Num) and right.value == 0
    lone = isinstance(left, Num) and left.value == 1
    rone = isinstance(right, Num) and right.value == 1
    if e.op == "+" and lz:
        return right
    if e.op in ("+", "-") and rz:
        return left
    if e.op == "*" and (lz or rz):
        return Num(0, e.span)
    if e.op == "*" and lone:
        return right
    if e.op in ("*", "/") and rone:
        return left
    return BinOp(e.op, left, right, e.span)


def interval(e: Expr, ranges: Mapping[str, Interval]) -> Interval:
    """A conservative interval of `e` given intervals of its free names (missing: unbounded)."""
    if isinstance(e, Num):
        return Interval(e.value, e.value)
    if isinstance(e, Name):
        return ranges.get(e.id, UNBOUNDED)
    if isinstance(e, RuntimeDim):
        return Interval(0, None)  # a tensor dimension read at run time: never negative
    if isinstance(e, Neg):
        a = interval(e.operand, ranges)
        return Interval(None if a.hi is None else -a.hi, None if a.lo is None else -a.lo)
    if isinstance(e, Not):
        return Interval(0, 1)
    if isinstance(e, Func):
        parts = [interval(a, ranges) for a in e.args]
        if e.name in ("min", "max"):
            los = [p.lo for p in parts]
            his = [p.hi for p in parts]
            known_lo = [v for v in los if v is not None]
            known_hi = [v for v in his if v is not None]
            if e.name == "min":
                lo = min(known_lo) if len(known_lo) == len(los) else None
                hi = min(known_hi) if known_hi else None
            else:
                lo = max(known_lo) if known_lo else None
                hi = max(known_hi) if len(known_hi) == len(his) else None
            return Interval(lo, hi)
        return _div_interval(parts[0], parts[1], ceil=True) if len(parts) == 2 else UNBOUNDED
    if e.op in _PREC and _PREC[e.op] <= 4:
        return Interval(0, 1)
    a, b = interval(e.left, ranges), interval(e.right, ranges)
    if e.op == "+":
        return Interval(_opt(a.lo, b.lo, int.__add__), _opt(a.hi, b.hi, int.__add__))
    if e.op == "-":
        return Interval(_opt(a.lo, b.hi, int.__sub__), _opt(a.hi, b.lo, int.__sub__))
    if e.op == "*":
        if None in (a.lo, a.hi, b.lo, b.hi):
            if a.nonneg and b.nonneg:
                return Interval(a.lo * b.lo, None)  # type: ignore[operator]
            return UNBOUNDED
        prods = [x * y for x in (a.lo, a.hi) for y in (b.lo, b.hi)]  # type: ignore[operator]
        return Interval(min(prods), max(prods))
    if e.op == "/":
        return _div_interval(a, b, ceil=False)
    if e.op == "%":
        if b.positive and b.hi is not None:
            if a.nonneg and a.hi is not None and a.hi < b.lo:  # type: ignore[operator]
                return a
            return Interval(0, b.hi - 1)
        return UNBOUNDED
    return UNBOUNDED


def _opt(x: int | None, y: int | None, f: Callable[[int, int], int]) -> int | None:
    return None if x is None or y is None else f(x, y)


def _div_interval(a: Interval, b: Interval, ceil: bool) -> Interval:
    """Floor (or ceil) division by a positive divisor: monotone in the numerator."""
    if not b.positive:
        return UNBOUNDED

    def div(x: int, y: int) -> int:
        return -(-x // y) if ceil else x // y

    lo = hi = None
    if a.lo is not None:
        lo = div(a.lo, b.hi) if a.lo >= 0 and b.hi is not None else div(a.lo, b.lo) if a.lo < 0 else 0  # type: ignore[arg-type]
    if a.hi is not None:
        hi = div(a.hi, b.lo) if a.hi >= 0 else (div(a.hi, b.hi) if b.hi is not None else -1)  # type: ignore[arg-type]
    return Interval(lo, hi)


class CxxPrinter:
    """Prints expressions as C++ int64_t arithmetic.

    `names` maps free names to C++ identifiers; `ranges` gives their value intervals
    (for the floor-division check); `dims` maps (tensor, axis) of a runtime dimension to the
    C++ `int64_t` that holds it. A printer keeps no record of what it printed: the emitter
    finds the floor helpers and runtime dimensions the file needs in the generated code.
    """

    def __init__(self, names: Mapping[str, str], ranges: Mapping[str, Interval],
                 dims: Mapping[tuple[str, int], str] | None = None) -> None:
        self.names = names
        self.ranges = ranges
        self.dims = dims or {}

    def __call__(self, e: Expr) -> str:
        return self.expr(simplify(e), 0)

    def expr(self, e: Expr, outer: int) -> str:
        """`e` as C++, parenthesized when it binds looser than its context (precedence `outer`)."""
        if isinstance(e, Num):
            text = str(e.value)
            return f"({text})" if e.value < 0 and outer > 0 else text
        if isinstance(e, Name):
            return self.names.get(e.id, e.id)
        if isinstance(e, RuntimeDim):
            return self.dims[(e.tensor, e.axis)]
        if isinstance(e, Neg):
            return f"-{self.expr(e.operand, 7)}"
        if isinstance(e, Not):
            return f"(int64_t)({self.expr(e.operand, 0)} == 0)"
        if isinstance(e, Func):
            return self.func(e)
        return self.binop(e, outer)

    def func(self, e: Func) -> str:
        """`min`/`max` as conditionals; `cdiv` as `(a + b - 1) / b`, or through the floor helper."""
        args = [self.expr(a, 0) for a in e.args]
        if e.name in ("min", "max"):
            cmp = "<" if e.name == "min" else ">"
            out = args[0]
            for nxt in args[1:]:
                out = f"({out} {cmp} {nxt} ? {out} : {nxt})"
            return out
        a, b = e.args
        if interval(a, self.ranges).nonneg and interval(b, self.ranges).positive:
            return f"({self.expr(a, 5)} + {self.expr(b, 6)} - 1) / {self.expr(b, 7)}"
        return f"-pgraph_floordiv(-{self.expr(a, 7)}, {args[1]})"

    def binop(self, e: BinOp, outer: int) -> str:
        """A binary operation; `/` and `%` through the floor helpers unless interval analysis
        proves a non-negative numerator and a positive divisor."""
        prec = _PREC[e.op]
        if prec <= 4:
            op = {"and": "&&", "or": "||"}.get(e.op, e.op)
            if e.op in ("and", "or"):
                text = f"({self.expr(e.left, 0)} != 0) {op} ({self.expr(e.right, 0)} != 0)"
            else:
                text = f"{self.expr(e.left, prec + 1)} {op} {self.expr(e.right, prec + 1)}"
            return f"(int64_t)({text})"
        if e.op in ("/", "%"):
            a, b = interval(e.left, self.ranges), interval(e.right, self.ranges)
            if not (a.nonneg and b.positive):
                helper = "pgraph_floordiv" if e.op == "/" else "pgraph_floormod"
                return f"{helper}({self.expr(e.left, 0)}, {self.expr(e.right, 0)})"
        left = self.expr(e.left, prec)
        right = self.expr(e.right, prec + 1)
        text = f"{left} {e.op} {right}"
        return f"({text})" if prec < outer else text


#: Defined in the generated file only when a printed expression needs floor semantics.
FLOOR_HELPERS = """\
static inline int64_t pgraph_floordiv(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

static inline int64_t pgraph_floormod(int64_t a, int64_t b) {
    return a - pgraph_floordiv(a, b) * b;
}
"""
