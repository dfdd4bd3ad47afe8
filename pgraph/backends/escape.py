"""Escapers for user-controlled text in generated files: one per place a string can land.

A spec path, an include's file name, a `--config` name, a kernel `source` string (and, by
defence in depth, every comment a backend writes) reaches generated text only through these.
Each escaper is total: any Python `str` (line breaks of every kind, control characters,
bidirectional overrides, the lone surrogates that `os.fsdecode` makes of undecodable file name
bytes) gives text that (a) cannot end or extend the construct it sits in, (b) is valid UTF-8,
and (c) keeps the original recoverable (escapes are unambiguous). Nothing needs refusing.

- `c_comment`: the text of a C/C++ `//` line comment. A line break would end the comment and
  a trailing backslash would splice the next line into it (C++ phase 2), so every backslash
  and every non-printable character becomes `\\xNN`, `\\uNNNN` or `\\UNNNNNNNN`, and `??`
  becomes `?\\x3f` (no trigraph `??/`).
- `comment_text`: the common part, and all a TOML `#` comment needs (the sim calibration file).
- `py_comment`: the text of a Python `#` comment: as `c_comment`, and `coding:`/`coding=` is
  spelt `coding\\x3a`/`coding\\x3d`, because a comment on line 1 or 2 that matches PEP 263
  would choose the file's encoding (`coding: utf-7` decodes `+AAo-` as a newline).
- `c_string`: a C/C++ string literal, quotes included; bytes outside printable ASCII are
  three-digit octal escapes (a `\\x` escape would swallow the hex digits that follow).
- `py_str`: a Python string literal, quotes included, `eval(py_str(s)) == s` for every `s`.
- `dot_string`, `dot_tooltip`: the body of a DOT quoted string (Graphviz escString) for a label
  and for a tooltip: a user `\\n`, `\\N` or `\\l` stays text, quotes are escaped, non-printables
  show as `\\xNN`; every quote is preceded by an even run of backslashes, so the string ends
  where it should.
"""

from __future__ import annotations

import re

__all__ = ["c_comment", "c_string", "comment_text", "dot_string", "dot_tooltip", "py_comment", "py_str"]


def _code_point(ch: str) -> str:
    o = ord(ch)
    if o < 0x100:
        return f"\\x{o:02x}"
    if o < 0x10000:
        return f"\\u{o:04x}"
    return f"\\U{o:08x}"


def _printable(ch: str) -> bool:
    """Printable and harmless: `str.isprintable` excludes every line break (\\n \\r \\v \\f,
    \\x1c-\\x1e, U+0085, U+2028, U+2029), tabs, controls, format characters (the bidi overrides
    of "Trojan Source") and lone surrogates."""
    return ch.isprintable()


def comment_text(text: str) -> str:
    """`text` with every backslash and every non-printable character written as an escape: the
    body of a one-line comment in any language (the base of `c_comment`, `py_comment`, and of a
    TOML `#` comment, where control characters other than tab are not even allowed)."""
    return "".join(ch if _printable(ch) and ch != "\\" else _code_point(ch) for ch in text)


def c_comment(text: str) -> str:
    """`text` made safe as the body of a `//` comment (see the module docstring)."""
    return comment_text(text).replace("??", "?\\x3f")


_CODING = re.compile(r"coding([:=])")


def py_comment(text: str) -> str:
    """`text` made safe as the body of a `#` comment of a Python file (see the module docstring)."""
    return _CODING.sub(lambda m: "coding" + _code_point(m.group(1)), c_comment(text))


def c_string(text: str) -> str:
    """A C/C++ string literal (with its quotes) whose bytes are the UTF-8 of `text`.

    Lone surrogates from `os.fsdecode` go back to their original bytes (surrogateescape).
    """
    try:
        data = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        data = text.encode("utf-8", "surrogatepass")
    parts = []
    for b in data:
        ch = chr(b)
        if ch in '\\"?':
            parts.append("\\" + ch)
        elif 0x20 <= b < 0x7F:
            parts.append(ch)
        else:
            parts.append(f"\\{b:03o}")
    return '"' + "".join(parts) + '"'


def py_str(text: str) -> str:
    """A Python string literal (with its double quotes) equal to `text`."""
    parts = []
    for ch in text:
        if ch in '\\"':
            parts.append("\\" + ch)
        elif _printable(ch):
            parts.append(ch)
        else:
            parts.append(_code_point(ch))
    return '"' + "".join(parts) + '"'


def dot_string(text: str) -> str:
    """The body of a DOT quoted string that a Graphviz *label* shows as `text` literally.

    Graphviz applies escString once to labels (`\\\\` shows one backslash; `\\N`, `\\G`, `\\l`
    would be the node name, the graph name, a line break).
    """
    return _dot(text, "\\\\")


def dot_tooltip(text: str) -> str:
    """The body of a DOT quoted string that a Graphviz *tooltip* shows as `text` literally.

    Graphviz (dot 2.43, the tests check it) unescapes a tooltip's backslashes once more than a
    label's, so each backslash of `text` is four in the DOT source; a quote is `\\"` either way.
    """
    return _dot(text, "\\" * 4)


def _dot(text: str, backslash: str) -> str:
    """`backslash`: the DOT source of one backslash shown (two for a label, four for a tooltip)."""
    parts = []
    for ch in text:
        if ch == "\\":
            parts.append(backslash)
        elif ch == '"':
            parts.append('\\"')
        elif _printable(ch):
            parts.append(ch)
        else:
            parts.append(backslash + _code_point(ch)[1:])  # shows as the visible text `\x0a`
    return "".join(parts)
