"""Lowering's reports of what other stages met of its rules (`pgraph.findings`): the config file
of `--config` is read with the overrides, before lowering, and may give a constant twice (PG003,
the namespace of constants) or hold something else than `const` lines (PG019)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pgraph.diagnostics import DiagnosticBag, Note
from pgraph.findings import NotAnOverride, OverriddenTwice


def overridden_twice(f: OverriddenTwice, bag: DiagnosticBag) -> None:
    """PG003: a second override of one constant in the config file (it would silently win)."""
    bag.add("PG003", f"constant '{f.name}' is overridden twice in the config file", f.span,
            [Note("first override", f.first), *f.notes], hint="keep one of the two lines")


def not_an_override(f: NotAnOverride, bag: DiagnosticBag) -> None:
    """PG019: a config file item that is not a `const` line."""
    bag.add("PG019", "a config file holds only `const` overrides", f.span, f.notes)


#: The finding classes whose rules lowering owns, and its reporter of each.
REPORTERS: dict[type, Callable[[Any, DiagnosticBag], None]] = {
    OverriddenTwice: overridden_twice,
    NotAnOverride: not_an_override,
}
