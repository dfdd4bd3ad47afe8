"""`pgraph fmt`: canonical text with the comments kept, a fixed point that parses back to the
same tree, for every spec, example and diagnostics-corpus file; `--check`; atomic writes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pgraph.cli import main
from pgraph.commands.fmt import format_text
from pgraph.diagnostics import DiagnosticBag
from pgraph.frontend.fmt import comments
from tests.conftest import ROOT
from tests.unit.test_dumps import parse, shape

ALL_PGL = sorted({*ROOT.joinpath("specs").rglob("*.pgl"), *ROOT.joinpath("tests").rglob("*.pgl"),
                  *ROOT.joinpath("bench").rglob("*.pgl")})


def fmt(text: str) -> str | None:
    return format_text(text, "<t>", DiagnosticBag())


def check_round_trip(text: str) -> str | None:
    """fmt(text): parses to the same tree, is a fixed point, and keeps every comment in order."""
    module, _ = parse(text)
    if module is None:
        return None  # a syntax-error corpus file: nothing to format
    out = fmt(text)
    assert out is not None
    again, bag = parse(out)
    assert again is not None, [d.message for d in bag.items]
    assert shape(again) == shape(module)
    assert fmt(out) == out, "not a fixed point"
    kept = " ".join(c.text for c in comments(out))
    assert kept == " ".join(c.text for c in comments(text)), "comments lost or reordered"
    return out


@pytest.mark.parametrize("path", ALL_PGL, ids=lambda p: str(p.relative_to(ROOT)))
def test_fmt_round_trips_every_file(path: Path) -> None:
    check_round_trip(path.read_text(encoding="utf-8"))


def test_fmt_places_comments_and_blank_lines_by_hand() -> None:
    text = (
        "# header\n"
        "\n"
        "const  A=1+2*3   # trailing A\n"
        "const B = (A)\n"
        "\n"
        "\n"
        "# about the kernel\n"
        "kernel k aiv (x : in f32[4, 4], y : out f32[4,4])\n"
        "tensor t : f32[4, 4] external\n"
        "tensor u : f32[4, 4] external\n"
        "entry e {   # the entry\n"
        "  # first task\n"
        "  at a {\n"
        "      call k(t, u)   # the call\n"
        "    # before the brace\n"
        "  }\n"
        "}\n"
        "# the end\n"
    )
    expect = (
        "# header\n"
        "\n"
        "const A = 1+2*3  # trailing A\n"      # `=` spaced, the author's `1+2*3` kept; the old column (17) fits
        "const B = (A)\n"                      # parentheses are tokens: kept
        "\n"                                   # two blank lines: one
        "# about the kernel\n"
        "kernel k aiv (x : in f32[4, 4], y : out f32[4, 4])\n"
        "tensor t : f32[4, 4] external\n"
        "tensor u : f32[4, 4] external\n"
        "entry e {   # the entry\n"
        "  # first task\n"
        "  at a {\n"
        "    call k(t, u)     # the call\n"     # two spaces of indentation per brace; the comment keeps column 21
        "    # before the brace\n"            # one level deeper than the `}` below it
        "  }\n"
        "}\n"
        "# the end\n"
    )
    assert check_round_trip(text) == expect


def test_fmt_aligns_runs_the_way_gofmt_does() -> None:
    """A run the author aligned stays aligned when a longer name joins it or a name gets shorter;
    the aligned lines' narrowest gap is kept (one space before `:`, two before `external` here); a
    blank line or a line of another kind ends the run; a run nobody aligned is left unaligned."""
    text = (
        "tensor a  : f32[4]  external   # a\n"
        "tensor bb : f32[4]  external   # b\n"
        "tensor longer_name : f32[4] external # c\n"      # added: sticks out, unaligned
        "tensor h : f32[40] external\n"                  # renamed from a longer name
        "const X = 1\n"                                  # another kind: not in the run
        "\n"
        "tensor p : f32[4]   external\n"                 # after a blank line; `external` at two columns
        "tensor qq : f32[4] external\n"
        "kernel k aiv (\n"
        "  x : in f32[4],\n"                              # parameters nobody aligned
        "  yyy : out f32[4],\n"
        ")\n"
    )
    expect = (
        "tensor a           : f32[4]   external  # a\n"    # `:` one space after the longest name
        "tensor bb          : f32[4]   external  # b\n"    # `external` two spaces after the widest type
        "tensor longer_name : f32[4]   external  # c\n"    # the comments: two spaces after the longest code
        "tensor h           : f32[40]  external\n"    # the gap of the aligned lines (two) is kept
        "const X = 1\n"
        "\n"
        "tensor p : f32[4] external\n"    # no token at a shared column with padding: not a run
        "tensor qq : f32[4] external\n"
        "kernel k aiv (\n"
        "  x : in f32[4],\n"
        "  yyy : out f32[4],\n"
        ")\n"
    )
    out = check_round_trip(text)
    assert out == expect, out


def test_fmt_keeps_line_breaks_and_continuation_indents() -> None:
    """The author's line breaks stay; a continuation line keeps its indentation relative to its
    statement's first line, which moves to two spaces per brace; one-line blocks stay on one line."""
    text = (
        "entry e {\n"
        "        at a deps( ) { call k(x) }\n"
        "    at b {\n"
        "      reads x[0 +: 2, :],\n"
        "            y\n"
        "    }\n"
        "  for L in 0..2\n"
        "      carry p  = x then y,   # one\n"
        "            qq = y then x    # two\n"
        "  {\n"
        "  let q = - 1\n"
        "  }\n"
        "}\n"
    )
    expect = (
        "entry e {\n"
        "  at a deps() { call k(x) }\n"
        "  at b {\n"
        "    reads x[0 +: 2, :],\n"
        "          y\n"                       # six spaces deeper than `reads`, as in the source
        "  }\n"
        "  for L in 0..2\n"
        "      carry p  = x then y,   # one\n"  # the carries' `=` and the comments stay aligned
        "            qq = y then x    # two\n"
        "  {\n"
        "    let q = -1\n"                   # a sign: no space after it
        "  }\n"
        "}\n"
    )
    assert check_round_trip(text) == expect


def test_every_repository_spec_is_fmt_clean() -> None:
    """`pgraph fmt --check` passes on every spec under specs/ and tests/examples/ (CI runs this test)."""
    files = sorted({*ROOT.joinpath("specs").rglob("*.pgl"), *ROOT.joinpath("tests", "examples").glob("*.pgl")})
    assert len(files) >= 14
    dirty = [str(p.relative_to(ROOT)) for p in files if fmt(p.read_text(encoding="utf-8")) != p.read_text(encoding="utf-8")]
    assert dirty == [], f"run `pgraph fmt {' '.join(dirty)}`"


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "pgraph", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=60, check=False)


def test_fmt_check_and_write(tmp_path: Path) -> None:
    spec = tmp_path / "a.pgl"
    spec.write_text("const  A=1   # one\n")
    proc = run("fmt", "--check", "a.pgl", cwd=tmp_path)
    assert proc.returncode == 1 and proc.stderr == "would reformat a.pgl\n"
    assert spec.read_text() == "const  A=1   # one\n"  # --check writes nothing
    proc = run("fmt", "a.pgl", cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout == "reformatted a.pgl\n"
    assert spec.read_text() == "const A = 1  # one\n"  # the comment keeps its column (14)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.pgl"]  # no temporary left
    proc = run("fmt", "--check", "a.pgl", cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout == proc.stderr == ""


def test_fmt_keeps_a_byte_order_mark(tmp_path: Path) -> None:
    """A file that starts with a UTF-8 BOM is rewritten with it (the reader drops it); a file
    that differs from the canonical text only by its BOM is left alone."""
    spec = tmp_path / "a.pgl"
    spec.write_bytes(b"\xef\xbb\xbfconst  A=1\n")
    assert main(["fmt", str(spec)]) == 0
    assert spec.read_bytes() == b"\xef\xbb\xbfconst A = 1\n"
    assert main(["fmt", "--check", str(spec)]) == 0
    plain = tmp_path / "b.pgl"
    plain.write_bytes(b"const  B=2\n")
    assert main(["fmt", str(plain)]) == 0
    assert plain.read_bytes() == b"const B = 2\n"  # no BOM added


def test_fmt_of_a_syntax_error_is_pg001_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "bad.pgl"
    spec.write_text("const A = \n")
    assert main(["fmt", str(spec)]) == 1
    assert "error[PG001 syntax-error]" in capsys.readouterr().err
    assert spec.read_text() == "const A = \n"


def test_fmt_of_a_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    proc = run("fmt", "nope.pgl", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr == "pgraph: error: no such file: nope.pgl\n"


def test_the_formatted_head_spec_plans_to_the_same_figures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """fmt of the three HEAD files in place, then `pgraph stats`: the same figures and budgets."""
    import shutil

    for name in ("decode_layer.pgl", "qwen3_14b.pgl", "decode_common.pgl"):
        shutil.copy(ROOT / "specs" / name, tmp_path / name)
    files = [str(tmp_path / n) for n in ("decode_layer.pgl", "qwen3_14b.pgl", "decode_common.pgl")]
    assert main(["fmt", *files]) == 0
    capsys.readouterr()
    assert main(["fmt", "--check", *files]) == 0
    assert main(["stats", str(ROOT / "specs" / "decode_layer.pgl")]) == 0
    before = capsys.readouterr().out.split("\n", 1)[1]
    assert main(["stats", files[0]]) == 0
    after = capsys.readouterr().out.split("\n", 1)[1]
    assert after == before


def test_fmt_keeps_an_allow_on_the_line_above_its_declaration() -> None:
    """An allow is a statement of its own line and stays on the line above its item: fmt changes
    whitespace only (the run of spaces inside the allow closes up, the indent is two spaces per
    open brace, line breaks and the trailing comment are kept)."""
    text = ('const A = 1\n'
            'allow(PG118, PG016,   "kept for the next version")\n'
            'kernel k aiv (x : out f32[16, 64], y : out f32[16, 64])\n'
            'entry e {\n'
            '  allow(PG104, "a placeholder")   # the TaskId slot\n'
            '      dummy d\n'
            '}\n')
    out = check_round_trip(text)
    assert out == ('const A = 1\n'
                   'allow(PG118, PG016, "kept for the next version")\n'
                   'kernel k aiv (x : out f32[16, 64], y : out f32[16, 64])\n'
                   'entry e {\n'
                   '  allow(PG104, "a placeholder")   # the TaskId slot\n'
                   '  dummy d\n'
                   '}\n')
