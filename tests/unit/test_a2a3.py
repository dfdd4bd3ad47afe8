"""a2a3 backend: build, compile against our recording runtime, run, compare with pgraph's graph.

The recording runtime (tests/cpp/) is a separate C++ model of simpler's submit path: scopes,
rings, task ids, explicit deps and the TensorMap inference of an AUTO scope. Each generated
orchestration is compiled with `g++ -std=c++17 -Wall -Werror`, linked with it, run on fake
tensors, and the recorded graph must equal pgraph's fully expanded instance graph: tasks in
submission order (kernel, blocks, flags, scope depth/mode, ring), every argument region,
explicit/creator/inferred edges and dep entries. The HEAD numbers asserted on the recorded
graph come from the reference tables (docs/upstream.md §7.6), not from pgraph.
"""

from __future__ import annotations

import ast
import math
import os
import re
import shutil
import subprocess
import sys
import types
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
from pgraph.ir.instances import InstanceGraph, created_by
from pgraph.ir.program import Program
from pgraph.ir.queries import instance_env, kernel_at
from pgraph.pipeline import Options, compile_program, plan_program
from tests.conftest import (
    HEAD_SPEC,
    ROOT,
    VARIANT_762,
    ArgDirection,
    load_kernel_config,
    plan_ok,
    require_tool,
    write_golden_tree,
)
from tests.unit import abi_reference as abi

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
    """Driver input: the external tensors in orch_args order (their planning shapes), then the
    scalars (value 16)."""
    lines = []
    ext = sorted((t for t in program.tensors.values() if t.storage == "external"), key=lambda t: t.arg_index or 0)
    for t in ext:
        lines.append(f"tensor {DTYPES[t.dtype].spelling} {len(t.shape)} " + " ".join(str(d) for d in t.shape))
    lines.extend("scalar 16" for _ in program.scalars)
    return "\n".join(lines) + "\n"


def compile_and_run(files: dict[str, str], program: Program, objs: list[Path], work: Path,
                    args: str | None = None) -> str:
    """Compile the generated .cpp with -Wall -Werror, link with the recorder, run; the record text."""
    cpp_rel = next(k for k in files if k.endswith(".cpp"))
    src = work / Path(cpp_rel).name
    src.write_text(files[cpp_rel])
    obj, exe = work / "orch.o", work / "orch_driver"
    gxx = require_tool("g++")
    subprocess.run([gxx, *CXXFLAGS, "-I", str(CPP), "-c", str(src), "-o", str(obj)], check=True)
    subprocess.run([gxx, str(obj), *map(str, objs), "-o", str(exe)], check=True)
    (work / "args.txt").write_text(args if args is not None else args_file(program))
    run = subprocess.run([str(exe), str(work / "args.txt"), str(work / "record.txt")], capture_output=True, text=True)
    record = (work / "record.txt").read_text() if (work / "record.txt").exists() else ""
    assert run.returncode == 0, (run.returncode, run.stderr, [ln for ln in record.splitlines() if ln.startswith("fatal")])
    return record


# ---- the record ------------------------------------------------------------------------------


@attrs.frozen
class ArgRec:
    """One recorded tensor argument (or alloc output): tag, buffer address, start offset (elements),
    DataType value, shape and strides."""

    tag: str
    addr: int
    offset: int
    dtype: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]


@attrs.define
class Rec:
    """A parsed record: scopes, tasks (dicts), per-task args / scalars / deps / alloc outputs,
    edges {(pred, succ): flags}."""

    scopes: dict[int, tuple[int, int, str, int]]
    tasks: list[dict[str, object]]
    args: dict[int, list[ArgRec]]
    edges: dict[tuple[int, int], int]
    scalars: dict[int, list[int]] = attrs.field(factory=lambda: defaultdict(list))
    deps: dict[int, list[int]] = attrs.field(factory=lambda: defaultdict(list))
    outs: dict[int, list[ArgRec]] = attrs.field(factory=lambda: defaultdict(list))


def _arg_rec(f: list[str]) -> ArgRec:
    nd = int(f[5])
    return ArgRec(f[2], int(f[3]), int(f[4]), int(f[6]), tuple(int(x) for x in f[7:7 + nd]),
                  tuple(int(x) for x in f[7 + nd:7 + 2 * nd]))


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
            rec.args[int(f[1])].append(_arg_rec(f))
        elif f[0] == "out":
            rec.outs[int(f[1])].append(_arg_rec(f))
        elif f[0] == "scalar":
            rec.scalars[int(f[1])].append(int(f[3]))
        elif f[0] == "dep":
            rec.deps[int(f[1])].append(int(f[3]))
        elif f[0] == "edge":
            rec.edges[(int(f[1]), int(f[2]))] = int(f[3])
    return rec


def config_module(files: dict[str, str], work: Path) -> types.ModuleType:
    """Write a build's files under `work` and load its kernel_config.py."""
    for rel, text in files.items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_text(text)
    return load_kernel_config(work / "kernel_config.py")


def kernel_names(module: types.ModuleType) -> dict[int, tuple[str, str]]:
    """func_id -> (kernel_config name, core_type) of a loaded kernel_config.py."""
    return {k["func_id"]: (k["name"], k["core_type"]) for k in module.KERNELS}


# ---- comparison with pgraph ------------------------------------------------------------------


def full_graph(spec: Path, **kw: object) -> tuple[Program, InstanceGraph]:
    """pgraph's program and fully expanded instance graph (every loop iteration)."""
    bag = DiagnosticBag()
    program = compile_program(spec, Options(**kw), bag)  # type: ignore[arg-type]
    assert program is not None, [d.message for d in bag.items]
    return program, expand(program, full=True)


def merge_allocs(rec: Rec, g: InstanceGraph) -> list[int]:
    """Recorded task index -> pgraph instance index: an alloc instance standing for k
    `alloc_tensors` calls (its `blocks`) takes the next k recorded alloc tasks."""
    out: list[int] = []
    i = 0
    for inst in g.instances:
        n = max(inst.blocks, 1) if inst.kind == "alloc" else 1
        for _ in range(n):
            assert i < len(rec.tasks), f"the record ends before {inst.label}"
            assert (rec.tasks[i]["kind"] == "alloc") == (inst.kind == "alloc"), (i, inst.label, rec.tasks[i])
            out.append(inst.id)
            i += 1
    assert i == len(rec.tasks), f"{len(rec.tasks) - i} recorded task(s) beyond pgraph's graph"
    return out


PROV = {"explicit": 1, "carried": 1, "creator": 2, "inferred": 4}
TAG = {"in": "INPUT", "out": "OUTPUT_EXISTING", "inout": "INOUT", "atomic_add": "INOUT"}


def compare(program: Program, g: InstanceGraph, rec: Rec, kernels: dict[int, tuple[str, str]]) -> None:
    """Assert the recorded graph equals pgraph's instance graph."""
    merged = merge_allocs(rec, g)
    first = {}
    for i, m in enumerate(merged):
        first.setdefault(m, i)
    assert len(first) == len(g.instances), (len(first), len(g.instances))
    buffers: dict[object, int] = {}
    made = created_by(program, g.instances, g.args)  # `created` buffers: OUTPUT at their creator
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
        kname = kernel_at(program, d, instance_env(program, d, inst.iters, inst.index))
        assert kname is not None
        core = program.kernels[kname].core
        ids = (t["aic"], t["aiv0"], t["aiv1"])
        want = {"aic": ("aic", None, None), "aiv": (None, "aiv", None), "mix": ("aic", "aiv", "aiv")}[core]
        for fid, part in zip(ids, want, strict=True):
            assert (fid == -1) == (part is None), (where, ids)
            if part is not None:
                name = f"{kname}_{part}" if core == "mix" else kname
                assert kernels[fid] == (name, part), (where, kernels[fid])  # type: ignore[index]
        assert (bool(t["early"]), bool(t["sync"])) == (d.early, d.sync_start), where
        got = rec.args[first[inst.id]]
        boxes = g.args[inst.id]
        assert len(got) == len(boxes), where
        for a, box in zip(got, boxes, strict=True):
            tshape = program.tensors[box.tensor].shape
            strides = [math.prod(tshape[i + 1:]) for i in range(len(tshape))]
            want_off = sum(lo * s for (lo, _), s in zip(box.box, strides, strict=True))
            want_shape = tuple(hi - lo for lo, hi in box.box)
            tag = "OUTPUT" if made.get(box.buffer) == inst.id else TAG[box.param.direction]
            assert (a.tag, a.offset, a.shape) == (tag, want_off, want_shape), (where, box.param.name)
            assert buffers.setdefault(box.buffer, a.addr) == a.addr, (where, box.param.name)
    assert len(set(buffers.values())) == len(buffers), "two pgraph buffers share one runtime buffer"
    want_edges = {}
    entries: Counter[int] = Counter()
    for u, v, data in g.graph.edges(data=True):
        want_edges[(u, v)] = sum({PROV[p] for p in data.prov})
        entries[v] += data.entries
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
    kernels = kernel_names(config_module(files, work / "out"))
    compare(program, g, rec, kernels)
    return rec, kernels


# ---- tests: recorded graph == pgraph -----------------------------------------------------------


def reference_args() -> str:
    """Driver input with the example's test shapes (docs/upstream.md §8.3, typed in tests/unit/abi_reference.py):
    MAX_SEQ 5500, a flat block table of 688 entries, 40 x 704,512 cache rows."""
    spelling = {value.value: value.spelling for value in DTYPES.values()}
    return "".join(f"tensor {spelling[d]} {len(shape)} {' '.join(map(str, shape))}\n" for _, d, shape in abi.EXTERNAL)


#: The planning value of MAX_SEQ at which pgraph's graph has the reference test's shapes.
REFERENCE_DEFINES = (("MAX_SEQ", abi.MAX_SEQ),)


@pytest.fixture(scope="module")
def head40(runtime_objects: list[Path], tmp_path_factory: pytest.TempPathFactory) -> Rec:
    """The generated 40-layer HEAD orchestration (default constants), run on fake tensors with the
    reference's shapes, compared with pgraph's full instance graph planned at MAX_SEQ 5500."""
    work = tmp_path_factory.mktemp("head40")
    files = build_files(HEAD_SPEC, layers=40)
    program, g = full_graph(HEAD_SPEC, layers=40, defines=REFERENCE_DEFINES)
    rec = parse_record(compile_and_run(files, program, runtime_objects, work, args=reference_args()))
    compare(program, g, rec, kernel_names(config_module(files, work / "out")))
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
    """docs/upstream.md §7.6 (HEAD): per layer 265 compute + 12 dummies = 277 submits,
    432 logical blocks, 632 explicit dep entries (588 distinct); §7.3: 16 per-layer buffers;
    §7.9: the layer body is depth 2 / ring 2 (dcr_xgamma and the ALLOCs), the manual scope
    depth 3 / ring 3; §7.4 setup: pa_tiling, copy_hidden, x_gamma0 (5 blocks), copy_out."""
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


# ---- the calling interface, submit by submit, against the table typed from docs/upstream.md §8 ---


def buffer_addresses(rec: Rec, expected: list[abi.Submit | abi.Alloc]) -> dict[abi.Buffer, int]:
    """Symbolic buffer -> recorded address: the driver places orchestration tensor k at 2^48 + k 2^40;
    each alloc_tensors call's outputs are recorded with it, checked here against docs/upstream.md §8.5."""
    addr: dict[abi.Buffer, int] = {("ext", k): (1 << 48) + (k << 40) for k in range(len(abi.EXTERNAL))}
    tables = {"alloc0": abi.ALLOC0, "alloc1": abi.ALLOC1, "alloc2": abi.ALLOC2}
    for j, e in enumerate(expected):
        if not isinstance(e, abi.Alloc):
            continue
        outs = rec.outs[j]
        assert rec.tasks[j]["kind"] == "alloc", (j, e)
        assert [(o.dtype, o.shape) for o in outs] == [(d, shape) for _, d, shape in tables[e.which]], (j, e)
        for r, o in enumerate(outs):
            addr[(e.which, r) if e.layer is None else (e.which, e.layer, r)] = o.addr
    return addr


def row_major(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(math.prod(shape[d + 1:]) for d in range(len(shape)))


def test_head_calling_interface_equals_the_reference_table(head40: Rec) -> None:
    """For 40 layers, every submit of the recorded run equals the table typed from the ABI
    reference (docs/upstream.md §8.6-§8.9): func ids, submit kind, block_num, early/sync_start flags, each
    tensor argument's tag, buffer, start offset, shape, strides and dtype, each scalar's value (for
    every layer, layer-dependent ones as formulas of i), and the explicit deps in append order;
    between them the 81 alloc_tensors calls of §8.5 with their buffers. 11,085 submits."""
    rec = head40
    expected = abi.expected_run(abi.LAYERS)
    submits = [e for e in expected if isinstance(e, abi.Submit)]
    assert (len(submits), len(expected) - len(submits)) == (11_085, 81)
    assert len(rec.tasks) == len(expected)
    addr = buffer_addresses(rec, expected)
    label: dict[int, str] = {}
    scalars_checked = 0
    for j, e in enumerate(expected):
        if isinstance(e, abi.Alloc):
            continue
        t = rec.tasks[j]
        label[j] = e.label
        where = f"submit {j} ({e.label})"
        assert t["kind"] == ("dummy" if e.kind == "dummy" else "compute"), where
        assert (t["aic"], t["aiv0"], t["aiv1"]) == e.fids, where
        assert (t["blocks"], bool(t["early"]), bool(t["sync"])) == (e.block_num, e.early, e.sync), where
        got = rec.args.get(j, [])
        assert len(got) == len(e.tensors), where
        for k, (a, slot) in enumerate(zip(got, e.tensors, strict=True)):
            base = abi.buffer_shape(slot.buffer)
            strides = row_major(base) if len(slot.full_shape) == len(base) else row_major(slot.full_shape)
            want = (slot.tag, addr[slot.buffer], slot.offset, slot.full_shape, strides, abi.buffer_dtype(slot.buffer))
            assert (a.tag, a.addr, a.offset, a.shape, a.strides, a.dtype) == want, (where, f"t{k}")
        assert rec.scalars.get(j, []) == list(e.scalars), where
        scalars_checked += len(e.scalars)
        assert [label[d] for d in rec.deps.get(j, [])] == list(e.deps), where
    # by hand: per layer q/k/v_proj 3, the attention 1, 26 deferred tiles x 3, the direct wave 2,
    # 5 casts x 2, 10 gate/up SPMDs x 2, 110 late tiles x 3, 17 silu, 85 down x 3, dcr 1 = 717;
    # the entry: pa_tiling 2, copy_hidden 1; copy_out 1
    assert scalars_checked == 40 * 717 + 4


def test_head_attention_applies_the_cache_base_once(head40: Rec) -> None:
    """The attention receives the whole caches (start offset 0) and the layer's first row as its
    one scalar; the kernel adds scalar x HEAD_DIM elements to the base (docs/upstream.md §8.7, §8.8),
    so layer i reads rows [i * 704,512, (i + 1) * 704,512), inside the 28,180,480 rows of the cache
    for every layer, the last one ending exactly at its end. Had the kernel been passed the
    per-layer view as well, the base would be 2i x 704,512: past the end from layer 20 on."""
    rec = head40
    attention = [j for j, t in enumerate(rec.tasks) if (t["aic"], t["aiv0"], t["aiv1"]) == (11, 12, 12)]
    assert len(attention) == 40
    rows_total = abi.EXTERNAL[12][2][0]
    for i in (0, 19, 20, 39):
        j = attention[i]
        (base,) = rec.scalars[j]
        assert base == i * abi.CACHE_ROWS
        for slot in (2, 3):                      # t2 key_cache, t3 value_cache
            a = rec.args[j][slot]
            assert (a.addr, a.offset, a.shape) == ((1 << 48) + ((10 + slot) << 40), 0, (rows_total, abi.HEAD_DIM))
            first = a.offset // abi.HEAD_DIM + base
            assert first >= 0 and first + abi.CACHE_ROWS <= rows_total, (i, slot)
        doubled = i * abi.CACHE_ROWS + base      # a view at the layer's slab plus the same scalar
        assert (doubled + abi.CACHE_ROWS > rows_total) == (i >= 20), i
    assert rec.scalars[attention[39]][0] + abi.CACHE_ROWS == rows_total


def test_kernel_config_loads_and_matches_the_reference(tmp_path: Path) -> None:
    """kernel_config.py loads through importlib as pypto's compile_and_assemble loads it (a stub
    `simpler.task_interface` gives ArgDirection), and every key and value equals the table typed
    from docs/upstream.md §8.6 / §6.7 (func ids, names with the MIX parts _aic / _aiv, sources,
    core types, `external`, signatures of the tensor parameters, the orchestration entry)."""
    files = build_files(HEAD_SPEC)
    cfg = config_module(files, tmp_path)
    assert cfg.RUNTIME_CONFIG == {"runtime": "tensormap_and_ringbuffer", "aicpu_thread_num": 0}
    assert cfg._ROOT_DIR.resolve() == tmp_path.resolve()
    assert {"source": str(cfg._ROOT_DIR / "orchestration" / "decode_fwd_layers.cpp"),
                                 "function_name": "aicpu_orchestration_entry",
                                 "signature": [ArgDirection[d] for d in abi.ORCH_SIGNATURE]} == cfg.ORCHESTRATION
    assert Path(cfg.ORCHESTRATION["source"]).is_file()
    assert [k["func_id"] for k in cfg.KERNELS] == list(range(37))
    for k in cfg.KERNELS:
        name, core, source, external, sig = abi.KERNEL_TABLE[k["func_id"]]
        keys = ["func_id", "name", "source", "core_type", *(["external", "extra_include_dirs"] if external else []),
                "signature"]
        assert list(k) == keys, k["func_id"]
        assert (k["name"], k["core_type"], k.get("external", False)) == (name, core, external), k["func_id"]
        assert k["source"] == str(cfg._ROOT_DIR / "kernels" / source), k["func_id"]
        assert k["signature"] == [ArgDirection[d] for d in sig], k["func_id"]
    # module layout (docs/upstream.md §6.7): the title comment, the imports, _ROOT_DIR, then the three tables in order
    text = files["kernel_config.py"]
    assert text.splitlines()[0] == "# Kernel and Orchestration Configuration"
    tree = ast.parse(text)
    stmts = [f"{type(n).__name__}:" + (ast.unparse(n.targets[0]) if isinstance(n, ast.Assign)
                                       else ",".join(a.asname or a.name for a in n.names))  # type: ignore[attr-defined]
             for n in tree.body]
    assert stmts == ["Import:os", "ImportFrom:Path", "ImportFrom:_D", "Assign:_ROOT_DIR", "Assign:_ASCEND_HOME_PATH",
                     "Assign:_DEVKIT_INCLUDE_DIRS", "Assign:RUNTIME_CONFIG", "Assign:ORCHESTRATION", "Assign:KERNELS"]


def test_alloc_batch_from_the_target(runtime_objects: list[Path], tmp_path: Path) -> None:
    """A spec whose target sets alloc_batch = 2: the run performs as many alloc_tensors calls as
    `pgraph plan` counts. By hand: alloc_0's 4 buffers -> 2 calls; per layer 8 + 8 buffers -> 4 + 4."""
    shutil.copytree(SPECS_DIR, tmp_path / "specs")   # includes stay inside the spec's project root
    spec = tmp_path / "specs" / "batch2.pgl"
    spec.write_text("target a2a3 { alloc_batch = 2 }\n" + HEAD_SPEC.read_text())
    plan = plan_ok(spec, layers=3)
    planned = sum(i.blocks * i.weight for i in plan.graph.instances if i.kind == "alloc")
    assert planned == 2 + 3 * 8
    (tmp_path / "run").mkdir()
    rec, _ = record_for(spec, runtime_objects, tmp_path / "run", layers=3)
    assert sum(1 for t in rec.tasks if t["kind"] == "alloc") == planned
    assert all(t["tensors"] == 2 for t in rec.tasks if t["kind"] == "alloc")


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
        write_golden_tree(root, {rel: normalise(text) for rel, text in files.items()})
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
    # 20 external tensors and no scalar (docs/upstream.md §8.3)
    assert ".expected_arg_count = 20," in cpp
    assert cpp.count("orch_args.scalar(") == 0
    # 20 bindings, and the two dimensions read at run time (§8.4: tensor 8 dim 0, tensor 12 dim 0)
    assert cpp.count("orch_args.tensor(") == 22
    assert "(int64_t)orch_args.tensor(8).ref().shapes[0];" in cpp
    assert "(int64_t)orch_args.tensor(12).ref().shapes[0];" in cpp
    # entry: alloc_0; layer body: alloc_1 and alloc_2 (§8.5) -> three alloc_tensors calls in the text
    assert cpp.count("= alloc_tensors(") == 3
    assert cpp.count("PTO2_SCOPE(PTO2ScopeMode::MANUAL)") == 2  # x_gamma0's scope, the layer's scope
    assert cpp.count("PTO2_SCOPE()") == 4  # entry, copy_hidden's loop body, the layer body, copy_out's loop body
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
    # the five cast slices and the five gate/up chunks pick their func ids per task (§8.6: 15..19, 21..30)
    assert re.search(r"_fids\[5\] = \{15, 16, 17, 18, 19\};", cpp)
    assert re.search(r"_fids\[5\] = \{21, 23, 25, 27, 29\};", cpp)
    assert re.search(r"_fids\[5\] = \{22, 24, 26, 28, 30\};", cpp)
    # the generated code names nothing of the test double's own (tests/cpp/pto_orchestration_api.h)
    assert "pgraph_test_double" not in cpp and "PTO2RecorderAccess" not in cpp


def test_loops_stay_loops() -> None:
    two = build_files(HEAD_SPEC, layers=2)["orchestration/decode_fwd_layers.cpp"].splitlines()
    forty = build_files(HEAD_SPEC, layers=40)["orchestration/decode_fwd_layers.cpp"].splitlines()
    assert len(two) == len(forty)
    diff = [(a, b) for a, b in zip(two, forty, strict=True) if a != b]
    # the overrides line, the loop comment and bound, next_gamma = min(L + 1, NUM_LAYERS - 1), and
    # the divisors of the runtime dims by the layer count (pa_num_pages, layer_cache_base)
    assert len(diff) == 6, diff
    assert ("for (int64_t L = 0; L < 2; ++L) {" in diff[3][0]) and ("L < 40;" in diff[3][1])


def test_build_reads_max_seq_dependent_sizes_at_run_time() -> None:
    """The C++ bakes no MAX_SEQ-dependent literal (docs/upstream.md §8.4): built for MAX_SEQ 4096
    (the spec's planning value) and 5500 (the example's test), the files differ in the overrides
    comment only."""
    default = build_files(HEAD_SPEC)
    other = build_files(HEAD_SPEC, defines=REFERENCE_DEFINES)
    assert sorted(default) == sorted(other)
    for rel, text in default.items():
        lines = other[rel].splitlines()
        assert sum("Overrides: -D MAX_SEQ=5500" in ln for ln in lines) == 1, rel
        assert [ln for ln in lines if "Overrides: -D MAX_SEQ=5500" not in ln] == text.splitlines(), rel


def test_dtype_table_follows_the_real_enum() -> None:
    # docs/upstream.md §8.12: FLOAT32, FLOAT16, INT32, INT16, INT8, UINT8, BFLOAT16, INT64, UINT64, UINT16,
    # UINT32, BOOL, FP8E4M3FN, FP8E8M0, FP4E2M1 with values 0..14
    order = ["FLOAT32", "FLOAT16", "INT32", "INT16", "INT8", "UINT8", "BFLOAT16", "INT64", "UINT64", "UINT16",
             "UINT32", "BOOL", "FP8E4M3FN", "FP8E8M0", "FP4E2M1"]
    assert {v.spelling: v.value for v in DTYPES.values()} == {n: order.index(n) for n in order[:11]}
    header = (CPP / "pto_orchestration_api.h").read_text()
    enum = re.search(r"enum class DataType : uint8_t \{(.*?)\};", header, flags=re.S)
    assert enum is not None
    assert re.findall(r"(\w+) = (\d+)", enum.group(1)) == [(n, str(i)) for i, n in enumerate(order)]


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


#: Index variables named like the generated file's numbered names (`alloc_<k>`): a dep loop over
#: `p`'s tiles and the interleave temporaries of `n` (its `b` is `m`'s second axis) start from them.
RESERVED_INDEX_SPEC = """\
const R = 8
tensor o : f32[R, 1024] external
tensor w : f32[R, 1024] external
kernel z aiv (dst : out f32[R, 16])
kernel rd aiv (src : in f32[R, 1024])

entry reserved_names {
  parallel p[alloc_0 in 0..4] { call z(o[:, alloc_0*16 +: 16]) }
  at q deps(p) { call rd(o) }
  manual scope {
    interleave {
      parallel m[alloc_0 in 0..2, b in 0..3] { call z(w[:, (20 + alloc_0*3 + b)*16 +: 16]) }
      parallel n[b in 0..2, c in 0..3] deps(m[b, c]) { call z(w[:, (40 + b*3 + c)*16 +: 16]) }
    }
  }
}
"""


def test_index_variables_named_like_generated_names_build_and_match(runtime_objects: list[Path],
                                                                     tmp_path: Path) -> None:
    """A loop-local name whose numbered forms are all reserved (`alloc_0_2`, `alloc_0_3`... are
    `alloc_<k>` forms) takes a trailing `_`, as a reserved index variable does; the build used to
    search the numbered forms forever. The file compiles and its recorded graph equals pgraph's."""
    spec = tmp_path / "reserved.pgl"
    spec.write_text(RESERVED_INDEX_SPEC)
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, "-m", "pgraph", "build", str(spec), "--target", "a2a3", "-o", str(out)],
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    cpp = (out / "orchestration" / "reserved_names.cpp").read_text()
    # the index variable alloc_0 is reserved: its C++ name is alloc_0_ (layout.unique)
    assert "for (int64_t alloc_0_ = 0; alloc_0_ < 4; ++alloc_0_) {" in cpp
    # q's dep loop over p's 4 tiles reuses that spelling (no index of q's own is named so)
    assert "if (p_tids[alloc_0_].is_valid()) params_t1_deps[params_t1_deps_count++] = p_tids[alloc_0_];" in cpp
    # n's temporaries: alloc_0_ + "_loop" is reserved in every numbered form, so a trailing "_"
    assert "const int64_t alloc_0__loop_ = alloc_0_;" in cpp
    assert "[[maybe_unused]] const int64_t b = alloc_0__loop_;" in cpp
    assert "[[maybe_unused]] const int64_t c = b_loop;" in cpp
    record_for(spec, runtime_objects, tmp_path)


#: Spec identifiers that are C/C++ macros (`EOF`, `NULL`, `assert`, `errno`, `linux`,
#: `EXIT_SUCCESS`, `INT32_MAX`, `stdin`), a keyword (`int`), names reserved to the implementation
#: or the runtime (`__LINE__`, `_Tmp`, `PTO2_SCOPE`), names of the generated file (`orch_args`,
#: `ext_x` beside an external `x`), and names equal to ones the generator derives (`u_ci_shapes`
#: is the shapes array of u's TensorCreateInfo, `u_ci` that TensorCreateInfo, `h_shapes` the
#: reshape shapes of the view h, `p_tids` the TaskId array of p; kernel parameters `deps` and
#: `fids`, whose views `params_t<n>_deps` would be the task's deps array).
HAZARD_SPEC = """\
const R = 8
tensor x      : f32[R, 64] external
tensor EOF    : f32[R, 64] external
tensor ext_x2 : f32[R, 64] external
scalar errno  : i64 external

kernel z aiv (dst : out f32[R, 16])
kernel cp aiv (src : in f32[R, 64], dst : out f32[R, 64])
kernel part aiv (deps : in f32[R, 16], fids : out f32[R, 16], n : scalar i64)
kernel rd aiv (src : in f32[R, 64])
kernel flat aiv (src : in f32[R * 64], dst : out f32[R * 64])

entry hazard_names {
  tensor u           : f32[R, 64]
  tensor u_ci_shapes : f32[R, 64]
  tensor u_ci        : f32[R, 64]
  tensor g           : f32[R, 64]
  view   h           = g as [R * 64]
  tensor h_shapes    : f32[R * 64]
  tensor int         : f32[R, 64]
  tensor NULL        : f32[R, 64]
  tensor assert      : f32[R, 64]
  tensor p_tids      : f32[R, 64]
  tensor ext_x       : f32[R, 64]
  tensor orch_args   : f32[R, 64]
  tensor __LINE__    : f32[R, 64]
  tensor PTO2_SCOPE  : f32[R, 64]
  tensor linux       : f32[R, 64]
  tensor pw          : f32[R, 64]
  tensor qw          : f32[R, 64]

  at load_u { call cp(x, u) }
  at load_a { call cp(EOF, u_ci_shapes) }
  at load_b { call cp(u_ci_shapes, u_ci) }
  at load_g { call cp(u, g) }
  at load_i { call cp(g, int) }
  at load_n { call cp(int, NULL) }
  at load_s { call cp(NULL, assert) }
  at load_t { call cp(assert, p_tids) }
  at load_e { call cp(p_tids, ext_x) }
  at load_o { call cp(ext_x, orch_args) }
  at load_l { call cp(orch_args, __LINE__) }
  at load_m { call cp(__LINE__, PTO2_SCOPE) }
  at load_k { call cp(PTO2_SCOPE, linux) }
  parallel p[stdin in 0..4] { call part(u[:, stdin*16 +: 16], pw[:, stdin*16 +: 16], errno) }
  parallel q[_Tmp in 0..2, EXIT_SUCCESS in 0..2] deps(p[_Tmp*2 + EXIT_SUCCESS]) {
    call z(qw[:, (_Tmp*2 + EXIT_SUCCESS)*16 +: 16])
  }
  for INT32_MAX in 0..2 {
    at reader deps(q) { call rd(qw) }
  }
  at hread { call rd(ext_x2) }
  at lread { call rd(linux) }
  at pread { call rd(pw) }
  at hview { call flat(h, h_shapes) }
}
"""


def test_hazard_names_build_compile_and_match(runtime_objects: list[Path], tmp_path: Path) -> None:
    """Every spec identifier keeps its own spelling unless it would collide: then it is spelled
    apart (a trailing `_`, or a `u` in front of a reserved start), and the file compiles with
    -Wall -Werror and records pgraph's graph. Before, `EOF` expanded to `(-1)`, `h_shapes` was
    declared twice, `params_t13_deps` was both a view and the deps array: seven g++ errors."""
    spec = tmp_path / "hazard.pgl"
    spec.write_text(HAZARD_SPEC)
    cpp = build_files(spec)["orchestration/hazard_names.cpp"]
    for line in ("const ChipTensor& ext_EOF = orch_args.tensor(1).ref();",
                 "int64_t errno_ = from_u64<int64_t>(orch_args.scalar(0));",
                 "uint32_t u_ci_shapes[2] = {8, 64};", "TensorCreateInfo u_ci(u_ci_shapes, 2, DataType::FLOAT32);",
                 "const ChipTensor& u_ci_shapes_ = alloc_0.get_ref(1);", "const ChipTensor& u_ci_ = alloc_0.get_ref(2);",
                 "uint32_t h_shapes[1] = {512};", "ChipTensor h = g.reshape(h_shapes, 1);",
                 "const ChipTensor& h_shapes_ = alloc_0.get_ref(4);", "const ChipTensor& int_ = alloc_0.get_ref(5);",
                 "const ChipTensor& NULL_ = alloc_0.get_ref(6);", "const ChipTensor& p_tids_ = alloc_0.get_ref(8);",
                 "const ChipTensor& u__LINE__ = alloc_0.get_ref(11);", "const ChipTensor& uPTO2_SCOPE = alloc_0.get_ref(12);",
                 "for (int64_t stdin_ = 0; stdin_ < 4; ++stdin_) {", "for (int64_t u_Tmp = 0; u_Tmp < 2; ++u_Tmp) {",
                 "for (int64_t INT32_MAX_ = 0; INT32_MAX_ < 2; ++INT32_MAX_) {"):
        assert line in cpp, line
    assert "params_t13_deps_" in cpp and "params_t13_fids_" in cpp
    # ordinary names keep their spelling (the goldens are byte-identical too)
    assert "const ChipTensor& g = alloc_0.get_ref(3);" in cpp and "ChipTensor h = " in cpp
    record_for(spec, runtime_objects, tmp_path)
