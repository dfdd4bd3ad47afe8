"""Write the sample capture of `tests/captures/decode_layer_1L/`: what `pgraph sim --calibrate`
reads, built (not measured) from the reference's published per-kernel figures.

Usage, from the repository root (rewrites the three files; the suite checks they are current):

    python3 tests/captures/make_capture.py

What it writes, for `specs/decode_layer.pgl --layers 1`:

- `deps.json`: pgraph's own export (`pgraph export --deps-json`), simpler's format (docs/upstream.md
  §2.7): the task ids and per-task kernel ids the records join on;
- `kernel_us.toml`: the duration of one block of each kernel (µs) the capture is built from, and
  where each comes from. Two kernels have a published figure (docs/upstream.md §9.4): the attention
  extern `paged_attention_rope_cce`, ~235 µs (#765: one wave of 24 blocks, so each block runs about
  as long as the kernel), and `dcr_xgamma`, ~4 µs per block on five cores (#546). No other kernel of
  the layer has a published duration: those rows are the simulator's own roofline of the block run
  alone (declared bytes at the per-core cap, FLOPs at the cube or vector rate; docs/backend_sim.md),
  marked `derived`, so that a calibration from this capture changes only the two published kernels;
- `chip_swimlane_records.json`: simpler's records format (§2.8), 50 MHz cycles, one `aicore_tasks`
  row per block and core (a MIX block: its AIC and both AIVs), each lasting its kernel's figure
  rounded to a whole cycle. The rows are laid out back to back per core: the durations are the
  figures, the timeline is not a schedule (the calibration reads durations only).

`pgraph sim specs/decode_layer.pgl --calibrate chip_swimlane_records.json deps.json` recovers
`kernel_us.toml` to the cycle (tests/unit/test_sim_spec.py checks it).
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from pgraph.backends.sim.config import load_config  # noqa: E402
from pgraph.backends.sim.cost import CostModel  # noqa: E402
from pgraph.cli import main  # noqa: E402
from pgraph.commands.sim import load_graph  # noqa: E402
from pgraph.pipeline import Options  # noqa: E402

SPEC = ROOT / "specs" / "decode_layer.pgl"
OUT = ROOT / "tests" / "captures" / "decode_layer_1L"
CLOCK_HZ = 50e6            # a2a3's swimlane clock (docs/upstream.md §2.8)
CLUSTERS = 24
#: kernel -> (µs per block, source): the published figures
PUBLISHED = {
    "paged_attention_rope_cce": (235.0, "published: attention extern ~235 us at 98 % core occupancy, one wave of "
                                        "24 blocks (#765; docs/upstream.md §9.4)"),
    "dcr_xgamma": (4.0, "published: the dcr_xgamma writers ~4 us on five cores after the spmd(5) (#546; "
                        "docs/upstream.md §9.4)"),
}


def cycles(us: float) -> int:
    return round(us * CLOCK_HZ / 1e6)


def build() -> dict[str, str]:
    """The three files' text, by name."""
    graph, bag = load_graph(SPEC, Options(layers=1))
    if graph is None:
        raise SystemExit([d.message for d in bag.items])
    model = CostModel(load_config())
    table: dict[str, tuple[float, str]] = {}
    for t in graph.tasks:
        if t.kernel is None or t.kernel in table or not t.runs_on_cores:
            continue
        if t.kernel in PUBLISHED:
            us, src = PUBLISHED[t.kernel]
        else:
            us, src = model.alone_us(t), "derived: pgraph sim's roofline of one block run alone (not a measurement)"
        table[t.kernel] = (cycles(us) / (CLOCK_HZ / 1e6), src)
    with tempfile.TemporaryDirectory() as tmp:
        deps_path = Path(tmp) / "deps.json"
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            if main(["export", str(SPEC), "--layers", "1", "--deps-json", str(deps_path)]) != 0:
                raise SystemExit("pgraph export failed")
        deps_text = deps_path.read_text(encoding="utf-8")
    deps = json.loads(deps_text)
    by_fid: dict[int, str] = {}
    for t in graph.tasks:
        for f in t.func_ids:
            by_fid[f] = t.kernel or ""
    cursor = [0] * (3 * CLUSTERS)
    rows = []
    next_aic = next_aiv = 0
    for reg, task in enumerate(deps["tasks"]):
        aic, aiv0, aiv1 = task["kernel_ids"]
        if max(aic, aiv0, aiv1) < 0:
            continue   # a dummy: no AICore row
        kernel = by_fid[max(aic, aiv0, aiv1)]
        dur = cycles(table[kernel][0])
        for _block in range(task["block_num"]):
            cores = []
            if aic >= 0 and (aiv0 >= 0 or aiv1 >= 0):      # MIX: one cluster
                c = next_aic % CLUSTERS
                next_aic += 1
                cores = [c, CLUSTERS + 2 * c, CLUSTERS + 2 * c + 1]
            elif aic >= 0:
                cores = [next_aic % CLUSTERS]
                next_aic += 1
            else:
                cores = [CLUSTERS + next_aiv % (2 * CLUSTERS)]
                next_aiv += 1
            for core in cores:
                start = cursor[core]
                rows.append([core, task["task_id"], reg, start, start + dur])
                cursor[core] = start + dur + 10
    records = {"chip_swimlane_level": 1,
               "metadata": {"clock_freq_hz": CLOCK_HZ, "num_cores": 3 * CLUSTERS,
                            "core_types": ["AIC"] * CLUSTERS + ["AIV"] * (2 * CLUSTERS),
                            "core_to_thread": [(c if c < CLUSTERS else (c - CLUSTERS) // 2) % 3
                                               for c in range(3 * CLUSTERS)],
                            "generator": "tests/captures/make_capture.py (built from published figures, not measured)"},
               "aicore_tasks": rows, "aicpu_tasks": []}
    lines = ["# The per-block duration (us) of each kernel that tests/captures/make_capture.py built the sample",
             "# capture from (a whole number of 50 MHz cycles), with its source. Written by that script.",
             "[kernels]"]
    for kernel in sorted(table):
        us, src = table[kernel]
        lines.append(f"{kernel} = {{ us = {us:.2f}, source = {json.dumps(src, ensure_ascii=False)} }}")
    return {"deps.json": deps_text,
            "chip_swimlane_records.json": json.dumps(records, separators=(",", ":")) + "\n",
            "kernel_us.toml": "\n".join(lines) + "\n"}


def main_() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for name, text in build().items():
        (OUT / name).write_text(text, encoding="utf-8")
        print(f"wrote {(OUT / name).relative_to(ROOT)}")


if __name__ == "__main__":
    main_()
