"""pgraph.records: the shared `__repr__` prints what attrs' generated one prints; the shared
`__eq__`/`__hash__` of `records.value` compare and hash as attrs' generated ones do."""

from __future__ import annotations

import importlib
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

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


def _pgraph_attrs_classes() -> list[type]:
    """Every attrs class pgraph defines (each module imported)."""
    found = []
    for info in pkgutil.walk_packages(pgraph.__path__, "pgraph."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        found += [obj for obj in vars(module).values()
                  if isinstance(obj, type) and attrs.has(obj) and obj.__module__ == info.name]
    return found


def test_every_attrs_class_shares_the_repr() -> None:
    """Each attrs class of pgraph either shares the repr or defines its own (none compiles one)."""
    seen = 0
    for obj in _pgraph_attrs_classes():
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


# ---- no patched dependency ------------------------------------------------------------------

_NAMESPACES = r"""
import importlib, json, pkgutil, sys, types
import attr, attr._make, attrs, lark, lark.lexer, networkx  # the dependencies, loaded first
deps = ("attr", "attrs", "lark", "networkx", "builtins", "re")
mods = {n: m for n, m in list(sys.modules.items())
        if m is not None and (n in deps or n.split(".")[0] in deps)}
def names(m):
    # a submodule imported later adds itself to its package: that is the import system's doing
    # (and networkx's `argmap` keeps the functions it compiles on first call in its module)
    return {k: id(v) for k, v in vars(m).items() if not isinstance(v, types.ModuleType)
            and not (m.__name__ == "networkx.utils.decorators" and k.startswith("argmap_"))}
before = {n: names(m) for n, m in mods.items()}
import pgraph
for info in pkgutil.walk_packages(pgraph.__path__, "pgraph."):
    if not info.name.endswith("__main__"):
        importlib.import_module(info.name)
from pgraph.cli import main
main(["check", sys.argv[1]])  # the driver's parse, the planner
main(["check", sys.argv[2]])  # a syntax error: Lark's parse and its diagnostics
changed = sorted(f"{n}.{k}" for n, m in mods.items() for k in set(before[n]) | set(names(m))
                 if before[n].get(k) != names(m).get(k))
print(json.dumps(changed))
"""


def test_no_dependency_is_patched(tmp_path: Path) -> None:
    """Importing every pgraph module and running a command (one parsed by the driver, one with a
    syntax error, through Lark) assigns nothing into attrs', lark's or networkx' modules, nor
    into `builtins` or `re` (the attrs code cache once put its own `compile` into `attr._make`)."""
    from tests.conftest import HEAD_SPEC

    bad = tmp_path / "bad.pgl"
    bad.write_text("const A = \n", encoding="utf-8")
    out = subprocess.run([sys.executable, "-c", _NAMESPACES, str(HEAD_SPEC), str(bad)], capture_output=True,
                         text=True, check=True, cwd=Path(pgraph.__file__).resolve().parents[1])
    assert json.loads(out.stdout.splitlines()[-1]) == []
