"""The frontend's reports of what other stages met of its rules (`pgraph.findings`): a unit
suffix after a `target` limit or a `cost`, which the grammar accepts so that the form checks can
say what to write instead (PG001, with the fix)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from pgraph.diagnostics import DiagnosticBag, Edit, Fix
from pgraph.expr import Name, Num, show
from pgraph.findings import UnitSuffix
from pgraph.frontend.unparse import expr as unparse_expr

#: Multiplier of each byte unit (decimal and binary prefixes), for the fix the PG001 hint shows.
BYTE_UNITS = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12, "KiB": 2**10, "MiB": 2**20,
              "GiB": 2**30, "TiB": 2**40, "K": 2**10, "M": 2**20, "G": 2**30}
#: Costs are in µs: the factor that turns each time unit into µs.
TIME_UNITS = {"us": 1, "µs": 1, "ms": 1000, "s": 1_000_000}


def unit_suffix(f: UnitSuffix, bag: DiagnosticBag) -> None:
    """PG001: the unit is not part of the language; the hint and the fix write the plain number
    (a byte unit of the heap and a time unit of a cost become a factor)."""
    key, unit, span, expr = f.key, f.unit, f.span, f.expr
    assert span is not None  # (the form checks hand only suffixes they saw)
    value = show(expr)
    factor = 1
    if f.target and key == "heap" and unit in BYTE_UNITS:
        factor = BYTE_UNITS[unit]
        text = f"`heap = {value} * {factor}` ({unit} in bytes)" if factor != 1 else f"`heap = {value}`"
        hint = f"limits are plain numbers and the heap is in bytes: write {text}"
    elif f.target:
        hint = f"`{key}` is a plain count: write `{key} = {value}`"
    elif unit in TIME_UNITS:
        factor = TIME_UNITS[unit]
        text = f"`cost {key} = {value}`" if factor == 1 else f"`cost {key} = {value} * {factor}`"
        hint = f"costs are plain numbers of µs: write {text}"
    else:
        hint = f"costs are plain numbers of µs: write `cost {key} = {value}`"
    if factor == 1:
        edit = Edit.delete(span)
    elif isinstance(expr, (Num, Name)):
        edit = Edit(span, f"* {factor}")
    else:  # `2 + 254 MiB` -> `(2 + 254) * 1048576`
        edit = Edit(attrs.evolve(expr.span, end_line=span.end_line, end_col=span.end_col),
                    f"({unparse_expr(expr)}) * {factor}")
    bag.add("PG001", f"unit suffix `{unit}` is not part of the language", span, f.notes, hint=hint,
            fix=Fix((edit,)))


#: The finding classes whose rules the frontend owns, and its reporter of each.
REPORTERS: dict[type, Callable[[Any, DiagnosticBag], None]] = {UnitSuffix: unit_suffix}
