"""`pgraph fix` (pgraph.commands.fix), the merging of fixes, and hints that name only structure the spec has.

Expected texts are written here by hand from the specs below (which edit the fix must make),
never copied from pgraph's output.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pgraph.cli import main
from pgraph.diagnostics import Edit, Fix, apply_edits, merge_fixes
from pgraph.pipeline import plan_program
from pgraph.plan.fixes import shift_text
from pgraph.source import SourceFile, Span

#: one producer writes three tensors, one consumer reads them, in a manual scope with no dep:
#: three races (one per tensor), each fixed by `deps(seed) ` before the consumer's body
THREE_RACES = """\
tensor a : f32[16, 64] external
tensor b : f32[16, 64] external
tensor c : f32[16, 64] external
tensor y : f32[16, 64] external
kernel zero3 aiv (a : out f32[16, 64], b : out f32[16, 64], c : out f32[16, 64])
kernel read3 aiv (a : in f32[16, 64], b : in f32[16, 64], c : in f32[16, 64], y : out f32[16, 64])
entry e {
  manual scope {
    at seed { call zero3(a, b, c) }
    at use { call read3(a, b, c, y) }
  }
}
"""


def write(tmp_path: Path, text: str, name: str = "spec.pgl") -> Path:
    (tmp_path / "pgraph.toml").write_text("", encoding="utf-8")
    spec = tmp_path / name
    spec.write_bytes(text.encode("utf-8"))
    return spec


def codes(spec: Path) -> list[str]:
    _, bag = plan_program(spec)
    return sorted(d.code for d in bag.items if d.level.value != "note")


# ---- merging -----------------------------------------------------------------------------------------------

def _file(text: str = "at x { }\n") -> SourceFile:
    return SourceFile("m.pgl", text, Path("/nonexistent/m.pgl"))


def _insert(f: SourceFile, col: int, text: str) -> Fix:
    return Fix((Edit(Span(f, 1, col, 1, col), text),))


def test_identical_inserts_at_one_position_are_made_once() -> None:
    f = _file()
    edits, skipped = merge_fixes([_insert(f, 6, "deps(seed) ")] * 3)
    assert skipped == [] and apply_edits(f.text, edits) == "at x deps(seed) { }\n"


def test_different_deps_at_one_position_become_one_clause() -> None:
    f = _file()
    edits, _ = merge_fixes([_insert(f, 6, "deps(a) "), _insert(f, 6, "deps(b) "), _insert(f, 6, "deps(a) ")])
    assert apply_edits(f.text, edits) == "at x deps(a, b) { }\n"
    g = _file("at x deps(p) { }\n")
    edits, _ = merge_fixes([_insert(g, 12, ", a"), _insert(g, 12, ", b")])
    assert apply_edits(g.text, edits) == "at x deps(p, a, b) { }\n"


def test_an_overlapping_fix_is_left_whole_for_another_run() -> None:
    f = _file("at x early sync_start { }\n")
    first = Fix((Edit(Span(f, 1, 6, 1, 11), "late"),))
    second = Fix((Edit(Span(f, 1, 8, 1, 23), ""), Edit(Span(f, 1, 1, 1, 1), "# x\n")))
    edits, skipped = merge_fixes([first, second])
    assert skipped == [1]
    assert apply_edits(f.text, edits) == "at x late sync_start { }\n"  # nothing of the second went in


@pytest.mark.parametrize(("text", "delta", "want"), [
    ("CAST_TILES - 1", 1, "CAST_TILES"), ("CAST_TILES", 1, "CAST_TILES + 1"), ("c*CAST_TILES + 1", -1, "c*CAST_TILES"),
    ("9", 1, "10"), ("N - 2", 1, "N - 1"), ("a < b ? 1 : 2", 1, "(a < b ? 1 : 2) + 1"), ("x", -2, "x - 2"),
])
def test_shift_text(text: str, delta: int, want: str) -> None:
    assert shift_text(text, delta) == want


# ---- the command -------------------------------------------------------------------------------------------

def test_three_races_fixed_by_one_dep(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = write(tmp_path, THREE_RACES)
    assert codes(spec) == ["PG100", "PG100", "PG100"]
    assert main(["fix", str(spec)]) == 0
    text = spec.read_text(encoding="utf-8")
    assert "    at use deps(seed) { call read3(a, b, c, y) }\n" in text
    assert text.count("deps(") == 1
    assert codes(spec) == []
    assert "fixed 3 diagnostic(s) (PG100 x3)" in capsys.readouterr().err


def test_dry_run_prints_a_diff_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = write(tmp_path, THREE_RACES)
    before = spec.read_bytes()
    assert main(["fix", str(spec), "--dry-run"]) == 0
    out = capsys.readouterr()
    assert spec.read_bytes() == before
    assert "-    at use { call read3(a, b, c, y) }\n+    at use deps(seed) { call read3(a, b, c, y) }\n" in out.out
    assert "would fix 3 diagnostic(s)" in out.err


def test_code_filter_and_exit_codes(tmp_path: Path) -> None:
    # a race (fixable) and a misspelt kernel in a dep-free task (PG002, fixable by respelling)
    spec = write(tmp_path, THREE_RACES.replace("    at use {", "    at other { call zero3(a, b, c) }\n    at use {")
                 .replace("at other { call zero3", "at other { call zeor3"))
    assert main(["fix", str(spec), "--code", "PG100", "--dry-run"]) == 1  # PG002 remains: errors, exit 1
    assert main(["fix", str(spec), "--code", "undefined-name"]) == 1  # the slug; the races remain
    assert "call zero3(a, b, c) }\n    at use {" in spec.read_text(encoding="utf-8")
    assert main(["fix", str(spec), "--code", "PG999"]) == 2


def test_nothing_to_fix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = write(tmp_path, THREE_RACES.replace("call read3(a, b, c, y)", "call read3(a, b, c)"), "bad.pgl")  # PG009
    before = bad.read_bytes()
    assert main(["fix", str(bad)]) == 1
    assert bad.read_bytes() == before
    assert "nothing to fix" in capsys.readouterr().err
    good = write(tmp_path, THREE_RACES.replace("at use {", "at use deps(seed) {"), "good.pgl")
    assert main(["fix", str(good)]) == 0


def test_crlf_and_byte_order_mark_are_kept(tmp_path: Path) -> None:
    spec = write(tmp_path, "\ufeff" + THREE_RACES.replace("\n", "\r\n"))
    assert main(["fix", str(spec)]) == 0
    raw = spec.read_bytes()
    assert raw.startswith(b"\xef\xbb\xbf")
    assert b"    at use deps(seed) { call read3(a, b, c, y) }\r\n" in raw
    assert b"\n" not in raw.replace(b"\r\n", b"")


def test_an_unreadable_spec_is_a_usage_error(tmp_path: Path) -> None:
    assert main(["fix", str(tmp_path / "missing.pgl")]) == 2


# ---- hints that name structure ---------------------------------------------------------------------------

PG109_NO_LOOP = """\
target a2a3 { task_window = 8 }
tensor out : f32[16, 80] external
kernel zero aiv (acc : out f32[16, 8])
entry e {
  parallel fill[i in 0..10] { call zero(out[:, i*8 +: 8]) }
}
"""


def test_pg109_names_a_loop_body_only_where_a_loop_shares_the_scope(tmp_path: Path) -> None:
    _, bag = plan_program(write(tmp_path, PG109_NO_LOOP, "a.pgl"))
    (d,) = [d for d in bag.items if d.code == "PG109"]
    assert "loop" not in (d.hint or "")
    looped = PG109_NO_LOOP.replace("parallel fill[i in 0..10] { call zero(out[:, i*8 +: 8]) }",
                                   "for j in 0..10 unscoped { at fill { call zero(out[:, j*8 +: 8]) } }")
    _, bag = plan_program(write(tmp_path, looped, "b.pgl"))
    (d,) = [d for d in bag.items if d.code == "PG109"]
    assert "the loop over `j`" in (d.hint or "") and "unscoped" in (d.hint or "")


def test_pg003_renames_the_second_kernel_and_not_a_task(tmp_path: Path) -> None:
    kernels = THREE_RACES.replace("kernel read3", "kernel zero3 aiv (a : out f32[16, 64])\nkernel read3")
    spec = write(tmp_path, kernels, "k.pgl")
    _, bag = plan_program(spec)
    (d,) = [d for d in bag.items if d.code == "PG003"]
    assert d.fix is not None and [e.text for e in d.fix.edits] == ["zero3_2"]
    tasks = THREE_RACES.replace("    at use {", "    at seed { call zero3(a, b, c) }\n    at use {")
    _, bag = plan_program(write(tmp_path, tasks, "t.pgl"))
    (d,) = [d for d in bag.items if d.code == "PG003"]
    assert d.fix is None and "`seed_2`" in (d.hint or "")  # renamed, it would come alive and race


ITERATIONS = """\
tensor out : f32[16, 64] external
kernel zero aiv (acc : out f32[16, 16])
entry e {
  manual scope {
    for i in 0..3 {
      at w { call zero(out[:, i*8 +: 16]) }
    }
  }
}
"""


def test_a_race_between_iterations_names_their_own_regions_only_when_they_lack_them(tmp_path: Path) -> None:
    # out[:, i*8 +: 16]: each iteration has its own region (it moves with i), 8 columns overlap
    _, bag = plan_program(write(tmp_path, ITERATIONS, "moving.pgl"))
    (d,) = [d for d in bag.items if d.code == "PG100"]
    assert "give each iteration its own region" not in (d.hint or "")
    assert "make the regions of the iterations disjoint" in (d.hint or "") and "`i`" in (d.hint or "")
    assert d.fix is None  # a race across iterations has no dep to add (a carry is the fix)
    # out[:, 0 +: 16]: every iteration writes the same columns
    _, bag = plan_program(write(tmp_path, ITERATIONS.replace("i*8 +: 16", "0 +: 16"), "fixed.pgl"))
    (d,) = [d for d in bag.items if d.code == "PG100"]
    assert "give each iteration its own region" in (d.hint or "")
