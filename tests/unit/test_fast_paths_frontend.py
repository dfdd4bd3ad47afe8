"""The front end's fast paths against their references (docs/architecture.md, "Fast paths").

- The LALR driver (`pgraph.frontend.lalr`) beside Lark, the parser of record: under
  PGRAPH_REFERENCE=1 `parse_source` has Lark parse every text. On every .pgl file of the
  repository (specs/, tests/, bench/specs/, docs/) both ways give the same AST, positions
  included, and the same syntax diagnostics; valid files take the driver's path (no second
  parse: the suite's PGRAPH_VERIFY=1 turns a refusal of a text Lark accepts into DriverError).
- The query cache (`pgraph.commands.query_cache`) beside the compile it skips: under
  PGRAPH_REFERENCE=1 `deps` and `why` compile every time and neither read nor write an entry;
  the answers of a cold run, a warm run and a reference run are the same text.

Each test sets the switch itself for each side, so the file passes with PGRAPH_REFERENCE=1 set
in the environment or not. (tests/unit/test_lalr.py compares the driver with Lark directly on
the docs' snippets, random edits of the specs, keywords as names and the depth limit.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from pgraph import cli
from pgraph.commands import query_cache
from pgraph.diagnostics import DiagnosticBag, render_all_text
from pgraph.frontend import parser as pgl
from pgraph.source import SourceFile

ROOT = Path(__file__).resolve().parents[2]
CORPUS = sorted(p for d in ("specs", "tests", "bench/specs", "docs") for p in (ROOT / d).rglob("*.pgl"))
SPECS = sorted((ROOT / "specs").rglob("*.pgl")) + sorted((ROOT / "tests" / "examples").glob("*.pgl"))


def _parse(path: Path, reference: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, str, int]:
    """(the AST or None, the rendered diagnostics, how many times Lark parsed) of `path`, with
    the fast paths on or off."""
    monkeypatch.setenv("PGRAPH_REFERENCE", "1" if reference else "0")
    text = path.read_text(encoding="utf-8")
    bag = DiagnosticBag()
    with mock.patch.object(pgl, "_parse_with_lark", wraps=pgl._parse_with_lark) as by_lark:
        module = pgl.parse_source(SourceFile(str(path.relative_to(ROOT)), text, path), bag)
    return module, render_all_text(bag.sorted()), by_lark.call_count


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_file_parses_the_same_both_ways(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fast, fast_text, fast_lark = _parse(path, False, monkeypatch)
    ref, ref_text, ref_lark = _parse(path, True, monkeypatch)
    assert ref_lark == 1  # the reference: Lark parsed it
    assert (fast is None) == (ref is None) and fast == ref
    assert fast_text == ref_text
    assert fast_lark == (0 if fast is not None else 1)  # a valid file: the driver alone


def test_the_corpus_is_mostly_valid(monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison means something: over a hundred files, nearly all valid (a few
    diagnostics specs are PG001 on purpose), each valid one parsed by the driver alone."""
    parsed = [_parse(p, False, monkeypatch) for p in CORPUS]
    valid = [lark_calls for module, _, lark_calls in parsed if module is not None]
    assert len(CORPUS) > 100 and len(valid) >= len(CORPUS) - 10 and not any(valid)


@pytest.mark.parametrize("path", SPECS, ids=lambda p: str(p.relative_to(ROOT)))
def test_check_prints_the_same_both_ways(path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """A whole `pgraph check --emit ast` (the unparsed AST, the diagnostics): same exit code and text."""
    got = []
    for reference in ("0", "1"):
        monkeypatch.setenv("PGRAPH_REFERENCE", reference)
        code = cli.main(["check", "--emit", "ast", str(path.relative_to(ROOT))])
        got.append((code, *capsys.readouterr()))
    assert got[0] == got[1]
    assert got[0][0] in (0, 1) and got[0][1]


# ---- the query cache ---------------------------------------------------------------------------

DECODE = "specs/decode_layer.pgl"
QUERIES = [["deps", DECODE, "out_proj.direct"], ["deps", DECODE, "gate_proj[n=3,k=1]@L=2"],
           ["why", DECODE, "silu[n=2]@L=5", "q_proj@L=5"]]


@pytest.mark.parametrize("argv", QUERIES, ids=lambda a: " ".join(a[2:]))
def test_queries_answer_the_same_cached_and_by_reference(argv: list[str], tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """Cold (a miss, written), warm (a hit) and under PGRAPH_REFERENCE=1 (no cache): the same
    answer; the reference run neither reads nor writes an entry."""
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("PGRAPH_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("PGRAPH_CACHE", raising=False)
    got = []
    for reference in ("0", "0", "1"):
        monkeypatch.setenv("PGRAPH_REFERENCE", reference)
        with mock.patch.object(query_cache.pickle, "load", wraps=query_cache.pickle.load) as reads, \
                mock.patch.object(query_cache.pickle, "dump", wraps=query_cache.pickle.dump) as writes:
            code = cli.main(argv)
        got.append((code, *capsys.readouterr(), reads.call_count > 0, writes.call_count > 0))
    (cold, warm, ref) = got
    assert cold[:3] == warm[:3] == ref[:3] and cold[0] == 0 and cold[1]
    assert cold[4] and warm[3] and not warm[4]  # the first run wrote the entry, the second read it
    assert not ref[3] and not ref[4]  # the reference compiled
    assert len(list(tmp_path.glob("q-*.pickle"))) == 1


def test_reference_mode_turns_the_cache_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGRAPH_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("PGRAPH_CACHE", raising=False)
    monkeypatch.setenv("PGRAPH_REFERENCE", "1")
    assert not query_cache.enabled()
    builds = []
    for _ in range(2):
        assert query_cache.cached(("test",), lambda: (builds.append(1) or 7, [])) == 7
    assert len(builds) == 2 and not list(tmp_path.iterdir())
    monkeypatch.setenv("PGRAPH_REFERENCE", "0")
    assert query_cache.enabled()
