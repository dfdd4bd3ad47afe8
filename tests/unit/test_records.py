"""pgraph.records.shared_repr: the shared `__repr__` prints what attrs' generated one prints."""

from __future__ import annotations

import importlib
import pkgutil

import attrs

import pgraph
from pgraph import records
from pgraph.frontend import ast
from pgraph.source import SourceFile, Span


@attrs.frozen
class _Own:
    name: str
    count: int
    hidden: int = attrs.field(default=0, repr=False)
    shown: int = attrs.field(default=5, repr=lambda v: f"<{v}>")
    items: tuple[int, ...] = ()


@records.shared_repr
@attrs.frozen(repr=False)
class _Shared:
    name: str
    count: int
    hidden: int = attrs.field(default=0, repr=False)
    shown: int = attrs.field(default=5, repr=lambda v: f"<{v}>")
    items: tuple[int, ...] = ()


def test_shared_repr_is_attrs_text() -> None:
    for args in (("a", 1), ("b'c", -2, 7, 9, (1, 2))):
        assert repr(_Shared(*args)) == repr(_Own(*args)).replace("_Own(", "_Shared(")
    assert repr(_Shared("x", 1)) == "_Shared(name='x', count=1, shown=<5>, items=())"


def test_pgraph_records_print_fields() -> None:
    file = SourceFile("a.pgl", "const A = 1\n")
    span = Span(file, 1, 1, 1, 12)
    assert repr(span) == "Span(line=1, col=1, end_line=1, end_col=12)"  # the file is repr=False
    assert repr(ast.Include("x.pgl", span)).startswith("Include(path='x.pgl', span=Span(line=1")


def test_every_attrs_class_shares_the_repr() -> None:
    """Each attrs class of pgraph either shares the repr or defines its own (none compiles one)."""
    seen = 0
    for info in pkgutil.walk_packages(pgraph.__path__, "pgraph."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for obj in vars(module).values():
            if isinstance(obj, type) and attrs.has(obj) and obj.__module__ == info.name:
                seen += 1
                assert obj.__repr__ is records.attrs_repr or "__repr__" in obj.__dict__, obj
                assert "<attrs generated" not in getattr(obj.__repr__, "__code__", records.attrs_repr.__code__
                                                         ).co_filename, obj
    assert seen > 100
