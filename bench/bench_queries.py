"""Benchmark of the queries (issue 14): `pgraph deps`, `why`, `stats` on the 40-layer HEAD
spec, whole process, against `pgraph check` measured in the same run; writes its section of
docs/performance.md.

    python3 bench/bench_queries.py            # 7 runs per row, rows interleaved
    python3 bench/bench_queries.py --runs 3
    python3 bench/bench_queries.py --print    # print the section instead of writing the doc

Each row runs `python3 -m pgraph ...` as a child process (stdout and stderr to /dev/null) and
takes its wall time and CPU time (user + system, `os.wait4`). `deps` and `why` run twice:
cold (`PGRAPH_CACHE=0`: parse, lower, expand) and warm (the query cache of
pgraph.commands.query_cache, in a temporary folder, filled by one untimed run first). The rows are interleaved run
by run (check, deps, ..., check, deps, ...) so that a noisy neighbour hits all of them
alike; the table gives the medians and each row's median over `check`'s. The target of the
issue is a whole process under 0.5 s; nothing in the written section is typed by hand.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import child, compile_bytecode  # noqa: E402  (bench/run.py: the whole-process measurement)

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "performance.md"
BEGIN, END = "<!-- bench_queries:begin -->", "<!-- bench_queries:end -->"
SPEC = "specs/decode_layer.pgl"
TARGET_S = 0.5

ROWS: list[tuple[str, list[str]]] = [
    ("check (reference)", ["check", SPEC]),
    ("deps out_proj.direct", ["deps", SPEC, "out_proj.direct"]),
    ("deps gate_proj[n=3,k=1]@L=2", ["deps", SPEC, "gate_proj[n=3,k=1]@L=2"]),
    ("deps dcr_xgamma@L=39 (87 producers)", ["deps", SPEC, "dcr_xgamma@L=39"]),
    ("why silu[n=2]@L=5 q_proj@L=5", ["why", SPEC, "silu[n=2]@L=5", "q_proj@L=5"]),
    ("why gate_proj.critical[k=1] up_proj.critical[k=1] (unordered)",
     ["why", SPEC, "gate_proj.critical[k=1]", "up_proj.critical[k=1]"]),
    ("why x_gamma0 copy_out (through the window)", ["why", SPEC, "x_gamma0", "copy_out"]),
    ("stats", ["stats", SPEC]),
    ("plan (for comparison)", ["plan", SPEC]),
]


def rows() -> list[tuple[str, list[str], bool]]:
    """(name, argv, warm cache): `deps` and `why` cold and warm, the others as they are."""
    out = []
    for name, argv in ROWS:
        if argv[0] in ("deps", "why"):
            out.append((f"{name} (cold)", argv, False))
            out.append((f"{name} (warm)", argv, True))
        else:
            out.append((name, argv, False))
    return out


def measure(runs: int) -> dict[str, list[tuple[float, float]]]:
    """Row -> [(wall s, CPU s)] over `runs` interleaved rounds."""
    out: dict[str, list[tuple[float, float]]] = {name: [] for name, _, _ in rows()}
    exe = [sys.executable, "-m", "pgraph"]
    with tempfile.TemporaryDirectory() as cache:
        os.environ["PGRAPH_CACHE_DIR"] = cache
        for _name, argv, warm in rows():
            if warm:
                subprocess.run([*exe, *argv], cwd=ROOT, capture_output=True, check=True)
        for _ in range(runs):
            for name, argv, warm in rows():
                os.environ["PGRAPH_CACHE"] = "1" if warm else "0"
                wall, cpu, _rss, code = child([*exe, *argv], timeout=120)
                if code != 0:
                    raise SystemExit(f"{name}: exit {code}")
                out[name].append((wall, cpu))
    return out


def section(results: dict[str, list[tuple[float, float]]], runs: int) -> str:
    """The Markdown section of docs/performance.md."""
    med = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for k, v in results.items()}
    ref_wall, ref_cpu = med["check (reference)"]
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT,
                         check=False).stdout.strip() or "?"
    lines = [BEGIN, "## Queries (`bench/bench_queries.py`)", "",
             f"Measured {datetime.date.today().isoformat()} at {rev} on {platform.machine()} "
             f"({os.cpu_count()} cores, shared), Python {platform.python_version()}; {runs} interleaved runs per "
             "row, medians; whole process (`python3 -m pgraph ...`), the 40-layer HEAD spec. Ratio: the row's "
             f"median wall time over `check`'s in the same run. Target of issue 14: under {TARGET_S} s.", "",
             "| command | wall s | CPU s | / check | under 0.5 s |", "|---|---:|---:|---:|:---:|"]
    for name, _argv, _warm in rows():
        wall, cpu = med[name]
        lines.append(f"| `{name}` | {wall:.3f} | {cpu:.3f} | {wall / ref_wall:.2f} | "
                     f"{'yes' if wall < TARGET_S else 'no'} |")
    warm = [med[n][0] for n, _a, w in rows() if w]
    cold = [med[n][0] for n, a, w in rows() if not w and a[0] in ("deps", "why")]
    lines += ["", f"`check` itself: {ref_wall:.3f} s wall, {ref_cpu:.3f} s CPU. Cold `deps`/`why` (parse, lower, "
              f"expand the query window, no planner pass) take {min(cold) / ref_wall:.2f}-{max(cold) / ref_wall:.2f} "
              f"of `check`; warm ones (the expansion from the query cache) {min(warm) / ref_wall:.2f}-"
              f"{max(warm) / ref_wall:.2f}: what remains is Python's start, importing pgraph (`pgraph.cli` imports "
              "the whole pipeline, lark included) and unpickling the Program and graph. `stats` runs the whole "
              "planner (its figures are the passes' facts), so it costs what `check` costs.", END]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--print", action="store_true", help="print the section instead of writing docs/performance.md")
    args = ap.parse_args()
    t0 = time.perf_counter()
    compiled = compile_bytecode()
    text = section(measure(args.runs), args.runs).replace("; whole process", f"; {compiled}; whole process", 1)
    if args.print:
        print(text, end="")
    else:
        doc = DOC.read_text()
        if BEGIN in doc:
            doc = doc[:doc.index(BEGIN)] + text + doc[doc.index(END) + len(END) + 1:]
        else:
            doc = doc.rstrip("\n") + "\n\n" + text
        DOC.write_text(doc)
        print(f"wrote {DOC.relative_to(ROOT)} ({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
