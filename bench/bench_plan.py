"""Benchmark: parse + plan of the 40-layer HEAD spec, in-process, per stage, and as a CLI process.

Usage (from the repository root):

    python3 bench/bench_plan.py                 # 7 in-process runs, 5 CLI runs, full-expansion rows
    python3 bench/bench_plan.py --runs 15 --cli-runs 9 --no-full

Prints markdown tables (paste them into docs/performance.md):

1. in-process `pgraph.driver.plan_program` wall time (median/min/max of N runs after one
   warm-up run that pays for the grammar build and lazy imports), for the 40-layer HEAD
   spec, the same spec at 1 layer (`Options(layers=1)`), and with `Options(full=True)`
   (every layer expanded; one run each unless --full-runs) to show what the window saves;
2. the per-stage breakdown (read + parse with includes, lower, expand, each planner pass),
   medians over the same N runs, timed with time.perf_counter around the driver's stages;
3. whole-process wall time of `pgraph plan specs/decode_layer.pgl` (Python start, imports,
   planning, report on stdout sent to /dev/null), beside `python3 -c pass` and
   `python3 -c "import pgraph.cli"` so the start-up share is visible.

Times are seconds of wall clock on a shared machine: compare medians, not single runs.
No test asserts any of these numbers.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pgraph.driver import Options, _overrides, plan_program, read_spec  # noqa: E402
from pgraph.ir.expand import expand  # noqa: E402
from pgraph.ir.loader import load_program_files  # noqa: E402
from pgraph.ir.lower import Lowerer  # noqa: E402
from pgraph.plan.pipeline import PASSES  # noqa: E402

from pgraph.diagnostics import DiagnosticBag  # noqa: E402
from pgraph.plan.base import Plan  # noqa: E402

SPEC = "specs/decode_layer.pgl"


Times = tuple[list[float], list[float]]


def timed(fn: Callable[[], object], runs: int) -> Times:
    """(wall times, CPU times) in seconds of `runs` calls of `fn`."""
    wall_s, cpu_s = [], []
    for _ in range(runs):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall_s.append(time.perf_counter() - t0)
        cpu_s.append(time.process_time() - c0)
    return wall_s, cpu_s


def plan_checked(spec: str, opts: Options) -> None:
    """plan_program that must succeed (a benchmark of a failing plan measures nothing useful)."""
    plan, bag = plan_program(spec, opts)
    if plan is None or bag.has_errors:
        raise SystemExit(f"bench: {spec} did not plan cleanly with {opts}")


def stage_times(spec: str, opts: Options) -> dict[str, tuple[float, float]]:
    """One run of the driver's stages (the same calls as plan_program): stage -> (wall s, CPU s)."""
    out: dict[str, tuple[float, float]] = {}
    bag = DiagnosticBag()
    clock = [(time.perf_counter(), time.process_time())]

    def lap(name: str) -> None:
        now = (time.perf_counter(), time.process_time())
        out[name] = (now[0] - clock[-1][0], now[1] - clock[-1][1])
        clock.append(now)

    root = read_spec(spec)
    overrides = _overrides(Path(spec), opts, bag)
    loaded = load_program_files(root, bag)
    lap("read + parse (3 files)")
    assert loaded is not None and not bag.has_errors
    program = Lowerer(loaded, bag, overrides).run()
    lap("lower")
    assert program is not None
    graph = expand(program, bag, full=opts.full)
    lap("expand")
    plan = Plan(program, graph, bag)
    for p in PASSES:
        p.run(plan)
        lap(f"pass {p.name}")
    passes = [v for k, v in out.items() if k.startswith("pass ")]
    out["passes (sum)"] = (sum(w for w, _ in passes), sum(c for _, c in passes))
    out["total"] = (clock[-1][0] - clock[0][0], clock[-1][1] - clock[0][1])
    return out


def wall(cmd: list[str], runs: int) -> Times:
    """(wall, CPU user+system) seconds of `runs` whole processes `cmd`, from the repository root."""
    wall_s, cpu_s = [], []
    for _ in range(runs):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
        wall_s.append(time.perf_counter() - t0)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu_s.append((r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime))
        if proc.returncode != 0:
            raise SystemExit(f"bench: {' '.join(cmd)} exited {proc.returncode}: {proc.stderr.decode()[-500:]}")
    return wall_s, cpu_s


HEADER = "| {} | runs | wall median | wall min | wall max | CPU median |\n| --- | ---: | ---: | ---: | ---: | ---: |"


def row(label: str, times: Times) -> str:
    w, c = times
    return (f"| {label} | {len(w)} | {statistics.median(w):.3f} | {min(w):.3f} | {max(w):.3f} | "
            f"{statistics.median(c):.3f} |")


def machine() -> str:
    """Date, CPU model, core count, Python and load: the context the numbers need."""
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (f"{datetime.date.today().isoformat()}, {model}, {os.cpu_count()} cores, "
            f"Python {platform.python_version()} ({platform.system()}), load average {load:.2f} at start")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7, help="in-process runs per row (default 7)")
    ap.add_argument("--cli-runs", type=int, default=5, help="CLI process runs (default 5)")
    ap.add_argument("--full-runs", type=int, default=1, help="runs of the full-expansion rows (default 1)")
    ap.add_argument("--no-full", action="store_true", help="skip the full-expansion rows (about 10 s)")
    ap.add_argument("--spec", default=SPEC, help=f"spec to plan (default {SPEC})")
    args = ap.parse_args(argv)
    os.chdir(ROOT)
    spec = args.spec

    print(f"machine: {machine()}\n")
    first = timed(lambda: plan_checked(spec, Options()), 1)

    print("### In-process `plan_program` (seconds)\n")
    print(HEADER.format("case"))
    print(row("40 layers, first call in the process (grammar build, lazy imports)", first))
    t40 = timed(lambda: plan_checked(spec, Options()), args.runs)
    print(row("40 layers (HEAD spec as shipped)", t40))
    t1 = timed(lambda: plan_checked(spec, Options(layers=1)), args.runs)
    print(row("1 layer (`--layers 1`)", t1))
    f40: Times = ([], [])
    f1: Times = ([], [])
    if not args.no_full:
        f1 = timed(lambda: plan_checked(spec, Options(layers=1, full=True)), args.full_runs)
        print(row("1 layer, full expansion", f1))
        f40 = timed(lambda: plan_checked(spec, Options(full=True)), args.full_runs)
        print(row("40 layers, full expansion (every layer enumerated)", f40))
    print()
    med = statistics.median
    print("Ratios (medians of CPU time, less sensitive to other load than wall time):\n")
    print(f"- 40 layers / 1 layer (window expansion): {med(t40[1]) / med(t1[1]):.2f}x")
    if f40[0]:
        print(f"- 40 layers / 1 layer, full expansion: {med(f40[1]) / med(f1[1]):.2f}x")
        print(f"- 40 layers full / 40 layers window: {med(f40[1]) / med(t40[1]):.1f}x")
    print()

    print("### Stages of one 40-layer plan (medians, milliseconds)\n")
    runs = [stage_times(spec, Options()) for _ in range(args.runs)]
    print("| stage | wall ms | CPU ms | share of CPU |")
    print("| --- | ---: | ---: | ---: |")
    total = med(r["total"][1] for r in runs)
    for key in runs[0]:
        w, c = med(r[key][0] for r in runs), med(r[key][1] for r in runs)
        print(f"| {key} | {w * 1000:.1f} | {c * 1000:.1f} | {c / total:.0%} |")
    print()

    print("### Whole process (seconds, wall clock incl. Python start)\n")
    exe = shutil.which("pgraph")
    cli = [exe, "plan", spec] if exe else [sys.executable, "-m", "pgraph", "plan", spec]
    shown = f"pgraph plan {spec}" if exe else f"python3 -m pgraph plan {spec}"
    print(HEADER.format("command"))
    print(row("`python3 -c pass`", wall([sys.executable, "-c", "pass"], args.cli_runs)))
    print(row("`python3 -c \"import pgraph.cli\"`", wall([sys.executable, "-c", "import pgraph.cli"], args.cli_runs)))
    print(row(f"`{shown}`", wall(cli, args.cli_runs)))
    print(row(f"`{shown} --layers 1`", wall([*cli, "--layers", "1"], args.cli_runs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
