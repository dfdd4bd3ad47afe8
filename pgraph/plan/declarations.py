"""Checks of declarations: shapes (PG006, PG018), views (PG024), asserts (PG008), target limits and
costs (PG006), loop carries (PG029)."""

from __future__ import annotations

import math

from pgraph.diagnostics import DiagnosticBag, Note
from pgraph.expr import BinOp, EvalError, Expr, Num, evaluate, free_vars
from pgraph.findings import ConstantChain, ConstantCycle, LiteralTooLarge, NotConstant, Unevaluable
from pgraph.ir.program import Program
from pgraph.kinds import CarryKind, Storage
from pgraph.plan.base import ProgramCheck
from pgraph.source import Span


def magnitude(v: int) -> str:
    """A huge integer in words that never fails to print: `1.238e+19`, or `a 310-digit number`."""
    if v.bit_length() <= 1000:
        return f"{float(v):.3e}"
    return f"a {len(str(abs(v))):,}-digit number"


class ShapesCheck(ProgramCheck):
    """PG006 negative and PG018 oversized dimensions (tensors, views, kernel parameters); PG024 view sizes."""

    name = "shapes"

    def run(self, program: Program, bag: DiagnosticBag) -> None:
        for t in program.tensors.values():
            self.dims(t.shape, t.dim_spans, t.span, bag)
        for k in program.kernels.values():
            for prm in k.params:
                if prm.shape is not None:
                    self.dims(prm.shape, prm.dim_spans, prm.span, bag)
        for t in program.tensors.values():
            if t.storage is not Storage.VIEW or any(n < 0 for n in t.shape):
                continue
            base = program.tensors[t.root]
            if math.prod(t.shape) != base.numel:
                bag.add("PG024", f"view '{t.name}' has {math.prod(t.shape)} elements but '{base.name}' has "
                        f"{base.numel}", t.span, [Note(f"'{base.name}' declared here", base.span)],
                        hint="a view is a row-major reshape: the element counts must match")

    @staticmethod
    def dims(shape: tuple[int, ...], spans: tuple[Span, ...], fallback: Span, bag: DiagnosticBag) -> None:
        for i, v in enumerate(shape):  # the first bad dimension of a shape is reported
            span = spans[i] if i < len(spans) else fallback
            if v < 0:
                bag.add("PG006", f"shape dimension is negative ({v})", span, hint="shapes count elements, >= 0")
                return
            if v.bit_length() > 63:  # sizes are int64 at most on the device; keeps byte counts printable
                bag.add("PG018", f"shape dimension {magnitude(v)} exceeds 2**63", span,
                        hint="check the constants the shape uses")
                return


class AssertsCheck(ProgramCheck):
    """PG008: an assert that is false for the folded constants (PG018: one that uses non-constants)."""

    name = "asserts"

    def run(self, program: Program, bag: DiagnosticBag) -> None:
        for a in program.asserts:
            if not isinstance(a.expr, Num):
                bag.add("PG018", "an assert may only use constants", a.span)
                continue
            if a.expr.value:
                continue
            detail = describe_values(a.source, program.consts)
            msg = f"assert failed: {a.message}" if a.message else "assert failed"
            bag.add("PG008", f"{msg} ({detail})" if detail else msg, a.span,
                    hint="fix the constants (or the -D/--config overrides) so the invariant holds")


def describe_values(expr: Expr, consts: dict[str, int]) -> str:
    """`A = 5, B = 1024, left side = 5120, right side = 5121`: the values of a failed assert."""
    names = sorted(free_vars(expr))
    parts = [f"{n} = {consts[n]}" for n in names if n in consts]
    if isinstance(expr, BinOp) and expr.op in ("==", "!=", "<", "<=", ">", ">="):
        env = {n: consts[n] for n in names if n in consts}
        try:
            left, right = evaluate(expr.left, env), evaluate(expr.right, env)
            parts.append(f"left side = {left}, right side = {right}")
        except EvalError:
            pass
    return ", ".join(parts)


class SettingsCheck(ProgramCheck):
    """PG006: a target limit that is not positive, a cost that is negative."""

    name = "settings"

    def run(self, program: Program, bag: DiagnosticBag) -> None:
        for s in program.target_items:
            if s.value <= 0:
                bag.add("PG006", f"target limit '{s.key}' must be positive, got {s.value}", s.span)
        for s in program.cost_items:
            if s.value < 0:
                bag.add("PG006", f"cost of '{s.key}' is negative ({s.value})", s.span)


class CarriesCheck(ProgramCheck):
    """PG029: a loop carry that mixes a task and a tensor, or tensors of different types."""

    name = "carries"

    def run(self, program: Program, bag: DiagnosticBag) -> None:
        for carry in program.carries.values():
            if carry.kind is CarryKind.TASK:
                if carry.next in program.tensors:
                    bag.add("PG029", f"carry '{carry.name}' starts as task '{carry.init}' but continues with "
                            f"'{carry.next}', which is a tensor", carry.span)
                continue
            nxt = program.tensors.get(carry.next)
            init = program.tensors[carry.init]
            if nxt is None:
                bag.add("PG029", f"carry '{carry.name}' starts as tensor '{carry.init}' but continues with "
                        f"'{carry.next}', which is not a tensor", carry.span)
            elif (nxt.dtype, nxt.shape) != (init.dtype, init.shape):
                bag.add("PG029", f"carry '{carry.name}': '{carry.init}' is {init.dtype}{list(init.shape)} but "
                        f"'{carry.next}' is {nxt.dtype}{list(nxt.shape)}", carry.span,
                        [Note(f"'{carry.next}' declared here", nxt.span)])


# ---- PG018 met before the Program exists (handed over: pgraph.findings) ----

def literal_too_large(f: LiteralTooLarge, bag: DiagnosticBag) -> None:
    """PG018: an integer literal past the evaluator's limit (met by the parser)."""
    bag.add("PG018", f"an integer literal of {f.digits:,} digits is too large (the limit is 2**{f.bits})", f.span,
            f.notes, hint="integers are decimal constants; write a shorter value")


def constant_cycle(f: ConstantCycle, bag: DiagnosticBag) -> None:
    """PG018: a constant defined in terms of itself (met by lowering's folding)."""
    bag.add("PG018", f"constant '{f.name}' is defined in terms of itself", f.span, f.notes)


def constant_chain(f: ConstantChain, bag: DiagnosticBag) -> None:
    """PG018: a chain of constants deeper than lowering folds."""
    bag.add("PG018", f"constant '{f.name}' is reached through a chain of more than {f.limit} constants each "
            "defined by the next", f.span, f.notes, hint="define the constants in terms of earlier ones")


def unevaluable(f: Unevaluable, bag: DiagnosticBag) -> None:
    """PG018: an expression of constants the evaluator refuses (division by zero, an unknown function)."""
    bag.add("PG018", f.message, f.span, f.notes)


def not_constant(f: NotConstant, bag: DiagnosticBag) -> None:
    """PG018: a value that must be a constant depends on variables."""
    bag.add("PG018", f"{f.what} must be a constant, but it depends on {f.names}", f.span, f.notes)
