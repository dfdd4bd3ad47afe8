"""NumPy executor benchmarks: executor vs reference time, and the full-size tier matrix.

Usage (from the repository root):

    python bench/bench_numpy.py                         # executor vs dense reference, 1 full-size layer
    python bench/bench_numpy.py --races                 # the same with the race detector on
    python bench/bench_numpy.py --tiers                 # both fixtures x both weight modes x 1/10/40 layers
    python bench/bench_numpy.py --tiers --layers 1 10 --inputs tier --weights distinct
    python bench/bench_numpy.py --tiers --write         # also write the tables into the docs

Default mode: both sides run with OpenBLAS pinned to one thread (pgraph.backends.numpy.blas)
and are timed best-of-`repeat`, in one process on the same inputs; the executor runs the
topological order with the race detector off unless `--races`. Prints the ratio executor /
reference (the executor issue's target is <= 1.5 at full size, 1 layer).

`--tiers`: every (fixture, weight mode, depth) runs in a fresh child process (so its peak RSS
is its own), like `pgraph run SPEC --config full --layers N --inputs F --weights W`: plan,
inputs, reference, one topological execution with the race detector on, comparison under
every comparator (pgraph.backends.numpy.compare). The child reports the time of
`Session.create` (plan + the reference, including the reference's per-layer input draws), of
the execution (including the executor's own draws), its whole wall time, its peak RSS
(ru_maxrss) and the failure counts. Runs one at a time (the machine is shared: 2 cores).

`--write` replaces the marked blocks `<!-- bench_numpy:NAME -->` ... `<!-- /bench_numpy:NAME -->`
in docs/performance.md (`ratio`, `tiers`), docs/backend_numpy.md (`tiers`) and README.md
(`tiers-summary`) with what this run measured (atomically); nothing there is typed by hand.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

import attrs
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pgraph.backends.numpy.blas import blas_threads  # noqa: E402
from pgraph.backends.numpy.compare import all_checks  # noqa: E402
from pgraph.backends.numpy.golden import golden_decode  # noqa: E402
from pgraph.backends.numpy.runner import Session  # noqa: E402
from pgraph.backends.output import write_atomic  # noqa: E402
from pgraph.diagnostics import DiagnosticBag  # noqa: E402
from pgraph.pipeline import Options, plan_program  # noqa: E402

SPEC = str(ROOT / "specs" / "decode_layer.pgl")
FIXTURE_NAMES = {"current": "today's fixture", "tier": "tier fixture"}


def make_session(spec: str, options: Options, **kw: object) -> tuple[Session | None, DiagnosticBag]:
    """Plan `spec` with every layer expanded and create the Session (None when the plan has errors)."""
    plan, bag = plan_program(spec, attrs.evolve(options, full=True))
    if plan is None or bag.has_errors:
        return None, bag
    return Session.create(plan, **kw), bag  # type: ignore[arg-type]


def machine() -> str:
    """Date, revision, CPU model, core count, Python and load: the context the numbers need."""
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        rev = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True,
                             text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        rev = "unknown revision"
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (f"{datetime.date.today().isoformat()}, pgraph {rev}, {model}, {os.cpu_count()} cores, "
            f"Python {platform.python_version()}, load average {load:.2f} at start")


def peak_gib() -> float:
    """This process's peak resident set (ru_maxrss, KiB on Linux) in GiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (1 << 20)


# ---- default mode: executor vs reference ------------------------------------------------------

def ratio(args: argparse.Namespace) -> tuple[int, list[str]]:
    """Best-of-`repeat` times of the dense reference and the executor; (exit code, report lines)."""
    t0 = time.perf_counter()
    session, bag = make_session(args.spec, Options(config=args.config, layers=args.layers[0]))
    if session is None:
        print("\n".join(d.message for d in bag.items), file=sys.stderr)
        return 1, []
    setup = time.perf_counter() - t0
    ref_times, exe_times = [], []
    last = None
    for _ in range(args.repeat):
        with blas_threads(1):
            t = time.perf_counter()
            golden_decode(session.inputs)
            ref_times.append(time.perf_counter() - t)
        last = session.execute("topo", races=args.races)
        exe_times.append(last.seconds)
    assert last is not None and last.comparison is not None
    ref, exe = min(ref_times), min(exe_times)
    g = session.inputs.geometry
    lines = [
        f"Measured {machine()}.",
        "",
        f"`python bench/bench_numpy.py{' --races' if args.races else ''}`: spec {Path(args.spec).name}, config "
        f"{args.config}, {g.layers} layer(s), hidden {g.hidden}, intermediate {g.intermediate}, batch "
        f"{session.inputs.batch}, {session.inputs.weights} weights; OpenBLAS on one thread.",
        "",
        "| measurement | seconds |",
        "| --- | ---: |",
        f"| setup (plan + inputs + first reference) | {setup:.2f} |",
        f"| dense reference, best of {args.repeat} | {ref:.3f} |",
        f"| executor (race detector {'on' if args.races else 'off'}), best of {args.repeat} | {exe:.3f} |",
        "",
        f"Ratio executor / reference: **{exe / ref:.2f}** (target <= 1.5). Comparison: {last.comparison.render()}. "
        f"Peak RSS {peak_gib():.2f} GiB.",
    ]
    return 0, lines


# ---- --tiers: one child per run ---------------------------------------------------------------

def one(args: argparse.Namespace) -> int:
    """Child: one full run, printed as one JSON line."""
    fixture, weights, layers = args.one[0], args.one[1], int(args.one[2])
    t0 = time.perf_counter()
    session, bag = make_session(args.spec, Options(config=args.config, layers=layers), seed=args.seed,
                                  fixture=fixture, weights=weights)
    if session is None:
        print("\n".join(d.message for d in bag.items), file=sys.stderr)
        return 1
    create_s = time.perf_counter() - t0
    drawn_ref = session.inputs.generated
    ex = session.execute("topo", races=True)
    c = ex.comparison
    out = {
        "fixture": fixture, "weights": session.inputs.weights, "layers": layers, "seed": args.seed,
        "batch": session.inputs.batch, "create_s": create_s, "execute_s": ex.seconds,
        "drawn_reference": drawn_ref, "drawn_executor": session.inputs.generated - drawn_ref,
        "races": len(ex.races), "fault": ex.fault, "peak_gib": peak_gib(),
        "out_rms": float(np.sqrt(np.mean(session.golden.out[:session.inputs.batch].astype(np.float64) ** 2))),
    }
    if c is not None:
        out.update({
            "ok": c.ok, "cosine": c.cosine, "rel_l2": c.rel_l2, "max_abs": c.max_abs, "nonfinite": c.nonfinite,
            "deciding": [r.check.name for r in c.results[:c.deciding]],
            "checks": {r.check.name: {"failures": r.failures, "total": r.total, "pad_failures": r.pad_failures,
                                      "within": r.within, "need": r.check.need()} for r in c.results},
        })
    print(json.dumps(out, sort_keys=True))
    return 0


def draw_times(args: argparse.Namespace, fixtures: list[str]) -> dict[str, tuple[float, int]]:
    """Seconds and values to draw every per-layer tensor of one layer, per fixture (one child)."""
    code = ("import json, sys, time; sys.path.insert(0, sys.argv[1]);"
            "from pgraph.pipeline import Options, plan_program;"
            "from pgraph.backends.numpy.inputs import LAYERED, make_inputs;"
            "plan, _ = plan_program(sys.argv[2], Options(config=sys.argv[3], layers=1));"
            "out = {}\n"
            "for f in sys.argv[4:]:\n"
            "    inp = make_inputs(plan.program, fixture=f, weights='distinct'); t = time.perf_counter()\n"
            "    n = sum(inp.layer(name, 0).size for name in LAYERED)\n"
            "    out[f] = (time.perf_counter() - t, n)\n"
            "print(json.dumps(out))")
    proc = subprocess.run([sys.executable, "-c", code, str(ROOT), args.spec, args.config, *fixtures],
                          capture_output=True, text=True, check=True)
    return {k: (float(v[0]), int(v[1])) for k, v in json.loads(proc.stdout.strip().splitlines()[-1]).items()}


def run_child(args: argparse.Namespace, fixture: str, weights: str, layers: int) -> dict:
    """Run one tier case in a fresh interpreter; its JSON result plus the whole wall time."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--spec", args.spec, "--config", args.config,
           "--seed", str(args.seed), "--one", fixture, weights, str(layers)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"bench: {' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["wall_s"] = wall
    return result


def _cell(r: dict, name: str) -> str:
    chk = r["checks"][name]
    rate = 100 * (1 - chk["failures"] / chk["total"])
    text = f"{chk['failures']:,} ({rate:.3f} %)"
    if chk["pad_failures"]:
        text += f", {chk['pad_failures']} pad"
    if name in r["deciding"]:
        text = f"**{text} {'pass' if chk['within'] else 'FAIL'}**"
    return text


def tier_tables(results: list[dict], header: str, command: str, depths: list[int]) -> tuple[list[str], list[str]]:
    """(the full table for the docs, the README summary) of the tier runs."""
    names = [c.name for c in all_checks(10)]            # single-layer check, depth tier, 3e-3 tier
    config = command.split("--config ")[1].split()[0] if "--config " in command else "full"
    total = results[0]["checks"][names[0]]["total"] if results else 0
    lines = [
        f"Measured {header}. Command: `{command}`; each row one child process: {config} config, batch "
        f"{results[0]['batch'] if results else '?'}, seed {results[0]['seed'] if results else '?'}, topological "
        f"order, race detector on. Failing elements of the bf16 `out` (of {total:,}) per comparator; "
        "**bold** = the comparators that decide that run (`compare.checks_for`), the others for information.",
        "",
        "| fixture | weights | layers | single-layer check (3e-3, <= 2 % failing) | depth tier (5e-3; 1 layer "
        "100 %, <= 10 layers 99.9 %, deeper 98 %) | 3e-3 tier (>= 99.9 %) | cosine | rel L2 | races | verdict | "
        "rms of the reference out | plan + reference s | executor s | whole run s | peak RSS GiB | "
        "layer slices drawn (ref + exec) |",
        "| --- | --- | ---: | --- | --- | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        depth_name = next(n for n in r["checks"] if n.startswith("depth tier"))
        verdict = "pass" if r.get("ok") and not r["races"] and r["fault"] is None else "FAIL"
        lines.append(
            f"| {FIXTURE_NAMES[r['fixture']]} | {r['weights']} | {r['layers']} | {_cell(r, names[0])} | "
            f"{_cell(r, depth_name)} | {_cell(r, names[2])} | {r['cosine']:.6f} | {r['rel_l2']:.2e} | "
            f"{r['races']} | {verdict} | {r['out_rms']:.2f} | {r['create_s']:.1f} | {r['execute_s']:.1f} | {r['wall_s']:.1f} | "
            f"{r['peak_gib']:.2f} | {r['drawn_reference']} + {r['drawn_executor']} |")
    summary = [
        f"Measured {header.split(',')[0]} by `{command}` (docs/performance.md has times and memory): "
        f"failing elements of {total:,}, deciding comparator(s) of each run.",
        "",
        "| fixture, weights | " + " | ".join(f"{n} layer{'s' if n != 1 else ''}" for n in depths) + " |",
        "| --- |" + " --- |" * len(depths),
    ]
    rows: dict[tuple[str, str], dict[int, str]] = {}
    for r in results:
        parts = []
        for name in r["deciding"]:
            chk = r["checks"][name]
            rate = 100 * (1 - chk["failures"] / chk["total"])
            short = name.split(" (")[0]
            parts.append(f"{short}: {chk['failures']:,} ({rate:.3f} %) {'pass' if chk['within'] else 'FAIL'}")
        rows.setdefault((r["fixture"], r["weights"]), {})[r["layers"]] = "; ".join(parts)
    for (fixture, weights), cells in rows.items():
        summary.append(f"| {FIXTURE_NAMES[fixture]}, {weights} | " +
                       " | ".join(cells.get(n, "not run") for n in depths) + " |")
    return lines, summary


def write_block(path: Path, name: str, lines: list[str]) -> None:
    """Replace the text between `<!-- bench_numpy:NAME -->` and `<!-- /bench_numpy:NAME -->` in `path`."""
    text = path.read_text(encoding="utf-8")
    pattern = re.compile(rf"(<!-- bench_numpy:{re.escape(name)} -->\n).*?(<!-- /bench_numpy:{re.escape(name)} -->)",
                         re.S)
    if not pattern.search(text):
        raise SystemExit(f"bench: {path} has no block <!-- bench_numpy:{name} -->")
    body = "\n".join(lines) + "\n"
    write_atomic(path, pattern.sub(lambda m: m.group(1) + body + m.group(2), text, count=1))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", default=SPEC)
    ap.add_argument("--config", default="full")
    ap.add_argument("--layers", type=int, nargs="+", default=None,
                    help="default mode: the depth (default 1); --tiers: the depths (default 1 10 40)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--races", action="store_true", help="default mode: keep the race detector on in the executor")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--tiers", action="store_true", help="run the fixture x weights x depth matrix (child processes)")
    ap.add_argument("--inputs", nargs="+", default=["current", "tier"], choices=("current", "tier"))
    ap.add_argument("--weights", nargs="+", default=["replicated", "distinct"], choices=("replicated", "distinct"))
    ap.add_argument("--write", action="store_true", help="write the results into the marked blocks of the docs")
    ap.add_argument("--one", nargs=3, metavar=("FIXTURE", "WEIGHTS", "LAYERS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        return one(args)
    if not args.tiers:
        args.layers = args.layers or [1]
        code, lines = ratio(args)
        print("\n".join(lines))
        if code == 0 and args.write:
            write_block(ROOT / "docs" / "performance.md", "ratio", lines)
        return code
    header = machine()
    depths = args.layers or [1, 10, 40]
    command = "python bench/bench_numpy.py --tiers"
    if args.config != "full":
        command += f" --config {args.config}"
    if args.layers is not None:
        command += f" --layers {' '.join(map(str, depths))}"
    if args.inputs != ["current", "tier"]:
        command += f" --inputs {' '.join(args.inputs)}"
    if args.weights != ["replicated", "distinct"]:
        command += f" --weights {' '.join(args.weights)}"
    results = []
    for fixture in args.inputs:
        for weights in args.weights:
            for layers in depths:
                r = run_child(args, fixture, weights, layers)
                print(json.dumps(r, sort_keys=True), flush=True)
                results.append(r)
    load_end = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    header += f", {load_end:.2f} at the end"
    table, summary = tier_tables(results, header, command, depths)
    draws = draw_times(args, args.inputs)
    table += ["", "Drawing the per-layer tensors of one layer (the cost of distinct weights, paid once by the "
              "reference and once by each execution): " + "; ".join(
                  f"{FIXTURE_NAMES[f]} {t:.1f} s for {n / 1e6:.0f} M values" for f, (t, n) in draws.items()) + "."]
    print("\n".join(table))
    print()
    print("\n".join(summary))
    if args.write:
        write_block(ROOT / "docs" / "performance.md", "tiers", table)
        write_block(ROOT / "docs" / "backend_numpy.md", "tiers", table)
        write_block(ROOT / "README.md", "tiers-summary", summary)
    failed = [r for r in results if not (r.get("ok") and not r["races"] and r["fault"] is None)]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
