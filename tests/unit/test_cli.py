"""The command line: exit codes, `check` output, atomic `-o`, `explain`, and no tracebacks.

Exit codes: 0 clean spec, 1 diagnostics with errors, 2 usage error (missing file, malformed
-D, unknown subcommand, unknown --config). Most cases call `pgraph.cli.main` in-process; the
"never a traceback" cases run `python -m pgraph` as a subprocess so that an uncaught exception
would really reach stderr.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pgraph.backends.output import write_atomic
from pgraph.cli import main
from pgraph.diagnostics import RULES
from pgraph.explain import explain
from tests.conftest import HEAD_SPEC, ROOT

CORPUS = ROOT / "tests" / "diagnostics"
CLEAN = CORPUS / "PG001_syntax_error.fixed.pgl"
BROKEN = CORPUS / "PG001_syntax_error.pgl"


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "pgraph", *args], capture_output=True, text=True,
                          cwd=cwd or ROOT, env=env, timeout=60, check=False)


# ---- exit codes ----------------------------------------------------------------------------


def test_check_clean_spec_prints_ok_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(CLEAN)]) == 0
    out, err = capsys.readouterr()
    assert out.strip().endswith(": ok")
    assert "error[" not in err


def test_check_with_errors_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(BROKEN)]) == 1
    out, err = capsys.readouterr()
    assert "ok" not in out
    assert "error[PG001 syntax-error]" in err
    assert err.rstrip().endswith("1 error(s), 0 warning(s)")


def test_plan_with_errors_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(CORPUS / "PG013_dependency_cycle.pgl")]) == 1
    assert "error[PG013 dependency-cycle]" in capsys.readouterr().err


def test_warnings_alone_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(CORPUS / "PG015_empty_dep.pgl")]) == 0
    out, err = capsys.readouterr()
    assert "warning[PG015 empty-dep]" in err and out.strip().endswith(": ok")


@pytest.mark.parametrize("argv", [
    ["check", "tests/diagnostics/no_such_file.pgl"],
    ["check", "tests/diagnostics"],                     # a directory
    ["check", str(CLEAN), "-D", "NUM_LAYERS"],          # no '='
    ["check", str(CLEAN), "-D", "NUM_LAYERS=two"],      # not an integer
    ["check", str(CLEAN), "-D", "1X=3"],                # not a name
    ["check", str(CLEAN), "--config", "no_such_config"],
    ["check", str(CLEAN), "--config", "missing/file.pgl"],
    ["plan", "tests/diagnostics/no_such_file.pgl"],
])
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str],
                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("pgraph: error: ") and "Traceback" not in err


@pytest.mark.parametrize("argv", [["frobnicate", str(CLEAN)], ["check"], ["check", str(CLEAN), "--layers", "x"],
                                  ["check", str(CLEAN), "--format", "xml"]])
def test_argparse_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert "usage: pgraph" in capsys.readouterr().err


def test_unknown_subcommand_exits_2_as_a_process() -> None:
    proc = run("frobnicate", str(CLEAN))
    assert proc.returncode == 2
    assert "invalid choice: 'frobnicate'" in proc.stderr


def test_unknown_override_is_a_diagnostic_not_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(CLEAN), "-D", "NUM_LAYER=2"]) == 1
    assert "<command line>:1:1: error[PG017 unknown-override]" in capsys.readouterr().err


# ---- plan -o: atomic output ------------------------------------------------------------------


def test_plan_output_file_equals_stdout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "reports" / "plan.txt"
    assert main(["plan", str(CLEAN)]) == 0
    printed = capsys.readouterr().out
    assert main(["plan", str(CLEAN), "-o", str(out)]) == 0
    assert capsys.readouterr().out == ""
    assert out.read_text(encoding="utf-8") == printed
    assert sorted(p.name for p in out.parent.iterdir()) == ["plan.txt"]  # no temporary left


def test_plan_output_not_written_on_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "plan.txt"
    assert main(["plan", str(BROKEN), "-o", str(out)]) == 1
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []


def test_plan_output_keeps_the_old_file_on_errors(tmp_path: Path) -> None:
    out = tmp_path / "plan.txt"
    out.write_text("previous report\n", encoding="utf-8")
    assert main(["plan", str(BROKEN), "-o", str(out)]) == 1
    assert out.read_text(encoding="utf-8") == "previous report\n"


def test_write_atomic_leaves_nothing_when_writing_fails(tmp_path: Path) -> None:
    target = tmp_path / "x.txt"
    target.write_text("old\n", encoding="utf-8")

    def explode(*_: object) -> None:
        raise OSError("disk full")  # the rename fails after the temporary file was written

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(os, "replace", explode)
        with pytest.raises(OSError):
            write_atomic(target, "new\n")
    assert target.read_text(encoding="utf-8") == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["x.txt"]


def test_plan_output_is_deterministic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    spec = "tests/diagnostics/PG016_duplicate_deps_folded.pgl"  # shown as given, never made absolute
    assert main(["plan", spec, "--format", "json", "-o", str(a)]) == 0
    assert main(["plan", spec, "--format", "json", "-o", str(b)]) == 0
    assert a.read_bytes() == b.read_bytes()
    assert str(ROOT) not in a.read_text(encoding="utf-8")


# ---- explain ------------------------------------------------------------------------------------


def test_explain_by_code_and_by_slug(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "PG013"]) == 0
    by_code = capsys.readouterr().out
    assert main(["explain", "dependency-cycle"]) == 0
    by_slug = capsys.readouterr().out
    assert by_code == by_slug
    assert by_code.startswith("## PG013 dependency-cycle\n")
    assert "```pgl" in by_code and "deps(q_proj)" in by_code
    assert "## PG014" not in by_code  # only this section


def test_explain_is_case_insensitive(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "pg030"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("## PG030 too-many-errors\n")
    assert "## PG031" not in out  # only this section


def test_explain_unknown_code_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "PG999"]) == 2
    assert capsys.readouterr().err.startswith("pgraph: error: unknown diagnostic code 'PG999'")


# ---- never a traceback ---------------------------------------------------------------------------


def _bad_inputs(tmp: Path) -> list[tuple[list[str], int]]:
    (tmp / "binary.pgl").write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe\x00")
    (tmp / "latin1.pgl").write_bytes(b'include "binary.pgl"\nentry e { }\n')
    (tmp / "empty.pgl").write_text("", encoding="utf-8")
    (tmp / "self.pgl").write_text('include "self.pgl"\nentry e { }\n', encoding="utf-8")
    (tmp / "dir.pgl").mkdir()
    (tmp / "incdir.pgl").write_text('include "dir.pgl"\nentry e { }\n', encoding="utf-8")
    (tmp / "garbage.pgl").write_text("}}}{{{ ((( @@@ \u00e9\u00e8 \"unterminated\n", encoding="utf-8")
    (tmp / "baddep.pgl").write_text(
        "tensor x : f32[16, 64] external\nkernel k aiv (a : inout f32[16, 64])\n"
        "entry e { manual scope { at a deps(nope, k, x) { call k(x) } } }\n", encoding="utf-8")
    (tmp / "huge.pgl").write_text(
        "const N = 1000000000000\ntensor x : f32[16, 64] external\nkernel k aiv (a : inout f32[16, 64])\n"
        "entry e { parallel t[i in 0..N] { call k(x) } }\n", encoding="utf-8")
    (tmp / "divzero.pgl").write_text(
        "tensor x : f32[16, 64] external\nkernel k aiv (a : inout f32[16, 1])\n"
        "entry e { parallel t[i in 0..4] { call k(x[:, i / (i - i) +: 1]) } }\n", encoding="utf-8")
    return [
        (["check", "binary.pgl"], 2),
        (["check", "latin1.pgl"], 1),
        (["check", "empty.pgl"], 1),
        (["check", "self.pgl"], 1),
        (["check", "dir.pgl"], 2),
        (["check", "incdir.pgl"], 1),
        (["plan", "garbage.pgl"], 1),
        (["plan", "baddep.pgl"], 1),
        (["plan", "huge.pgl"], 1),
        (["plan", "divzero.pgl", "--format", "json"], 1),
    ]


def test_bad_inputs_never_raise(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                capsys: pytest.CaptureFixture[str]) -> None:
    """In-process: `main` returns an exit code for every bad input (an exception would be a traceback)."""
    cases = _bad_inputs(tmp_path)
    monkeypatch.chdir(tmp_path)
    for argv, code in cases:
        assert main(argv) == code, argv
        err = capsys.readouterr().err
        if code == 1 and "json" not in argv:
            assert "error[PG" in err, (argv, err)


SUBPROCESS_CASES = {"binary.pgl", "latin1.pgl", "garbage.pgl", "huge.pgl"}


def test_bad_inputs_never_print_a_traceback(tmp_path: Path) -> None:
    """The same through the console entry point, as a process, for a few of them."""
    for argv, code in _bad_inputs(tmp_path):
        if argv[1] not in SUBPROCESS_CASES:
            continue
        proc = run(*argv, cwd=tmp_path)
        assert "Traceback" not in proc.stderr, (argv, proc.stderr)
        assert proc.returncode == code, (argv, proc.returncode, proc.stderr)


def test_non_utf8_config_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "cfg.pgl").write_bytes(b"const NUM_LAYERS = \xff\n")
    spec = tmp_path / CLEAN.name  # beside the config: inside one project root
    spec.write_text(CLEAN.read_text(encoding="utf-8"), encoding="utf-8")
    proc = run("check", str(spec), "--config", str(tmp_path / "cfg.pgl"))
    assert "Traceback" not in proc.stderr
    assert proc.returncode == 2 and "is not UTF-8 text" in proc.stderr


def test_plan_of_a_program_without_a_layer_loop_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "flat.pgl"
    spec.write_text("tensor x : f32[8, 8] external\nkernel k aiv (a : inout f32[8, 8])\n"
                    "entry main { at a { call k(x) } }\n", encoding="utf-8")
    assert main(["plan", str(spec)]) == 0
    out = capsys.readouterr().out
    assert "entry main, no layer loop;" in out.splitlines()[0]
    assert "  whole program      1" in out and "0 layers" not in out


@pytest.mark.parametrize("code", sorted(RULES))
def test_explain_prints_its_whole_section(code: str) -> None:
    """The section as split at `## PG` headings (independently of pgraph.explain), to its end: a
    `# comment` inside a ```pgl example does not cut it (20 of 54 sections were cut there)."""
    text = explain(code)
    assert text is not None
    doc = (ROOT / "docs" / "rules.md").read_text(encoding="utf-8")
    parts = re.split(r"^(## PG\d{3} \S+)[ \t]*$", doc, flags=re.M)
    sections = {head[3:8]: (head + body).rstrip() for head, body in zip(parts[1::2], parts[2::2], strict=True)}
    # the doc's two part headings stand between sections
    want = sections[code].split("\n# Planner rules (PG1xx)\n")[0].rstrip()
    assert text == want
    assert text.count("```") % 2 == 0, "every code fence is closed"


def test_explain_pg101_includes_its_fixed_example() -> None:
    text = explain("PG101")
    assert text is not None
    assert "Fixed (`tests/diagnostics/PG101_manual_scope_boundary.fixed.pgl`)" in text
    assert text.rstrip().endswith("```")


def test_run_rejects_a_negative_seed_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(HEAD_SPEC), "--config", "small", "--layers", "1", "--seed", "-5"]) == 2
    assert "--seed" in capsys.readouterr().err


def test_plan_dot_into_an_unrendered_picture_file_is_a_usage_error(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """`--dot -o g.jpg` would fill a .jpg with Graphviz text (pgraph renders .svg, .png and .pdf
    only: tests/unit/test_dot.py): exit 2, nothing written, and the message names the .dot file
    and the `dot` command that makes the picture."""
    out = tmp_path / "g.jpg"
    assert main(["plan", str(ROOT / "specs" / "decode_layer.pgl"), "--dot", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pgraph: error: --dot renders .svg, .png and .pdf pictures, not .jpg")
    assert f"dot -Tjpg {tmp_path / 'g.dot'} -o {out}" in err
    assert not out.exists()
    assert main(["plan", str(ROOT / "specs" / "decode_layer.pgl"), "--dot", "-o", str(tmp_path / "g.dot")]) == 0
    assert (tmp_path / "g.dot").read_text(encoding="utf-8").startswith("digraph")


@pytest.mark.parametrize("argv", [
    ["check", "s.pgl"], ["plan", "s.pgl"], ["run", "s.pgl"], ["build", "s.pgl", "--target", "dot", "-o", "o"],
    ["sim", "s.pgl"], ["export", "s.pgl", "--deps-json", "o.json"], ["diff", "a.pgl", "b.pgl"],
    ["deps", "s.pgl", "t"], ["why", "s.pgl", "a", "b"], ["stats", "s.pgl"],
])
def test_every_command_that_reads_a_spec_takes_allow_and_notes(argv: list[str]) -> None:
    """One notes policy and one waiver switch for every command (issue 24)."""
    from pgraph.cli import build_parser

    args = build_parser(argv[0]).parse_args([*argv, "-W", "PG104", "--allow", "unused-tensor", "--notes"])
    assert args.allow == ["PG104", "unused-tensor"] and args.notes is True


def test_parse_allow_reads_codes_and_slugs() -> None:
    from pgraph.commands.diagnostic_options import parse_allow
    from pgraph.pipeline import UsageError

    assert parse_allow(["pg104", "unused-tensor", "PG104"]) == ("PG104", "PG118")
    with pytest.raises(UsageError, match="did you mean 'PG104'"):
        parse_allow(["PG1O4"])  # a letter O
