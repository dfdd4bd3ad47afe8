"""Graphviz backend: golden files, `dot` renders, determinism, atomic -o, and hand-checked contents.

Expected values are worked out by hand from the spec text and its constants (comments give the
arithmetic), not copied from the backend's output.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pgraph.backends.dot import is_drawn, render_dot, representative_iterations
from pgraph.cli import main
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
    # copy_hidden and copy_out sit in one-trip loops (pl.parallel(0, 16, 16), ABI reference §5)
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

def test_drawn_copy_is_plan_in_layer() -> None:
    plan = plan_ok(HEAD_SPEC)
    reps = representative_iterations(plan)
    layer = [i for i in plan.graph.instances
             if i.kind != "alloc" and plan.layer_loop in plan.program.dispatch(i.dispatch).loops]
    assert layer and all(is_drawn(plan.program, reps, i) == plan.in_layer(i) for i in layer)


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
