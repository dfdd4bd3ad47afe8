"""Benchmark and what-ifs of `pgraph sim`; writes its section of docs/performance.md.

Usage (from the repository root):

    python3 bench/bench_sim.py            # run everything and rewrite the section in docs/performance.md
    python3 bench/bench_sim.py --print    # print the section instead

What it measures (every figure in the section comes from this run; nothing is typed by hand):

1. the wall time of `pgraph sim specs/decode_layer.pgl --layers 40 --trace OUT.json` as a process;
2. the simulated 40-layer makespan next to the measured 33.4 ms (batch 16; docs/upstream.md §9.4)
   as a ratio, the critical-path breakdown, and the weight-streaming bound (~0.66 GB per layer);
3. the what-ifs, each as simulated A and B and the difference, next to the direction and size
   the real system measured (docs/upstream.md §9.4, §10);
4. the sensitivity of 2 and 3 to the figures that are readings or assumptions rather than
   measurements (per-task scheduling cost, per-core bandwidth).

   Those figures are the cost model's documented variants (pgraph/ir/a2a3_variants.toml: the
   ends of the measured ranges, the latency bounds, the staging-cost reading, the per-core
   bandwidth assumption): each what-if's B - A under every variant is its range, and whether
   its sign holds across them is what `pgraph sim --vs` prints.

Reference numbers are compared with, never fitted to.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pgraph.backends.sim.analysis import summarize  # noqa: E402
from pgraph.backends.sim.config import load_config  # noqa: E402
from pgraph.backends.sim.engine import simulate  # noqa: E402
from pgraph.backends.sim.variants import load_variants, variant_config  # noqa: E402
from pgraph.commands.sim import load_graph  # noqa: E402
from pgraph.pipeline import Options  # noqa: E402

HEAD = "specs/decode_layer.pgl"
V762 = "specs/variants/decode_layer_762.pgl"
DCR_SERIAL = "specs/variants/decode_layer_dcr_serial.pgl"
BEGIN, END = "<!-- bench_sim:begin -->", "<!-- bench_sim:end -->"
MEASURED_40_MS = 33.4  # docs/upstream.md §9.4: decode, 40 layers, batch 16, 33.4 ms device (#892)

#: (name, spec A, -D of A, --set of A, spec B, layers, measured direction and size); B is run as shipped
WHAT_IFS = [
    ("dcr_xgamma: five serialised writers (A) vs one spmd(5) (B)", DCR_SERIAL, (), (), HEAD, 2,
     "B faster: 2-layer makespan 2114.6 -> 2090.4 us (-24.2 us, -1.1 %), seed case study §3.1 (#546)"),
    ("out_proj: all 50 tiles behind the dummy (A, -D N_OUT_DIRECT_BLOCKS=0) vs the 24-tile critical wave (B)",
     HEAD, (("N_OUT_DIRECT_BLOCKS", 0),), (), HEAD, 2,
     "B faster: the critical-wave pattern was adopted (#794 and the #762 line); no makespan published"),
    ("early resolve: early dispatch off (A, --set early_dispatch.enabled=false) vs the spec's flags (B)",
     HEAD, (), ("early_dispatch.enabled=false",), HEAD, 4,
     "B faster: allow_early_resolve on the rope_qkv grid, 4-layer makespan 4266 -> 4119 us (-3.4 %), #602"),
    ("early resolve along the critical path: the `early` flags of the declarations on B's simulated critical path "
     "removed (A) vs the spec's flags (B)", "critical-path-unflagged", (), (), HEAD, 4,
     "B faster: allow_early_resolve on the rope_qkv grid, 4-layer makespan 4266 -> 4119 us (-3.4 %), #602"),
    ("#762 structure (A) vs HEAD (B)", V762, (), (), HEAD, 2,
     "B is the later tuned version (#794 critical wave, #796 RoPE folded into attention); no makespan "
     "comparison published"),
]

#: the shipped figures, then each documented variant: (label, --set overrides)
SENSITIVITY = [("as shipped (a2a3_timing.toml)", ())] + [
    (f"{v.name}: {v.what}", tuple(f"{k}={variant_config(load_config(), v)[k]}" for k in
                                  (x.partition("=")[0] for x in v.sets))) for v in load_variants()]


def run(spec: str, layers: int, defines: tuple = (), sets: tuple[str, ...] = ()) -> dict:
    graph, bag = load_graph(ROOT / spec, Options(layers=layers, defines=defines))
    if graph is None:
        raise SystemExit(f"{spec}: {[d.message for d in bag.items]}")
    res = simulate(graph, load_config(sets))
    if res.stall is not None:
        raise SystemExit(f"{spec}: stalled: {res.stall.reason}")
    return summarize(res)


def cli_time() -> tuple[float, float]:
    """(wall s, CPU s) of the acceptance command, as a process."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.json"
        cmd = [sys.executable, "-m", "pgraph", "sim", HEAD, "--layers", "40", "--trace", str(out)]
        t0 = time.perf_counter()
        before = os.times()
        subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
        after = os.times()
        return time.perf_counter() - t0, (after.children_user - before.children_user
                                          + after.children_system - before.children_system)


def fmt(x: float, nd: int = 1) -> str:
    return f"{x:,.{nd}f}"


DECLARATION = r"^(\s*(?:at|spmd|parallel|dummy|tiles)\s+{name}\b[^{{\n]*?)\s+early\b"


def unflag_critical_path(tmp: Path, layers: int, sets: tuple[str, ...]) -> tuple[str, list[str]]:
    """A copy of the HEAD spec (in `tmp`, a project of its own) whose declarations on the HEAD
    run's simulated critical path lose their `early` flag; (its path, the declarations changed)."""
    steps = run(HEAD, layers, (), sets)["critical_path"]["steps"]
    names = sorted({re.split(r"[.\[@]", st["dispatch"])[0] for st in steps})
    shutil.copytree(ROOT / "specs", tmp / "specs")
    (tmp / "pgraph.toml").write_text("")
    changed = []
    for f in (tmp / "specs").glob("*.pgl"):
        text = f.read_text()
        for name in names:
            text, n = re.subn(DECLARATION.format(name=re.escape(name)), r"\1", text, flags=re.M)
            if n:
                changed.append(name)
        f.write_text(text)
    return str(tmp / "specs" / "decode_layer.pgl"), sorted(set(changed))


def what_ifs(sets: tuple[str, ...]) -> list[tuple[str, float, float, str]]:
    rows = []
    for name, spec_a, defines_a, sets_a, spec_b, layers, measured in WHAT_IFS:
        with tempfile.TemporaryDirectory() as tmp:
            if spec_a == "critical-path-unflagged":
                spec_a, changed = unflag_critical_path(Path(tmp), layers, sets)
                name = f"{name} ({', '.join(changed)})"
            sa = run(spec_a, layers, defines_a, (*sets, *sets_a))
        sb = run(spec_b, layers, (), sets)
        rows.append((f"{name}, {layers} layers", sa["makespan_us"], sb["makespan_us"], measured))
    return rows


def section() -> str:
    lines = [BEGIN, "", "## `pgraph sim` (`bench/bench_sim.py`)", ""]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    lines.append(f"Machine: {datetime.date.today().isoformat()}, {platform.processor() or platform.machine()}, "
                 f"{os.cpu_count()} cores, Python {platform.python_version()}, load average {load:.2f} at the start. "
                 "Written by `python3 bench/bench_sim.py`; every figure below comes from that run.")
    wall, cpu = cli_time()
    lines += ["", f"**Runtime.** `pgraph sim {HEAD} --layers 40 --trace out.json` took {wall:.1f} s of wall time "
              f"({cpu:.1f} s CPU) as a process (target: under 30 s), planning with every layer expanded and the "
              f"{len(load_variants())} runs of the makespan range included.", ""]
    s = run(HEAD, 40)
    lt, wb, cp = s["layers"], s["weight_bound"], s["critical_path"]
    ms = s["makespan_us"] / 1e3
    bound = wb["us_per_layer"] * 40 / 1e3
    lines += [
        "**40 layers.** The simulated 40-layer decode (batch 16, HEAD spec) and what the real system measured:", "",
        "| | simulated | measured / bound | ratio |", "|---|---:|---:|---:|",
        f"| 40-layer makespan | {fmt(ms, 2)} ms | {MEASURED_40_MS} ms (device, #892) | {ms / MEASURED_40_MS:.2f} |",
        f"| per layer (median) | {fmt(lt['steady_us'])} us | {fmt(MEASURED_40_MS * 1e3 / 40)} us | "
        f"{lt['steady_us'] / (MEASURED_40_MS * 1e3 / 40):.2f} |",
        f"| weight-streaming bound | {fmt(wb['bytes_per_layer'] / 1e9, 3)} GB per layer -> {fmt(wb['us_per_layer'])} us "
        f"per layer, {fmt(bound, 2)} ms for 40 | ~0.66 GB per layer | simulated / bound {ms / bound:.2f} |", "",
        f"Where the {fmt(s['makespan_us'])} us of the critical path ({cp['length']} tasks) go:", "",
        "| part | us | share |", "|---|---:|---:|",
    ]
    for key, label in (("kernel_us", "kernels running (roofline of the declared bytes)"),
                       ("completion_us", "completion: FIN latency, polling, completion processing"),
                       ("scheduler_wait_us", "ready, not started: dispatch phase, doorbell, setup"),
                       ("cohort_wait_us", "ready, a sync_start cohort waiting for its units (drain)"),
                       ("core_wait_us", "ready, no idle core of its shape"),
                       ("before_ready_us", "before the first task is ready")):
        v = cp["parts"][key]
        lines.append(f"| {label} | {fmt(v)} | {100 * v / s['makespan_us']:.1f} % |")
    top: dict[str, float] = {}
    for step in cp["steps"]:
        top[step["dispatch"]] = top.get(step["dispatch"], 0.0) + step["kernel_us"]
    kern = sorted(top.items(), key=lambda kv: -kv[1])[:5]
    lines += ["", "Kernel time on the critical path by declaration (the five largest): "
              + ", ".join(f"{k} {fmt(v / 1e3, 2)} ms" for k, v in kern) + ".", ""]
    u = s["utilisation"]
    lines.append(f"Utilisation: AIC {100 * u['aic_mean']:.1f} %, AIV {100 * u['aiv_mean']:.1f} %; scheduler threads "
                 + ", ".join(f"{100 * x:.0f} %" for x in u["threads"]) + " busy.")
    per_set = [(label, sets, what_ifs(sets)) for label, sets in SENSITIVITY]
    shipped = per_set[0][2]
    lines += ["", "**What-ifs** (A and B simulated with the shipped figures; B - A < 0 means B is faster; the range "
              f"is B - A over the shipped figures and the {len(per_set) - 1} documented variants of the cost model, "
              "`pgraph/ir/a2a3_variants.toml`, as `pgraph sim --vs` prints it):", "",
              "| what-if | A (us) | B (us) | B - A | range of B - A | sign across the range | measured |",
              "|---|---:|---:|---:|---:|---|---|"]
    for i, (name, a, b, measured) in enumerate(shipped):
        d = b - a
        diffs = [rows[i][2] - rows[i][1] for _, _, rows in per_set]
        flips = [label.split(":")[0] for label, _, rows in per_set[1:] if (rows[i][2] - rows[i][1] < 0) != (d < 0)]
        holds = f"holds ({'B faster' if d < 0 else 'B slower'})" if not flips else "flips under " + "; ".join(flips)
        lines.append(f"| {name} | {fmt(a)} | {fmt(b)} | {d:+,.1f} us ({100 * d / a:+.2f} %) | "
                     f"{min(diffs):+,.1f} .. {max(diffs):+,.1f} us | {holds} | {measured} |")
    lines += ["", "**Sensitivity**: the 40-layer makespan and the what-if directions under each variant:", "",
              "| figures | 40-layer makespan | ratio to 33.4 ms | what-if directions right (of " + str(len(WHAT_IFS)) + ") |",
              "|---|---:|---:|---:|"]
    for label, sets, rows in per_set:
        m = run(HEAD, 40, (), sets)["makespan_us"] / 1e3
        right = sum(1 for _, a, b, _ in rows if b < a)
        lines.append(f"| {label} | {fmt(m, 2)} ms | {m / MEASURED_40_MS:.2f} | {right} |")
    lines += ["", END]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--print", action="store_true", help="print the section instead of writing docs/performance.md")
    args = ap.parse_args()
    text = section()
    if args.print:
        print(text)
        return
    doc = ROOT / "docs" / "performance.md"
    body = doc.read_text(encoding="utf-8")
    if BEGIN in body and END in body:
        body = body[: body.index(BEGIN)] + text + body[body.index(END) + len(END) + 1:]
    else:
        body = body.rstrip("\n") + "\n\n" + text
    doc.write_text(body, encoding="utf-8")
    print(f"wrote the bench_sim section of {doc.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
