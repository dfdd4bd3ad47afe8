"""Every example of docs/language.md parses, and every complete one plans as the doc says.

Fenced blocks by info string:
- ```pgl: a complete file. It must parse and plan with no error; a block without an `entry`
  is planned with an empty entry appended. `# counts: k=v ...` / `# per_layer: k=v ...`
  lines give values the report's `summary` / `per_layer` must show.
- ```pgl-fragment: a piece of a file; it must parse on its own or inside one of the wrappers.
- ```pgl-error PG### ...: planning must report every named code as an error.
Blocks are written to a temporary folder next to copies of tests/examples/lang_*.pgl, so
`include "lang_common.pgl"` resolves as the doc says.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from pgraph.backends.report import report_facts
from pgraph.diagnostics import DiagnosticBag, Severity
from pgraph.frontend import ast
from pgraph.frontend.parser import parse_source
from pgraph.pipeline import Options, plan_program
from pgraph.source import SourceFile
from tests.conftest import ROOT

DOC = ROOT / "docs" / "language.md"
EXAMPLES = ROOT / "tests" / "examples"
FENCE = re.compile(r"^```([A-Za-z0-9_-]*)[ \t]*([^\n]*)\n(.*?)^```[ \t]*$", re.S | re.M)
COUNT_LINE = re.compile(r"^#\s*(counts|per_layer):\s*(.*)$", re.M)
FRAGMENT_WRAPPERS = (
    "{}",
    "entry _doc {{\n{}\n}}",
    "entry _doc {{\n  tiles _t[i in 0..1] {{\n{}\n  }}\n}}",
    "entry _doc {{\n  at _t {}\n}}",
)


def doc_blocks() -> list[tuple[int, str, str, str]]:
    """(line, kind, info rest, text) of every fenced block whose kind starts with 'pgl'."""
    text = DOC.read_text(encoding="utf-8")
    out = []
    for m in FENCE.finditer(text):
        kind = m.group(1)
        if kind.startswith("pgl"):
            out.append((text.count("\n", 0, m.start()) + 1, kind, m.group(2).strip(), m.group(3)))
    return out


BLOCKS = doc_blocks()


def _params(kind: str) -> list[object]:
    return [pytest.param(b, id=f"line{b[0]}") for b in BLOCKS if b[1] == kind]


def _parse(text: str) -> ast.Module | None:
    bag = DiagnosticBag()
    return parse_source(SourceFile("<doc>", text), bag)


def _write(tmp_path: Path, text: str) -> Path:
    for f in EXAMPLES.glob("lang_*.pgl"):
        shutil.copy(f, tmp_path / f.name)
    path = tmp_path / "example.pgl"
    path.write_text(text, encoding="utf-8")
    return path


def _with_entry(text: str) -> str:
    module = _parse(text)
    assert module is not None
    if any(isinstance(item, ast.Entry) for item in module.items):
        return text
    return text + "\nentry _doc_check { }\n"


def _expected(text: str) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for m in COUNT_LINE.finditer(text):
        key = "summary" if m.group(1) == "counts" else "per_layer"
        out[key] = {k: int(v) for k, v in (pair.split("=") for pair in m.group(2).split())}
    return out


def test_doc_has_examples() -> None:
    kinds = {b[1] for b in BLOCKS}
    assert kinds == {"pgl", "pgl-fragment", "pgl-error"}, kinds
    assert sum(1 for b in BLOCKS if b[1] == "pgl") >= 10


@pytest.mark.parametrize("block", _params("pgl"))
def test_complete_example_plans(block: tuple[int, str, str, str], tmp_path: Path) -> None:
    line, _, _, text = block
    assert _parse(text) is not None, f"docs/language.md:{line}: does not parse"
    plan, bag = plan_program(_write(tmp_path, _with_entry(text)), Options())
    errors = [f"{d.code} {d.message}" for d in bag.items if d.level is Severity.ERROR]
    assert plan is not None and not errors, f"docs/language.md:{line}: {errors}"
    for key, want in _expected(text).items():
        got = report_facts(plan)[key]
        assert got is not None, f"docs/language.md:{line}: no {key}"
        assert {k: got[k] for k in want} == want, f"docs/language.md:{line}: {key}"


@pytest.mark.parametrize("block", _params("pgl-fragment"))
def test_fragment_parses(block: tuple[int, str, str, str]) -> None:
    line, _, _, text = block
    ok = any(_parse(wrapper.format(text)) is not None for wrapper in FRAGMENT_WRAPPERS)
    assert ok, f"docs/language.md:{line}: the fragment parses in none of the wrappers"


@pytest.mark.parametrize("block", _params("pgl-error"))
def test_error_example_fails(block: tuple[int, str, str, str], tmp_path: Path) -> None:
    line, _, info, text = block
    codes = set(info.split())
    assert codes and all(re.fullmatch(r"PG\d{3}", c) for c in codes), f"docs/language.md:{line}: {info!r}"
    plan, bag = plan_program(_write(tmp_path, _with_entry(text)), Options())
    got = {d.code for d in bag.items if d.level is Severity.ERROR}
    assert codes <= got, f"docs/language.md:{line}: expected {sorted(codes)}, got {sorted(got)}"


def test_common_include_matches_doc() -> None:
    """The include file the doc shows is the one the examples use."""
    shown = [b[3] for b in BLOCKS if b[1] == "pgl" and "Shared declarations of the docs" in b[3]]
    assert shown == [(EXAMPLES / "lang_common.pgl").read_text(encoding="utf-8")]


#: Every keyword and operator of grammar/pgl.lark appears in some example of the doc.
CONSTRUCTS = (
    "include ", "const ", "assert ", "tensor ", "external", "scalar ", "view ", " as [", "kernel ", "extern ",
    "source ", " in ", " out ", " inout ", " atomic_add ", "scalar i", " aic ", " aiv ", " mix ", "entry ",
    "auto scope", "manual scope", "ring ", "for ", "unscoped", "carry ", " then ", "phase ", "taskids ", "let ",
    "at ", "spmd ", "parallel ", "dummy ", "tiles ", "wave ", ": parallel", ": spmd", "spmd(", "early",
    "sync_start", "deps(", ", *]", "..", "+:", "reads ", "writes ", "atomic_add ", "indirect(", "call ", "ceildiv(",
    "min(", "max(", " % ", " and ", " or ", "not ", "==", "target ", "cost ", "fragment ", "use ", "#",
)


def test_every_construct_has_an_example() -> None:
    text = "\n".join(b[3] for b in BLOCKS)
    missing = [c for c in CONSTRUCTS if c not in text]
    assert not missing, missing


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("lang_*.pgl")), ids=lambda p: p.name)
def test_lang_example_files_plan(path: Path, tmp_path: Path) -> None:
    """tests/examples/lang_*.pgl plan with no error (with an empty entry when they have none)."""
    text = path.read_text(encoding="utf-8")
    plan, bag = plan_program(_write(tmp_path, _with_entry(text)), Options())
    assert plan is not None and not bag.has_errors, [d.message for d in bag.items]
