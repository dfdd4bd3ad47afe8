"""Planner rules on the real specs and on the issue's derived variants.

Expected values come from the reference (docs/upstream.md §7.3-7.6, §7.12-7.13;
§4, §5), worked out by hand, not from pgraph's output.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from pgraph.backends.report import report_facts
from pgraph.diagnostics import Severity
from pgraph.pipeline import Options, plan_program
from tests.conftest import HEAD_SPEC, SPECS, VARIANT_762, plan_ok


def _codes(bag, code: str) -> list:
    return [d for d in bag.items if d.code == code]


@pytest.fixture(scope="module")
def head():
    return plan_ok(HEAD_SPEC)


@pytest.fixture(scope="module")
def v762():
    return plan_ok(VARIANT_762)


def _states(plan) -> dict[str, str]:
    return {r["dispatch"]: r["state"] for r in report_facts(plan)["early_dispatch"]}


def test_real_specs_have_no_errors(head, v762) -> None:
    for plan in (head, v762):
        assert not plan.bag.has_errors
        assert report_facts(plan)["races"] == 0


def test_head_early_dispatch_table(head) -> None:
    s = _states(head)
    # candidates: every direct producer flagged (§2.4: "with every producer flagged, fa_fused becomes eligible")
    for name in ("q_proj", "fa_fused", "out_proj.direct", "gate_proj.critical", "up_proj.critical", "dcr_xgamma"):
        assert s[name] == "candidate", name
    # ineligible, with the unflagged producer that blocks each (§2.2/§2.4 AER column; §7.1, §7.3)
    blocked = {r["dispatch"]: set(r["blocked_by"]) for r in report_facts(head)["early_dispatch"]}
    expected = {
        "rms_recip": {"seed_dummy"}, "kv_seed": {"seed_dummy"}, "mlp_out_seed": {"seed_dummy"},
        "k_proj": {"kv_seed"}, "v_proj": {"kv_seed"},
        "out_proj.deferred": {"out_proj_dummy"}, "gate_proj.late": {"gate_late"}, "up_proj.late": {"up_late"},
        "residual_rms_cast": {"out_proj.deferred", "out_proj.direct"},
        "post_rms_reduce": {"out_proj.deferred", "out_proj.direct"},
        "down_proj": {"silu"},
    }
    for name, producers in expected.items():
        assert s[name] == "ineligible", name
        assert blocked[name] == producers, name
    assert s["silu"] == "ineligible"
    # no producer at all: simply ready
    for name in ("q_seed", "attn_out_seed", "pa_tiling"):
        assert s[name] == "ready", name


def test_head_seed_dummy_is_the_evict_idiom(head) -> None:
    notes = [d for d in _codes(head.bag, "PG104") if "seed_dummy" in d.message]
    assert len(notes) == 1 and notes[0].level is Severity.NOTE
    assert "evict" in notes[0].message
    for consumer in ("rms_recip", "kv_seed", "mlp_out_seed"):
        assert consumer in notes[0].message
    # no idle flag at HEAD: every flagged task has an eligible consumer
    assert _codes(head.bag, "PG106") == []


def test_762_fa_fused_blocked_by_rope_and_idle_flags(v762) -> None:
    s = _states(v762)
    assert s["fa_fused"] == "ineligible"
    blocked = {r["dispatch"]: set(r["blocked_by"]) for r in report_facts(v762)["early_dispatch"]}
    assert blocked["fa_fused"] == {"rope_qkv"}
    # §7.4: at T1 fa_fused is ineligible (rope_qkv is unflagged). By the §2.3 edge list the
    # flagged pa_tiling, attn_out_seed and mlp_out_seed feed fa_fused and nothing else, so
    # exactly their flags are idle.
    idle = sorted(d.message.split("'")[1] for d in _codes(v762.bag, "PG106"))
    assert idle == ["attn_out_seed", "mlp_out_seed", "pa_tiling"]


def test_head_ring_table_and_heap(head) -> None:
    scopes = {(r["kind"], r["mode"]): r for r in report_facts(head)["scopes"]}
    assert scopes[("entry", "auto")]["ring"] == 1
    # the loop bodies: copy_hidden's and copy_out's one-trip loops (one dispatch each) and the layers
    loops = [r for r in report_facts(head)["scopes"] if (r["kind"], r["mode"]) == ("loop", "auto")]
    assert sorted(r["dispatches"] for r in loops) == [1, 1, 1]  # copy_hidden, dcr_xgamma, copy_out
    body = next(r for r in loops if r["allocations"])
    assert body["ring"] == 2 and body["allocations"] == 16
    # x_gamma0's manual scope sits in the entry (depth 1), so depth 2 and ring min(2, 3) = 2
    entry_manual = [r for r in report_facts(head)["scopes"] if r["mode"] == "manual" and r["depth"] == 2]
    assert len(entry_manual) == 1 and entry_manual[0]["ring"] == 2
    layer_manual = [r for r in report_facts(head)["scopes"] if r["mode"] == "manual" and r["depth"] == 3]
    assert len(layer_manual) == 1 and layer_manual[0]["ring"] == 3
    # §2.1: the 16 per-layer buffers, each rounded up to 1024 B (two [16,1] f32 buffers of 64 B -> 1024)
    sizes = [64, 327_680, 65_536, 65_536, 163_840, 163_840, 327_680, 1_114_112, 1_114_112, 327_680,
             327_680, 163_840, 64, 557_056, 327_680, 163_840]
    heap = sum(math.ceil(b / 1024) * 1024 for b in sizes)   # 5,212,160 B
    assert body["heap_bytes"] == heap
    ring2 = next(r for r in report_facts(head)["rings"] if r["ring"] == 2)
    assert ring2["layer_heap"] == heap
    # dcr_xgamma is the one task of the layer body (ring 2); 265 - 1 + 12 submits sit on ring 3
    ring3 = next(r for r in report_facts(head)["rings"] if r["ring"] == 3)
    assert ring3["layer_tasks"] == 265 - 1 + 12


#: One layer's critical path by hand, with the default unit costs (aic 10, aiv 5, mix 20, dummy 0)
#: and a2a3's 24 AIC / 48 AIV / 24 clusters: (task, cost). q_proj is 50 AIC blocks = 3 waves;
#: fa_fused 24 MIX blocks = 1 wave; gate_proj.critical 6 AIC blocks; dcr_xgamma 5 AIV blocks.
LAYER_PATH = [("q_proj", 30), ("fa_fused", 20), ("out_proj_dummy", 0), ("out_proj.deferred[t=0]", 10),
              ("residual_rms_cast[c=0]", 5), ("gate_proj.critical[k=0]", 10), ("silu[n=0]", 5),
              ("down_proj[n=0,k=0]", 10), ("dcr_xgamma", 5)]
ENTRY_COST = 5 + 5    # copy_hidden (1 AIV block) -> x_gamma0 (5 AIV blocks, one wave)
EXIT_COST = 5         # copy_out


def test_critical_path_values_by_hand(head) -> None:
    cp = report_facts(head)["critical_path"]
    per_layer = sum(c for _, c in LAYER_PATH)
    assert per_layer == 95
    assert cp["per_layer_us"] == per_layer
    assert cp["length_us"] == ENTRY_COST + 40 * per_layer + EXIT_COST
    steps = [(s["task"], s["cost_us"]) for s in cp["path"] if s["kind"] != "alloc"]
    # copy_hidden and copy_out sit in one-trip loops `cb`, `ob` (the ABI spec: pypto pl.parallel(0, 16, 16))
    assert steps[:2] == [("copy_hidden@cb=0", 5), ("x_gamma0", 5)] and steps[-1] == ("copy_out@ob=0", 5)
    for layer, offset in ((0, 2), (1, 2 + len(LAYER_PATH))):
        assert steps[offset:offset + len(LAYER_PATH)] == [(f"{t}@L={layer}", c) for t, c in LAYER_PATH]
    # early resolve (reference §4: copy_hidden carries no E; a dummy is never a candidate)
    assert cp["first_broken_early_link"] == {"from": "copy_hidden@cb=0", "to": "x_gamma0",
                                             "reason": "unflagged producer(s): copy_hidden@cb=0",
                                             "blocking": ["copy_hidden@cb=0"]}
    assert cp["first_broken_early_link_in_layer"] == {"from": "fa_fused@L=1", "to": "out_proj_dummy@L=1",
                                                      "reason": "a dummy is never an early-dispatch candidate"}


#: A legal fan-in: c waits on every one of N unflagged tiles of p (none is flagged `early`).
FAN_IN_SPEC = """\
const N = 2000
tensor o : f32[16, N * 16] external
tensor r : f32[16, 16] external
kernel z aiv (dst : out f32[16, 16])
kernel rd aiv (src : in f32[16, N * 16], dst : out f32[16, 16])

entry fan {
  manual scope {
    parallel p[i in 0..N] { call z(o[:, i*16 +: 16]) }
    at c deps(p) { call rd(o, r) }
  }
}
"""


def test_a_long_producer_list_is_summarised_and_notes_lists_it(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """The early-resolve line of a 2,000-producer fan-in names the count and the first five in
    submit order (p[i=0]..p[i=4], not the string order p[i=0], p[i=1000], ...); `--notes` lists
    all 2,000. It used to print every producer on one line (229 KB at 16,000)."""
    from pgraph.cli import main

    spec = tmp_path / "fan.pgl"
    spec.write_text(FAN_IN_SPEC)
    assert main(["plan", str(spec)]) == 0
    line, = [ln for ln in capsys.readouterr().out.splitlines() if "early-resolve chain" in ln]
    assert line == ("  early-resolve chain breaks first from the entry at p[i=0] -> c: 2,000 unflagged producers: "
                    "p[i=0], p[i=1], p[i=2], p[i=3], p[i=4] and 1,995 more (`--notes` lists all)")
    assert main(["plan", str(spec), "--notes"]) == 0
    line, = [ln for ln in capsys.readouterr().out.splitlines() if "early-resolve chain" in ln]
    named = line.split("unflagged producer(s): ")[1].split(", ")
    assert named == [f"p[i={i}]" for i in range(2000)]
    cp = report_facts(plan_ok(spec))["critical_path"]["first_broken_early_link"]
    assert cp["blocking"] == named


def test_critical_path_equals_networkx_longest_path_of_the_full_graph() -> None:
    """The windowed, extrapolated length equals a longest path computed by networkx on the fully
    expanded graph, with task costs from the reference's block counts (3 layers)."""
    import networkx as nx

    window = plan_ok(HEAD_SPEC, layers=3)
    full = plan_ok(HEAD_SPEC, layers=3, full=True)
    g = full.graph
    units = {"aic": (24, 10), "aiv": (48, 5), "mix": (24, 20)}
    cost = {}
    for inst in g.instances:
        if inst.kind in ("alloc", "dummy"):
            cost[inst.id] = 0
            continue
        cores, unit = units[full.program.kernels[full.program.dispatch(inst.dispatch).kernel].core]
        cost[inst.id] = -(-inst.blocks // cores) * unit
    dag = nx.DiGraph()
    dag.add_weighted_edges_from((u, v, cost[v]) for u, v in g.graph.edges)
    dag.add_weighted_edges_from(("source", v, cost[v]) for v in cost)  # a path may start anywhere
    longest = nx.dag_longest_path_length(dag, "weight")
    assert report_facts(window)["critical_path"]["length_us"] == longest == ENTRY_COST + 3 * 95 + EXIT_COST


# ---- the derived variants: text edits of the real spec (no copy to drift) ----------


def _variant(tmp_path: Path, edits: list[tuple[str, str]], prelude: str = "") -> Path:
    text = HEAD_SPEC.read_text()
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    for name in ("qwen3_14b.pgl", "decode_common.pgl"):
        (tmp_path / name).write_text((SPECS / name).read_text())
    out = tmp_path / "variant.pgl"
    out.write_text(prelude + text)
    return out


def test_dcr_as_parallel_tasks_is_false_serialization(tmp_path: Path) -> None:
    spec = _variant(tmp_path, [("spmd dcr_xgamma[n in 0..DOWN_ON]", "parallel dcr_xgamma[n in 0..DOWN_ON]")])
    plan, bag = plan_program(spec)
    warn = _codes(bag, "PG103")
    assert len(warn) == 1 and "dcr_xgamma" in warn[0].message and warn[0].level is Severity.WARNING


def test_no_scopes_and_window_8192_is_scope_deadlock(tmp_path: Path) -> None:
    spec = _variant(
        tmp_path,
        [("for L in 0..NUM_LAYERS\n", "for L in 0..NUM_LAYERS unscoped\n"),
         ("manual scope ring 3 {", "phase layer {")],
        prelude="target a2a3 { task_window = 8192 }\n",
    )
    plan, bag = plan_program(spec)
    errs = _codes(bag, "PG109")
    assert len(errs) == 1
    # by hand: entry 1 task + 1 dummy; 40 x (265 + 12); alloc tasks: entry 4 buffers -> 1,
    # 16 per-layer buffers -> 1 alloc task per layer (alloc_tensors batches 16; without the manual
    # scope its buffers are no batch of their own)
    # copy_hidden, x_gamma0 and copy_out keep their own scopes: the entry holds pa_tiling and prev_out
    expected = 1 + 1 + 40 * (265 + 12) + 1 + 40
    assert f"{expected:,} tasks" in errs[0].message
    assert "8,191" in errs[0].message


def test_allocations_on_the_entry_ring_is_heap_deadlock(tmp_path: Path) -> None:
    spec = _variant(
        tmp_path,
        [("for L in 0..NUM_LAYERS\n", "for L in 0..NUM_LAYERS unscoped\n"),
         ("manual scope ring 3 {", "manual scope {")],  # now depth 2: the stated ring would fail PG023
        prelude="target a2a3 { heap = 128 * 1024 * 1024 }\n",
    )
    plan, bag = plan_program(spec)
    errs = _codes(bag, "PG110")
    assert len(errs) == 1
    # ring 1 holds the entry's buffers (pa_workspace dominates) plus 40 layers of 5,212,160 B
    entry = sum(math.ceil(b / 1024) * 1024 for b in (27_840, 66_132_544, 327_680, 163_840))
    assert f"{entry + 40 * 5_212_160:,} B" in errs[0].message
    assert _codes(bag, "PG109") == []


def test_six_nested_scopes_note_ring3() -> None:
    plan, bag = plan_program(Path(__file__).parents[1] / "diagnostics" / "PG107_ring_clamped.pgl")
    assert len(_codes(bag, "PG107")) == 3


def test_explain_prints_planner_rules(capsys) -> None:
    from pgraph.cli import main

    assert main(["explain", "PG100"]) == 0
    out = capsys.readouterr().out
    assert "PG100" in out and "race" in out


def test_40_layer_plan_is_windowed() -> None:
    plan, bag = plan_program(HEAD_SPEC, Options())
    assert plan is not None
    # two expanded iterations stand for 40: the instance graph stays small
    assert len(plan.graph.instances) < 2 * 300 + 20


# ---- small specs for the auto-scope inference and the dummy severity table ----------------

PRELUDE = """
tensor x : f32[16, 64] external
tensor y : f32[16, 64] external
tensor z : f32[16, 64] external
kernel zero aiv (acc : out f32[16, 64])
kernel copy aiv (src : in f32[16, 64], dst : out f32[16, 64])
kernel bump aiv (acc : inout f32[16, 64])
"""


def _plan_text(tmp_path: Path, body: str, name: str = "t.pgl"):
    spec = tmp_path / name
    spec.write_text(PRELUDE + body)
    return plan_program(spec)


def test_auto_scope_infers_raw_but_not_war(tmp_path: Path) -> None:
    # RAW: the reader's In argument finds the writer's entry in the TensorMap -> inferred edge, no race
    plan, bag = _plan_text(tmp_path, "entry e { at w { call zero(x) } at r { call copy(x, y) } }")
    assert plan is not None and not _codes(bag, "PG100")
    assert report_facts(plan)["summary"]["inferred_edges"] == 1
    # WAR: the later writer (Out: OUTPUT_EXISTING, no lookup) is not ordered after the reader
    plan, bag = _plan_text(tmp_path, "entry e { at r { call copy(x, y) } at w { call zero(x) } }")
    races = _codes(bag, "PG100")
    assert len(races) == 1 and "write-after-read" in (races[0].hint or "")
    # the fix the rule suggests: a dep on the reader, not promoting the reader to InOut
    plan, bag = _plan_text(tmp_path, "entry e { at r { call copy(x, y) } at w deps(r) { call zero(x) } }")
    assert not bag.has_errors
    # WAW through Out is not chained by the runtime either; through InOut it is
    plan, bag = _plan_text(tmp_path, "entry e { at a { call zero(x) } at b { call zero(x) } }")
    assert len(_codes(bag, "PG100")) == 1
    plan, bag = _plan_text(tmp_path, "entry e { at a { call zero(x) } at b { call bump(x) } }")
    assert not _codes(bag, "PG100")


def test_manual_scope_infers_nothing(tmp_path: Path) -> None:
    plan, bag = _plan_text(tmp_path, "entry e { manual scope { at w { call zero(x) } at r { call copy(x, y) } } }")
    assert len(_codes(bag, "PG100")) == 1


def test_dummy_severity_table(tmp_path: Path) -> None:
    # consumers ineligible anyway (their other producer is unflagged): the empty dummy does nothing
    plan, bag = _plan_text(tmp_path, """entry e { manual scope {
        at a { call zero(x) }
        dummy d
        at b deps(a, d) { call copy(x, y) } } }""")
    warn = [d for d in _codes(bag, "PG104") if "'d'" in d.message]
    assert len(warn) == 1 and warn[0].level is Severity.WARNING and "does nothing" in warn[0].message
    # the same dummy in front of a consumer whose only other producer is flagged: the evict idiom
    plan, bag = _plan_text(tmp_path, """entry e { manual scope {
        at a early { call zero(x) }
        dummy d
        at b deps(a, d) { call copy(x, y) } } }""")
    note = [d for d in _codes(bag, "PG104") if "'d'" in d.message]
    assert len(note) == 1 and note[0].level is Severity.NOTE and "evict" in note[0].message
    # deps that can all be invalid: an empty tile selection leaves the dummy with no producer
    plan, bag = _plan_text(tmp_path, """entry e { manual scope {
        parallel a[i in 0..4] { call zero(x) }
        dummy d deps(a[0..0])
        at b deps(d) { call copy(x, y) } } }""")
    dropped = [d for d in _codes(bag, "PG104") if "invalid" in d.message]
    assert len(dropped) == 1 and dropped[0].level is Severity.WARNING


def test_cost_lines_override_the_table(tmp_path: Path) -> None:
    base = "entry e { manual scope { spmd a[i in 0..48] { call zero(x) } at b deps(a) { call copy(x, y) } } }"
    plan, _ = _plan_text(tmp_path, base)
    # 48 AIV blocks on 48 AIV cores: one wave of 5 (default aiv) + 5 = 10
    assert plan is not None and report_facts(plan)["critical_path"]["length_us"] == 10
    plan, _ = _plan_text(tmp_path, "cost zero = 7\ncost aiv = 1\n" + base)
    assert plan is not None and report_facts(plan)["critical_path"]["length_us"] == 7 + 1


def test_scope_table_and_rings_use_the_target_output_align(tmp_path) -> None:
    """A 256 B buffer is 1 KiB of heap at the default alignment (simpler's 1024) and 512 B with
    `output_align = 512`; the scope table and the ring table must agree on it."""
    spec = tmp_path / "align.pgl"
    body = ("tensor x : f32[8, 8] external\nkernel k aiv (a : in f32[8, 8], b : out f32[8, 8])\n"
            "entry main {\n  for L in 0..2 {\n    tensor t : f32[8, 8]\n    at a { call k(x, t) }\n  }\n}\n")
    for align, want in ((None, 1024), (512, 512)):
        prelude = f"target a2a3 {{ output_align = {align} }}\n" if align else ""
        spec.write_text(prelude + body, encoding="utf-8")
        plan = plan_ok(spec)
        loop_body = next(r for r in report_facts(plan)["scopes"] if r["kind"] == "loop")
        assert loop_body["heap_bytes"] == want
        ring = next(r for r in report_facts(plan)["rings"] if r["ring"] == loop_body["ring"])
        assert ring["layer_heap"] == want


def test_dead_task_rule_skips_tasks_that_only_read(tmp_path: Path) -> None:
    """PG117 judges the writes of a task: `q` and `r` only read (q the buffer p wrote, r an
    external), `s` writes `u` that nothing reads. A regression: read-only tasks were once reported
    as writing an empty list of buffers."""
    spec = tmp_path / "ro.pgl"
    spec.write_text("""
tensor x : f32[16, 64] external
kernel fill aiv (a : out f32[16, 64])
kernel look aiv (a : in f32[16, 64])
entry e {
  auto scope {
    tensor t : f32[16, 64]
    tensor u : f32[16, 64]
    at p { call fill(t) }
    at q deps(p) { call look(t) }
    at r { call look(x) }
    at s { call fill(u) }
  }
}
""", encoding="utf-8")
    _, bag = plan_program(spec, Options())
    dead = [d for d in bag.items if d.code == "PG117"]
    assert [(d.span.line, d.message) for d in dead if d.span] == [
        (12, "'s' writes only u, which nothing reads afterwards")]
