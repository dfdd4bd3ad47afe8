"""deps.json: `pgraph export --deps-json` against the recording runtime's own deps.json writer.

The recording runtime (tests/cpp/recording_runtime.cpp, `recorder_write_deps_json`) is a C++
model of simpler's submit path that lists every edge as dep_gen does (reference
runtime_and_orchestration.md §6.1): one record per explicit dep entry, per creator argument, per
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
    # qwen3_14b_decode_layer.md §2.4 and test_a2a3's reference counts (10,604 compute + 481 dummies)
    assert len(g.tasks) == 10_604 + 481
