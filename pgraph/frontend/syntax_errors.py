"""The table of known bad inputs: each maps a parser state to a friendly message.

`pgraph.frontend.parser` asks `best_match` for the entry whose example fails the same way
as the user's text; the tests iterate the same table and check that every example gets
its own message. `describe` renders Lark's error in the characters users type (`'='`, not
`EQUAL`) and suggests the nearest keyword for a misspelt one.

Matching (first rule that finds a candidate wins; ties go to the earlier table entry):
a parse error is compared with every example's error of the same kind and parser state
(and, for tokens, the same set of acceptable tokens);
1. the same offending token (type and text) or the same offending character;
2. the same token type; for an unexpected character, the same character in any state;
3. the same state alone. So the first entry listing a state is that state's default
   message, and later entries refine it for particular tokens;
4. failing that, another state that accepts exactly the same tokens (ranked as 1-3): the end
   of any top-level declaration expects the same keywords, whichever declaration it was.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from typing import Any

import attrs
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken
from lark.lexer import PatternStr

from pgraph import records
from pgraph.suggest import closest


@records.value
@attrs.frozen(repr=False, eq=False)
class SyntaxExample:
    """A friendly message, its fix hint, and bad snippets that end in that parser state."""

    message: str
    hint: str
    examples: tuple[str, ...]


SYNTAX_EXAMPLES: tuple[SyntaxExample, ...] = (
    # ---- declarations ----------------------------------------------------------------
    SyntaxExample(
        "a constant needs '=' between its name and value",
        "write `const NAME = expr`",
        ("const A 1", "const A\nconst B = 2", "const A"),
    ),
    SyntaxExample(
        "a declaration needs a name after its keyword",
        "e.g. `entry decode_fwd_layers { ... }`, `tensor x : f32[16, 5120] external`, `const A = 1`",
        ("entry { }", "tensor : f32[1] external", "const = 1", "kernel (a : in f32[1])"),
    ),
    SyntaxExample(
        "an expression is missing",
        "complete the expression, e.g. `const A = 4 * 256`",
        ("const A =", "const A = 1 +", "const A = B *", "assert A ==", "const A = 1 * (", "entry e { let x = }"),
    ),
    SyntaxExample(
        "'==' compares; a constant is declared with a single '='",
        "write `const NAME = expr`; use `assert A == B` to check an equality",
        ("const A == 1",),
    ),
    SyntaxExample(
        "an expression cannot continue here: an operator is missing, "
        "or the next statement does not start with a keyword",
        "join values with an operator (+ - * / % == != < <= > >= and or), or start the next "
        "statement with its keyword",
        ("const A = B C", "const A = 1 2", "const A = (B) C", "const A = 1\ncosnt B = 2",
         "const A = B\nkernal k aic (a : in f32[1])", "assert A B", "entry e { let x = a b }"),
    ),
    SyntaxExample(
        "to compare, write '=='; a single '=' only declares a name",
        "write e.g. `assert DOWN_ON * DOWN_TN == HIDDEN`",
        ("assert A = 1", "assert A + 1 = 2", "assert (A) = 1", 'assert A = 1, "msg"', "entry e { assert A = 1 }",
         "entry e { assert A + 1 = 2 }"),
    ),
    SyntaxExample(
        "items in a list are separated by ','",
        "add the missing ',' (kernel arguments, deps, shapes and parameters are comma-separated)",
        ("entry e { at t { call k(x y) } }", "entry e { at t { call k(x[0] y) } }",
         "entry e { at t { call k(x, 1 y) } }", "entry e { at a deps(x y) }", "entry e { at a deps(x[0] y) }",
         "kernel k aic (a : in f32[1] b : in f32[1])", "tensor x : f32[1 2] external",
         "entry e { at t { call k(x[0 4]) } }", 'allow(PG104 "why")', 'entry e { allow(PG104 "why") }'),
    ),
    SyntaxExample(
        "a '(' is not closed",
        "add the missing ')'",
        ("const A = (1 + 2", "const A = min(1, 2", "const A = (B", "entry e { at t { call k(x",
         "entry e { at a deps(x", "kernel k aiv (a : in f32[1]"),
    ),
    SyntaxExample(
        "a '[' is not closed with ']'",
        "add the missing ']'",
        ("entry e { spmd a[i in 0..4 { } }", "tensor x : f32[1, 2 external", "entry e { at a deps(b[0 ) }"),
    ),
    SyntaxExample(
        "a tensor declaration needs ':' then a dtype and a shape",
        "write `tensor x : f32[16, 5120] external`",
        ("tensor x f32[1]", "tensor x : [16]", "tensor x : f32", "tensor x : float[16]",
         "tensor x : f32(1, 2) external"),
    ),
    SyntaxExample(
        "an item is missing after ','",
        "remove the trailing ',' or add the missing item",
        ("entry e { at t { call k(x,) } }", "tensor x : f32[1, 2,] external", "entry e { at a deps(x,) }"),
    ),
    SyntaxExample(
        "a range needs '..' between its bounds",
        "write `i in 0..N` (half-open, N excluded)",
        ("entry e { spmd a[i in 0 5] }", "entry e { for L in 0 to 4 { } }", "entry e { spmd a[i 0..5] }"),
    ),
    SyntaxExample(
        "an `allow` needs a reason after its codes",
        'write `allow(PG104, "why this finding is intended here")` on the line above the declaration',
        ("allow(PG104)", "entry e { allow(PG104) }", "allow(PG104, PG016)", "entry e { allow(PG104, PG016) }"),
    ),
    SyntaxExample(
        "an `allow` names one or more diagnostic codes, then a reason",
        'write e.g. `allow(PG104, "why")`: the codes are PG followed by three digits',
        ('allow("why")', 'entry e { allow("why") }', "allow()", "entry e { allow() }"),
    ),
    # ---- blocks and statements -----------------------------------------------------------
    SyntaxExample(
        "a block is not closed with '}'",
        "add the missing '}' (blocks nest: entry, scopes, loops, phases, task bodies)",
        ("entry e {", "entry e { manual scope {", "entry e { at t { call k(x) ", "entry e { at t { call k(x) }",
         "entry e { phase p { at t { call k(x) } }"),
    ),
    SyntaxExample(
        "a statement inside a scope must start with a keyword",
        "statements are tensor/view/let/assert, `auto scope`/`manual scope`, for/phase/interleave/"
        "taskids/use, or a task kind (at, spmd, parallel, dummy, tiles)",
        ("entry e { foo }", "entry e { q_proj deps(x) }", "entry e { call k(x) }", "entry e { scope { } }",
         "entry e { manaul scope { } }", "entry e { at a deps(b) foo }", "entry e { at a early foo }",
         "entry e { at a foo }"),
    ),
    SyntaxExample(
        "only declarations may appear at the top level",
        "top-level items are include, const, assert, tensor, scalar, view, kernel, fragment and entry; "
        "put tasks inside `entry NAME { ... }`",
        ("at x", "spmd q[i in 0..4]", "manual scope { }", "cosnt A = 1", "foo",
         'include "m.pgl"\nat x', 'include "m.pgl"\nfoo'),
    ),
    SyntaxExample(
        "this '}' closes nothing",
        "remove it, or check the '{' ... '}' pairs above",
        ("entry e { } }", "const A = 1 }"),
    ),
    SyntaxExample(
        "'scope' must follow 'auto' or 'manual'",
        "write `manual scope { ... }` or `auto scope ring 2 { ... }`",
        ("entry e { manual { } }", "entry e { auto ring 2 { } }"),
    ),
    SyntaxExample(
        "a `let` binds its name with '='",
        "write `let nt = i / QKV_OK`",
        ("entry e { let x := 3 }", "entry e { let x 3 }", "entry e { at t { let k i % 5 } }"),
    ),
    # ---- tasks ------------------------------------------------------------------------------
    SyntaxExample(
        "a task body holds `let`, `reads`/`writes`/`atomic_add`, `call`, `wave` and item `for` loops",
        "write e.g. `at rms_recip { call rms_recip(cur, inv_rms) }`",
        ("entry e { at t { foo } }", "entry e { at t { rads x[0] } }", "entry e { at t { tensor x : f32[1] } }"),
    ),
    SyntaxExample(
        "`taskids` lists the task names whose TaskIds this scope keeps",
        "write `taskids copy_hidden, down_proj`",
        ("entry e { taskids }", "entry e { taskids a, }"),
    ),
    SyntaxExample(
        "`ring` takes the integer ring this scope should land on",
        "write `manual scope ring 3 { ... }` (ring = min(depth, 3))",
        ("entry e { manual scope ring { } }", "entry e { manual scope ring x { } }"),
    ),
    SyntaxExample(
        "the index space comes right after the task name, before flags and deps",
        "write `spmd q_proj[i in 0..50] early deps(prev, q_seed) { ... }`",
        ("entry e { spmd a deps(b) [i in 0..4] { } }", "entry e { parallel a early [i in 0..4] { } }"),
    ),
    SyntaxExample(
        "`deps` takes a parenthesised list of task names or tile selections",
        "write `deps(a, b[k], c[10*k +: 10])`",
        ("entry e { at a deps x }", "entry e { at a deps [x] }"),
    ),
    SyntaxExample(
        "a kernel parameter needs a direction (in, out, inout, atomic_add) or `scalar`",
        "write `name : in bf16[16, 1024]` or `name : scalar i64`",
        ("kernel k aic (a: f32[1])", "kernel k aic (a f32[1])", "kernel k aic (a: input f32[1])"),
    ),
    SyntaxExample(
        "a scalar parameter needs its dtype",
        "write `batch : scalar i64`",
        ("kernel k aic (a : in f32[1], b : scalar)", "kernel k aic (b : scalar, a : in f32[1])"),
    ),
    SyntaxExample(
        "a kernel needs a core type (aic, aiv or mix) and a parenthesised parameter list",
        "write `kernel name aic (x : in bf16[16, 256], ...)`",
        ("kernel k (a: in f32[1])", "kernel k aic a: in f32[1]", "kernel k gpu (a: in f32[1])"),
    ),
    SyntaxExample(
        "a region slice is ':', an index, 'a:b' or 'a +: n'",
        "write e.g. `x[:, k*1024 +: 1024]`",
        ("entry e { at t { call k(x[]) } }", "entry e { at t { call k(x[+: 4]) } }",
         "entry e { at t { call k(x[1 +:]) } }", "entry e { at t { call k(x[i:]) } }"),
    ),
    SyntaxExample(
        "a slice is written 'a:b' or 'a +: n'; '..' is for ranges and deps",
        "write `x[:, k*1024 +: 1024]` or `x[:, lo:hi]`",
        ("entry e { at t { call k(x[0..4]) } }", "entry e { at t { reads x[:, 0..4] } }"),
    ),
    SyntaxExample(
        "a wave needs ':' and a dispatch form (parallel or spmd)",
        "write `wave direct t in 26..50 : spmd deps(fa_fused)`",
        ("entry e { tiles t[i in 0..4] { wave w i in 0..2 } }", "entry e { tiles t[i in 0..4] { wave w : at } }"),
    ),
    SyntaxExample(
        "a loop carry is written `name = init then next`",
        "write `carry prev = x_gamma0 then dcr_xgamma`",
        ("entry e { for L in 0..4 carry p = a { } }", "entry e { for L in 0..4 carry p { } }"),
    ),
    SyntaxExample(
        "a loop's `carry` goes between its range and its body",
        "write `for L in 0..NUM_LAYERS carry prev = x_gamma0 then dcr_xgamma { ... }`",
        ("entry e { for L in 0..4 { } carry p = a then b }",),
    ),
    # ---- characters ---------------------------------------------------------------------------
    SyntaxExample(
        "an include takes a quoted path",
        'write `include "qwen3_14b.pgl"` (relative to the including file)',
        ("include abc.pgl",),
    ),
    SyntaxExample(
        "a string must be closed on the same line",
        'close the string with \'"\'',
        ('include "abc', 'assert 1, "oops'),
    ),
    SyntaxExample(
        "pgl statements do not end with ';'",
        "remove the ';' (statements start with a keyword; newlines carry no meaning)",
        ("const A = 1;", "entry e { at t { call k(x); } }"),
    ),
    SyntaxExample(
        "'.' is not an operator: numbers are integers and ranges use '..'",
        "write integers (`1_024` is allowed); use `lo..hi` for a range",
        ("const A = 1.5",),
    ),
    SyntaxExample(
        "unexpected character",
        "pgl uses '#' comments, integer literals, double-quoted strings and the operators "
        "+ - * / % == != < <= > >=",
        ("const A = 1 $ 2", "const A = 'x'", "const A = 1 @ 2"),
    ),
)


#: What users type for the grammar's named terminals (the rest show their literal text).
TOKEN_NAMES: dict[str, str] = {
    "$END": "end of file",
    "NAME": "a name",
    "INT": "an integer",
    "STRING": 'a "string"',
    "DTYPE": "a dtype (bf16, f16, f32, i8, i16, i32, i64, u8, u16, u32, u64)",
    "KIND": "a task kind (at, spmd, parallel, dummy, tiles)",
    "DIRECTION": "a direction (in, out, inout, atomic_add)",
    "CORE": "a core type (aic, aiv, mix)",
    "SCOPE_MODE": "'auto' or 'manual'",
    "FLAG": "'early' or 'sync_start'",
    "ACCESS": "'reads', 'writes' or 'atomic_add'",
    "COMP_OP": "a comparison (== != < <= > >=)",
    "ADD_OP": "'+' or '-'",
    "MUL_OP": "'*', '/' or '%'",
}

#: At most this many alternatives are listed after "expected one of".
MAX_EXPECTED = 10

Signature = tuple[str, Any, frozenset[str] | None, str | None, str]


def _state(err: UnexpectedInput) -> Any:
    """The LALR state number of the error. Lark's own ParserState equality also compares the
    stack depth, which differs with the number of items above the error, so it is not used."""
    return getattr(err.state, "position", err.state)


_WORD = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")


def offending_token(err: UnexpectedInput, text: str | None) -> tuple[str, str]:
    """(type, text) of the unexpected token, seen as the user wrote it.

    The lexer may split a name that starts with a keyword (`inv_rms` lexes as `in` + `v_rms`,
    because keyword terminals outrank NAME); a token that is part of a longer word is
    reported as that whole word, typed NAME.
    """
    tok = getattr(err, "token", None)
    ttype, value = getattr(tok, "type", "$END"), str(tok or "")
    start = getattr(tok, "start_pos", None)
    if text is None or start is None or not _WORD.fullmatch(value):
        return ttype, value
    while start > 0 and (text[start - 1].isalnum() or text[start - 1] == "_"):
        start -= 1
    word = _WORD.match(text, start)
    if word is not None and word.group(0) != value:
        return "NAME", word.group(0)
    return ttype, value


def _signature(err: UnexpectedInput, text: str | None = None) -> Signature:
    """(kind, parser state, acceptable tokens, token type, token text or character)."""
    if isinstance(err, UnexpectedCharacters):
        return ("char", _state(err), None, None, err.char)
    accepts = getattr(err, "accepts", None) or getattr(err, "expected", None)
    ttype, value = offending_token(err, text)
    return ("token", _state(err), frozenset(accepts) if accepts else None, ttype, value)


@functools.cache
def _example_signatures(parse: Callable[[str], object]) -> tuple[tuple[int, Signature], ...]:
    """Every example's error signature, labelled with its table index (computed once)."""
    out = []
    for i, entry in enumerate(SYNTAX_EXAMPLES):
        for text in entry.examples:
            try:
                parse(text)
            except UnexpectedInput as err:
                out.append((i, _signature(err, text)))
    return tuple(out)


def best_match(err: UnexpectedInput, parse: Callable[[str], object], source: str | None = None,
               ) -> SyntaxExample | None:
    """The table entry whose example fails like `err` in `source` (module docstring), or None."""
    kind, state, accepts, ttype, text = _signature(err, source)
    best: tuple[int, int] | None = None  # (rank, table index)
    for index, (k, s, a, t, x) in _example_signatures(parse):
        if k != kind:
            continue
        same_state = s == state and (kind == "char" or a == accepts)
        if kind == "char":
            rank = 0 if same_state and x == text else 1 if x == text else 2 if same_state else None
        elif same_state:
            rank = 0 if (t, x) == (ttype, text) else 1 if t == ttype else 2
        elif a is not None and a == accepts:  # another state that expects the same tokens
            rank = 3 if (t, x) == (ttype, text) else 4 if t == ttype else 5
        else:
            rank = None
        if rank is not None and (best is None or (rank, index) < best):
            best = (rank, index)
    return None if best is None else SYNTAX_EXAMPLES[best[1]]


def _literal(pattern: Any) -> list[str]:
    """The literal words a terminal pattern matches (`(?:a|b)` alternations included)."""
    value = getattr(pattern, "value", "")
    if isinstance(pattern, PatternStr):
        return [value]
    value = value.removesuffix("\\b")  # keyword terminals end at a word boundary
    m = re.fullmatch(r"\((?:\?:)?([a-z0-9_|]+)\)|([a-z0-9_]+)", value)
    if not m:
        return []
    return (m.group(1) or m.group(2)).split("|")


def token_display(name: str, terminals: dict[str, Any]) -> str:
    """A terminal as users write it: `'='` for EQUAL, `'const'` for CONST, a phrase for NAME."""
    if name in TOKEN_NAMES:
        return TOKEN_NAMES[name]
    term = terminals.get(name)
    words = _literal(term.pattern) if term is not None else []
    if len(words) == 1:
        return f"'{words[0]}'"
    if words:
        return " or ".join(f"'{w}'" for w in words)
    return name.lower()


def keyword_suggestion(word: str, expected: Iterable[str], terminals: dict[str, Any]) -> str | None:
    """The expected keyword nearest to a misspelt `word` (`pgraph.suggest.closest`)."""
    if not _WORD.fullmatch(word):
        return None
    keywords = {w for name in expected if name in terminals for w in _literal(terminals[name].pattern)
                if w.isidentifier()}
    return closest(word, keywords)


def describe(err: UnexpectedInput, terminals: Iterable[Any], source: str | None = None) -> str:
    """`unexpected 'x'; expected one of: ',', ')'` (plus `did you mean 'const'?` for a typo)."""
    by_name = {t.name: t for t in terminals}
    if isinstance(err, UnexpectedToken):
        ttype, value = offending_token(err, source)
        found = "end of file" if ttype == "$END" else f"'{value}'"
        expected = sorted(err.accepts or err.expected)
        # categories ("a name", "a task kind (...)") first, then the literal tokens
        shown = sorted({token_display(e, by_name) for e in expected}, key=lambda d: (d[0] == "'", d))
        listed = ", ".join(shown[:MAX_EXPECTED]) + (", ..." if len(shown) > MAX_EXPECTED else "")
        guess = keyword_suggestion(value, expected, by_name) if ttype != "$END" else None
        mean = f" (did you mean '{guess}'?)" if guess else ""
        return f"unexpected {found}{mean}; expected one of: {listed}"
    if isinstance(err, UnexpectedCharacters):
        ch = err.char
        if not ch.isprintable():  # a control character (NUL, vertical tab) would not show on a terminal
            return f"unexpected character U+{ord(ch):04X} ('{ch.encode('unicode_escape').decode('ascii')}')"
        return f"unexpected character '{ch}'"
    return "unexpected end of file"
