"""One shared `__repr__` for pgraph's attrs classes: `@records.shared_repr` over `repr=False`.

attrs compiles each class's generated methods when the class is created, at import time, and
its `__repr__` is a compile of its own: for the ~160 attrs classes pgraph defines that is
~20 ms of every process's start (the decode rows of `bench/run.py`, docs/performance.md).
So the classes are declared `@attrs.frozen(repr=False)` (or `define`), and
`@records.shared_repr` above it gives them `attrs_repr`, which prints what attrs' own repr
would (`Name(field=value, ...)`, fields with `repr=False` left out). Everything else is plain
attrs: fields, equality, hashing, `attrs.evolve`, `attrs.fields`, mypy's attrs plugin.
"""

from __future__ import annotations

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
