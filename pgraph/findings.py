"""Findings: what one stage meets of a rule that another stage owns.

Each diagnostic code has one owning stage (`pgraph.pipeline.CODE_OWNERS`): only that stage's
modules name the code and write its message. A stage at work may meet a case of a rule it does
not own: lowering folds a constant that divides by zero (PG018 is the planner's rule, checked
on every evaluation), the form checks see `tiles` with no wave (PG021, the planner's wave
coverage), the config file gives a constant twice (PG003, the namespaces of lowering). It then
does not report it: it hands the owner a record of what it met, `bag.found(record)`, with the
facts and no code. The owner's reporter for that record class (each owning room's
`findings.REPORTERS`, registered on the bag by `pgraph.pipeline.owned_bag`) turns it into the
diagnostic at once, so the diagnostics of a run, their order and the stage that stops the
pipeline are what they would be had the finder reported it itself.

A record is only data of the core (spans, notes, expressions): every room may make one.
"""

from __future__ import annotations

import attrs

from pgraph import records
from pgraph.diagnostics import Note
from pgraph.expr import Expr
from pgraph.source import Span


@records.value
@attrs.frozen(repr=False, eq=False, kw_only=True)
class Finding:
    """A case of a rule met by a stage that does not own it. `notes` are the finder's (the include
    chain of the file it was met in); the reporter puts them after its own."""

    span: Span | None
    notes: tuple[Note, ...] = ()


# ---- the frontend's rules (met by the form checks) ----

@records.value
@attrs.frozen(repr=False, eq=False, kw_only=True)
class UnitSuffix(Finding):
    """PG001: a unit suffix after a `target` limit (`target=True`) or a `cost` (`span`: the suffix)."""

    key: str
    unit: str
    expr: Expr
    target: bool


# ---- lowering's rules (met when the overrides are read) ----

@records.value
@attrs.frozen(repr=False, eq=False, kw_only=True)
class OverriddenTwice(Finding):
    """PG003: the config file overrides constant `name` a second time (`first`: the first line)."""

    name: str
    first: Span | None


@records.value
@attrs.frozen(repr=False, eq=False, kw_only=True)
class NotAnOverride(Finding):
    """PG019: an item of the config file that is not a `const` line."""


# ---- the planner's rules (met while parsing, lowering and checking forms) ----

@records.value
@attrs.frozen(repr=False, eq=False, kw_only=True)
class LiteralTooLarge(Finding):
    """PG018: an integer literal of `digits` decimal digits, past the limit of 2**`bits`."""

    digits: int
    bits: int


@records.value
@attrs.frozen(repr=False, eq=False, kw_only=True)
class ConstantCycle(Finding):
    """PG018: constant `name` is defined in terms of itself."""

    name: str


@records.value
@attrs.frozen(repr=False, eq=False, kw_only=True)
class ConstantChain(Finding):
    """PG018: constant `name` is reached through more than `limit` constants, each defined by the next."""

    name: str
    limit: int


@records.value
@attrs.frozen(repr=False, eq=False, kw_only=True)
class Unevaluable(Finding):
    """PG018: an expression that cannot be evaluated (`message`: the evaluator's, pgraph.expr.EvalError)."""

    message: str


@records.value
@attrs.frozen(repr=False, eq=False, kw_only=True)
class NotConstant(Finding):
    """PG018: `what` must be a constant but depends on the variables `names` (comma-joined)."""

    what: str
    names: str


@records.value
@attrs.frozen(repr=False, eq=False, kw_only=True)
class AtIndexSpace(Finding):
    """PG020: `at TASK` given an index space (`span`: its first axis)."""

    task: str


@records.value
@attrs.frozen(repr=False, eq=False, kw_only=True)
class MissingIndexSpace(Finding):
    """PG020: an `spmd`, `parallel` or `tiles` declaration (`kind`) with no index space."""

    task: str
    kind: str


@records.value
@attrs.frozen(repr=False, eq=False, kw_only=True)
class NoWave(Finding):
    """PG021: a `tiles` declaration with no wave."""

    tileset: str


@records.value
@attrs.frozen(repr=False, eq=False, kw_only=True)
class TableNeedsIndex(Finding):
    """PG039: a call of kernels table `table` without an index (`size` members, declared at `declared`)."""

    table: str
    size: int
    declared: Span


@records.value
@attrs.frozen(repr=False, eq=False, kw_only=True)
class BlockKernelIndex(Finding):
    """PG039: the kernel index of a call of table `table` uses SPMD block index `var`."""

    table: str
    var: str


@records.value
@attrs.frozen(repr=False, eq=False, kw_only=True)
class KernelTakesNoIndex(Finding):
    """PG039: a call of kernel `kernel` (not a table) with an index."""

    kernel: str
