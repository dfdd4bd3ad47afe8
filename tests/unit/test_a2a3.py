"""a2a3 backend: build, compile against our recording runtime, run, compare with pgraph's graph.

The recording runtime (tests/cpp/) is a separate C++ model of simpler's submit path: scopes,
rings, task ids, explicit deps and the TensorMap inference of an AUTO scope. Each generated
orchestration is compiled with `g++ -std=c++17 -Wall -Werror`, linked with it, run on fake
tensors, and the recorded graph must equal pgraph's fully expanded instance graph: tasks in
submission order (kernel, blocks, flags, scope depth/mode, ring), every argument region,
explicit/creator/inferred edges and dep entries. The HEAD numbers asserted on the recorded
graph come from the reference tables (qwen3_14b_decode_layer.md §2.4), not from pgraph.
"""

from __future__ import annotations

import ast
import math
import os
import re
import shutil
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import attrs
import pytest

from pgraph.backends.a2a3 import build
from pgraph.backends.a2a3.dtypes import DTYPES
from pgraph.backends.target import BuildInfo
from pgraph.cli import main, overrides_text
from pgraph.diagnostics import DiagnosticBag
from pgraph.expand.expander import expand
from pgraph.ir.instances import InstanceGraph
from pgraph.ir.program import Program
from pgraph.pipeline import Options, compile_program, plan_program
from tests.conftest import HEAD_SPEC, ROOT, VARIANT_762, plan_ok, require_tool

CPP = ROOT / "tests" / "cpp"
SPECS_DIR = ROOT / "specs"
EXAMPLES = ROOT / "tests" / "examples"
GOLDEN = ROOT / "tests" / "golden" / "a2a3"
CXXFLAGS = ["-std=c++17", "-Wall", "-Werror"]

A2A3_EXAMPLES = sorted(EXAMPLES.glob("a2a3_*.pgl"))
GOLDEN_CASES = {"decode_layer": HEAD_SPEC, "decode_layer_762": VARIANT_762,
                **{p.stem: p for p in A2A3_EXAMPLES}}


# ---- build / compile / run helpers ----------------------------------------------------------


def build_files(spec: Path, **kw: object) -> dict[str, str]:
    """The backend's files for `spec` planned with Options(**kw)."""
    opts = Options(**kw)  # type: ignore[arg-type]
    return build(plan_ok(spec, **kw), BuildInfo(str(spec), overrides_text(opts)))


@pytest.fixture(scope="session")
def runtime_objects(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """recording_runtime.o and driver_main.o, compiled once per session (g++ missing: skip, CI: fail)."""
    gxx = require_tool("g++")
    out = tmp_path_factory.mktemp("a2a3_runtime")
    objs = []
    for name in ("recording_runtime.cpp", "driver_main.cpp"):
        obj = out / (name[:-4] + ".o")
        subprocess.run([gxx, *CXXFLAGS, "-O1", "-I", str(CPP), "-c", str(CPP / name), "-o", str(obj)], check=True)
        objs.append(obj)
    return objs


def args_file(program: Program) -> str:
    """Driver input: the external tensors in orch_args order, then the scalars (value 16)."""
    lines = []
    ext = sorted((t for t in program.tensors.values() if t.storage == "external"), key=lambda t: t.arg_index or 0)
    for t in ext:
        lines.append(f"tensor {DTYPES[t.dtype].spelling} {len(t.shape)} " + " ".join(str(d) for d in t.shape))
    lines.extend("scalar 16" for _ in program.scalars)
    return "\n".join(lines) + "\n"


def compile_and_run(files: dict[str, str], program: Program, objs: list[Path], work: Path) -> str:
    """Compile the generated .cpp with -Wall -Werror, link with the recorder, run; the record text."""
    cpp_rel = next(k for k in files if k.endswith(".cpp"))
    src = work / Path(cpp_rel).name
    src.write_text(files[cpp_rel])
    obj, exe = work / "orch.o", work / "orch_driver"
    gxx = require_tool("g++")
    subprocess.run([gxx, *CXXFLAGS, "-I", str(CPP), "-c", str(src), "-o", str(obj)], check=True)
    subprocess.run([gxx, str(obj), *map(str, objs), "-o", str(exe)], check=True)
    (work / "args.txt").write_text(args_file(program))
    run = subprocess.run([str(exe), str(work / "args.txt"), str(work / "record.txt")], capture_output=True, text=True)
    record = (work / "record.txt").read_text() if (work / "record.txt").exists() else ""
    assert run.returncode == 0, (run.returncode, run.stderr, [ln for ln in record.splitlines() if ln.startswith("fatal")])
    return record


# ---- the record ------------------------------------------------------------------------------


@attrs.define
class Rec:
    """A parsed record: scopes, tasks (dicts), per-task args, edges {(pred, succ): flags}."""

    scopes: dict[int, tuple[int, int, str, int]]
    tasks: list[dict[str, object]]
    args: dict[int, list[tuple[str, int, int, tuple[int, ...]]]]
    edges: dict[tuple[int, int], int]


def parse_record(text: str) -> Rec:
    rec = Rec({}, [], defaultdict(list), {})
    for line in text.splitlines():
        f = line.split()
        if f[0] == "scope":
            rec.scopes[int(f[1])] = (int(f[2]), int(f[3]), f[4], int(f[5]))
        elif f[0] == "task":
            keys = ("kind", "ring", "local", "depth", "mode", "scope", "aic", "aiv0", "aiv1", "blocks", "early",
                    "sync", "deps", "tensors")
            row: dict[str, object] = dict(zip(keys, f[2:], strict=True))
            for k in keys:
                if k not in ("kind", "mode"):
                    row[k] = int(row[k])  # type: ignore[arg-type]
            rec.tasks.append(row)
        elif f[0] == "arg":
            nd = int(f[5])
            rec.args[int(f[1])].append((f[2], int(f[3]), int(f[4]), tuple(int(x) for x in f[6:6 + nd])))
        elif f[0] == "edge":
            rec.edges[(int(f[1]), int(f[2]))] = int(f[3])
    return rec


def kernel_names(config_text: str) -> dict[int, tuple[str, str]]:
    """func_id -> (kernel name, core_type) from kernel_config.py (a Python literal file)."""
    tree = ast.parse(config_text)
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "KERNELS":
            return {k["func_id"]: (k["name"], k["core_type"]) for k in ast.literal_eval(node.value)}
    raise AssertionError("no KERNELS in kernel_config.py")


# ---- comparison with pgraph ------------------------------------------------------------------


def full_graph(spec: Path, **kw: object) -> tuple[Program, InstanceGraph]:
    """pgraph's program and fully expanded instance graph (every loop iteration)."""
    bag = DiagnosticBag()
    program = compile_program(spec, Options(**kw), bag)  # type: ignore[arg-type]
    assert program is not None, [d.message for d in bag.items]
    return program, expand(program, full=True)


def merge_allocs(rec: Rec) -> list[int]:
    """Recorded task index -> merged index (consecutive alloc batches of one scope become one)."""
    out, n = [], -1
    prev: dict[str, object] | None = None
    for t in rec.tasks:
        same = prev is not None and t["kind"] == "alloc" and prev["kind"] == "alloc" and t["scope"] == prev["scope"]
        if not same:
            n += 1
        out.append(n)
        prev = t
    return out


PROV = {"explicit": 1, "carried": 1, "creator": 2, "inferred": 4}
TAG = {"in": "INPUT", "out": "OUTPUT_EXISTING", "inout": "INOUT", "atomic_add": "INOUT"}


def compare(program: Program, g: InstanceGraph, rec: Rec, kernels: dict[int, tuple[str, str]]) -> None:
    """Assert the recorded graph equals pgraph's instance graph."""
    merged = merge_allocs(rec)
    first = {}
    for i, m in enumerate(merged):
        first.setdefault(m, i)
    assert len(first) == len(g.instances), (len(first), len(g.instances))
    buffers: dict[object, int] = {}
    for inst in g.instances:
        t = rec.tasks[first[inst.id]]
        scope = program.scopes[inst.scope]
        where = f"task {inst.id} ({inst.label})"
        kind = inst.kind if inst.kind in ("alloc", "dummy") else "compute"
        assert (t["kind"], t["ring"], t["depth"]) == (kind, scope.ring, scope.depth), (where, t)
        assert t["mode"] == scope.mode, where   # alloc tasks too: their heap scope is never manual
        if kind == "alloc":
            continue
        d = program.dispatch(inst.dispatch)
        assert t["blocks"] == inst.blocks, where
        if kind == "dummy":
            continue
        core = program.kernels[d.kernel].core  # type: ignore[index]
        ids = (t["aic"], t["aiv0"], t["aiv1"])
        want = {"aic": ("aic", None, None), "aiv": (None, "aiv", None), "mix": ("aic", "aiv", "aiv")}[core]
        for fid, part in zip(ids, want, strict=True):
            assert (fid == -1) == (part is None), (where, ids)
            if part is not None:
                assert kernels[fid] == (d.kernel, part), (where, kernels[fid])  # type: ignore[index]
        assert (bool(t["early"]), bool(t["sync"])) == (d.early, d.sync_start), where
        got = rec.args[first[inst.id]]
        boxes = g.args[inst.id]
        assert len(got) == len(boxes), where
        for (tag, addr, offset, shape), box in zip(got, boxes, strict=True):
            tshape = program.tensors[box.tensor].shape
            strides = [math.prod(tshape[i + 1:]) for i in range(len(tshape))]
            want_off = sum(lo * s for (lo, _), s in zip(box.box, strides, strict=True))
            want_shape = tuple(hi - lo for lo, hi in box.box)
            assert (tag, offset, shape) == (TAG[box.param.direction], want_off, want_shape), (where, box.param.name)
            assert buffers.setdefault(box.buffer, addr) == addr, (where, box.param.name)
    assert len(set(buffers.values())) == len(buffers), "two pgraph buffers share one runtime buffer"
    want_edges = {}
    entries: Counter[int] = Counter()
    for u, v, data in g.graph.edges(data=True):
        want_edges[(u, v)] = sum({PROV[p] for p in data["prov"]})
        entries[v] += data["entries"]
    got_edges: dict[tuple[int, int], int] = {}
    for (u, v), flags in rec.edges.items():
        key = (merged[u], merged[v])
        got_edges[key] = got_edges.get(key, 0) | flags
    missing = sorted(set(want_edges) - set(got_edges))[:5]
    extra = sorted(set(got_edges) - set(want_edges))[:5]
    assert not missing and not extra, ([(g.instances[u].label, g.instances[v].label) for u, v in missing],
                                       [(g.instances[u].label, g.instances[v].label) for u, v in extra])
    wrong = [(g.instances[u].label, g.instances[v].label, f, want_edges[(u, v)])
             for (u, v), f in got_edges.items() if f != want_edges[(u, v)]]
    assert not wrong, wrong[:5]
    for inst in g.instances:
        if inst.kind != "alloc":
            assert rec.tasks[first[inst.id]]["deps"] == entries[inst.id], inst.label


def record_for(spec: Path, objs: list[Path], work: Path, **kw: object) -> tuple[Rec, dict[int, tuple[str, str]]]:
    files = build_files(spec, **kw)
    program, g = full_graph(spec, **kw)
    rec = parse_record(compile_and_run(files, program, objs, work))
    kernels = kernel_names(files["kernel_config.py"])
    compare(program, g, rec, kernels)
    return rec, kernels


# ---- tests: recorded graph == pgraph -----------------------------------------------------------


@pytest.fixture(scope="module")
def head40(runtime_objects: list[Path], tmp_path_factory: pytest.TempPathFactory) -> Rec:
    """The recorded 40-layer HEAD run, already compared with pgraph's full instance graph."""
    rec, _ = record_for(HEAD_SPEC, runtime_objects, tmp_path_factory.mktemp("head40"), layers=40)
    return rec


@pytest.mark.parametrize("layers", [1, 2])
def test_head_recorded_graph_equals_pgraph(layers: int, runtime_objects: list[Path], tmp_path: Path) -> None:
    record_for(HEAD_SPEC, runtime_objects, tmp_path, layers=layers)


def test_head_40_layers_recorded_graph_equals_pgraph(head40: Rec) -> None:
    assert len(head40.tasks) > 0  # the comparison ran in the fixture


@pytest.mark.parametrize("spec", [*A2A3_EXAMPLES, EXAMPLES / "tiny_dot.pgl"], ids=lambda p: p.stem)
def test_example_recorded_graph_equals_pgraph(spec: Path, runtime_objects: list[Path], tmp_path: Path) -> None:
    record_for(spec, runtime_objects, tmp_path)


@pytest.mark.parametrize("define", [("N_OUT_DIRECT_BLOCKS", 0), ("N_OUT_DIRECT_BLOCKS", 50), ("GATE_UP_SPMD_N", 0),
                                    ("GATE_UP_SPMD_N", 16)],
                         ids=lambda d: f"{d[0]}={d[1]}")
def test_head_wave_knobs(define: tuple[str, int], runtime_objects: list[Path], tmp_path: Path) -> None:
    """The waves re-derive from the constants: an empty SPMD wave submits nothing, a full one is all."""
    record_for(HEAD_SPEC, runtime_objects, tmp_path, layers=2, defines=(define,))


def repo_specs() -> list[Path]:
    """Every .pgl in the repository that plans without errors (diagnostics corpus, examples, specs)."""
    out = []
    for spec in sorted([*ROOT.glob("tests/diagnostics/*.pgl"), *EXAMPLES.glob("*.pgl"), *SPECS_DIR.rglob("*.pgl")]):
        try:
            plan, bag = plan_program(spec, Options())
        except Exception:  # noqa: BLE001 - a planner crash is another test's business
            continue
        if plan is not None and not bag.has_errors:
            out.append(spec)
    return out


@pytest.mark.slow
def test_every_valid_repo_spec_builds_and_matches(request: pytest.FixtureRequest, runtime_objects: list[Path],
                                                  tmp_path: Path) -> None:
    if "slow" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("opt-in: -m slow (about 45 s)")
    specs = repo_specs()
    assert len(specs) >= 10
    for spec in specs:
        work = tmp_path / spec.stem
        work.mkdir()
        kw = {"layers": 2} if "NUM_LAYERS" in spec.read_text() else {}
        record_for(spec, runtime_objects, work, **kw)


def layer_groups(rec: Rec, layers: int) -> list[set[int]]:
    """Task indices of each layer: the scopes under the depth-2 scope site opened `layers` times."""
    sites = Counter(site for _, depth, _, site in rec.scopes.values() if depth == 2)
    body_site = [site for site, n in sites.items() if n == layers]
    assert len(body_site) == 1, sites
    children: dict[int, list[int]] = defaultdict(list)
    for sid, (parent, _, _, _) in rec.scopes.items():
        children[parent].append(sid)
    groups = []
    for sid, (_, depth, _, site) in sorted(rec.scopes.items()):
        if depth != 2 or site != body_site[0]:
            continue
        under, todo = set(), [sid]
        while todo:
            cur = todo.pop()
            under.add(cur)
            todo.extend(children[cur])
        groups.append({i for i, t in enumerate(rec.tasks) if t["scope"] in under})
    return groups


def test_head_numbers_match_the_reference_tables(head40: Rec) -> None:
    """qwen3_14b_decode_layer.md §2.4 (HEAD): per layer 265 compute + 12 dummies = 277 submits,
    432 logical blocks, 632 explicit dep entries (588 distinct); §2.1: 16 per-layer buffers;
    §3: the layer body is depth 2 / ring 2 (dcr_xgamma and the ALLOCs), the manual scope
    depth 3 / ring 3; §2.2 setup: pa_tiling, copy_hidden, x_gamma0 (5 blocks), copy_out."""
    rec = head40
    groups = layer_groups(rec, 40)
    assert len(groups) == 40
    for layer, group in enumerate(groups):
        tasks = [rec.tasks[i] for i in group]
        compute = [t for t in tasks if t["kind"] == "compute"]
        dummies = [t for t in tasks if t["kind"] == "dummy"]
        allocs = [t for t in tasks if t["kind"] == "alloc"]
        assert (len(compute), len(dummies), len(compute) + len(dummies)) == (265, 12, 277), layer
        assert not any(t["early"] for t in dummies), layer  # pypto never flags a dummy
        assert sum(t["blocks"] for t in compute) == 432, layer
        explicit = {(u, v) for (u, v), f in rec.edges.items() if f & 1 and v in group}
        assert len(explicit) == 588, layer
        assert sum(t["deps"] for t in tasks) == 632, layer
        assert sum(t["tensors"] for t in allocs) == 16 and all(t["ring"] == 2 for t in allocs), layer
        ring2 = [t for t in compute if t["ring"] == 2]
        assert [(t["depth"], t["mode"], t["blocks"]) for t in ring2] == [(2, "auto", 5)], layer  # dcr_xgamma
        assert all((t["ring"], t["depth"], t["mode"]) == (3, 3, "manual") for t in [*compute, *dummies]
                   if t not in ring2), layer
        mix = [t for t in compute if t["aic"] != -1 and t["aiv0"] != -1]
        assert [(t["blocks"], t["sync"], t["aiv1"] == t["aiv0"]) for t in mix] == [(24, 1, True)], layer  # fa_fused
        # across layers: dcr_xgamma(L-1) (x_gamma0 for L = 0) -> rms_recip, q_proj, kv_seed,
        # mlp_out_seed; pa_tiling -> fa_fused
        incoming = [(u, v) for (u, v), f in rec.edges.items() if f & 1 and v in group and u not in group]
        sources = Counter(u for u, _ in incoming)
        assert sorted(sources.values()) == [1, 4], layer
    compute = [t for t in rec.tasks if t["kind"] == "compute"]
    dummies = [t for t in rec.tasks if t["kind"] == "dummy"]
    assert (len(compute), len(dummies)) == (10_604, 481)  # 40 x 265 + 4 setup; 40 x 12 + prev_out
    assert sum(t["blocks"] for t in compute) == 40 * 432 + 8  # setup: 1 + 1 + 5 + 1 blocks
    # the only TensorMap edge: copy_out (entry scope, AUTO) reads `cur` = layer_out of layer 39,
    # written by dcr_xgamma(39) in the AUTO layer scope; every other writer is in a MANUAL scope
    tensormap = [(u, v) for (u, v), f in rec.edges.items() if f & 4]
    last_dcr = max(i for i in groups[-1] if rec.tasks[i]["ring"] == 2 and rec.tasks[i]["kind"] == "compute")
    assert tensormap == [(last_dcr, len(rec.tasks) - 1)]


# ---- golden files ------------------------------------------------------------------------------


def normalise(text: str) -> str:
    """Golden form: the version in the 'Generated by pgraph X' line becomes <version>."""
    return re.sub(r"Generated by pgraph \S+", "Generated by pgraph <version>", text)


@pytest.mark.parametrize("name", sorted(GOLDEN_CASES))
def test_golden(name: str, update_golden: bool) -> None:
    spec = GOLDEN_CASES[name]
    assert spec.exists(), f"{spec.relative_to(ROOT)} is missing"
    files = build_files(spec)
    root = GOLDEN / name
    if update_golden:
        if root.exists():
            shutil.rmtree(root)
        for rel, text in files.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(normalise(text))
        return
    on_disk = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    assert on_disk == sorted(files), "golden file set differs; rerun with --update-golden"
    for rel, text in files.items():
        assert (root / rel).read_text() == normalise(text), f"{name}/{rel} differs; rerun with --update-golden"


@pytest.mark.parametrize("name", sorted(GOLDEN_CASES))
def test_golden_sources_compile(name: str) -> None:
    """Every golden .cpp compiles with -std=c++17 -Wall -Werror against tests/cpp's header."""
    gxx = require_tool("g++")
    sources = sorted((GOLDEN / name).rglob("*.cpp"))
    assert sources, f"no golden .cpp for {name} (a deleted golden directory is a failure; rerun with --update-golden)"
    for src in sources:
        run = subprocess.run([gxx, *CXXFLAGS, "-fsyntax-only", "-I", str(CPP), str(src)], capture_output=True, text=True)
        assert run.returncode == 0, run.stderr


def test_variant_762_compiles_and_matches(runtime_objects: list[Path], tmp_path: Path) -> None:
    record_for(VARIANT_762, runtime_objects, tmp_path, layers=2)


# ---- shape of the generated code (counted by hand from the spec text) ----------------------------


def test_head_file_shape() -> None:
    files = build_files(HEAD_SPEC)
    cpp = files["orchestration/decode_fwd_layers.cpp"]
    # 20 external tensors + 1 scalar (decode_common.pgl)
    assert ".expected_arg_count = 21," in cpp
    assert cpp.count("orch_args.tensor(") == 20 and cpp.count("orch_args.scalar(") == 1
    # entry: 4 buffers; layer body: 16 buffers (qwen3_14b_decode_layer.md §2.1) -> one batch each
    assert cpp.count("= alloc_tensors(") == 2
    assert cpp.count("PTO2_SCOPE(PTO2ScopeMode::MANUAL)") == 2  # x_gamma0's scope, the layer's scope
    assert cpp.count("PTO2_SCOPE()") == 3  # entry, copy_hidden's scope, the layer body
    assert "for (int64_t L = 0; L < 40; ++L) {" in cpp
    # flagged `early` in the spec: pa_tiling, x_gamma0, attn_out_seed, q_seed, mlp_out_seed, rms_recip,
    # q_proj, k_proj, v_proj, fa_fused, residual_rms_cast, down_proj, dcr_xgamma
    assert cpp.count("set_allow_early_resolve(true)") == 13
    assert cpp.count("set_require_sync_start(true)") == 1  # fa_fused
    assert cpp.count("rt_submit_task(mixed_") == 1
    # dummies: prev_out and seed_dummy are statically empty; out_proj_dummy, gate_late, up_late carry deps
    assert cpp.count("rt_submit_dummy_task(") == 5
    assert cpp.count("_deps_count > 0) {") == 3
    # the carry and the hoisted TaskIds (reference: prev_normed_tid[1], down_tids, out_tids[50])
    for decl in ("PTO2TaskId prev_tids[1];", "PTO2TaskId down_proj_tids[85];", "PTO2TaskId out_proj_tids[50];",
                 "PTO2TaskId copy_hidden_tids[1] = {PTO2TaskId::invalid()};"):
        assert decl in cpp, decl
    # residual_rms_cast c waits on out_proj tiles 10c..10c+9; post_rms_reduce on all 50 slots
    assert "for (int64_t t = c * 10; t < c * 10 + 10; ++t) {" in cpp
    assert re.search(r"PTO2TaskId \w+_deps\[50\];", cpp)


def test_loops_stay_loops() -> None:
    two = build_files(HEAD_SPEC, layers=2)["orchestration/decode_fwd_layers.cpp"].splitlines()
    forty = build_files(HEAD_SPEC, layers=40)["orchestration/decode_fwd_layers.cpp"].splitlines()
    assert len(two) == len(forty)
    diff = [(a, b) for a, b in zip(two, forty, strict=True) if a != b]
    # the overrides line, the loop comment and bound, and next_gamma = min(L + 1, NUM_LAYERS - 1)
    assert len(diff) == 4, diff
    assert ("for (int64_t L = 0; L < 2; ++L) {" in diff[2][0]) and ("L < 40;" in diff[2][1])


def test_func_ids_in_first_use_order() -> None:
    kernels = kernel_names(build_files(HEAD_SPEC)["kernel_config.py"])
    # first use in specs/decode_layer.pgl, read top to bottom; the MIX extern has two parts
    # (rows 2-9 in the reference's program order: attn_out_seed, rms_recip, q_seed, q_proj, kv_seed,
    # mlp_out_seed, k_proj, v_proj)
    want = ["paged_attention_tiling_cce", "copy_hidden", "x_gamma", "zero_pad_rows", "rms_recip", "zero_q",
            "qkv_matmul", "zero_kv", "zero_mlp_out", "paged_attention_rope_cce", "paged_attention_rope_cce",
            "out_matmul", "residual_rms_cast", "post_rms_reduce", "mlp_matmul", "silu_mul", "down_matmul",
            "dcr_xgamma", "copy_out"]
    assert [kernels[i][0] for i in range(len(kernels))] == want
    assert kernels[9][1] == "aic" and kernels[10][1] == "aiv"


def test_kernel_config_contents() -> None:
    text = build_files(HEAD_SPEC)["kernel_config.py"]
    env: dict[str, object] = {}
    exec(compile(text, "kernel_config.py", "exec"), env)  # a plain Python module
    assert env["RUNTIME_CONFIG"] == {"runtime": "tensormap_and_ringbuffer", "aicpu_thread_num": 0}
    assert env["ORCHESTRATION"] == {"source": "orchestration/decode_fwd_layers.cpp",
                                    "function_name": "aicpu_orchestration_entry"}
    rope = [k for k in env["KERNELS"] if k["name"] == "paged_attention_rope_cce"]  # type: ignore[attr-defined]
    assert [k["core_type"] for k in rope] == ["aic", "aiv"]
    sig = rope[0]["signature"]
    assert [p["name"] for p in sig][:2] == ["out", "query"] and len(sig) == 19  # 17 tensors + 2 scalars
    assert (sig[0]["arg_type"], sig[1]["arg_type"], sig[17]["arg_type"]) == ("OUTPUT_EXISTING", "INOUT", "SCALAR")
    assert rope[0]["source"] == "kernels/paged_attention_cce/attention_rope/entry.cpp"
    qkv = next(k for k in env["KERNELS"] if k["name"] == "qkv_matmul")  # type: ignore[attr-defined]
    assert [(p["direction"], p["arg_type"], p["dtype"]) for p in qkv["signature"]] == [
        ("in", "INPUT", "BFLOAT16"), ("in", "INPUT", "BFLOAT16"), ("atomic_add", "INOUT", "FLOAT32")]


def test_dtype_table_marks_unverified_spellings() -> None:
    assert {k for k, v in DTYPES.items() if v.verified} == {"f32", "bf16", "u8"}
    assert [DTYPES[k].spelling for k in ("f32", "bf16", "u8")] == ["FLOAT32", "BFLOAT16", "UINT8"]
    cpp = build_files(EXAMPLES / "a2a3_auto.pgl")["orchestration/auto_example.cpp"]
    assert "DataType::INT32);  // unverified DataType spelling" in cpp
    assert cpp.count("unverified") == 1
    assert "unverified" not in build_files(HEAD_SPEC)["orchestration/decode_fwd_layers.cpp"]


# ---- command line ----------------------------------------------------------------------------------


def test_cli_build_writes_both_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "a2a3"
    assert main(["build", str(HEAD_SPEC), "--target", "a2a3", "-o", str(out), "--layers", "2"]) == 0
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == [
        ".pgraph-build", "kernel_config.py", "orchestration/decode_fwd_layers.cpp"]  # + the build marker
    assert "Overrides: --layers 2" in (out / "orchestration/decode_fwd_layers.cpp").read_text()


def test_cli_build_refuses_a_plan_with_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "bad.pgl"
    for name in ("qwen3_14b.pgl", "decode_common.pgl"):  # beside the spec: inside its project root
        (tmp_path / name).write_text((SPECS_DIR / name).read_text())
    spec.write_text(HEAD_SPEC.read_text().replace("deps(silu[k])", "deps(silu[k + 1])"))  # silu tile 17 of 0..17
    out = tmp_path / "out"
    assert main(["build", str(spec), "--target", "a2a3", "-o", str(out)]) == 1
    assert not out.exists()
    assert "error[PG026" in capsys.readouterr().err


def test_cli_build_refuses_what_the_runtime_cannot_express(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "sibling.pgl"
    spec.write_text("""
tensor x : f32[4] external
kernel k aiv (a : in f32[4], b : out f32[4])
entry e {
  tensor u : f32[4]
  auto scope {
    tensor t : f32[4]
    at first { call k(x, t) }
  }
  auto scope {
    at second { call k(t, u) }
  }
}
""")
    out = tmp_path / "out"
    assert main(["check", str(spec)]) == 1  # a check the build needs is the planner's: `check` sees it
    assert "sibling.pgl:11:5: error[PG037 tensor-scope-closed]: 'second' uses tensor 't' outside the scope that " \
        "allocates it" in capsys.readouterr().err
    assert main(["build", str(spec), "--target", "a2a3", "-o", str(out)]) == 1
    assert not out.exists()
    assert "error[PG037" in capsys.readouterr().err


def test_cli_build_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["build", str(HEAD_SPEC), "-o", str(tmp_path / "o")])  # --target is required
    assert exc.value.code == 2
    with pytest.raises(SystemExit) as exc:
        main(["build", str(HEAD_SPEC), "--target", "a5", "-o", str(tmp_path / "o")])
    assert exc.value.code == 2
    assert main(["build", str(tmp_path / "missing.pgl"), "--target", "a2a3", "-o", str(tmp_path / "o")]) == 2
    assert not (tmp_path / "o").exists()


def test_output_is_byte_identical_across_runs_dirs_and_hash_seeds(tmp_path: Path) -> None:
    outs = []
    for i, (cwd, spec, seed) in enumerate([(ROOT, "specs/decode_layer.pgl", "0"),
                                           (tmp_path, str(HEAD_SPEC), "12345")]):
        out = tmp_path / f"out{i}"
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)}  # this checkout's pgraph from any cwd
        run = subprocess.run([sys.executable, "-m", "pgraph", "build", spec, "--target", "a2a3", "-o", str(out)],
                             cwd=cwd, env=env, capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        outs.append({p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()})
    assert outs[0] == outs[1]
    assert b"from specs/decode_layer.pgl" in outs[0]["orchestration/decode_fwd_layers.cpp"]


def test_header_names_the_spec_by_base_name_outside_a_repository(tmp_path: Path) -> None:
    spec = tmp_path / "copy_of_manual.pgl"
    shutil.copy(EXAMPLES / "a2a3_manual.pgl", spec)
    cpp = build_files(spec)["orchestration/manual_example.cpp"]
    assert " from copy_of_manual.pgl (target a2a3," in cpp
    assert str(tmp_path) not in cpp
