"""Benchmark of the planner at scale (issue 12); writes its section of docs/performance.md.

    python3 bench/run.py                 # everything, 5 whole-process runs per row (~15 min)
    python3 bench/run.py --runs 3        # fewer runs
    python3 bench/run.py --print         # print the section instead of writing the doc
    python3 bench/run.py --no-full       # skip the --full rows of the prefill specs

Whole-process rows run `python3 -m pgraph ...` as a child process, stdout and stderr to
/dev/null, and take wall time, CPU time (user + system) and peak RSS of that child alone
(`os.wait4`). The networkx baseline of issue 12 runs in the same invocation: a child that
imports networkx, builds the DiGraph of the `--full` prefill_351k expansion from an edge
list (exported once, untimed), sorts it topologically and finds the longest path; the
ratios in the tables are pgraph's median over the baseline's median, both measured here.
Stage rows come from one child per spec that times each stage of `pgraph.pipeline.run_until`
(wrapping the pipeline's own functions and every check and pass in place) and each backend
on the resulting plan, in CPU seconds. Nothing in the written section is typed by hand.
"""

from __future__ import annotations

import argparse
import array
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "performance.md"
BEGIN, END = "<!-- bench_run:begin -->", "<!-- bench_run:end -->"
DECODE = "specs/decode_layer.pgl"
P351 = "bench/specs/prefill_351k.pgl"
P31 = "bench/specs/prefill_31k.pgl"
DECODE_LAYERS = (1, 10, 40, 80, 160, 320, 640)


# ---- measuring child processes ---------------------------------------------------------------

def child(argv: list[str], timeout: float = 900.0) -> tuple[float, float, float, int]:
    """(wall s, CPU s, peak RSS MiB, exit code) of one child process."""
    t0 = time.perf_counter()
    with open(os.devnull, "wb") as null:
        proc = subprocess.Popen(argv, stdout=null, stderr=null, cwd=ROOT)
        deadline = t0 + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                proc.kill()
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.002)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, proc.returncode


def compile_bytecode() -> str:
    """Compile pgraph's bytecode before measuring (what `pip install` does for a regular
    install), and say so. Under PYTHONDONTWRITEBYTECODE=1 (this machine's environment, and
    .ci/run's) an editable install never writes `.pyc` files, so every process would compile
    every pgraph module again (~0.2 s CPU per process): start-up rows would measure the
    compiler, not pgraph."""
    import compileall

    ok = compileall.compile_dir(str(ROOT / "pgraph"), quiet=2)
    return "pgraph's bytecode compiled first (`compileall`)" if ok else "bytecode compilation failed"


def summary(rows: list[tuple[float, float, float, int]]) -> dict[str, Any]:
    """Medians (and extremes) of the runs `rows` ((wall, cpu, rss, exit code) each) of one command."""
    walls, cpus, rss, codes = zip(*rows)
    return {"runs": len(rows), "wall": statistics.median(walls), "wall_min": min(walls), "wall_max": max(walls),
            "cpu": statistics.median(cpus), "rss": max(rss), "codes": sorted(set(codes))}


def measure(argv: list[str], runs: int) -> dict[str, Any]:
    """Medians (and extremes) of `runs` consecutive runs of one command."""
    return summary([child(argv) for _ in range(runs)])


def measure_rounds(commands: dict[str, list[str]], runs: int, log: Callable[[str], None]) -> dict[str, dict[str, Any]]:
    """`measure` of every command, interleaved: `runs` rounds, each running every command once in
    order. This machine's speed drifts by tens of percent over minutes (other jobs on the host),
    so every command's median spans the whole bench and the ratios between rows (pgraph over the
    networkx baseline, 640 layers over 40) compare runs made under the same conditions."""
    samples: dict[str, list[tuple[float, float, float, int]]] = {key: [] for key in commands}
    for r in range(runs):
        log(f"  round {r + 1} of {runs}")
        for key, argv in commands.items():
            samples[key].append(child(argv))
    out = {key: summary(rows) for key, rows in samples.items()}
    for key, row in out.items():
        log(f"  {key}: wall {row['wall']:.3f} s, cpu {row['cpu']:.3f} s, {row['rss']:.0f} MiB")
    return out


def pgraph_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "pgraph", *args]


# ---- the stage timer (runs in a child: python3 bench/run.py --stages SPEC [--full] [--layers N]) ----

def stages_main(spec: str, full: bool, layers: int | None) -> None:
    """Print JSON {stage: CPU s} of one plan of `spec`, plus its counts and backend times."""
    sys.path.insert(0, str(ROOT))
    import pgraph.pipeline as pl
    from pgraph.diagnostics import DiagnosticBag
    from pgraph.expand.work import expansion_work

    times: dict[str, float] = {}

    def timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def run(*a: Any, **k: Any) -> Any:
            t = time.process_time()
            try:
                return fn(*a, **k)
            finally:
                times[name] = times.get(name, 0.0) + time.process_time() - t
        return run

    pl.load = timed("read + parse", pl.load)  # type: ignore[assignment]
    pl.lower = timed("lower", pl.lower)  # type: ignore[assignment]
    pl.check_forms = timed("form checks", pl.check_forms)  # type: ignore[assignment]
    pl.make_window = timed("window (loop identity)", pl.make_window)  # type: ignore[assignment]
    pl.check_expansion_size = timed("PG031 work estimate", pl.check_expansion_size)  # type: ignore[assignment]
    pl.expand = timed("expand", pl.expand)  # type: ignore[assignment]
    for check in (*pl.DECLARATION_CHECKS, *pl.USE_CHECKS):
        check.run = timed("program checks", check.run)  # type: ignore[method-assign]
    for p in (*pl.EXPANSION_CHECKS, *pl.PASSES):
        p.run = timed(f"pass {p.name}", p.run)  # type: ignore[method-assign]
    bag = DiagnosticBag()
    t0 = time.process_time()
    stopped = pl.run_until(spec, pl.Options(full=full, layers=layers), bag, "plan")
    times["plan (total)"] = time.process_time() - t0
    plan = stopped.plan
    out: dict[str, Any] = {"stages": times, "errors": bag.has_errors}
    if plan is not None:
        from pgraph.plan.counts import Counts

        summary = plan.get(Counts).summary
        out["tasks"] = summary["tasks"] + summary["dummy_tasks"]
        out["instances"] = len(plan.graph.instances)
        out["edges"] = plan.graph.number_of_edges()
        out["work"] = sum(expansion_work(plan.program, pl.make_window(plan.program, full)).values())
        out["backends"] = backend_times(plan, spec)
    print(json.dumps(out))


def backend_times(plan: Any, spec: str) -> dict[str, float | str]:
    """CPU seconds of each backend that runs on a Plan in-process (report text/JSON, dot, a2a3)."""
    from pgraph.backends.dot import render_dot
    from pgraph.backends.report import render_json, render_text
    from pgraph.backends.target import BuildInfo, target

    out: dict[str, float | str] = {}
    jobs: list[tuple[str, Callable[[], Any]]] = [
        ("report (text)", lambda: render_text(plan, spec)), ("report (json)", lambda: render_json(plan, spec)),
        ("dot", lambda: render_dot(plan)), ("a2a3", lambda: target("a2a3").emit(plan, BuildInfo(spec, ""))),
    ]
    for name, job in jobs:
        t = time.process_time()
        try:
            job()
            out[name] = time.process_time() - t
        except Exception as err:  # noqa: BLE001 - a backend that cannot take this spec is a table entry
            out[name] = f"n/a ({type(err).__name__})"
    return out


def stages(spec: str, full: bool = False, layers: int | None = None) -> dict[str, Any]:
    argv = [sys.executable, str(Path(__file__).resolve()), "--stages", spec]
    if full:
        argv.append("--full")
    if layers is not None:
        argv += ["--layers", str(layers)]
    res = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=1800)
    if res.returncode != 0:
        raise RuntimeError(f"stage timer failed on {spec}: {res.stderr[-2000:]}")
    data: dict[str, Any] = json.loads(res.stdout.strip().splitlines()[-1])
    return data


# ---- the networkx baseline ------------------------------------------------------------------------

def export_edges(spec: str, path: str) -> None:
    """Write the --full expansion of `spec` as int32 (node count, then u, v pairs) to `path`."""
    sys.path.insert(0, str(ROOT))
    from pgraph.diagnostics import DiagnosticBag
    from pgraph.pipeline import Options, run_until

    stopped = run_until(spec, Options(full=True), DiagnosticBag(), "graph")
    g = stopped.graph
    assert g is not None
    out = array.array("i", [len(g.instances)])
    for u, v, _ in g.edges():
        out.append(u)
        out.append(v)
    with open(path, "wb") as f:
        out.tofile(f)


def nx_baseline_main(path: str) -> None:
    """The issue's plain networkx script: build the DAG, sort it topologically, find the longest path."""
    import networkx as nx

    data = array.array("i")
    with open(path, "rb") as f:
        data.frombytes(f.read())
    n = data[0]
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    g.add_edges_from(zip(data[1::2], data[2::2]))
    order = list(nx.topological_sort(g))
    path_ = nx.dag_longest_path(g, topo_order=order)
    print(n, g.number_of_edges(), len(order), len(path_))


# ---- the run ----------------------------------------------------------------------------------------

def machine_line() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.machine()) if Path("/proc/cpuinfo").exists() else platform.machine()
    mem = ""
    if Path("/proc/meminfo").exists():
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f", {kb / 1024 / 1024:.0f} GiB"
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (f"{datetime.date.today().isoformat()}, {cpu}, {os.cpu_count()} cores{mem}, Python {platform.python_version()}, "
            f"load average {load:.2f} at the start")


def run_all(runs: int, full: bool, log: Callable[[str], None]) -> dict[str, Any]:
    res: dict[str, Any] = {"machine": f"{machine_line()}, {compile_bytecode()}", "runs": runs, "rows": {},
                           "stages": {}}
    rows = res["rows"]
    commands: dict[str, list[str]] = {
        "python3 -c pass": [sys.executable, "-c", "pass"],
        "python3 -c 'import pgraph.cli'": [sys.executable, "-c", "import pgraph.cli"],
    }
    for n in DECODE_LAYERS:
        commands[f"decode plan --layers {n}"] = pgraph_argv("plan", DECODE, "--layers", str(n))
    commands["decode check"] = pgraph_argv("check", DECODE)
    commands["decode plan --full"] = pgraph_argv("plan", DECODE, "--full")
    for name, spec in (("prefill_31k", P31), ("prefill_351k", P351)):
        commands[f"{name} check"] = pgraph_argv("check", spec)
        commands[f"{name} plan --format json"] = pgraph_argv("plan", spec, "--format", "json")
        if full:
            commands[f"{name} check --full"] = pgraph_argv("check", spec, "--full")
    for name in ("stress_writers_20k", "stress_dummies_20k", "stress_chain_5k"):
        commands[f"{name} plan"] = pgraph_argv("plan", f"bench/specs/{name}.pgl")
    with tempfile.TemporaryDirectory() as tmp:
        edges = str(Path(tmp) / "edges.i32")
        log("networkx baseline: exporting the --full prefill_351k edges")
        subprocess.run([sys.executable, str(Path(__file__).resolve()), "--export-edges", P351, edges], check=True,
                       cwd=ROOT, timeout=1800)
        commands["networkx baseline (prefill_351k --full DAG)"] = [sys.executable, str(Path(__file__).resolve()),
                                                                   "--nx-baseline", edges]
        probe = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--nx-baseline", edges],
                               capture_output=True, text=True, cwd=ROOT, timeout=900)
        n, e, _, longest = (int(x) for x in probe.stdout.split())
        res["baseline_graph"] = {"nodes": n, "edges": e, "longest_path": longest}
        log(f"commands, {runs} interleaved rounds")
        rows.update(measure_rounds(commands, runs, log))
    log("stages")
    cases = [("decode, 40 layers", DECODE, False, None), ("decode, 640 layers", DECODE, False, 640),
             ("decode, 40 layers, --full", DECODE, True, None),
             ("prefill_31k", P31, False, None), ("prefill_351k", P351, False, None)]
    if full:
        cases += [("prefill_31k, --full", P31, True, None), ("prefill_351k, --full", P351, True, None)]
    for label, spec, is_full, layers in cases:
        log(f"  {label} ...")
        res["stages"][label] = stages(spec, is_full, layers)
    return res


# ---- the section ------------------------------------------------------------------------------------

def _s(x: float) -> str:
    return f"{x:.3f}" if x < 10 else f"{x:.1f}"


def render(res: dict[str, Any]) -> str:
    rows = res["rows"]
    base = rows["networkx baseline (prefill_351k --full DAG)"]
    bg = res["baseline_graph"]
    out = [BEGIN, "", "## Planner at scale (`bench/run.py`)", "",
           f"Machine: {res['machine']}. Written by `python3 bench/run.py`; every figure below comes from that run "
           f"(medians of {res['runs']} whole-process runs, each a child process with its output discarded, made in "
           f"{res['runs']} rounds that run every command once, so that each median spans the whole bench; "
           "CPU is user + system time of the child, peak RSS its own maximum resident set).", "",
           f"The networkx baseline builds the `--full` prefill_351k DAG ({bg['nodes']:,} nodes, {bg['edges']:,} edges) "
           f"from an edge list, sorts it and finds the longest path ({bg['longest_path']:,} nodes): "
           f"{_s(base['wall'])} s wall, {_s(base['cpu'])} s CPU, {base['rss']:.0f} MiB. The ratio column is pgraph's "
           "median wall time over the baseline's.", "",
           "| command | wall median (s) | min | max | CPU median (s) | peak RSS (MiB) | exit | / networkx |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for key, r in rows.items():
        codes = ",".join(str(c) for c in r["codes"])
        out.append(f"| `{key}` | {_s(r['wall'])} | {_s(r['wall_min'])} | {_s(r['wall_max'])} | {_s(r['cpu'])} | "
                   f"{r['rss']:.0f} | {codes} | {r['wall'] / base['wall']:.2f} |")
    d40, d640 = rows["decode plan --layers 40"], rows["decode plan --layers 640"]
    out += ["", f"Decode: `plan` at 640 layers over 40 layers: {d640['wall'] / d40['wall']:.2f}x wall, "
            f"{d640['cpu'] / d40['cpu']:.2f}x CPU.", ""]
    out += acceptance(rows, base)
    out += ["### Stages (CPU seconds, one run each)", ""]
    labels = list(res["stages"])
    names: list[str] = []
    for lab in labels:
        for k in res["stages"][lab]["stages"]:
            if k not in names:
                names.append(k)
    out.append("| stage | " + " | ".join(labels) + " |")
    out.append("| --- |" + " ---: |" * len(labels))
    for k in names:
        cells = [res["stages"][lab]["stages"].get(k) for lab in labels]
        out.append(f"| {k} | " + " | ".join("" if c is None else f"{c:.3f}" for c in cells) + " |")
    bnames: list[str] = []
    for lab in labels:
        for k in res["stages"][lab].get("backends", {}):
            if k not in bnames:
                bnames.append(k)
    for k in bnames:
        cells = [res["stages"][lab].get("backends", {}).get(k) for lab in labels]
        out.append(f"| backend {k} | " + " | ".join(
            "" if c is None else (c if isinstance(c, str) else f"{c:.3f}") for c in cells) + " |")
    for what in ("tasks", "instances", "edges", "work"):
        cells = [res["stages"][lab].get(what) for lab in labels]
        label = {"tasks": "tasks + dummies (summary)", "instances": "instances expanded", "edges": "edges expanded",
                 "work": "PG031 work units (estimate = expansion)"}[what]
        out.append(f"| {label} | " + " | ".join("" if c is None else f"{c:,}" for c in cells) + " |")
    out += ["", END]
    return "\n".join(out) + "\n"


#: Issue 12's acceptance targets: (row, what, limit, unit); "x nx" limits the ratio to the baseline.
TARGETS = [
    ("prefill_351k check", "wall", 5.0, "s"), ("prefill_351k check", "rss", 1024.0, "MiB"),
    ("prefill_351k check", "x nx", 0.5, ""), ("prefill_351k plan --format json", "wall", 8.0, "s"),
    ("prefill_351k plan --format json", "x nx", 0.5, ""), ("prefill_351k check --full", "wall", 30.0, "s"),
    ("prefill_351k check --full", "rss", 2048.0, "MiB"), ("stress_writers_20k plan", "wall", 2.0, "s"),
    ("stress_chain_5k plan", "wall", 1.0, "s"), ("decode plan --layers 40", "wall", 0.25, "s"),
]


def _fmt(x: float, what: str, unit: str) -> str:
    if what == "rss":
        return f"{x:.0f} {unit}"
    return f"{x:.2f} {unit}".rstrip()


def acceptance(rows: dict[str, Any], base: dict[str, Any]) -> list[str]:
    """The acceptance table: each target of issue 12 against this run (wall and CPU both shown,
    since a loaded machine stretches wall time)."""
    out = ["### Acceptance (issue 12)", "", "| row | measure | limit | wall | CPU | met (wall) | met (CPU) |",
           "| --- | --- | ---: | ---: | ---: | --- | --- |"]
    for key, what, limit, unit in TARGETS:
        r = rows.get(key)
        if r is None:
            continue
        if what == "rss":
            w = c = r["rss"]
        elif what == "x nx":
            w, c = r["wall"] / base["wall"], r["cpu"] / base["cpu"]
        else:
            w, c = r["wall"], r["cpu"]
        cells = [_fmt(x, what, unit) for x in (limit, w, c)]
        out.append(f"| `{key}` | {what} | {' | '.join(cells)} | {'yes' if w < limit else 'no'} | "
                   f"{'yes' if c < limit else 'no'} |")
    d40, d640 = rows.get("decode plan --layers 40"), rows.get("decode plan --layers 640")
    if d40 and d640:
        w, c = d640["wall"] / d40["wall"], d640["cpu"] / d40["cpu"]
        out.append(f"| `decode plan --layers 640` | / 40 layers | 2.00 | {w:.2f} | {c:.2f} | {'yes' if w < 2 else 'no'} | "
                   f"{'yes' if c < 2 else 'no'} |")
    return [*out, ""]


def write_doc(section: str, begin: str = BEGIN, end: str = END) -> None:
    """Replace the part of docs/performance.md from `begin` to `end` (markers included, `section`
    carries them) with `section`, or append it; written atomically. Shared by the bench scripts."""
    text = DOC.read_text(encoding="utf-8")
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        _, tail = rest.split(end, 1)
        text = head + section.rstrip("\n") + tail
    else:
        text = text.rstrip("\n") + "\n\n" + section
    tmp = DOC.with_suffix(".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(DOC)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5, help="whole-process runs per row (default 5)")
    ap.add_argument("--no-full", action="store_true", help="skip the --full rows of the prefill specs")
    ap.add_argument("--print", action="store_true", help="print the section instead of writing docs/performance.md")
    ap.add_argument("--json", metavar="FILE", help="also write the raw results as JSON")
    ap.add_argument("--stages", metavar="SPEC", help=argparse.SUPPRESS)
    ap.add_argument("--full", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--layers", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--export-edges", nargs=2, metavar=("SPEC", "FILE"), help=argparse.SUPPRESS)
    ap.add_argument("--nx-baseline", metavar="FILE", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.stages:
        stages_main(args.stages, args.full, args.layers)
        return 0
    if args.export_edges:
        export_edges(*args.export_edges)
        return 0
    if args.nx_baseline:
        nx_baseline_main(args.nx_baseline)
        return 0
    res = run_all(args.runs, not args.no_full, lambda s: print(s, file=sys.stderr, flush=True))
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2), encoding="utf-8")
    section = render(res)
    if args.print:
        print(section)
    else:
        write_doc(section)
        print(f"wrote the bench_run section of {DOC.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
