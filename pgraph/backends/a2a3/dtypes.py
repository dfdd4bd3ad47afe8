"""The one data-type table of the a2a3 backend: .pgl dtype -> simpler `DataType` spelling and C type.

simpler's `DataType` enum (`data_type.h`) is only partly known from the reference material:
FLOAT32, BFLOAT16 and UINT8 are spellings seen in pypto-generated orchestration for the
Qwen3-14B decode (`TensorCreateInfo(..., DataType::FLOAT32)`), so they are marked verified.
The other spellings follow the same naming pattern but were not seen in a generated file;
they are marked unverified, and the emitter writes `/* unverified DataType spelling */` next
to every use so a reviewer checks them against the real header before running on a device.
"""

from __future__ import annotations

import attrs


@attrs.frozen
class DType:
    """One row: the `DataType::` enumerator, the C scalar type, whether the spelling is verified."""

    spelling: str
    ctype: str
    verified: bool


#: .pgl dtype -> simpler spelling. Keep in sync with `pgraph.ir.program.DTYPE_BYTES`.
DTYPES: dict[str, DType] = {
    "f32": DType("FLOAT32", "float", True),        # verified: pypto decode orchestration
    "bf16": DType("BFLOAT16", "uint16_t", True),   # verified; no C++ scalar type (raw bits)
    "u8": DType("UINT8", "uint8_t", True),               # verified: pa_metadata / pa_workspace
    "f16": DType("FLOAT16", "uint16_t", False),    # unverified spelling
    "i8": DType("INT8", "int8_t", False),                # unverified spelling
    "i16": DType("INT16", "int16_t", False),             # unverified spelling
    "i32": DType("INT32", "int32_t", False),             # unverified spelling
    "i64": DType("INT64", "int64_t", False),             # unverified spelling
    "u16": DType("UINT16", "uint16_t", False),           # unverified spelling
    "u32": DType("UINT32", "uint32_t", False),           # unverified spelling
    "u64": DType("UINT64", "uint64_t", False),           # unverified spelling
}


def spelling(dtype: str) -> str:
    """`DataType::X` for a .pgl dtype (KeyError for an unknown dtype)."""
    return f"DataType::{DTYPES[dtype].spelling}"


def verified(dtype: str) -> bool:
    """True when the spelling was seen in real generated code."""
    return DTYPES[dtype].verified


def scalar_ctype(dtype: str) -> str | None:
    """The C type a scalar parameter of `dtype` is cast to before `add_scalar`, or None.

    bf16/f16 scalars have no portable C type here; the emitter refuses them.
    """
    if dtype in ("bf16", "f16"):
        return None
    return DTYPES[dtype].ctype
