"""grammar/pgl.tmLanguage.json: the editor grammar covers the language.

A small TextMate matcher (this file: at each position, the pattern whose match starts first
wins, ties go to the earlier pattern, as in TextMate's `patterns` list; the grammar uses only
regex syntax that Python's `re` and Oniguruma read alike) tokenizes every spec, example and
benchmark spec; every non-blank character must get a scope. The words of its keyword patterns
must be exactly the keywords of grammar/pgl.lark (read from the Lark parser's terminals), and a
keyword must never be scoped as a plain name.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.unit.test_grammar_words import grammar_words

GRAMMAR = json.loads((ROOT / "grammar" / "pgl.tmLanguage.json").read_text(encoding="utf-8"))
SPECS = sorted({*ROOT.joinpath("specs").rglob("*.pgl"), *ROOT.joinpath("tests", "examples").rglob("*.pgl"),
                *ROOT.joinpath("bench").rglob("*.pgl")})
WORDS = re.compile(r"\((?:\?:)?([A-Za-zµ_][A-Za-zµ_0-9]*(?:\|[A-Za-zµ_][A-Za-zµ_0-9]*)+)\)")


def patterns() -> list[dict[str, Any]]:
    """The top-level patterns with `include`s resolved from the repository."""
    repo = GRAMMAR["repository"]
    return [repo[p["include"][1:]] if "include" in p else p for p in GRAMMAR["patterns"]]


COMPILED = [(re.compile(p["match"]), p) for p in patterns()]


def tokenize(line: str) -> list[tuple[int, int, str]]:
    """(start, end, scope) of every scoped piece of `line`; unscoped non-blank text raises."""
    out: list[tuple[int, int, str]] = []
    pos = 0
    while pos < len(line):
        best = None
        for rx, p in COMPILED:
            m = rx.search(line, pos)
            if m and m.end() > m.start() and (best is None or m.start() < best[0].start()):
                best = (m, p)
        gap = line[pos:best[0].start()] if best else line[pos:]
        assert not gap.strip(), f"no scope for {gap.strip()!r} in {line!r}"
        if best is None:
            break
        m, p = best
        if "name" in p:
            out.append((m.start(), m.end(), p["name"]))
        else:
            covered = set()
            for group, cap in p["captures"].items():
                if m.group(int(group)) is not None:
                    out.append((m.start(int(group)), m.end(int(group)), cap["name"]))
                    covered |= set(range(m.start(int(group)), m.end(int(group))))
            rest = "".join(ch for i, ch in enumerate(line[m.start():m.end()], m.start()) if i not in covered)
            assert not rest.strip(), f"no scope for {rest.strip()!r} in {line!r}"
        pos = m.end()
    return out


def keyword_words() -> set[str]:
    """The words the keyword-like patterns (and the unit capture) match."""
    out: set[str] = set()
    repo = GRAMMAR["repository"]
    for key, p in repo.items():
        if key in ("name", "comment", "string", "number", "operator", "punctuation"):
            continue
        for m in WORDS.finditer(p["match"]):
            out.update(m.group(1).split("|"))
    return out


def test_keywords_equal_the_lark_grammar_keywords() -> None:
    assert keyword_words() == set(grammar_words())


def unit_words() -> set[str]:
    """The words of the grammar's UNIT terminal: keywords only after a number (`256 MiB`); `K`
    and `s` are names elsewhere, so the editor grammar scopes them as units only there."""
    from pgraph.frontend.parser import parser

    unit = next(t for t in parser().terminals if t.name == "UNIT")
    return set(WORDS.search(unit.pattern.value).group(1).split("|"))  # type: ignore[union-attr]


@pytest.mark.parametrize("path", SPECS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_token_of_a_spec_gets_a_scope(path: Path) -> None:
    keywords = grammar_words() - unit_words()
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        for a, b, scope in tokenize(line):
            if scope == "variable.other.pgl":
                assert line[a:b] not in keywords, f"{path.name}:{n}: keyword {line[a:b]!r} scoped as a name"


def test_matcher_by_hand() -> None:
    got = [(t[2], "kernel k aic (x : in f32[4], n : scalar i32)  # c"[t[0]:t[1]])
           for t in tokenize("kernel k aic (x : in f32[4], n : scalar i32)  # c")]
    assert got == [("keyword.declaration.pgl", "kernel"), ("entity.name.pgl", "k"), ("support.constant.core.pgl", "aic"),
                   ("punctuation.separator.pgl", "("), ("variable.other.pgl", "x"), ("keyword.operator.pgl", ":"),
                   ("keyword.control.pgl", "in"), ("support.type.dtype.pgl", "f32"), ("punctuation.separator.pgl", "["),
                   ("constant.numeric.integer.pgl", "4"), ("punctuation.separator.pgl", "]"),
                   ("punctuation.separator.pgl", ","), ("variable.other.pgl", "n"), ("keyword.operator.pgl", ":"),
                   ("keyword.control.pgl", "scalar"), ("support.type.dtype.pgl", "i32"),
                   ("punctuation.separator.pgl", ")"), ("comment.line.number-sign.pgl", "# c")]
    assert [t[2] for t in tokenize("heap = 256 MiB")][-2:] == ["constant.numeric.integer.pgl", "keyword.other.unit.pgl"]
    with pytest.raises(AssertionError):
        tokenize("a @ b")  # '@' is no token of the language
