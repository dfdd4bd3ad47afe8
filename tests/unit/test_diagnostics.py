"""The diagnostics corpus (tests/diagnostics/) and the rendering of diagnostics.

Every error/warning code of `RULES` (PG0xx language, PG1xx planner rules) has a failing spec `PGxxx_<slug>.pgl` whose
offending lines carry `# expect: PGxxx`, and a fixed spec `PGxxx_<slug>.fixed.pgl` that plans
without errors. Conventions read by this runner:

- `# expect: PG007` (several codes allowed, separated by spaces or commas) at the end of a line:
  that code is reported on that line. Markers in helper files under tests/diagnostics/inc/ count
  when the spec includes the helper.
- `# args: -D NAME=VALUE --config X --layers N` on a line of its own: the command-line options of
  the run (parsed by the CLI's own parser). An `# expect:` on that line means the diagnostic is
  located on the command line (`<command line>:1:1`).

A failing spec must report every marked (file, line, code) and no other error (and no other
warning of a PG0xx code; notes and the planner rules' warnings may appear). A fixed spec must plan
with no error and no PG0xx warning. docs/rules.md must have a `## PGxxx slug` section per code
whose failing/fixed example lines are lines of these two files.

Expected values in the rendering tests are computed here from the spec text (line and column of
the offending token) or by hand from the Qwen3-14B constants, never copied from pgraph's output.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from pgraph.cli import build_parser, main
from pgraph.diagnostics import (
    MAX_ERRORS,
    RULES,
    Diagnostic,
    DiagnosticBag,
    Severity,
    render_all_text,
    render_json,
    render_text,
)
from pgraph.pipeline import Options, parse_define, plan_program
from tests.conftest import ROOT

CORPUS = ROOT / "tests" / "diagnostics"
EXPECT = re.compile(r"#\s*expect:\s*(PG\d{3}(?:[\s,]+PG\d{3})*)")
ARGS = re.compile(r"^#\s*args:\s*(.*?)\s*(?:#.*)?$")
INCLUDE = re.compile(r'^\s*include\s+"([^"]+)"', re.M)
COMMAND_LINE = "<command line>"

Where = tuple[str, int, str]  # (resolved file or <command line>, line, code)


def corpus_codes() -> list[str]:
    """The codes that need a failing and a fixed spec: every error and warning code."""
    return sorted(c for c, r in RULES.items() if r.severity is not Severity.NOTE)


def corpus_files() -> list[Path]:
    """The corpus specs (language codes PG0xx and planner rules PG1xx)."""
    return sorted(CORPUS.glob("PG*.pgl"))


def failing_specs() -> list[Path]:
    return [p for p in corpus_files() if not p.name.endswith(".fixed.pgl")]


def fixed_specs() -> list[Path]:
    return [p for p in corpus_files() if p.name.endswith(".fixed.pgl")]


def spec_options(spec: Path) -> tuple[Options, int | None]:
    """The Options of the spec's `# args:` line (through the CLI parser) and that line's number."""
    for number, line in enumerate(spec.read_text(encoding="utf-8").splitlines(), 1):
        m = ARGS.match(line)
        if m:
            ns = build_parser().parse_args(["check", str(spec), *shlex.split(m.group(1))])
            defines = tuple(parse_define(d) for d in ns.defines)
            return Options(defines=defines, config=ns.config, layers=ns.layers), number
    return Options(), None


def included_files(spec: Path) -> list[Path]:
    """`spec` and every file it includes, transitively (cycles followed once)."""
    out: list[Path] = []
    todo = [spec.resolve()]
    while todo:
        path = todo.pop()
        if path in out or not path.is_file():
            continue
        out.append(path)
        todo.extend((path.parent / inc).resolve() for inc in INCLUDE.findall(path.read_text(encoding="utf-8")))
    return out


def expectations(spec: Path) -> set[Where]:
    """Every `# expect:` marker of the spec and the helpers it includes."""
    _, args_line = spec_options(spec)
    out: set[Where] = set()
    for path in included_files(spec):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            m = EXPECT.search(line)
            if not m:
                continue
            on_command_line = path == spec.resolve() and number == args_line
            for code in re.split(r"[\s,]+", m.group(1).strip()):
                out.add((COMMAND_LINE, 1, code) if on_command_line else (str(path), number, code))
    return out


def where(diag: Diagnostic) -> Where:
    if diag.span is None:
        return ("", 0, diag.code)
    path = diag.span.file.path
    return (str(path.resolve()) if path is not None else diag.span.filename, diag.span.line, diag.code)


def plan(spec: Path) -> DiagnosticBag:
    opts, _ = spec_options(spec)
    _, bag = plan_program(spec, opts)
    return bag


def only(bag: DiagnosticBag, code: str) -> Diagnostic:
    found = [d for d in bag.sorted() if d.code == code]
    assert len(found) == 1, [(d.code, d.message) for d in bag.sorted()]
    return found[0]


def line_col(path: Path, needle: str, occurrence: int = 0) -> tuple[int, int]:
    """1-based line and column of the `occurrence`-th `needle` in `path` (comments included)."""
    seen = 0
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        start = 0
        while (col := line.find(needle, start)) >= 0:
            if seen == occurrence:
                return number, col + 1
            seen += 1
            start = col + 1
    raise AssertionError(f"{needle!r} not in {path}")


# ---- the corpus --------------------------------------------------------------------------


@pytest.mark.parametrize("code", corpus_codes())
def test_corpus_has_a_failing_and_a_fixed_spec(code: str) -> None:
    slug = RULES[code].slug.replace("-", "_")
    names = {p.name for p in corpus_files()}
    missing = [n for n in (f"{code}_{slug}.pgl", f"{code}_{slug}.fixed.pgl") if n not in names]
    assert not missing, (f"{code} {RULES[code].slug} is an error/warning code: add tests/diagnostics/"
                         f"{' and '.join(missing)} (see the module docstring) and a docs/rules.md section")


def test_corpus_files_are_named_after_their_code() -> None:
    for path in corpus_files():
        code = path.name[:5]
        assert code in RULES, path.name
        assert path.name.startswith(f"{code}_{RULES[code].slug.replace('-', '_')}."), path.name


def test_every_code_is_emitted_somewhere() -> None:
    """A code in RULES that no module can produce is dead documentation."""
    sources = "".join(p.read_text(encoding="utf-8") for p in (ROOT / "pgraph").rglob("*.py"))
    table = re.search(r"^RULES: .*?^\)$", sources, flags=re.S | re.M)
    assert table is not None
    sources = sources.replace(table.group(0), "")  # the table itself does not count
    dead = [c for c in RULES if f'"{c}"' not in sources]
    assert not dead, dead


@pytest.mark.parametrize("spec", failing_specs(), ids=lambda p: p.stem)
def test_failing_spec_reports_exactly_the_expected_codes(spec: Path) -> None:
    expected = expectations(spec)
    own = spec.name[:5]
    assert any(code == own for _, _, code in expected), f"{spec.name} marks no `# expect: {own}`"
    bag = plan(spec)
    reported = {where(d) for d in bag.items}
    missing = expected - reported
    assert not missing, f"expected but not reported: {sorted(missing)}; reported: {sorted(reported)}"
    unexpected = [
        (where(d), d.message) for d in bag.items
        if where(d) not in expected
        and (d.level is Severity.ERROR or (d.level is Severity.WARNING and int(d.code[2:]) < 100))
    ]
    assert not unexpected, unexpected


@pytest.mark.parametrize("spec", fixed_specs(), ids=lambda p: p.stem)
def test_fixed_spec_plans_without_errors(spec: Path) -> None:
    assert not EXPECT.search(spec.read_text(encoding="utf-8")), "a fixed spec expects nothing"
    opts, _ = spec_options(spec)
    result, bag = plan_program(spec, opts)
    assert result is not None
    bad = [(d.code, d.message) for d in bag.items
           if d.level is Severity.ERROR or (d.level is Severity.WARNING and int(d.code[2:]) < 100)]
    assert not bad, bad
    own = spec.name[:5]   # the fix must silence its own code, whatever its severity
    assert own not in {d.code for d in bag.items}, [d.message for d in bag.items if d.code == own]


def test_args_header_is_applied() -> None:
    """PG017: the failing spec's -D is a typo; the same spec without the -D plans clean."""
    spec = CORPUS / "PG017_unknown_override.pgl"
    opts, line = spec_options(spec)
    assert opts.defines == (("NUM_LAYER", 2),) and line == 1
    assert not plan_program(spec, Options())[1].has_errors
    diag = only(plan(spec), "PG017")
    assert diag.span is not None and diag.span.filename == COMMAND_LINE
    assert diag.hint == "did you mean 'NUM_LAYERS'?"


# ---- rendering ---------------------------------------------------------------------------


def test_text_rendering_location_carets_notes_and_hint() -> None:
    spec = CORPUS / "PG013_dependency_cycle.pgl"
    diag = only(plan(spec), "PG013")
    lines = render_text(diag).splitlines()
    # the dep that names a task submitted later (the dummy waiting on q_proj) is the primary span
    line, col = line_col(spec, "deps(q_proj)")
    col += len("deps(")
    source = spec.read_text(encoding="utf-8").splitlines()[line - 1]
    assert re.fullmatch(
        rf"\S*PG013_dependency_cycle\.pgl:{line}:{col}: error\[PG013 dependency-cycle\]: dependency cycle: .*",
        lines[0],
    ), lines[0]
    assert lines[1] == f"{line:>5} | {source}"
    assert lines[2] == "      | " + " " * (col - 1) + "^" * len("q_proj")
    note_heads = [x for x in lines if x.startswith("  note: ")]
    assert len(note_heads) == 3  # one per edge of the 3-cycle, each with its own location
    for head in note_heads:
        m = re.match(r"  note: \S*PG013_dependency_cycle\.pgl:(\d+):(\d+): (\S+) waits on (\S+)$", head)
        assert m, head
        n_line, n_col, consumer, producer = int(m[1]), int(m[2]), m[3], m[4]
        text = spec.read_text(encoding="utf-8").splitlines()[n_line - 1]
        assert consumer in text and text[n_col - 1:].startswith(producer)
    assert lines[-1].startswith("  hint: ")


def test_all_text_counts_errors_and_warnings() -> None:
    bag = plan(CORPUS / "PG015_empty_dep.pgl")
    text = render_all_text(bag.sorted())
    errors = sum(d.level is Severity.ERROR for d in bag.items)
    warnings = sum(d.level is Severity.WARNING for d in bag.items)
    assert text.endswith(f"\n\n{errors} error(s), {warnings} warning(s)\n")
    assert "warning[PG015 empty-dep]" in text


def test_json_format_of_pgraph_check(capsys: pytest.CaptureFixture[str]) -> None:
    spec = CORPUS / "PG012_kernel_arg_shape.pgl"
    assert main(["check", str(spec), "--format", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert isinstance(data, list) and data
    diag = next(d for d in data if d["code"] == "PG012")
    assert set(diag) == {"code", "slug", "severity", "message", "span", "notes", "hint", "fix"}
    assert (diag["slug"], diag["severity"]) == ("kernel-arg-shape", "error")
    line, col = line_col(spec, "wq[ks*QKV_K_SLICE +: QKV_N_TILE")
    assert diag["span"]["file"].endswith("PG012_kernel_arg_shape.pgl")
    assert (diag["span"]["line"], diag["span"]["col"]) == (line, col)
    assert diag["span"]["end_line"] == line and diag["span"]["end_col"] > col
    assert diag["notes"] and diag["notes"][0]["span"]["line"] == line_col(spec, "w : in bf16")[0]
    # the JSON text is stable: sorted keys, same bytes for the same input
    assert render_json(plan(spec).sorted()) == render_json(plan(spec).sorted())


def test_clean_spec_json_is_an_empty_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(CORPUS / "PG008_assert_failed.fixed.pgl"), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


# ---- message contents ------------------------------------------------------------------------


def test_dependency_cycle_message_prints_the_whole_cycle(tmp_path: Path) -> None:
    """A 4-cycle: every consecutive pair `x -> y` of the message is a declared `y deps(x)`."""
    spec = tmp_path / "cycle.pgl"
    spec.write_text(
        "tensor x : f32[16, 5120] external\n"
        "kernel touch aiv (a : inout f32[16, 5120])\n"
        "entry decode {\n  manual scope {\n"
        "    at rms_recip deps(dcr_xgamma) { call touch(x) }\n"
        "    at q_proj deps(rms_recip) { call touch(x) }\n"
        "    at fa_fused deps(q_proj) { call touch(x) }\n"
        "    at dcr_xgamma deps(fa_fused) { call touch(x) }\n"
        "  }\n}\n",
        encoding="utf-8",
    )
    _, bag = plan_program(spec)
    diag = only(bag, "PG013")
    names = diag.message.removeprefix("dependency cycle: ").split(" -> ")
    assert len(names) == 5 and names[0] == names[-1]
    assert sorted(names[:-1]) == ["dcr_xgamma", "fa_fused", "q_proj", "rms_recip"]
    declared = {("dcr_xgamma", "rms_recip"), ("rms_recip", "q_proj"), ("q_proj", "fa_fused"),
                ("fa_fused", "dcr_xgamma")}
    assert set(zip(names, names[1:], strict=False)) == declared
    # the only edge naming a later-submitted producer is rms_recip's dep on dcr_xgamma
    assert names[0] == "dcr_xgamma"
    assert diag.span is not None and diag.span.line == 5


def test_failed_assert_shows_the_evaluated_values() -> None:
    """DOWN_TN = 1536: DOWN_ON = 5120 // 1536 = 3 and 3 * 1536 = 4608 != 5120 (by hand)."""
    bag = plan(CORPUS / "PG008_assert_failed.pgl")
    first, second = (d for d in bag.sorted() if d.code == "PG008")
    assert first.message.startswith("assert failed: down_proj N tiles cover HIDDEN (")
    for part in ("DOWN_ON = 3", "DOWN_TN = 1536", "HIDDEN = 5120", "left side = 4608", "right side = 5120"):
        assert part in first.message, first.message
    assert second.message.startswith("assert failed: silu/down K-slice alignment (")
    for part in ("MLP_TN = 1024", "DOWN_TN = 1536", "left side = 1024", "right side = 1536"):
        assert part in second.message, second.message


def _include_tree(tmp_path: Path, leaf: str) -> Path:
    (tmp_path / "sub").mkdir()
    (tmp_path / "root.pgl").write_text(
        '# decode root\ninclude "sub/mid.pgl"\nentry decode { }\n', encoding="utf-8")
    (tmp_path / "sub" / "mid.pgl").write_text(
        'const HIDDEN = 5120\n\ninclude "leaf.pgl"\n', encoding="utf-8")
    (tmp_path / "sub" / "leaf.pgl").write_text(leaf, encoding="utf-8")
    return tmp_path / "root.pgl"


def test_include_chain_in_notes_for_an_error_in_an_included_file(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    root = _include_tree(tmp_path, 'const DOWN_TN = 1536\nassert HIDDEN % DOWN_TN == 0, "tiles cover HIDDEN"\n')
    _, bag = plan_program(Path("root.pgl"))
    diag = only(bag, "PG008")
    assert diag.span is not None and diag.span.location() == "sub/leaf.pgl:2:1"
    assert [n.message for n in diag.notes] == [
        "in a file included from sub/mid.pgl:3:1",
        "in a file included from root.pgl:2:1",
    ]
    assert root.is_file()


def test_include_chain_in_notes_for_a_syntax_error_in_an_included_file(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _include_tree(tmp_path, "const DOWN_TN 1536\n")
    _, bag = plan_program(Path("root.pgl"))
    diag = only(bag, "PG001")
    assert diag.span is not None and diag.span.location() == "sub/leaf.pgl:1:15"
    assert diag.message.startswith("a constant needs '=' between its name and value")
    assert [n.message for n in diag.notes] == [
        "in a file included from sub/mid.pgl:3:1",
        "in a file included from root.pgl:2:1",
    ]


def test_include_cycle_names_every_file_of_the_cycle() -> None:
    diag = only(plan(CORPUS / "PG004_include_cycle.pgl"), "PG004")
    assert "(PG004_include_cycle.pgl -> cycle_model.pgl -> PG004_include_cycle.pgl)" in diag.message
    assert [n.span.filename.rsplit("/", 1)[-1] for n in diag.notes if n.span] == ["PG004_include_cycle.pgl"]


# QKV tiling by hand: QKV_K_SLICE = 5120 / 5 = 1024, QKV_N_TILE = 512.
@pytest.mark.parametrize(("code", "needles"), [
    ("PG009", ["kernel 'qkv_matmul' takes 3 argument(s), this call passes 2"]),
    ("PG010", ["'q_acc' is passed as out ('acc')", "atomic_add"]),
    ("PG011", ["'cur' is f32 but parameter 'x' of 'qkv_matmul' is bf16"]),
    ("PG012", ["shape [512, 512]", "parameter 'w' of 'qkv_matmul' expects [1024, 512]"]),
])
def test_kernel_argument_checks_each_fire(code: str, needles: list[str]) -> None:
    spec = next(p for p in failing_specs() if p.name.startswith(code))
    diag = only(plan(spec), code)
    for needle in needles:
        assert needle in diag.message, diag.message
    # the note points at the declaration the call disagrees with
    assert diag.notes and diag.notes[0].span is not None
    decl = spec.read_text(encoding="utf-8").splitlines()[diag.notes[0].span.line - 1]
    assert "kernel qkv_matmul" in decl or re.match(r"\s*(x|w|acc) :", decl), decl


def test_duplicate_deps_note_counts_the_folded_entries() -> None:
    """post_rms_reduce waits on all 50 out_proj tiles; the 24 direct tiles are one SPMD task,
    so 24 entries make 1 edge: 23 fold (the 26 deferred tiles are 26 separate tasks)."""
    diag = only(plan(CORPUS / "PG016_duplicate_deps_folded.pgl"), "PG016")
    assert diag.level is Severity.NOTE
    assert diag.message.startswith("23 duplicate dep entries of 'post_rms_reduce'")
    assert not [d for d in plan(CORPUS / "PG016_duplicate_deps_folded.fixed.pgl").items if d.code == "PG016"]


def test_empty_dep_is_a_warning_not_an_error() -> None:
    bag = plan(CORPUS / "PG015_empty_dep.pgl")
    diag = only(bag, "PG015")
    assert diag.level is Severity.WARNING and not bag.has_errors


# ---- PG030: the error cap -------------------------------------------------------------------


def test_too_many_errors_keeps_the_first_hundred(tmp_path: Path) -> None:
    total = 150
    spec = tmp_path / "many.pgl"
    spec.write_text("".join(f'assert {i} == {i + 1}, "geometry {i}"\n' for i in range(total))
                    + "entry decode { }\n", encoding="utf-8")
    _, bag = plan_program(spec)
    errors = [d for d in bag.items if d.level is Severity.ERROR]
    assert len(errors) == MAX_ERRORS == 100
    assert [d.span.line for d in errors if d.span] == list(range(1, 101))
    cap = only(bag, "PG030")
    assert cap.level is Severity.NOTE and cap.span is None
    assert cap.message.startswith(f"{total - MAX_ERRORS} more error(s) not shown")
    assert bag.sorted()[-1] is cap
    assert render_text(cap).startswith("pgraph: note[PG030 too-many-errors]: 50 more error(s)")


def test_error_cap_keeps_warnings_and_ignores_duplicates() -> None:
    bag = DiagnosticBag()
    for i in range(MAX_ERRORS):
        bag.add("PG002", f"name {i}")
    bag.add("PG002", "name 0")  # an exact duplicate is not a new error
    assert not [d for d in bag.items if d.code == "PG030"]
    bag.add("PG015", "an empty dep")
    bag.add("PG002", "one more")
    assert bag.error_count() == MAX_ERRORS and bag.suppressed == 1
    assert {d.code for d in bag.items} == {"PG002", "PG015", "PG030"}


# ---- docs/rules.md ----------------------------------------------------------------------------

RULES_DOC = ROOT / "docs" / "rules.md"
#: Codes about the language itself (no runtime or compiler fact behind them) need no source.
NO_RUNTIME_SOURCE = {"PG001", "PG005", "PG017", "PG018", "PG030"}
#: A runtime or compiler fact cites its section of docs/upstream.md; a language requirement its
#: section of docs/language.md.
SOURCES = ("docs/upstream.md §", "docs/language.md §")


def doc_sections() -> dict[str, str]:
    text = RULES_DOC.read_text(encoding="utf-8")
    parts = re.split(r"^(## PG\d{3} \S+)[ \t]*$", text, flags=re.M)
    return {head[3:8]: head + body for head, body in zip(parts[1::2], parts[2::2], strict=True)}


def _code_lines(block: str) -> list[str]:
    """Non-empty lines of an example, comments dropped, whitespace collapsed (`# args:` kept)."""
    out = []
    for line in block.splitlines():
        stripped = line.strip()
        if stripped.startswith("# args:"):
            out.append(" ".join(EXPECT.sub("", stripped).split()))
            continue
        code = re.sub(r'#[^"]*$', "", line)  # corpus comments never contain a quote
        if code.strip():
            out.append(" ".join(code.split()))
    return out


def test_rules_doc_sections_are_known_codes_once_each() -> None:
    text = RULES_DOC.read_text(encoding="utf-8")
    for code in doc_sections():
        assert code in RULES, code
        heading = rf"^## {code} {re.escape(RULES[code].slug)}$"
        assert len(re.findall(heading, text, flags=re.M)) == 1, f"`## {code} {RULES[code].slug}` once"


@pytest.mark.parametrize("code", sorted(RULES))
def test_rules_doc_section_explains_and_shows_the_corpus_examples(code: str) -> None:
    sections = doc_sections()
    assert code in sections, f"docs/rules.md needs a section `## {code} {RULES[code].slug}`"
    body = sections[code]
    severity = RULES[code].severity.value.capitalize()
    assert f"**{severity}.**" in body, "the section states the severity"
    assert "Why it matters" in body
    if code not in NO_RUNTIME_SOURCE:
        assert any(src in body for src in SOURCES), "the why names its reference source"
    blocks = re.findall(r"```pgl\n(.*?)```", body, flags=re.S)
    if code == "PG030":
        return
    assert len(blocks) == 2, "a failing and a fixed example"
    failing = next(p for p in failing_specs() if p.name.startswith(code))
    fixed = failing.with_name(failing.name.replace(".pgl", ".fixed.pgl"))
    for block, spec in zip(blocks, (failing, fixed), strict=True):
        corpus = set()
        for path in included_files(spec):
            corpus.update(_code_lines(path.read_text(encoding="utf-8")))
        for line in _code_lines(block):
            assert line in corpus, f"{line!r} is not a line of {spec.name}"
