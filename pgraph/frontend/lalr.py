"""The start-up parser: an LALR driver over the tables Lark builds from grammar/pgl.lark.

Lark is the grammar's parser generator and the parser of record: it builds the tables, and a
text this driver does not accept is parsed again by Lark itself, whose exception the syntax
diagnostics are made from (`pgraph.frontend.parser`). This module only makes the common case,
a valid spec, cheap in a fresh process: importing Lark, loading its saved parser and compiling
the contextual lexer's scanners (78 of its 128 for the decode spec) cost ~0.1 s before the first token, and Lark's parse-tree
layers another ~20 µs per token. Here the tables are plain data (the generated module
`pgraph.frontend.pgl_tables`, written by `python3 -m pgraph.frontend.parser` from Lark's own objects: its LALR states, rules, child
filters and each state's lexer terminals) and the driver calls the AST builder's rule methods
during the reductions, so no parse tree is built.

What must equal Lark's result, and is checked against Lark on every spec, document and random
program in the tests (tests/unit/test_lalr.py):
- the tokens: Lark's contextual lexer, i.e. in each parser state the first of that state's
  terminals (Lark's order: priority, longest possible match, longest pattern, name) that
  matches, with a keyword string re-typed from the regex terminal it is embedded in. The
  first match of all terminals is the first pattern terminal that matches (one alternation of
  the 18 patterns) unless a literal terminal before it, one starting with the position's
  character, matches (53 literals, compared as strings); when that terminal is not the
  state's, the state's terminals after it are tried one by one (rare: `in` after a loop name).
- the unit reductions (`?rule: one_symbol` chains, ~6,000 in the decode spec) only change the
  top state: the state they end in is kept per (state below, top state, token).
- the tree shapes: each rule's child filter (anonymous tokens dropped, `_` rules spliced in),
  `?rule` single-child expansion, `-> alias` names;
- the positions Lark's `propagate_positions` gives every rule node (line, column, end line,
  end column, offsets, `empty`), including the containers of inlined rules.
"""

from __future__ import annotations

import functools
import re
from typing import Any

#: The generated module of the tables: GRAMMAR_DIGEST, the digest of the grammar they were
#: built from (`pgraph.frontend.parser.grammar_digest`), LARK_VERSION, the version of the Lark
#: that built them, and TABLES. A module, loaded from its bytecode like any other (~1 ms), where
#: a JSON file would cost the json import and decoding (~4 ms of every start).
TABLES_MODULE = "pgraph.frontend.pgl_tables"

#: The line of lark/__init__.py that sets `lark.__version__` (`installed_lark_version`).
_VERSION_LINE = re.compile(r'^__version__(?:\s*:\s*str)?\s*=\s*["\']([^"\']+)["\']', re.MULTILINE)


def installed_lark_version() -> str | None:
    """`lark.__version__` of the Lark that `import lark` loads, without importing it (~30 ms):
    the module when it is loaded already, else the line of its `lark/__init__.py` that sets it
    (tests/unit/test_lalr.py holds the two equal). None when Lark is not found or the line is
    not there: no tables match then, and Lark parses."""
    import sys

    module = sys.modules.get("lark")
    if module is not None:
        version = getattr(module, "__version__", None)
        return version if isinstance(version, str) else None
    import importlib.util

    try:
        spec = importlib.util.find_spec("lark")
        if spec is None or spec.origin is None:
            return None
        with open(spec.origin, encoding="utf-8") as f:
            text = f.read()
    except (ImportError, OSError, ValueError):
        return None
    m = _VERSION_LINE.search(text)
    return None if m is None else m.group(1)


class Token(str):
    """A terminal of the text: the characters, the terminal name `type` and its position.

    The attributes Lark's Token has: `type` (terminal name, e.g. "NAME"), `start_pos` and
    `end_pos` (0-based character offsets), `line`, `column`, `end_line`, `end_column` (1-based;
    the end column is one past the last character).
    """

    type: str
    start_pos: int
    line: int
    column: int
    end_line: int
    end_column: int
    end_pos: int

    @property
    def value(self) -> str:
        """The characters (Lark's `Token.value`)."""
        return str(self)


class Meta:
    """The position of a rule node, as Lark's `propagate_positions` computes it (`empty` until a
    child with a position is seen; the container fields include the tokens of inlined rules)."""

    __slots__ = ("empty", "line", "column", "start_pos", "end_line", "end_column", "end_pos",
                 "container_line", "container_column", "container_start_pos", "container_end_line",
                 "container_end_column", "container_end_pos")

    empty: bool
    line: int
    column: int
    start_pos: int
    end_line: int
    end_column: int
    end_pos: int
    container_line: int
    container_column: int
    container_start_pos: int
    container_end_line: int
    container_end_column: int
    container_end_pos: int

    def __init__(self) -> None:
        self.empty = True


class Fallback(Exception):
    """The driver does not accept the text (a syntax error, or a tree higher than the limit):
    the caller parses it with Lark, whose answer (its syntax error) is the answer."""


class _Node:
    """A rule node on the value stack: the AST value its method returned, its Meta, its height
    in Lark's tree (a node without rule-node children is 1)."""

    __slots__ = ("value", "meta", "height")

    def __init__(self, value: Any, meta: Meta, height: int) -> None:
        self.value = value
        self.meta = meta
        self.height = height


class _Inline:
    """A `_rule` node: its filtered children, spliced into the parent by the parent's filter."""

    __slots__ = ("children", "meta", "height")

    def __init__(self, children: list[Any], meta: Meta, height: int) -> None:
        self.children = children
        self.meta = meta
        self.height = height


@functools.cache
def load_tables(digest: bytes, lark_version: str | None) -> dict[str, Any] | None:
    """The saved tables when they were built from the grammar of `digest` by the Lark of
    `lark_version`, else None (stale, built by another Lark, missing, or not the shape written)."""
    import importlib

    try:
        module = importlib.import_module(TABLES_MODULE)
    except ImportError:
        return None
    tables = getattr(module, "TABLES", None)
    if (getattr(module, "GRAMMAR_DIGEST", None) != digest.decode("ascii") or lark_version is None
            or getattr(module, "LARK_VERSION", None) != lark_version or not isinstance(tables, dict)):
        return None
    return tables


class Driver:
    """The lexer and LALR loop over one set of tables (see the module docstring)."""

    def __init__(self, tables: dict[str, Any]) -> None:
        self.terminals: list[tuple[str, str]] = tables["terminals"]  # (name, regexp), Lark's order
        self.index = {name: i for i, (name, _) in enumerate(self.terminals)}
        self.literals: dict[str, str] = tables["literals"]  # terminal -> the one string it matches
        # the first pattern terminal (not one literal string) that matches at a position: one
        # alternation of the patterns in Lark's order (the first branch that matches wins)
        self.patterns = re.compile("|".join(f"(?P<{name}>{regexp})" for name, regexp in self.terminals
                                            if name not in self.literals)).match
        self.scanners: dict[str, Any] = {}  # character -> its scan function (`_scanner`)
        self.tails: dict[tuple[int, str], list[tuple[str, str | None, Any]]] = {}  # `_fallback`'s tries
        self.single: dict[str, re.Pattern[str]] = {}
        self.ignore = frozenset(tables["ignore"])
        self.newline = frozenset(tables["newline"])
        # per lexer: (its terminals as a set, [(order, name)] in order, {regex terminal: {keyword: type}})
        self.lexers = [(frozenset(names), [(self.index[n], n) for n in names], unless)
                       for names, unless in tables["lexers"]]
        self.state_lexer: list[int] = tables["state_lexer"]
        self.states: list[dict[str, int]] = tables["states"]  # action >= 0: shift; < 0: reduce ~action
        # rule: (origin, size, callback name, expand1, to_include or None, inline)
        self.rules: list[tuple[str, int, str, bool, list[tuple[int, bool]] | None, bool]] = [
            (o, n, cb, bool(e1), None if inc is None else [(i, bool(x)) for i, x in inc], bool(inl))
            for o, n, cb, e1, inc, inl in tables["rules"]]
        # per rule: its origin when it is a unit rule (one symbol, kept, expanded: a reduction
        # that leaves the child as the node and only changes the parser state), else None
        self.units: list[str | None] = [o if n == 1 and e1 and inc is None and not inl else None
                                        for o, n, _cb, e1, inc, inl in self.rules]
        self.start: int = tables["start"]
        self.end: int = tables["end"]
        # (state below, top state, token) -> the top state after the unit reductions it starts
        self.unit_goto: dict[tuple[int, int, str], int] = {}
        if any(not self.ignore <= allowed for allowed, _, _ in self.lexers):
            raise ValueError("an ignored terminal is missing from a state's lexer")

    def _scanner(self, char: str) -> Any:
        """`scan(text, pos) -> (terminal, characters) | None`: the first terminal of all (Lark's
        order) that matches at a position holding `char`: the first pattern terminal that
        matches, unless a literal terminal before it, one starting with `char`, matches."""
        patterns, rank = self.patterns, self.index
        words = sorted((rank[name], name, word) for name, word in self.literals.items() if word.startswith(char))
        if not words:
            def scan(text: str, pos: int) -> tuple[str, str] | None:
                m = patterns(text, pos)
                return None if m is None else (m.lastgroup, m.group())  # type: ignore[return-value]
        else:
            past = len(self.terminals)

            def scan(text: str, pos: int) -> tuple[str, str] | None:
                m = patterns(text, pos)
                at = past if m is None else rank[m.lastgroup]  # type: ignore[index]
                for order, name, word in words:
                    if order > at:
                        break
                    if text.startswith(word, pos):
                        return name, word
                return None if m is None else (m.lastgroup, m.group())  # type: ignore[return-value]
        self.scanners[char] = scan
        return scan

    def _single(self, i: int) -> Any:
        """The `match` of terminal `i` alone (None for a literal, compared as a string)."""
        name, regexp = self.terminals[i]
        if name in self.literals:
            return None
        pattern = self.single.get(name)
        if pattern is None:
            pattern = self.single[name] = re.compile(regexp)
        return pattern.match

    def _fallback(self, text: str, pos: int, first: str, ordered: list[tuple[int, str]]) -> tuple[str, str]:
        """(terminal, characters) at `pos` for a state whose lexer does not have `first`, the
        first terminal of all that matches there: the state's terminals after it, in order."""
        key = (id(ordered), first)
        tail = self.tails.get(key)
        if tail is None:  # the state's terminals after `first`: (name, literal or None, match)
            at = self.index[first]
            tail = self.tails[key] = [(cand, self.literals.get(cand), self._single(order))
                                      for order, cand in ordered if order > at]
        for cand, word, pattern in tail:
            if word is not None:  # a literal: compared, no regex
                if text.startswith(word, pos):
                    return cand, word
                continue
            m = pattern(text, pos)
            if m is not None:
                return cand, m.group()
        raise Fallback

    def parse(self, text: str, builder: Any, max_height: int) -> Any:
        """The AST `builder`'s rule methods make of `text` (the method of a rule or alias name
        takes (meta, children) when marked `with_meta`, else (children)).

        Raises Fallback for a text Lark may reject, or whose tree is higher than `max_height`.
        """
        states, rules, units, reduce = self.states, self.rules, self.units, self._reduce
        unit_goto = self.unit_goto
        scan = self._scan
        methods: dict[str, tuple[Any, bool]] = {}
        state_stack = [self.start]
        values: list[Any] = []
        where = (0, 1, 0)   # pos, line, line_start of the next token
        while True:
            ttype, tok, where = scan(text, where, state_stack[-1])
            while True:
                top = state_stack[-1]
                action = states[top].get(ttype)
                if action is None:
                    raise Fallback
                if action >= 0:
                    if tok is None:
                        raise Fallback
                    state_stack.append(action)
                    values.append(tok)
                    break
                if units[~action] is not None:
                    # `?rule: one_symbol` reductions: the child stays the node and only the top
                    # state changes, to the same state for the same (state below, top, token)
                    key = (state_stack[-2], top, ttype)
                    goto = unit_goto.get(key)
                    if goto is None:
                        goto = unit_goto[key] = self._unit_chain(*key)
                    state_stack[-1] = goto
                    continue
                origin, n, name, expand1, include, inline = rules[~action]
                if n:
                    children = values[-n:]
                    del values[-n:]
                    del state_stack[-n:]
                else:
                    children = []
                result = reduce(children, name, expand1, include, inline, builder, methods)
                if result.__class__ is not Token and result.height > max_height:
                    raise Fallback
                goto = states[state_stack[-1]].get(origin)
                if goto is None or goto < 0:
                    raise Fallback
                state_stack.append(goto)
                values.append(result)
                if tok is None and goto == self.end:
                    if result.__class__ is not _Node:
                        raise Fallback
                    return result.value

    def _scan(self, text: str, where: tuple[int, int, int], state: int
              ) -> tuple[str, Token | None, tuple[int, int, int]]:
        """The next token of `text` at `where` (pos, line, line_start) in parser state `state`:
        (type, token, where after it), ("$END", None, where) at the end. The token is the first
        terminal of all that matches, when it is this state's; a keyword is re-typed from the
        regex terminal it is embedded in (Lark's lexer); whitespace and comments are skipped."""
        pos, line, line_start = where
        size = len(text)
        scanners, ignore, newline = self.scanners, self.ignore, self.newline
        while pos < size:
            char = text[pos]
            got = (scanners[char] if char in scanners else self._scanner(char))(text, pos)
            if got is None:
                raise Fallback
            scanned, value = got
            if scanned in ignore:  # whitespace, a comment: in every state's lexer (checked in __init__)
                end = pos + len(value)
                if scanned in newline:
                    n = text.count("\n", pos, end)
                    if n:
                        line += n
                        line_start = text.rindex("\n", pos, end) + 1
                pos = end
                continue
            allowed, ordered, unless = self.lexers[self.state_lexer[state]]
            if scanned not in allowed:
                scanned, value = self._fallback(text, pos, scanned, ordered)
                if scanned in ignore:
                    raise Fallback  # (cannot happen: an ignored terminal is first wherever it matches)
            start_line, column = line, pos - line_start + 1
            if scanned in newline:
                n = value.count("\n")
                if n:
                    line += n
                    line_start = pos + value.rindex("\n") + 1
            start, pos = pos, pos + len(value)
            words = unless.get(scanned)
            tok = Token(value)
            tok.type, tok.start_pos, tok.line, tok.column = scanned if words is None else words.get(value, scanned), \
                start, start_line, column
            tok.end_line, tok.end_column, tok.end_pos = line, pos - line_start + 1, pos
            return tok.type, tok, (pos, line, line_start)
        return "$END", None, (pos, line, line_start)

    def _unit_chain(self, below: int, top: int, ttype: str) -> int:
        """The top state after the unit reductions `ttype` starts in state `top` over `below`:
        each pops the top and goes from `below` on the rule's origin, until an action that is
        not a unit reduction. Raises Fallback where the parse would stop: no action, or the end
        state reached at the end of the text (the start rule is no unit rule)."""
        states, units = self.states, self.units
        while True:
            action = states[top].get(ttype)
            if action is None or action >= 0:
                return top
            origin = units[~action]
            if origin is None:
                return top
            goto = states[below].get(origin)
            if goto is None or goto < 0 or (ttype == "$END" and goto == self.end):
                raise Fallback
            top = goto

    @staticmethod
    def _reduce(children: list[Any], name: str, expand1: bool, include: list[tuple[int, bool]] | None,
                inline: bool, builder: Any, methods: dict[str, tuple[Any, bool]]) -> Any:
        """One reduction: Lark's child filter, single-child expansion, tree node (here the
        builder's method) and position propagation, in Lark's order."""
        if include is None:
            kept = children
        else:
            kept = []
            for i, splice in include:
                c = children[i]
                if splice:
                    kept.extend(c.children)
                else:
                    kept.append(c)
        if expand1 and len(kept) == 1:
            result = kept[0]
            if result.__class__ is Token:
                return result
            if len(children) > 1:  # with one child, propagating its own position changes nothing
                _propagate(result.meta, children)
            return result
        meta = Meta()
        _propagate(meta, children)
        height = 0
        args = []
        for c in kept:
            if c.__class__ is Token:
                args.append(c)
            else:
                if c.height > height:
                    height = c.height
                args.append(c.value)
        if inline:
            return _Inline(kept, meta, height)
        entry = methods.get(name)
        if entry is None:
            method = getattr(builder, name, None)
            if method is None:
                raise Fallback
            entry = methods[name] = (method, bool(getattr(method, "with_meta", False)))
        method, with_meta = entry
        return _Node(method(meta, args) if with_meta else method(args), meta, height + 1)


def _positioned(children: Any) -> Any:
    """Lark's `_pp_get_meta`: the first child with a position (a token, or a non-empty node's Meta)."""
    for c in children:
        if c.__class__ is Token:
            return c
        if not c.meta.empty:
            return c.meta
    return None


def _propagate(meta: Meta, children: list[Any]) -> None:
    """Lark's PropagatePositions on `meta` from the unfiltered `children`: a node starts where
    its first child with a position starts (a token, or a non-empty node's container) and ends
    where its last one ends; a node that has a position keeps it and only widens its container.
    (Lark sets the start and the end together, so `empty` says whether both are set.)"""
    first = _positioned(children)
    if first is None:
        return
    last = _positioned(reversed(children))
    if first.__class__ is Token:
        line, column, start = first.line, first.column, first.start_pos
    else:
        line, column, start = first.container_line, first.container_column, first.container_start_pos
    if last.__class__ is Token:
        end_line, end_column, end = last.end_line, last.end_column, last.end_pos
    else:
        end_line, end_column, end = last.container_end_line, last.container_end_column, last.container_end_pos
    if meta.empty:
        meta.line, meta.column, meta.start_pos = line, column, start
        meta.end_line, meta.end_column, meta.end_pos = end_line, end_column, end
        meta.empty = False
    meta.container_line, meta.container_column, meta.container_start_pos = line, column, start
    meta.container_end_line, meta.container_end_column, meta.container_end_pos = end_line, end_column, end


@functools.cache
def driver(digest: bytes, lark_version: str | None) -> Driver | None:
    """The driver over the saved tables of the grammar of `digest` built by the Lark of
    `lark_version` (None: stale, of another Lark, or missing)."""
    tables = load_tables(digest, lark_version)
    return None if tables is None else Driver(tables)


def build_tables(lark_parser: Any) -> dict[str, Any]:
    """The tables of a Lark LALR parser (`lark.Lark(..., parser="lalr")` with the contextual
    lexer), read from Lark's own objects: its parse table, rules and child filters, and the
    terminals, keyword re-typing and order of each state's lexer.

    Raises ValueError when Lark's objects have a shape this driver does not reproduce.
    """
    from lark.lexer import ContextualLexer
    from lark.parsers.lalr_analysis import Shift

    frontend = lark_parser.parser
    lexer: Any = frontend.lexer
    if not isinstance(lexer, ContextualLexer):
        raise ValueError("the driver reproduces Lark's contextual lexer only")
    table = frontend.parser.parser.parse_table
    if len(table.start_states) != 1:
        raise ValueError("one start symbol expected")
    (start_name, start), = table.start_states.items()
    end = table.end_states[start_name]
    rules = list(lark_parser.rules)
    rule_index = {id(r): i for i, r in enumerate(rules)}
    root: Any = lexer.root_lexer
    order = [str(t.name) for t in root.terminals]  # Lark's sort (priority, max width, pattern length, name)
    position = {n: i for i, n in enumerate(order)}
    terminals = [(str(t.name), str(t.pattern.to_regexp())) for t in root.terminals]
    # the terminals that match one literal string (Lark's PatternStr without flags)
    literals = {str(t.name): str(t.pattern.value) for t in root.terminals
                if t.pattern.type == "str" and not t.pattern.flags}
    for _, regexp in terminals:
        if re.compile(regexp).groupindex:
            raise ValueError("a terminal with named groups would confuse the alternation")
    lexers, state_lexer = _state_lexers(lexer, position)
    states: dict[int, dict[str, int]] = {}
    for state, actions in table.states.items():
        row: dict[str, int] = {}
        for symbol, (action, arg) in actions.items():
            row[str(symbol)] = int(arg) if action is Shift else ~rule_index[id(arg)]
        states[int(state)] = row
    if lark_parser.options.maybe_placeholders or lark_parser.options.propagate_positions is not True:
        raise ValueError("the driver reproduces propagate_positions=True, maybe_placeholders=False")
    rule_rows = _rule_rows(rules)
    newline = sorted(str(n) for n in root.newline_types)
    number = _renumber(states, int(start))
    by_number = sorted(states, key=number.__getitem__)
    lexer_number: dict[int, int] = {}
    for state in by_number:
        lexer_number.setdefault(state_lexer[state], len(lexer_number))
    canonical_lexers = [lexers[i] for i in sorted(lexer_number, key=lexer_number.__getitem__)]
    canonical_lexers = [(names, {k: dict(sorted(v.items())) for k, v in sorted(unless.items())})
                        for names, unless in canonical_lexers]
    return {"terminals": terminals, "literals": dict(sorted(literals.items())),
            "ignore": sorted(str(n) for n in root.ignore_types), "newline": newline,
            "lexers": canonical_lexers,
            "state_lexer": [lexer_number[state_lexer[s]] for s in by_number],
            "states": [{sym: (number[a] if a >= 0 else a) for sym, a in sorted(states[s].items())}
                       for s in by_number],
            "rules": rule_rows, "start": number[int(start)], "end": number[int(end)]}


def _state_lexers(lexer: Any, position: dict[str, int]) -> tuple[list[tuple[list[str], dict[str, dict[str, str]]]],
                                                                dict[int, int]]:
    """The distinct lexers of Lark's contextual lexer (each state's terminals, in the global
    order, and its keyword re-typing) and the lexer of each parser state."""
    from lark.lexer import UnlessCallback

    lexers: list[tuple[list[str], dict[str, dict[str, str]]]] = []
    lexer_of: dict[int, int] = {}
    state_lexer: dict[int, int] = {}
    basic: Any
    for state, basic in lexer.lexers.items():
        if id(basic) not in lexer_of:
            scanner = basic.scanner  # builds it: the terminals after keyword embedding, in order
            names = [str(t.name) for t in scanner.terminals]
            if [position[n] for n in names] != sorted(position[n] for n in names):
                raise ValueError("a state's terminals are not in the global order")
            unless: dict[str, dict[str, str]] = {}
            for ttype, cb in basic.callback.items():
                if not isinstance(cb, UnlessCallback) or any(t.pattern.flags for t in cb.scanner.terminals):
                    raise ValueError(f"unexpected lexer callback on {ttype}")
                unless[str(ttype)] = {str(t.pattern.value): str(t.name) for t in cb.scanner.terminals}
            lexer_of[id(basic)] = len(lexers)
            lexers.append((names, unless))
        state_lexer[int(state)] = lexer_of[id(basic)]
    return lexers, state_lexer


def _rule_rows(rules: list[Any]) -> list[tuple[str, int, str, int, list[tuple[int, int]] | None, int]]:
    """Per rule: (origin, length, tree name, expand1 without alias, child filter, inlined)."""
    from lark.parse_tree_builder import maybe_create_child_filter

    rule_rows = []
    for r in rules:
        opts = r.options
        if opts.keep_all_tokens:
            raise ValueError(f"rule {r.origin.name}: kept tokens (`!rule`) are not reproduced")
        filt = maybe_create_child_filter(r.expansion, False, False, [])
        include = None if filt is None else [(i, int(x)) for i, x in filt.args[0]]
        name = r.alias or opts.template_source or r.origin.name
        rule_rows.append((str(r.origin.name), len(r.expansion), str(name),
                          int(bool(opts.expand1) and not r.alias), include, int(r.origin.name.startswith("_"))))
    return rule_rows


def _renumber(states: dict[int, dict[str, int]], start: int) -> dict[int, int]:
    """Lark numbers its states in an order that follows string hashing: renumber them breadth
    first from the start state, symbols in sorted order, so that the file is the same bytes in
    every process (and the lexers in the order their first state gets)."""
    number: dict[int, int] = {}
    queue = [start]
    while queue:
        state = queue.pop(0)
        if state in number:
            continue
        number[state] = len(number)
        queue.extend(a for _, a in sorted(states[state].items()) if a >= 0 and a not in number)
    if len(number) != len(states):
        raise ValueError("a parser state is not reachable from the start state")
    return number


def dump_tables(tables: dict[str, Any], digest: bytes, lark_version: str) -> str:
    """The text of the module `pgraph.frontend.pgl_tables`: the grammar digest, the version of
    the Lark that built the tables and the tables (JSON's types: lists, not tuples), one literal
    printed with `pprint`."""
    import json
    import pprint

    plain = json.loads(json.dumps(tables))
    body = pprint.pformat(plain, width=110, compact=True, sort_dicts=False)
    return ('"""The start-up parser\'s tables (`pgraph.frontend.lalr`): generated from grammar/pgl.lark by\n'
            "`python3 -m pgraph.frontend.parser`; do not edit (tests/unit/test_lalr.py checks them).\"\"\"\n\n"
            "# ruff: noqa\n"
            "# mypy: ignore-errors\n"
            "from typing import Any\n\n"
            f"GRAMMAR_DIGEST = {digest.decode('ascii')!r}\n\n"
            f"LARK_VERSION = {lark_version!r}\n\n"
            f"TABLES: dict[str, Any] = {body}\n")
