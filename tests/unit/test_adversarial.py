"""Regressions for what an adversarial review of the CLI, the lowering and the window expansion broke.

Each test is the minimal repro of one bug, with the expected answer worked out by hand (the
edge and count arithmetic is spelt out next to each assertion), or checked against
`Options(full=True)`, which expands every loop iteration and so is an independent count.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from pgraph.backends.report import report_facts
from pgraph.cli import main
from pgraph.pipeline import Options, plan_program
from pgraph.source import SourceFile, Span

HDR = """\
const R = 4
const C = 16
tensor x : f32[R, C] external
tensor y : f32[R, C] external
kernel copy aiv (src : in f32[R, C], dst : out f32[R, C])
kernel rd aiv (src : in f32[R, C])
kernel w1 aiv (dst : out f32[1, 4])
kernel r1 aiv (src : in f32[1, 4])
kernel incrow aiv (acc : inout f32[1, C])
kernel rdrow aiv (src : in f32[1, C])
"""
#: A clean three-line entry on top of HDR.
CLEAN = HDR + "entry m {\n  at t { call copy(x, y) }\n}\n"


def spec(tmp_path: Path, text: str, name: str = "s.pgl") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def codes(path: Path, **kw: object) -> list[str]:
    _, bag = plan_program(path, Options(**kw))  # type: ignore[arg-type]
    return [d.code for d in bag.sorted() if d.level.name == "ERROR"]


def edges(path: Path, **kw: object) -> set[tuple[str, str]]:
    plan, bag = plan_program(path, Options(**kw))  # type: ignore[arg-type]
    assert plan is not None, [d.message for d in bag.items]
    g = plan.graph
    return {(g.instances[u].label, g.instances[v].label) for u, v in g.graph.edges
            if g.instances[u].kind != "alloc"}


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


# ---- source positions: carets ------------------------------------------------------------------

def test_form_feed_in_a_comment_keeps_the_quoted_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """str.splitlines() split at the form feed and U+2028 in comments, so every later diagnostic
    quoted the line above the one it named; only '\\n' ends a line, as in the parser."""
    text = HDR.replace("external\n", "external   # a \x0c form feed\n", 1).replace(
        "kernel rd ", "# \u2028 line separator\nkernel rd ", 1) + "entry m {\n  at t { call copy(x, nope) }\n}\n"
    code, _, err = cli(capsys, "check", str(spec(tmp_path, text)))
    assert code == 1
    line_no = text.split("\n").index("  at t { call copy(x, nope) }") + 1
    assert f":{line_no}:" in err and f"{line_no:>5} |   at t {{ call copy(x, nope) }}" in err


def test_carets_under_tabs_line_up() -> None:
    """The caret prefix copies the line's tabs, so a terminal expands both the same way."""
    src = SourceFile("t.pgl", "\tat t1 {\tcall k(a, c) }\n")
    col = src.text.index("c)") + 1
    quoted, carets = Span(src, 1, col, 1, col + 1).render()
    text = quoted.split(" | ", 1)[1]
    under = carets.split(" | ", 1)[1]
    assert under.expandtabs().index("^") == text.expandtabs().index("c)")


def test_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "bom.pgl"
    path.write_bytes(b"\xef\xbb\xbf" + CLEAN.replace("\n", "\r\n").encode())
    assert codes(path) == []


# ---- runaway input: a coded diagnostic, never a traceback or a hang ----------------------------

@pytest.mark.parametrize("text", [
    "const Z = " + "1+" * 800 + "1\n" + CLEAN,                                         # 800-deep BinOp chain
    HDR + "entry m {\n" + "auto scope {\n" * 300 + "at t { call copy(x, y) }\n" + "}\n" * 300 + "}\n",
])
def test_deep_nesting_is_pg001(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str) -> None:
    code, _, err = cli(capsys, "check", str(spec(tmp_path, text)))
    assert code == 1 and "error[PG001 syntax-error]" in err and "nests more than 200 levels" in err


def test_huge_integer_literal_is_pg018(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """int() of more than 4300 digits raised ValueError inside the Lark transformer."""
    code, _, err = cli(capsys, "check", str(spec(tmp_path, "const BIG = " + "9" * 5000 + "\n" + CLEAN)))
    assert code == 1 and "error[PG018 bad-expression]" in err and "5,000 digits" in err


def test_long_constant_chain_is_one_pg018(tmp_path: Path) -> None:
    """C0 = C1 + 1, C1 = C2 + 1, ...: each link recursed; 2000 links hit RecursionError."""
    chain = "".join(f"const C{k} = C{k + 1} + 1\n" for k in range(2000)) + "const C2000 = 0\n"
    assert codes(spec(tmp_path, chain + CLEAN)) == ["PG018"]


def test_long_fragment_chain_is_pg033(tmp_path: Path) -> None:
    frags = "".join(f"fragment F{k} {{ use F{k + 1} }}\n" for k in range(2000))
    frags += "fragment F2000 { at t { call copy(x, y) } }\n"
    assert codes(spec(tmp_path, HDR + frags + "entry m { use F0 }\n")) == ["PG033"]


def test_long_include_chain_is_pg005(tmp_path: Path) -> None:
    for k in range(600):
        spec(tmp_path, f'include "f{k + 1}.pgl"\n', f"f{k}.pgl")
    spec(tmp_path, CLEAN, "f600.pgl")
    assert codes(tmp_path / "f0.pgl") == ["PG005"]


@pytest.mark.parametrize("path", ["", "   "])
def test_empty_include_path_is_pg005(tmp_path: Path, capsys: pytest.CaptureFixture[str], path: str) -> None:
    """`include ""` was reported as "cannot read included file '': Is a directory" (it named the
    including file's folder)."""
    spec_path = spec(tmp_path, f'include "{path}"\n' + CLEAN)
    code, _, err = cli(capsys, "check", str(spec_path))
    assert code == 1 and "error[PG005 include-not-found]" in err and "names no file" in err, err
    assert "directory" not in err


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_including_an_endless_file_is_pg005(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`include "/dev/zero"` read forever (and grew memory without bound). It is outside the
    project root now, and even where outside files are allowed a device is never opened
    (a regular file over 16 MiB: tests/unit/test_include_root.py)."""
    path = spec(tmp_path, 'include "/dev/zero"\n' + CLEAN)
    code, _, err = cli(capsys, "check", str(path))
    assert code == 1 and "error[PG005 include-not-found]" in err and "outside the project root" in err
    code, _, err = cli(capsys, "check", "--allow-include-outside", str(path))
    assert code == 1 and "error[PG005 include-not-found]" in err and "is a character device" in err
    assert cli(capsys, "check", "/dev/zero")[0] == 2


# ---- -o: usage errors, and never a replaced device node ----------------------------------------

def test_unwritable_output_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = spec(tmp_path, CLEAN)
    (tmp_path / "dir").mkdir()
    for target in (tmp_path / "dir", path / "under_a_file.txt"):
        code, _, err = cli(capsys, "plan", str(path), "-o", str(target))
        assert code == 2 and "pgraph: error: cannot write" in err
    code, _, err = cli(capsys, "build", "--target", "a2a3", str(path), "-o", str(path))
    assert code == 2 and "pgraph: error: cannot write" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir", "s.pgl"]


def test_output_through_a_symlink_updates_its_target(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = spec(tmp_path, CLEAN)
    (tmp_path / "real.txt").write_text("old\n", encoding="utf-8")
    (tmp_path / "link.txt").symlink_to("real.txt")
    assert cli(capsys, "plan", str(path), "-o", str(tmp_path / "link.txt"))[0] == 0
    assert (tmp_path / "link.txt").is_symlink()
    assert (tmp_path / "real.txt").read_text(encoding="utf-8").startswith(f"{path}: entry m")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_output_to_a_fifo_writes_into_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A rename over a FIFO or /dev/null replaced the node itself with a regular file (as root,
    `-o /dev/null` destroyed the device)."""
    path = spec(tmp_path, CLEAN)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text(encoding="utf-8")))
    reader.start()
    assert cli(capsys, "plan", str(path), "-o", str(fifo))[0] == 0
    reader.join(timeout=10)
    assert got and got[0].startswith(f"{path}: entry m")
    assert fifo.is_fifo()


# ---- names ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("body", [
    "  parallel t[i in 0..3] { let i = 2\n call w1(y[i +: 1, 0 +: 4]) }\n",
    "  for i in 0..3 { let i = 2\n at t { call w1(y[i +: 1, 0 +: 4]) } }\n",
])
def test_let_rebinding_an_index_variable_is_pg003(tmp_path: Path, body: str) -> None:
    """The variable won every lookup, so `let i = 2` was silently ignored."""
    assert codes(spec(tmp_path, HDR + "entry m {\n" + body + "}\n")) == ["PG003"]


def test_dep_on_a_task_named_like_a_tensor(tmp_path: Path) -> None:
    """Tasks and tensors are separate namespaces (docs/language.md §2), but `deps(x)` was PG019
    whenever a tensor `x` existed. By hand: one explicit edge x -> u."""
    text = HDR + "entry m {\n  manual scope {\n    at x { call copy(x, y) }\n    at u deps(x) { call rd(y) }\n  }\n}\n"
    assert edges(spec(tmp_path, text)) == {("x", "u")}


def test_dep_on_a_tensor_is_still_pg019(tmp_path: Path) -> None:
    text = HDR + "entry m {\n  at u deps(y) { call rd(y) }\n}\n"
    assert codes(spec(tmp_path, text)) == ["PG019"]


def test_undeclared_tensor_argument_is_pg002(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = HDR + "entry m {\n  tensor state : f32[R, C]\n  at t { call copy(x, stat) }\n}\n"
    code, _, err = cli(capsys, "check", str(spec(tmp_path, text)))
    assert code == 1 and "error[PG002 undefined-name]: 'stat' is not declared" in err
    assert "did you mean 'state'?" in err


def test_failed_carry_does_not_cascade(tmp_path: Path) -> None:
    text = HDR + ("entry m {\n  for L in 0..3 carry cur = h0 then h {\n    tensor h : f32[R, C]\n"
                  "    at s { call copy(cur, h) }\n  }\n}\n")
    assert codes(spec(tmp_path, text)) == ["PG002"]


# ---- carries -------------------------------------------------------------------------------------

@pytest.mark.parametrize(("trips", "window", "full"), [
    (0, {("load", "fin")}, {("load", "fin")}),                                  # INIT: no iteration ran
    (1, {("load", "s@L=0"), ("s@L=0", "fin")}, {("load", "s@L=0"), ("s@L=0", "fin")}),
    (3, {("load", "s@L=0"), ("s@L=0", "s@L=1"), ("s@L=1", "fin")},               # L=1 stands for 1..2
     {("load", "s@L=0"), ("s@L=0", "s@L=1"), ("s@L=1", "s@L=2"), ("s@L=2", "fin")}),
])
def test_task_carry_after_its_loop(tmp_path: Path, trips: int, window: set[tuple[str, str]],
                                   full: set[tuple[str, str]]) -> None:
    """`deps(prev)` after the loop raised KeyError; it now means what a tensor carry means there:
    NEXT of the last iteration, INIT when the loop ran none."""
    text = HDR + (f"entry m {{\n  manual scope {{\n    at load {{ call copy(x, y) }}\n"
                  f"    for L in 0..{trips} carry prev = load then s {{\n      at s deps(prev) {{ call rd(y) }}\n    }}\n"
                  "    at fin deps(prev) { call rd(y) }\n  }\n}\n")
    path = spec(tmp_path, text)
    assert edges(path) == window
    assert edges(path, full=True) == full


# ---- window expansion against full expansion -----------------------------------------------------

def counts(path: Path, full: bool) -> dict[str, int]:
    plan, bag = plan_program(path, Options(full=full))
    assert plan is not None, [d.message for d in bag.items]
    return dict(report_facts(plan)["summary"])


@pytest.mark.parametrize("trips", [3, 5])
def test_out_writes_to_a_buffer_outside_the_loop_accumulate(tmp_path: Path, trips: int) -> None:
    """An auto-scope `out` argument (OUTPUT_EXISTING) inserts a TensorMap entry and removes none,
    so `fin` reading g after the loop waits on load and on every iteration's `over`. The window
    showed two iterations and counted 3 inferred edges for any trip count.

    By hand: inferred = 1 (load) + trips (over@0..); explicit = trips (the carry chain)."""
    text = HDR + (f"entry m {{\n  tensor g : f32[R, C]\n  at load {{ call copy(x, g) }}\n"
                  f"  for L in 0..{trips} carry prev = load then over {{\n    at over deps(prev) {{ call copy(x, g) }}\n"
                  "  }\n  at fin { call rd(g) }\n}\n")
    path = spec(tmp_path, text)
    expected = dict(tasks=trips + 2, dummy_tasks=0, blocks=trips + 2, explicit_edges=trips,
                    inferred_edges=1 + trips, duplicate_dep_entries=0)
    assert counts(path, full=False) == expected
    assert counts(path, full=True) == expected


def test_loop_identity_looks_at_argument_regions(tmp_path: Path) -> None:
    """The TensorMap sees the call's argument g[L], not the narrower `writes g[0]` clause; a loop
    judged identical from the clause alone undercounted inferred edges (8 instead of 10)."""
    text = HDR + ("entry m {\n  tensor g : f32[R, C]\n  at load { call copy(x, g) }\n  for L in 0..4 {\n"
                  "    at bump { writes g[0 +: 1, :]\n call incrow(g[L +: 1, :]) }\n"
                  "    at look { call rdrow(g[2 +: 1, :]) }\n  }\n}\n")
    path = spec(tmp_path, text)
    assert counts(path, full=False) == counts(path, full=True)
    # by hand: bump@L looks up g[L] (load, and nothing else: rows differ) = 4; look@L reads row 2:
    # load plus bump@2 once it exists (L >= 2) = 1 + 1 + 2 + 2 = 6
    assert counts(path, full=True)["inferred_edges"] == 10


def test_windowed_race_count_says_or_more(tmp_path: Path) -> None:
    """The window finds 1 of the 3 unordered (look@i, bump@j>i) pairs of 3 iterations and printed
    no count; it now says the count is a lower bound. Full expansion counts all 3."""
    text = HDR + ("kernel inc aiv (acc : inout f32[R, C])\nentry m {\n  tensor g : f32[R, C]\n"
                  "  at load { call copy(x, g) }\n  for L in 0..3 {\n    at bump { call inc(g) }\n"
                  "    at look { call rd(g) }\n  }\n  at store { call copy(g, y) }\n}\n")
    path = spec(tmp_path, text)
    _, bag = plan_program(path, Options())
    race = next(d for d in bag.items if d.code == "PG100")
    assert "(1 instance pair or more: only two iterations of the loop are expanded)" in race.message
    _, bag = plan_program(path, Options(full=True))
    race = next(d for d in bag.items if d.code == "PG100")
    assert race.message.endswith("(3 instance pairs)")


# ---- integer magnitudes ----------------------------------------------------------------------------

def test_runaway_constant_growth_is_pg018(tmp_path: Path) -> None:
    """A(k+1) = A(k)*A(k) forty times needs 10**(2**40) (a trillion digits): it ran until memory
    ran out. A 1,200-digit constant cubed printed in an assert message raised ValueError (Python
    refuses str() of more than 4300 digits). Every +, -, * result is now bounded by 2**4096."""
    squares = "const A0 = 10\n" + "".join(f"const A{k + 1} = A{k}*A{k}\n" for k in range(40))
    assert codes(spec(tmp_path, squares + CLEAN, "a.pgl")) == ["PG018"]
    cubed = "const B = " + "9" * 1200 + "\nconst D = B*B*B\nassert D == 1\n"
    assert codes(spec(tmp_path, cubed + CLEAN, "b.pgl")) == ["PG018"]


def test_shape_beyond_int64_is_pg018(tmp_path: Path) -> None:
    """Four dims of 2**1000 gave a heap byte count of 1,200+ digits in PG110 (a ValueError at 4300)."""
    text = HDR + "const H = " + str(2**1000) + "\nentry m {\n  tensor big : f32[H, H, H, H, H]\n  at t { call copy(x, y) }\n}\n"
    assert codes(spec(tmp_path, text)) == ["PG018"]


@pytest.mark.parametrize("define", ["R=\u0663", "R=_1", "R\u00e4=3", "R=" + "9" * 1300])
def test_odd_define_values_are_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str], define: str) -> None:
    """`-D R=٣` (an Arabic-Indic digit, which int() accepts) and `_1` were taken as 3 and 1; the
    grammar's INT is ASCII digits and underscores after the first digit."""
    code, _, err = cli(capsys, "check", str(spec(tmp_path, CLEAN)), "-D", define)
    assert code == 2 and err.startswith("pgraph: error: -D")


def test_define_with_underscores_and_sign_still_works(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(capsys, "check", str(spec(tmp_path, CLEAN)), "-D", "R=+0_004")[0] == 0


def test_bad_loop_range_does_not_cascade_through_its_carries(tmp_path: Path) -> None:
    """`--layers -1` on the real spec reported the tensor carry `cur` as undeclared after the loop."""
    text = HDR + ("entry m {\n  tensor h0 : f32[R, C]\n  at load { call copy(x, h0) }\n"
                  "  for L in 0..R-5 carry cur = h0 then h {\n    tensor h : f32[R, C]\n"
                  "    at s { call copy(cur, h) }\n  }\n  at store { call copy(cur, y) }\n}\n")
    assert codes(spec(tmp_path, text)) == ["PG006"]


# ---- performance on a 10,000-line spec ---------------------------------------------------------------

def test_ten_thousand_readers_of_one_buffer_are_not_quadratic(tmp_path: Path) -> None:
    """The race pass compared all 50 million reader pairs of one buffer (25 s); only pairs with a
    writer can conflict. 3,000 readers keep the test fast: by hand, the one writer `w` is ordered
    before every reader by an inferred RAW edge, so there is no race and 3,000 inferred edges."""
    body = "".join(f"  at r{k} {{ call rd(g) }}\n" for k in range(3000))
    text = HDR + "entry m {\n  tensor g : f32[R, C]\n  at w { call copy(x, g) }\n" + body + "}\n"
    plan, bag = plan_program(spec(tmp_path, text), Options())
    assert plan is not None and report_facts(plan)["races"] == 0
    assert report_facts(plan)["summary"]["inferred_edges"] == 3000


def test_build_into_a_blocked_folder_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`orchestration` existing as a file: kernel_config.py was written before the failure."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "orchestration").write_text("", encoding="utf-8")
    code, _, err = cli(capsys, "build", "--target", "a2a3", str(spec(tmp_path, CLEAN)), "-o", str(out))
    assert code == 2 and "cannot write" in err
    assert sorted(p.name for p in out.iterdir()) == ["orchestration"]


def test_config_overriding_a_constant_twice_is_pg003(tmp_path: Path) -> None:
    """The second line silently won."""
    spec(tmp_path, "const R = 5\nconst R = 6\n", "twice.pgl")
    assert codes(spec(tmp_path, CLEAN), config=str(tmp_path / "twice.pgl")) == ["PG003"]


def test_window_sees_a_race_between_distant_iterations_in_a_manual_scope(tmp_path: Path) -> None:
    """By hand: t0@L writes row L % 4 of g, so t0@0 and t0@4 write row 0 with no path between them
    (a manual scope infers nothing). `Options(full=True)` reports PG100; the window expands L = 0, 1."""
    text = HDR + ("kernel io aiv (acc : inout f32[1, 4])\nentry m {\n  tensor g : f32[R, C]\n  for L in 0..5 {\n"
                  "    manual scope {\n      at t0 { call io(g[L % 4 +: 1, 0 +: 4]) }\n    }\n  }\n"
                  "  at fin { call r1(g[0 +: 1, 0 +: 4]) }\n}\n")
    path = spec(tmp_path, text)
    assert "PG100" in codes(path, full=True)
    assert "PG100" in codes(path)


def test_writes_through_a_tensor_carry_mark_the_buffer_written(tmp_path: Path) -> None:
    """`cur` aliases h of the previous iteration, but the loop-identity check took the write through
    `cur` as a write of a tensor named 'cur', so h's loop-dependent reads looked harmless and the
    window missed the WAR race. By hand: t0@1 reads h@1[1, 4:8]; t1@2 writes it (InOut through
    cur) with no path between them (the TensorMap infers no write-after-read)."""
    text = HDR + ("kernel io aiv (acc : inout f32[1, 4])\nentry m {\n  tensor h0 : f32[R, C]\n"
                  "  for L in 0..5 carry cur = h0 then h {\n    tensor h : f32[R, C]\n"
                  "    at t0 { call r1(h[L % 4 +: 1, 4 +: 4]) }\n    at t1 { call io(cur[1 +: 1, 4 +: 4]) }\n  }\n}\n")
    path = spec(tmp_path, text)
    assert "PG100" in codes(path, full=True)
    assert codes(path) == codes(path, full=True)


def test_per_layer_slabs_keep_the_real_specs_windowed() -> None:
    """k_cache[L*CACHE_ROWS +: CACHE_ROWS, :] gives each layer its own slab: the slab check keeps the
    40-layer spec at two expanded iterations (the window), so planning stays fast."""
    from pgraph.pipeline import Options, plan_program
    from tests.conftest import HEAD_SPEC, VARIANT_762

    for spec in (HEAD_SPEC, VARIANT_762):
        plan, bag = plan_program(spec, Options())
        assert plan is not None and plan.graph.windowed == {lp.id for lp in plan.program.loops if lp.axis.size > 2}
