"""Benchmark of the quadratic corners of issue 23; writes its section of docs/performance.md.

    python3 bench/bench_corners.py            # about 5 minutes; rewrites the bench_corners section
    python3 bench/bench_corners.py --print    # print the section instead
    python3 bench/bench_corners.py --runs 1   # one run per row (default 3, median)

Three shapes, each at 1x/2x/4x/8x, every row a child process (`python3 -m pgraph check ...`,
output discarded; wall time, CPU time and peak RSS of that child, `bench/run.py`'s `child`):

- **inference**: five `parallel` stages of W tasks, task i of each stage reading tile i of the
  previous stage's tensor and writing its own (`bench/specs/stress.py`'s chain), once in a
  manual scope with `deps(s[i])` and once in an auto scope where the TensorMap infers the same
  edges (W = 500 .. 4,000: 2,500 .. 20,000 tasks). The ratio auto / manual is the cost of the
  inference; before its interval index it grew with W (64 s against 2 s at 20,000 tasks).
- **writers**: N InOut writers of one whole tensor in a manual scope, each ordered after the
  previous by a loop carry, `--full` (N = 625 .. 5,000): N^2/2 conflicting pairs, all ordered.
  The reference (PGRAPH_REFERENCE=1: every pair listed, then asked) is measured at 1x and 2x.
- **racy**: generated racy programs (`racy_program`: nested loops of unordered writers,
  readers and atomic adds of whole tensors, moving row tiles, column tiles and a view), 8 seeds
  per size, `--full`, trip counts x1 .. x8: many conflicting pairs, many of them races. The
  row gives the slowest and the largest of the 8 runs, and the races the diagnostics count.

Generated specs go to a temporary folder; nothing in the written section is typed by hand.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import os
import platform
import random
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "performance.md"
BEGIN, END = "<!-- bench_corners:begin -->", "<!-- bench_corners:end -->"
SCALES = (1, 2, 4, 8)


def _load(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


run = _load("bench_run", ROOT / "bench" / "run.py")
stress = _load("bench_stress", ROOT / "bench" / "specs" / "stress.py")


# ---- the shapes ------------------------------------------------------------------------------

def chain(width: int, mode: str) -> str:
    """Five stages of `width` tasks (stress.chain) in a `mode` scope; an auto scope infers the
    deps the manual one declares. The task window is raised so that 20,000 tasks fit one scope."""
    text = stress.chain(5, width)
    if mode == "auto":
        text = re.sub(r" deps\(s\d+\[i\]\)", "", text).replace("manual scope", "auto scope")
    return text.replace("entry main {", "target a2a3 { task_window = 65536 }\nentry main {", 1)


def writers(n: int) -> str:
    """`n` InOut writers of one tensor, each after the previous (a TaskId carry), in a manual scope."""
    return f"""const N = {n}
tensor x : f32[64, 64] external
kernel bump aiv (a : inout f32[64, 64])
entry main {{
  manual scope {{
    at seed {{ call bump(x) }}
    for i in 0..N carry prev = seed then w {{
      at w deps(prev) {{ call bump(x) }}
    }}
  }}
}}
"""


def racy_program(seed: int, scale: int) -> str:
    """A racy program of nested loops (trip counts x `scale`): tasks writing, reading, updating
    and atomically adding to whole tensors, row tiles that move with the loops, column tiles and
    a view of another shape; a few ordered by a dep on an earlier task, most not."""
    rng = random.Random(seed)
    lines = ["target a2a3 { task_window = 65536 }", "tensor a : f32[64, 64] external", "tensor b : f32[64, 64] external",
             "view av = a as [32, 128]", "kernel w aiv (dst : out f32)", "kernel r aiv (src : in f32)",
             "kernel rw aiv (dst : inout f32)", "kernel ad aiv (dst : atomic_add f32)", "entry main {",
             f"  {rng.choice(['manual', 'auto'])} scope {{"]
    names: list[str] = []

    def task(ind: str, k: int, loops: list[str]) -> str:
        kernel = rng.choice(["w", "r", "rw", "ad", "w", "rw", "r"])
        t = rng.choice(["a", "a", "b", "av"])
        form = rng.randrange(4)
        v = " + ".join(loops) if loops else "0"
        if t == "av":
            reg = rng.choice(["av", f"av[({v}) % 8 * 4 +: 4, :]"])
        elif form == 0:
            reg = t
        elif form == 1:
            reg = f"{t}[({v}) % 16 * 4 +: 4, :]"
        elif form == 2:
            reg = f"{t}[:, ({v}) % 8 * 8 +: 8]"
        else:
            reg = f"{t}[({v}) % 8 * 8 +: 8, ({v}) % 4 * 16 +: 16]"
        dep = f" deps({rng.choice(names)})" if names and rng.random() < 0.3 else ""
        names.append(f"t{k}")
        return f"{ind}at t{k}{dep} {{ call {kernel}({reg}) }}"

    k = 0
    for outer in range(3):
        lines.append(f"    for i{outer} in 0..{rng.randint(3, 5) * scale} unscoped {{")
        for inner in range(2):
            lines.append(f"      for j{outer}{inner} in 0..{rng.randint(3, 6)} unscoped {{")
            for _ in range(rng.randint(2, 4)):
                lines.append(task("        ", k, [f"i{outer}", f"j{outer}{inner}"]))
                k += 1
            lines.append("      }")
        for _ in range(rng.randint(1, 3)):
            lines.append(task("      ", k, [f"i{outer}"]))
            k += 1
        lines.append("    }")
    lines += ["  }", "}"]
    return "\n".join(lines) + "\n"


# ---- measuring -------------------------------------------------------------------------------

def check_argv(path: Path, *flags: str) -> list[str]:
    return [sys.executable, "-m", "pgraph", "check", str(path), *flags]


COUNT = """
import re, sys
from pgraph.pipeline import Options, plan_program
plan, bag = plan_program(sys.argv[1], Options(full=True))
races = 0
for d in bag.items:
    if d.code in ("PG100", "PG101"):
        m = re.search(r"\\((?:more than )?(\\d+) instance pair", d.message)
        races += int(m.group(1)) if m else 1
print(len(plan.graph.instances) if plan else 0, races)
"""


def tasks_and_races(path: Path) -> tuple[int, int]:
    """(instances, racing pairs the PG100/PG101 diagnostics count) of one `--full` plan, in a child."""
    out = subprocess.run([sys.executable, "-c", COUNT, str(path)], capture_output=True, text=True, cwd=ROOT,
                         check=False).stdout.split()
    return (int(out[0]), int(out[1])) if len(out) == 2 else (0, 0)


def row(argv: list[str], runs: int, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Median wall and CPU, largest RSS of `runs` runs of one command."""
    old = dict(os.environ)
    if env:
        os.environ.update(env)
    try:
        got = [run.child(argv, timeout=1200.0) for _ in range(runs)]
    finally:
        os.environ.clear()
        os.environ.update(old)
    return {"wall": statistics.median(g[0] for g in got), "cpu": statistics.median(g[1] for g in got),
            "rss": max(g[2] for g in got), "codes": sorted({g[3] for g in got})}


def bench(runs: int, log: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"infer": [], "writers": [], "racy": []}
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        for s in SCALES:
            width = 500 * s
            rows: dict[str, Any] = {}
            for mode in ("manual", "auto"):
                path = d / f"chain_{mode}_{width}.pgl"
                path.write_text(chain(width, mode), encoding="utf-8")
                rows[mode] = row(check_argv(path), runs)
            rows["reference"] = row(check_argv(path), 1, {"PGRAPH_REFERENCE": "1"}) if s <= 2 else None
            log(f"infer W={width}: manual {rows['manual']['cpu']:.2f} s, auto {rows['auto']['cpu']:.2f} s CPU")
            out["infer"].append({"width": width, "tasks": 5 * width, **{m: rows[m] for m in rows}})
        for s in SCALES:
            n = 625 * s
            path = d / f"writers_{n}.pgl"
            path.write_text(writers(n), encoding="utf-8")
            fast = row(check_argv(path, "--full"), runs)
            ref = row(check_argv(path, "--full"), 1, {"PGRAPH_REFERENCE": "1"}) if s <= 2 else None
            log(f"writers N={n}: {fast['cpu']:.2f} s CPU" + (f", reference {ref['cpu']:.2f} s" if ref else ""))
            out["writers"].append({"n": n, "fast": fast, "reference": ref})
        for s in SCALES:
            worst: dict[str, Any] = {"wall": 0.0, "cpu": 0.0, "rss": 0.0, "tasks": 0, "races": 0, "codes": set()}
            for seed in range(8):
                path = d / f"racy_{seed}_{s}.pgl"
                path.write_text(racy_program(seed, s), encoding="utf-8")
                r = row(check_argv(path, "--full"), 1)
                tasks, races = tasks_and_races(path)
                worst["wall"] = max(worst["wall"], r["wall"])
                worst["cpu"] = max(worst["cpu"], r["cpu"])
                worst["rss"] = max(worst["rss"], r["rss"])
                worst["tasks"] = max(worst["tasks"], tasks)
                worst["races"] = max(worst["races"], races)
                worst["codes"] |= set(r["codes"])
            worst["codes"] = sorted(worst["codes"])
            log(f"racy x{s}: slowest {worst['cpu']:.2f} s CPU, largest {worst['rss']:.0f} MiB")
            out["racy"].append({"scale": s, **worst})
    out["load"] = os.getloadavg()
    return out


def render(res: dict[str, Any], note: str) -> str:
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    load = ", ".join(f"{x:.1f}" for x in res["load"])
    lines = [BEGIN, "## Quadratic corners (`bench/bench_corners.py`)", "",
             f"Measured {now} on {platform.machine()} ({os.cpu_count()} cores, shared; load average at the end "
             f"{load}), Python {platform.python_version()}; {note}. Each row is `pgraph check` as a child "
             "process: CPU and wall seconds (median), peak RSS (largest run). On a loaded machine the wall "
             "time is mostly waiting for a core: compare CPU seconds.", "",
             "**Auto-scope inference** (five stages of W tasks; the auto scope infers the edges the manual one "
             "declares; the reference is the inference before the interval index, PGRAPH_REFERENCE=1):", "",
             "| tasks | manual CPU s | auto CPU s | auto / manual | auto wall s | auto RSS MiB | reference auto CPU s |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    for r in res["infer"]:
        m, a, ref = r["manual"], r["auto"], r["reference"]
        ref_cpu = f"{ref['cpu']:.2f}" if ref else "-"
        lines.append(f"| {r['tasks']:,} | {m['cpu']:.2f} | {a['cpu']:.2f} | {a['cpu'] / m['cpu']:.2f} | "
                     f"{a['wall']:.2f} | {a['rss']:.0f} | {ref_cpu} |")
    lines += ["", "**Many writers into one tensor** (N ordered InOut writers of one tensor, `--full`; N^2/2 "
              "conflicting pairs, all ordered; the reference lists every pair, PGRAPH_REFERENCE=1):", "",
              "| writers | CPU s | wall s | RSS MiB | reference CPU s | reference RSS MiB |",
              "|---:|---:|---:|---:|---:|---:|"]
    for r in res["writers"]:
        f, ref = r["fast"], r["reference"]
        rtxt = f"{ref['cpu']:.2f} | {ref['rss']:.0f}" if ref else "- | -"
        lines.append(f"| {r['n']:,} | {f['cpu']:.2f} | {f['wall']:.2f} | {f['rss']:.0f} | {rtxt} |")
    lines += ["", "**Race pass on generated racy programs** (8 seeds per size, nested loops, `--full`; the "
              "slowest and largest run of the 8, the most instances, and the most racing pairs the PG100/PG101 "
              "diagnostics of one run count, bounded at 100 per dispatch pair):", "",
              "| trip counts | instances (most) | races counted (most) | slowest CPU s | slowest wall s | largest RSS MiB |",
              "|---:|---:|---:|---:|---:|---:|"]
    for r in res["racy"]:
        lines.append(f"| x{r['scale']} | {r['tasks']:,} | {r['races']:,} | {r['cpu']:.2f} | {r['wall']:.2f} | "
                     f"{r['rss']:.0f} |")
    lines += ["", END]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="runs per row (median; default 3)")
    ap.add_argument("--print", action="store_true", help="print the section instead of writing docs/performance.md")
    args = ap.parse_args(argv)
    note = run.compile_bytecode()
    res = bench(args.runs, lambda s: print(s, file=sys.stderr, flush=True))
    section = render(res, note)
    if args.print:
        print(section)
        return 0
    doc = DOC.read_text(encoding="utf-8")
    if BEGIN in doc:
        head, rest = doc.split(BEGIN, 1)
        doc = head + section + rest.split(END, 1)[1]
    else:
        doc = doc.rstrip("\n") + "\n\n" + section + "\n"
    tmp = DOC.with_suffix(".md.tmp")
    tmp.write_text(doc, encoding="utf-8")
    tmp.replace(DOC)
    print(f"wrote {DOC.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
