"""Graphviz backend: golden files, `dot` renders, determinism, atomic -o, and hand-checked contents.

Expected values are worked out by hand from the spec text and its constants (comments give the
arithmetic), not copied from the backend's output.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import attrs
import networkx as nx
import pytest

from pgraph.backends.dot import DotView, parse_collapse, render_dot, representative_iterations
from pgraph.backends.target import TargetRefused
from pgraph.cli import main
from pgraph.ir.instances import Instance
from pgraph.kinds import TaskKind
from pgraph.plan.base import Plan
from pgraph.plan.critical_path import CriticalPath
from tests.conftest import HEAD_SPEC, ROOT, plan_ok, require_tool, write_golden

TINY_SPEC = ROOT / "tests" / "examples" / "tiny_dot.pgl"
GOLDEN = ROOT / "tests" / "golden" / "dot"
CASES = {"decode_layer": HEAD_SPEC, "tiny_dot": TINY_SPEC}

# Counted by hand in specs/decode_layer.pgl: one node per declaration, one per wave of a `tiles`.
HEAD_DISPATCHES = [
    "pa_tiling", "prev_out", "copy_hidden", "x_gamma0",                      # entry (setup)
    "seed_dummy", "attn_out_seed", "q_seed", "kv_seed", "mlp_out_seed",      # layer: seed
    "rms_recip", "q_proj", "k_proj", "v_proj", "fa_fused", "out_proj_dummy",
    "out_proj.deferred", "out_proj.direct",                                  # tiles out_proj: 2 waves
    "residual_rms_cast", "post_rms_reduce", "gate_late", "up_late",
    "gate_proj.critical", "gate_proj.late", "up_proj.critical", "up_proj.late",
    "silu", "down_proj", "dcr_xgamma",
    "copy_out",                                                              # entry, after the loop
]
TINY_DISPATCHES = ["load", "gate", "zero_acc", "proj.first", "proj.rest", "fix", "mix", "heads_of", "save"]
# The ghosts: the layer loop's back-edges all come from dcr_xgamma (carry prev = x_gamma0 then
# dcr_xgamma; layer_out, read as `cur`, is written by dcr_xgamma too); tiny_dot's s loop gets its
# back-edges from heads_of (carry prev) and from mix (h = h_next, which mix writes: a self-loop,
# no ghost), its r loop from fix (carry after: a self-loop).
HEAD_NODES = HEAD_DISPATCHES + ["dcr_xgamma@L-1"]
TINY_NODES = TINY_DISPATCHES + ["heads_of@s-1"]

_ID = r'(?:"[^"]+"|[A-Za-z_][A-Za-z_0-9]*)'
_ATTR = re.compile(r'([A-Za-z_]+)=("(?:[^"\\]|\\.)*"|[^ \]]+)')


def _unq(s: str) -> str:
    return s[1:-1] if s.startswith('"') else s


def _attrs(text: str) -> dict[str, str]:
    return {k: _unq(v) for k, v in _ATTR.findall(text)}


def parse_dot(text: str) -> tuple[dict[str, dict[str, str]], list[tuple[str, str, dict[str, str]]], dict[str, list[str]]]:
    """Nodes {name: attrs}, edges [(src, dst, attrs)] and the cluster path of every node."""
    nodes: dict[str, dict[str, str]] = {}
    edges: list[tuple[str, str, dict[str, str]]] = []
    where: dict[str, list[str]] = {}
    stack: list[str] = []
    for line in text.splitlines():
        s = line.strip()
        if m := re.fullmatch(r"subgraph (\S+) \{", s):
            stack.append(m.group(1))
        elif s == "}":
            if stack:
                stack.pop()
        elif m := re.fullmatch(rf"({_ID}) -> ({_ID}) \[(.*)\]", s):
            edges.append((_unq(m.group(1)), _unq(m.group(2)), _attrs(m.group(3))))
        elif (m := re.fullmatch(rf"({_ID}) \[(.*)\]", s)) and m.group(1) not in ("graph", "node", "edge"):
            name = _unq(m.group(1))
            nodes[name] = _attrs(m.group(2))
            where[name] = list(stack)
    return nodes, edges, where


@pytest.fixture(scope="module")
def head_text() -> str:
    return render_dot(plan_ok(HEAD_SPEC))


@pytest.fixture(scope="module")
def tiny_text() -> str:
    return render_dot(plan_ok(TINY_SPEC))


# ---- golden files, dot, determinism, -o ---------------------------------------------------------

@pytest.mark.parametrize("case", sorted(CASES))
def test_golden(case: str, update_golden: bool) -> None:
    text = render_dot(plan_ok(CASES[case]))
    path = GOLDEN / f"{case}.dot"
    if update_golden:
        write_golden(path, text)
    assert path.is_file(), f"missing {path}; run pytest with --update-golden"
    assert text == path.read_text(encoding="utf-8"), f"{case}: DOT output differs from {path}"


@pytest.mark.parametrize("case", sorted(CASES))
def test_dot_renders_svg(case: str, tmp_path: Path) -> None:
    exe = require_tool("dot")
    src = tmp_path / f"{case}.dot"
    src.write_text(render_dot(plan_ok(CASES[case])), encoding="utf-8")
    proc = subprocess.run([exe, "-Tsvg", str(src)], capture_output=True, text=True, timeout=30, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "Warning" not in proc.stderr and "Error" not in proc.stderr, proc.stderr
    svg = proc.stdout
    # Graphviz's own parse: one SVG node group per dispatch and per ghost (one per loop and
    # producer of back-edges into other nodes), one cluster group per scope/loop.
    expected = HEAD_NODES if case == "decode_layer" else TINY_NODES
    assert svg.count('class="node"') == len(expected)
    # HEAD: the entry, copy_hidden's one-trip loop, x_gamma0's manual scope, the layer loop and its
    # manual scope, copy_out's one-trip loop
    assert svg.count('class="cluster"') == (6 if case == "decode_layer" else 4)


def _cli_dot(spec: Path, seed: str) -> bytes:
    env = dict(os.environ, PYTHONHASHSEED=seed)
    proc = subprocess.run([sys.executable, "-m", "pgraph", "plan", str(spec.relative_to(ROOT)), "--dot"],
                          cwd=ROOT, env=env, capture_output=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout


def test_deterministic_across_hash_seeds(head_text: str) -> None:
    a = _cli_dot(HEAD_SPEC, "0")
    b = _cli_dot(HEAD_SPEC, "4242")
    assert a == b
    assert a.decode("utf-8") == head_text
    assert str(ROOT) not in head_text  # no absolute paths


def test_output_file_is_written_atomically(tmp_path: Path, tiny_text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "sub" / "out.dot"
    assert main(["plan", str(TINY_SPEC), "--dot", "-o", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == tiny_text
    out.write_text("old picture\n", encoding="utf-8")
    assert main(["plan", str(TINY_SPEC), "--dot", "-o", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == tiny_text
    assert sorted(p.name for p in out.parent.iterdir()) == ["out.dot"]  # no temporary left behind

    def fail(src: object, dst: object) -> None:
        raise OSError("disk full")

    out.write_text("old picture\n", encoding="utf-8")
    monkeypatch.setattr(os, "replace", fail)
    assert main(["plan", str(TINY_SPEC), "--dot", "-o", str(out)]) == 2  # a usage error, not a traceback
    assert out.read_text(encoding="utf-8") == "old picture\n"  # never half-written
    assert sorted(p.name for p in out.parent.iterdir()) == ["out.dot"]


# ---- nodes ------------------------------------------------------------------------------------------

def test_head_one_node_per_dispatch(head_text: str) -> None:
    nodes, _, _ = parse_dot(head_text)
    assert len(HEAD_DISPATCHES) == 29
    assert sorted(nodes) == sorted(HEAD_NODES)
    assert len(nodes) == len(plan_ok(HEAD_SPEC).program.dispatches) + 1  # and one ghost


def test_tiny_one_node_per_dispatch(tiny_text: str) -> None:
    nodes, _, _ = parse_dot(tiny_text)
    assert sorted(nodes) == sorted(TINY_NODES)


def _label(nodes: dict[str, dict[str, str]], name: str) -> list[str]:
    return nodes[name]["label"].split("\\n")


def test_head_node_labels(head_text: str) -> None:
    nodes, _, _ = parse_dot(head_text)
    # Nodes on the critical path end with their cost: ceil(blocks / cores) x the default
    # per-block cost (the spec has no `cost` lines: aic 10, aiv 5, mix 20, dummy 0; 24 AIC,
    # 48 AIV, 24 MIX clusters).
    # q_proj: Q_ON * QKV_OK = (5120/512) * 5 = 50 blocks, ceil(50 / 24) = 3 waves of 10.
    assert _label(nodes, "q_proj") == ["q_proj", "spmd aic ×50", "early", "cost 30 = 3 waves × 10"]
    assert _label(nodes, "k_proj") == ["k_proj", "spmd aic ×10", "early"]  # KV_ON * QKV_OK = (1024/512) * 5
    # fa_fused: PA_DEFAULT_BLOCK_DIM = 24 blocks of the mix extern (one wave of 20), sync_start and early.
    assert _label(nodes, "fa_fused") == ["fa_fused", "spmd mix ×24", "early · sync_start", "cost 20"]
    assert nodes["fa_fused"]["peripheries"] == "2" and nodes["fa_fused"]["penwidth"] == "3"
    # out_proj: 10 N x 5 K = 50 tiles; direct = min(24, 50) = 24 blocks, deferred = 26 tasks of 1 block.
    assert _label(nodes, "out_proj.deferred") == ["out_proj.deferred", "parallel aic ×26", "cost 10"]
    assert _label(nodes, "out_proj.direct") == ["out_proj.direct", "spmd aic ×24"]
    # gate_proj: n < 6 is one 6-block SPMD per k (5 of them); the late wave is (17 - 6) * 5 = 55 tasks.
    assert _label(nodes, "gate_proj.critical") == ["gate_proj.critical", "5 × spmd aic ×6", "cost 10"]
    assert _label(nodes, "gate_proj.late")[1] == "parallel aic ×55"
    # silu: MLP_ON = 17408/1024 = 17 (aiv: 5); down_proj: DOWN_ON * K_SPLITS = 5 * 17 = 85, early.
    assert _label(nodes, "silu") == ["silu", "parallel aiv ×17", "cost 5"]
    assert _label(nodes, "down_proj") == ["down_proj", "parallel aic ×85", "early", "cost 10"]
    assert _label(nodes, "pa_tiling") == ["pa_tiling", "spmd aiv ×1", "early"]   # "Spmd pa_tiling" (ABI §4 E1)
    assert _label(nodes, "post_rms_reduce") == ["post_rms_reduce", "at aiv"]
    assert "peripheries" not in nodes["post_rms_reduce"] and "peripheries" not in nodes["kv_seed"]
    # dummies: small diamonds; gate_late is an array of K_SPLITS_MLP = 5.
    assert _label(nodes, "gate_late") == ["gate_late", "dummy ×5"]
    for name in ("prev_out", "seed_dummy", "out_proj_dummy", "gate_late", "up_late"):
        assert nodes[name]["shape"] == "diamond"
    assert sum(1 for a in nodes.values() if a.get("penwidth") == "3") == 1  # only fa_fused is sync_start


def test_head_phase_fills(head_text: str) -> None:
    nodes, _, _ = parse_dot(head_text)
    phase_of = {
        "setup": ["pa_tiling", "prev_out", "copy_hidden", "x_gamma0", "copy_out"],
        "seed": ["seed_dummy", "attn_out_seed", "q_seed", "kv_seed", "mlp_out_seed"],
        "norm": ["rms_recip", "post_rms_reduce"],
        "qkv": ["q_proj", "k_proj", "v_proj"],
        "attention": ["fa_fused"],
        "projection": ["out_proj_dummy", "out_proj.deferred", "out_proj.direct"],
        "residual": ["residual_rms_cast", "dcr_xgamma"],
        "mlp": ["gate_late", "up_late", "gate_proj.critical", "gate_proj.late", "up_proj.critical",
                "up_proj.late", "silu", "down_proj"],
    }
    assert sum(len(v) for v in phase_of.values()) == 29
    fills = {ph: {nodes[n]["fillcolor"] for n in names} for ph, names in phase_of.items()}
    assert all(len(f) == 1 for f in fills.values())
    assert len({next(iter(f)) for f in fills.values()}) == 8
    # The legend lists the phases in first-appearance order of the spec.
    legend = re.findall(r'<td border="1" bgcolor="([^"]+)">([a-z]+)</td>', head_text)
    assert [ph for _, ph in legend] == list(phase_of)
    assert all(fills[ph] == {colour} for colour, ph in legend)


def test_head_clusters(head_text: str) -> None:
    nodes, _, where = parse_dot(head_text)
    assert where["pa_tiling"] == ["cluster_0"]
    assert where["copy_out"] == ["cluster_0", "cluster_5"]
    assert where["copy_hidden"] == ["cluster_0", "cluster_1"]
    assert where["x_gamma0"] == ["cluster_0", "cluster_2"]
    assert where["dcr_xgamma"] == ["cluster_0", "cluster_3"]
    assert all(where[n] == ["cluster_0", "cluster_3", "cluster_4"] for n in HEAD_DISPATCHES[4:27])
    labels = dict(re.findall(r"subgraph (cluster_\d+) \{\n\t+[^\n]*label=\"([^\"]+)\"", head_text))
    assert labels["cluster_0"] == "entry decode_fwd_layers\\lauto · depth 1 · ring 1\\l"
    # a scope is labelled with its source line (x_gamma0's manual scope is in fragment entry_setup)
    lines = HEAD_SPEC.read_text(encoding="utf-8").splitlines()
    setup = next(i for i, t in enumerate(lines, 1) if t.strip() == "manual scope {")
    layer = next(i for i, t in enumerate(lines, 1) if t.strip() == "manual scope ring 3 {")
    assert labels["cluster_2"] == f"scope #2 (line {setup})\\lmanual · depth 2 · ring 2\\l"
    assert labels["cluster_3"] == "for L in 0..40 (40 iterations, L=1 drawn)\\lauto · depth 2 · ring 2\\l"
    assert labels["cluster_4"] == f"scope #4 (line {layer})\\lmanual · depth 3 · ring 3\\l"
    # copy_hidden and copy_out sit in one-trip loops (pl.parallel(0, 16, 16), docs/upstream.md §8.10)
    assert labels["cluster_1"] == "for cb in 0..1 (1 iteration, cb=0 drawn)\\lauto · depth 2 · ring 2\\l"
    assert labels["cluster_5"] == "for ob in 0..1 (1 iteration, ob=0 drawn)\\lauto · depth 2 · ring 2\\l"


# ---- edges ------------------------------------------------------------------------------------------

def _edge_map(text: str) -> dict[tuple[str, str], dict[str, str]]:
    _, edges, _ = parse_dot(text)
    out: dict[tuple[str, str], dict[str, str]] = {}
    for s, t, a in edges:
        assert (s, t) not in out, f"two bundles {s} -> {t}"
        out[(s, t)] = a
    return out


def test_head_bundled_edges(head_text: str) -> None:
    e = _edge_map(head_text)
    # out_proj_dummy gates each of the 26 deferred tiles; residual_rms_cast[c] waits on tiles
    # 10c..10c+9: deferred tiles 0..25 each feed one cast (26 edges), the direct SPMD task (tiles
    # 26..49) feeds casts 2, 3, 4 (3 edges).
    assert e[("out_proj_dummy", "out_proj.deferred")]["label"] == "26 edges"
    assert e[("out_proj.deferred", "residual_rms_cast")]["label"] == "26 edges"
    assert e[("out_proj.direct", "residual_rms_cast")]["label"] == "3 edges"
    assert e[("out_proj.deferred", "post_rms_reduce")]["label"] == "26 edges"
    assert "label" not in e[("out_proj.direct", "post_rms_reduce")]  # one edge: no count
    # gate_proj.late[n, k] (11 x 5) waits on gate_late[k]; silu[n] on gate_proj[n, *]: the 5
    # critical tasks for each n < 6 (30) and 5 late tasks for each n >= 6 (55).
    assert e[("gate_late", "gate_proj.late")]["label"] == "55 edges"
    assert e[("residual_rms_cast", "gate_proj.critical")]["label"] == "5 edges"
    assert e[("gate_proj.critical", "silu")]["label"] == "30 edges"
    assert e[("up_proj.late", "silu")]["label"] == "55 edges"
    assert e[("post_rms_reduce", "silu")]["label"] == "17 edges"
    # down_proj[n, k] waits on silu[k]: 5 * 17 = 85; dcr_xgamma (one SPMD task) on all 85.
    assert e[("silu", "down_proj")]["label"] == "85 edges"
    assert e[("down_proj", "dcr_xgamma")]["label"] == "85 edges"
    assert ("prev_out", "fa_fused") not in e and not any("prev_out" in k for k in e)
    assert not any(n.startswith("alloc") for k in e for n in k)  # creator edges are omitted
    assert all(a["style"] == "solid" for k, a in e.items()
               if k[0] not in ("x_gamma0", "dcr_xgamma", "dcr_xgamma@L-1"))


def test_head_carried_edges(head_text: str) -> None:
    e = _edge_map(head_text)
    nodes, _, where = parse_dot(head_text)
    carry_users = {"rms_recip", "q_proj", "kv_seed", "mlp_out_seed"}  # deps(prev, ...) in the spec
    # Drawn once per loop: ONE dotted back-edge from dcr_xgamma into its ghost (dcr_xgamma of
    # layer L-1), not one per consumer. prev = dcr_xgamma of layer L-1 for L = 1..39: 39 of the
    # 40 layers take it.
    back = [(s, t) for (s, t), a in e.items() if a.get("constraint") == "false"]
    assert back == [("dcr_xgamma", "dcr_xgamma@L-1")]
    assert e[back[0]]["label"] == "×39" and e[back[0]]["style"] == "dotted"
    assert nodes["dcr_xgamma@L-1"]["label"] == "dcr_xgamma\\n@L-1"
    assert where["dcr_xgamma@L-1"] == ["cluster_0", "cluster_3"]  # at the top of the layer loop's cluster
    assert {t for (s, t) in e if s == "dcr_xgamma@L-1"} == carry_users
    for t in carry_users:
        assert e[("dcr_xgamma@L-1", t)]["style"] == "bold"   # carried, one edge each: no label
        assert "label" not in e[("dcr_xgamma@L-1", t)] and "constraint" not in e[("dcr_xgamma@L-1", t)]
        assert ("dcr_xgamma", t) not in e
        # layer 0 takes x_gamma0, the carry's initial value.
        assert e[("x_gamma0", t)]["label"] == "init L=0"
        assert e[("x_gamma0", t)]["style"] == "bold" and "constraint" not in e[("x_gamma0", t)]
    # copy_out reads cur = layer_out of the last layer, written by dcr_xgamma in the auto loop
    # scope: the one TensorMap edge of the program.
    assert e[("dcr_xgamma", "copy_out")]["style"] == "dashed"
    assert sum(1 for a in e.values() if a["style"] == "dashed") == 1


def test_tiny_edges(tiny_text: str) -> None:
    e = _edge_map(tiny_text)
    # prev = the 4 heads_of tasks of step s-1 for s = 1, 2 (STEPS = 3): 2 trips, one dotted edge
    # into heads_of's ghost, which feeds gate; step 0 waits on load.
    assert e[("heads_of", "heads_of@s-1")]["label"] == "×2"
    assert e[("heads_of", "heads_of@s-1")]["constraint"] == "false"
    assert e[("heads_of@s-1", "gate")]["label"] == "4 edges" and e[("heads_of@s-1", "gate")]["style"] == "bold"
    assert e[("load", "gate")]["label"] == "init s=0"
    # mix reads h = h_next of step s-1, written by mix and updated in place by the 4 heads_of
    # tasks: inferred back-edges (mix's own is a self-loop); step 0 reads h0, written by load.
    assert e[("mix", "mix")]["style"] == "dashed" and e[("mix", "mix")]["label"] == "inferred ×2"
    assert e[("heads_of@s-1", "mix")]["label"] == "4 edges" and e[("heads_of@s-1", "mix")]["style"] == "dashed"
    assert e[("load", "mix")]["style"] == "dashed" and e[("load", "mix")]["label"] == "init s=0"
    # proj.first is 2 tasks (k = 0, 1), proj.rest one SPMD task (k = 2, 3). Inside the scopeless
    # r loop (2 trips), fix@r=0 waits on proj (carry `after` starts at proj), fix@r=1 on fix@r=0.
    assert e[("zero_acc", "proj.first")]["label"] == "2 edges"
    assert "label" not in e[("zero_acc", "proj.rest")]
    assert e[("proj.first", "fix")]["label"] == "2 edges, init r=0"
    assert e[("proj.rest", "fix")]["label"] == "init r=0"
    assert e[("fix", "fix")]["label"] == "carried ×1" and e[("fix", "fix")]["constraint"] == "false"
    assert "label" not in e[("fix", "mix")]  # mix deps(fix): the last r iteration's one SPMD task
    assert e[("mix", "heads_of")]["label"] == "4 edges" and e[("mix", "heads_of")]["style"] == "dashed"
    # save reads h after the loop: h_next of the last step (mix, then the 4 heads_of).
    assert e[("mix", "save")]["style"] == "dashed"
    assert e[("heads_of", "save")]["label"] == "4 edges"
    assert set(e) == {
        ("load", "gate"), ("load", "mix"), ("gate", "zero_acc"), ("zero_acc", "proj.first"),
        ("zero_acc", "proj.rest"), ("proj.first", "fix"), ("proj.rest", "fix"), ("fix", "fix"),
        ("fix", "mix"), ("mix", "mix"), ("mix", "heads_of"), ("mix", "save"), ("heads_of", "save"),
        ("heads_of", "heads_of@s-1"), ("heads_of@s-1", "gate"), ("heads_of@s-1", "mix"),
    }


def test_tiny_unscoped_loop_cluster(tiny_text: str) -> None:
    _, _, where = parse_dot(tiny_text)
    assert where["fix"] == ["cluster_0", "cluster_1", "cluster_2", "cluster_loop_1"]
    assert 'label="for r in 0..2 (2 iterations, r=1 drawn)\\l"' in tiny_text


# ---- consistency ---------------------------------------------------------------------------------

def is_drawn(reps: dict[int, int], inst: Instance) -> bool:
    """True when every loop iteration of `inst` is its loop's representative (alloc tasks: never)."""
    if inst.kind is TaskKind.ALLOC:
        return False
    return all(reps.get(lid) == it for lid, it in zip(inst.loops, inst.iters, strict=True))


def test_drawn_copy_is_plan_in_layer() -> None:
    plan = plan_ok(HEAD_SPEC)
    reps = representative_iterations(plan)
    layer = [i for i in plan.graph.instances
             if i.kind != "alloc" and plan.layer_loop in plan.program.dispatch(i.dispatch).loops]
    assert layer and all(is_drawn(reps, i) == plan.in_layer(i) for i in layer)


def test_window_expansion_draws_like_full_expansion() -> None:
    assert render_dot(plan_ok(TINY_SPEC, full=True)) == render_dot(plan_ok(TINY_SPEC))
    assert render_dot(plan_ok(HEAD_SPEC, layers=3, full=True)) == render_dot(plan_ok(HEAD_SPEC, layers=3))


def test_single_and_empty_loops() -> None:
    one = _edge_map(render_dot(plan_ok(TINY_SPEC, defines=(("STEPS", 1),))))
    # one step: no s iteration to carry from (no ghost); only the inner r loop (2 trips) keeps its back-edge
    assert {k for k, a in one.items() if a.get("constraint") == "false"} == {("fix", "fix")}
    assert not any("@" in n for k in one for n in k)
    assert one[("load", "gate")]["label"] == "init s=0"
    empty_text = render_dot(plan_ok(TINY_SPEC, defines=(("STEPS", 0),)))
    nodes, _, _ = parse_dot(empty_text)
    assert sorted(nodes) == sorted(TINY_DISPATCHES)  # loop tasks still drawn, with no edges
    assert list(_edge_map(empty_text)) == [("load", "save")]  # save reads h = h0 when the loop is empty


# ---- the critical path ------------------------------------------------------------------------------

PATH_COLOUR = "#d95f02"
#: a2a3 cores per shape and the default per-block costs (pgraph/ir/limits.py, docs/planner.md)
CORES = {"aic": 24, "aiv": 48, "mix": 24}
PER_BLOCK = {"aic": 10, "aiv": 5, "mix": 20}

#: Four tasks with their own costs: src (2), then per iteration big (7) and small (3) both wait on
#: the carry c (src, then the previous join), join (1) on both.
CHAIN = """
tensor x : f32[16, 64] external
tensor y : f32[16, 64] external
kernel k_src aiv (a : inout f32[16, 64])
kernel k_big aic (a : inout f32[16, 64])
kernel k_small aiv (a : inout f32[16, 64])
kernel k_join aiv (a : inout f32[16, 64], b : inout f32[16, 64])
cost k_src = 2
cost k_big = 7
cost k_small = 3
cost k_join = 1
entry e {
  manual scope {
    at src { call k_src(x) }
    for i in 0..STEPS carry c = src then join {
      at big deps(c) { call k_big(x) }
      at small deps(c) { call k_small(y) }
      at join deps(big, small) { call k_join(x, y) }
    }
  }
}
"""


def _chain(tmp_path: Path, steps: int = 3) -> Path:
    spec = tmp_path / "chain.pgl"
    spec.write_text(f"const STEPS = {steps}\n" + CHAIN, encoding="utf-8")
    return spec


def _highlighted(text: str) -> tuple[set[str], set[tuple[str, str]]]:
    nodes, edges, _ = parse_dot(text)
    return ({n for n, a in nodes.items() if a.get("color") == PATH_COLOUR},
            {(s, t) for s, t, a in edges if a.get("color") == PATH_COLOUR})


def _nx_longest(plan: Plan, cost: dict[int, int]) -> tuple[int, list[int]]:
    """The longest path of the instance graph by networkx, each task weighing its cost: a source
    node before every task, each edge u -> v weighing v's cost."""
    h = nx.DiGraph()
    for u, v in plan.graph.graph.edges():
        h.add_edge(u, v, w=cost[v])
    for v in plan.graph.graph.nodes():
        h.add_edge("source", v, w=cost[v])
    return nx.dag_longest_path_length(h, weight="w"), nx.dag_longest_path(h, weight="w")[1:]


def _hand_cost(plan: Plan, inst: Instance, per_block: dict[str, int] | None = None) -> int:
    """ceil(blocks / cores of the kernel's shape) x per-block cost; alloc tasks and dummies 0."""
    if inst.kind in ("alloc", "dummy"):
        return 0
    d = plan.program.dispatch(inst.dispatch)
    assert d.kernel is not None
    kernel = plan.program.kernels[d.kernel]
    table = per_block or {}
    return math.ceil(inst.blocks / CORES[kernel.core]) * table.get(kernel.name, PER_BLOCK[kernel.core])


def test_chain_path_by_hand_and_by_networkx(tmp_path: Path) -> None:
    """By hand: src (2) + 3 x (big 7 + join 1) = 26; small (3) is never on it. networkx on the
    fully expanded instance graph with the same costs finds the same path; the picture
    highlights src, big, join, the init edge src -> big, big -> join, and the back-edge through
    join's ghost (join@i-1 -> big), and the legend carries the total."""
    spec = _chain(tmp_path)
    costs = {"k_src": 2, "k_big": 7, "k_small": 3, "k_join": 1}
    full = plan_ok(spec, full=True)
    length, path = _nx_longest(full, {i.id: _hand_cost(full, full.graph.instances[i.id], costs)
                                      for i in full.graph.instances})
    assert length == 26
    assert [full.graph.instances[n].dispatch for n in path if full.graph.instances[n].kind != "alloc"] == [
        "src", "big", "join", "big", "join", "big", "join"]
    for plan in (plan_ok(spec), full):
        fact = plan.get(CriticalPath).value
        assert fact is not None and fact["length_us"] == 26
        text = render_dot(plan)
        nodes, edges = _highlighted(text)
        assert nodes == {"src", "big", "join"}
        assert edges == {("src", "big"), ("big", "join"), ("join", "join@i-1"), ("join@i-1", "big")}
        labels, _, _ = parse_dot(text)
        assert _label(labels, "big")[-1] == "cost 7" and _label(labels, "join")[-1] == "cost 1"
        assert _label(labels, "small") == ["small", "at aiv"]   # off the path: no cost line
        # a loop inside a manual scope is no layer loop: no per-layer figure
        assert "orange: the critical path, 26 cost units; each of its nodes shows its cost" in text


def _projected(plan: Plan) -> tuple[set[str], set[tuple[str, str]]]:
    """The fact's path as the picture should draw it, by the picture's rules written again here:
    each task on its dispatch; a step into a later iteration of a loop both tasks share goes
    through the producer's ghost `<producer>@<var>-1`, or is a self-loop when the producer is
    the consumer's own dispatch."""
    fact = plan.get(CriticalPath).value
    assert fact is not None
    by_label = {i.label: i for i in plan.graph.instances}
    steps = [by_label[s["task"]] for s in fact["path"] if s["kind"] != "alloc"]
    p = plan.program
    edges = set()
    for u, v in zip(steps, steps[1:]):
        it_u = dict(zip(p.dispatch(u.dispatch).loops, u.iters))
        later = [lid for lid, it in zip(p.dispatch(v.dispatch).loops, v.iters) if lid in it_u and it_u[lid] < it]
        if later and u.dispatch != v.dispatch:
            ghost = f"{u.dispatch}@{p.loops[later[0]].axis.var}-1"
            edges |= {(u.dispatch, ghost), (ghost, v.dispatch)}
        else:
            edges.add((u.dispatch, v.dispatch))
    return {s.dispatch for s in steps}, edges


@pytest.mark.parametrize("case", sorted(CASES))
def test_highlighted_path_is_the_fact_path(case: str) -> None:
    plan = plan_ok(CASES[case])
    assert _highlighted(render_dot(plan)) == _projected(plan)


def test_head_path_by_hand_and_by_networkx(head_text: str) -> None:
    """The HEAD path by hand (docs/planner.md costs): copy_hidden (5), x_gamma0 (5), then per
    layer q_proj (ceil(50/24) = 3 waves x 10 = 30), fa_fused (20), out_proj_dummy (0), a deferred
    out_proj tile (10), a residual_rms_cast (5), a gate_proj.critical grid (6 blocks, one wave: 10),
    a silu (5), a down_proj tile (10), dcr_xgamma (5) = 95, then copy_out (5): 15 + 95 x layers.
    networkx agrees on the fully expanded graph at 4 layers; the picture's legend says 3,815
    (40 layers) and the cost lines of the path's nodes add up to one layer plus the entry."""
    full = plan_ok(HEAD_SPEC, layers=4, full=True)
    length, _ = _nx_longest(full, {i.id: _hand_cost(full, i) for i in full.graph.instances})
    assert length == 15 + 95 * 4
    assert full.get(CriticalPath).value["length_us"] == length  # type: ignore[index]
    assert "orange: the critical path, 3,815 cost units, 95 per layer over 40 layers" in head_text
    nodes, _, _ = parse_dot(head_text)
    on_path = {n: int(a["label"].split("\\n")[-1].split()[1]) for n, a in nodes.items() if a.get("color") == PATH_COLOUR}
    assert on_path == {"copy_hidden": 5, "x_gamma0": 5, "q_proj": 30, "fa_fused": 20, "out_proj_dummy": 0,
                       "out_proj.deferred": 10, "residual_rms_cast": 5, "gate_proj.critical": 10, "silu": 5,
                       "down_proj": 10, "dcr_xgamma": 5, "copy_out": 5}
    layer = [n for n in on_path if n not in ("copy_hidden", "x_gamma0", "copy_out")]
    assert sum(on_path[n] for n in layer) == 95


# ---- edges that block early dispatch ---------------------------------------------------------------

#: The dispatches of specs/decode_layer.pgl flagged `early` (read off the spec; dummies never are).
HEAD_EARLY = {"pa_tiling", "x_gamma0", "attn_out_seed", "rms_recip", "q_seed", "q_proj", "mlp_out_seed",
              "k_proj", "v_proj", "fa_fused", "residual_rms_cast", "down_proj", "dcr_xgamma"}
HEAD_DUMMIES = {"prev_out", "seed_dummy", "out_proj_dummy", "gate_late", "up_late"}


def test_head_blocking_edges_by_hand(head_text: str) -> None:
    """simpler's rule (wire_fanin_task): one unflagged producer makes a consumer ineligible, and a
    dummy is never a candidate. So an edge blocks early dispatch exactly when its producer is not
    flagged `early` and its consumer is not a dummy (its ghost stands for dcr_xgamma, flagged)."""
    e = _edge_map(head_text)
    early = {"pa_tiling", "x_gamma0", "q_proj", "k_proj", "v_proj", "fa_fused", "residual_rms_cast", "down_proj",
             "dcr_xgamma", "dcr_xgamma@L-1"}
    nodes, _, _ = parse_dot(head_text)
    assert {n for n, a in nodes.items() if a.get("peripheries") == "2"} == HEAD_EARLY
    marked = {k for k, a in e.items() if a.get("arrowhead") == "teenormal"}
    expected = {(s, t) for (s, t), a in e.items()
                if s not in HEAD_EARLY | {"dcr_xgamma@L-1"} and t not in HEAD_DUMMIES and a.get("style") != "dotted"}
    assert marked == expected
    assert len(marked) == 19 and early  # 19 pairs, listed in the early-dispatch table's blocked_by column
    assert ("silu", "down_proj") in marked and ("out_proj_dummy", "out_proj.deferred") in marked
    assert e[("silu", "down_proj")]["tooltip"] == "blocks early dispatch of down_proj: silu is not flagged early"
    assert ("residual_rms_cast", "gate_late") not in marked  # a dummy consumer: never a candidate anyway


def test_flagging_the_producer_clears_its_marks(tmp_path: Path) -> None:
    """In tiny_dot with `load` flagged early, its edges into gate and mix (step 0) block nothing;
    fix -> mix still does (fix is unflagged)."""
    spec = tmp_path / "t.pgl"
    spec.write_text(TINY_SPEC.read_text(encoding="utf-8").replace("at load {", "at load early {"), encoding="utf-8")
    e = _edge_map(render_dot(plan_ok(spec)))
    assert "arrowhead" not in e[("load", "mix")] and "arrowhead" not in e[("load", "gate")]
    assert e[("fix", "mix")]["arrowhead"] == "teenormal"


# ---- loop-carried edges: once per loop --------------------------------------------------------------

#: Per spec, by hand from its text: for each loop, the producers whose back-edges reach other
#: nodes (one ghost and one dotted edge each) with the consumers, and the self-loops.
BACK_EDGES = {
    # carry prev = x_gamma0 then dcr_xgamma: deps(prev) of rms_recip, q_proj, kv_seed, mlp_out_seed
    "specs/decode_layer.pgl": ({"dcr_xgamma@L-1": {"rms_recip", "q_proj", "kv_seed", "mlp_out_seed"}}, set()),
    # prev = load then heads_of (gate); h = h0 then h_next, written by mix and updated by heads_of,
    # read by the next mix (auto loop scope: TensorMap); carry after = proj then fix (fix, r loop)
    "tests/examples/tiny_dot.pgl": ({"heads_of@s-1": {"gate", "mix"}}, {"fix", "mix"}),
    # h = h0 then h_next: norm_t writes h_next, the next mm_t tiles and attn_b read h (TensorMap)
    "tests/examples/a2a3_auto.pgl": ({"norm_t@s-1": {"mm_t", "attn_b"}}, set()),
    # prev = first_load then fin_t: zero deps(prev) (manual scope: nothing inferred); after = gate
    # then fix_t in the scopeless r loop: fix_t waits on the previous fix_t
    "tests/examples/a2a3_manual.pgl": ({"fin_t@s-1": {"zero"}}, {"fix_t"}),
    # prev = load then res: zero_acc and cast_in deps(prev); cur is read in the manual scope only
    "tests/examples/lang_layer.pgl": ({"res@L-1": {"zero_acc", "cast_in"}}, set()),
    "tests/examples/a2a3_interleave.pgl": ({}, set()),   # no loop
}


@pytest.mark.parametrize("spec", sorted(BACK_EDGES))
def test_back_edges_drawn_once_per_loop_and_producer(spec: str) -> None:
    ghosts, self_loops = BACK_EDGES[spec]
    nodes, edges, _ = parse_dot(render_dot(plan_ok(ROOT / spec)))
    dotted = [(s, t) for s, t, a in edges if a.get("style") == "dotted"]
    assert sorted(t for _, t in dotted) == sorted(ghosts)                   # one per ghost
    assert all(s == t.split("@")[0] for s, t in dotted)                       # from the producer itself
    assert all(a.get("constraint") == "false" for _, _, a in edges if a.get("style") == "dotted")
    for ghost, consumers in ghosts.items():
        assert {t for s, t, _ in edges if s == ghost} == consumers
        assert nodes[ghost]["style"] == "dashed,rounded"
    assert {s for s, t, a in edges if s == t and a.get("constraint") == "false"} == self_loops
    # every other back-edge is gone: the only constraint=false edges are the dotted and self-loops
    assert sum(1 for _, _, a in edges if a.get("constraint") == "false") == len(dotted) + len(self_loops)


# ---- focus ------------------------------------------------------------------------------------------

def _drawn(plan: Plan, **view: object) -> tuple[set[str], str]:
    text = render_dot(plan, DotView(**view))  # type: ignore[arg-type]
    nodes, _, _ = parse_dot(text)
    return set(nodes), text


def test_focus_on_tiny_by_hand() -> None:
    """tiny_dot's edges (test_tiny_edges): load -> gate, mix; gate -> zero_acc -> proj.first,
    proj.rest -> fix -> mix -> heads_of, save; heads_of -> save; back-edges heads_of -> gate, mix
    (through heads_of@s-1), mix -> mix, fix -> fix. 15 producer -> consumer pairs in all."""
    plan = plan_ok(TINY_SPEC)
    got, text = _drawn(plan, focus="zero_acc")
    assert got == {"gate", "zero_acc", "proj.first", "proj.rest"}
    # 9 nodes, 4 drawn; of the 15 pairs, gate -> zero_acc -> proj.first, proj.rest stay
    assert "focus zero_acc (depth 1): 4 of 9 nodes drawn; elided 5 nodes and 12 edges" in text
    assert 'fontname="Helvetica-Bold"' in text.split("zero_acc [")[1].split("\n")[0]
    got, _ = _drawn(plan, focus="zero_acc", depth=2)
    # gate's producers load and heads_of (previous step: its ghost comes along); proj's consumer fix
    assert got == {"load", "heads_of", "heads_of@s-1", "gate", "zero_acc", "proj.first", "proj.rest", "fix"}
    got, text = _drawn(plan, focus="mix")
    # producers load (s=0), fix, heads_of (previous step), mix itself; consumers heads_of, save
    assert got == {"load", "fix", "mix", "heads_of", "heads_of@s-1", "save"}
    _, edges, _ = parse_dot(text)
    assert ("heads_of@s-1", "gate") not in {(s, t) for s, t, _ in edges}   # gate is elided
    got, _ = _drawn(plan, focus="fix", depth=0)
    assert got == {"fix"}
    # a `tiles` declaration names its waves; a task label its dispatch
    assert _drawn(plan, focus="proj")[0] == {"zero_acc", "proj.first", "proj.rest", "fix"}
    assert _drawn(plan, focus="fix@s=1,r=0")[0] == _drawn(plan, focus="fix")[0]


def test_focus_on_head() -> None:
    plan = plan_ok(HEAD_SPEC)
    # q_proj waits on q_seed, on x_gamma0 (layer 0) and on dcr_xgamma (layer L-1); fa_fused waits on it
    got, text = _drawn(plan, focus="q_proj")
    assert got == {"q_seed", "x_gamma0", "dcr_xgamma", "dcr_xgamma@L-1", "q_proj", "fa_fused"}
    assert "focus q_proj (depth 1): 5 of 29 nodes drawn" in text   # the ghost is not counted


def test_focus_names_a_task_or_is_refused() -> None:
    plan = plan_ok(TINY_SPEC)
    with pytest.raises(TargetRefused, match=r"--focus mixx: no dispatch.*; did you mean mix\?"):
        render_dot(plan, DotView(focus="mixx"))
    with pytest.raises(ValueError, match="depth"):
        DotView(focus="mix", depth=-1)


# ---- collapse ---------------------------------------------------------------------------------------

def test_collapse_tiny_by_hand() -> None:
    plan = plan_ok(TINY_SPEC)
    got, text = _drawn(plan, collapse=("tiles",))
    # proj's two waves become `proj`: 2 + 1 edges from zero_acc, 2 + 1 into fix (init r=0)
    assert got == {"load", "gate", "zero_acc", "proj", "fix", "mix", "heads_of", "save", "heads_of@s-1"}
    e = _edge_map(text)
    assert e[("zero_acc", "proj")]["label"] == "3 edges" and e[("proj", "fix")]["label"] == "3 edges, init r=0"
    nodes, _, _ = parse_dot(text)
    assert _label(nodes, "proj")[:3] == ["proj", "tiles · 2 waves", "parallel aic ×2 + spmd aic ×2"]
    assert nodes["proj"]["shape"] == "folder"
    got, text = _drawn(plan, collapse=("phase",))
    # matmul holds gate, zero_acc, proj.* and fix (its r loop holds matmul only): zero_acc 1 +
    # proj.first 2 + proj.rest 1 + fix 1 = 5 tasks and the dummy gate; the loop's
    # epilogue holds mix and heads_of; load and save stay alone (one dispatch each); heads_of ->
    # gate becomes the epilogue's back-edge into matmul, mix -> mix and fix -> fix self-loops
    assert got == {"load", "phase matmul", "phase epilogue", "phase epilogue@s-1", "save"}
    e = _edge_map(text)
    assert e[("phase epilogue@s-1", "phase matmul")]["label"] == "4 edges"
    assert ("phase matmul", "phase matmul") in e and ("phase epilogue", "phase epilogue") in e
    nodes, _, _ = parse_dot(text)
    assert _label(nodes, "phase matmul")[:2] == ["phase matmul", "5 dispatches · 5 tasks + 1 dummy"]
    got, text = _drawn(plan, collapse=("loop",))
    assert got == {"load", "for s", "save"}
    nodes, edges, _ = parse_dot(text)
    # one bundle per provenance: load -> gate (carried init) and load -> mix (inferred init);
    # the back-edges heads_of -> gate (carried), heads_of, mix -> mix (inferred) and the r loop's
    # fix -> fix are self-loops; mix and the 4 heads_of feed save
    assert sorted((s, t, a["label"]) for s, t, a in edges) == [
        ("for s", "for s", "4 edges, carried ×2"), ("for s", "for s", "5 edges, inferred ×2"),
        ("for s", "for s", "carried ×1"),
        ("for s", "save", "5 edges"), ("load", "for s", "init s=0"), ("load", "for s", "init s=0")]
    # one step's share of the path: gate 0 + zero_acc 5 + proj.first 10 + fix 20 twice (r = 0, 1:
    # the node holds the r loop whole) + mix 5 + heads_of 5 = 65, the report's per-layer figure
    assert _label(nodes, "for s")[-1] == "cost 65 per iteration"


def test_collapse_head_by_hand() -> None:
    plan = plan_ok(HEAD_SPEC)
    got, _ = _drawn(plan, collapse=("tiles",))
    waves = {"out_proj.deferred", "out_proj.direct", "gate_proj.critical", "gate_proj.late", "up_proj.critical",
             "up_proj.late"}
    assert got == (set(HEAD_NODES) - waves) | {"out_proj", "gate_proj", "up_proj"}
    got, text = _drawn(plan, collapse=("loop",))
    assert got == {"pa_tiling", "prev_out", "copy_hidden", "x_gamma0", "for L", "copy_out"}
    nodes, _, _ = parse_dot(text)
    # per layer: 24 dispatches; tasks 9 single ones + 26 + 1 + 5 + 1 + 5 + 55 + 5 + 55 + 17 + 85 + 1 =
    # 265; dummies seed_dummy, out_proj_dummy, gate_late (5), up_late (5) = 12; the layer's path costs 95
    assert _label(nodes, "for L") == ["for L in 0..40 (40 iterations, L=1 drawn)",
                                      "24 dispatches · 265 tasks + 12 dummies per iteration",
                                      "cost 95 per iteration"]
    assert _edge_map(text)[("for L", "for L")]["label"] == "4 edges, carried ×39"
    got, _ = _drawn(plan, collapse=("phase",))
    # the norm blocks (rms_recip, post_rms_reduce) and the residual ones (residual_rms_cast,
    # dcr_xgamma) have other phases between them: merged they would make a cycle, so they stay
    # apart; setup after the loop (copy_out) likewise
    assert got == {"phase setup", "phase seed", "rms_recip", "phase qkv", "fa_fused", "phase projection",
                   "residual_rms_cast", "post_rms_reduce", "phase mlp", "dcr_xgamma", "dcr_xgamma@L-1", "copy_out"}
    # phase seed -> phase qkv bundles q_seed -> q_proj (q_seed is flagged) and kv_seed -> k_proj,
    # v_proj (kv_seed is not): 2 of its 3 edges block
    e = _edge_map(_drawn(plan, collapse=("phase",))[1])
    assert e[("phase seed", "phase qkv")]["label"] == "3 edges"
    assert e[("phase seed", "phase qkv")]["tooltip"] == (
        "blocks early dispatch (an unflagged producer): kv_seed -> k_proj, kv_seed -> v_proj (2 of 3 edges)")
    got, _ = _drawn(plan, collapse=("tiles", "phase", "loop"))
    assert got == {"phase setup", "copy_hidden", "for L", "copy_out"}  # copy_hidden: alone in its cb loop


def test_collapsed_cost_of_a_whole_loop_is_window_exact(tmp_path: Path) -> None:
    """A phase node holding a whole loop stands for all its iterations: the chain's loop (10
    steps of big 7 + join 1) costs 80 on the path, in the window (i=0, and i=1 standing for 1..9)
    as in the full expansion; src (2) stays its own node."""
    spec = tmp_path / "phases.pgl"
    body = CHAIN.replace("    at src { call k_src(x) }\n", "    phase head { at src { call k_src(x) } }\n    phase body {\n")
    body = body.replace("    }\n  }\n}\n", "    }\n    }\n  }\n}\n")
    spec.write_text("const STEPS = 10\n" + body, encoding="utf-8")
    for full in (False, True):
        plan = plan_ok(spec, full=full)
        assert plan.get(CriticalPath).value["length_us"] == 2 + 10 * 8   # type: ignore[index]
        text = render_dot(plan, DotView(collapse=("phase",)))
        nodes, _, where = parse_dot(text)
        assert set(nodes) == {"src", "phase body"}
        assert where["phase body"] == ["cluster_0", "cluster_1"]   # outside the i loop, which it holds
        assert "cluster_loop_0" not in text
        assert _edge_map(text)[("phase body", "phase body")]["label"] == "2 edges, carried ×9"
        assert _label(nodes, "phase body")[-1] == "cost 80"
        assert _label(nodes, "src")[-1] == "cost 2"
    assert plan_ok(spec).graph.windowed   # the window does stand one copy for iterations 1..9


@pytest.mark.parametrize("view", [DotView(collapse=("tiles",)), DotView(collapse=("phase",)),
                                  DotView(collapse=("loop",)), DotView(focus="silu", depth=2)])
def test_views_of_the_window_equal_views_of_the_full_expansion(view: DotView) -> None:
    assert render_dot(plan_ok(HEAD_SPEC, layers=3), view) == render_dot(plan_ok(HEAD_SPEC, layers=3, full=True), view)
    tiny = attrs.evolve(view, focus="mix") if view.focus else view
    assert render_dot(plan_ok(TINY_SPEC), tiny) == render_dot(plan_ok(TINY_SPEC, full=True), tiny)


def test_collapse_then_focus() -> None:
    plan = plan_ok(HEAD_SPEC)
    got, _ = _drawn(plan, collapse=("phase",), focus="silu")   # silu is in phase mlp
    assert got == {"phase mlp", "residual_rms_cast", "post_rms_reduce", "dcr_xgamma"}


def test_collapse_levels_parse() -> None:
    assert parse_collapse("loop, tiles") == ("tiles", "loop")
    with pytest.raises(ValueError, match="did you mean phase"):
        parse_collapse("phse")
    with pytest.raises(ValueError, match="no collapse level"):
        parse_collapse(" , ")


# ---- rendering --------------------------------------------------------------------------------------

MAGIC = {"svg": b"<?xml", "png": b"\x89PNG\r\n\x1a\n", "pdf": b"%PDF-"}


@pytest.mark.parametrize("fmt", sorted(MAGIC))
def test_render_to_a_picture(fmt: str, tmp_path: Path) -> None:
    require_tool("dot")
    out = tmp_path / f"g.{fmt.upper()}"   # the suffix is read case-blind
    assert main(["plan", str(TINY_SPEC), "--dot", "-o", str(out)]) == 0
    data = out.read_bytes()
    assert data.startswith(MAGIC[fmt])
    if fmt == "svg":
        assert b"<svg" in data and data.count(b'class="node"') == len(TINY_NODES)
    again = tmp_path / f"h.{fmt}"
    assert main(["plan", str(TINY_SPEC), "--dot", "-o", str(again)]) == 0
    assert again.read_bytes() == data   # deterministic (a PDF's creation date is fixed)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([out.name, again.name])  # no temporary left


def test_render_without_dot_is_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))   # no `dot` there
    out = tmp_path / "g.svg"
    assert main(["plan", str(TINY_SPEC), "--dot", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"pgraph: error: cannot render {out}: Graphviz' `dot` is not installed")
    assert f"write the DOT text instead (-o {tmp_path / 'g.dot'})" in err
    assert not out.exists()


def test_render_when_dot_fails_keeps_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    fake = tmp_path / "bin" / "dot"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'Error: <stdin>: syntax error in line 1' >&2\nexit 1\n", encoding="utf-8")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    out = tmp_path / "g.png"
    out.write_bytes(b"old picture")
    assert main(["plan", str(TINY_SPEC), "--dot", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "Graphviz' `dot -Tpng` failed (exit 1): Error: <stdin>: syntax error in line 1" in err
    assert out.read_bytes() == b"old picture"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bin", "g.png"]


@pytest.mark.parametrize("suffix", [".dot", ".gv", ".txt"])
def test_text_suffixes_get_the_dot_text(suffix: str, tmp_path: Path, tiny_text: str) -> None:
    out = tmp_path / f"g{suffix}"
    assert main(["plan", str(TINY_SPEC), "--dot", "-o", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == tiny_text


# ---- the options on the command line ----------------------------------------------------------------

@pytest.mark.parametrize("argv, message", [
    (["--focus", "mix"], "--focus, --depth and --collapse shape the Graphviz picture: add --dot"),
    (["--dot", "--depth", "2"], "--depth counts edges away from --focus TASK: give --focus too"),
    (["--dot", "--focus", "mix", "--depth", "-1"], "--depth must be 0 or more, got -1"),
    (["--dot", "--collapse", "phases"], "--collapse: unknown collapse level 'phases' (did you mean phase?)"),
    (["--dot", "--focus", "mixx"], "--focus mixx: no dispatch"),
])
def test_picture_options_usage_errors(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(TINY_SPEC), *argv]) == 2
    assert capsys.readouterr().err.startswith(f"pgraph: error: {message}")


def test_build_target_dot_takes_the_view(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(TINY_SPEC), "--dot", "--collapse", "loop", "--focus", "save",
                 "-o", str(tmp_path / "p.dot")]) == 0
    assert main(["build", str(TINY_SPEC), "--target", "dot", "--collapse", "loop", "--focus", "save",
                 "-o", str(tmp_path / "b")]) == 0
    assert (tmp_path / "b" / "tiny.dot").read_text(encoding="utf-8") == (tmp_path / "p.dot").read_text(encoding="utf-8")
    assert set(parse_dot((tmp_path / "p.dot").read_text(encoding="utf-8"))[0]) == {"for s", "save"}
    capsys.readouterr()
    assert main(["build", str(TINY_SPEC), "--target", "a2a3", "--collapse", "loop", "-o", str(tmp_path / "a")]) == 2
    assert "options of --target dot, not of --target a2a3" in capsys.readouterr().err
    assert main(["build", str(TINY_SPEC), "--target", "dot", "--focus", "nope", "-o", str(tmp_path / "c")]) == 2
    assert not (tmp_path / "c").exists()


def test_collapse_phase_splits_where_it_would_make_a_cycle(tmp_path: Path) -> None:
    """Phase p holds a1, a2 and, after b (phase q) waits on a1, a3 and a4 waiting on b: one `p`
    node would make the cycle p -> b -> p, so p makes two nodes, numbered in declaration order;
    a4 does not wait on b and still joins the second (the last node of its phase)."""
    spec = tmp_path / "split.pgl"
    spec.write_text("""
tensor x : f32[5, 16, 64] external
kernel k aiv (a : inout f32[16, 64])
entry e {
  manual scope {
    phase p {
      at a1 { call k(x[0, :, :]) }
      at a2 deps(a1) { call k(x[1, :, :]) }
    }
    phase q {
      at b deps(a1) { call k(x[2, :, :]) }
    }
    phase p {
      at a3 deps(b) { call k(x[3, :, :]) }
      at a4 deps(a2) { call k(x[4, :, :]) }
    }
  }
}
""", encoding="utf-8")
    text = render_dot(plan_ok(spec), DotView(collapse=("phase",)))
    nodes, _, _ = parse_dot(text)
    assert set(nodes) == {"phase p #1", "b", "phase p #2"}
    assert _label(nodes, "phase p #2")[:2] == ["phase p #2", "2 dispatches · 2 tasks"]
    assert nodes["phase p #1"]["tooltip"] == "a1, a2" and nodes["phase p #2"]["tooltip"] == "a3, a4"
    assert set(_edge_map(text)) == {("phase p #1", "b"), ("b", "phase p #2"), ("phase p #1", "phase p #2")}
