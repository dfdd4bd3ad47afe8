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
Everything else is plain attrs: fields, validators, `__init__` (which attrs compiles, the one
method it still generates), slots, `attrs.evolve`, `attrs.fields`, mypy's attrs plugin. Both
decorators only add methods to the pgraph class they are given; nothing of attrs is replaced.
"""

from __future__ import annotations

import operator
from typing import Any, TypeVar

import attrs

_C = TypeVar("_C", bound=type)


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
