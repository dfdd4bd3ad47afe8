"""Shared generated methods for pgraph's attrs classes: `@records.shared_repr` over
`repr=False`, `@records.value` over `@attrs.frozen(repr=False, eq=False)`.

attrs compiles each class's generated methods when the class is created, at import time
(~0.2 ms a class; ~105 classes are loaded for a `plan`, ~165 in all). So:
- every class is declared `repr=False` and `@records.shared_repr` above it gives it
  `attrs_repr`, which prints what attrs' own repr would (`Name(field=value, ...)`, fields with
  `repr=False` left out);
- every frozen class is declared `eq=False` under `@records.value`, which gives it that repr
  and the equality and hash attrs would generate (`attrs_eq`, `attrs_hash`), read from the
  class's own `attrs.fields` (~0.15 µs more per comparison than attrs' compiled ones: no pass
  compares or hashes records in a hot loop; the mutable `define` classes keep attrs' `__eq__`).
Everything else is plain attrs: fields, validators, `__init__`, slots, `attrs.evolve`,
`attrs.fields`, mypy's attrs plugin.

What attrs still compiles (each class's `__init__`: ~19 ms for a `plan`'s classes) is kept
like Python keeps bytecode: attrs' code objects, keyed by the generated source and its file
name, are written to `pgraph/__pycache__/attrs-methods.<python>.marshal` and read back
(~0.5 ms) by the next process, so a class is compiled only when its generated source is new
(`AttrsCodeCache`). Like a `.pyc`, the file is not written where Python writes no bytecode
(`PYTHONDONTWRITEBYTECODE`); `python3 -m pgraph.records` writes it for every pgraph class.
"""

from __future__ import annotations

import builtins
import contextlib
import importlib.util
import marshal
import operator
import os
import sys
import zlib
from pathlib import Path
from types import CodeType
from typing import Any, TypeVar

import attrs

_C = TypeVar("_C", bound=type)


class AttrsCodeCache:
    """The code objects attrs compiles for pgraph's classes, kept across processes.

    attrs compiles each class's generated methods with the builtin `compile` (looked up in its
    module `attr._make`, where `install` puts `compile` of this cache instead): the same source
    and file name give the same code object, so a code object read from the file is what
    `compile` would return. Only pgraph's classes are kept (attrs names their file
    `<attrs generated methods pgraph.…>`): their sources are the same in every process, as
    none has attrs' `__hash__`, whose source holds a per-process hash (`records.value`). One
    entry per class, the newest source replacing an older one. File: MAGIC, the CRC-32 of the
    rest (8 hex digits and a newline), then a marshal of {file name: (source, code)}; a file of
    another Python (the name and the magic say which), unreadable, or whose CRC does not match
    (damaged), is not used. The cache never fails a command: a file that cannot be read or
    written is no cache.
    """

    PREFIX = "<attrs generated methods pgraph."

    MAGIC = b"pgraph-attrs-code-1 " + importlib.util.MAGIC_NUMBER + b"\n"

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.codes: dict[str, tuple[str, CodeType]] = {}
        self.hits = self.misses = 0
        self.dirty = False
        if path is not None:
            try:
                self.codes = self._read(path.read_bytes())
            except Exception:  # noqa: BLE001 - unreadable or damaged (even a MemoryError): no cache
                self.codes = {}

    @classmethod
    def _read(cls, data: bytes) -> dict[str, tuple[str, CodeType]]:
        """The entries of a file's bytes; {} unless the magic and the CRC match and the content
        has the shape written."""
        head = len(cls.MAGIC)
        if not data.startswith(cls.MAGIC) or data[head + 8:head + 9] != b"\n":
            return {}
        body = data[head + 9:]
        if data[head:head + 8] != f"{zlib.crc32(body):08x}".encode("ascii"):
            return {}
        codes = marshal.loads(body)
        if isinstance(codes, dict) and all(
                isinstance(k, str) and isinstance(v, tuple) and len(v) == 2
                and isinstance(v[0], str) and isinstance(v[1], CodeType) for k, v in codes.items()):
            return codes
        return {}

    @staticmethod
    def default_path() -> Path | None:
        """pgraph/__pycache__/attrs-methods.<cache tag>.marshal (under PYTHONPYCACHEPREFIX where
        that is set; the folder `PGRAPH_ATTRS_CACHE` names instead; None when it is `0`: no cache). A code object depends only on its source,
        its file name and the Python that compiled it (the header holds that Python's bytecode
        magic number, as a `.pyc` does), not on the attrs version that wrote the source."""
        folder = os.environ.get("PGRAPH_ATTRS_CACHE")
        if folder == "0":
            return None
        here = Path(__file__).resolve().parent
        if folder:
            base = Path(folder)
        elif sys.pycache_prefix:  # PYTHONPYCACHEPREFIX: beside the bytecode, under the prefix (as Python does)
            base = Path(sys.pycache_prefix).joinpath(*here.parts[1:])
        else:
            base = here / "__pycache__"
        return base / f"attrs-methods.{sys.implementation.cache_tag}.marshal"

    def compile(self, source: Any, filename: Any, mode: str, *args: Any, **kwargs: Any) -> Any:
        """`compile`, from the cache for an `exec` of a pgraph class's source it has seen."""
        if (args or kwargs or mode != "exec" or not isinstance(source, str) or not isinstance(filename, str)
                or not filename.startswith(self.PREFIX)):
            return builtins.compile(source, filename, mode, *args, **kwargs)
        entry = self.codes.get(filename)
        if entry is not None and entry[0] == source:
            self.hits += 1
            return entry[1]
        self.misses += 1
        code = builtins.compile(source, filename, mode)
        self.codes[filename] = (source, code)
        self.dirty = True
        return code

    def save(self, force: bool = False) -> bool:
        """Write the file when new code was compiled (atomically; not where Python writes no
        bytecode, unless `force`). False when nothing was written; an unwritable folder is no
        error."""
        if self.path is None or not self.dirty or (sys.dont_write_bytecode and not force):
            return False
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        try:
            body = marshal.dumps(dict(sorted(self.codes.items(), key=lambda kv: kv[0])))
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_bytes(self.MAGIC + f"{zlib.crc32(body):08x}\n".encode("ascii") + body)
            os.replace(tmp, self.path)
        except Exception:  # noqa: BLE001 - a read-only or odd folder: no cache, never a failed command
            with contextlib.suppress(Exception):
                tmp.unlink(missing_ok=True)
            return False
        self.dirty = False
        return True

    def install(self) -> bool:
        """Make attrs compile through this cache (False: attrs does not compile the way it is
        known to, in `attr._make` by the builtin `compile`; it then compiles as it always does)."""
        try:
            import attr._make as attrs_make
        except ImportError:
            return False
        if not hasattr(attrs_make, "_compile_and_eval") or "compile" in vars(attrs_make):
            return False
        attrs_make.compile = self.compile  # type: ignore[attr-defined]
        return True


def _installed_cache() -> AttrsCodeCache:
    """The cache attrs compiles through: the one a copy of this module installed already
    (`python3 -m pgraph.records` runs it as `__main__` and imports it as pgraph.records), else
    a new one, installed."""
    attrs_make = sys.modules.get("attr._make")
    owner = getattr(vars(attrs_make).get("compile"), "__self__", None) if attrs_make else None
    if owner is not None and type(owner).__name__ == AttrsCodeCache.__name__:
        return owner  # type: ignore[no-any-return]
    cache = AttrsCodeCache(AttrsCodeCache.default_path())
    cache.install()
    return cache


CODE_CACHE = _installed_cache()


def attrs_repr(self: Any) -> str:
    """`ClassName(a=1, b='x')`: the text of attrs' generated repr, for any attrs instance."""
    parts = []
    for a in type(self).__attrs_attrs__:
        if a.repr is False:
            continue
        value = getattr(self, a.name, attrs.NOTHING)
        parts.append(f"{a.name}={a.repr(value) if callable(a.repr) else repr(value)}")
    return f"{type(self).__qualname__.rsplit('>.', 1)[-1]}({', '.join(parts)})"


def shared_repr(cls: _C) -> _C:
    """Give an attrs class (declared with `repr=False`) `attrs_repr` as its `__repr__`, unless
    the class defines its own."""
    if "__repr__" not in cls.__dict__:
        cls.__repr__ = attrs_repr  # type: ignore[assignment]
    return cls


def attrs_eq(self: Any, other: Any) -> Any:
    """attrs' generated `__eq__`: NotImplemented for another class, else whether the fields that
    take part in equality (`eq=True`, all by default) are equal, in order."""
    if other.__class__ is not self.__class__:
        return NotImplemented
    key = self.__record_eq__
    return key(self) == key(other)


def attrs_hash(self: Any) -> int:
    """attrs' generated `__hash__` for a frozen class: the hash of the class's salt and the
    fields that take part in hashing (`hash=True`, or `None` and `eq=True`)."""
    return hash((self.__record_salt__, self.__record_hash__(self)))


def _getter(names: list[str]) -> Any:
    """The tuple of the fields `names` of an instance (C code: operator.attrgetter)."""
    if not names:
        return lambda _self: ()
    if len(names) == 1:
        one = operator.attrgetter(names[0])
        return lambda self: (one(self),)
    return operator.attrgetter(*names)


def value(cls: _C) -> _C:
    """A frozen attrs class declared with `repr=False, eq=False`: `attrs_repr`, `attrs_eq` and
    `attrs_hash` installed, so that it compares, hashes and prints as `@attrs.frozen` would.

    Raises TypeError on a class that is not a frozen attrs class declared with `eq=False`, or
    with a field whose equality has a custom key (`eq=callable`, not reproduced here).
    """
    record: Any = cls  # (attrs.has narrows its argument's type)
    if not attrs.has(record) or "__eq__" in cls.__dict__ or "__setattr__" not in cls.__dict__:
        raise TypeError(f"records.value: {cls.__name__} must be @attrs.frozen(repr=False, eq=False)")
    fields = attrs.fields(record)
    if any(f.eq_key is not None for f in fields):
        raise TypeError(f"records.value: {cls.__name__} has a field with an equality key")
    cls.__record_eq__ = staticmethod(_getter([f.name for f in fields if f.eq]))  # type: ignore[attr-defined]
    cls.__record_hash__ = staticmethod(_getter(  # type: ignore[attr-defined]
        [f.name for f in fields if (f.eq if f.hash is None else f.hash)]))
    cls.__record_salt__ = cls.__qualname__  # type: ignore[attr-defined]
    cls.__eq__ = attrs_eq  # type: ignore[assignment]
    cls.__hash__ = attrs_hash  # type: ignore[assignment]
    return shared_repr(cls)


def main() -> int:
    """`python3 -m pgraph.records`: import every pgraph module and write the attrs code cache
    for all their classes (what a run writes by itself where Python writes bytecode)."""
    import importlib
    import pkgutil

    import pgraph

    for info in pkgutil.walk_packages(pgraph.__path__, "pgraph."):
        if not info.name.endswith("__main__"):
            importlib.import_module(info.name)
    cache = CODE_CACHE
    cache.dirty = True
    written = cache.save(force=True)
    print(f"{cache.path}: {len(cache.codes)} code objects" if written else "the attrs code cache was not written")
    return 0 if written else 1


if __name__ == "__main__":
    raise SystemExit(main())
