"""`pgraph sim` on real specs: the adapter's records, the trace format, the CLI, calibration, what-ifs.

Expected values are computed here by hand from the Qwen3-14B constants (docs/upstream.md
§7.2-7.4), from the golden kernel_config.py of the a2a3 backend, or are the directions the real system
measured (docs/upstream.md §9.4), never copied from the simulator's output.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest

from pgraph.backends.sim.analysis import summarize
from pgraph.backends.sim.calibrate import durations_by_func, fit, render_calibration
from pgraph.backends.sim.config import load_config
from pgraph.backends.sim.cost import load_calibration
from pgraph.backends.sim.engine import simulate
from pgraph.backends.sim.records import Shape
from pgraph.backends.sim.trace import render_trace
from pgraph.cli import main
from pgraph.commands.sim import load_graph
from pgraph.pipeline import Options
from tests.conftest import HEAD_SPEC, ROOT, SPECS, VARIANT_762, load_kernel_config
from tests.support.trace_nesting import nesting_errors


@pytest.fixture(scope="module")
def head2():
    graph, bag = load_graph(HEAD_SPEC, Options(layers=2))
    assert graph is not None, [d.message for d in bag.items]
    return graph


def by_dispatch(graph, name: str):
    return [t for t in graph.tasks if t.dispatch == name]


def test_records_follow_the_reference_task_table(head2) -> None:
    # §2.2/§2.4 at HEAD: q_proj spmd(50) AIC, fa_fused spmd(24) MIX sync_start, dcr_xgamma spmd(5) AIV
    q = by_dispatch(head2, "q_proj")
    assert len(q) == 2 and all(t.shape is Shape.AIC and t.blocks == 50 and t.early for t in q)
    fa = by_dispatch(head2, "fa_fused")[0]
    assert fa.shape is Shape.MIX and fa.blocks == 24 and fa.sync_start and fa.ring == 3
    assert by_dispatch(head2, "dcr_xgamma")[0].ring == 2  # outside the manual scope: the layer body, ring 2
    # early-dispatch eligibility is the planner's: fa_fused's seven producers are all flagged at HEAD
    # (§2.4), k_proj waits on the unflagged kv_seed (§7.3), out_proj's direct wave only on fa_fused
    assert fa.early_candidate and by_dispatch(head2, "q_proj")[1].early_candidate
    assert not by_dispatch(head2, "k_proj")[0].early_candidate
    assert by_dispatch(head2, "out_proj.direct")[0].early_candidate
    assert not by_dispatch(head2, "out_proj.deferred")[0].early_candidate  # behind the unflagged dummy
    dummies = {t.dispatch for t in head2.tasks if t.shape is Shape.DUMMY}
    assert {"seed_dummy", "out_proj_dummy", "gate_late", "up_late"} <= dummies


def test_bytes_and_flops_of_a_q_proj_block(head2) -> None:
    # Block (nt, ks): wq[1024 x 512] bf16 = 1,048,576 B of its own; normed[:, 1024-slice] bf16 =
    # 32,768 B shared by the 10 blocks of that ks; the f32 accumulator tile [16, 512] = 32,768 B
    # shared by the 5 blocks of that nt. FLOPs 2*16*512*1024.
    q = by_dispatch(head2, "q_proj")[0]
    assert q.bytes_per_block == pytest.approx(1_048_576 + 32_768 / 10 + 32_768 / 5)
    assert q.flops_per_block == 2 * 16 * 512 * 1024
    assert q.weight_bytes_per_block == 1_048_576


def test_weight_bytes_per_layer_are_the_reference_figure(head2) -> None:
    # wq, wo: 5120 x 5120; wk, wv: 5120 x 1024; w_gate, w_up: 5120 x 17408; w_down: 17408 x 5120; bf16.
    # About 0.66 GB (docs/upstream.md §9.4, weights streamed per decode layer).
    expect = 2 * (2 * 5120 * 5120 + 2 * 5120 * 1024 + 3 * 5120 * 17408)
    res = simulate(head2, load_config())
    wb = summarize(res)["weight_bound"]
    assert wb["bytes_per_layer"] == expect == 660_602_880
    assert wb["us_per_layer"] == pytest.approx(expect / 1.6e6)  # at the TOML's 1600 GB/s


def test_func_ids_are_the_a2a3_backends(head2) -> None:
    cfg = load_kernel_config(ROOT / "tests/golden/a2a3/decode_layer/kernel_config.py")
    golden = {k["name"]: k["func_id"] for k in cfg.KERNELS}
    ours = {t.kernel: list(t.func_ids) for t in head2.tasks if t.kernel}
    # a MIX kernel's parts are <kernel>_aic and <kernel>_aiv in kernel_config.py
    want = {name: [golden[name]] if name in golden else [golden[f"{name}_aic"], golden[f"{name}_aiv"]]
            for name in ours}
    assert ours == want
    assert sorted(f for fids in ours.values() for f in fids) == sorted(golden.values())


def test_indirect_kv_cache_is_read_whole_and_appended_by_rows() -> None:
    # #762's rope_qkv writes one k and one v row per (kv head, row) item through slot_mapping (16 entries):
    # the scatter is charged 16 rows of 128 bf16 per cache, not the 524,288-row pool. fa_fused (attention
    # only) reads both caches' pools: 2 x 524,288 x 128 x 2 B.
    graph, _ = load_graph(VARIANT_762, Options(layers=1))
    assert graph is not None
    rope = by_dispatch(graph, "rope_qkv")[0]
    assert rope.bytes_per_block * rope.blocks < 10e6
    fa = by_dispatch(graph, "fa_fused")[0]
    assert fa.bytes_per_block * fa.blocks > 2 * 524_288 * 128 * 2


TRACE_SCHEMA = {
    "type": "object",
    "required": ["traceEvents"],
    "properties": {
        "displayTimeUnit": {"enum": ["ms", "ns"]},
        "traceEvents": {"type": "array", "items": {"$ref": "#/$defs/event"}},
    },
    "$defs": {
        "event": {
            "type": "object",
            "required": ["ph", "pid", "tid", "name"],
            "properties": {"ph": {"enum": ["X", "M", "s", "f", "C"]}, "pid": {"type": "integer"},
                           "tid": {"type": "integer"}, "name": {"type": "string"},
                           "ts": {"type": "number", "minimum": 0}, "dur": {"type": "number", "minimum": 0},
                           "args": {"type": "object"}},
            "allOf": [
                {"if": {"properties": {"ph": {"const": "X"}}}, "then": {"required": ["ts", "dur"]}},
                {"if": {"properties": {"ph": {"const": "M"}}},
                 "then": {"required": ["args"], "properties": {"name": {"enum": [
                     "process_name", "thread_name", "process_sort_index", "thread_sort_index"]}}}},
                {"if": {"properties": {"ph": {"enum": ["s", "f"]}}}, "then": {"required": ["ts", "id", "cat"]}},
                {"if": {"properties": {"ph": {"const": "C"}}}, "then": {"required": ["ts", "args"]}},
            ],
        }
    },
}


def test_trace_validates_and_follows_the_merged_swimlane_layout(head2) -> None:
    res = simulate(head2, load_config())
    text = render_trace(res)
    data = json.loads(text)
    jsonschema.validate(data, TRACE_SCHEMA)
    ev = data["traceEvents"]
    assert nesting_errors(ev) == []   # slices nest per lane, every flow lies in a slice of its lane
    procs = {e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
    assert procs == {1: "Orchestrator", 2: "AICPU Scheduler", 3: "Scheduler View", 4: "Worker View"}
    lanes = {e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name" and e["pid"] == 4}
    assert lanes == {f"AIC_{i}" for i in range(24)} | {f"AIV_{i}" for i in range(48)}
    worker = [e for e in ev if e["ph"] == "X" and e["pid"] == 4]
    assert all(re.fullmatch(r"[A-Za-z_0-9]+\(r\d+t\d+\)", e["name"]) for e in worker)
    assert len(worker) == sum(t.blocks * (3 if t.shape is Shape.MIX else 1) for t in head2.tasks if t.runs_on_cores)
    starts = {e["id"] for e in ev if e["ph"] == "s"}
    ends = {e["id"] for e in ev if e["ph"] == "f"}
    assert starts == ends and starts
    assert render_trace(simulate(head2, load_config())) == text  # deterministic


def test_nesting_check_catches_partial_overlaps_and_stray_flows() -> None:
    # planted: on one lane [0, 10] and [5, 15] overlap without nesting; [2, 4] nests in [0, 10];
    # a flow at 20 lies in no slice of its lane, one at 3 does; another lane is independent
    x = [{"ph": "X", "pid": 3, "tid": 0, "name": n, "ts": a, "dur": d} for n, a, d in
         (("a", 0.0, 10.0), ("b", 5.0, 10.0), ("c", 2.0, 2.0))]
    x.append({"ph": "X", "pid": 3, "tid": 1, "name": "d", "ts": 5.0, "dur": 1.0})
    flows = [{"ph": "s", "pid": 3, "tid": 0, "id": 1, "ts": 3.0}, {"ph": "f", "pid": 3, "tid": 0, "id": 2, "ts": 20.0},
             {"ph": "f", "pid": 3, "tid": 1, "id": 3, "ts": 4.999}]
    errors = nesting_errors(x + flows)
    assert len(errors) == 4 and "'b'" in errors[0] and "id 2" in errors[1] and "id 3" in errors[2]
    assert nesting_errors(x[:1] + x[2:] + flows[:1]) == []


def test_cli_sim_report_trace_and_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "t.json"
    assert main(["sim", str(HEAD_SPEC), "--layers", "1", "--trace", str(out)]) == 0
    text = capsys.readouterr().out
    assert "makespan" in text and "critical path" in text and "utilisation" in text
    assert json.loads(out.read_text())["traceEvents"]
    assert main(["sim", str(HEAD_SPEC), "--layers", "1", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["figures"]["orchestrator.submit_us"]["value"] == 0.874
    assert main(["sim", str(HEAD_SPEC), "--layers", "1", "--set", "core.bogus=1"]) == 2
    assert "unknown figure" in capsys.readouterr().err


def test_cli_sim_plot_draws_the_swimlane_and_the_critical_path(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                              head2) -> None:
    import xml.etree.ElementTree as ET

    out = tmp_path / "p.svg"
    assert main(["sim", str(HEAD_SPEC), "--layers", "2", "--plot", str(out), "--format", "json"]) == 0
    path = {s["task"] for s in json.loads(capsys.readouterr().out)["critical_path"]["steps"]}
    root = ET.fromstring(out.read_text())
    rects = [r for r in root.iter("{http://www.w3.org/2000/svg}rect")]
    red = [r for r in rects if r.get("fill") == "#d62728" and r.get("height") == "5"]
    # one red bar per block and core of every task on the critical path (a MIX block takes 3 cores)
    want = sum(t.blocks * (3 if t.shape is Shape.MIX else 1) for t in head2.tasks if t.name in path and t.runs_on_cores)
    assert len(red) == want > 0
    assert all(r.find("{http://www.w3.org/2000/svg}title") is not None for r in red)
    assert main(["sim", str(HEAD_SPEC), "--layers", "1", "--plot", str(tmp_path / "p.png")]) == 2
    assert "SVG" in capsys.readouterr().err


def test_cli_sim_reports_a_stall_with_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "w.pgl"
    spec.write_text("tensor x : f32[16, 64] external\nkernel k aiv (x : inout f32[16, 64])\ncost k = 5\n"
                    "entry e { auto scope { parallel t[i in 0..6] { call k(x) } } }\n", encoding="utf-8")
    assert main(["sim", str(spec), "--set", "ring.task_window=4"]) == 1
    assert "SCOPE_DEADLOCK" in capsys.readouterr().out


def test_cli_sim_vs_prints_both_sides(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", str(HEAD_SPEC), "--layers", "1", "--vs-define", "N_OUT_DIRECT_BLOCKS=0"]) == 0
    text = capsys.readouterr().out
    assert "N_OUT_DIRECT_BLOCKS=0" in text and "makespan (us)" in text and "B - A" in text


def test_cli_sim_vs_per_side_defines(capsys: pytest.CaptureFixture[str]) -> None:
    """`--a-define` overrides the first side only, `--b-define` (= `--vs-define`) the second: the
    same override on both sides is the same graph, so every makespan difference is zero; the
    report and the diagnostics name each side with its own -D."""
    assert main(["sim", str(HEAD_SPEC), "--layers", "1", "--a-define", "N_OUT_DIRECT_BLOCKS=0",
                 "--b-define", "N_OUT_DIRECT_BLOCKS=0", "--format", "json"]) == 0
    out = capsys.readouterr()
    doc = json.loads(out.out)
    assert doc["a"] == doc["b"] == f"{HEAD_SPEC} -D N_OUT_DIRECT_BLOCKS=0"
    makespan = next(r for r in doc["rows"] if r["metric"].startswith("makespan"))
    assert makespan["a"] == makespan["b"]
    assert f"A: {HEAD_SPEC} -D N_OUT_DIRECT_BLOCKS=0:\n" in out.err and f"B: {HEAD_SPEC} -D N_OUT_DIRECT_BLOCKS=0:\n" in out.err
    # an --a-define alone compares the overridden spec with the spec as given
    assert main(["sim", str(HEAD_SPEC), "--layers", "1", "--a-define", "N_OUT_DIRECT_BLOCKS=0", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["a"], doc["b"]) == (f"{HEAD_SPEC} -D N_OUT_DIRECT_BLOCKS=0", str(HEAD_SPEC))


def _capture(tmp_path: Path) -> tuple[Path, Path]:
    # Cycles at a2a3's 50 MHz: 1 us = 50 cycles. Task 7 (qkv_matmul, func 6) ran three blocks of 10, 12
    # and 14 us; task 9 (the MIX attention: AIC func 9, AIV func 10) one AIC subtask of 20 us and two
    # AIV subtasks of 22 and 24 us. Task 99 is not in deps.json (an alloc task) and is skipped.
    records = {"chip_swimlane_level": 1,
               "metadata": {"clock_freq_hz": 50e6, "num_cores": 72, "core_types": ["AIC"] * 24 + ["AIV"] * 48,
                            "core_to_thread": [i % 3 for i in range(72)]},
               "aicore_tasks": [[0, "7", 1, 0, 500], [1, "7", 1, 100, 700], [2, "7", 1, 0, 700],
                                [3, "9", 2, 1000, 2000], [24, "9", 2, 1000, 2100], [25, "9", 2, 1000, 2200],
                                [4, "99", 3, 0, 50]],
               "aicpu_tasks": []}
    deps = {"tasks": [{"task_id": "7", "scope": "manual", "early_dispatch": True, "kernel_ids": [6, -1, -1],
                       "block_num": 3, "args": []},
                      {"task_id": "9", "scope": "manual", "early_dispatch": True, "kernel_ids": [11, 12, 12],
                       "block_num": 1, "args": []}],
            "tensors": [], "edges": []}
    r, d = tmp_path / "chip_swimlane_records.json", tmp_path / "deps.json"
    r.write_text(json.dumps(records))
    d.write_text(json.dumps(deps))
    return r, d


def test_calibration_fits_the_median_per_kernel(tmp_path: Path, head2) -> None:
    r, d = _capture(tmp_path)
    by_func = durations_by_func(json.loads(r.read_text()), json.loads(d.read_text()))
    assert sorted(by_func[6]) == pytest.approx([10.0, 12.0, 14.0])
    fitted = fit(by_func, head2)
    assert fitted["q_proj"]["us"] == pytest.approx(12.0)                      # median of 10, 12, 14
    assert fitted["paged_attention_rope_cce"]["us"] == pytest.approx(23.0)    # max(AIC 20, AIV median 23)
    path = tmp_path / "cal.toml"
    path.write_text(render_calibration(fitted, str(r), str(d)))
    cal = load_calibration(path)
    assert cal["q_proj"] == pytest.approx(12.0)
    res = simulate(head2, load_config(), cal)
    q = by_dispatch(head2, "q_proj")[0]
    blocks = res.tasks[q.id].blocks
    assert all(b.end - b.start == pytest.approx(12.0) for b in blocks)


def test_cli_calibrate_writes_a_file_the_simulator_reads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    r, d = _capture(tmp_path)
    cal = tmp_path / "cal.toml"
    assert main(["sim", str(HEAD_SPEC), "--layers", "1", "--calibrate", str(r), str(d), "-o", str(cal)]) == 0
    assert main(["sim", str(HEAD_SPEC), "--layers", "1", "--calibration", str(cal)]) == 0
    capsys.readouterr()
    assert main(["sim", str(HEAD_SPEC), "--layers", "1", "--calibrate", str(r), str(tmp_path / "none.json")]) == 2


def _makespan(spec: Path, *defines: tuple[str, int], sets: tuple[str, ...] = ()) -> float:
    graph, bag = load_graph(spec, Options(layers=2, defines=defines))
    assert graph is not None, [x.message for x in bag.items]
    res = simulate(graph, load_config(sets))
    assert res.stall is None
    return res.makespan


def test_what_if_directions_match_the_real_system() -> None:
    # docs/upstream.md §9.4 and §10, measured directions (2 layers here):
    head = _makespan(HEAD_SPEC)
    # dcr_xgamma as one spmd(5) beats five serialised writers (2114.6 -> 2090.4 us, #546)
    assert _makespan(SPECS / "variants" / "decode_layer_dcr_serial.pgl") > head
    # the out_proj critical wave (24 direct tiles) beats all 50 behind the dummy (#794's pattern, adopted)
    assert _makespan(HEAD_SPEC, ("N_OUT_DIRECT_BLOCKS", 0)) > head
    # early resolve on beats off (rope_qkv flag: 4266 -> 4119 us, #602)
    assert _makespan(HEAD_SPEC, sets=("early_dispatch.enabled=false",)) > head
    # HEAD (after #794 and #796) beats the #762 structure
    assert _makespan(VARIANT_762) > head


def test_pg119_note_for_a_full_width_grid_beside_unordered_tasks(tmp_path: Path) -> None:
    from pgraph.pipeline import plan_program

    # HEAD: the next layer's attn_out_seed and q_seed have no deps, so nothing orders them against
    # fa_fused (24 of 24 clusters): the note names them.
    plan, bag = plan_program(HEAD_SPEC, Options())
    notes = [d for d in bag.items if d.code == "PG119"]
    assert len(notes) == 1 and notes[0].level.value == "note"
    assert "attn_out_seed@L=1" in notes[0].message and "q_seed@L=1" in notes[0].message
    # the hint's fix: a dep orders the AIV task after the grid, and the note goes away
    base = ("tensor a : f32[16, 64] external\ntensor b : f32[16, 64] external\n"
            "kernel attn mix (o : inout f32[16, 64])\nkernel z aiv (o : out f32[16, 64])\n")
    loose = tmp_path / "loose.pgl"
    loose.write_text(base + "entry e { spmd fa[i in 0..24] sync_start { call attn(a) }\n at seed { call z(b) } }\n")
    fixed = tmp_path / "fixed.pgl"
    fixed.write_text(base + "entry e { manual scope { spmd fa[i in 0..24] sync_start { call attn(a) }\n"
                     " at seed deps(fa) { call z(b) } } }\n")
    assert [d.code for d in plan_program(loose, Options())[1].items if d.code == "PG119"] == ["PG119"]
    assert [d.code for d in plan_program(fixed, Options())[1].items if d.code == "PG119"] == []


@pytest.mark.slow
def test_forty_layer_trace_validates(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    # the acceptance run (bench/bench_sim.py times it): 40 layers, a trace that validates
    if "slow" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("opt-in: -m slow (about 40 s)")
    out = tmp_path / "out.json"
    assert main(["sim", str(HEAD_SPEC), "--layers", "40", "--trace", str(out), "-o", str(tmp_path / "r.txt")]) == 0
    data = json.loads(out.read_text())
    jsonschema.validate(data, TRACE_SCHEMA)
    assert nesting_errors(data["traceEvents"]) == []
    assert sum(1 for e in data["traceEvents"] if e["ph"] == "X" and e["pid"] == 4) == 40 * (432 + 2 * 24) + 8


def test_variants_are_documented_overrides_of_known_figures() -> None:
    from pgraph.backends.sim.variants import load_variants, variant_config

    variants = load_variants()
    assert len(variants) >= 5 and len({v.name for v in variants}) == len(variants)
    cfg = load_config()
    for v in variants:
        assert v.what and v.source and v.sets
        variant_config(cfg, v)   # every override names a known figure with a valid value
    # the measured range ends of docs/upstream.md §9.3: dispatch 3-6 us, completion 2-4 us
    low = variant_config(cfg, next(v for v in variants if v.name == "scheduling low"))
    assert (low["scheduler.dispatch_task_us"], low["scheduler.complete_task_us"]) == (3.0, 2.0)
    # a figure the user set keeps the user's value under every variant
    mine = load_config(("scheduler.dispatch_task_us=5.0",))
    assert all(variant_config(mine, v)["scheduler.dispatch_task_us"] == 5.0 for v in variants)


def test_compare_range_says_whether_the_sign_holds() -> None:
    from pgraph.backends.sim.variants import compare_range

    rows_a = [{"variant": "x", "makespan_us": 100.0}, {"variant": "y", "makespan_us": 90.0}]
    rows_b = [{"variant": "x", "makespan_us": 95.0}, {"variant": "y", "makespan_us": 91.0}]
    span = compare_range(100.0, 97.0, rows_a, rows_b)   # -3 as shipped, -5 under x, +1 under y
    assert (span["lo_us"], span["hi_us"], span["holds"], span["flips"]) == (-5.0, 1.0, False, ["y"])
    span = compare_range(100.0, 97.0, rows_a[:1], rows_b[:1])
    assert span["holds"] and span["flips"] == []
    stalled = [{"variant": "x", "makespan_us": None}]
    assert compare_range(100.0, 97.0, stalled, rows_b[:1])["flips"] == ["x"]


def test_cli_sim_reports_a_range_and_vs_says_whether_the_sign_holds(capsys: pytest.CaptureFixture[str]) -> None:
    from pgraph.backends.sim.variants import load_variants

    n = len(load_variants())
    assert main(["sim", str(HEAD_SPEC), "--layers", "1", "--format", "json"]) == 0
    rng = json.loads(capsys.readouterr().out)["range"]
    assert len(rng["variants"]) == n and rng["lo_us"] <= rng["nominal_us"] <= rng["hi_us"]
    assert rng["lo_us"] < rng["hi_us"]
    # the staging-cost reading charges 0.46 us where the shipped figures charge 3-4.5 us: faster
    staging = next(r for r in rng["variants"] if r["variant"] == "staging-cost reading")
    assert staging["makespan_us"] < rng["nominal_us"]
    assert main(["sim", str(HEAD_SPEC), "--layers", "1", "--b-define", "N_OUT_DIRECT_BLOCKS=0"]) == 0
    text = capsys.readouterr().out
    assert "B - A ranges over" in text and ("the sign holds under every variant" in text
                                           or "the sign does NOT hold" in text)
    assert main(["sim", str(HEAD_SPEC), "--layers", "1", "--b-define", "N_OUT_DIRECT_BLOCKS=0", "--no-range"]) == 0
    assert "ranges over" not in capsys.readouterr().out


CAPTURE = ROOT / "tests" / "captures" / "decode_layer_1L"


def test_sample_capture_calibrates_to_the_table_it_was_built_from(tmp_path: Path) -> None:
    import tomllib

    table = tomllib.loads((CAPTURE / "kernel_us.toml").read_text(encoding="utf-8"))["kernels"]
    # the published figures the capture is built from (docs/upstream.md §9.4)
    assert table["paged_attention_rope_cce"]["us"] == 235.0 and table["dcr_xgamma"]["us"] == 4.0
    assert {k for k, v in table.items() if v["source"].startswith("published")} == {"paged_attention_rope_cce",
                                                                                    "dcr_xgamma"}
    cal = tmp_path / "cal.toml"
    assert main(["sim", str(HEAD_SPEC), "--layers", "1", "--calibrate", str(CAPTURE / "chip_swimlane_records.json"),
                 str(CAPTURE / "deps.json"), "-o", str(cal)]) == 0
    fitted = load_calibration(cal)
    assert fitted.keys() == table.keys()
    assert all(fitted[k] == pytest.approx(v["us"], abs=1e-6) for k, v in table.items())
    # calibrated, the attention blocks run the published 235 us
    graph, _ = load_graph(HEAD_SPEC, Options(layers=1))
    assert graph is not None
    res = simulate(graph, load_config(), fitted)
    fa = by_dispatch(graph, "fa_fused")[0]
    assert all(b.end - b.start == pytest.approx(235.0) for b in res.tasks[fa.id].blocks)


def test_sample_capture_is_what_its_generator_writes() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_capture", CAPTURE.parent / "make_capture.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for name, text in mod.build().items():
        assert (CAPTURE / name).read_text(encoding="utf-8") == text, f"{name}: rerun tests/captures/make_capture.py"
