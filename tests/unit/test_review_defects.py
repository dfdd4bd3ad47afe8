"""Regression tests for the defects a review and a new user found (issue 9), one per defect.

Expected texts are written from the spec in each test (rows, columns, names), not copied
from pgraph's output.
"""

from __future__ import annotations

from pathlib import Path

from pgraph.diagnostics import Diagnostic, DiagnosticBag, Severity
from pgraph.pipeline import Options, plan_program

HDR = """\
tensor x : f32[16, 64] external
kernel rows8 aiv (a : out f32[8, 64])
kernel rows10 aiv (a : out f32[10, 64])
kernel all aiv (a : inout f32[16, 64])
"""


def run(tmp_path: Path, text: str, **kw: object) -> DiagnosticBag:
    spec = tmp_path / "s.pgl"
    spec.write_text(text, encoding="utf-8")
    _, bag = plan_program(spec, Options(**kw))  # type: ignore[arg-type]
    return bag


def only(bag: DiagnosticBag, code: str) -> Diagnostic:
    found = [d for d in bag.items if d.code == code]
    assert len(found) == 1, [(d.code, d.message) for d in bag.items]
    return found[0]


def test_race_message_shows_both_regions_and_the_overlap(tmp_path: Path) -> None:
    """A writes rows 0..8, B rows 6..16: the message said "B writes x[0:8, ...]" (A's box)."""
    bag = run(tmp_path, HDR + "entry e {\n  manual scope {\n    at a { call rows8(x[0 +: 8, :]) }\n"
                              "    at b { call rows10(x[6 +: 10, :]) }\n  }\n}\n")
    msg = only(bag, "PG100").message
    assert "'b' writes x[6:16, 0:64]" in msg
    assert "'a' writes x[0:8, 0:64]" in msg
    assert "(overlap x[6:8, 0:64])" in msg


def test_race_between_tasks_of_one_declaration_does_not_hint_a_self_dep(tmp_path: Path) -> None:
    bag = run(tmp_path, HDR + "entry e {\n  manual scope {\n    parallel p[i in 0..2] { call rows10(x[i*6 +: 10, :]) }\n"
                              "  }\n}\n")
    hint = only(bag, "PG100").hint or ""
    assert "to the deps of 'p'" not in hint
    assert "never ordered among themselves" in hint


def test_race_across_iterations_does_not_hint_a_self_dep(tmp_path: Path) -> None:
    bag = run(tmp_path, HDR + "entry e {\n  manual scope {\n    for L in 0..3 {\n      at w { call all(x) }\n"
                              "    }\n  }\n}\n")
    hint = only(bag, "PG100").hint or ""
    assert "to the deps of 'w'" not in hint
    assert "carry prev = <a task before the loop> then w" in hint


def test_boundary_race_on_an_earlier_iteration_does_not_repeat_the_applied_fix(tmp_path: Path) -> None:
    """The reader after the loop already names the loop's task: that waits on the last
    iteration only, so 'add `w` to the deps' would repeat what is written."""
    bag = run(tmp_path, HDR + "kernel rows4 aiv (a : out f32[4, 64])\nkernel rd aiv (a : in f32[16, 64])\n"
                              "entry e {\n  taskids w\n  for L in 0..3 {\n"
                              "    manual scope {\n      at w { call rows4(x[L*4 +: 4, :]) }\n    }\n  }\n"
                              "  at r deps(w) { call rd(x) }\n}\n")
    diags = [d for d in bag.items if d.code in ("PG100", "PG101")]
    assert diags, [(d.code, d.message) for d in bag.items]
    for d in diags:
        assert "add `w` to the deps" not in (d.hint or "")
        assert "already depends on 'w'" in (d.hint or "")


def test_sync_start_on_at_and_parallel_and_repeated_flags(tmp_path: Path) -> None:
    text = HDR + """kernel cols aiv (a : out f32[16, 16])
entry e {
  at one sync_start { call all(x) }
  parallel many[c in 0..4] sync_start deps(one) { call cols(x[:, c*16 +: 16]) }
}
"""
    bag = run(tmp_path, text)
    assert sorted((d.span.line, d.level) for d in bag.items if d.code == "PG036") == [
        (7, Severity.ERROR), (8, Severity.ERROR)]
    bag = run(tmp_path, HDR + "entry e {\n  at one early early { call all(x) }\n}\n")
    d = only(bag, "PG036")
    assert d.level is Severity.WARNING and "given twice" in d.message


def test_wave_flag_repeating_the_declaration_and_sync_start_on_a_parallel_wave(tmp_path: Path) -> None:
    text = HDR + """kernel cols aiv (a : out f32[16, 16])
entry e {
  tiles t[c in 0..4] early {
    call cols(x[:, c*16 +: 16])
    wave a c in 0..2 : parallel early sync_start
    wave b c in 2..4 : spmd
  }
}
"""
    bag = run(tmp_path, text)
    found = sorted((d.level.value, d.message.split(":")[0]) for d in bag.items if d.code == "PG036")
    assert found == [("error", "`sync_start` on `parallel` wave 'a'"),
                     ("warning", "wave 'a' repeats the `early` flag of its declaration 't'")]


def test_wave_coverage_names_a_missing_tile(tmp_path: Path) -> None:
    text = HDR + """kernel cell aiv (a : out f32[4, 16])
entry e {
  tiles t[r in 0..4, c in 0..4] {
    call cell(x[r*4 +: 4, c*16 +: 16])
    wave a r in 0..2 : parallel
    wave b r in 2..4, c in 0..3 : parallel
  }
}
"""
    msg = only(run(tmp_path, text), "PG021").message
    assert "cover 14 of its 16 tiles" in msg        # 2*4 + 2*3 = 14 of 4*4
    assert "no wave takes t[r=2, c=3]" in msg       # the first uncovered tile, row-major


def test_external_tensor_inside_the_entry_is_an_error(tmp_path: Path) -> None:
    """It silently became an orchestration argument; docs/language.md says a tensor declared in
    a scope is an allocation."""
    bag = run(tmp_path, HDR + "entry e {\n  tensor y : f32[16, 64] external\n  at t { call all(y) }\n}\n")
    d = only(bag, "PG019")
    assert d.span is not None and d.span.line == 6 and "declared `external` inside a block" in d.message


def test_unit_suffix_is_reported_at_the_suffix(tmp_path: Path) -> None:
    bag = run(tmp_path, HDR + "target a2a3 { heap = 256 MiB }\ncost all = 12 us\nentry e { at t { call all(x) } }\n")
    got = sorted((d.span.line, d.span.col, d.hint) for d in bag.items if d.code == "PG001")
    assert got == [(5, 26, "limits are plain numbers and the heap is in bytes: write `heap = 256 * 1048576` "
                           "(MiB in bytes)"),
                   (6, 15, "costs are plain numbers of µs: write `cost all = 12`")]


def test_missing_final_brace_names_the_open_block(tmp_path: Path) -> None:
    text = HDR + "entry e {\n  manual scope {\n    at t { call all(x) }\n  }\n"
    d = only(run(tmp_path, text), "PG001")
    assert [(n.span.line, n.span.col) for n in d.notes if n.span] == [(5, 9)]   # `entry e {`
    assert "`entry e ...`" in d.notes[0].message


def test_funnel_never_hints_a_dep_of_a_declaration_on_itself(tmp_path: Path) -> None:
    """p[0]'s 8 consumers all wait on p[1] too: routing p into p is no fix (PG116 said
    "make 'p' depend on 'p'")."""
    text = HDR + """kernel one aiv (a : out f32[1, 64])
kernel rd aiv (a : in f32[16, 64])
entry e {
  manual scope {
    parallel p[i in 0..2] { call one(x[i +: 1, :]) }
    parallel c[j in 0..8] deps(p) { call rd(x) }
  }
}
"""
    bag = run(tmp_path, text)
    assert not bag.has_errors, [d.message for d in bag.items]
    assert not [d for d in bag.items if d.code == "PG116" and "depend on 'p'" in (d.hint or "")]


def test_plan_json_is_identical_across_processes_and_hash_seeds(tmp_path: Path) -> None:
    import subprocess
    import sys

    from tests.conftest import HEAD_SPEC, KEEP_ENV, ROOT

    outs = set()
    for seed in ("0", "7", "99"):
        run = subprocess.run([sys.executable, "-m", "pgraph", "plan", str(HEAD_SPEC.relative_to(ROOT)), "--format",
                              "json"], capture_output=True, text=True, cwd=ROOT, check=True,
                             env={"PYTHONHASHSEED": seed, "PATH": "/usr/bin:/bin", **KEEP_ENV})
        outs.add(run.stdout)
    assert len(outs) == 1


def test_a_failed_let_is_reported_once_not_at_every_use(tmp_path: Path) -> None:
    """A misspelt constant in a `let` is one PG002 at the `let`; the uses of the let's name
    (in a later let and in a region) are not reported as undefined too (new-user report)."""
    text = HDR + ("const ROWS = 8\nentry e {\n  let n = ROWZ\n  let m = n * 2\n"
                  "  at a { call rows8(x[n +: 8, :]) }\n}\n")
    bag = run(tmp_path, text)
    errors = [(d.code, d.message, d.span.line if d.span else None) for d in bag.items if d.level is Severity.ERROR]
    assert errors == [("PG002", "'ROWZ' is not defined here", 7)]
