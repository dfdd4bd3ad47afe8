"""The table of known bad inputs (pgraph.syntax.syntax_errors): every example gets its own message.

Each SYNTAX_EXAMPLES entry lists bad snippets; parsing any of them must give exactly one PG001
whose message is that entry's message (followed by the parser detail in parentheses) and whose
hint is that entry's hint. The detail names tokens as users type them, never Lark's internal
terminal names, and suggests the nearest keyword for a misspelt one.
"""

from __future__ import annotations

import re

import pytest
from lark.exceptions import UnexpectedInput

from pgraph.diagnostics import DiagnosticBag, Severity
from pgraph.frontend.parser import parse_source, parser
from pgraph.frontend.syntax_errors import SYNTAX_EXAMPLES
from pgraph.source import SourceFile
from pgraph.suggest import edit_distance
from tests.unit.test_grammar_words import grammar_words

CASES = [(i, text) for i, entry in enumerate(SYNTAX_EXAMPLES) for text in entry.examples]


def pg001(text: str):
    bag = DiagnosticBag()
    module = parse_source(SourceFile("<test>", text), bag)
    assert module is None, f"{text!r} parsed"
    assert [d.code for d in bag.items] == ["PG001"], [d.message for d in bag.items]
    diag = bag.items[0]
    assert diag.level is Severity.ERROR
    return diag


@pytest.mark.parametrize(("index", "text"), CASES, ids=[f"{i}:{t[:30]}" for i, t in CASES])
def test_every_example_gets_its_entry_message(index: int, text: str) -> None:
    entry = SYNTAX_EXAMPLES[index]
    diag = pg001(text)
    assert diag.message.startswith(entry.message + " ("), diag.message
    assert diag.message.endswith(")")
    assert diag.hint == entry.hint


def test_messages_are_distinct_and_examples_unique() -> None:
    messages = [e.message for e in SYNTAX_EXAMPLES]
    assert len(messages) == len(set(messages))
    texts = [t for _, t in CASES]
    assert len(texts) == len(set(texts))
    assert all(e.examples and e.hint for e in SYNTAX_EXAMPLES)


def test_every_example_is_really_a_syntax_error() -> None:
    for _, text in CASES:
        with pytest.raises(UnexpectedInput):
            parser().parse(text)


@pytest.mark.parametrize(("index", "text"), CASES, ids=[f"{i}:{t[:30]}" for i, t in CASES])
def test_detail_uses_the_characters_users_type(index: int, text: str) -> None:
    diag = pg001(text)
    internal = {t.name for t in parser().terminals} | {"$END"}
    detail = diag.message[len(SYNTAX_EXAMPLES[index].message):]
    words = set(re.findall(r"\$?[A-Z_][A-Z_0-9]{2,}", detail.split("expected one of:")[-1]))
    assert not words & internal, detail


@pytest.mark.parametrize(("text", "needle"), [
    ("const A 1", "expected one of: '='"),
    ("tensor x : f32", "expected one of: '['"),
    ("const A =", "a name, an integer"),
    ("entry e { spmd a[i in 0 5] }", "'..'"),
    ("entry e { spmd a[i in 0 5] }", "'+' or '-'"),
    ("tensor x : [16]", "a dtype (bf16,"),
    ("entry e {", "a task kind (at, spmd, parallel, dummy, tiles)"),
    ("entry e {", "unexpected end of file"),
])
def test_expected_tokens_are_friendly(text: str, needle: str) -> None:
    assert needle in pg001(text).message


@pytest.mark.parametrize(("text", "keyword"), [
    ("cosnt A = 1", "const"),                       # a swap: const (same length), not cost
    ("kernal k aic (a : in f32[1])", "kernel"),
    ("entry e { paralel a[i in 0..4] { } }", "parallel"),
    ("entry e { manaul scope { } }", "manual"),
    ("entry e { at t { rads x[0] } }", "reads"),
    ("entry e { at t { call k(x) } at u dep(t) }", "deps"),
    ("tensor x : f32[16, 5120] extrenal", "external"),
])
def test_misspelt_keyword_gets_a_suggestion(text: str, keyword: str) -> None:
    assert f"(did you mean '{keyword}'?)" in pg001(text).message


@pytest.mark.parametrize("text", ["entry e { q_proj deps(x) }", "entry e { at a foo }", "entry e { foo }"])
def test_no_suggestion_for_an_unrelated_word(text: str) -> None:
    assert "did you mean" not in pg001(text).message


def test_edit_distance_counts_adjacent_swaps_as_one() -> None:
    assert edit_distance("cosnt", "const") == 1
    assert edit_distance("cosnt", "cost") == 1
    assert edit_distance("kernal", "kernel") == 1
    assert edit_distance("", "abc") == 3
    assert edit_distance("spmd", "spmd") == 0


def test_name_starting_with_a_keyword_is_reported_whole() -> None:
    """`inv_rms` lexes as the keyword `in` + `v_rms`; the message names what the user wrote."""
    text = "entry e {\n  at rms_recip { call rms_recip(cur inv_rms) }\n}\n"
    diag = pg001(text)
    assert diag.message.startswith("items in a list are separated by ','")
    assert "unexpected 'inv_rms'" in diag.message
    assert (diag.span.line, diag.span.col) == (2, text.splitlines()[1].index("inv_rms") + 1)


def test_position_of_an_error_at_end_of_file() -> None:
    diag = pg001("const A = 1\nentry e {\n")
    assert diag.span is not None
    assert (diag.span.line, diag.span.col) == (2, len("entry e {") + 1)


def test_example_state_matching_ignores_the_items_above() -> None:
    """The same mistake after other declarations still gets its message (LALR state, not depth)."""
    text = 'const A = 1\ntensor x : f32[16] external\nkernel k aiv (a : in f32[16])\nentry e { at t { call k(x y) } }\n'
    assert pg001(text).message.startswith("items in a list are separated by ','")


def test_name_starting_with_a_task_kind_is_not_a_task() -> None:
    pg001("entry e { attn deps(x) }")


# ---- inputs outside the table ---------------------------------------------------------------------

#: Realistic mistakes written for this test (none is an example of the table), each with the
#: message of the entry that should explain it.
OUTSIDE = [
    ("const HIDDEN 5120", "a constant needs '=' between its name and value"),
    ("const QKV_K_SLICE = HIDDEN /", "an expression is missing"),
    ("assert DOWN_ON * DOWN_TN = HIDDEN", "to compare, write '=='; a single '=' only declares a name"),
    ("entry decode { at q_seed { call zero_q(q_acc k_acc) } }", "items in a list are separated by ','"),
    ("entry decode { spmd q_proj[i in 0..50 { call qkv(x) } }", "a '[' is not closed with ']'"),
    ("kernel zero_q aiv (acc : out f32[16, 5120]", "a '(' is not closed"),
    ("entry decode {\n  manual scope {\n    at q_seed { call zero_q(q_acc) }\n  }\n",
     "a block is not closed with '}'"),
    ("entry decode { for L in 0 40 { } }", "a range needs '..' between its bounds"),
    ("entry decode { manual ring 3 { } }", "'scope' must follow 'auto' or 'manual'"),
    ("entry decode { let nt i / 5 }", "a `let` binds its name with '='"),
    ("kernel qkv aic (x : bf16[16, 1024])", "a kernel parameter needs a direction (in, out, inout, atomic_add) or `scalar`"),
    ("entry decode { at a deps q_seed }", "`deps` takes a parenthesised list of task names or tile selections"),
]


@pytest.mark.parametrize(("text", "message"), OUTSIDE, ids=[t[:30] for t, _ in OUTSIDE])
def test_mistakes_outside_the_table_get_their_entry_message(text: str, message: str) -> None:
    assert text not in {t for _, t in CASES}
    assert message in {e.message for e in SYNTAX_EXAMPLES}
    assert pg001(text).message.startswith(message + " (")


_KEYWORDS = grammar_words()


def renamed(text: str) -> str:
    """The example with its names renamed, its numbers changed and its blanks doubled."""
    def name(m: re.Match[str]) -> str:
        word = m.group(0)
        if word in _KEYWORDS or any(edit_distance(word, k) <= 2 for k in _KEYWORDS if len(k) > 3):
            return word  # keywords and misspelt keywords stay
        return f"{word}_v2"
    body = re.sub(r"(?<![\w\"])[A-Za-z_]\w*", name, text)
    body = re.sub(r"(?<![\w.])[1-9]\d*(?![\w.])", lambda m: str(int(m.group(0)) + 6), body)
    return body.replace(" ", "  ")


@pytest.mark.parametrize(("index", "text"), CASES, ids=[f"{i}:{t[:30]}" for i, t in CASES])
def test_renamed_examples_keep_their_entry_message(index: int, text: str) -> None:
    """The matcher must answer for the mistake, not for the literal example text."""
    variant = renamed(text)
    entry = SYNTAX_EXAMPLES[index]
    bag = DiagnosticBag()
    if parse_source(SourceFile("<test>", variant), bag) is not None:
        pytest.skip("renaming made it valid")  # e.g. a misspelt dtype renamed into a name
    assert bag.items[0].message.startswith(entry.message + " ("), (variant, bag.items[0].message)


@pytest.mark.parametrize(("char", "code"), [("\v", "U+000B"), ("\x00", "U+0000"), ("\x1b", "U+001B")])
def test_control_character_is_named(char: str, code: str) -> None:
    """A control character would print invisibly (or move the terminal's cursor): the message
    names its code point and escape instead of the raw character."""
    diag = pg001(f"entry e {{{char}}}\n")
    assert code in diag.message and char not in diag.message, diag.message


def test_printable_character_is_shown() -> None:
    assert "unexpected character '$'" in pg001("entry e { $ }\n").message


# ---- a block that lost its `}` before a top-level declaration -------------------------------------

_HEAD = "kernel k aiv (a : in f32[16])\ntensor x : f32[16] external\n"
LOST_BRACE = [  # (text, line and column of the `{` that is never closed)
    (_HEAD + "entry e {\n  at t { call k(x) }\nbudget b <= 3\n", (3, 9)),
    (_HEAD + "entry e {\n  manual scope {\n    at t { call k(x) }\n}\nconst A = 1\n", (3, 9)),
    (_HEAD + "entry e {\n  manual scope {\n    at t { call k(x) }\n\nkernel j aiv (a : in f32[16])\n", (4, 16)),
    ("fragment f {\n  at t { call k(x) }\n  include \"x.pgl\"\n", (1, 12)),
    (_HEAD + "entry e {\n  for L in 0..2 {\n    at t { call k(x) }\n  }\nentry g { }\n", (3, 9)),
]


@pytest.mark.parametrize(("text", "where"), LOST_BRACE, ids=[t.splitlines()[-1][:20] for t, _ in LOST_BRACE])
def test_top_level_declaration_inside_a_block_names_the_unclosed_brace(text: str, where: tuple[int, int]) -> None:
    """A declaration only the top level holds (budget, const, kernel, include, entry), found
    inside a block: the block before it lost its `}`; the note points at that block's `{`."""
    diag = pg001(text)
    assert diag.message.startswith("a block is not closed with '}' ("), diag.message
    assert [(n.span.line, n.span.col) for n in diag.notes if n.span is not None] == [where]
    assert diag.span is not None and diag.span.col == text.splitlines()[diag.span.line - 1].index(
        text.splitlines()[diag.span.line - 1].strip()) + 1


def test_real_spec_with_its_entry_brace_deleted() -> None:
    """The decode spec with the `}` that closes its entry deleted: the error is at the first
    `budget` line, and the note at the entry's `{` (both read off the spec here)."""
    from tests.conftest import HEAD_SPEC

    lines = HEAD_SPEC.read_text(encoding="utf-8").split("\n")
    budget = next(i for i, line in enumerate(lines) if line.startswith("budget"))
    closing = max(i for i in range(budget) if lines[i].startswith("}"))
    entry = next(i for i, line in enumerate(lines) if line.startswith("entry "))
    del lines[closing]
    diag = pg001("\n".join(lines))
    assert diag.message.startswith("a block is not closed with '}' (unexpected 'budget'")
    assert diag.span is not None and (diag.span.line, diag.span.col) == (budget, 1)  # one line up: 1-based
    assert [(n.span.line, n.span.col) for n in diag.notes if n.span is not None] == [
        (entry + 1, lines[entry].index("{") + 1)]


def test_a_statement_at_column_one_inside_a_block_keeps_its_message() -> None:
    """Only top-level declarations count: a misplaced scope statement is not a lost brace."""
    diag = pg001(_HEAD + "entry e {\nfoo\n}\n")
    assert diag.message.startswith("a statement inside a scope must start with a keyword"), diag.message
    assert not diag.notes
