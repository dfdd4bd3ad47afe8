"""Every mechanical hint carries its fix, and the fix, applied, removes the diagnostic.

For each failing spec of the corpus (tests/diagnostics/), every diagnostic with a `fix` is
applied to a copy of the corpus, one at a time, and the copy is checked again: the diagnostic
(same code, same file and line) must be gone, and the edit must not break the syntax.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pgraph.diagnostics import Diagnostic, apply_edits
from pgraph.pipeline import plan_program
from tests.unit.test_diagnostics import CORPUS, failing_specs, spec_options

#: Codes whose corpus diagnostics have a mechanical hint (written from the hints, by hand).
MECHANICAL = {"PG001", "PG002", "PG014", "PG023", "PG036", "PG100", "PG101", "PG104", "PG113", "PG119"}


def diagnostics(spec: Path) -> list[Diagnostic]:
    opts, _ = spec_options(spec)
    _, bag = plan_program(spec, opts)
    return bag.items


def where(d: Diagnostic, root: Path) -> tuple[str, str, int]:
    assert d.span is not None and d.span.file.path is not None
    return (d.code, str(d.span.file.path.resolve().relative_to(root.resolve())), d.span.line)


def with_fix(spec: Path) -> list[Diagnostic]:
    return [d for d in diagnostics(spec) if d.fix is not None]


@pytest.mark.parametrize("spec", [s for s in failing_specs() if with_fix(s)], ids=lambda p: p.stem)
def test_each_fix_removes_its_diagnostic(spec: Path, tmp_path: Path) -> None:
    for i, d in enumerate(with_fix(spec)):
        copy = tmp_path / f"corpus{i}"
        shutil.copytree(CORPUS, copy)
        assert d.fix is not None
        by_file: dict[Path, list] = {}
        for e in d.fix.edits:
            assert e.span.file.path is not None
            by_file.setdefault(e.span.file.path.resolve(), []).append(e)
        for path, edits in by_file.items():
            target = copy / path.relative_to(CORPUS.resolve())
            target.write_text(apply_edits(target.read_text(encoding="utf-8"), edits), encoding="utf-8")
        after = diagnostics(copy / spec.name)
        before_at = where(d, CORPUS)
        assert before_at not in {where(a, copy) for a in after if a.span and a.span.file.path}, (d.message, d.fix)
        assert not any(a.code == "PG001" for a in after if d.code != "PG001"), "the fix broke the syntax"


def test_the_mechanical_hints_of_the_corpus_have_fixes() -> None:
    got = {d.code for spec in failing_specs() for d in with_fix(spec)}
    assert got >= MECHANICAL, sorted(MECHANICAL - got)
