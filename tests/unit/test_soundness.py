"""Issue 10's single-file cases: each accepted program builds into code whose recorded graph is the
planner's, and each race the runtime would run into is reported, windowed and `--full`.

The programs are the defects an adversarial sweep found at 0cf58ea (each fails on that
revision, as the comments say); the recorded graph comes from the C++ recording runtime
(tests/cpp), compared by `tests.unit.test_a2a3.compare`; expected verdicts and orders are
written by hand from the language reference.
"""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from pgraph.backends.a2a3 import build
from pgraph.backends.target import BuildInfo
from pgraph.diagnostics import DiagnosticBag, Severity
from pgraph.pipeline import Options, plan_program
from tests.differential.harness import _compile_run
from tests.unit.test_a2a3 import compare, config_module, kernel_names, parse_record

HEAD = """
tensor x : f32[4, 8] external
tensor y : f32[4, 8] external
kernel fill aiv (dst : out f32)
kernel copy aiv (src : in f32, dst : out f32)
kernel bump aiv (a : inout f32)
"""


def spec(tmp_path: Path, body: str, name: str = "case.pgl") -> Path:
    path = tmp_path / name
    path.write_text(HEAD + body, encoding="utf-8")
    return path


def errors(path: Path, full: bool) -> set[str]:
    _, bag = plan_program(path, Options(full=full))
    return {d.code for d in bag.items if d.level is Severity.ERROR}


def recorded(path: Path, objs: list[Path], work: Path):
    """(plan --full, record) after checking the recorded graph equals the planner's."""
    plan_w, bag = plan_program(path, Options())
    plan_f, _ = plan_program(path, Options(full=True))
    assert plan_w is not None and plan_f is not None
    files = build(attrs.evolve(plan_w, bag=DiagnosticBag()), BuildInfo(str(path), ""))
    rec = parse_record(_compile_run(files, plan_f.program, objs, work))
    compare(plan_f.program, plan_f.graph, rec, kernel_names(config_module(files, work / "out")))
    return plan_f, rec


@pytest.fixture(scope="module")
def objs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    from tests.differential.harness import runtime_objects

    return runtime_objects(tmp_path_factory.mktemp("soundness_rt"))


# ---- races the planner used to accept ---------------------------------------------------------


def test_spmd_block_reads_what_another_block_writes(tmp_path: Path) -> None:
    """Block i reads row i + 1, which block i + 1 writes: the blocks run at once (0cf58ea: accepted,
    even with --full, while the same body as `parallel` was a race)."""
    path = spec(tmp_path, """
tensor t : f32[5, 8] external
kernel shift aiv (src : in f32, dst : out f32)
entry e { spmd s[i in 0..4] { call shift(t[i + 1, :], t[i, :]) } }
""")
    assert errors(path, False) == errors(path, True) == {"PG102"}


def test_loop_iteration_two_meets_a_task_outside_the_loop(tmp_path: Path) -> None:
    """Iteration L = 2 writes columns 0..4, as `outside` does; the window expands L = 0, 1 only
    (0cf58ea: accepted windowed, a race with --full)."""
    path = spec(tmp_path, """
tensor g : f32[4, 16] external
entry e {
  manual scope {
    at outside { call fill(g[:, 0 +: 4]) }
    for L in 0..4 {
      at inloop { call fill(g[:, ((L + 2) % 4) * 4 +: 4]) }
    }
  }
}
""")
    assert errors(path, False) == errors(path, True) == {"PG100"}


def test_reader_after_the_loop_waits_on_the_last_iteration_only(tmp_path: Path) -> None:
    """`rd` names `wr`, so it waits on wr@L=3, and reads the row wr@L=2 wrote (0cf58ea: accepted
    windowed)."""
    path = spec(tmp_path, """
tensor g : f32[4, 8] external
entry e {
  manual scope {
    for L in 0..4 {
      at wr { call fill(g[L, :]) }
    }
    at rd deps(wr) { call copy(g[2, :], y) }
  }
}
""")
    assert errors(path, False) == errors(path, True) == {"PG100"}


def test_empty_clause_region_is_no_race(tmp_path: Path) -> None:
    """A `writes x[2:2, :]` clause touches nothing: no race with a reader of x (0cf58ea: PG100)."""
    path = spec(tmp_path, """
entry e {
  manual scope {
    at w { writes x[2:2, :]
           call fill(x) }
    at r { call copy(x[2, :], y[0, :]) }
  }
}
""")
    assert errors(path, False) == errors(path, True) == set()


# ---- built code that did something else than the plan -----------------------------------------


def test_unscoped_loop_allocates_per_iteration(tmp_path: Path, objs: list[Path]) -> None:
    """`unscoped`: the body's tensor is allocated in the entry scope once per iteration (docs §8);
    0cf58ea's C++ allocated it once, so its reads and overwrites were unordered at run time."""
    path = spec(tmp_path, """
entry e {
  for i in 0..3 unscoped {
    tensor s : f32[4, 8]
    at w { call fill(s) }
    at r { call copy(s, y) }
  }
}
""")
    plan, rec = recorded(path, objs, tmp_path)
    kinds = [t["kind"] for t in rec.tasks]
    assert kinds == ["alloc", "compute", "compute"] * 3
    assert len({rec.args[i][0].addr for i, t in enumerate(rec.tasks) if t["kind"] == "compute"}) >= 3


def test_unscoped_loop_with_a_scope_keeps_its_order(tmp_path: Path, objs: list[Path]) -> None:
    """a, b (in a scope), c per iteration: a,b,c,a,b,c (0cf58ea emitted separate C++ loops:
    a,a,b,b,c,c)."""
    path = spec(tmp_path, """
entry e {
  for i in 0..2 unscoped {
    at a { call bump(x[i, :]) }
    auto scope { at b { call bump(x[i, :]) } }
    at c { call bump(x[i, :]) }
  }
}
""")
    plan, rec = recorded(path, objs, tmp_path)
    assert [i.dispatch for i in plan.graph.instances if i.kind != "alloc"] == ["a", "b", "c", "a", "b", "c"]


def test_loop_in_a_manual_scope_shares_one_buffer(tmp_path: Path, objs: list[Path]) -> None:
    """A tensor declared in a loop inside a manual scope is hoisted before the scope: one buffer
    for every iteration, so the iterations' unordered writes are a race (0cf58ea: one buffer per
    iteration in the plan, one in the C++)."""
    path = spec(tmp_path, """
entry e {
  manual scope {
    for i in 0..3 {
      tensor s : f32[4, 8]
      at w { call fill(s) }
    }
  }
}
""")
    assert errors(path, False) == errors(path, True) == {"PG100"}
    plan, rec = recorded(path, objs, tmp_path)
    assert [t["kind"] for t in rec.tasks] == ["alloc", "compute", "compute", "compute"]


def test_unused_tensor_is_allocated(tmp_path: Path, objs: list[Path]) -> None:
    """pypto allocates every tensor of a scope at its top, used or not; the plan counts that alloc
    (0cf58ea: the C++ submitted an alloc the plan did not have)."""
    path = spec(tmp_path, """
entry e {
  at a { call bump(x) }
  auto scope { tensor unused : f32[4, 8] }
}
""")
    plan, rec = recorded(path, objs, tmp_path)
    assert [t["kind"] for t in rec.tasks] == ["alloc", "compute"] or \
        [t["kind"] for t in rec.tasks] == ["compute", "alloc"]
    assert sum(1 for i in plan.graph.instances if i.kind == "alloc") == 1


def test_dummy_the_code_drops_is_not_counted(tmp_path: Path, objs: list[Path]) -> None:
    """Every dep of `d` selects an empty tile set: the guarded submit never runs; the plan has no
    such task (0cf58ea counted it)."""
    path = spec(tmp_path, """
entry e {
  manual scope {
    parallel p[i in 0..0] { call bump(x) }
    dummy d deps(p)
    at a deps(d) { call bump(y) }
  }
}
""")
    plan, rec = recorded(path, objs, tmp_path)
    assert [i.dispatch for i in plan.graph.instances if i.kind != "alloc"] == ["a"]
    _, bag = plan_program(path, Options())
    assert any(d.code == "PG104" and "invalid" in d.message for d in bag.items)


def test_single_taskid_named_twice_is_one_entry(tmp_path: Path, objs: list[Path]) -> None:
    """`deps(a, a, a)`: pypto appends each deduplicated edge once; plan and code agree on 1 entry."""
    path = spec(tmp_path, """
entry e { manual scope { at a { call bump(x) } at b deps(a, a, a) { call bump(x) } } }
""")
    plan, rec = recorded(path, objs, tmp_path)
    assert rec.tasks[-1]["deps"] == 1


def test_carry_over_tiles_with_an_empty_spmd_wave(tmp_path: Path, objs: list[Path]) -> None:
    """The `then` side has an empty SPMD wave: it holds no slot (0cf58ea read past the TaskId
    array: AddressSanitizer stack-buffer-overflow, elsewhere a spurious edge)."""
    path = spec(tmp_path, """
entry e {
  manual scope {
    at first { call bump(x) }
    for L in 0..3 carry prev = first then t {
      tiles t[i in 0..4] deps(prev) {
        call bump(x[i, :])
        wave run  i in 0..4 : parallel
        wave none i in 4..4 : spmd
      }
    }
  }
}
""")
    plan, rec = recorded(path, objs, tmp_path)
    # every iteration's 4 tasks wait on the previous iteration's 4 (carried), the first on `first`
    assert sum(t["deps"] for t in rec.tasks if t["kind"] == "compute") == 4 + 2 * 4 * 4


def test_windowed_inferred_edges_through_a_tensor_carry(tmp_path: Path) -> None:
    """Iteration lo writes the carry's INIT (x), which every later iteration reads by name: each
    of them gets a TensorMap edge from lo, not only the next one (0cf58ea: windowed counts
    differed from --full and from the runtime)."""
    path = spec(tmp_path, """
entry e {
  for L in 0..4 unscoped carry c = x then n {
    tensor n : f32[4, 8]
    at s { call copy(x, c) }
  }
}
""")
    from pgraph.backends.report import report_facts

    w, _ = plan_program(path, Options())
    f, _ = plan_program(path, Options(full=True))
    assert w is not None and f is not None
    assert report_facts(w)["summary"] == report_facts(f)["summary"]
    # s@0 writes x (OUTPUT_EXISTING: an entry that stays); s@1, s@2, s@3 read x: 3 inferred edges
    assert report_facts(f)["summary"]["inferred_edges"] == 3


def test_zero_size_argument_is_reported(tmp_path: Path) -> None:
    """An empty view as a kernel argument: PG114 (0cf58ea: accepted, the runtime model rejected it)."""
    path = spec(tmp_path, "entry e { at a { call fill(x[2:2, :]) } }")
    assert errors(path, False) == {"PG114"}


VIEW_OF_CARRY = """
view xf = x as [32]
view yf = y as [32]
kernel flat aiv (v : in f32[32])
entry main {
  at s0 { call fill(y) }
  for L in 0..3 carry p = s0 then f, cur = x then y%s {
    %s
    at s deps(p) { call copy(cur, y) }
    at f deps(s) { call flat(cf) }
  }
}
"""


def test_a_view_of_a_tensor_carry_says_so_and_its_hint_builds(tmp_path: Path) -> None:
    """docs/language.md promised views of a carry; the lowering said 'unknown tensor'. Now PG002
    names the carry, and the hint (carry the views) gives a program whose recorded graph is the plan's."""
    bad = spec(tmp_path, VIEW_OF_CARRY % ("", "view cf = cur as [32]"), "bad.pgl")
    _, bag = plan_program(bad, Options())
    errs = [d for d in bag.items if d.code.startswith("PG0")]
    assert bag.has_errors and [d.code for d in errs] == ["PG002"]
    assert "names tensor carry 'cur'" in errs[0].message
    assert errs[0].hint is not None and "`cf = x_v then y_v`" in errs[0].hint
    # the hint applied, with the views the spec already declares (xf, yf)
    good = spec(tmp_path, VIEW_OF_CARRY % (", cf = xf then yf", ""), "good.pgl")
    plan, bag = plan_program(good, Options())
    assert plan is not None and not bag.has_errors, [d.message for d in bag.items]
    # f@L=0 reads x through xf, f@L=1 and f@L=2 read y through yf
    reads = {i.label: {a.tensor for a in plan.graph.args[i.id]} for i in plan.graph.instances
             if i.label.startswith("f@")}
    assert reads == {"f@L=0": {"xf"}, "f@L=1": {"yf"}, "f@L=2": {"yf"}}, reads
    files = build(plan, BuildInfo(str(good)))
    cpp = next(t for p, t in files.items() if p.endswith(".cpp"))
    assert "ChipTensor cf = xf;" in cpp and "cf = yf;" in cpp
