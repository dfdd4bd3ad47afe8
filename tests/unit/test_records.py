"""pgraph.records: the shared `__repr__` prints what attrs' generated one prints; the shared
`__eq__`/`__hash__` of `records.value` compare and hash as attrs' generated ones do."""

from __future__ import annotations

import importlib
import pkgutil

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

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


@attrs.frozen
class _OwnValue:
    name: str
    count: int
    note: str = attrs.field(default="", eq=False)  # neither compared nor hashed
    weight: int = attrs.field(default=0, hash=False)  # compared, not hashed
    items: tuple[int, ...] = ()


@records.value
@attrs.frozen(repr=False, eq=False)
class _Value:
    name: str
    count: int
    note: str = attrs.field(default="", eq=False)
    weight: int = attrs.field(default=0, hash=False)
    items: tuple[int, ...] = ()


@records.value
@attrs.frozen(repr=False, eq=False)
class _Empty:
    pass


@records.value
@attrs.frozen(repr=False, eq=False)
class _One:
    x: int


_fields = st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 1), st.sampled_from(["", "n"]),
                    st.integers(0, 1), st.sampled_from([(), (1,), (1, 2)]))


@given(_fields, _fields)
def test_value_equality_is_attrs_equality(a: tuple, b: tuple) -> None:  # type: ignore[type-arg]
    """Every pair of field values: == and != as attrs decides them; equal values hash equal, and
    values that differ only in unhashed fields hash equal as with attrs."""
    mine, theirs = (_Value(*a), _Value(*b)), (_OwnValue(*a), _OwnValue(*b))
    assert (mine[0] == mine[1]) == (theirs[0] == theirs[1])
    assert (mine[0] != mine[1]) == (theirs[0] != theirs[1])
    assert (hash(mine[0]) == hash(mine[1])) == (hash(theirs[0]) == hash(theirs[1]))
    assert repr(mine[0]) == repr(theirs[0]).replace("_OwnValue(", "_Value(")


def test_value_edge_cases() -> None:
    assert _Empty() == _Empty() and hash(_Empty()) == hash(_Empty())
    assert _One(1) == _One(1) and _One(1) != _One(2) and hash(_One(3)) == hash(_One(3))
    assert _One(1) != (1,) and (_One(1) == _Empty()) is False  # another class: NotImplemented both ways
    assert _One(1).__eq__(_Empty()) is NotImplemented
    assert len({_One(1), _One(1), _One(2)}) == 2
    with pytest.raises(TypeError):  # eq=True: attrs already compiled __eq__
        records.value(attrs.frozen(repr=False)(type("_Compiled", (), {"__annotations__": {"x": "int"}})))
    with pytest.raises(TypeError):  # not frozen: a hash would change under mutation
        records.value(attrs.define(repr=False, eq=False)(type("_Mutable", (), {"__annotations__": {"x": "int"}})))
    with pytest.raises(TypeError):
        records.value(type("_Plain", (), {}))


def test_ast_and_program_classes_share_value_methods() -> None:
    """The ~90 classes made a few times per declaration do not compile their own eq/hash."""
    from pgraph import expr
    from pgraph.ir import program

    for module in (ast, program, expr):
        for obj in vars(module).values():
            if isinstance(obj, type) and attrs.has(obj) and obj.__module__ == module.__name__:
                assert obj.__eq__ is records.attrs_eq and obj.__hash__ is records.attrs_hash, obj
