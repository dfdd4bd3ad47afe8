"""Time `pgraph plan` of two checkouts in one run (interleaved), and write the ratio to docs/performance.md.

    git worktree add /tmp/pgraph-base 0cf58ea
    python3 bench/compare_revisions.py --base /tmp/pgraph-base [--runs 11] [--spec specs/decode_layer.pgl]

Each run is a whole process, `python3 -m pgraph plan SPEC` with the checkout first on
PYTHONPATH and stdout to /dev/null; the two checkouts alternate run by run so that the load
of a shared machine falls on both alike. CPU time comes from getrusage(RUSAGE_CHILDREN).
The table (medians, and the ratio of this checkout to the base) replaces the section between
the `compare_revisions` markers of docs/performance.md.
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
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "performance.md"
BEGIN, END = "<!-- compare_revisions:begin -->", "<!-- compare_revisions:end -->"


def rev(path: Path) -> str:
    """The short commit of a checkout."""
    return subprocess.run(["git", "-C", str(path), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()


def one(checkout: Path, spec: str) -> tuple[float, float]:
    """(wall s, CPU s) of one `pgraph plan` process of `checkout`."""
    env = {**os.environ, "PYTHONPATH": str(checkout), "PYTHONHASHSEED": "0"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pgraph", "plan", spec], cwd=checkout, env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", type=Path, required=True, help="the checkout to compare with (a git worktree)")
    ap.add_argument("--runs", type=int, default=11)
    ap.add_argument("--spec", default="specs/decode_layer.pgl")
    ap.add_argument("--no-write", action="store_true", help="print the table only")
    args = ap.parse_args()
    times: dict[str, list[tuple[float, float]]] = {"base": [], "this": []}
    for _ in range(args.runs):
        times["base"].append(one(args.base.resolve(), args.spec))
        times["this"].append(one(ROOT, args.spec))
    med = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for k, v in times.items()}
    load = os.getloadavg()[0]
    lines = [
        BEGIN,
        "## `pgraph plan` against an earlier revision (`bench/compare_revisions.py`)",
        "",
        f"{datetime.date.today()}, {platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, load {load:.1f}; `pgraph plan {args.spec}`, whole process, {args.runs} "
        "interleaved runs each, medians.",
        "",
        "| checkout | commit | wall s | CPU s |",
        "|---|---|---:|---:|",
        f"| base | {rev(args.base)} | {med['base'][0]:.3f} | {med['base'][1]:.3f} |",
        f"| this | {rev(ROOT)} | {med['this'][0]:.3f} | {med['this'][1]:.3f} |",
        f"| ratio this / base | | {med['this'][0] / med['base'][0]:.2f} | {med['this'][1] / med['base'][1]:.2f} |",
        END,
    ]
    table = "\n".join(lines)
    print(table)
    if not args.no_write:
        text = DOC.read_text(encoding="utf-8")
        if BEGIN in text:
            head, rest = text.split(BEGIN, 1)
            text = head + table + rest.split(END, 1)[1]
        else:
            text = text.rstrip("\n") + "\n\n" + table + "\n"
        DOC.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
