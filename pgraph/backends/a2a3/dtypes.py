"""The one data-type table of the a2a3 backend: .pgl dtype -> simpler `DataType` spelling and C type.

simpler's `DataType` enum (`src/common/task_interface/data_type.h` at 6ebaf7715) is, in order
and with values 0..14: FLOAT32, FLOAT16, INT32, INT16, INT8, UINT8, BFLOAT16, INT64, UINT64,
UINT16, UINT32, BOOL, FP8E4M3FN, FP8E8M0, FP4E2M1 (qwen3_14b_decode_abi.md §8). Every .pgl
dtype has its enumerator there; the generated code names enumerators only, never values.
"""

from __future__ import annotations

import attrs

from pgraph import records


@records.value
@attrs.frozen(repr=False, eq=False)
class DType:
    """One row: the `DataType::` enumerator, its value in simpler's enum, the C scalar type."""

    spelling: str
    value: int
    ctype: str


#: .pgl dtype -> simpler spelling. Keep in sync with `pgraph.ir.program.DTYPE_BYTES`.
DTYPES: dict[str, DType] = {
    "f32": DType("FLOAT32", 0, "float"),
    "f16": DType("FLOAT16", 1, "uint16_t"),    # no C++ scalar type: raw bits
    "i32": DType("INT32", 2, "int32_t"),
    "i16": DType("INT16", 3, "int16_t"),
    "i8": DType("INT8", 4, "int8_t"),
    "u8": DType("UINT8", 5, "uint8_t"),
    "bf16": DType("BFLOAT16", 6, "uint16_t"),  # no C++ scalar type: raw bits
    "i64": DType("INT64", 7, "int64_t"),
    "u64": DType("UINT64", 8, "uint64_t"),
    "u16": DType("UINT16", 9, "uint16_t"),
    "u32": DType("UINT32", 10, "uint32_t"),
}


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
