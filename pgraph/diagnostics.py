"""Coded diagnostics: the rule table, Diagnostic values, text and JSON rendering."""

from __future__ import annotations

import enum
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs

from pgraph import records
from pgraph.kinds import InternalError
from pgraph.source import Span


class Severity(enum.Enum):
    """How bad a diagnostic is. Only ERROR makes `pgraph` exit 1."""

    ERROR = "error"
    WARNING = "warning"
    NOTE = "note"


@records.value
@attrs.frozen(repr=False, eq=False)
class Rule:
    """A stable diagnostic code: `PG###`, a kebab-case slug and a default severity."""

    code: str
    slug: str
    severity: Severity
    summary: str


def _rules(*rows: tuple[str, str, Severity, str]) -> dict[str, Rule]:
    return {code: Rule(code, slug, sev, summary) for code, slug, sev, summary in rows}


E, W, N = Severity.ERROR, Severity.WARNING, Severity.NOTE

#: Every code pgraph can emit. Codes are stable once published; docs/rules.md
#: documents each one and tests/diagnostics/ holds a failing and a fixed spec.
RULES: dict[str, Rule] = _rules(
    ("PG001", "syntax-error", E, "the text does not follow the .pgl grammar"),
    ("PG002", "undefined-name", E, "a name is used but never declared"),
    ("PG003", "duplicate-name", E, "a name is declared twice in one namespace"),
    ("PG004", "include-cycle", E, "files include each other in a cycle"),
    ("PG005", "include-not-found", E, "an included file cannot be read"),
    ("PG006", "negative-extent", E, "a range, shape or slice has a negative extent"),
    ("PG007", "region-out-of-bounds", E, "a region reaches outside its tensor"),
    ("PG008", "assert-failed", E, "an `assert` is false for the folded constants"),
    ("PG009", "kernel-arg-count", E, "a call passes the wrong number of arguments"),
    ("PG010", "kernel-arg-direction", E, "an argument's access conflicts with the parameter direction"),
    ("PG011", "kernel-arg-dtype", E, "an argument's dtype differs from the parameter's"),
    ("PG012", "kernel-arg-shape", E, "an argument's shape differs from the parameter's"),
    ("PG013", "dependency-cycle", E, "tasks wait on each other in a cycle"),
    ("PG014", "dep-scope-closed", E, "a dep names a task whose scope has already closed"),
    ("PG015", "empty-dep", W, "a dep selects no logical tile"),
    ("PG016", "duplicate-deps-folded", N, "duplicate dep entries fold to one edge each"),
    ("PG017", "unknown-override", E, "-D/--config names a constant the spec does not declare"),
    ("PG018", "bad-expression", E, "an expression cannot be evaluated (division by zero, unknown function)"),
    ("PG019", "wrong-kind", E, "a name refers to the wrong kind of thing"),
    ("PG020", "rank-mismatch", E, "a region or shape has the wrong number of dimensions"),
    ("PG021", "wave-coverage", E, "the waves of a tile set do not cover each tile exactly once"),
    ("PG022", "scope-nesting", E, "a scope is nested where the runtime rejects it"),
    ("PG023", "ring-mismatch", E, "a scope's derived ring differs from the ring stated for it"),
    ("PG024", "view-size-mismatch", E, "a view's shape holds a different element count than its base"),
    ("PG025", "kernel-param-order", E, "a kernel declares a scalar before a tensor parameter"),
    ("PG026", "dep-out-of-range", E, "a dep selects a tile index outside the tile space"),
    ("PG027", "wave-block-dep", E, "an SPMD wave's deps use an index that varies across its blocks"),
    ("PG028", "missing-kernel-call", E, "a compute task has no `call`"),
    ("PG029", "carry-mismatch", E, "a loop carry mixes a task and a tensor, or tensors of different types"),
    ("PG030", "too-many-errors", N, "diagnostics were cut off after the first 100 errors"),
    ("PG031", "expansion-too-large", E, "the instance graph is too large to enumerate (a runaway index range)"),
    ("PG032", "dep-on-later-task", E, "a dep names a task that is submitted later in program order"),
    ("PG033", "fragment-cycle", E, "a fragment uses itself, directly or through other fragments"),
    ("PG034", "ambiguous-entry", E, "the root file declares no entry and several included files do"),
    ("PG035", "interleave-content", E, "an `interleave` block holds a scope, a loop or another interleave block"),
    ("PG036", "flag-misuse", E, "`sync_start` on a task that is not an SPMD grid or `manual_dep` on an external tensor (error), or a flag given twice (warning)"),
    ("PG037", "tensor-scope-closed", E, "a tensor is used outside the scope that allocates it (its buffer is freed there)"),
    ("PG038", "runtime-dim", E, "a `runtime` tensor dimension or `dim(...)` is used where a value must be fixed when "
     "the spec is planned, or `dim` names no tensor dimension"),
    ("PG039", "kernel-table", E, "a `kernels` table mixes signatures, or a call's kernel index is missing, leaves the "
     "table or varies across the blocks of one task"),
    ("PG040", "block-scalar", E, "a scalar argument uses an SPMD block index: one task passes one argument payload to "
     "every block"),
    ("PG041", "bad-allow", E, "an `allow(...)` names an unknown code, gives no reason, or stands before no declaration"),
    ("PG042", "unused-allow", W, "an `allow(...)` (or `--allow`) waives nothing in this run"),
    # ---- planner rules (PG1xx) ----
    ("PG100", "race", E, "two tasks touch overlapping regions, one writing, with no ordering path"),
    ("PG101", "manual-scope-boundary", E, "a task inside a manual scope and one outside conflict with no explicit edge"),
    ("PG102", "spmd-block-overlap", E, "blocks of one SPMD grid write overlapping regions"),
    ("PG103", "false-serialization", W, "separate writers of disjoint slices that the runtime will serialize"),
    ("PG104", "dummy-effect", W, "what a dependency-only dummy really does (note, warning or error by case)"),
    ("PG105", "early-dispatch-blocked", N, "one unflagged producer makes consumers ineligible for early dispatch"),
    ("PG106", "early-flag-no-effect", N, "an early flag whose consumers are all ineligible anyway"),
    ("PG107", "ring-clamped", N, "a scope deeper than 3 shares ring 3 with its parent"),
    ("PG108", "ring3-nested-scopes", W, "nested open scopes on ring 3: outer tasks cannot retire while inner ones allocate"),
    ("PG109", "scope-task-window", E, "one scope holds more tasks than the task window allows (SCOPE_DEADLOCK, code 1)"),
    ("PG110", "heap-ring-capacity", E, "open scopes on a ring hold more heap than the ring has (HEAP_RING_DEADLOCK, code 2)"),
    ("PG111", "dep-pool-capacity", E, "live fanout entries exceed the ring's dep pool (DEP_POOL_OVERFLOW, code 4)"),
    ("PG112", "tensormap-capacity", E, "live TensorMap entries exceed the pool (TENSORMAP_OVERFLOW, code 11)"),
    ("PG113", "sync-start-capacity", E, "a sync_start grid has more blocks than cores of its shape (code 7)"),
    ("PG114", "task-arg-limits", E, "a task or tensor exceeds what the runtime's descriptors hold (32 tensors, 16 "
                                    "scalars, 5 dimensions, uint32 shapes and offsets)"),
    ("PG115", "redundant-edge", N, "an explicit edge is implied by another path"),
    ("PG116", "funnel", N, "many consumers of one producer already wait on a common node"),
    ("PG117", "dead-task", N, "a task's outputs are never read"),
    ("PG118", "unused-tensor", N, "a tensor is declared but never accessed"),
    ("PG119", "sync-start-starved", E, "a sync_start grid is wider than the cores its shape can have free (warning: beside a task that can hold one of its units staged early; note: beside tasks that may run with it)"),
    ("PG120", "ring-task-window", E, "open scopes on one ring hold more live tasks than its task window (code 3)"),
    ("PG121", "budget-exceeded", E, "a figure of the plan is over the spec's `budget` for it"),
    ("PG122", "uncovered-read", E, "a task reads elements of an allocation that no task ordered before it writes"),
    ("PG123", "old-compiler-ungated", W, "the target's older compiler drops an empty-deps dummy: its consumers lose their gate"),
    ("PG124", "created-tensor", E, "a `created` tensor is touched before its creating write, created by a partial or non-`out` write, created twice, or viewed"),
)


@records.value
@attrs.frozen(repr=False, eq=False)
class Note:
    """A secondary message, optionally pointing at another span."""

    message: str
    span: Span | None = None


@records.value
@attrs.frozen(repr=False, eq=False)
class Edit:
    """Replace the text of `span` (end exclusive; an empty span inserts) with `text`."""

    span: Span
    text: str

    @classmethod
    def insert(cls, near: Span, line: int, col: int, text: str) -> Edit:
        """Insert `text` before (line, col) of `near`'s file."""
        return cls(attrs.evolve(near, line=line, col=col, end_line=line, end_col=col), text)

    @classmethod
    def delete(cls, span: Span) -> Edit:
        """Delete the text of `span` and the blank before it (a flag, a word)."""
        line = span.file.line(span.line)
        col = span.col - 1 if span.col > 1 and line[span.col - 2] == " " else span.col
        return cls(attrs.evolve(span, col=col), "")


@records.value
@attrs.frozen(repr=False, eq=False)
class Fix:
    """The edits that carry out a diagnostic's hint, where the hint is mechanical (rustc's
    machine-applicable suggestion): applied to the sources, they remove the diagnostic."""

    edits: tuple[Edit, ...]


@records.value
@attrs.frozen(repr=False, eq=False)
class Waiver:
    """An allowance: warnings and notes of `codes` are waived (not shown, counted as allowed).

    Inline (`allow(PG104, "reason")` before a declaration): `span` is the allow, `within` the
    declaration it stands before, and only diagnostics whose primary span lies inside `within`
    are waived. From the command line (`--allow CODE`, `-W CODE`): `span` and `within` are
    None and every diagnostic of the code is. Errors are never waived (docs/tools.md).
    `deferred`: the declaration is a `budget sim_us`, whose figure only `pgraph sim` computes, so
    only that command can tell whether the allow waives anything."""

    codes: tuple[str, ...]
    reason: str
    span: Span | None = None
    within: Span | None = None
    deferred: bool = False

    def covers(self, diag: Diagnostic) -> bool:
        """Whether `diag` is of one of the codes and, for an inline allow, inside the declaration."""
        if diag.code not in self.codes:
            return False
        if self.within is None:
            return True
        s, w = diag.span, self.within
        if s is None or s.filename != w.filename:
            return False
        return (w.line, w.col) <= (s.line, s.col) <= (w.end_line, w.end_col)

    def origin(self) -> str:
        """How the allow is written, for messages: `allow(PG104)` at its place, or `--allow PG104`."""
        codes = ", ".join(self.codes)
        return f"`allow({codes})` at {self.span.location()}" if self.span is not None else f"`--allow {codes}`"


@records.value
@attrs.frozen(repr=False, eq=False)
class Diagnostic:
    """One finding: code, message, primary span, notes, a fix hint and, where the hint is
    mechanical, the `fix` that applies it."""

    code: str
    message: str
    span: Span | None = None
    notes: tuple[Note, ...] = ()
    hint: str | None = None
    severity: Severity | None = None
    fix: Fix | None = None

    @property
    def rule(self) -> Rule:
        """The rule table entry of this diagnostic's code."""
        return RULES[self.code]

    @property
    def level(self) -> Severity:
        """The effective severity (the rule's default unless overridden)."""
        return self.severity or self.rule.severity

    def sort_key(self) -> tuple[str, int, int, str, str]:
        """Deterministic order: file, line, column, code, message."""
        if self.span is None:
            return ("", 0, 0, self.code, self.message)
        return (self.span.filename, self.span.line, self.span.col, self.code, self.message)


def _delete_allow(span: Span) -> Edit:
    """The edit that deletes an `allow(...)` at `span`: its whole lines when nothing but blanks
    and a comment share them, else the allow and the blanks after it."""
    first, last = span.file.line(span.line), span.file.line(span.end_line)
    if not first[:span.col - 1].strip() and not last[span.end_col - 1:].split("#")[0].strip():
        return Edit(attrs.evolve(span, col=1, end_line=span.end_line + 1, end_col=1), "")
    rest = last[span.end_col - 1:]
    return Edit(attrs.evolve(span, end_col=span.end_col + len(rest) - len(rest.lstrip())), "")


#: Errors kept per run; later ones are counted in one PG030 note (like rustc/gcc error limits).
MAX_ERRORS = 100


class DiagnosticBag:
    """Collects diagnostics from every stage; stages append, never raise.

    After MAX_ERRORS distinct errors, further errors are dropped and counted in a single
    PG030 note (sorted last); warnings and notes are always kept.
    """

    def __init__(self) -> None:
        self.items: list[Diagnostic] = []
        #: diagnostics an allow waived (`waive`), with the allow that waived each; the allows
        #: `waive` applied (a command that adds diagnostics later applies them again)
        self.allowed: list[tuple[Diagnostic, Waiver]] = []
        self.waivers: list[Waiver] = []
        self._seen: set[tuple[object, ...]] = set()
        self._errors = 0
        self.suppressed = 0
        #: Called with the span of every diagnostic added; the notes they return are appended
        #: (lowering registers one that points at the `use` statements of fragments).
        self.note_hooks: list[Callable[[Span], Iterable[Note]]] = []
        #: The owner's reporter of each class of finding (`pgraph.findings`; `pgraph.pipeline.owned_bag`
        #: registers every room's), and the findings handed to this bag before it had one.
        self.reporters: dict[type, Callable[[Any, DiagnosticBag], None]] = {}
        self.pending: list[Any] = []
        #: With verification on (`pgraph.pipeline.owned_bag`), the owning stage of each code: a code
        #: added from a module of another stage is an InternalError (see `_check_owner`).
        self.owners: dict[str, str] | None = None

    def found(self, finding: Any) -> None:
        """Hand a `pgraph.findings` record to the stage that owns its rule: its reporter adds the
        diagnostic now; a bag with no reporter for it (a file's own parse, `frontend.loader`) keeps
        it in `pending` until `forward` hands it on."""
        report = self.reporters.get(type(finding))
        if report is None:
            self.pending.append(finding)
        else:
            report(finding, self)

    def forward(self, into: DiagnosticBag, notes: Sequence[Note] = ()) -> None:
        """Add this bag's diagnostics and pending findings to `into`, with `notes` after their own."""
        for d in self.items:
            into.add(d.code, d.message, d.span, [*d.notes, *notes], d.hint, d.severity, d.fix)
        for f in self.pending:
            into.found(attrs.evolve(f, notes=(*f.notes, *notes)))

    def add(
        self,
        code: str,
        message: str,
        span: Span | None = None,
        notes: Iterable[Note] = (),
        hint: str | None = None,
        severity: Severity | None = None,
        fix: Fix | None = None,
    ) -> Diagnostic:
        """Append a diagnostic (exact duplicates are kept once) and return it."""
        if code not in RULES:
            raise KeyError(f"unknown diagnostic code {code}")
        if self.owners is not None:
            self._check_owner(code)
        extra = [n for hook in self.note_hooks for n in hook(span)] if span is not None else []
        diag = Diagnostic(code, message, span, (*notes, *extra), hint, severity, fix)
        key = (code, message, span and (span.filename, span.line, span.col))
        if key in self._seen:
            return diag
        self._seen.add(key)
        if diag.level is Severity.ERROR:
            if self._errors >= MAX_ERRORS:
                self._suppress()
                return diag
            self._errors += 1
        self.items.append(diag)
        return diag

    def _check_owner(self, code: str) -> None:
        """InternalError unless the module that adds `code` (the first caller outside this module:
        `forward` passes on what its caller read) is in the package of the code's owner."""
        frame = sys._getframe(2)
        while frame.f_back is not None and frame.f_globals.get("__name__") == __name__:
            frame = frame.f_back
        module = str(frame.f_globals.get("__name__", "?"))
        parts = module.split(".")
        room = parts[1] if len(parts) > 1 and parts[0] == "pgraph" else module
        owner = self.owners.get(code) if self.owners else None
        if room != owner:
            raise InternalError(f"{module} reports {code}, whose owning stage is {owner} "
                                "(pgraph.pipeline.CODE_OWNERS: hand it over as a pgraph.findings record)")

    def _suppress(self) -> None:
        """Count one dropped error in the (single) PG030 note."""
        self.suppressed += 1
        self.items = [d for d in self.items if d.code != "PG030"]
        self.items.append(Diagnostic(
            "PG030",
            f"{self.suppressed} more error(s) not shown: only the first {MAX_ERRORS} errors are reported",
            hint="fix the errors above first; later ones are often consequences of them",
        ))

    def waive(self, waivers: Sequence[Waiver], report_unused: bool, deferred: bool = False) -> None:
        """Move the warnings and notes an allow covers from `items` to `allowed`.

        An error stays (an allow never waives one) and gets a note naming the allow. With
        `report_unused` (the run reached the end of the planner, so every rule had its say), an
        allow that covered nothing is PG042: a warning for an inline allow (its text rots in the
        spec), a note for `--allow` (the command line of this run). Only the allows whose
        `deferred` is `deferred` are reported: the planner's run reports the others, `pgraph sim`
        those of `budget sim_us` lines."""
        self.waivers.extend(w for w in waivers if w not in self.waivers)
        if not waivers:
            return
        used = [False] * len(waivers)
        keep: list[Diagnostic] = []
        for d in self.items:
            hits = [i for i, w in enumerate(waivers) if w.covers(d)]
            for i in hits:
                used[i] = True
            if not hits:
                keep.append(d)
            elif d.level is Severity.ERROR:
                told = tuple(Note(f"{waivers[i].origin()} does not waive an error") for i in hits)
                keep.append(attrs.evolve(d, notes=(*d.notes, *told)))
            else:
                self.allowed.append((d, waivers[hits[0]]))
        self.items = keep
        if not report_unused:
            return
        for w, hit in zip(waivers, used):
            if hit or w.deferred is not deferred:
                continue
            codes = ", ".join(w.codes)
            if w.span is not None:
                self.items.append(Diagnostic(
                    "PG042", f"`allow({codes})` waives nothing: no diagnostic of {codes} is reported in the "
                    "declaration below it", w.span,
                    hint="delete the allow (the warning it was written for is gone)", fix=Fix((_delete_allow(w.span),))))
            else:
                self.items.append(Diagnostic(
                    "PG042", f"`--allow {codes}` waives nothing in this run", None, severity=Severity.NOTE,
                    hint="drop the option"))

    def merge(self, other: DiagnosticBag) -> None:
        """Append what `other` holds (diagnostics and waived ones; its codes were checked when
        they were added) to this bag: a command's own findings after the planner's."""
        self.items.extend(other.items)
        self.allowed.extend(other.allowed)

    @property
    def has_errors(self) -> bool:
        """True when at least one diagnostic has ERROR severity (or a finding waits for its owner:
        every rule a finding stands for is an error)."""
        return bool(self.pending) or any(d.level is Severity.ERROR for d in self.items)

    def error_count(self) -> int:
        """Number of ERROR diagnostics."""
        return sum(1 for d in self.items if d.level is Severity.ERROR)

    def sorted(self) -> list[Diagnostic]:
        """The diagnostics in deterministic source order (InternalError when a finding was never
        reported: a bag that met one must have its owner's reporter)."""
        if self.pending:
            raise InternalError(f"{type(self.pending[0]).__name__} was found but no stage reported it "
                                "(the bag has no reporter for it: pgraph.pipeline.owned_bag)")
        return sorted(self.items, key=lambda d: (d.code == "PG030", d.sort_key()))


def render_text(diag: Diagnostic) -> str:
    """Render like rustc: `file:line:col: error[PG012 slug]: message`, source, carets, notes."""
    rule = diag.rule
    where = diag.span.location() + ": " if diag.span else "pgraph: "
    out = [f"{where}{diag.level.value}[{rule.code} {rule.slug}]: {diag.message}"]
    if diag.span:
        out.extend(diag.span.render())
    for note in diag.notes:
        if note.span:
            out.append(f"  note: {note.span.location()}: {note.message}")
            out.extend("  " + line for line in note.span.render())
        else:
            out.append(f"  note: {note.message}")
    if diag.hint:
        out.append(f"  hint: {diag.hint}")
    return "\n".join(out)


def render_all_text(diags: Sequence[Diagnostic]) -> str:
    """All diagnostics, one blank line apart, plus a count line when there are any."""
    if not diags:
        return ""
    errors = sum(1 for d in diags if d.level is Severity.ERROR)
    warnings = sum(1 for d in diags if d.level is Severity.WARNING)
    body = "\n\n".join(render_text(d) for d in diags)
    return f"{body}\n\n{errors} error(s), {warnings} warning(s)\n"


def render_note_summary(notes: Sequence[Diagnostic]) -> str:
    """The notes left out of a text report, grouped by code with counts (most frequent first,
    then by code), one line per code; "" when there are none. `--notes` shows them in full."""
    if not notes:
        return ""
    counts: dict[str, int] = {}
    for d in notes:
        counts[d.code] = counts.get(d.code, 0) + 1
    width = max(len(f"{c} {RULES[c].slug}") for c in counts)
    lines = [f"{len(notes)} note(s) not shown (--notes shows them in full; `pgraph explain CODE` says what each means):"]
    for code, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        lines.append(f"  {f'{code} {RULES[code].slug}':<{width}}  {n:>3}")
    return "\n".join(lines) + "\n"


def render_allowed(allowed: Sequence[tuple[Diagnostic, Waiver]], full: bool = False) -> str:
    """The diagnostics allows waived: one count line by code (most frequent first, then by
    code), and with `full` (`--notes`) one line per diagnostic with the allow and its reason;
    "" when there are none."""
    if not allowed:
        return ""
    counts: dict[str, int] = {}
    for d, _ in allowed:
        counts[d.code] = counts.get(d.code, 0) + 1
    parts = ", ".join(f"{code} {RULES[code].slug} {n}" for code, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    lines = [f"{len(allowed)} allowed ({parts}): waived by `allow(...)` or `--allow`"
             + ("" if full else "; --notes lists them")]
    if full:
        for d, w in sorted(allowed, key=lambda dw: dw[0].sort_key()):
            where = d.span.location() + ": " if d.span else ""
            why = f": {w.reason}" if w.reason else ""
            lines.append(f"  {where}{d.level.value}[{d.code} {d.rule.slug}]: {d.message} (allowed by {w.origin()}{why})")
    return "\n".join(lines) + "\n"


def _span_json(span: Span | None) -> dict[str, object] | None:
    if span is None:
        return None
    return {
        "file": span.filename,
        "line": span.line,
        "col": span.col,
        "end_line": span.end_line,
        "end_col": span.end_col,
    }


def diagnostic_json(diag: Diagnostic) -> dict[str, object]:
    """A JSON-ready dict of one diagnostic."""
    return {
        "code": diag.code,
        "slug": diag.rule.slug,
        "severity": diag.level.value,
        "message": diag.message,
        "span": _span_json(diag.span),
        "notes": [{"message": n.message, "span": _span_json(n.span)} for n in diag.notes],
        "hint": diag.hint,
        "fix": None if diag.fix is None else [{"span": _span_json(e.span), "text": e.text} for e in diag.fix.edits],
    }


def render_json(diags: Sequence[Diagnostic]) -> str:
    """All diagnostics as a JSON array (sorted keys, stable)."""
    import json  # (only JSON output needs it: ~2 ms of a start)

    return json.dumps([diagnostic_json(d) for d in diags], indent=2, sort_keys=True)


def apply_edits(text: str, edits: Sequence[Edit]) -> str:
    """`text` with `edits` (all spans in it) applied, last position first (they must not overlap)."""
    lines = text.split("\n")
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)

    def offset(line: int, col: int) -> int:
        return starts[line - 1] + col - 1

    out = text
    for e in sorted(edits, key=lambda e: (e.span.line, e.span.col), reverse=True):
        a, b = offset(e.span.line, e.span.col), offset(e.span.end_line, e.span.end_col)
        out = out[:a] + e.text + out[b:]
    return out


#: Inserted texts that `merge_fixes` joins when several fixes insert at one position: a new
#: `deps(...)` clause, an entry appended to a deps list, a `taskids` declaration.
_JOINABLE = (
    (re.compile(r"^deps\((.+)\) $"), "deps({}) "),
    (re.compile(r"^ deps\((.+)\)$"), " deps({})"),
    (re.compile(r"^ taskids (.+)$"), " taskids {}"),
    (re.compile(r"^, (.+)$"), ", {}"),
)


def _join_inserts(texts: Sequence[str]) -> str:
    """One text for several insertions at one position: a `deps(a) ` and a `deps(b) ` become
    `deps(a, b) ` (likewise `, a` + `, b`, ` taskids a` + ` taskids b`); texts of no common form
    are written one after the other. Each entry is kept once."""
    for pattern, form in _JOINABLE:
        matches = [pattern.match(t) for t in texts]
        if all(matches):
            items: list[str] = []
            for m in matches:
                assert m is not None
                items.extend(x for x in (s.strip() for s in m.group(1).split(",")) if x not in items)
            return form.format(", ".join(items))
    return "".join(dict.fromkeys(texts))


def _edit_key(e: Edit) -> tuple[str, int, int, int, int]:
    path = e.span.file.path
    return (str(path.resolve()) if path is not None else e.span.filename,
            e.span.line, e.span.col, e.span.end_line, e.span.end_col)


def merge_fixes(fixes: Sequence[Fix]) -> tuple[list[Edit], list[int]]:
    """The edits of several fixes as one set that applies cleanly, and the fixes left out.

    Fixes are taken in order, each whole or not at all. An edit equal to one taken already
    (same span, same text) is taken once; insertions at one position are joined (`_join_inserts`:
    three diagnostics that each add `deps(seed) ` before one body add it once, and `deps(a) ` and
    `deps(b) ` become `deps(a, b) `); a fix with an edit that overlaps a different edit taken
    before it (or two of its own that do) is left out, and its index returned, so that a later
    run of `pgraph fix`, on the spec as this one leaves it, can offer it again.
    """
    taken: dict[tuple[str, int, int, int, int], Edit] = {}
    inserts: dict[tuple[str, int, int, int, int], list[str]] = {}
    skipped: list[int] = []

    def overlaps(k: tuple[str, int, int, int, int], other: tuple[str, int, int, int, int]) -> bool:
        if k[0] != other[0]:
            return False
        a, b, c, d = (k[1], k[2]), (k[3], k[4]), (other[1], other[2]), (other[3], other[4])
        if a == b or c == d:  # an insertion conflicts only with a replacement strictly around it
            point, (lo, hi) = (a, (c, d)) if a == b else (c, (a, b))
            return lo < point < hi
        return a < d and c < b

    for i, f in enumerate(fixes):
        new: dict[tuple[str, int, int, int, int], Edit] = {}
        ok = True
        for e in f.edits:
            k = _edit_key(e)
            if k[1:3] != k[3:5] and any(o == k and x.text != e.text for o, x in (*taken.items(), *new.items())):
                ok = False  # another text for the same span
            elif any(o != k and overlaps(k, o) for o in (*taken, *new)):
                ok = False
            if not ok:
                break
            if k in new and k[1:3] == k[3:5] and new[k].text != e.text:  # one fix inserting twice at one place
                e = attrs.evolve(e, text=new[k].text + e.text)
            new[k] = e
        if not ok:
            skipped.append(i)
            continue
        for k, e in new.items():
            if k[1:3] == k[3:5]:
                texts = inserts.setdefault(k, [])
                if e.text not in texts:
                    texts.append(e.text)
                taken[k] = attrs.evolve(e, text=_join_inserts(texts))
            else:
                taken[k] = e
    return list(taken.values()), skipped
