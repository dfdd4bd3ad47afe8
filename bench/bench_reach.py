"""Benchmark of happens-before and its passes at 1x/2x/4x/8x (issue 23); writes its section of
docs/performance.md.

    python3 bench/bench_reach.py                        # ~10 min; rewrites the bench_reach section
    python3 bench/bench_reach.py --before ../pgraph-before    # also the same rows with another tree's pgraph
    python3 bench/bench_reach.py --print                # print the section instead
    python3 bench/bench_reach.py --runs 1 --json r.json # one run per row, raw results kept

Shapes, each at 1x, 2x, 4x and 8x:

- **prefill check**: `pgraph check bench/specs/prefill_351k.pgl -D TOKENS=128|256|512`, the
  fine 40-layer prefill (bench/specs/prefill.py) with 8/16/32 row tiles: 351,050 to 1,301,474
  tasks, windows of 18,781 to 69,973 instances (the bitset limit is 24,576). Attention waits on
  the KV-cache rows of every earlier row tile, so the edges grow faster than the tasks. The 8x
  (TOKENS=1024, 2,568,706 tasks) is refused by PG031 (33 million region evaluations); with the
  limit lifted the expander alone passes 8.7 GB before it has resolved the deps, so it has no row.
- **prefill --full**: `pgraph check --full bench/specs/prefill_351k.pgl -D NUM_LAYERS=5|10|20|40`:
  every iteration expanded, 44,000 to 351,091 instances, all above the bitset limit.
- **fan-in**: bench/specs/stress.py's `writers(n)`, n = 20,000 to 160,000 row writers into one
  consumer (one instance with n predecessors: the redundant-edge rule's union of ranges).
- **chain**: `chain(5, w)`, five stages of w = 1,000 to 8,000 tasks (single predecessors).

Each row is a child process (`python3 bench/bench_reach.py --child ...`) that runs pgraph's own
command line (`pgraph.cli.main`, output to /dev/null) with every analysis pass timed in place;
the parent takes its wall
time, CPU time (user + system) and peak RSS (`os.wait4`), medians of `--runs`. The acceptance
rows run plain `python3 -m pgraph check` (no limit lifted) on the 1x and 2x prefill. `--before
TREE` repeats the rows with TREE's pgraph (PYTHONPATH=TREE), a row killed after `--cpu-limit`
CPU seconds (120) printed as such. No figure of the section is typed by hand.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "specs"))

import stress  # noqa: E402  (bench/specs/stress.py)
from run import compile_bytecode, machine_line  # noqa: E402

DOC = ROOT / "docs" / "performance.md"
BEGIN, END = "<!-- bench_reach:begin -->", "<!-- bench_reach:end -->"
P351 = "bench/specs/prefill_351k.pgl"
SCALES = (1, 2, 4, 8)
PASSES = ("reach", "races", "redundant-edges", "funnel")


# ---- the child: one pgraph command, its passes timed ---------------------------------------

def child_main(out: str, argv: list[str]) -> None:
    """Run `pgraph ARGV` in this process; write its exit code and {pass: CPU s} to `out` as JSON."""
    import pgraph.pipeline as pl
    from pgraph import cli

    times: dict[str, float] = {}

    def timed(name: str, fn: Any) -> Any:
        def run(*a: Any, **k: Any) -> Any:
            t = time.process_time()
            try:
                return fn(*a, **k)
            finally:
                times[name] = times.get(name, 0.0) + time.process_time() - t
        return run

    for p in pl.PASSES:
        p.run = timed(p.name, p.run)  # type: ignore[method-assign]
    with open(os.devnull, "w") as null:
        sys.stdout = null
        code = cli.main(argv)
        sys.stdout = sys.__stdout__
    Path(out).write_text(json.dumps({"exit": code, "passes": times}), encoding="utf-8")
    os._exit(0)


# ---- the parent -----------------------------------------------------------------------------

def child(argv: list[str], cpu_limit: float = 10 ** 6) -> tuple[float, float, float, int]:
    """(wall s, CPU s, peak RSS MiB, exit code) of one child process, killed by the kernel
    (SIGXCPU) after `cpu_limit` seconds of CPU: the machine is shared, a wall-time limit would
    kill a slow row for the load of others."""
    limit = int(cpu_limit)

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (limit, limit + 5))

    t0 = time.perf_counter()
    with open(os.devnull, "wb") as null:
        proc = subprocess.Popen(argv, stdout=null, stderr=null, cwd=ROOT, preexec_fn=limited)
        _pid, status, usage = os.wait4(proc.pid, 0)
    return (time.perf_counter() - t0, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024,
            os.waitstatus_to_exitcode(status))


def shapes(tmp: Path) -> dict[str, list[tuple[str, list[str]]]]:
    """shape -> [(size label, pgraph arguments)] at 1x/2x/4x/8x."""
    out: dict[str, list[tuple[str, list[str]]]] = {"prefill check": [], "prefill --full": [], "fan-in": [], "chain": []}
    for s in SCALES:
        if s < 8:
            out["prefill check"].append((f"TOKENS={128 * s}", ["check", P351, "-D", f"TOKENS={128 * s}"]))
        out["prefill --full"].append((f"{5 * s} layers", ["check", "--full", P351, "-D", f"NUM_LAYERS={5 * s}"]))
        n = 20_000 * s
        path = tmp / f"writers_{n}.pgl"
        path.write_text(stress.writers(n), encoding="utf-8")
        out["fan-in"].append((f"{n:,} writers", ["check", str(path)]))
        w = 1_000 * s
        path = tmp / f"chain_{w}.pgl"
        path.write_text(stress.chain(5, w), encoding="utf-8")
        out["chain"].append((f"5 x {w:,}", ["check", str(path)]))
    return out


def measure(argv: list[str], runs: int, tree: Path, cpu_limit: float) -> dict[str, Any]:
    """Medians of `runs` children running `pgraph argv` with `tree`'s pgraph and its passes timed."""
    env_path = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(tree)
    rows: list[tuple[float, float, float, int]] = []
    passes: list[dict[str, float]] = []
    try:
        for _ in range(runs):
            with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
                out = f.name
            rows.append(child([sys.executable, str(HERE / "bench_reach.py"), "--child", out, "--", *argv], cpu_limit))
            text = Path(out).read_text(encoding="utf-8")
            os.unlink(out)
            passes.append(json.loads(text) if text else {})
            if rows[-1][3] < 0:  # killed at the CPU limit: no second run
                break
    finally:
        if env_path is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = env_path
    killed = any(code < 0 for *_, code in rows)
    return {"wall": statistics.median(r[0] for r in rows), "cpu": statistics.median(r[1] for r in rows),
            "rss": max(r[2] for r in rows), "killed": killed, "runs": len(rows),
            "exit": sorted({t["exit"] for t in passes if t}),
            "passes": {p: statistics.median(t["passes"].get(p, 0.0) for t in passes) for p in PASSES} if not killed else {}}


def acceptance(runs: int) -> dict[str, Any]:
    """Plain `python3 -m pgraph check` of the 1x and 2x prefill, interleaved runs."""
    argvs = {s: [sys.executable, "-m", "pgraph", "check", P351, "-D", f"TOKENS={128 * s}"] for s in (1, 2)}
    samples: dict[int, list[tuple[float, float, float, int]]] = {1: [], 2: []}
    for _ in range(runs):
        for s, argv in argvs.items():
            samples[s].append(child(argv))
    return {str(s): {"wall": statistics.median(r[0] for r in rows), "cpu": statistics.median(r[1] for r in rows),
                     "rss": max(r[2] for r in rows), "codes": sorted({r[3] for r in rows})} for s, rows in samples.items()}


def run_all(runs: int, before: Path | None, cpu_limit: float, log: Any) -> dict[str, Any]:
    res: dict[str, Any] = {"machine": machine_line(), "bytecode": compile_bytecode(), "runs": runs,
                           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "shapes": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for shape, rows in shapes(Path(tmp)).items():
            res["shapes"][shape] = []
            for label, argv in rows:
                row: dict[str, Any] = {"size": label, "after": measure(argv, runs, ROOT, cpu_limit)}
                log(f"{shape} {label}: {row['after']['cpu']:.2f} s CPU, {row['after']['rss']:.0f} MiB")
                if before is not None:
                    row["before"] = measure(argv, 1, before, cpu_limit)
                    log(f"  before: {row['before']['cpu']:.2f} s CPU{' (killed)' if row['before']['killed'] else ''}")
                res["shapes"][shape].append(row)
    res["acceptance"] = acceptance(max(runs, 3))
    log(f"acceptance: {res['acceptance']}")
    return res


def _cell(m: dict[str, Any], key: str) -> str:
    return f"> {m[key]:.0f} (killed)" if m["killed"] else f"{m[key]:.2f}"


def _codes(m: dict[str, Any]) -> str:
    return ", ".join(map(str, m["exit"])) if m["exit"] else "-"


def render(res: dict[str, Any], before_name: str | None) -> str:
    out = [BEGIN, "", f"Measured {res['date']} by `python3 bench/bench_reach.py` ({res['machine']}; {res['bytecode']}; "
           f"median of {res['runs']} run(s) per row, CPU = user + system of the child, pass columns CPU s "
           "measured inside it).", ""]
    for shape, rows in res["shapes"].items():
        out += [f"**{shape}**", "",
                "| size | exit | wall s | CPU s | x prev CPU | peak RSS MiB | " + " | ".join(PASSES) + " |",
                "|---|---|---|---|---|---|" + "---|" * len(PASSES)]
        prev = None
        for row in rows:
            a = row["after"]
            growth = f"{a['cpu'] / prev:.2f}" if prev else ""
            prev = a["cpu"]
            cells = [f"{a['passes'].get(p, 0.0):.2f}" for p in PASSES] if a["passes"] else ["-"] * len(PASSES)
            out.append(f"| {row['size']} | {_codes(a)} | {_cell(a, 'wall')} | {_cell(a, 'cpu')} | {growth} | {a['rss']:.0f} | "
                       + " | ".join(cells) + " |")
        if any("before" in row for row in rows):
            out += ["", f"Before (`--before {before_name}`, one run per row):", "",
                    "| size | wall s | CPU s | peak RSS MiB | " + " | ".join(PASSES) + " |",
                    "|---|---|---|---|" + "---|" * len(PASSES)]
            for row in rows:
                b = row["before"]
                cells = [f"{b['passes'].get(p, 0.0):.2f}" for p in PASSES] if b["passes"] else ["-"] * len(PASSES)
                out.append(f"| {row['size']} | {_cell(b, 'wall')} | {_cell(b, 'cpu')} | {b['rss']:.0f} | "
                           + " | ".join(cells) + " |")
        out.append("")
    acc = res["acceptance"]
    one, two = acc["1"], acc["2"]
    out += ["**Acceptance** (plain `python3 -m pgraph check`, interleaved runs): "
            f"TOKENS=128 (351,050 tasks) {one['wall']:.2f} s wall, {one['cpu']:.2f} s CPU, {one['rss']:.0f} MiB; "
            f"TOKENS=256 (667,858 tasks) {two['wall']:.2f} s wall, {two['cpu']:.2f} s CPU, {two['rss']:.0f} MiB; "
            f"ratio {two['wall'] / one['wall']:.2f} wall, {two['cpu'] / one['cpu']:.2f} CPU (target <= 2.5); "
            f"exit codes {one['codes']} and {two['codes']}.", "", END]
    return "\n".join(out) + "\n"


def write_section(section: str) -> None:
    """Replace the text between this bench's markers in docs/performance.md (atomically)."""
    text = DOC.read_text(encoding="utf-8")
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = head + section.rstrip("\n") + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + section
    tmp = DOC.with_suffix(".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(DOC)


def main(argv: list[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    if args_in[:1] == ["--child"]:
        child_main(args_in[1], args_in[3:])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="child runs per row (default 3)")
    ap.add_argument("--before", metavar="TREE", help="also run each row once with TREE's pgraph")
    ap.add_argument("--cpu-limit", type=float, default=120.0, help="CPU seconds before a row's child is killed (120)")
    ap.add_argument("--print", action="store_true", help="print the section instead of writing the doc")
    ap.add_argument("--json", metavar="FILE", help="also write the raw results")
    args = ap.parse_args(args_in)
    before = Path(args.before).resolve() if args.before else None
    res = run_all(args.runs, before, args.cpu_limit, lambda s: print(s, file=sys.stderr, flush=True))
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2), encoding="utf-8")
    section = render(res, args.before)
    if args.print:
        print(section)
    else:
        write_section(section)
        print(f"wrote the bench_reach section of {DOC.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
