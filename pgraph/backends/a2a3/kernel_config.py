"""`kernel_config.py` for simpler: RUNTIME_CONFIG, ORCHESTRATION and KERNELS, plus func ids.

Shape (pypto `python/pypto/backend/pto_backend.py`, reference §2): RUNTIME_CONFIG names the
runtime `tensormap_and_ringbuffer` with `aicpu_thread_num: 0` (platform default: a2a3 runs
1 orchestrator + 3 scheduler threads); ORCHESTRATION gives the orchestration source and
the exported entry symbol; KERNELS lists one entry per kernel *part*:
`{func_id, name, source, core_type: "aic"|"aiv", signature}`. A `mix` kernel (1 AIC + 2 AIV
per block) has an AIC part and an AIV part with a func id each. Func ids are assigned in
first-use order of the generated submits; a kernel used twice keeps its ids.

pgraph does not generate kernel bodies: `source` is the spec's `source "..."` path when
given, else the conventional `kernels/<core>/<kernel>.cpp` where the kernel must be placed.
Paths are relative to the output directory (no absolute paths: the output is byte-identical
across working directories).
"""

from __future__ import annotations

from pgraph.backends.escape import py_comment, py_str
from pgraph.ir import program as ir

from .dtypes import DTYPES

#: Runtime tag of each parameter direction (CoreTaskArgs method the emitter calls).
ARG_TYPE = {"in": "INPUT", "out": "OUTPUT_EXISTING", "inout": "INOUT", "atomic_add": "INOUT", "scalar": "SCALAR"}


class FuncIds:
    """Func ids in first-use order: `ids(kernel)` is (aic,), (aiv,) or (aic, aiv) for mix."""

    def __init__(self, program: ir.Program) -> None:
        self.program = program
        self.parts: list[tuple[int, str, str]] = []
        self.by_kernel: dict[str, tuple[int, ...]] = {}

    def ids(self, kernel: str) -> tuple[int, ...]:
        """The func ids of `kernel`, assigning new ones on first use."""
        got = self.by_kernel.get(kernel)
        if got is not None:
            return got
        core = self.program.kernels[kernel].core
        cores = ("aic", "aiv") if core == "mix" else (core,)
        out = []
        for c in cores:
            fid = len(self.parts)
            self.parts.append((fid, kernel, c))
            out.append(fid)
        self.by_kernel[kernel] = tuple(out)
        return tuple(out)


def kernel_source(k: ir.Kernel, core: str) -> str:
    """The kernel source path for one part (declared `source`, else the conventional path)."""
    if k.source:
        return k.source
    return f"kernels/{core}/{k.name}.cpp"


def signature(k: ir.Kernel) -> list[dict[str, object]]:
    """Parameter names, directions, runtime arg types, dtypes and shapes, in declaration order."""
    out: list[dict[str, object]] = []
    for prm in k.params:
        row: dict[str, object] = {
            "name": prm.name,
            "direction": prm.direction,
            "arg_type": ARG_TYPE[prm.direction],
            "dtype": DTYPES[prm.dtype].spelling,
        }
        if prm.shape is not None:
            row["shape"] = list(prm.shape)
        out.append(row)
    return out


def py_literal(value: object, indent: int = 0) -> str:
    """Deterministic Python source for dicts (insertion order), lists, str, int, bool, None."""
    pad = "    " * indent
    inner = "    " * (indent + 1)
    if isinstance(value, dict):
        if not value:
            return "{}"
        leaf = not any(isinstance(v, dict) or (isinstance(v, list) and v and isinstance(v[0], (dict, list)))
                       for v in value.values())
        if leaf:  # one line per parameter / config row, whatever its length
            return "{" + ", ".join(f"{py_literal(k)}: {py_literal(v)}" for k, v in value.items()) + "}"
        rows = [f"{inner}{py_literal(k)}: {py_literal(v, indent + 1)}," for k, v in value.items()]
        return "{\n" + "\n".join(rows) + f"\n{pad}}}"
    if isinstance(value, list):
        if not value:
            return "[]"
        if not isinstance(value[0], dict):
            flat = "[" + ", ".join(py_literal(v) for v in value) + "]"
            if len(flat) + len(pad) <= 100:
                return flat
        rows = [f"{inner}{py_literal(v, indent + 1)}," for v in value]
        return "[\n" + "\n".join(rows) + f"\n{pad}]"
    if isinstance(value, str):
        return py_str(value)
    if isinstance(value, bool) or value is None or isinstance(value, int):
        return repr(value)
    raise TypeError(f"cannot render {type(value).__name__}")


def render_kernel_config(program: ir.Program, ids: FuncIds, header: list[str], orch_source: str) -> str:
    """The text of kernel_config.py; `header` lines become `#` comments at the top."""
    kernels: list[dict[str, object]] = []
    unverified: set[str] = set()
    for fid, name, core in ids.parts:
        k = program.kernels[name]
        kernels.append({
            "func_id": fid,
            "name": name,
            "source": kernel_source(k, core),
            "core_type": core,
            "signature": signature(k),
        })
        unverified.update(DTYPES[p.dtype].spelling for p in k.params if not DTYPES[p.dtype].verified)
    lines = [f"# {py_comment(h)}" if h else "#" for h in header]
    if unverified:
        lines.append(f"# Unverified DataType spellings used in signatures: {', '.join(sorted(unverified))}.")
    lines += [
        "",
        "RUNTIME_CONFIG = " + py_literal({"runtime": "tensormap_and_ringbuffer", "aicpu_thread_num": 0}),
        "",
        "ORCHESTRATION = " + py_literal({"source": orch_source, "function_name": "aicpu_orchestration_entry"}),
        "",
        "KERNELS = " + py_literal(kernels),
        "",
    ]
    return "\n".join(lines)
