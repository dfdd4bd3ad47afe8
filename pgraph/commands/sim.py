"""The `pgraph sim` subcommand: run the model on one spec (or two, side by side) and report.

Exit codes follow the CLI: 0 ok, 1 diagnostics with errors or a stalled simulation, 2 usage
error (bad option, unreadable file, unknown timing figure).
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
from pgraph.backends.target import plan_full, runner
from pgraph.diagnostics import DiagnosticBag
from pgraph.ir.program import Budget
from pgraph.kinds import InternalError
from pgraph.pipeline import Options, UsageError, parse_define, plan_program
from pgraph.plan.base import Plan
from pgraph.plan.budgets import check_budget


def sim_target() -> SimTarget:
    """The registered sim runner (`pgraph.backends.target.RUNNERS`)."""
    t = runner("sim")
    if not isinstance(t, SimTarget):
        raise InternalError(f"the registered sim runner is a {type(t).__name__}, not a SimTarget")
    return t


def load_plan(path: str | Path, opts: Options, budgets: list[tuple[Budget, tuple[str, ...]]] | None = None
              ) -> tuple[Plan | None, DiagnosticBag]:
    """Plan `path` as the sim target needs it (every loop iteration expanded); (None, bag) on
    errors. The spec's `sim_us` budgets (with the constants the run overrides) are appended to
    `budgets` when given."""
    plan, bag = plan_program(path, attrs.evolve(opts, full=plan_full(sim_target(), opts.full)))
    if plan is None or bag.has_errors:
        return None, bag
    if budgets is not None:
        budgets.extend((b, plan.program.overridden) for b in plan.program.budgets if b.figure == "sim_us")
    return plan, bag


def load_graph(path: str | Path, opts: Options, budgets: list[tuple[Budget, tuple[str, ...]]] | None = None
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


def _one(spec: str, opts: Options, cfg: SimConfig, cal: dict[str, float] | None,
         emit: Callable[[DiagnosticBag], None], budgets: list[tuple[Budget, tuple[str, ...]]] | None = None
         ) -> Result | None:
    plan, bag = load_plan(spec, opts, budgets)
    if plan is None:
        emit(bag)
        return None
    return sim_target().run(plan, SimOptions(cfg, cal, spec))


def run(args: argparse.Namespace, opts: Options, emit: Callable[[DiagnosticBag], None],
        write: Callable[[Path, str], None]) -> int:
    """Run `pgraph sim` with parsed `args`; `emit` prints diagnostics, `write` writes a file atomically."""
    if args.path_steps < 0:
        raise UsageError("--path-steps must not be negative")
    cfg = _config(args)
    if args.calibrate:
        from pgraph.backends.sim.calibrate import calibrate_files, render_calibration

        graph, bag = load_graph(args.spec, opts)
        if graph is None:
            emit(bag)
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
    budgets: list[tuple[Budget, tuple[str, ...]]] = []
    res = _one(args.spec, opts, cfg, cal, emit, budgets)
    if res is None:
        return 1
    over = DiagnosticBag()
    for b, overridden in budgets:  # PG121 for `budget sim_us <= N` (the plan passes cannot simulate)
        check_budget(b, math.ceil(res.makespan), over, overridden)
    summary = summarize(res)
    if args.trace:
        from pgraph.backends.sim.trace import render_trace

        write(Path(args.trace), render_trace(res))
    other_name = None
    other: dict[str, Any] | None = None
    if args.vs or args.vs_defines or args.vs_sets:
        spec_b = args.vs or args.spec
        extra = tuple(parse_define(d) for d in args.vs_defines)
        opts_b = attrs.evolve(opts, defines=opts.defines + extra, full=False)
        try:
            cfg_b = cfg.with_overrides(tuple(args.vs_sets))
        except ConfigError as err:
            raise UsageError(str(err)) from None
        res_b = _one(spec_b, opts_b, cfg_b, cal, emit)
        if res_b is None:
            return 1
        other = summarize(res_b)
        other_name = spec_b + "".join(f" -D {n}={v}" for n, v in extra) + "".join(f" --set {x}" for x in args.vs_sets)
    if other is not None:
        if args.format == "json":
            text = json.dumps({"a": args.spec, "b": other_name, "rows": compare(summary, other)}, indent=1,
                              sort_keys=True) + "\n"
        else:
            text = render_compare(summary, other, args.spec, str(other_name))
    elif args.format == "json":
        text = render_json(summary, args.spec, cfg)
    else:
        text = render_text(summary, args.spec, cfg, args.path_steps)
    _out(args, text, write)
    stalled = summary["stall"] is not None or (other is not None and other["stall"] is not None)
    if over.items:
        emit(over)
    return 1 if stalled or over.has_errors else 0


def _out(args: argparse.Namespace, text: str, write: Callable[[Path, str], None]) -> None:
    if args.output:
        write(Path(args.output), text)
    else:
        sys.stdout.write(text)
