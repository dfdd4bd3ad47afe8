"""The a2a3 backend's use of simpler's `DataType` table (`pgraph.backends.simpler.DTYPES`, shared
with deps-json): the `DataType::` spelling of a .pgl dtype and the C type of a scalar parameter.
"""

from __future__ import annotations

from pgraph.backends.simpler import DTYPES, DType

__all__ = ["DTYPES", "DType", "scalar_ctype", "spelling"]


def spelling(dtype: str) -> str:
    """`DataType::X` for a .pgl dtype (KeyError for an unknown dtype)."""
    return f"DataType::{DTYPES[dtype].spelling}"


def scalar_ctype(dtype: str) -> str | None:
    """The C type a scalar parameter of `dtype` is cast to before `add_scalar`, or None.

    bf16/f16 scalars have no portable C type here; the emitter refuses them.
    """
    if dtype in ("bf16", "f16"):
        return None
    return DTYPES[dtype].ctype
