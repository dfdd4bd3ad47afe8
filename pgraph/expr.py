"""Integer expressions: the node classes, folding, free variables, evaluation and compilation.

The one expression type of pgraph: the parser builds these nodes, lowering folds constants
into them, the IR keeps regions, deps and scalars as expressions of the index variables, and
the backends print them. After lowering every constant is a `Num`; what remains free are
index variables, lets and loop variables, so a region or dep stays a symbolic (quasi-affine)
expression of the indices. `/` and `%` are floor division and modulo (Python semantics);
comparisons and `and`/`or`/`not` yield 0 or 1.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import attrs

from pgraph import records
from pgraph.source import Span


@records.value
@attrs.frozen(repr=False, eq=False)
class Num:
    """An integer literal."""

    value: int
    span: Span


@records.value
@attrs.frozen(repr=False, eq=False)
class Name:
    """A reference to a constant, let, index variable or (in call args) a tensor/scalar."""

    id: str
    span: Span


@records.value
@attrs.frozen(repr=False, eq=False)
class BinOp:
    """`left op right` for op in + - * / % (integer, floor division), comparisons, and/or."""

    op: str
    left: Expr
    right: Expr
    span: Span


@records.value
@attrs.frozen(repr=False, eq=False)
class Neg:
    """Unary minus."""

    operand: Expr
    span: Span


@records.value
@attrs.frozen(repr=False, eq=False)
class Not:
    """Boolean `not` (0 or 1)."""

    operand: Expr
    span: Span


@records.value
@attrs.frozen(repr=False, eq=False)
class Func:
    """`ceildiv(a, b)`, `min(a, ...)`, `max(a, ...)`."""

    name: str
    args: tuple[Expr, ...]
    span: Span


@records.value
@attrs.frozen(repr=False, eq=False)
class RuntimeDim:
    """`dim(TENSOR, AXIS)` of a tensor dimension that is read at run time (`runtime` in its shape).

    The planner evaluates it as `value`, the planning value written after `runtime` in the
    tensor's declaration; the a2a3 backend prints it as a read of the orchestration tensor's
    `shapes[axis]` (simpler: `orch_args.tensor(k).ref().shapes[axis]`, as pypto's dynamic-dim
    symbols do). Never produced by the parser: lowering turns a `dim(...)` call into it.
    """

    tensor: str
    axis: int
    value: int
    span: Span


Expr = Num | Name | BinOp | Neg | Not | Func | RuntimeDim

Env = Mapping[str, int]
Compiled = Callable[[Env], int]

FUNCS = ("ceildiv", "min", "max")


def has_runtime(expr: Expr) -> bool:
    """True when `expr` reads a runtime dimension (`dim(...)` of a `runtime` tensor dimension)."""
    if isinstance(expr, RuntimeDim):
        return True
    if isinstance(expr, (Num, Name)):
        return False
    if isinstance(expr, (Neg, Not)):
        return has_runtime(expr.operand)
    if isinstance(expr, Func):
        return any(has_runtime(a) for a in expr.args)
    return has_runtime(expr.left) or has_runtime(expr.right)


def runtime_dims(expr: Expr) -> list[RuntimeDim]:
    """The runtime dims `expr` reads, in order of appearance (with repeats)."""
    if isinstance(expr, RuntimeDim):
        return [expr]
    if isinstance(expr, (Num, Name)):
        return []
    if isinstance(expr, (Neg, Not)):
        return runtime_dims(expr.operand)
    if isinstance(expr, Func):
        return [d for a in expr.args for d in runtime_dims(a)]
    return runtime_dims(expr.left) + runtime_dims(expr.right)

#: Largest magnitude an integer may reach (literals and every +, -, * result), about 1.0e1233.
#: Python's integers are unbounded, but printing one of more than 4300 digits raises ValueError,
#: and `const A1 = A0*A0` chained 40 times would need a trillion digits.
MAX_INT_BITS = 4096


class EvalError(Exception):
    """An expression cannot be evaluated; carries the span of the offending node."""

    def __init__(self, message: str, span: Span, name: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.span = span
        self.name = name


def _checked(value: int, span: Span) -> int:
    if value.bit_length() > MAX_INT_BITS:
        raise EvalError(f"the value exceeds 2**{MAX_INT_BITS} in magnitude", span)
    return value


def _div(a: int, b: int, span: Span) -> int:
    if b == 0:
        raise EvalError("division by zero", span)
    return a // b


def _mod(a: int, b: int, span: Span) -> int:
    if b == 0:
        raise EvalError("modulo by zero", span)
    return a % b


_BIN: dict[str, Callable[[int, int], int]] = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "==": lambda a, b: int(a == b),
    "!=": lambda a, b: int(a != b),
    "<": lambda a, b: int(a < b),
    "<=": lambda a, b: int(a <= b),
    ">": lambda a, b: int(a > b),
    ">=": lambda a, b: int(a >= b),
    "and": lambda a, b: int(bool(a) and bool(b)),
    "or": lambda a, b: int(bool(a) or bool(b)),
}


def _apply_func(name: str, args: list[int], span: Span) -> int:
    if name == "ceildiv":
        if len(args) != 2:
            raise EvalError("ceildiv takes two arguments", span)
        if args[1] == 0:
            raise EvalError("division by zero in ceildiv", span)
        return -(-args[0] // args[1])
    if name in ("min", "max"):
        if not args:
            raise EvalError(f"{name} takes at least one argument", span)
        return min(args) if name == "min" else max(args)
    raise EvalError(f"unknown function '{name}' (known: {', '.join(FUNCS)})", span)


def evaluate(expr: Expr, env: Env) -> int:
    """Evaluate `expr` with `env` giving every free name. Raises EvalError."""
    if isinstance(expr, Num):
        return expr.value
    if isinstance(expr, RuntimeDim):
        return expr.value
    if isinstance(expr, Name):
        try:
            return env[expr.id]
        except KeyError:
            raise EvalError(f"'{expr.id}' is not defined here", expr.span, expr.id) from None
    if isinstance(expr, Neg):
        return -evaluate(expr.operand, env)
    if isinstance(expr, Not):
        return int(not evaluate(expr.operand, env))
    if isinstance(expr, Func):
        return _apply_func(expr.name, [evaluate(a, env) for a in expr.args], expr.span)
    left, right = evaluate(expr.left, env), evaluate(expr.right, env)
    if expr.op == "/":
        return _div(left, right, expr.span)
    if expr.op == "%":
        return _mod(left, right, expr.span)
    return _checked(_BIN[expr.op](left, right), expr.span)


def free_vars(expr: Expr) -> set[str]:
    """Names in `expr` that are not folded to numbers (a runtime dim is not a name)."""
    if isinstance(expr, (Num, RuntimeDim)):
        return set()
    if isinstance(expr, Name):
        return {expr.id}
    if isinstance(expr, (Neg, Not)):
        return free_vars(expr.operand)
    if isinstance(expr, Func):
        out: set[str] = set()
        for a in expr.args:
            out |= free_vars(a)
        return out
    return free_vars(expr.left) | free_vars(expr.right)


def substitute(expr: Expr, values: Mapping[str, Expr]) -> Expr:
    """Replace names by expressions (constants, lets), folding what becomes constant."""
    if isinstance(expr, (Num, RuntimeDim)):
        return expr
    if isinstance(expr, Name):
        return values.get(expr.id, expr)
    if isinstance(expr, Neg):
        inner = substitute(expr.operand, values)
        return Num(-inner.value, expr.span) if isinstance(inner, Num) else Neg(inner, expr.span)
    if isinstance(expr, Not):
        inner = substitute(expr.operand, values)
        return Num(int(not inner.value), expr.span) if isinstance(inner, Num) else Not(inner, expr.span)
    if isinstance(expr, Func):
        args = tuple(substitute(a, values) for a in expr.args)
        if all(isinstance(a, Num) for a in args):
            return Num(_apply_func(expr.name, [a.value for a in args], expr.span), expr.span)  # type: ignore[union-attr]
        return Func(expr.name, args, expr.span)
    left, right = substitute(expr.left, values), substitute(expr.right, values)
    if isinstance(left, Num) and isinstance(right, Num):
        return Num(evaluate(BinOp(expr.op, left, right, expr.span), {}), expr.span)
    return BinOp(expr.op, left, right, expr.span)


def compile_expr(expr: Expr) -> Compiled:
    """Compile `expr` to a closure `env -> int` (the hot path of instance expansion)."""
    if isinstance(expr, (Num, RuntimeDim)):
        value = expr.value
        return lambda env: value
    if isinstance(expr, Name):
        key, span = expr.id, expr.span

        def get(env: Env) -> int:
            try:
                return env[key]
            except KeyError:
                raise EvalError(f"'{key}' is not defined here", span, key) from None

        return get
    if isinstance(expr, Neg):
        f = compile_expr(expr.operand)
        return lambda env: -f(env)
    if isinstance(expr, Not):
        f = compile_expr(expr.operand)
        return lambda env: int(not f(env))
    if isinstance(expr, Func):
        fs = [compile_expr(a) for a in expr.args]
        name, span = expr.name, expr.span
        return lambda env: _apply_func(name, [f(env) for f in fs], span)
    lf, rf = compile_expr(expr.left), compile_expr(expr.right)
    span = expr.span
    if expr.op == "/":
        return lambda env: _div(lf(env), rf(env), span)
    if expr.op == "%":
        return lambda env: _mod(lf(env), rf(env), span)
    op = _BIN[expr.op]
    if expr.op in ("+", "-", "*"):
        return lambda env: _checked(op(lf(env), rf(env)), span)
    return lambda env: op(lf(env), rf(env))


def show(expr: Expr) -> str:
    """Render an expression back to .pgl text (fully parenthesised where needed)."""
    if isinstance(expr, Num):
        return str(expr.value)
    if isinstance(expr, Name):
        return expr.id
    if isinstance(expr, RuntimeDim):
        return f"dim({expr.tensor}, {expr.axis})"
    if isinstance(expr, Neg):
        return f"-{show(expr.operand)}"
    if isinstance(expr, Not):
        return f"not {show(expr.operand)}"
    if isinstance(expr, Func):
        return f"{expr.name}({', '.join(show(a) for a in expr.args)})"
    return f"({show(expr.left)} {expr.op} {show(expr.right)})"
