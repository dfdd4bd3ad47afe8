"""What the backends that speak simpler's formats share: its `DataType` table and the func ids.

Three backends describe the same runtime objects: a2a3 writes `kernel_config.py` and the
orchestration C++, deps-json writes what simpler's dep_gen would record, sim names each task's
kernel by its func id (the rows of a captured swimlane). They must agree on both tables, so
the tables live here, apart from any one backend (no backend imports another).

simpler's `DataType` enum (`src/common/task_interface/data_type.h` at 6ebaf7715) is, in order
and with values 0..14: FLOAT32, FLOAT16, INT32, INT16, INT8, UINT8, BFLOAT16, INT64, UINT64,
UINT16, UINT32, BOOL, FP8E4M3FN, FP8E8M0, FP4E2M1 (docs/upstream.md §8.12). Every .pgl
dtype has its enumerator there; the generated code names enumerators only, never values.

Func ids are pypto's (`GetOrCreateFuncId` while it emits the orchestration): handed out in
order of first use in the submission order; a `mix` kernel takes two, its AIC part and its
AIV part (`<kernel>_aic`, `<kernel>_aiv` in kernel_config.py).
"""

from __future__ import annotations

import attrs

from pgraph import records
from pgraph.ir import program as ir
from pgraph.ir.queries import kernel_at, submission_order
from pgraph.kinds import Core

__all__ = ["DTYPES", "DType", "FuncIds"]


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



class FuncIds:
    """Func ids in order of first use in the submission order (every loop iteration walked).

    `ids(kernel)` is (aic,), (aiv,) or (aic, aiv) for a mix kernel; `parts` lists
    (func id, kernel, core part) in id order. KeyError for a kernel no task submits.
    """

    def __init__(self, program: ir.Program) -> None:
        self.program = program
        self.parts: list[tuple[int, str, str]] = []
        self.by_kernel: dict[str, tuple[int, ...]] = {}
        seen_static: set[str] = set()
        for d, env in submission_order(program):
            if d.kernel is None:
                continue
            if d.kernel_table is None:
                if d.name in seen_static:
                    continue
                seen_static.add(d.name)
            kernel = kernel_at(program, d, env)
            if kernel is not None and kernel not in self.by_kernel:
                self._assign(kernel)
        # a dispatch that submits nothing (an empty wave) still names its kernel in the C++ (in a
        # loop that never runs): such kernels come last, in program order
        for d in program.dispatches:
            for kernel in program.kernels_of(d):
                if kernel not in self.by_kernel and d.kernel_table is None:
                    self._assign(kernel)

    def _assign(self, kernel: str) -> None:
        core = self.program.kernels[kernel].core
        cores = ("aic", "aiv") if core is Core.MIX else (str(core),)
        out = []
        for c in cores:
            fid = len(self.parts)
            self.parts.append((fid, kernel, c))
            out.append(fid)
        self.by_kernel[kernel] = tuple(out)

    def ids(self, kernel: str) -> tuple[int, ...]:
        """The func ids of `kernel` (KeyError when no task submits it)."""
        return self.by_kernel[kernel]

    def part_name(self, kernel: str, core: str) -> str:
        """The kernel_config name of one part: the kernel's, or `<kernel>_aic` / `_aiv` for mix."""
        return f"{kernel}_{core}" if self.program.kernels[kernel].core is Core.MIX else kernel
