"""Definite writes (PG122, pgraph/plan/writes.py): what the pass costs, and how it grows.

    python3 bench/bench_writes.py --base ../pgraph-before     # rewrites the bench_writes section
    python3 bench/bench_writes.py --base ../pgraph-before --print

Two tables:

- whole process, this checkout against a base checkout (one without the pass), interleaved
  run by run so that the load of a shared machine falls on both alike: `pgraph check` of the
  40-layer decode spec, of the decode spec `--full` (10,604 tasks), and of
  bench/specs/prefill_351k.pgl (windowed); medians of CPU seconds (getrusage of the children);
- the pass alone (in-process CPU seconds of `DefiniteWritesPass.run` on the expanded graph and its
  happens-before, best of 3) on generated
  shapes at 1x/2x/4x/8x: N column tiles of one allocation read whole by one task (the sweep
  subtracts N boxes); a chain of N inout tasks on one allocation, each reading and writing all
  of it, ordered by deps (each read is settled by its direct predecessor); N row writers, each
  row read back by its own task (one candidate per read); a seed, a dummy hop and N atomic adds
  of the whole accumulator after it (each add is settled by the seed, without the other adds);
  N inout writers each after the one before through a dummy (settled by the nearest write).
"""

from __future__ import annotations

import argparse
import datetime
import gc
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from run import write_doc  # bench/run.py (this script's folder is on sys.path)

ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "<!-- bench_writes:begin -->", "<!-- bench_writes:end -->"

PROCESS_ROWS = [
    ("decode, 40 layers", ["check", "specs/decode_layer.pgl"]),
    ("decode --full (10,604 tasks)", ["check", "specs/decode_layer.pgl", "--full"]),
    ("prefill_351k (windowed)", ["check", "bench/specs/prefill_351k.pgl"]),
]


def tiles(n: int) -> str:
    """n column tiles of one allocation, then one reader of all of it (and a seed of y)."""
    return f"""const N = {n}
tensor y : f32[16, 4] external
kernel fill aiv (dst : out f32[16, 4])
kernel use aiv (src : in f32[16, N * 4], dst : out f32[16, 4])
entry main {{
  tensor t : f32[16, N * 4]
  manual scope {{
    parallel w[i in 0..N] {{ call fill(t[:, i*4 +: 4]) }}
    at r deps(w) {{ call use(t, y) }}
  }}
}}
"""


def chain(n: int) -> str:
    """A seed and n inout tasks on one allocation, each after the one before."""
    return f"""const N = {n}
tensor y : f32[16, 64] external
kernel fill aiv (dst : out f32[16, 64])
kernel bump aiv (src : in f32[16, 64], a : inout f32[16, 64])
entry main {{
  tensor t : f32[16, 64]
  manual scope {{
    at seed {{ call fill(t) }}
    for k in 0..N carry prev = seed then step {{
      at step deps(prev) {{ call bump(y, t) }}
    }}
  }}
}}
"""


def rows(n: int) -> str:
    """n row writers of one allocation, each row read back by its own task."""
    return f"""const N = {n}
tensor y : f32[N, 64] external
kernel fill aiv (dst : out f32[1, 64])
kernel copy aiv (src : in f32[1, 64], dst : out f32[1, 64])
entry main {{
  tensor t : f32[N, 64]
  manual scope {{
    parallel w[i in 0..N] {{ call fill(t[i +: 1, :]) }}
    parallel r[i in 0..N] deps(w[i]) {{ call copy(t[i +: 1, :], y[i +: 1, :]) }}
  }}
}}
"""


def atomics(n: int) -> str:
    """A seed, a dummy hop, n atomic adds into the whole accumulator after the hop, one reader."""
    return f"""const N = {n}
tensor x : f32[16, 64] external
tensor y : f32[16, 64] external
kernel fill aiv (dst : out f32[16, 64])
kernel add aic (src : in f32[16, 64], acc : atomic_add f32[16, 64])
kernel use aiv (src : in f32[16, 64], dst : out f32[16, 64])
entry main {{
  tensor acc : f32[16, 64]
  manual scope {{
    at seed {{ call fill(acc) }}
    dummy hop deps(seed)
    parallel mm[i in 0..N] deps(hop) {{ call add(x, acc) }}
    at drain deps(mm) {{ call use(acc, y) }}
  }}
}}
"""


def hops(n: int) -> str:
    """n inout writers of the whole allocation, each ordered after the one before through a dummy."""
    return f"""const N = {n}
tensor y : f32[16, 64] external
kernel fill aiv (dst : out f32[16, 64])
kernel bump aiv (src : in f32[16, 64], a : inout f32[16, 64])
entry main {{
  tensor t : f32[16, 64]
  manual scope {{
    at seed {{ call fill(t) }}
    for k in 0..N carry prev = seed then step {{
      dummy hop deps(prev)
      at step deps(hop) {{ call bump(y, t) }}
    }}
  }}
}}
"""


SHAPES = [("column tiles, one reader", tiles, 2500), ("inout chain", chain, 2500), ("row writers and readers", rows, 2500),
          ("atomic adds behind a dummy hop", atomics, 2500), ("inout chain through dummy hops", hops, 1250)]


INTRO = """PG122 (`pgraph/plan/writes.py`) looks at every read of an allocation once: a covering write of a
direct predecessor settles most (the chain of inout writers, a projection after its x*gamma), then
one of the 16 nearest earlier writes that covers and is an ancestor (writers ordered through dummy
hops), then the plain writes that meet the read in the buffer's interval index (a seed under a
thousand atomic adds), and only then every write and atomic add that meets it, whose boxes are
subtracted by a sweep over their breakpoints. Ancestors come from the Reach fact (one pass over the
ancestor bitset for many candidates). No step pairs every writer with every reader: the work is the
reads plus the writes that meet each read before it is settled. The whole-process rows are the
decode plan and a large bench spec against a checkout without the pass."""


def one(checkout: Path, args: list[str]) -> float:
    """CPU s of one `pgraph` process of `checkout`."""
    env = {**os.environ, "PYTHONPATH": str(checkout), "PYTHONHASHSEED": "0"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-m", "pgraph", *args], cwd=ROOT, env=env, check=False,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def pass_seconds(text: str, full: bool = True, path: Path | None = None) -> tuple[float, int]:
    """(best-of-3 CPU s of DefiniteWritesPass.run, instances) on the spec `text` (or the file `path`)."""
    sys.path.insert(0, str(ROOT))
    from pgraph.diagnostics import DiagnosticBag
    from pgraph.pipeline import Options, run_until
    from pgraph.plan.base import Plan
    from pgraph.plan.reach import ReachPass
    from pgraph.plan.writes import DefiniteWritesPass

    with tempfile.TemporaryDirectory() as d:
        if path is None:
            path = Path(d) / "shape.pgl"
            path.write_text(text, encoding="utf-8")
        # the graph and its happens-before only: the other passes are not what is measured
        stopped = run_until(path, Options(full=full), DiagnosticBag(), "graph")
        assert stopped.program is not None and stopped.graph is not None
        plan = Plan(stopped.program, stopped.graph, DiagnosticBag())
        ReachPass().run(plan)
        best = float("inf")
        gc.disable()  # as the pipeline runs its passes (pipeline._collector_paused)
        try:
            for _ in range(3):
                t0 = time.process_time()
                DefiniteWritesPass().run(plan)
                best = min(best, time.process_time() - t0)
        finally:
            gc.enable()
        return best, len(plan.graph.instances)


def section(base: Path, runs: int) -> str:
    load = os.getloadavg()[0]
    out = [BEGIN, "## Definite writes (`bench/bench_writes.py`)", "", INTRO, "",
           f"{datetime.date.today()}, {platform.machine()}, {os.cpu_count()} cores, Python "
           f"{platform.python_version()}, load {load:.1f}; CPU seconds, medians of {runs} interleaved "
           f"whole-process runs; base `{base}` (without the pass).", "",
           "| `pgraph ...` | base CPU s | this CPU s | ratio |", "|---|---:|---:|---:|"]
    for label, args in PROCESS_ROWS:
        got: dict[str, list[float]] = {"base": [], "this": []}
        for _ in range(runs):
            got["base"].append(one(base, args))
            got["this"].append(one(ROOT, args))
        b, t = statistics.median(got["base"]), statistics.median(got["this"])
        out.append(f"| {label} (`{' '.join(args)}`) | {b:.3f} | {t:.3f} | {t / b:.2f} |")
    out += ["", "The pass alone (`DefiniteWritesPass.run`, in-process CPU s, best of 3, `--full`):", "",
            "| shape | 1x | 2x | 4x | 8x | 8x / 1x |", "|---|---:|---:|---:|---:|---:|"]
    for label, make, n in SHAPES:
        cells, first, last = [], 0.0, 0.0
        for k in (1, 2, 4, 8):
            s, inst = pass_seconds(make(n * k))
            cells.append(f"{s:.3f} ({inst:,})")
            first = s if k == 1 else first
            last = s
        out.append(f"| {label} | {' | '.join(cells)} | {last / first:.1f} |")
    out += ["", "The pass alone on the bench's prefill specs `--full` (the 31,706- and 351,050-task graphs, above the",
            "bitset limit of `pgraph.plan.reach`: ancestors by bounded search):", "",
            "| spec | instances | pass CPU s |", "|---|---:|---:|"]
    for spec in ("bench/specs/prefill_31k.pgl", "bench/specs/prefill_351k.pgl"):
        s, inst = pass_seconds("", path=ROOT / spec)
        out.append(f"| `{spec}` | {inst:,} | {s:.2f} |")
    out += ["", "(instances in parentheses; 8x the size at 8x the time is linear. On a loaded machine (the load is in",
            "the header) repeated runs of one cell differ by up to 2x: read the growth across a row, not one cell.)",
            END]
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", type=Path, required=True, help="a checkout without the pass (e.g. a worktree of the revision before it)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--print", action="store_true", help="print the section instead of writing it")
    a = ap.parse_args()
    text = section(a.base.resolve(), a.runs)
    if a.print:
        print(text)
        return 0
    write_doc(text, BEGIN, END)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
