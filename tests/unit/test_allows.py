"""Waiving diagnostics (issue 24): the inline `allow(PGxxx, "reason")` above a declaration and the
command line's `-W CODE` / `--allow CODE` (docs/language.md §13.2, docs/rules.md).

The specs below are small enough that their diagnostics are known by hand: an empty-deps dummy
nothing waits on is a PG104 warning (docs/rules.md PG104: "has no deps and nothing waits on
it"), a tensor no task touches a PG118 note, and a reader without a dep on the writer in a
manual scope a PG100 race (no TensorMap there).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pgraph.cli import main
from pgraph.diagnostics import Severity
from pgraph.pipeline import Options, plan_program
from tests.conftest import HEAD_SPEC

HEAD = """\
tensor x : f32[16, 64] external
tensor y : f32[16, 64] external
kernel fill aiv (x : out f32[16, 64])
kernel copy aiv (src : in f32[16, 64], dst : out f32[16, 64])
"""


def write(tmp_path: Path, text: str, name: str = "spec.pgl") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def codes(bag, level: Severity | None = None) -> list[str]:  # type: ignore[no-untyped-def]
    return [d.code for d in bag.sorted() if level is None or d.level is level]


TWO_DUMMIES = HEAD + """\
entry e {
  allow(PG104, "the placeholder value of a TaskId slot")
  dummy first
  dummy second
  at fill_x {
    writes x
    call fill(x)
  }
  at fill_y {
    writes y
    call fill(y)
  }
}
"""


def test_an_inline_allow_waives_only_its_declaration(tmp_path: Path) -> None:
    _plan, bag = plan_program(write(tmp_path, TWO_DUMMIES))
    warned = [d for d in bag.sorted() if d.code == "PG104"]
    assert [d.message.split("'")[1] for d in warned] == ["second"]  # `first` is waived, `second` is not
    assert [(d.code, d.message.split("'")[1], w.reason) for d, w in bag.allowed] == [
        ("PG104", "first", "the placeholder value of a TaskId slot")]
    assert "PG042" not in codes(bag)


def test_the_plan_report_counts_what_was_allowed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = write(tmp_path, TWO_DUMMIES)
    assert main(["plan", str(spec)]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[0] == f"{spec}: entry e, no layer loop; 0 error(s), 1 warning(s), 0 note(s), 1 allowed"
    assert err.count("warning[PG104 dummy-effect]") == 1
    assert err.endswith("1 allowed (PG104 dummy-effect 1): waived by `allow(...)` or `--allow`; --notes lists them\n")
    assert main(["plan", str(spec), "--notes"]) == 0
    err = capsys.readouterr().err
    assert (f"  {spec}:7:3: warning[PG104 dummy-effect]: dummy 'first' has no deps and nothing waits on it: it only "
            f"costs a dispatch hop (allowed by `allow(PG104)` at {spec}:6:3: the placeholder value of a TaskId slot)"
            ) in err
    assert main(["plan", str(spec), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [d["code"] for d in doc["diagnostics"]] == ["PG104"]
    assert [(d["code"], d["allowed_by"], d["reason"]) for d in doc["allowed"]] == [
        ("PG104", f"`allow(PG104)` at {spec}:6:3", "the placeholder value of a TaskId slot")]


def test_an_allow_in_a_fragment_covers_its_declaration_where_it_is_used(tmp_path: Path) -> None:
    """The dummy is lowered at the `use`, and reported in the fragment's text (with a "used here"
    note): the allow there waives it, as for specs/decode_layer.pgl's prev_out."""
    text = HEAD + """\
fragment barrier {
  allow(PG104, "a placeholder, as in the reference")
  dummy hop
}
entry e {
  for i in 0..1 {
    use barrier
  }
  at fill_x {
    writes x
    call fill(x)
  }
}
"""
    _plan, bag = plan_program(write(tmp_path, text))
    assert codes(bag, Severity.ERROR) == [] and "PG042" not in codes(bag)
    assert [(d.code, d.span.line if d.span else None) for d, _ in bag.allowed] == [("PG104", 7)]  # HEAD is 4 lines


def test_an_allow_never_waives_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = HEAD + """\
entry e {
  manual scope {
    at fill_x {
      writes x
      call fill(x)
    }
    allow(PG100, "the kernels order this themselves")
    at copy_x {
      reads x
      writes y
      call copy(x, y)
    }
  }
}
"""
    spec = write(tmp_path, text)
    _plan, bag = plan_program(spec)
    race = [d for d in bag.sorted() if d.code == "PG100"]
    assert race and race[0].level is Severity.ERROR and bag.allowed == []
    assert any(n.message == f"`allow(PG100)` at {spec}:11:5 does not waive an error" for n in race[0].notes)
    assert "PG042" not in codes(bag)  # it met its code: the note says why it did nothing
    assert main(["check", str(spec), "--allow", "PG100"]) == 1
    assert "`--allow PG100` does not waive an error" in capsys.readouterr().err


@pytest.mark.parametrize("word", ["PG104", "pg104", "dummy-effect"])
def test_the_command_line_allow_takes_a_code_or_its_slug(word: str, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    spec = write(tmp_path, TWO_DUMMIES)
    assert main(["check", str(spec), "-W", word]) == 0
    err = capsys.readouterr().err
    assert "warning[" not in err and "2 allowed (PG104 dummy-effect 2)" in err
    assert main(["check", str(spec), "--allow", word, "--notes"]) == 0
    assert "allowed by `--allow PG104`" in capsys.readouterr().err


def test_an_unknown_allow_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = write(tmp_path, TWO_DUMMIES)
    assert main(["check", str(spec), "--allow", "dumy-effect"]) == 2
    assert "--allow dumy-effect: no diagnostic code or slug 'dumy-effect'; did you mean 'dummy-effect'?" in \
        capsys.readouterr().err
    assert main(["check", str(spec), "-W", "PG999"]) == 2


def test_an_unused_allow_is_pg042(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Inline: a warning with a fix that deletes the allow's line; on the command line: a counted
    note. Not reported by a run that stops before the planner's end (the queries, `--emit ir`)."""
    from pgraph.diagnostics import apply_edits

    text = TWO_DUMMIES.replace('allow(PG104, "the placeholder value of a TaskId slot")',
                               'allow(PG118, "x may stay unused")')
    spec = write(tmp_path, text)
    _plan, bag = plan_program(spec, Options(allow=("PG016",)))
    unused = [d for d in bag.sorted() if d.code == "PG042"]
    assert [(d.level, d.span is not None) for d in unused] == [(Severity.NOTE, False), (Severity.WARNING, True)]
    inline = unused[1]
    assert inline.message == "`allow(PG118)` waives nothing: no diagnostic of PG118 is reported in the declaration " \
                             "below it"
    assert inline.fix is not None
    fixed = apply_edits(text, list(inline.fix.edits))
    assert fixed == text.replace('  allow(PG118, "x may stay unused")\n', "")
    assert main(["check", str(spec), "--emit", "ir"]) == 0
    assert "PG042" not in capsys.readouterr().err
    assert main(["why", str(spec), "fill_x", "fill_y"]) == 0
    assert "PG042" not in capsys.readouterr().err


@pytest.mark.parametrize(("body", "message"), [
    ('  allow(PG104, "  ")\n  dummy hop\n', "an `allow` needs a reason"),
    ('  allow(PG104, "why")\n  let n = 4\n  dummy hop\n', "not before a `let` statement"),
    ('  dummy hop\n  allow(PG104, "why")\n', "not before the end of its block"),
    ('  allow(PG1O4, "why")\n  dummy hop\n', "did you mean 'PG104'?"),
    ('  allow(PG104, "why")\n  phase p {\n    dummy hop\n  }\n', "not before a `phase` statement"),
])
def test_a_malformed_allow_is_pg041(body: str, message: str, tmp_path: Path) -> None:
    _plan, bag = plan_program(write(tmp_path, HEAD + "entry e {\n" + body + "}\n"))
    found = [d for d in bag.sorted() if d.code == "PG041"]
    assert len(found) == 1 and found[0].level is Severity.ERROR
    assert message in found[0].message + " " + (found[0].hint or "")


def test_an_allow_at_the_end_of_a_file_does_not_reach_into_the_next(tmp_path: Path) -> None:
    """The loader splices included files into one item list: an allow ending a file stands before
    nothing, whatever the includer declares next."""
    write(tmp_path, HEAD + 'allow(PG118, "unused on purpose")\n', "inc.pgl")
    spec = write(tmp_path, 'include "inc.pgl"\ntensor z : f32[1] external\nentry e {\n  at fill_x {\n'
                           '    writes x\n    call fill(x)\n  }\n}\n')
    _plan, bag = plan_program(spec)
    assert [d.message for d in bag.sorted() if d.code == "PG041"] == [
        "an `allow` must stand before a declaration, not before the end of its block"]


def test_the_head_spec_plans_without_a_warning(capsys: pytest.CaptureFixture[str]) -> None:
    """Acceptance (issue 24): `pgraph plan specs/decode_layer.pgl` prints no warning; the prev_out
    placeholder's PG104 is waived inline, with the reference's reason."""
    assert main(["plan", str(HEAD_SPEC)]) == 0
    err = capsys.readouterr().err
    assert "warning" not in err
    _plan, bag = plan_program(HEAD_SPEC)
    assert [(d.code, d.message.split("'")[1]) for d, _ in bag.allowed] == [("PG104", "prev_out")]
    assert "prev_out_tid[0]" in bag.allowed[0][1].reason and "§8.9" in bag.allowed[0][1].reason
