"""The start-up parser (pgraph.frontend.lalr) against Lark, the parser of record.

Two implementations over one grammar: Lark's own parse (its contextual lexer, parse-tree
builder and positions, then the AST builder walking the tree) and the driver over the tables
read from Lark's objects (no tree, no Lark import). On every spec of the repository, every
snippet of the docs and random edits of the specs (keywords in name positions, units and
directions as names, deleted and swapped tokens), both must give the same AST, positions
included, or both refuse the text.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pgraph.diagnostics import DiagnosticBag
from pgraph.frontend import lalr
from pgraph.frontend import parser as pgl
from pgraph.source import SourceFile
from tests.unit.test_grammar_words import grammar_words

ROOT = Path(__file__).resolve().parents[2]
CORPUS = sorted(p for d in ("specs", "tests", "bench/specs", "docs") for p in (ROOT / d).rglob("*.pgl"))
REFUSED = object()


def _driver() -> lalr.Driver:
    d = lalr.driver(pgl.grammar_digest(pgl._grammar_text()))
    assert d is not None, "pgraph/frontend/pgl_tables.py is stale: run `python3 -m pgraph.frontend.parser`"
    return d


def both(text: str) -> tuple[Any, Any]:
    """(the driver's AST or REFUSED, Lark's AST or REFUSED) of `text`."""
    file = SourceFile("<t>", text)
    try:
        fast = _driver().parse(text, pgl._ToAst(file), pgl.MAX_NESTING)
    except Exception:  # noqa: BLE001 - any refusal: parse_source then asks Lark
        fast = REFUSED
    slow = pgl._parse_with_lark(file, DiagnosticBag())
    return fast, REFUSED if slow is None else slow


def assert_same(text: str) -> bool:
    """Both parsers agree on `text`; True when they accept it."""
    fast, slow = both(text)
    if slow is REFUSED:
        assert fast is REFUSED, "the driver accepts a text Lark refuses"
        return False
    assert fast is not REFUSED, "the driver refuses a text Lark accepts"
    assert fast == slow
    return True


def test_tables_file_matches_the_grammar() -> None:
    """pgraph/frontend/pgl_tables.py is what `build_tables` reads from a fresh Lark parser (the
    same in every process: the states are renumbered, so PYTHONHASHSEED does not matter)."""
    text = pgl._grammar_text()
    saved = lalr.load_tables(pgl.grammar_digest(text))
    assert saved is not None, "pgraph/frontend/pgl_tables.py is stale: run `python3 -m pgraph.frontend.parser`"
    fresh = lalr.build_tables(pgl.build_parser(text))
    assert saved == json.loads(json.dumps(fresh))
    module = Path(lalr.__file__).with_name("pgl_tables.py")
    assert module.read_text(encoding="utf-8") == lalr.dump_tables(fresh, pgl.grammar_digest(text))


def test_stale_tables_are_not_used() -> None:
    assert lalr.load_tables(pgl.grammar_digest(pgl._grammar_text() + "\n// edited\n")) is None


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: str(p.relative_to(ROOT)))
def test_corpus_parses_the_same(path: Path) -> None:
    assert_same(path.read_text(encoding="utf-8"))


def test_corpus_is_mostly_accepted() -> None:
    """The comparison means something: nearly every corpus file is valid (a few diagnostics
    specs are PG001 on purpose), and every valid one takes the driver's path."""
    accepted = sum(assert_same(p.read_text(encoding="utf-8")) for p in CORPUS)
    assert len(CORPUS) > 100 and accepted >= len(CORPUS) - 10


def test_doc_snippets_parse_the_same() -> None:
    from tests.unit.test_language_examples import BLOCKS  # the fenced pgl blocks of docs/language.md

    accepted = sum(assert_same(text) for _, _, _, text in BLOCKS)
    assert accepted > 20


def test_height_limit_is_lark_s() -> None:
    """`-(-(...1))` nests one rule node per sign: the driver refuses exactly where Lark's
    depth check (MAX_NESTING) starts to."""
    flips = []
    for k in range(pgl.MAX_NESTING - 5, pgl.MAX_NESTING + 5):
        text = "const A = " + "-" * k + "1\n"
        fast, slow = both(text)
        assert (fast is REFUSED) == (slow is REFUSED), k
        flips.append(slow is REFUSED)
    assert flips[0] is False and flips[-1] is True  # the boundary is inside the range


def test_keywords_as_names() -> None:
    """Contextual words: a unit, a direction, a kind or a dtype word where a name goes."""
    for word in ("s", "K", "in", "at", "out", "auto", "early", "tiles", "runtime", "B"):
        text = f"const {word} = 1\nentry e {{ for {word} in 0..2 {{ dummy d{word} }} }}\n"
        fast, slow = both(text)
        assert (fast is REFUSED) == (slow is REFUSED), word
        if slow is not REFUSED:
            assert fast == slow, word


def test_start_up_does_not_import_lark() -> None:
    """`pgraph plan` of a valid spec never imports Lark (nor NumPy: no buffer is big enough for
    the race rule's arrays); a syntax error does import Lark (for its message)."""
    code = ("import sys, pgraph.cli as c; r = c.main(['plan', 'specs/decode_layer.pgl']); "
            "print(r, 'lark' in sys.modules, 'numpy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.stdout.split()[-3:] == ["0", "False", "False"], out.stderr
    bad = ROOT / "tests" / "diagnostics"
    spec = next(p for p in sorted(bad.glob("*.pgl")) if "PG001" in p.name and ".fixed" not in p.name)
    code = f"import sys, pgraph.cli as c; r = c.main(['check', {str(spec)!r}]); print(r, 'lark' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.stdout.split()[-2:] == ["1", "True"], out.stderr


# ---- random edits of the specs ---------------------------------------------------------------

SOURCES = [p.read_text(encoding="utf-8") for p in (ROOT / "specs").rglob("*.pgl")]
WORDS = sorted(grammar_words() | {"x", "s", "K", "M", "in", "at", "l", "b0"})
PUNCT = ["{", "}", "(", ")", "[", "]", ",", ":", "=", "..", "+:", "*", "-", "+", "<=", "==", "\n", '"a"', "7"]


@st.composite
def edited(draw: st.DrawFn) -> str:
    """A spec with one to three token-level edits: a word or a punctuation mark inserted or put in
    place of a token, a token deleted, two tokens swapped."""
    text = draw(st.sampled_from(SOURCES))
    for _ in range(draw(st.integers(1, 3))):
        toks = [(m.start(), m.end()) for m in pgl_token_re.finditer(text)]
        a, b = draw(st.sampled_from(toks))
        op = draw(st.sampled_from(("insert", "replace", "replace", "delete", "swap")))
        new = draw(st.sampled_from(WORDS) | st.sampled_from(PUNCT))
        if op == "insert":
            text = text[:a] + new + " " + text[a:]
        elif op == "replace":
            text = text[:a] + new + text[b:]
        elif op == "delete":
            text = text[:a] + text[b:]
        else:
            later = [t for t in toks if t[0] >= b]
            if later:
                c, d = later[0]
                text = text[:a] + text[c:d] + text[b:c] + text[a:b] + text[d:]
    return text


pgl_token_re = __import__("re").compile(r'"[^"\n]*"|#[^\n]*|[A-Za-z_][A-Za-z_0-9]*|[0-9][0-9_]*|\S')


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(edited())
def test_edited_specs_parse_the_same(text: str) -> None:
    assert_same(text)


def _master(d: lalr.Driver) -> Any:
    """The plain scanner: one alternation of all terminals in Lark's order, first match wins."""
    import re

    return re.compile("|".join(f"(?P<{n}>{r})" for n, r in d.terminals)).match


# the characters of the grammar's terminals and the specs, some beyond ASCII (µs, é, a
# Unicode word character after a keyword: `in` followed by `é` is no keyword)
_ALPHABET = st.sampled_from(list("abcdefgimnoprstuwBGKMTx_019 \t\n#\"()[]{}<>=!+-*/%:,.µé\x7f\x00"))


@settings(max_examples=300, deadline=None)
@given(st.text(_ALPHABET, min_size=1, max_size=12), st.sampled_from(sorted(grammar_words())))
def test_first_character_scanners_equal_the_alternation(tail: str, word: str) -> None:
    """At every position of random texts (grammar words glued to random characters), the
    per-character scan gives the terminal and characters of the alternation of all terminals."""
    d = _driver()
    master = _master(d)
    for text in (word + tail, tail + word, tail):
        for pos in range(len(text)):
            m = master(text, pos)
            expect = None if m is None else (m.lastgroup, m.group())
            assert d._scanner(text[pos])(text, pos) == expect, (text, pos)


def test_first_character_sets() -> None:
    """Hand-worked first characters and sure matches of regexes of the grammar's shapes."""
    letters = {ord(c) for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_"}
    assert lalr._first_chars("[A-Za-z_][A-Za-z_0-9]*") == (letters, letters)
    assert lalr._first_chars(r"(inout|in|out)\b") == ({ord("i"), ord("o")}, set())
    assert lalr._first_chars(r'"[^"\n]*"') == ({ord('"')}, set())
    assert lalr._first_chars(r"(?:[ \t\x0c\r\n])+") == ({9, 10, 12, 13, 32}, {9, 10, 12, 13, 32})
    assert lalr._first_chars(r"#[^\n]*") == ({ord("#")}, {ord("#")})
    assert lalr._first_chars(r"\+:") == ({ord("+")}, set())  # two characters: not sure from the first
    assert lalr._first_chars(r"(µs|ms)\b") == ({ord("m")}, set())  # µ is beyond ASCII: no ASCII start
    assert lalr._first_chars("a*b") == ({ord("a"), ord("b")}, set())
    assert lalr._first_chars("a*")[0] is None  # may match nothing: a candidate everywhere
    assert lalr._first_chars("[^x]y")[0] is None  # a negated class: may start with anything
    assert lalr._first_chars(r"\w+")[0] is None  # a category: not worked out, so anything


def test_scanner_lists_cut_after_a_sure_match() -> None:
    """Letters: the keyword terminals before NAME, then NAME (which surely matches there), so
    the keyword strings after NAME (re-typed from it) are never tried; digits: INT alone."""
    d = _driver()
    names = {ch: [d.terminals[i][0] for i in d.scan_lists[d.scanner_of[ord(ch)]]] for ch in "acq0("}
    assert names["c"] == names["q"] == ["NAME"]
    assert names["a"][-1] == "NAME" and "ACCESS" in names["a"] and "ASSERT" not in names["a"]
    assert names["0"] == ["INT"] and names["("] == ["LPAR"]
    assert d.scanner_of[ord("$")] == -1 and d._scanner("$")("$", 0) is None
