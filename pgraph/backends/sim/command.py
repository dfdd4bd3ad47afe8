"""The `pgraph sim` subcommand: run the model on one spec (or two, side by side) and report.

Exit codes follow the CLI: 0 ok, 1 diagnostics with errors or a stalled simulation, 2 usage
error (bad option, unreadable file, unknown timing figure).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pgraph.diagnostics import DiagnosticBag
from pgraph.pipeline import Options, UsageError, parse_define

from .analysis import summarize
from .config import ConfigError, SimConfig, load_config
from .cost import load_calibration
from .engine import Result, simulate
from .graph_input import load_graph
from .report import compare, render_compare, render_json, render_text


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of `pgraph sim` (the spec and the common -D/--config/--layers come from the CLI)."""
    p.add_argument("--format", choices=("text", "json"), default="text", help="report format")
    p.add_argument("--trace", metavar="OUT.json",
                   help="write a Chrome trace-event file laid out as simpler's merged_swimlane.json")
    p.add_argument("--vs", metavar="OTHER.pgl", help="also simulate OTHER.pgl (same options) and print the differences")
    p.add_argument("--vs-define", dest="vs_defines", action="append", default=[], metavar="NAME=VALUE",
                   help="compare with the same spec under these extra -D overrides (repeatable)")
    p.add_argument("--vs-set", dest="vs_sets", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="compare with the same spec under these extra --set figures (repeatable), e.g. "
                        "--vs-set early_dispatch.enabled=false")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="override one figure of the a2a3 timing table (repeatable), e.g. --set core.switch_us=0")
    p.add_argument("--timing", action="append", default=[], metavar="FILE.toml",
                   help="override figures from a TOML file laid out like pgraph/backends/sim/a2a3.toml")
    p.add_argument("--calibration", metavar="FILE.toml",
                   help="per-kernel µs per block (written by --calibrate); overrides the roofline and `cost` lines")
    p.add_argument("--calibrate", nargs=2, metavar=("RECORDS", "DEPS"),
                   help="fit per-kernel costs from a captured chip_swimlane_records.json and deps.json "
                        "(kernel names from the spec's func ids) and print or write (-o) a calibration TOML")
    p.add_argument("-o", "--output", metavar="FILE", help="write the report (or the calibration) to FILE")
    p.add_argument("--path-steps", type=int, default=12, metavar="N", help="critical-path steps to print (default 12)")


def _config(args: argparse.Namespace) -> SimConfig:
    try:
        return load_config(tuple(args.sets), tuple(Path(f) for f in args.timing))
    except ConfigError as err:
        raise UsageError(str(err)) from None


def _one(spec: str, opts: Options, cfg: SimConfig, cal: dict[str, float] | None,
         emit: Callable[[DiagnosticBag], None]) -> Result | None:
    graph, bag = load_graph(spec, opts)
    if graph is None:
        emit(bag)
        return None
    return simulate(graph, cfg, cal)


def run(args: argparse.Namespace, opts: Options, emit: Callable[[DiagnosticBag], None],
        write: Callable[[Path, str], None]) -> int:
    """Run `pgraph sim` with parsed `args`; `emit` prints diagnostics, `write` writes a file atomically."""
    if args.path_steps < 0:
        raise UsageError("--path-steps must not be negative")
    cfg = _config(args)
    if args.calibrate:
        from .calibrate import calibrate_files, render_calibration

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
    res = _one(args.spec, opts, cfg, cal, emit)
    if res is None:
        return 1
    summary = summarize(res)
    if args.trace:
        from .trace import render_trace

        write(Path(args.trace), render_trace(res))
    other_name = None
    other: dict[str, Any] | None = None
    if args.vs or args.vs_defines or args.vs_sets:
        spec_b = args.vs or args.spec
        extra = tuple(parse_define(d) for d in args.vs_defines)
        opts_b = Options(defines=opts.defines + extra, config=opts.config, layers=opts.layers)
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
    return 1 if stalled else 0


def _out(args: argparse.Namespace, text: str, write: Callable[[Path, str], None]) -> None:
    if args.output:
        write(Path(args.output), text)
    else:
        sys.stdout.write(text)
