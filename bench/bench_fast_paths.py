"""What each fast path buys: whole commands with it on and with its reference (PGRAPH_REFERENCE=NAME).

    python3 bench/bench_fast_paths.py [--runs 5] [--print]

For every fast path of `pgraph.fastpath.FAST_PATHS` and each command where it takes effect, the
command runs as a whole process (`python3 -m pgraph ...`, stdout to /dev/null), alternately with
the fast path on and with `PGRAPH_REFERENCE=<name>` (that path's reference only), `--runs` times
each. CPU time comes from getrusage(RUSAGE_CHILDREN), which a shared machine disturbs less than
wall time; the gain is the difference of the two medians. The table replaces the section between
the `bench_fast_paths` markers of docs/performance.md; docs/architecture.md ("Fast paths") cites it.
A fast path whose gain is under ~5 ms of every command it serves is deleted (issue 21).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pgraph.fastpath import FAST_PATHS  # noqa: E402

DOC = ROOT / "docs" / "performance.md"
BEGIN, END = "<!-- bench_fast_paths:begin -->", "<!-- bench_fast_paths:end -->"
DECODE = "specs/decode_layer.pgl"

#: per fast path: the commands it serves (arguments of `python3 -m pgraph`)
COMMANDS: dict[str, list[list[str]]] = {
    "lalr": [["check", DECODE], ["plan", DECODE]],
    "query-cache": [["deps", DECODE, "out_proj.direct"], ["why", DECODE, "silu[n=2]@L=5", "q_proj@L=5"]],
    "race-numpy": [["plan", DECODE, "--full"], ["check", "bench/specs/prefill_351k.pgl", "--full"]],
    "reach-mask": [["plan", DECODE, "--full"], ["check", "bench/specs/prefill_351k.pgl", "--full"]],
    "tensormap-index": [["check", "bench/specs/stress_writers_20k.pgl"], ["plan", DECODE, "--full"]],
    "race-frontier": [["check", "bench/specs/prefill_351k.pgl", "--full"]],
    "interval-reach": [["plan", DECODE, "--full"], ["check", "bench/specs/prefill_351k.pgl", "--full"]],
    "funnel-latest": [["check", "bench/specs/prefill_351k.pgl", "--full"]],
    "compiled-regions": [["plan", DECODE], ["check", "bench/specs/prefill_351k.pgl"]],
    "expander-memo": [["plan", DECODE], ["check", "bench/specs/prefill_351k.pgl"]],
    "writes-shortcuts": [["check", DECODE, "--full"], ["check", "bench/specs/stress_writers_20k.pgl"]],
    "steady-jump": [["plan", DECODE], ["plan", DECODE, "--layers", "640"]],
}


def one(argv: list[str], reference: str, cache: Path) -> float:
    """CPU seconds of one whole `pgraph` process (PGRAPH_REFERENCE=reference)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": "0", "PGRAPH_REFERENCE": reference,
           "PGRAPH_CACHE_DIR": str(cache)}
    env.pop("PGRAPH_CACHE", None)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-m", "pgraph", *argv], cwd=ROOT, env=env, check=False,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(runs: int) -> list[tuple[str, str, float, float]]:
    """(fast path, command, median CPU ms on, median CPU ms with its reference) per row."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp)
        for name, commands in COMMANDS.items():
            for argv in commands:
                one(argv, "0", cache)  # warm: bytecode, and the query cache's entry
                on, off = [], []
                for _ in range(runs):
                    on.append(one(argv, "0", cache))
                    off.append(one(argv, name, cache))
                rows.append((name, " ".join(argv), 1000 * statistics.median(on), 1000 * statistics.median(off)))
                print(f"{name:12} {' '.join(argv):60} on {rows[-1][2]:8.1f} ms  reference {rows[-1][3]:8.1f} ms",
                      file=sys.stderr)
    return rows


def section(rows: list[tuple[str, str, float, float]], runs: int) -> str:
    """The markdown section of docs/performance.md."""
    day = datetime.date.today().isoformat()
    lines = [BEGIN, "", f"`python3 bench/bench_fast_paths.py --runs {runs}` on {day} ({platform.machine()}, "
             f"{os.cpu_count()} cores, Python {platform.python_version()}): median CPU time of whole "
             "processes, each fast path on and with its reference (`PGRAPH_REFERENCE=<name>`), runs alternating.",
             "", "| fast path | command | on (ms) | reference (ms) | gain (ms) | ratio |",
             "|---|---|---:|---:|---:|---:|"]
    for name, cmd, on, off in rows:
        lines.append(f"| `{name}` | `pgraph {cmd}` | {on:.0f} | {off:.0f} | {off - on:.0f} | {off / on:.2f}x |")
    lines += ["", END]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--print", action="store_true", help="print the section instead of writing it")
    args = ap.parse_args()
    missing = sorted(set(FAST_PATHS) - set(COMMANDS))
    if missing:
        print(f"bench_fast_paths: no command measures {', '.join(missing)}", file=sys.stderr)
        return 1
    text = section(measure(args.runs), args.runs)
    if args.print:
        print(text)
        return 0
    doc = DOC.read_text(encoding="utf-8")
    if BEGIN in doc:
        doc = doc[:doc.index(BEGIN)] + text + doc[doc.index(END) + len(END):]
    else:
        doc = doc.rstrip("\n") + "\n\n## Fast paths: what each buys\n\n" + text + "\n"
    DOC.write_text(doc, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
