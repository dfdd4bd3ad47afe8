"""The options of `pgraph sim`, apart from the simulator so that building the CLI imports no backend."""

from __future__ import annotations

import argparse

from pgraph.commands.numbers import count


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of `pgraph sim` (the spec and the common -D/--config/--layers come from the CLI)."""
    p.add_argument("--format", choices=("text", "json"), default="text", help="report format")
    p.add_argument("--trace", metavar="OUT.json",
                   help="write a Chrome trace-event file laid out as simpler's merged_swimlane.json")
    p.add_argument("--plot", metavar="OUT.svg",
                   help="draw the swimlane (cores, scheduler threads, orchestrator) and the critical path as SVG "
                        "(with --vs: of the first side)")
    p.add_argument("--no-range", dest="no_range", action="store_true",
                   help="simulate under the shipped figures only: no makespan range over the cost model's documented "
                        "variants (pgraph/ir/a2a3_variants.toml), and no sign check of a comparison")
    p.add_argument("--vs", metavar="OTHER.pgl", help="also simulate OTHER.pgl (same options) and print the differences")
    p.add_argument("--b-define", "--vs-define", dest="vs_defines", action="append", default=[], metavar="NAME=VALUE",
                   help="override a constant of the compared side only (OTHER.pgl, or the spec itself without "
                        "--vs), after the -D of both (repeatable)")
    p.add_argument("--a-define", dest="a_defines", action="append", default=[], metavar="NAME=VALUE",
                   help="override a constant of the first side (the spec) only, after the -D of both (repeatable); "
                        "without --vs the spec as given is the second side")
    p.add_argument("--enforce-budgets", action="store_true",
                   help="enforce the spec's budgets as `pgraph check` does, `sim_us` included: an overrun is a PG121 "
                        "error and the exit code is 1 (the simulation still runs); otherwise sim is a what-if")
    p.add_argument("--vs-set", dest="vs_sets", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="compare with the same spec under these extra --set figures (repeatable), e.g. "
                        "--vs-set early_dispatch.enabled=false")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="override one figure of the a2a3 timing table (repeatable), e.g. --set core.switch_us=0")
    p.add_argument("--timing", action="append", default=[], metavar="FILE.toml",
                   help="override figures from a TOML file laid out like pgraph/ir/a2a3_timing.toml")
    p.add_argument("--calibration", metavar="FILE.toml",
                   help="per-kernel µs per block (written by --calibrate); overrides the roofline and `cost` lines")
    p.add_argument("--calibrate", nargs=2, metavar=("RECORDS", "DEPS"),
                   help="fit per-kernel costs from a captured chip_swimlane_records.json and deps.json "
                        "(kernel names from the spec's func ids) and print or write (-o) a calibration TOML")
    p.add_argument("-o", "--output", metavar="FILE", help="write the report (or the calibration) to FILE")
    p.add_argument("--path-steps", type=count(0), default=12, metavar="N", help="critical-path steps to print (default 12)")
