"""`pgraph export --deps-json`, `pgraph import` and `pgraph diff`: deps.json in, out, compared.

Exit codes: export/import 0 ok, 1 spec errors, 2 usage error (unreadable or malformed
deps.json, unwritable output); diff 0 no difference in tasks or edges, 1 differences, 2 usage
error (as diff(1)), 3 a side has errors: the report still compares whatever both sides plan (a
race leaves a plan; a syntax error does not) and lists the new diagnostics. `diff` is a what-if
of the specs' budgets: an overrun is a PG121 warning, listed with the budgeted figures.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from pgraph import records
from pgraph.backends.depsjson.diff import Change, DiffResult, LayerRow, Side, diff
from pgraph.backends.depsjson.export import SpecSide, export
from pgraph.backends.depsjson.model import DepsFormatError, DepsGraph, parse_stream, render
from pgraph.backends.target import emitter, plan_full
from pgraph.diagnostics import RULES, DiagnosticBag, Severity
from pgraph.pipeline import Options, UsageError, parse_define, plan_program
from pgraph.plan.base import Plan
from pgraph.plan.critical_path import CriticalPath
from pgraph.plan.figures import figures
from pgraph.source import MAX_CAPTURE_BYTES, input_error, open_input

Emit = Callable[[DiagnosticBag], None]
Write = Callable[[Path, str], None]


def full_options(opts: Options) -> Options:
    """`opts` as the deps-json target needs them (`needs_full`: deps.json lists every task)."""
    return attrs.evolve(opts, full=plan_full(emitter("deps-json"), opts.full))


def plan_spec(spec: str, opts: Options, emit: Emit) -> tuple[Plan | None, DiagnosticBag]:
    """Plan `spec` for the deps-json target (fully); on errors print them and return (None, bag)."""
    plan, bag = plan_program(spec, full_options(opts))
    if plan is None or bag.has_errors:
        emit(bag)
        return None, bag
    return plan, bag


def load_deps(path: str) -> DepsGraph:
    """Read and parse a deps.json as it streams (`parse_stream` over the one bounded reader,
    `pgraph.source.open_input`: a regular file of at most MAX_CAPTURE_BYTES); UsageError (exit
    2) for an unreadable or malformed file, at the first bad record, with its line and column."""
    try:
        with open_input(path, MAX_CAPTURE_BYTES) as raw, io.TextIOWrapper(raw, encoding="utf-8") as fh:
            return parse_stream(fh)
    except (OSError, UnicodeDecodeError) as err:
        raise UsageError(f"cannot read {path}: {input_error(err)}") from None
    except DepsFormatError as err:
        where = f"{path}:{err.line}:{err.col}" if err.line else path
        raise UsageError(f"{where}: not a deps.json: {err}") from None


def run_export(args: argparse.Namespace, opts: Options, emit: Emit, write: Write) -> int:
    """`pgraph export SPEC --deps-json OUT`: the deps-json target's file, and its counts (the
    spec's diagnostics first, on stderr)."""
    plan, bag = plan_spec(args.spec, opts, emit)
    if plan is None:
        return 1
    emit(bag)
    side = export(plan)  # what the deps-json target emits (its graph gives the counts printed)
    write(Path(args.deps_json), render(side.graph))
    g = side.graph
    print(f"wrote {args.deps_json}: {len(g.tasks):,} tasks, {len(g.tensors):,} tensors, {len(g.edges):,} edge records")
    return 0


# ---- import ------------------------------------------------------------------------------------


def summary_lines(name: str, g: DepsGraph) -> list[str]:
    """The `pgraph import` summary of a deps.json."""
    dummies = sum(t.is_dummy for t in g.tasks)
    rings = Counter(t.ring for t in g.tasks)
    scopes = Counter(t.scope for t in g.tasks)
    sources = Counter(e.source for e in g.edges)
    pairs = {(e.pred, e.succ) for e in g.edges}
    index = g.task_index()
    allocs = {e.pred for e in g.edges if e.pred not in index}
    overlap = Counter(e.overlap for e in g.edges if e.overlap)
    q = g.quirks
    lines = [
        f"{name}: {len(g.tasks):,} tasks ({len(g.tasks) - dummies:,} compute, {dummies:,} dummies), "
        f"{sum(t.block_num for t in g.tasks):,} blocks, {len(g.tensors):,} tensors",
        "  rings: " + ", ".join(f"ring {r} {n:,}" for r, n in sorted(rings.items())),
        "  scopes: " + ", ".join(f"{s} {n:,}" for s, n in sorted(scopes.items()))
        + f"; early_dispatch {sum(t.early_dispatch for t in g.tasks):,}",
        f"  edges: {len(g.edges):,} records (" + ", ".join(f"{s} {sources.get(s, 0):,}" for s in
                                                  ("explicit", "creator", "tensormap"))
        + f"), {len(pairs):,} distinct (pred, succ) pairs"
        + ("; tensormap overlap: " + ", ".join(f"{k} {v:,}" for k, v in sorted(overlap.items())) if overlap else ""),
        f"  alloc producers (absent from tasks[]): {len(allocs):,}",
        f"  quirks: {q.integer_ids:,} integer id(s), {q.overflow_records:,} overflow record(s) merged, "
        f"{q.duplicate_pairs:,} repeated (pred, succ) entr{'y' if q.duplicate_pairs == 1 else 'ies'}",
    ]
    return lines


def task_lines(g: DepsGraph) -> list[str]:
    """The normalised view: one line per task in submit order with its producers."""
    preds: dict[int, list[str]] = {}
    index = g.task_index()
    counts: dict[int, Counter[tuple[int, str]]] = {}
    for e in g.edges:
        counts.setdefault(e.succ, Counter())[(e.pred, e.source)] += 1
    for succ, c in counts.items():
        items = []
        for (pred, source), n in sorted(c.items(), key=lambda kv: (index.get(kv[0][0], -1), kv[0][1])):
            who = f"{pred >> 32}:{pred & 0xFFFFFFFF}" if pred in index else f"alloc {pred >> 32}:{pred & 0xFFFFFFFF}"
            items.append(f"{who} {source}" + (f" x{n}" if n > 1 else ""))
        preds[succ] = items
    out = []
    for i, t in enumerate(g.tasks):
        kind = "dummy" if t.is_dummy else "kernel " + ",".join(map(str, t.kernel_ids))
        flags = " early" if t.early_dispatch else ""
        out.append(f"#{i} {t.ring}:{t.local} {t.scope} {kind} blocks {t.block_num}{flags} args {len(t.args)}"
                   + (" <- " + ", ".join(preds[t.task_id]) if t.task_id in preds else ""))
    return out


def run_import(args: argparse.Namespace, write: Write) -> int:
    """`pgraph import DEPS_JSON [--tasks] [--format json] [-o OUT]`."""
    g = load_deps(args.deps_json)
    if args.format == "json":
        text = render(g)
    else:
        lines = summary_lines(args.deps_json, g)
        if args.tasks:
            lines.extend(task_lines(g))
        text = "\n".join(lines) + "\n"
    if args.output:
        write(Path(args.output), text)
    else:
        sys.stdout.write(text)
    return 0


# ---- diff --------------------------------------------------------------------------------------


@records.value
@attrs.frozen(repr=False, eq=False)
class Loaded:
    """One diff operand: the side, and for a spec its plan and diagnostics."""

    side: Side
    plan: Plan | None = None
    bag: DiagnosticBag | None = None


def _load_side(path: str, opts: Options, emit: Emit) -> Loaded | None:
    """A diff operand: a deps.json, or a spec planned fully and exported. A spec whose planner ran
    to its end is compared even with errors (a race); one that stopped earlier (a syntax error,
    a cycle) has no graph: its diagnostics are printed and the result is None."""
    if path.endswith(".json"):
        return Loaded(Side(path, load_deps(path)))
    plan, bag = plan_program(path, full_options(opts))
    if plan is None:
        emit(bag)
        return None
    s: SpecSide = export(plan)
    return Loaded(Side(path, s.graph, s.notes, s.edge_spans), plan, bag)


def _per_layer(per: dict[int | None, int]) -> str:
    values = set(per.values())
    layers = [k for k in per if k is not None]
    if None not in per and len(values) == 1 and layers:
        return f"{next(iter(values))} per layer in {len(layers)} layer(s)"
    parts = [f"L={k}: {v}" for k, v in sorted(per.items(), key=lambda kv: (kv[0] is None, kv[0] or 0))[:4]]
    return ", ".join(p.replace("L=None", "entry") for p in parts) + (", ..." if len(per) > 4 else "")


def _ranges(keys: list[int]) -> str:
    out, start, prev = [], keys[0], keys[0]
    for k in keys[1:] + [None]:  # type: ignore[list-item]
        if k is not None and k == prev + 1:
            prev = k
            continue
        out.append(f"L={start}" if start == prev else f"L={start}..{prev}")
        if k is not None:
            start = prev = k
    return ",".join(out)


def layer_table(old: dict[int | None, LayerRow], new: dict[int | None, LayerRow]) -> list[str]:
    """Rows 'old -> new' per layer, identical consecutive layers merged, the entry last."""
    if not old and not new:
        return ["per layer: not available (no spec side: deps.json does not say which layer a task is in)"]
    fields = ("tasks", "dummies", "blocks", "entries", "edges")
    head = ("layers", "tasks", "dummies", "blocks", "explicit entries", "explicit edges")
    rows: list[tuple[str, ...]] = []
    keys = sorted({k for k in [*old, *new] if k is not None})
    groups: list[tuple[list[int], tuple[str, ...]]] = []
    for k in keys:
        a, b = old.get(k, LayerRow()), new.get(k, LayerRow())
        cells = tuple(_delta(getattr(a, f), getattr(b, f)) for f in fields)
        if groups and groups[-1][1] == cells and groups[-1][0][-1] == k - 1:
            groups[-1][0].append(k)
        else:
            groups.append(([k], cells))
    rows.extend((_ranges(ks), *cells) for ks, cells in groups)
    if None in old or None in new:
        a, b = old.get(None, LayerRow()), new.get(None, LayerRow())
        rows.append(("entry", *(_delta(getattr(a, f), getattr(b, f)) for f in fields)))
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    fmt = "  " + "  ".join(f"{{:<{w}}}" if i == 0 else f"{{:>{w}}}" for i, w in enumerate(widths))
    return ["per layer (old -> new):", fmt.format(*head).rstrip(), *(fmt.format(*r).rstrip() for r in rows)]


def _delta(a: int, b: int) -> str:
    return f"{a:,}" if a == b else f"{a:,} -> {b:,} ({b - a:+,})"


def _diag_keys(bag: DiagnosticBag | None) -> dict[tuple[str, str], Any]:
    if bag is None:
        return {}
    out: dict[tuple[str, str], Any] = {}
    for d in bag.sorted():
        out.setdefault((d.code, d.message), d)
    return out


def _cp(plan: Plan | None) -> dict[str, Any] | None:
    if plan is None or not plan.has(CriticalPath):
        return None
    return plan.get(CriticalPath).value


def diff_lines(old: Loaded, new: Loaded, res: DiffResult, limit: int, notes: bool = False) -> list[str]:
    """The text report of `pgraph diff` (with `notes`, the new and resolved notes are listed in
    full, as errors and warnings always are; otherwise they are counted by code)."""
    a, b = old.side.graph, new.side.graph
    lines = [f"--- {old.side.name}", f"+++ {new.side.name}"]
    ad, bd = sum(t.is_dummy for t in a.tasks), sum(t.is_dummy for t in b.tasks)
    lines.append(f"tasks: {_delta(len(a.tasks) - ad, len(b.tasks) - bd)} compute, {_delta(ad, bd)} dummies; "
                 f"edge records: {_delta(len(a.edges), len(b.edges))}")
    if res.same:
        lines.append("no difference in tasks or edges")
    else:
        lines.append(f"first divergence: {res.first}")
        lines.append(f"{len(res.changes)} change(s):")
        sign = {"removed": "-", "added": "+", "changed": "~", "moved": ">"}
        for c in res.changes[:limit]:
            lines.append(_change_line(c, sign[c.kind.split()[1]]))
        if len(res.changes) > limit:
            lines.append(f"  ... {len(res.changes) - limit} more (--limit N)")
        if res.implied_edges:
            lines.append(f"  ({res.implied_edges:,} edge record(s) of removed or added tasks not listed)")
    lines.extend(layer_table(res.layers_old, res.layers_new))
    if old.plan is not None and new.plan is not None:
        lines.extend(constant_lines(constant_changes(old.plan, new.plan), limit))
        lines.extend(budget_lines(budget_rows(old.plan, new.plan)))
    if old.bag is not None and new.bag is not None:
        came, gone = diagnostic_changes(old.bag, new.bag)
        errors = [f"{name} {bag.error_count()}" for name, bag in (("old", old.bag), ("new", new.bag))
                  if bag.has_errors]
        lines.append(f"diagnostics: {len(came)} new, {len(gone)} resolved"
                     + (f"; errors: {', '.join(errors)}" if errors else ""))
        hidden: list[Any] = []
        for tag, items in (("new", came), ("resolved", gone)):
            for d in items:
                if d.level is Severity.NOTE and not notes:
                    hidden.append(d)
                    continue
                where = d.span.location() if d.span is not None else "-"
                lines.append(f"  {tag}: {where}: {d.level.value}[{d.code}]: {d.message}")
        if hidden:
            counts = Counter(d.code for d in hidden)
            lines.append(f"  {len(hidden)} new or resolved note(s) not listed ("
                         + ", ".join(f"{c} {RULES[c].slug} {n}" for c, n in sorted(counts.items(),
                                                                                   key=lambda kv: (-kv[1], kv[0])))
                         + "; --notes lists them)")
    ca, cb = _cp(old.plan), _cp(new.plan)
    if ca is not None and cb is not None:
        lines.append(f"critical path: {_delta(ca['length_us'], cb['length_us'])} cost units "
                     f"({_delta(ca['per_layer_us'], cb['per_layer_us'])} per layer)")
    return lines


def diagnostic_changes(old: DiagnosticBag, new: DiagnosticBag) -> tuple[list[Any], list[Any]]:
    """The diagnostics only `new` has and those only `old` has, matched on (code, message): the
    same finding in another copy of a spec is no change."""
    ka, kb = _diag_keys(old), _diag_keys(new)
    return [kb[k] for k in kb if k not in ka], [ka[k] for k in ka if k not in kb]


@records.value
@attrs.frozen(repr=False, eq=False)
class ConstantChange:
    """A folded constant whose value differs between the sides (None: the side does not declare
    it), and the sides whose -D/--config/--layers set it ("old", "new", "both" or "")."""

    name: str
    old: int | None
    new: int | None
    override: str


def constant_changes(old: Plan, new: Plan) -> list[ConstantChange]:
    """Every folded constant that differs between the two specs, the overridden ones first (each
    group by name): what a per-side `-D` changed, and what follows from it."""
    a, b = old.program.consts, new.program.consts
    oa, ob = set(old.program.overridden), set(new.program.overridden)
    out = []
    for name in sorted(set(a) | set(b)):
        if a.get(name) == b.get(name):
            continue
        side = "both" if name in oa and name in ob else "old" if name in oa else "new" if name in ob else ""
        out.append(ConstantChange(name, a.get(name), b.get(name), side))
    return sorted(out, key=lambda c: (c.override == "", c.name))


def constant_lines(changes: list[ConstantChange], limit: int) -> list[str]:
    """The constants section of the text report."""
    if not changes:
        return ["constants: the same"]
    width = max(len(c.name) for c in changes[:limit])
    out = [f"constants: {len(changes)} differ (old -> new):"]
    for c in changes[:limit]:
        how = f"  (-D/--config/--layers on {c.override})" if c.override else ""
        old = "-" if c.old is None else f"{c.old:,}"
        new = "-" if c.new is None else f"{c.new:,}"
        out.append(f"  {c.name:<{width}}  {old} -> {new}{how}")
    if len(changes) > limit:
        out.append(f"  ... {len(changes) - limit} more (--limit N)")
    return out


@records.value
@attrs.frozen(repr=False, eq=False)
class BudgetRow:
    """A budgeted figure of either side: its values and each side's limit (None: no budget)."""

    figure: str
    old: int
    new: int
    old_limit: int | None
    new_limit: int | None

    @property
    def over(self) -> str:
        """Which sides are over their own budget: "old", "new", "both" or ""."""
        a = self.old_limit is not None and self.old > self.old_limit
        b = self.new_limit is not None and self.new > self.new_limit
        return "both" if a and b else "old" if a else "new" if b else ""


def budget_rows(old: Plan, new: Plan) -> list[BudgetRow]:
    """The figures either spec budgets (`sim_us` aside: `pgraph sim --vs` simulates), in the
    order `pgraph stats` prints them."""
    la = {b.figure: b.limit for b in old.program.budgets}
    lb = {b.figure: b.limit for b in new.program.budgets}
    if not la and not lb:
        return []
    fa, fb = figures(old), figures(new)
    return [BudgetRow(f, fa[f], fb[f], la.get(f), lb.get(f)) for f in fa if f in la or f in lb]


def budget_lines(rows: list[BudgetRow]) -> list[str]:
    """The budgets section of the text report (diff is a what-if: an overrun is listed, not fatal)."""
    if not rows:
        return []
    width = max(len(r.figure) for r in rows)
    out = ["budgets (old -> new; an overrun is a PG121 warning here, an error for `pgraph check`):"]
    for r in rows:
        limits = ("-" if r.old_limit is None else f"{r.old_limit:,}") if r.old_limit == r.new_limit else (
            ("-" if r.old_limit is None else f"{r.old_limit:,}") + " -> "
            + ("-" if r.new_limit is None else f"{r.new_limit:,}"))
        flag = f"  over on {r.over}" if r.over else ""
        out.append(f"  {r.figure:<{width}}  {_delta(r.old, r.new)}, budget {limits}{flag}")
    return out


def _change_line(c: Change, sign: str) -> str:
    where = f"  {c.span.location()}" if c.span is not None else ""
    return f"  {sign} {c.kind} {c.what}: {c.count:,} ({_per_layer(c.per_layer)}), e.g. {c.example}{where}"


def change_json(c: Change) -> dict[str, Any]:
    """One change group as JSON."""
    return {"kind": c.kind, "what": c.what, "count": c.count, "example": c.example, "first": c.first,
            "per_layer": {("entry" if k is None else str(k)): v for k, v in sorted(
                c.per_layer.items(), key=lambda kv: (kv[0] is None, kv[0] or 0))},
            "span": c.span.location() if c.span is not None else None}


def run_diff(args: argparse.Namespace, opts: Options, emit: Emit, write: Write) -> int:
    """`pgraph diff OLD NEW` (each a .pgl spec or a deps.json)."""
    if args.limit < 1:
        raise UsageError("--limit must be at least 1")
    sides = []
    for path, flag, words in ((args.old, "--a-define", args.a_defines), (args.new, "--b-define", args.b_defines)):
        extra = tuple(parse_define(d) for d in words)
        if extra and path.endswith(".json"):
            raise UsageError(f"{flag} overrides a constant of a .pgl side; {path} is a deps.json")
        sides.append((path + "".join(f" -D {n}={v}" for n, v in extra), attrs.evolve(opts, defines=opts.defines + extra)))
    old = _load_side(args.old, sides[0][1], emit)
    new = _load_side(args.new, sides[1][1], emit)
    if old is None or new is None:
        failed = " and ".join(name for (name, _), side in zip(sides, (old, new)) if side is None)
        sys.stderr.write(f"pgraph: diff: {failed} did not plan (the errors above): nothing to compare\n")
        return EXIT_SIDE_ERRORS
    old = attrs.evolve(old, side=attrs.evolve(old.side, name=sides[0][0]))
    new = attrs.evolve(new, side=attrs.evolve(new.side, name=sides[1][0]))
    res = diff(old.side, new.side)
    if args.format == "json":
        doc = {"old": sides[0][0], "new": sides[1][0], "same": res.same, "first_divergence": res.first,
               "changes": [change_json(c) for c in res.changes], "implied_edges": res.implied_edges,
               "per_layer": {side: {("entry" if k is None else str(k)): attrs.asdict(v) for k, v in sorted(
                   rows.items(), key=lambda kv: (kv[0] is None, kv[0] or 0))}
                   for side, rows in (("old", res.layers_old), ("new", res.layers_new))}}
        doc.update(_json_extras(old, new))
        text = json.dumps(doc, indent=2, sort_keys=True) + "\n"
    else:
        text = "\n".join(diff_lines(old, new, res, args.limit, getattr(args, "notes", False))) + "\n"
    if args.output:
        write(Path(args.output), text)
    else:
        sys.stdout.write(text)
    if any(side.bag is not None and side.bag.has_errors for side in (old, new)):
        return EXIT_SIDE_ERRORS
    return 0 if res.same else 1


#: `pgraph diff`'s exit code when a side has errors (the report compares what both sides plan).
EXIT_SIDE_ERRORS = 3


def _json_extras(old: Loaded, new: Loaded) -> dict[str, Any]:
    """The keys of the JSON report for two spec sides: constants, budgets, diagnostics."""
    from pgraph.diagnostics import diagnostic_json

    out: dict[str, Any] = {}
    if old.plan is not None and new.plan is not None:
        out["constants"] = [attrs.asdict(c) for c in constant_changes(old.plan, new.plan)]
        out["budgets"] = [dict(attrs.asdict(r), over=r.over) for r in budget_rows(old.plan, new.plan)]
    if old.bag is not None and new.bag is not None:
        came, gone = diagnostic_changes(old.bag, new.bag)
        out["diagnostics"] = {"new": [diagnostic_json(d) for d in came], "resolved": [diagnostic_json(d) for d in gone],
                              "errors": {"old": old.bag.error_count(), "new": new.bag.error_count()}}
    return out
