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
import os
import subprocess
import sys
from pathlib import Path
from typing import Any
from unittest import mock

import lark
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
    d = lalr.driver(pgl.grammar_digest(pgl._grammar_text()), lalr.installed_lark_version())
    assert d is not None, ("pgraph/frontend/pgl_tables.py is stale or of another Lark: run "
                           "`python3 -m pgraph.frontend.parser`")
    return d


def both(text: str) -> tuple[Any, Any]:
    """(the driver's AST or REFUSED, Lark's AST or REFUSED) of `text`. A refusal is what
    `parse_source` takes as one (Fallback, or `number`'s ValueError); any other exception of
    the driver fails the test."""
    file = SourceFile("<t>", text)
    try:
        fast = _driver().parse(text, pgl._ToAst(file), pgl.MAX_NESTING)
    except (lalr.Fallback, ValueError):
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
    saved = lalr.load_tables(pgl.grammar_digest(text), lark.__version__)
    assert saved is not None, ("pgraph/frontend/pgl_tables.py is stale or of another Lark: run "
                               "`python3 -m pgraph.frontend.parser`")
    fresh = lalr.build_tables(pgl.build_parser(text))
    assert saved == json.loads(json.dumps(fresh))
    module = Path(lalr.__file__).with_name("pgl_tables.py")
    assert module.read_text(encoding="utf-8") == lalr.dump_tables(fresh, pgl.grammar_digest(text), lark.__version__)


def test_stale_tables_are_not_used() -> None:
    """Tables of another grammar, or built by another Lark (pyproject allows lark>=1.1.9), are
    not used; nor is Lark's saved parser of another Lark."""
    text = pgl._grammar_text()
    assert lalr.load_tables(pgl.grammar_digest(text + "\n// edited\n"), lark.__version__) is None
    assert lalr.load_tables(pgl.grammar_digest(text), "1.1.9") is None
    assert lalr.load_tables(pgl.grammar_digest(text), None) is None
    assert lalr.driver(pgl.grammar_digest(text), "1.1.9") is None
    with mock.patch.object(lark, "__version__", "1.1.9"):
        assert pgl.load_saved_parser(text) is None


def test_installed_lark_version_is_lark_s() -> None:
    """Read without importing Lark, the version is `lark.__version__`; with Lark loaded, its
    attribute."""
    code = ("import sys; from pgraph.frontend import lalr; v = lalr.installed_lark_version(); "
            "loaded = 'lark' in sys.modules; import lark; print(v == lark.__version__, loaded)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.split() == ["True", "False"], out.stderr
    assert lalr.installed_lark_version() == lark.__version__


def test_tables_of_another_lark_leave_the_parse_to_lark(monkeypatch: pytest.MonkeyPatch) -> None:
    """With another Lark installed the driver is not used: Lark parses, the same AST."""
    text = (ROOT / "specs" / "qwen3_14b.pgl").read_text(encoding="utf-8")
    expect = pgl._parse_with_lark(SourceFile("q.pgl", text), DiagnosticBag())
    monkeypatch.setattr(lalr, "installed_lark_version", lambda: "1.1.9")
    pgl._fast_driver.cache_clear()
    try:
        assert pgl._fast_driver() is None
        with mock.patch.object(pgl, "_parse_with_lark", wraps=pgl._parse_with_lark) as by_lark:
            assert pgl.parse_source(SourceFile("q.pgl", text), DiagnosticBag()) == expect
        assert by_lark.call_count == 1
    finally:
        pgl._fast_driver.cache_clear()


def _failing_driver(monkeypatch: pytest.MonkeyPatch, error: Exception) -> None:
    def parse(self: lalr.Driver, text: str, builder: Any, max_height: int) -> Any:
        raise error

    monkeypatch.setattr(lalr.Driver, "parse", parse)


VALID = "const A = 4 * 256\n"


def test_a_driver_failure_is_an_internal_error_under_verify(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under PGRAPH_VERIFY=1 (the suite) a driver that raises anything but a refusal, or that
    refuses a text Lark accepts, is DriverError, never a silent second parse; without it Lark's
    answer stands. A syntax error is Lark's PG001 either way."""
    monkeypatch.setenv("PGRAPH_REFERENCE", "0")
    monkeypatch.setenv("PGRAPH_VERIFY", "1")
    _failing_driver(monkeypatch, KeyError("state"))
    with pytest.raises(pgl.DriverError, match="KeyError"):
        pgl.parse_source(SourceFile("a.pgl", VALID), DiagnosticBag())
    _failing_driver(monkeypatch, lalr.Fallback())
    with pytest.raises(pgl.DriverError, match="which Lark parses"):
        pgl.parse_source(SourceFile("a.pgl", VALID), DiagnosticBag())
    bag = DiagnosticBag()
    assert pgl.parse_source(SourceFile("a.pgl", "const A = \n"), bag) is None
    assert [d.code for d in bag.items] == ["PG001"]
    monkeypatch.setenv("PGRAPH_VERIFY", "0")
    expect = pgl._parse_with_lark(SourceFile("a.pgl", VALID), DiagnosticBag())
    for error in (KeyError("state"), lalr.Fallback()):
        _failing_driver(monkeypatch, error)
        assert pgl.parse_source(SourceFile("a.pgl", VALID), DiagnosticBag()) == expect


def test_a_driver_failure_exits_3(tmp_path: Path) -> None:
    """The command line turns DriverError into exit code 3 (an internal error)."""
    spec = tmp_path / "a.pgl"
    spec.write_text(VALID, encoding="utf-8")
    code = ("import sys; from pgraph.frontend import lalr; import pgraph.cli as c\n"
            "def parse(*a): raise IndexError('pop from empty list')\n"
            f"lalr.Driver.parse = parse\nprint(c.main(['check', {str(spec)!r}]))")
    env = {**os.environ, "PGRAPH_VERIFY": "1", "PGRAPH_REFERENCE": "0"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env)
    assert out.stdout.split()[-1:] == ["3"], out.stderr
    assert "LALR driver failed" in out.stderr


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
    env = {**os.environ, "PGRAPH_REFERENCE": "0"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120, env=env)
    assert out.stdout.split()[-3:] == ["0", "False", "False"], out.stderr
    bad = ROOT / "tests" / "diagnostics"
    spec = next(p for p in sorted(bad.glob("*.pgl")) if "PG001" in p.name and ".fixed" not in p.name)
    code = f"import sys, pgraph.cli as c; r = c.main(['check', {str(spec)!r}]); print(r, 'lark' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120, env=env)
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
def test_scanner_equals_the_alternation(tail: str, word: str) -> None:
    """At every position of random texts (grammar words glued to random characters), the scan
    (the literals starting with the character, the patterns' alternation) gives the terminal and
    characters of the alternation of all terminals."""
    d = _driver()
    master = _master(d)
    for text in (word + tail, tail + word, tail):
        for pos in range(len(text)):
            m = master(text, pos)
            expect = None if m is None else (m.lastgroup, m.group())
            assert d._scanner(text[pos])(text, pos) == expect, (text, pos)


def test_scanner_by_hand() -> None:
    """Worked by hand from grammar/pgl.lark: a keyword string before NAME, NAME for a longer
    word, a two-character operator before its one-character prefix, nothing for `$`."""
    d = _driver()
    assert d._scanner("i")("in x", 0) == ("DIRECTION", "in")
    assert d._scanner("i")("inx", 0) == ("NAME", "inx")
    assert d._scanner("q")("q_proj[", 0) == ("NAME", "q_proj")
    assert d._scanner("0")("0_1", 0) == ("INT", "0_1")
    assert d._scanner(".")("..", 0)[1] == ".."
    assert d._scanner("+")("+: 4", 0)[1] == "+:"
    assert d._scanner("$")("$", 0) is None
