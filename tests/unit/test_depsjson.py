"""deps.json: `pgraph export --deps-json` against the recording runtime's own deps.json writer.

The recording runtime (tests/cpp/recording_runtime.cpp, `recorder_write_deps_json`) is a C++
model of simpler's submit path that lists every edge as dep_gen does (reference
docs/upstream.md §2.7): one record per explicit dep entry, per creator argument, per
overlapping TensorMap entry. The generated orchestration of a build is compiled, run on the
recorder, and its deps.json must equal pgraph's export field by field: tasks and tensors in
order, edges as a multiset (the explicit records' order is the C++ append order, which the
export does not model).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from pgraph.backends.depsjson.export import export
from pgraph.backends.depsjson.model import parse, render
from tests.conftest import HEAD_SPEC, ROOT, plan_ok, require_tool
from tests.unit.test_a2a3 import CPP, CXXFLAGS, args_file, build_files, runtime_objects

__all__ = ["runtime_objects"]

EXAMPLES = ROOT / "tests" / "examples"


def record_deps_json(spec: Path, objs: list[Path], work: Path, **kw: object) -> str:
    """Build `spec`, compile the orchestration with the recorder, run it; the recorder's deps.json text."""
    files = build_files(spec, **kw)
    plan = plan_ok(spec, full=True, **kw)
    cpp = next(k for k in files if k.endswith(".cpp"))
    gxx = require_tool("g++")
    work.mkdir(parents=True, exist_ok=True)
    (work / "orch.cpp").write_text(files[cpp])
    subprocess.run([gxx, *CXXFLAGS, "-I", str(CPP), "-c", str(work / "orch.cpp"), "-o", str(work / "orch.o")],
                   check=True)
    subprocess.run([gxx, str(work / "orch.o"), *map(str, objs), "-o", str(work / "drv")], check=True)
    (work / "args.txt").write_text(args_file(plan.program))
    run = subprocess.run([str(work / "drv"), str(work / "args.txt"), str(work / "record.txt"), str(work / "deps.json")],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return (work / "deps.json").read_text()


def exported(spec: Path, **kw: object) -> str:
    return render(export(plan_ok(spec, full=True, **kw)).graph)


def assert_same_deps(mine: str, theirs: str) -> None:
    a, b = json.loads(mine), json.loads(theirs)
    for key in ("tasks", "tensors"):
        assert len(a[key]) == len(b[key]), key
        for i, (x, y) in enumerate(zip(a[key], b[key], strict=True)):
            assert x == y, (key, i, x, y)

    def canon(e: dict[str, object]) -> str:
        return json.dumps(e, sort_keys=True)

    assert sorted(map(canon, a["edges"])) == sorted(map(canon, b["edges"]))


@pytest.mark.parametrize("layers", [1, 2, 40])
def test_export_equals_the_recorded_deps_json(layers: int, runtime_objects: list[Path], tmp_path: Path) -> None:
    theirs = record_deps_json(HEAD_SPEC, runtime_objects, tmp_path, layers=layers)
    assert_same_deps(exported(HEAD_SPEC, layers=layers), theirs)


@pytest.mark.parametrize("spec", sorted(EXAMPLES.glob("a2a3_*.pgl")), ids=lambda p: p.stem)
def test_export_equals_recorded_examples(spec: Path, runtime_objects: list[Path], tmp_path: Path) -> None:
    """The examples have AUTO scopes: creator and TensorMap records with overlap classes."""
    theirs = record_deps_json(spec, runtime_objects, tmp_path)
    assert_same_deps(exported(spec), theirs)


def test_export_import_round_trip_head_40_is_lossless() -> None:
    """export -> text -> parse gives back every record, and rendering again gives the same bytes."""
    g = export(plan_ok(HEAD_SPEC, layers=40, full=True)).graph
    text = render(g)
    back = parse(text)
    assert back.tasks == g.tasks and back.tensors == g.tensors and back.edges == g.edges
    assert render(back) == text
    # 40 x 277 submits + 5 entry submits (pa_tiling, prev_out, copy_hidden, x_gamma0, copy_out):
    # docs/upstream.md §7.6 and test_a2a3's reference counts (10,604 compute + 481 dummies)
    assert len(g.tasks) == 10_604 + 481


# ---- pgraph diff -------------------------------------------------------------------------------


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    from pgraph.cli import main

    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def diff_json(old: str, new: str, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, dict]:
    code, out, err = run_cli(["diff", old, new, "--format", "json", *extra], capsys)
    assert code in (0, 1), err
    return code, json.loads(out)


def mutated_specs(tmp_path: Path, old: str, new: str) -> Path:
    """A copy of specs/ with one edit in decode_layer.pgl (`old` must occur exactly once)."""
    import shutil

    root = tmp_path / "specs"
    shutil.copytree(ROOT / "specs", root)
    spec = root / "decode_layer.pgl"
    text = spec.read_text()
    assert text.count(old) == 1, old
    spec.write_text(text.replace(old, new))
    return spec


def test_diff_spec_against_its_own_recorded_capture_is_empty(runtime_objects: list[Path], tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    capture = tmp_path / "head2.json"
    capture.write_text(record_deps_json(HEAD_SPEC, runtime_objects, tmp_path / "rec", layers=2))
    code, doc = diff_json(str(HEAD_SPEC), str(capture), capsys, "--layers", "2")
    assert (code, doc["same"], doc["changes"], doc["implied_edges"]) == (0, True, [], 0)
    # §2.4 HEAD: 265 compute + 12 dummies, 432 blocks, 632 dep entries (588 distinct) per layer;
    # the capture's layers come from the alignment with the spec
    for side in ("old", "new"):
        for layer in ("0", "1"):
            assert doc["per_layer"][side][layer] == {"tasks": 265, "dummies": 12, "blocks": 432, "entries": 632,
                                                     "edges": 588}


HEAD_LINES = {line: n for n, line in enumerate(HEAD_SPEC.read_text().splitlines(), start=1)}


def _line_of(fragment: str) -> int:
    hits = [n for line, n in HEAD_LINES.items() if fragment in line]
    assert len(hits) == 1, fragment
    return hits[0]


@pytest.mark.parametrize("mutation", ["edge", "flag", "wave"])
def test_diff_reports_exactly_the_mutation_of_a_recorded_capture(mutation: str, runtime_objects: list[Path],
                                                                  tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Captures recorded by the recording runtime from a mutated copy of the HEAD spec; the diff
    of the HEAD spec against each reports that mutation only, at the line of HEAD that declares it."""
    layers = 2
    if mutation == "edge":  # fa_fused loses its dep on attn_out_seed (whose body is empty: no race)
        dep_line = "deps(q_proj, k_proj, v_proj, rms_recip, pa_tiling, attn_out_seed, mlp_out_seed)"
        spec = mutated_specs(tmp_path, dep_line, dep_line.replace(" attn_out_seed,", ""))
        line = _line_of(dep_line)
        col = HEAD_SPEC.read_text().splitlines()[line - 1].index("attn_out_seed") + 1
        want = [("edge removed", "attn_out_seed -> fa_fused (explicit)", 1, (line, col))]
    elif mutation == "flag":  # down_proj is no longer flagged early: 85 tasks per layer (§2.2 row 19)
        decl = "parallel down_proj[n in 0..DOWN_ON, k in 0..K_SPLITS] early deps(silu[k])"
        spec = mutated_specs(tmp_path, decl, decl.replace(" early", ""))
        line = _line_of(decl)
        want = [("task changed", "down_proj: early_dispatch true -> false", 85, (line, 5))]
    else:  # the out_proj wave boundary moves by one tile: 27 deferred at-tasks, a direct spmd(23)
        deferred = "wave deferred t in 0..OUT_DEFERRED : parallel deps(out_proj_dummy)"
        direct = "wave direct t in OUT_DEFERRED..OUT_TILES : spmd deps(fa_fused)"
        text = HEAD_SPEC.read_text()
        edited = text.replace(deferred, deferred.replace("0..OUT_DEFERRED", "0..OUT_DEFERRED + 1")).replace(
            direct, direct.replace("OUT_DEFERRED..", "OUT_DEFERRED + 1.."))
        spec = mutated_specs(tmp_path, text, edited)
        col = HEAD_SPEC.read_text().splitlines()[_line_of(deferred) - 1].index("wave") + 1
        # by hand (§2.2 rows 13-16, §2.3): the 50 out_tids slots 26..49 named the direct task, now
        # 27..49: residual_rms_cast[2] (slots 20..29) lists it 3 times instead of 4,
        # post_rms_reduce (all 50 slots) 23 times instead of 24; the new tile's own edges are implied
        want = [("task added", "out_proj.deferred", 1, (_line_of(deferred), col)),
                ("task changed", "out_proj.direct: block_num 24 -> 23", 1, (_line_of(direct), col)),
                ("edge changed", "out_proj.direct -> residual_rms_cast (explicit): entries 4 -> 3", 1, None),
                ("edge changed", "out_proj.direct -> post_rms_reduce (explicit): entries 24 -> 23", 1, None)]
    capture = tmp_path / "capture.json"
    capture.write_text(record_deps_json(spec, runtime_objects, tmp_path / "rec", layers=layers))
    code, doc = diff_json(str(HEAD_SPEC), str(capture), capsys, "--layers", str(layers))
    assert code == 1
    got = [(c["kind"], c["what"], c["per_layer"]) for c in doc["changes"]]
    assert sorted(got) == sorted((k, w, {"0": n, "1": n}) for k, w, n, _ in want), got
    for kind, what, _, at in want:
        change = next(c for c in doc["changes"] if (c["kind"], c["what"]) == (kind, what))
        if at is not None:
            assert change["span"].endswith(f"decode_layer.pgl:{at[0]}:{at[1]}"), change


def test_diff_762_against_head(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/upstream.md §7.4 (T1 = #762) vs §7.6 (HEAD), per layer: rope_qkv removed (#796)
    and fa_fused's extern now takes q/k/v_proj and rms_recip as deps; gate/up: 85 + 85 at-tasks
    replaced by the critical wave (5 + 5 spmd(6), 55 + 55 late at-tasks, 5 + 5 dummies, #794);
    316 -> 265 compute tasks, 2 -> 12 dummies (318 -> 277 submits), 464 -> 432 blocks,
    673 -> 632 dep entries, 629 -> 588 distinct explicit edges."""
    code, doc = diff_json(str(ROOT / "specs/variants/decode_layer_762.pgl"), str(HEAD_SPEC), capsys, "--layers", "2")
    assert code == 1
    per = {(c["kind"], c["what"]): c["per_layer"] for c in doc["changes"]}
    one = {"0": 1, "1": 1}
    assert per[("task removed", "rope_qkv")] == one
    assert per[("task changed", "fa_fused: kernel paged_attention_cce -> paged_attention_rope_cce")] == one
    for producer in ("q_proj", "k_proj", "v_proj", "rms_recip"):
        assert per[("edge added", f"{producer} -> fa_fused (explicit)")] == one
    assert per[("task removed", "gate_proj")] == per[("task removed", "up_proj")] == {"0": 85, "1": 85}
    for name, n in (("gate_proj.critical", 5), ("up_proj.critical", 5), ("gate_proj.late", 55),
                    ("up_proj.late", 55), ("gate_late", 5), ("up_late", 5)):
        assert per[("task added", name)] == {"0": n, "1": n}, name
    for layer in ("0", "1"):
        old, new = doc["per_layer"]["old"][layer], doc["per_layer"]["new"][layer]
        assert (old["tasks"], old["dummies"], old["blocks"], old["entries"], old["edges"]) == (316, 2, 464, 673, 629)
        assert (new["tasks"], new["dummies"], new["blocks"], new["entries"], new["edges"]) == (265, 12, 432, 632, 588)
        assert (new["tasks"] + new["dummies"]) - (old["tasks"] + old["dummies"]) == 277 - 318


def test_diff_text_shows_diagnostics_and_critical_path(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["diff", str(ROOT / "specs/variants/decode_layer_762.pgl"), str(HEAD_SPEC),
                            "--layers", "2"], capsys)
    assert code == 1
    assert "- task removed rope_qkv: 2 (1 per layer in 2 layer(s))" in out
    # T1's rope_qkv is unflagged and blocks fa_fused's early dispatch (§2.4 last line): resolved at
    # HEAD; a note, so counted (one notes policy), and listed with --notes
    assert "'rope_qkv' is not flagged `early`" not in out
    assert "note(s) not listed (" in out and "PG105 early-dispatch-blocked" in out
    assert "critical path: " in out
    code, out, _ = run_cli(["diff", str(ROOT / "specs/variants/decode_layer_762.pgl"), str(HEAD_SPEC),
                            "--layers", "2", "--notes"], capsys)
    assert code == 1 and "resolved: " in out and "'rope_qkv' is not flagged `early`" in out
    assert "note(s) not listed" not in out


# ---- diff as the what-if loop: budgets, per-side overrides, sides with errors (issue 24) ------------


def test_diff_of_one_wave_more_lists_the_change_and_the_budget_finding(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """The edit of tests/unit/test_budgets.py (gate_proj's critical wave split at n = 3): `check`
    fails it (PG121); `diff` is a what-if: exit 1 (different), the new wave per layer, and the
    overrun as a new PG121 warning and in the budgets section (277 -> 282 against 280)."""
    from tests.unit.test_budgets import k_splits_mlp, one_wave_more

    spec = one_wave_more(tmp_path)
    k = k_splits_mlp()
    code, out, err = run_cli(["diff", str(HEAD_SPEC), str(spec)], capsys)
    assert code == 1, err
    assert f"  + task added gate_proj.critical2: {40 * k} ({k} per layer in 40 layer(s))" in out
    assert "  ~ task changed gate_proj.critical: block_num 6 -> 3" in out
    assert f"  submits_per_layer  277 -> {277 + k} (+{k}), budget 280  over on new" in out
    assert (f"  new: {spec}:") in out and (f"warning[PG121]: submits_per_layer is {277 + k} tasks, over its budget "
                                         "of 280") in out and "not enforced: `pgraph diff` is a what-if" in out
    assert "constants: the same" in out and "errors:" not in out
    code, doc = diff_json(str(HEAD_SPEC), str(spec), capsys)
    row = next(r for r in doc["budgets"] if r["figure"] == "submits_per_layer")
    assert (row["old"], row["new"], row["old_limit"], row["new_limit"], row["over"]) == (277, 277 + k, 280, 280, "new")
    assert [d["code"] for d in doc["diagnostics"]["new"]] == ["PG121", "PG121"]
    assert doc["diagnostics"]["errors"] == {"old": 0, "new": 0}


def test_diff_with_a_per_side_define_names_the_constant(capsys: pytest.CaptureFixture[str]) -> None:
    """By hand: GATE_UP_SPMD_N 6 -> 4 leaves 5 critical spmd tasks per tile set (block_num 6 -> 4)
    and moves n = 4, 5 to the late wave: (17 - 4) x 5 = 65 late tasks instead of 55, +10 each for
    gate and up: 285 tasks and 297 submits per layer; each late task one edge from its late dummy
    (+20: 608); silu[4], silu[5] wait on 5 late tiles each instead of 5 critical tasks."""
    code, out, err = run_cli(["diff", str(HEAD_SPEC), str(HEAD_SPEC), "--b-define", "GATE_UP_SPMD_N=4"], capsys)
    assert code == 1, err
    assert out.splitlines()[:2] == [f"--- {HEAD_SPEC}", f"+++ {HEAD_SPEC} -D GATE_UP_SPMD_N=4"]
    assert "constants: 1 differ (old -> new):" in out
    assert "  GATE_UP_SPMD_N  6 -> 4  (-D/--config/--layers on new)" in out
    assert "  ~ task changed gate_proj.critical: block_num 6 -> 4: 200 (5 per layer in 40 layer(s))" in out
    assert "  + task added gate_proj.late: 400 (10 per layer in 40 layer(s))" in out
    assert "  L=0..39  265 -> 285 (+20)" in out
    assert "  submits_per_layer  277 -> 297 (+20), budget 280  over on new" in out
    assert "  edges_per_layer    588 -> 608 (+20), budget 600  over on new" in out
    # the same what-if from the other side, and -D for both sides cancels out
    code, out, _ = run_cli(["diff", str(HEAD_SPEC), str(HEAD_SPEC), "--a-define", "GATE_UP_SPMD_N=4"], capsys)
    assert code == 1 and "  GATE_UP_SPMD_N  4 -> 6  (-D/--config/--layers on old)" in out
    assert "  - task removed gate_proj.late: 400 (10 per layer in 40 layer(s))" in out
    code, out, _ = run_cli(["diff", str(HEAD_SPEC), str(HEAD_SPEC), "-D", "GATE_UP_SPMD_N=4", "--layers", "2"], capsys)
    assert code == 0 and "no difference in tasks or edges" in out and "constants: the same" in out
    code, doc = diff_json(str(HEAD_SPEC), str(HEAD_SPEC), capsys, "--b-define", "GATE_UP_SPMD_N=4", "--layers", "2")
    assert doc["constants"] == [{"name": "GATE_UP_SPMD_N", "old": 6, "new": 4, "override": "new"}]
    assert doc["new"] == f"{HEAD_SPEC} -D GATE_UP_SPMD_N=4"


def test_diff_derived_constants_follow_the_override(capsys: pytest.CaptureFixture[str]) -> None:
    """N_OUT_DIRECT_BLOCKS 24 -> 20: OUT_DIRECT = min(20, 50) = 20 and OUT_DEFERRED = 50 - 20 = 30
    (specs/qwen3_14b.pgl) differ too, listed after the overridden constant."""
    code, out, _ = run_cli(["diff", str(HEAD_SPEC), str(HEAD_SPEC), "--b-define", "N_OUT_DIRECT_BLOCKS=20",
                            "--layers", "2"], capsys)
    assert code == 1
    lines = out[out.index("constants:"):].splitlines()[:4]
    assert lines[0] == "constants: 3 differ (old -> new):"
    assert [ln.split()[:4] for ln in lines[1:]] == [["N_OUT_DIRECT_BLOCKS", "24", "->", "20"],
                                                    ["OUT_DEFERRED", "26", "->", "30"], ["OUT_DIRECT", "24", "->", "20"]]


def test_diff_of_a_side_with_errors_exits_3_and_still_compares(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """silu without its dep on post_rms_reduce: silu reads inv_rms_tile, which post_rms_reduce
    writes, in the manual scope (no TensorMap): a race (PG100). The planner ran to its end, so the
    diff shows the removed edge (17 per layer: one per silu task, MLP_ON = 17) and the new error."""
    dep = "parallel silu[n in 0..MLP_ON] deps(post_rms_reduce, gate_proj[n, *], up_proj[n, *])"
    spec = mutated_specs(tmp_path, dep, dep.replace("post_rms_reduce, ", ""))
    code, out, err = run_cli(["diff", str(HEAD_SPEC), str(spec), "--layers", "2"], capsys)
    assert code == 3, err
    assert "  - edge removed post_rms_reduce -> silu (explicit): 34 (17 per layer in 2 layer(s))" in out
    assert "diagnostics: 1 new, 0 resolved; errors: new 1" in out
    assert "error[PG100]: race: 'silu[n=0]@L=0' reads inv_rms_tile" in out
    # a side that does not plan at all: its diagnostics, nothing to compare, still 3
    broken = tmp_path / "specs" / "broken.pgl"
    broken.write_text('include "qwen3_14b.pgl"\nentry e { at x deps( }\n')
    code, out, err = run_cli(["diff", str(HEAD_SPEC), str(broken)], capsys)
    assert code == 3 and out == ""
    assert "error[PG001 syntax-error]" in err and f"pgraph: diff: {broken} did not plan" in err


def test_a_side_define_of_a_deps_json_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capture = tmp_path / "x.json"
    capture.write_text('{"tasks": [], "tensors": [], "edges": []}')
    code, _, err = run_cli(["diff", str(capture), str(HEAD_SPEC), "--a-define", "NUM_LAYERS=2"], capsys)
    assert code == 2 and f"--a-define overrides a constant of a .pgl side; {capture} is a deps.json" in err


# ---- import: the format's quirks and malformed input ----------------------------------------------


QUIRKY = """{"tasks": [
{"task_id": 8589934592, "scope": "auto", "early_dispatch": true, "kernel_ids": [0, -1, -1], "block_num": 2,
 "args": [{"idx": 0, "type": "OUTPUT_EXISTING", "tensor_id": "7", "dtype": "FLOAT32", "shape": [4, 8],
           "start_offset": 0, "strides": [8, 1]}]},
{"task_id": "8589934593", "scope": "auto", "early_dispatch": false, "kernel_ids": [-1, 1, -1], "block_num": 1,
 "args": []},
{"task_id": "8589934593", "scope": "auto", "early_dispatch": false, "kernel_ids": [-1, 1, -1], "block_num": 1,
 "args": []}],
"tensors": [{"tensor_id": "7", "buffer_addr": "4294967296", "version": 0, "dtype": "FLOAT32", "buffer_numel": 32}],
"edges": [
""" + """{"pred": "8589934592", "succ": "8589934593", "arg": -1, "source": "explicit", "flags": ["wait", "retain"]},
""" * 65 + """{"pred": "8589934000", "succ": "8589934592", "arg": 0, "source": "creator", "flags": ["wait", "retain"],
 "tensor_id": "7", "consumer_dtype": "FLOAT32", "consumer_shape": [4, 8], "consumer_start_offset": 0,
 "consumer_strides": [8, 1]}]}
"""


def test_import_tolerates_the_quirks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An integer id, an overflow record (the same task again: its 65 explicit deps do not fit the
    64 a record holds inline), a (pred, succ) pair repeated 65 times (64 repeats) and an alloc
    producer absent from tasks[] (reference §6.1)."""
    g = parse(QUIRKY)
    assert len(g.tasks) == 2 and g.tasks[0].ring == 2 and g.tasks[1].local == 1
    q = g.quirks
    assert (q.integer_ids, q.overflow_records, q.duplicate_pairs, q.alloc_preds) == (1, 1, 64, 1)
    path = tmp_path / "q.json"
    path.write_text(QUIRKY)
    code, out, err = run_cli(["import", str(path), "--tasks"], capsys)
    assert code == 0, err
    assert "2 tasks (2 compute, 0 dummies), 3 blocks, 1 tensors" in out
    assert "#1 2:1 auto kernel -1,1,-1 blocks 1 args 0 <- 2:0 explicit x65" in out
    code, out, _ = run_cli(["import", str(path), "--format", "json", "-o", str(tmp_path / "n.json")], capsys)
    assert code == 0 and parse((tmp_path / "n.json").read_text()).tasks == g.tasks
    # a deps.json diffed against its normalised self: no difference
    code, out, _ = run_cli(["diff", str(path), str(tmp_path / "n.json")], capsys)
    assert code == 0 and "no difference" in out


@pytest.mark.parametrize(("text", "message"), [
    ("{", "line 1 col 2: not valid JSON"),
    ("[]", "expected an object"),
    ('{"tasks": []}', "edges: missing"),
    ('{"tasks": [{"task_id": "x"}], "edges": []}', "tasks[0]: missing field 'kernel_ids'"),
    ('{"tasks": [{"task_id": "x", "scope": "auto", "early_dispatch": true, "kernel_ids": [0, -1, -1], '
     '"block_num": 1, "args": []}], "edges": []}', "tasks[0].task_id: expected a decimal id, found 'x'"),
    ('{"tasks": [{"task_id": "1", "scope": "auto", "early_dispatch": 1, "kernel_ids": [0, -1, -1], '
     '"block_num": 1, "args": []}], "edges": []}', "tasks[0].early_dispatch: expected true or false"),
    ('{"tasks": [], "edges": [{"pred": "1", "succ": "2", "arg": -1, "source": "explicit", "flags": []}]}',
     "edges[0].succ: task 2 is not in tasks[]"),
    ('{"tasks": [], "edges": [{"pred": "1", "succ": "2", "arg": 0, "source": "magic", "flags": []}]}',
     "edges[0].source: 'magic' is not one of"),
])
def test_malformed_deps_json_is_a_usage_error(text: str, message: str, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text)
    for argv in (["import", str(path)], ["diff", str(path), str(path)]):
        code, _, err = run_cli(argv, capsys)
        assert code == 2 and message in err and "Traceback" not in err and "internal error" not in err, err


def test_export_cli_writes_atomically_and_deterministically(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "a" / "deps.json"
    code, text, err = run_cli(["export", str(HEAD_SPEC), "--layers", "1", "--deps-json", str(out)], capsys)
    assert code == 0, err
    first = out.read_bytes()
    assert run_cli(["export", str(HEAD_SPEC), "--layers", "1", "--deps-json", str(out)], capsys)[0] == 0
    assert out.read_bytes() == first and [p.name for p in out.parent.iterdir()] == ["deps.json"]
    # one layer: 277 submits + the entry's 5 (§2.4); no unreadable-output traceback either
    assert len(parse(first.decode()).tasks) == 282
    code, _, err = run_cli(["export", str(HEAD_SPEC), "--deps-json", str(tmp_path)], capsys)
    assert code == 2 and "cannot write" in err
