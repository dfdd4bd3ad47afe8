"""The language of calling interfaces: runtime dims and `dim`, kernel aliases and `kernels` tables,
a call per wave, `untouched`, scalar C types (docs/language.md §5.1, §6, §6.1, §10.1, §11).

Expected values are worked out by hand from the small specs below.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pgraph.backends.a2a3 import build
from pgraph.backends.target import BuildInfo
from pgraph.diagnostics import DiagnosticBag
from pgraph.expr import RuntimeDim
from pgraph.frontend.parser import parse_source
from pgraph.frontend.unparse import unparse
from pgraph.ir.queries import instance_env, kernel_at
from pgraph.pipeline import Options, plan_program
from pgraph.source import SourceFile

BASE = """\
const LAYERS = 4
const ROWS = 1024
tensor cache : bf16[runtime LAYERS * ROWS, 128] external
tensor table : i32[runtime 16 * 8] external
tensor slots : i32[16] external
tensor x : f32[16, 1024] external
tensor y : bf16[16, 1024] external
kernel tiling aiv (t : in i32, pages : scalar i32)
kernel append aiv (slots : in i32[16], cache : inout bf16, base : scalar i64)
kernel cast_slice aiv (x : in f32[16, 1024], y : inout bf16[16, 1024], col : scalar i64)
kernel cast_slice_0, cast_slice_1 = cast_slice
kernel cast_wide = cast_slice source "kernels/aiv/wide.cpp"
kernels casts = [cast_slice, cast_slice_0, cast_slice_1]
"""


def plan(tmp_path: Path, body: str, prelude: str = BASE, **kw: object):
    spec = tmp_path / "spec.pgl"
    spec.write_text(prelude + body)
    return plan_program(spec, Options(**kw))  # type: ignore[arg-type]


def codes(bag: DiagnosticBag) -> list[str]:
    return sorted(d.code for d in bag.items if d.level.value == "error")


def test_dim_of_a_runtime_dimension_is_planned_at_its_value_and_read_at_run_time(tmp_path: Path) -> None:
    p, bag = plan(tmp_path, """
entry e {
  let pages = dim(table, 0) / 16
  at t { call tiling(table, pages) }
  for L in 0..LAYERS {
    at w {
      writes cache[L * ROWS +: ROWS, :] indirect(slots)
      call append(slots, cache, L * (dim(cache, 0) / LAYERS))
    }
  }
}
""")
    assert p is not None and not bag.has_errors, [d.message for d in bag.items]
    program = p.program
    assert program.tensors["cache"].shape == (4096, 128) and program.tensors["cache"].runtime == (True, False)
    t = program.dispatch("t")
    scalar = t.args[1].scalar
    assert isinstance(scalar.left, RuntimeDim) and scalar.left.value == 128  # type: ignore[union-attr]
    files = build(p, BuildInfo("spec.pgl", ""))
    cpp = files["orchestration/e.cpp"]
    assert "const int64_t table_dim0 = (int64_t)orch_args.tensor(1).ref().shapes[0];" in cpp
    assert "const int64_t cache_dim0 = (int64_t)orch_args.tensor(0).ref().shapes[0];" in cpp
    assert "add_scalar((int32_t)(table_dim0 / 16));" in cpp           # i32 parameter: an int32 cast
    assert "add_scalar((int64_t)(L * (cache_dim0 / 4)));" in cpp
    assert "4096" not in cpp and "128)" not in cpp                     # no planning value is baked in


@pytest.mark.parametrize("body,what", [
    ("entry e { parallel p[i in 0..dim(cache, 0) / 1024] { writes cache indirect(slots) "
     "call append(slots, cache, 0) } }", "index bound"),
    ("const N = dim(cache, 0)\nentry e { }", "constant"),
    ("entry e { assert dim(table, 0) > 0 }", "assert"),
    ("entry e { parallel p[i in 0..3] { writes cache indirect(slots) call append(slots, cache, 0) } "
     "at q deps(p[dim(table, 0) / 64]) { writes cache indirect(slots) call append(slots, cache, 0) } }", "dep"),
    ("entry e { tensor t : f32[runtime 4] }", "allocation"),
    ("entry e { at t { call tiling(table, dim(table, 1)) } }", "axis"),
    ("entry e { at t { call tiling(table, dim(table)) } }", "form"),
    ("entry e { parallel p[c in 0..3] { reads x writes y call casts[dim(table, 0) / 128 + c - 1](x, y, 0) } }",
     "kernel index"),
])
def test_runtime_dims_where_a_planned_value_is_needed_are_pg038(tmp_path: Path, body: str, what: str) -> None:
    _p, bag = plan(tmp_path, body)
    assert "PG038" in codes(bag), (what, [d.message for d in bag.items])


def test_kernel_table_runs_one_member_per_task_with_its_own_func_id(tmp_path: Path) -> None:
    p, bag = plan(tmp_path, """
entry e {
  manual scope {
    parallel cast[c in 0..3] {
      reads x[:, c * 256 +: 256]
      writes y[:, c * 256 +: 256]
      call casts[2 - c](x, y, c * 256)
    }
    at wide deps(cast) { reads x writes y call cast_wide(x, y, 0) }
  }
}
""", full=True)
    assert p is not None and not bag.has_errors, [d.message for d in bag.items]
    program = p.program
    d = program.dispatch("cast")
    ran = [kernel_at(program, d, instance_env(program, d, i.iters, i.index))
           for i in p.graph.instances if i.dispatch == "cast"]
    assert ran == ["cast_slice_1", "cast_slice_0", "cast_slice"]
    alias = program.kernels["cast_slice_0"]
    assert (alias.body, alias.params, alias.core) == ("cast_slice", program.kernels["cast_slice"].params, "aiv")
    files = build(p, BuildInfo("spec.pgl", ""))
    cpp = files["orchestration/e.cpp"]
    # first use in submission order: c = 0 runs cast_slice_1 (fid 0), c = 1 cast_slice_0 (1), c = 2 cast_slice (2)
    assert "const int32_t params_t0_fids[3] = {2, 1, 0};  // cast_slice, cast_slice_0, cast_slice_1" in cpp
    assert "rt_submit_aiv_task(params_t0_fids[2 - c], params_t0);" in cpp
    cfg = files["kernel_config.py"]
    assert '"kernels" / "aiv" / "cast_slice_0.cpp"' in cfg and '"kernels" / "aiv" / "wide.cpp"' in cfg


@pytest.mark.parametrize("body", [
    # members with other signatures
    "kernels bad = [cast_slice, tiling]\nentry e { }",
    # a table called without an index, a kernel with one
    "entry e { at t { reads x writes y call casts(x, y, 0) } }",
    "entry e { at t { reads x writes y call cast_slice[0](x, y, 0) } }",
    # an SPMD block index picks the kernel
    "entry e { spmd s[b in 0..3] { reads x writes y call casts[b](x, y, 0) } }",
    # an index past the table
    "entry e { parallel p[c in 0..4] { reads x writes y call casts[c](x, y, 0) } }",
])
def test_kernel_table_misuse_is_pg039(tmp_path: Path, body: str) -> None:
    _p, bag = plan(tmp_path, body)
    assert "PG039" in codes(bag), [d.message for d in bag.items]


def test_alias_of_an_unknown_kernel_and_a_source_for_several_names(tmp_path: Path) -> None:
    _p, bag = plan(tmp_path, "kernel k9 = nothing\nentry e { }")
    assert codes(bag) == ["PG002"]
    _p, bag = plan(tmp_path, 'kernel k8, k9 = cast_slice source "a.cpp"\nentry e { }')
    assert codes(bag) == ["PG019"]


def test_a_call_per_wave(tmp_path: Path) -> None:
    p, bag = plan(tmp_path, """
entry e {
  manual scope {
    tiles cast[c in 0..4] {
      reads x[:, c * 256 +: 256]
      writes y[:, c * 256 +: 256]
      wave first c in 0..1 : parallel call cast_wide(x, y, c * 256)
      wave rest c in 1..4 : spmd call cast_slice(x, y, 256)
    }
  }
}
""")
    assert p is not None and not bag.has_errors, [d.message for d in bag.items]
    assert [p.program.dispatch(n).kernel for n in ("cast.first", "cast.rest")] == ["cast_wide", "cast_slice"]
    # both a body call and a wave call; a wave without one when another has one
    _p, bag = plan(tmp_path, """
entry e { tiles t[c in 0..2] { reads x writes y call cast_slice(x, y, 0)
  wave a c in 0..1 : parallel call cast_wide(x, y, 0)
  wave b c in 1..2 : parallel } }""")
    assert "PG003" in codes(bag)
    _p, bag = plan(tmp_path, """
entry e { tiles t[c in 0..2] { reads x writes y
  wave a c in 0..1 : parallel call cast_wide(x, y, 0)
  wave b c in 1..2 : parallel } }""")
    assert codes(bag) == ["PG028"]


def test_untouched_arguments(tmp_path: Path) -> None:
    p, bag = plan(tmp_path, "entry e { at t { untouched x writes y call cast_slice(x, y, 0) } }")
    assert p is not None and not bag.has_errors
    d = p.program.dispatch("t")
    assert [(a.kind, a.region.tensor) for a in d.accesses] == [("write", "y")]
    _p, bag = plan(tmp_path, "entry e { at t { untouched slots writes y call cast_slice(x, y, 0) } }")
    assert codes(bag) == ["PG010"]
    _p, bag = plan(tmp_path, "entry e { at t { untouched x reads x writes y call cast_slice(x, y, 0) } }")
    assert codes(bag) == ["PG010"]


def test_a_scalar_of_a_block_index_is_pg040(tmp_path: Path) -> None:
    _p, bag = plan(tmp_path, "entry e { spmd s[b in 0..4] { reads x writes y call cast_slice(x, y, b * 256) } }")
    assert codes(bag) == ["PG040"]


def test_the_new_constructs_unparse_to_text_that_parses_back(tmp_path: Path) -> None:
    text = BASE + 'extern kernel ex aiv source "e.cpp" includes "inc/a", "inc/b" (t : in i32)\n' + """
entry e {
  parallel p[c in 0..3] {
    untouched slots
    reads x
    writes y
    call casts[c](x, y, dim(table, 0))
  }
  tiles t[c in 0..2] {
    reads x
    writes y
    wave a c in 0..1 : parallel call cast_wide(x, y, 0)
    wave b c in 1..2 : spmd call cast_slice(x, y, 0)
  }
}
"""
    bag = DiagnosticBag()
    first = parse_source(SourceFile("a.pgl", text), bag)
    assert first is not None, [d.message for d in bag.items]
    again = unparse(first)
    second = parse_source(SourceFile("b.pgl", again), bag)
    assert second is not None and unparse(second) == again
    for line in ("tensor cache : bf16[runtime LAYERS * ROWS, 128] external", "kernel cast_slice_0, cast_slice_1 = cast_slice",
                 'kernel cast_wide = cast_slice source "kernels/aiv/wide.cpp"',
                 "kernels casts = [cast_slice, cast_slice_0, cast_slice_1]", "untouched slots",
                 "call casts[c](x, y, dim(table, 0))", "wave a c in 0..1 : parallel call cast_wide(x, y, 0)",
                 'extern kernel ex aiv source "e.cpp" includes "inc/a", "inc/b" (t : in i32)'):
        assert line in again, line
