"""Quieter defaults: notes are counted by code unless `--notes` (issue 14).

The spec below is written so that its notes are known by hand: two unflagged seeds whose
early-flagged consumers cannot take the early window (PG105 twice) and one tensor nothing
touches (PG118 once); nothing else is wrong with it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pgraph.cli import main
from tests.conftest import HEAD_SPEC

SPEC = """\
tensor x : bf16[16, 64] external
tensor y : f32[16, 64] external
tensor w : f32[16, 64] external
tensor unused : f32[16, 64] external
kernel zero aiv (acc : out f32[16, 64])
kernel mm aic (x : in bf16[16, 64], acc : atomic_add f32[16, 64])
kernel copy aiv (src : in f32[16, 64], dst : out f32[16, 64])
entry e {
  tensor acc : f32[16, 64]
  tensor acc2 : f32[16, 64]
  manual scope {
    at seed { call zero(acc) }
    at seed2 { call zero(acc2) }
    spmd mm_grid[i in 0..4] early deps(seed) { call mm(x, acc) }
    spmd mm_grid2[i in 0..4] early deps(seed2) { call mm(x, acc2) }
    at drain deps(mm_grid) { call copy(acc, y) }
    at drain2 deps(mm_grid2) { call copy(acc2, w) }
  }
}
"""

SUMMARY = """\
3 note(s) not shown (--notes shows them in full; `pgraph explain CODE` says what each means):
  PG105 early-dispatch-blocked    2
  PG118 unused-tensor             1
"""


@pytest.fixture
def spec(tmp_path: Path) -> str:
    path = tmp_path / "notes.pgl"
    path.write_text(SPEC)
    return str(path)


@pytest.mark.parametrize("command", ["plan", "check"])
def test_notes_are_grouped_by_code_with_counts(command: str, spec: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([command, spec]) == 0
    err = capsys.readouterr().err
    assert err == SUMMARY


def test_notes_flag_shows_them_in_full_and_leaves_the_report_alone(spec: str,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", spec]) == 0
    quiet_out, _ = capsys.readouterr()
    assert main(["plan", spec, "--notes"]) == 0
    out, err = capsys.readouterr()
    assert out == quiet_out
    heads = [line for line in err.splitlines() if "note[" in line]
    assert heads == [
        f"{spec}:4:1: note[PG118 unused-tensor]: tensor 'unused' is declared but never accessed",
        f"{spec}:12:8: note[PG105 early-dispatch-blocked]: 'seed' is not flagged `early`: mm_grid cannot be "
        "dispatched early",
        f"{spec}:13:8: note[PG105 early-dispatch-blocked]: 'seed2' is not flagged `early`: mm_grid2 cannot be "
        "dispatched early",
    ]
    assert "not shown" not in err


def test_head_spec_plan_prints_the_report_and_a_short_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    """The HEAD spec warns of nothing (its one PG104, on the prev_out placeholder, is waived by an
    inline allow with the reason: issue 24) and has a dozen notes (before: ~100 lines of them on
    stderr); now a count line, one line per code and the allowed count."""
    assert main(["plan", str(HEAD_SPEC)]) == 0
    out, err = capsys.readouterr()
    assert out.startswith(f"{HEAD_SPEC}: entry decode_fwd_layers, 40 layer(s); 0 error(s), 0 warning(s), 12 note(s), "
                          "1 allowed\n")
    assert "note[" not in err and "warning[" not in err and "error(s)" not in err
    assert err.endswith("1 allowed (PG104 dummy-effect 1): waived by `allow(...)` or `--allow`; --notes lists them\n")
    assert len(err.splitlines()) < 10
    summary = err[err.index("note(s) not shown"):].splitlines()[1:-1]
    counts = {line.split()[0]: int(line.split()[-1]) for line in summary}
    assert main(["plan", str(HEAD_SPEC), "--notes"]) == 0
    full = capsys.readouterr().err
    assert counts == {code: full.count(f"note[{code} ") for code in counts}
    assert sum(counts.values()) == full.count(": note[")


def test_the_early_dispatch_caveat_is_one_line_and_the_open_point_is_in_the_json(
        capsys: pytest.CaptureFixture[str]) -> None:
    """The "unverified on device" paragraph of every plan report is one short line pointing at
    docs/planner.md, which states the open point; the JSON report keeps the open point's text."""
    import json

    from pgraph.plan.early_dispatch import OPEN_POINT

    assert main(["plan", str(HEAD_SPEC)]) == 0
    out = capsys.readouterr().out
    section = out[out.index("early dispatch ("):out.index("critical path:")]
    caveat = [line for line in section.splitlines() if "published at run time" in line]
    assert caveat == ["  (candidates also need every producer fully published at run time; the rule is the runtime "
                      "code's, unverified on device: docs/planner.md)"]
    assert "open point" not in out and OPEN_POINT not in out
    planner = (HEAD_SPEC.parents[1] / "docs" / "planner.md").read_text()
    assert "flagged or already complete" in planner and "unverified" in planner
    assert main(["plan", str(HEAD_SPEC), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["early_dispatch_open_point"] == OPEN_POINT
