"""The `pgraph sim` subcommand: run the model on one spec (or two, side by side) and report.

Exit codes follow the CLI: 0 ok, 1 diagnostics with errors or a stalled simulation, 2 usage
error (bad option, unreadable file, unknown timing figure). `sim` is a what-if of the spec's
budgets (pgraph.plan.budgets): it simulates a spec whose only errors would be budget overruns and
prints each overrun as a PG121 warning; `--enforce-budgets` makes them errors (exit 1, after the
report). Each side's diagnostics are printed (errors and warnings in full, notes counted).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from pgraph.backends.sim.analysis import summarize
from pgraph.backends.sim.config import ConfigError, SimConfig, load_config
from pgraph.backends.sim.cost import load_calibration
from pgraph.backends.sim.engine import Result
from pgraph.backends.sim.records import SimGraph
from pgraph.backends.sim.report import compare, render_compare, render_json, render_text
from pgraph.backends.sim.target import SimOptions, SimTarget
from pgraph.backends.sim.variants import compare_range, load_variants, makespan_range, makespans
from pgraph.backends.target import plan_full, runner
from pgraph.diagnostics import DiagnosticBag
from pgraph.ir.program import Budget
from pgraph.kinds import InternalError
from pgraph.pipeline import Options, UsageError, parse_define, plan_program
from pgraph.plan.base import Plan
from pgraph.plan.budgets import blocking_errors, check_budget

#: A `budget sim_us` statement of a side, with that side's plan (its overrides, what-if and bag).
SimBudgets = list[tuple[Budget, Plan]]


def sim_target() -> SimTarget:
    """The registered sim runner (`pgraph.backends.target.RUNNERS`)."""
    t = runner("sim")
    if not isinstance(t, SimTarget):
        raise InternalError(f"the registered sim runner is a {type(t).__name__}, not a SimTarget")
    return t


def load_plan(path: str | Path, opts: Options, budgets: SimBudgets | None = None
              ) -> tuple[Plan | None, DiagnosticBag]:
    """Plan `path` as the sim target needs it (every loop iteration expanded); (None, bag) on
    errors other than budget overruns (PG121: a what-if simulates them). The spec's `sim_us`
    budgets (with the plan) are appended to `budgets` when given."""
    plan, bag = plan_program(path, attrs.evolve(opts, full=plan_full(sim_target(), opts.full)))
    if plan is None or blocking_errors(bag):
        return None, bag
    if budgets is not None:
        budgets.extend((b, plan) for b in plan.program.budgets if b.figure == "sim_us")
    return plan, bag


def check_sim_budgets(budgets: SimBudgets, makespan: float) -> None:
    """PG121 for each `budget sim_us <= N` the simulated `makespan` (µs) is over, in its side's bag,
    waived by that side's allows (the planner leaves allows of `sim_us` budgets to this command)."""
    for b, plan in budgets:
        over = DiagnosticBag()
        check_budget(b, math.ceil(makespan), over, plan.program.overridden, plan.what_if)
        over.waive(plan.bag.waivers, report_unused=True, deferred=True)
        plan.bag.merge(over)


def load_graph(path: str | Path, opts: Options, budgets: SimBudgets | None = None
               ) -> tuple[SimGraph | None, DiagnosticBag]:
    """`load_plan`, converted to the simulator's records; (None, bag) on errors."""
    plan, bag = load_plan(path, opts, budgets)
    if plan is None:
        return None, bag
    return sim_target().graph(plan, str(path)), bag


def _config(args: argparse.Namespace) -> SimConfig:
    try:
        return load_config(tuple(args.sets), tuple(Path(f) for f in args.timing))
    except ConfigError as err:
        raise UsageError(str(err)) from None


def _one(spec: str, opts: Options, cfg: SimConfig, cal: dict[str, float] | None, emit: Emit,
         label: str | None = None) -> tuple[Result | None, DiagnosticBag]:
    """Plan and simulate one side; its `sim_us` budgets are checked into its bag (None and the bag,
    printed, when it has errors other than budget overruns)."""
    budgets: SimBudgets = []
    plan, bag = load_plan(spec, opts, budgets)
    if plan is None:
        emit(bag, label)
        return None, bag
    res = sim_target().run(plan, SimOptions(cfg, cal, spec))
    check_sim_budgets(budgets, res.makespan)
    return res, bag


#: Prints a side's diagnostics (stderr), under a label line naming the side when given.
Emit = Callable[[DiagnosticBag, "str | None"], None]


def _side(spec: str, defines: tuple[tuple[str, int], ...], sets: tuple[str, ...] = ()) -> str:
    """How a report names a side: the spec and its own -D and --set options."""
    return spec + "".join(f" -D {n}={v}" for n, v in defines) + "".join(f" --set {x}" for x in sets)


def run(args: argparse.Namespace, opts: Options, emit: Emit, write: Callable[[Path, str], None]) -> int:
    """Run `pgraph sim` with parsed `args`; `emit` prints diagnostics, `write` writes a file atomically."""
    if args.path_steps < 0:
        raise UsageError("--path-steps must not be negative")
    if args.plot and Path(args.plot).suffix.lower() != ".svg":
        raise UsageError(f"--plot writes SVG: give a file name ending in .svg, not '{args.plot}'")
    cfg = _config(args)
    if args.calibrate:
        from pgraph.backends.sim.calibrate import calibrate_files, render_calibration

        graph, bag = load_graph(args.spec, opts)
        if graph is None:
            emit(bag, None)
            return 1
        try:
            fitted = calibrate_files(Path(args.calibrate[0]), Path(args.calibrate[1]), graph)
        except ValueError as err:
            raise UsageError(str(err)) from None
        text = render_calibration(fitted, args.calibrate[0], args.calibrate[1])
        _out(args, text, write)
        return 0
    try:
        cal = load_calibration(args.calibration) if args.calibration else None
    except ConfigError as err:
        raise UsageError(str(err)) from None
    compared = bool(args.vs or args.vs_defines or args.vs_sets or args.a_defines)  # a side's own -D: a comparison
    extra_a = tuple(parse_define(d) for d in args.a_defines)
    name_a = _side(args.spec, extra_a)
    label_a = f"A: {name_a}" if compared else None
    res, bag_a = _one(args.spec, attrs.evolve(opts, defines=opts.defines + extra_a), cfg, cal, emit, label_a)
    if res is None:
        return 1
    summary = summarize(res)
    variants = () if args.no_range else load_variants()
    rows_a = makespans(res.graph, cfg, cal, variants) if variants and res.stall is None else None
    if args.trace:
        from pgraph.backends.sim.trace import render_trace

        write(Path(args.trace), render_trace(res))
    if args.plot:
        from pgraph.backends.sim.plot import render_svg

        write(Path(args.plot), render_svg(res, summary))
    other_name = None
    other: dict[str, Any] | None = None
    bags = [bag_a]
    if compared:
        spec_b = args.vs or args.spec
        extra = tuple(parse_define(d) for d in args.vs_defines)
        opts_b = attrs.evolve(opts, defines=opts.defines + extra, full=False)
        try:
            cfg_b = cfg.with_overrides(tuple(args.vs_sets))
        except ConfigError as err:
            raise UsageError(str(err)) from None
        other_name = _side(spec_b, extra, tuple(args.vs_sets))
        emit(bag_a, label_a)
        res_b, bag_b = _one(spec_b, opts_b, cfg_b, cal, emit, f"B: {other_name}")
        if res_b is None:
            return 1
        bags.append(bag_b)
        other = summarize(res_b)
        if rows_a is not None and res_b.stall is None:
            rows_b = makespans(res_b.graph, cfg_b, cal, variants)
            span = compare_range(res.makespan, res_b.makespan, rows_a, rows_b)
        else:
            span = None
    if other is not None:
        if args.format == "json":
            text = json.dumps({"a": name_a, "b": other_name, "rows": compare(summary, other), "range": span},
                              indent=1, sort_keys=True) + "\n"
        else:
            text = render_compare(summary, other, name_a, str(other_name), span)
    else:
        summary["range"] = None if rows_a is None else makespan_range(res.makespan, rows_a)
        if args.format == "json":
            text = render_json(summary, args.spec, cfg)
        else:
            text = render_text(summary, args.spec, cfg, args.path_steps)
    _out(args, text, write)
    stalled = summary["stall"] is not None or (other is not None and other["stall"] is not None)
    emit(bags[-1], f"B: {other_name}" if compared else None)
    return 1 if stalled or any(b.has_errors for b in bags) else 0


def _out(args: argparse.Namespace, text: str, write: Callable[[Path, str], None]) -> None:
    if args.output:
        write(Path(args.output), text)
    else:
        sys.stdout.write(text)
