"""Per-layer and whole-program counts of the HEAD and #762 specs against the reference table.

Every expected number is derived by hand from the task tables of docs/upstream.md
(§7.4 task table at T1 = #762, §7.5 T1 edge list, §7.6 HEAD deltas, §7.10 decode_fwd_layers
entry); the comment next to each number shows the sum. `_layer_model` re-derives the same
numbers from the reference rows as a function of the two wave constants, a second,
independent check of the literal table. The planner's report JSON is read through the CLI
(`pgraph plan --format json`), except for the full expansion, which has no CLI flag.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
from typing import Any

import pytest

from pgraph import cli
from pgraph.backends.report import report_facts
from pgraph.pipeline import Options, plan_program
from tests.conftest import HEAD_SPEC, VARIANT_762, plan_ok

COUNT_KEYS = ("tasks", "dummy_tasks", "blocks", "explicit_edges")

# ---- the issue's table -----------------------------------------------------------------------
# HEAD per layer (§2.4 "Counts at HEAD"), in task-table order:
#   tasks 265 = 1 attn_out_seed + 1 rms_recip + 1 q_seed + 1 q_proj + 1 kv_seed + 1 mlp_out_seed
#             + 1 k_proj + 1 v_proj + 1 fa_fused + 26 out_proj deferred + 1 out_proj direct
#             + 5 residual_rms_cast + 1 post_rms_reduce + 10 gate/up SPMD (5 k x 2)
#             + 110 gate/up at (11 n x 5 k x 2) + 17 silu + 85 down_proj + 1 dcr_xgamma
#   dummies 12 = 1 seed_dummy + 1 out_proj_dummy + 5 gate_late + 5 up_late
#   blocks 432 = 1+1+1+50+1+1+10+10+24 + 26+24 + 5+1 + 60 (10 SPMD x 6) + 110 + 17 + 85 + 5
#   edges 588 = 4 (P -> rms/q/kv_seed/mlp_seed) + 3 (seed_dummy -> rms/kv_seed/mlp_seed)
#             + 1 (q_seed -> q_proj) + 2 (kv_seed -> k/v) + 7 (-> fa_fused) + 1 (fa -> out_proj_dummy)
#             + 26 (dummy -> deferred) + 1 (fa -> direct) + 29 (casts: 10+10+7+1+1 distinct)
#             + 27 (post_rms_reduce: 26 at + direct) + 20 (cast[k] -> gate_late/up_late/gate/up SPMD)
#             + 110 (late dummy -> at) + 187 (silu: 17 x (1 + 5 + 5)) + 85 (silu[k] -> down)
#             + 85 (down -> dcr)
HEAD = dict(tasks=265, dummy_tasks=12, blocks=432, explicit_edges=588)
# #762 per layer (§2.2 "Counts at T1", §2.3 "629 after deduplication"):
#   tasks 316 = 265 - 10 - 110 (HEAD gate/up) + 170 (85 + 85 at) + 1 rope_qkv
#             = 1+1+1+1+1+1+1+1 (attn_out_seed, rms_recip, q_seed, q_proj, kv_seed, mlp_out_seed, k, v)
#               + 1 rope_qkv + 1 fa_fused + 26 + 1 + 5 + 1 + 170 + 17 + 85 + 1
#   dummies 2 = seed_dummy + out_proj_dummy
#   blocks 464 = 1+1+1+50+1+1+10+10 + 32 rope + 24 fa + 26+24 + 5+1 + 170 + 17 + 85 + 5
#   edges 629 = 4+3+1+2 + 4 (q/k/v/rms -> rope) + 4 (rope/pa_tiling/attn_seed/mlp_seed -> fa)
#             + 1+26+1 + 29 + 27 + 170 (cast[k] -> 17 gate + 17 up each) + 187 + 85 + 85
T1 = dict(tasks=316, dummy_tasks=2, blocks=464, explicit_edges=629)
# -D N_OUT_DIRECT_BLOCKS=20: deferred wave 50 - 20 = 30 at-tasks (+4 tasks). Edges +11:
#   +4 (out_proj_dummy -> 30 deferred), casts 10+10+10+1+1 = 32 (+3), post_rms_reduce 30+1 = 31 (+4)
HEAD_DIRECT20 = dict(tasks=265 + 4, dummy_tasks=12, blocks=432, explicit_edges=588 + 4 + 3 + 4)   # 269/599
# -D GATE_UP_SPMD_N=4: late at-tasks (17-4) x 5 x 2 = 130 (+20 tasks); SPMD stays 5+5 tasks with
#   4 blocks each, so blocks stay 5*17*2 = 170. Edges +20: late dummy -> 13 at-tasks per k (was 11).
HEAD_SPMD4 = dict(tasks=265 + 20, dummy_tasks=12, blocks=432, explicit_edges=588 + 20)             # 285/608
# Entry around the layers (§4 decode_fwd_layers): pa_tiling (1 block), copy_hidden (1),
# x_gamma0 (spmd 5), copy_out (1) and the prev_out dummy; edge copy_hidden -> x_gamma0.
ENTRY = dict(tasks=4, dummy_tasks=1, blocks=1 + 1 + 5 + 1, explicit_edges=1)
# 44 duplicate entries per layer (§7.5; §2.3 "673 (629 after deduplication)", §2.4 632/588):
#   residual_rms_cast: slice 2 names the direct task 4 times (3 extra), slices 3 and 4 10 times (9 + 9)
#   post_rms_reduce: 50 entries on 27 distinct producers (23 extra);  21 + 23 = 44
DUPLICATES = 3 + 9 + 9 + 23


def _summary(per_layer: dict[str, int], layers: int) -> dict[str, int]:
    return {k: ENTRY[k] + layers * per_layer[k] for k in ("tasks", "dummy_tasks", "blocks")}


@functools.cache
def cli_json(spec: str, *flags: str) -> dict[str, Any]:
    """The report object printed by `pgraph plan SPEC FLAGS --format json` (exit code 0)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = cli.main(["plan", spec, *flags, "--format", "json"])
    assert rc == 0, out.getvalue()
    return json.loads(out.getvalue())  # type: ignore[no-any-return]


def _pick(obj: dict[str, int], keys: tuple[str, ...] = COUNT_KEYS) -> dict[str, int]:
    return {k: obj[k] for k in keys}


TABLE = [
    # spec, CLI flags, per layer, layers, summary at that layer count (None: not in the table)
    pytest.param(HEAD_SPEC, (), HEAD, 40,
                 dict(tasks=10_604, dummy_tasks=481, blocks=17_288), id="HEAD"),   # 4+40*265, 1+40*12, 8+40*432
    pytest.param(VARIANT_762, (), T1, 40, None, id="762"),
    pytest.param(HEAD_SPEC, ("-D", "N_OUT_DIRECT_BLOCKS=20"), HEAD_DIRECT20, 40, None, id="HEAD-direct20"),
    pytest.param(HEAD_SPEC, ("-D", "GATE_UP_SPMD_N=4"), HEAD_SPMD4, 40, None, id="HEAD-spmd4"),
    pytest.param(HEAD_SPEC, ("--layers", "1"), HEAD, 1,
                 dict(tasks=269, dummy_tasks=13, blocks=440), id="HEAD-layers1"),  # 4+265, 1+12, 8+432 (§2.4: 440)
]


@pytest.mark.parametrize(("spec", "flags", "per_layer", "layers", "summary"), TABLE)
def test_issue_table(spec: Any, flags: tuple[str, ...], per_layer: dict[str, int], layers: int,
                     summary: dict[str, int] | None) -> None:
    report = cli_json(str(spec), *flags)
    assert report["layers"] == layers
    assert _pick(report["per_layer"]) == per_layer
    if summary is not None:
        assert _pick(report["summary"], ("tasks", "dummy_tasks", "blocks")) == summary
    # the entry adds the same 4 tasks / 1 dummy / 8 blocks to every spec and layer count
    assert _pick(report["summary"], ("tasks", "dummy_tasks", "blocks")) == _summary(per_layer, layers)


@pytest.mark.parametrize("spec", [HEAD_SPEC, VARIANT_762], ids=["HEAD", "762"])
def test_duplicate_dep_entries(spec: Any) -> None:
    report = cli_json(str(spec))
    assert report["per_layer"]["duplicate_dep_entries"] == DUPLICATES
    assert report["summary"]["duplicate_dep_entries"] == 40 * 44      # the entry's one dep has no duplicate
    assert report["per_layer"]["inferred_edges"] == 0                  # the layer body is manual, dcr has deps only
    # one explicit edge outside the layers (copy_hidden -> x_gamma0); one inferred edge, the
    # auto-scope RAW dcr_xgamma(L=39) -> copy_out through `cur` (§4: "edge ... is auto")
    assert report["summary"]["explicit_edges"] == 1 + 40 * report["per_layer"]["explicit_edges"]
    assert report["summary"]["inferred_edges"] == 1


def test_duplicates_by_dispatch_notes() -> None:
    """PG016 names the two dispatches that fold duplicates: 21 and 23 entries per layer."""
    plan = plan_ok(HEAD_SPEC)
    notes = sorted(d.message for d in plan.bag.items if d.code == "PG016")
    assert len(notes) == 2
    assert notes[0].startswith("21 duplicate dep entries of 'residual_rms_cast'")   # 3 + 9 + 9
    assert notes[1].startswith("23 duplicate dep entries of 'post_rms_reduce'")     # 50 - 27


# Per-layer blocks by phase at HEAD (phases as declared in specs/decode_layer.pgl):
HEAD_PHASE_BLOCKS = {
    "setup": 0,            # entry only
    "seed": 1 + 1 + 1 + 1,  # attn_out_seed, q_seed, kv_seed, mlp_out_seed (seed_dummy: 0 blocks)
    "norm": 1 + 1,          # rms_recip, post_rms_reduce
    "qkv": 50 + 10 + 10,    # q/k/v_proj SPMD grids
    "attention": 24,        # fa_fused spmd(24)
    "projection": 26 + 24,  # out_proj deferred at-tasks + direct spmd(24)
    "residual": 5 + 5,      # residual_rms_cast x5, dcr_xgamma spmd(5)
    "mlp": 170 + 17 + 85,   # gate/up tiles, silu, down_proj
}


def test_head_phase_blocks_sum_to_layer() -> None:
    report = cli_json(str(HEAD_SPEC))
    got = {row["phase"]: row["per_layer"]["blocks"] for row in report["phases"]}
    assert got == HEAD_PHASE_BLOCKS
    assert sum(got.values()) == report["per_layer"]["blocks"] == 432


def test_762_phase_counts() -> None:
    report = cli_json(str(VARIANT_762))
    got = {row["phase"]: _pick(row["per_layer"], ("tasks", "dummy_tasks", "blocks")) for row in report["phases"]}
    assert got["rope"] == dict(tasks=1, dummy_tasks=0, blocks=32)           # rope_qkv spmd(ROPE_CORES=32)
    assert got["attention"] == dict(tasks=1, dummy_tasks=0, blocks=24)      # fa_fused spmd(24)
    assert got["mlp"] == dict(tasks=85 + 85 + 17 + 85, dummy_tasks=0, blocks=85 + 85 + 17 + 85)
    assert got["seed"] == dict(tasks=4, dummy_tasks=1, blocks=4)
    assert sum(r["blocks"] for r in got.values()) == 464


def test_full_expansion_matches_window() -> None:
    """--layers 3 expanded in full gives the windowed per-layer counts, and each layer alone too."""
    full = plan_ok(HEAD_SPEC, layers=3, full=True)
    window = plan_ok(HEAD_SPEC, layers=3)
    for plan in (full, window):
        assert _pick(report_facts(plan)["per_layer"]) == HEAD
        assert report_facts(plan)["per_layer"]["duplicate_dep_entries"] == 44
    # summary = 4 + 3*265 tasks, 1 + 3*12 dummies, 8 + 3*432 blocks, 1 + 3*588 edges
    expected = dict(tasks=4 + 3 * 265, dummy_tasks=1 + 3 * 12, blocks=8 + 3 * 432, explicit_edges=1 + 3 * 588)
    assert _pick(report_facts(full)["summary"]) == expected
    assert report_facts(full)["summary"] == report_facts(window)["summary"]
    # every one of the three expanded layers (not just the representative one) has the HEAD counts
    g = full.graph
    lid = full.layer_loop
    for layer in range(3):
        members = {i.id for i in g.instances if i.kind != "alloc" and full.program.dispatch(i.dispatch).loops[:1] == (lid,)
                   and i.iters[0] == layer}
        tasks = sum(1 for i in members if g.instances[i].kind != "dummy")
        dummies = len(members) - tasks
        blocks = sum(g.instances[i].blocks for i in members)
        edges = sum(1 for _, v, d in g.graph.edges(data=True) if v in members and d.prov & {"explicit", "carried"})
        assert (tasks, dummies, blocks, edges) == (265, 12, 432, 588), layer
    # the window expands 2 of the 3 layers: iteration 0 plus iteration 1 weighted x2
    assert {i.iters[0] for i in window.graph.instances if i.iters} == {0, 1}


def test_full_expansion_762_matches_window() -> None:
    full = plan_ok(VARIANT_762, layers=2, full=True)
    assert _pick(report_facts(full)["per_layer"]) == T1
    assert _pick(report_facts(full)["summary"], ("tasks", "dummy_tasks", "blocks")) == _summary(T1, 2)


# ---- an independent model of the reference rows ----------------------------------------------


def _layer_model(direct: int, spmd_n: int, variant: str) -> dict[str, int]:
    """Per-layer counts from the reference rows (§2.2-2.4) for N_OUT_DIRECT_BLOCKS=direct,
    GATE_UP_SPMD_N=spmd_n; `variant` is 'head' or 't1'. Rows: (tasks, dummies, blocks, edges)."""
    deferred = 50 - direct
    has_direct = 1 if direct else 0       # an empty SPMD wave submits nothing (no task, no edges)
    cast_edges = sum(min(max(deferred - 10 * k, 0), 10) + (has_direct if 10 * k + 10 > deferred else 0)
                     for k in range(5))
    rows = [
        (0, 1, 0, 0),                    # seed_dummy
        (1, 0, 1, 0),                    # attn_out_seed
        (1, 0, 1, 2),                    # rms_recip <- P, seed_dummy
        (1, 0, 1, 0),                    # q_seed
        (1, 0, 50, 2),                   # q_proj <- P, q_seed
        (1, 0, 1, 2),                    # kv_seed <- P, seed_dummy
        (1, 0, 1, 2),                    # mlp_out_seed <- P, seed_dummy
        (1, 0, 10, 1), (1, 0, 10, 1),    # k_proj, v_proj <- kv_seed
        (0, 1, 0, 1),                    # out_proj_dummy <- fa_fused
        (deferred, 0, deferred, deferred),  # out_proj deferred <- out_proj_dummy
        (has_direct, 0, direct, has_direct),  # out_proj direct <- fa_fused
        (5, 0, 5, cast_edges),           # residual_rms_cast[k] <- out_proj[10k..10k+9]
        (1, 0, 1, deferred + has_direct),  # post_rms_reduce <- every out_proj task
        (17, 0, 17, 17 * 11),            # silu[n] <- post_rms_reduce, 5 gate, 5 up producers
        (85, 0, 85, 85),                 # down_proj(n, k) <- silu[k]
        (1, 0, 5, 85),                   # dcr_xgamma <- 85 down_proj tasks
    ]
    if variant == "t1":
        rows += [
            (1, 0, 32, 4),               # rope_qkv <- q/k/v_proj, rms_recip
            (1, 0, 24, 4),               # fa_fused <- rope_qkv, pa_tiling, attn_out_seed, mlp_out_seed
            (170, 0, 170, 170),          # gate/up (n, k) at-tasks <- cast[k]
        ]
    else:
        late = (17 - spmd_n) * 5
        spmd_tasks = 10 if spmd_n else 0  # an empty critical wave submits nothing
        rows += [
            (1, 0, 24, 7),               # fa_fused <- q/k/v_proj, rms_recip, pa_tiling, attn_out_seed, mlp_out_seed
            (0, 10, 0, 10),              # gate_late[k], up_late[k] <- cast[k]
            (spmd_tasks, 0, 10 * spmd_n, spmd_tasks),  # gate/up SPMD per k (spmd_n blocks) <- cast[k]
            (2 * late, 0, 2 * late, 2 * late),  # late at-tasks <- gate_late[k] / up_late[k]
        ]
    return {k: sum(r[i] for r in rows) for i, k in enumerate(COUNT_KEYS)}


def test_model_reproduces_table() -> None:
    assert _layer_model(24, 6, "head") == HEAD
    assert _layer_model(24, 6, "t1") == T1
    assert _layer_model(20, 6, "head") == HEAD_DIRECT20
    assert _layer_model(24, 4, "head") == HEAD_SPMD4


@pytest.mark.parametrize(("direct", "spmd_n"), [(1, 1), (10, 2), (26, 5), (50, 16), (0, 6), (24, 0)])
def test_model_matches_planner_off_table(direct: int, spmd_n: int) -> None:
    """Other wave splits re-derive without editing the spec (--layers 2 keeps it fast),
    including empty SPMD waves (N_OUT_DIRECT_BLOCKS=0, GATE_UP_SPMD_N=0), which submit nothing."""
    defines = (("N_OUT_DIRECT_BLOCKS", direct), ("GATE_UP_SPMD_N", spmd_n))
    plan, bag = plan_program(HEAD_SPEC, Options(defines=defines, layers=2))
    assert plan is not None, [d.message for d in bag.items]
    assert _pick(report_facts(plan)["per_layer"]) == _layer_model(direct, spmd_n, "head")


# Rows 1-11 of reference §2.2 in program order (T1), and at HEAD (§2.4: rope_qkv removed).
T1_ROWS_1_11 = ["seed_dummy", "attn_out_seed", "rms_recip", "q_seed", "q_proj", "kv_seed", "mlp_out_seed",
                "k_proj", "v_proj", "rope_qkv", "fa_fused"]


@pytest.mark.parametrize("spec,rows", [
    (HEAD_SPEC, [r for r in T1_ROWS_1_11 if r != "rope_qkv"]),
    (VARIANT_762, T1_ROWS_1_11),
], ids=["HEAD", "762"])
def test_layer_submits_rows_1_to_11_in_the_reference_program_order(spec: Any, rows: list[str]) -> None:
    """The generated orchestration submits in instance order; it must follow the table's order."""
    plan = plan_ok(spec, layers=2)
    layer0 = [i.label.removesuffix("@L=0") for i in plan.graph.instances
              if i.kind != "alloc" and i.loops[:1] == (plan.layer_loop,) and i.iters[:1] == (0,)]
    assert layer0[:len(rows)] == rows


def _mlp_order(spec: Any) -> list[str]:
    plan = plan_ok(spec, layers=2)
    labels = [i.label.removesuffix("@L=0") for i in plan.graph.instances
              if i.kind != "alloc" and i.loops[:1] == (plan.layer_loop,) and i.iters[:1] == (0,)]
    start = next(i for i, lab in enumerate(labels) if lab.startswith(("gate_late", "gate_proj")))
    end = next(i for i, lab in enumerate(labels) if lab.startswith("silu"))
    return labels[start:end]


def test_head_critical_wave_submits_like_the_reference_loops() -> None:
    """Reference §2.4 (#794): loop 1 per k: gate_late[k], up_late[k], gate spmd(6) k, up spmd(6) k;
    loop 2 `pl.parallel(6, 17)` x `pl.range(5)`: gate at (n, k), then up at (n, k)."""
    want = [f"{name}[k={k}]" for k in range(5)
            for name in ("gate_late", "up_late", "gate_proj.critical", "up_proj.critical")]
    want += [f"{name}[n={n},k={k}]" for n in range(6, 17) for k in range(5)
             for name in ("gate_proj.late", "up_proj.late")]
    assert _mlp_order(HEAD_SPEC) == want


def test_762_gate_up_submit_interleaved() -> None:
    """Reference §2.2 row 17: 85 + 85 at-tasks `submitted interleaved (gate(n,k), up(n,k))`."""
    want = [f"{name}[n={n},k={k}]" for n in range(17) for k in range(5) for name in ("gate_proj", "up_proj")]
    assert _mlp_order(VARIANT_762) == want
