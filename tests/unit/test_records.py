"""pgraph.records: the shared `__repr__` prints what attrs' generated one prints; the shared
`__eq__`/`__hash__` of `records.value` compare and hash as attrs' generated ones do."""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import subprocess
import sys
from pathlib import Path
from typing import Any
from unittest import mock

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


# ---- the attrs code cache -------------------------------------------------------------------

_PROBE = (
    "import sys, json\n"
    "import pgraph.cli\n"
    "from pgraph import records\n"
    "c = records.CODE_CACHE\n"
    "import attr._make\n"
    "print(json.dumps({'hits': c.hits, 'misses': c.misses, 'installed': attr._make.compile == c.compile,\n"
    "                  'written': c.save()}))\n"
)


def _probe(folder: Path, seed: str, bytecode: bool = True) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    # bytecode allowed, but written under the temporary folder, not into the source tree
    env.update(PGRAPH_ATTRS_CACHE=str(folder), PYTHONHASHSEED=seed, PYTHONPYCACHEPREFIX=str(folder / "pyc"))
    if not bytecode:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    out = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, check=True)
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def test_code_cache_is_written_once_and_read_by_the_next_process(tmp_path: Path) -> None:
    """The first process compiles every class (misses) and writes the file; the next, under
    another string-hash seed, finds every source unchanged (no miss) and writes nothing."""
    first = _probe(tmp_path, "1")
    assert first["installed"] and first["hits"] == 0 and first["misses"] > 90 and first["written"]
    second = _probe(tmp_path, "2")
    assert second == {"hits": first["misses"], "misses": 0, "installed": True, "written": False}


def test_code_cache_is_not_written_without_bytecode(tmp_path: Path) -> None:
    got = _probe(tmp_path, "0", bytecode=False)
    assert got["misses"] > 90 and not got["written"] and not list(tmp_path.glob("*.marshal"))


def test_code_cache_ignores_a_damaged_or_foreign_file(tmp_path: Path) -> None:
    path = records.AttrsCodeCache.default_path()
    assert path is not None
    target = tmp_path / path.name
    for junk in (b"not a cache", records.AttrsCodeCache.MAGIC + b"\x00garbage", b"pgraph-attrs-code-1 XXXX\n{}"):
        target.write_bytes(junk)
        got = _probe(tmp_path, "3")
        assert got["hits"] == 0 and got["misses"] > 90 and got["written"]  # compiled, and rewritten


def test_a_cache_that_cannot_be_written_fails_nothing(tmp_path: Path) -> None:
    """A cache folder that is a file (or read-only): the command's exit code is its own, and
    `save` says False instead of raising (review: it raised from the cleanup of its temporary)."""
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PGRAPH_ATTRS_CACHE=str(blocker), PGRAPH_CACHE="0", PYTHONPYCACHEPREFIX=str(tmp_path / "pyc"))
    from tests.conftest import HEAD_SPEC

    run = subprocess.run([sys.executable, "-m", "pgraph", "check", str(HEAD_SPEC)], env=env, capture_output=True,
                         text=True)
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
    cache = records.AttrsCodeCache(blocker / "attrs.marshal")
    cache.compile("x = 1", "<attrs generated methods pgraph.Foo>", "exec")
    assert cache.dirty and cache.save(force=True) is False


def test_a_damaged_cache_is_rejected_by_its_crc(tmp_path: Path) -> None:
    """One byte changed inside a code object keeps every source equal: the CRC rejects the file
    (review: a flipped byte in Span.__init__ gave an internal error); a marshal that raises
    anything, even MemoryError, is no cache."""
    _probe(tmp_path, "5")
    path = records.AttrsCodeCache.default_path()
    assert path is not None
    target = tmp_path / path.name
    data = bytearray(target.read_bytes())
    at = data.rindex(b"end_col") + 3
    data[at] = ord(",")
    target.write_bytes(bytes(data))
    assert records.AttrsCodeCache(target).codes == {}
    got = _probe(tmp_path, "6")
    assert got["hits"] == 0 and got["misses"] > 90 and got["written"]  # compiled again, rewritten whole
    assert len(records.AttrsCodeCache(target).codes) > 90
    with mock.patch.object(records.marshal, "loads", side_effect=MemoryError):
        assert records.AttrsCodeCache(target).codes == {}


def test_cache_follows_the_bytecode_prefix(tmp_path: Path) -> None:
    """Under PYTHONPYCACHEPREFIX the cache sits with the bytecode, under the prefix."""
    with mock.patch.object(records.sys, "pycache_prefix", str(tmp_path)), mock.patch.dict(os.environ):
        os.environ.pop("PGRAPH_ATTRS_CACHE", None)
        path = records.AttrsCodeCache.default_path()
    here = Path(records.__file__).resolve().parent
    assert path == tmp_path.joinpath(*here.parts[1:], path.name)


def test_cached_code_is_what_compile_gives(tmp_path: Path) -> None:
    """Every entry of a written cache: the code object of compiling its source under its name."""
    _probe(tmp_path, "4")
    path = records.AttrsCodeCache.default_path()
    assert path is not None
    cache = records.AttrsCodeCache(tmp_path / path.name)
    assert len(cache.codes) > 90
    for filename, (source, code) in cache.codes.items():
        assert filename.startswith(records.AttrsCodeCache.PREFIX)
        fresh = compile(source, filename, "exec")
        assert (code.co_code, code.co_consts, code.co_names, code.co_filename) == (
            fresh.co_code, fresh.co_consts, fresh.co_names, fresh.co_filename)


def test_only_pgraph_classes_are_cached(tmp_path: Path) -> None:
    cache = records.AttrsCodeCache(None)
    cache.compile("x = 1", "<attrs generated methods tests.unit.Foo>", "exec")
    cache.compile("x = 1", "<string>", "exec")
    assert cache.codes == {} and cache.misses == 0
    cache.compile("x = 1", "<attrs generated methods pgraph.Foo>", "exec")
    cache.compile("x = 1", "<attrs generated methods pgraph.Foo>", "exec")
    cache.compile("x = 2", "<attrs generated methods pgraph.Foo>", "exec")  # a new source replaces the entry
    assert (cache.misses, cache.hits, len(cache.codes)) == (2, 1, 1)
    assert cache.codes["<attrs generated methods pgraph.Foo>"][0] == "x = 2"
    assert not cache.save()  # no path: nothing to write


def test_every_frozen_class_shares_value_methods() -> None:
    """attrs' own `__hash__` source holds a per-process hash, which the cache could never hit:
    every frozen pgraph class uses `records.value` (no attrs-compiled eq or hash)."""
    frozen = [obj for obj in _pgraph_attrs_classes() if "__setattr__" in vars(obj)]
    assert len(frozen) > 130
    for obj in frozen:
        assert obj.__eq__ is records.attrs_eq and obj.__hash__ is records.attrs_hash, obj
