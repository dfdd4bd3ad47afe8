"""The table of known bad inputs: each maps a parser state to a friendly message.

`pgraph.syntax.parser` hands this table to Lark's `match_examples`; the tests
iterate the same table and check that every example gets its own message.
"""

from __future__ import annotations

import attrs


@attrs.frozen
class SyntaxExample:
    """A friendly message, its fix hint, and bad snippets that end in that parser state."""

    message: str
    hint: str
    examples: tuple[str, ...]


SYNTAX_EXAMPLES: tuple[SyntaxExample, ...] = (
    SyntaxExample(
        "a constant needs '=' between its name and value",
        "write `const NAME = expr`",
        ("const A 1", "const A\nconst B = 2"),
    ),
    SyntaxExample(
        "an expression is missing",
        "complete the expression, e.g. `const A = 4 * 256`",
        ("const A =", "const A = 1 +", "assert A ==", "const A = (1 + 2"),
    ),
    SyntaxExample(
        "a tensor declaration needs ':' then a dtype and a shape",
        "write `tensor x : f32[16, 5120] external`",
        ("tensor x f32[1]", "tensor x : [16]", "tensor x : f32", "tensor x : float[16]"),
    ),
    SyntaxExample(
        "a range needs '..' between its bounds",
        "write `i in 0..N` (half-open, N excluded)",
        ("entry e { spmd a[i in 0 5] }", "entry e { for L in 0 to 4 { } }", "entry e { spmd a[i 0..5] }"),
    ),
    SyntaxExample(
        "a block is not closed with '}'",
        "add the missing '}' (blocks nest: entry, scopes, loops, phases, task bodies)",
        ("entry e {", "entry e { manual scope {", "entry e { at t { call k(x) "),
    ),
    SyntaxExample(
        "a statement inside a scope must start with a keyword",
        "statements are tensor/view/let/assert/scope/for/phase/taskids or a task kind "
        "(at, spmd, parallel, dummy, tiles)",
        ("entry e { foo }", "entry e { q_proj deps(x) }", "entry e { call k(x) }"),
    ),
    SyntaxExample(
        "only declarations may appear at the top level",
        "top-level items are include, const, assert, tensor, scalar, view, kernel and entry; "
        "put tasks inside `entry NAME { ... }`",
        ("at x", "spmd q[i in 0..4]", "manual scope { }"),
    ),
    SyntaxExample(
        "`deps` takes a parenthesised list of task names or tile selections",
        "write `deps(a, b[k], c[10*k +: 10])`",
        ("entry e { at a deps x }", "entry e { at a deps [x] }", "entry e { at a deps(x y) }"),
    ),
    SyntaxExample(
        "a kernel parameter needs a direction (in, out, inout, atomic_add) or `scalar`",
        "write `name : in bf16[16, 1024]` or `name : scalar i64`",
        ("kernel k aic (a: f32[1])", "kernel k aic (a f32[1])", "kernel k aic (a: input f32[1])"),
    ),
    SyntaxExample(
        "a kernel needs a core type (aic, aiv or mix) and a parenthesised parameter list",
        "write `kernel name aic (x : in bf16[16, 256], ...)`",
        ("kernel k (a: in f32[1])", "kernel k aic a: in f32[1]", "kernel k gpu (a: in f32[1])"),
    ),
    SyntaxExample(
        "a region slice is ':', an index, 'a:b' or 'a +: n'",
        "write e.g. `x[:, k*1024 +: 1024]`",
        ("entry e { at t { call k(x[]) } }", "entry e { at t { call k(x[+: 4]) } }", "entry e { at t { call k(x[1 +:]) } }"),
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
        "a string must be closed on the same line",
        'close the string with \'"\'',
        ('include "abc', 'assert 1, "oops'),
    ),
    SyntaxExample(
        "unexpected character",
        "pgl uses '#' comments, integer literals and the operators + - * / % == != < <= > >=",
        ("const A = 1 $ 2", "const A = 1.5", "const A = 'x'"),
    ),
)
