"""The keywords of grammar/pgl.lark, read from the parser's terminals (for tests that must not
mistake a keyword for a name)."""

from __future__ import annotations

import re

from pgraph.frontend.parser import parser


def grammar_words() -> frozenset[str]:
    """Every word a terminal matches literally: quoted keywords and regex alternations of words."""
    out: set[str] = set()
    for term in parser().terminals:
        value = getattr(term.pattern, "value", "")
        if term.pattern.type == "str":
            if re.fullmatch(r"[A-Za-z_µ][A-Za-z_0-9]*", value):
                out.add(value)
            continue
        m = re.fullmatch(r"\(?(?:\?:)?([A-Za-zµ0-9_|]+)\)?(?:\\b)?", value)
        if m:
            out.update(m.group(1).split("|"))
    return frozenset(out)


def test_grammar_words_cover_every_kind_of_keyword() -> None:
    words = grammar_words()
    for w in ("include", "interleave", "taskids", "at", "spmd", "tiles", "early", "sync_start", "inout",
              "atomic_add", "reads", "bf16", "aic", "mix", "manual", "unscoped", "external", "extern", "and", "not"):
        assert w in words, w
    assert "NAME" not in words and "x" not in words
