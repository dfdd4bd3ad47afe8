"""`kernel_config.py` for simpler, in the format pypto writes and reads it, plus func ids.

Format (pypto `pto_backend.py` `_generate_config_file`, read by `device_runner.py`
`compile_and_assemble`; docs/upstream.md §6.7): the comment "Kernel and Orchestration
Configuration"; `from pathlib import Path`; `from simpler.task_interface import ArgDirection
as _D` (only when some signature is non-empty); `_ROOT_DIR = Path(__file__).parent`, the folder
holding the file; `RUNTIME_CONFIG` (the runtime's wire name and `aicpu_thread_num` 0, the
platform default); `ORCHESTRATION` (`source` under `_ROOT_DIR / "orchestration"`,
`function_name` "aicpu_orchestration_entry", and the `signature` of the orchestration's tensor
arguments); `KERNELS`, sorted by func id, each `{func_id, name, source, core_type, [external,
extra_include_dirs,] signature}` with the signature the directions of the kernel's *tensor*
parameters in payload order (Input -> IN, Output -> OUT, InOut and atomic_add -> INOUT; scalars
excluded).

A `mix` kernel has an AIC part and an AIV part, each an entry of its own with its own func id,
named `<kernel>_aic` and `<kernel>_aiv` (pypto's JIT extern specializer; core_type aic / aiv).
Func ids are handed out in order of first use in the submission order (pypto
`GetOrCreateFuncId` while it emits the orchestration); a kernel of a `kernels` table gets its id
at the first task that selects it.

pgraph does not generate kernel bodies: `source` is the spec's `source "..."` path when given,
else the conventional `kernels/<aic|aiv>/<name>.cpp` where the kernel must be placed; a
relative path is written under `_ROOT_DIR` (the output stays byte-identical across working
directories; pypto writes an extern's absolute path, which is machine-dependent).
"""

from __future__ import annotations

from pathlib import PurePosixPath

from pgraph.backends.escape import py_comment, py_str
from pgraph.backends.simpler import FuncIds
from pgraph.ir import program as ir
from pgraph.kinds import AccessKind, Direction, Storage

#: Runtime tag of each parameter direction (CoreTaskArgs method the emitter calls).
ARG_TYPE = {"in": "INPUT", "out": "OUTPUT_EXISTING", "inout": "INOUT", "atomic_add": "INOUT", "scalar": "SCALAR"}
#: kernel_config signature direction of each parameter direction (pypto: Input -> IN, Output and
#: OutputExisting -> OUT, InOut and NoDep -> INOUT; atomic_add is an InOut argument).
SIG_DIRECTION = {Direction.IN: "IN", Direction.OUT: "OUT", Direction.INOUT: "INOUT", Direction.ATOMIC_ADD: "INOUT"}


class Code(str):
    """Python source written as is (not quoted) by `py_literal`."""


def root_path(path: str) -> Code | str:
    """`str(_ROOT_DIR / "a" / "b.cpp")` for a relative path, the path itself when absolute."""
    pp = PurePosixPath(path)
    if pp.is_absolute():
        return path
    parts = " / ".join(py_literal(part) for part in pp.parts)
    return Code(f"str(_ROOT_DIR / {parts})")


def kernel_source(k: ir.Kernel, core: str, name: str) -> Code | str:
    """The kernel source of one part (declared `source`, else kernels/<core>/<part name>.cpp)."""
    return root_path(k.source if k.source else f"kernels/{core}/{name}.cpp")


def signature(k: ir.Kernel) -> list[Code]:
    """`_D.IN` / `_D.OUT` / `_D.INOUT` per tensor parameter, in payload order (scalars excluded)."""
    return [Code(f"_D.{SIG_DIRECTION[p.direction]}") for p in k.params if p.is_tensor]


def orchestration_signature(p: ir.Program) -> list[Code]:
    """Per external tensor (orch_args order): OUT when the entry only writes it, INOUT when it
    reads and writes it, IN otherwise. simpler copies an IN tensor in but not back, an OUT tensor
    back but not in (`stage_device_args`, docs/upstream.md §6.7)."""
    reads: set[str] = set()
    writes: set[str] = set()
    for d in p.dispatches:
        for acc in d.accesses:
            t = p.tensors.get(acc.region.tensor)
            if t is None:
                continue
            (reads if acc.kind is AccessKind.READ else writes).add(t.root)
            if acc.kind is AccessKind.ATOMIC:
                reads.add(t.root)
    out = []
    for t in sorted((t for t in p.tensors.values() if t.storage is Storage.EXTERNAL), key=lambda t: t.arg_index or 0):
        direction = "INOUT" if t.name in writes and t.name in reads else "OUT" if t.name in writes else "IN"
        out.append(Code(f"_D.{direction}"))
    return out


def py_literal(value: object, indent: int = 0) -> str:
    """Deterministic Python source for dicts (insertion order), lists, str, int, bool, None, Code."""
    pad = "    " * indent
    inner = "    " * (indent + 1)
    if isinstance(value, Code):
        return str(value)
    if isinstance(value, dict):
        if not value:
            return "{}"
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
        rows = [f"{inner}{py_literal(v, indent + 1)}," for v in value]
        return "[\n" + "\n".join(rows) + f"\n{pad}]"
    if isinstance(value, str):
        return py_str(value)
    if isinstance(value, bool) or value is None or isinstance(value, int):
        return repr(value)
    raise TypeError(f"cannot render {type(value).__name__}")


#: The module-level name of the expanded devkit include folders in kernel_config.py.
DEVKIT_NAME = "_DEVKIT_INCLUDE_DIRS"


def devkit_lines(devkit: tuple[str, ...]) -> list[str]:
    """The lines of kernel_config.py that expand the devkit folders (relative to $ASCEND_HOME_PATH)
    when the runtime loads it: a folder missing there, or all without ASCEND_HOME_PATH, dropped."""
    return [
        "# CANN devkit include folders of the extern kernels (the a2a3 target configuration), relative",
        "# to $ASCEND_HOME_PATH and expanded when this file is loaded; a folder that does not exist",
        "# there, or every folder when ASCEND_HOME_PATH is unset, is dropped",
        '_ASCEND_HOME_PATH = os.environ.get("ASCEND_HOME_PATH", "")',
        f"{DEVKIT_NAME} = [",
        "    str(Path(_ASCEND_HOME_PATH, d))",
        "    for d in " + py_literal(list(devkit), 1),
        "    if _ASCEND_HOME_PATH and Path(_ASCEND_HOME_PATH, d).is_dir()",
        "]",
        "",
    ]


def include_dirs(k: ir.Kernel, devkit: tuple[str, ...]) -> Code | list[object] | None:
    """`extra_include_dirs` of an extern kernel: the devkit folders, then the spec's `includes`
    (under `_ROOT_DIR` when relative); None when there are neither."""
    own: list[object] = [root_path(d) for d in k.includes]
    if not devkit:
        return own or None
    return [Code(f"*{DEVKIT_NAME}"), *own] if own else Code(DEVKIT_NAME)


def render_kernel_config(program: ir.Program, ids: FuncIds, header: list[str], orch_source: str,
                         devkit: tuple[str, ...] = ()) -> str:
    """The text of kernel_config.py; `header` lines become `#` comments after the title line;
    `devkit` are the CANN include folders (relative to $ASCEND_HOME_PATH) of extern kernels."""
    kernels: list[dict[str, object]] = []
    devkit = devkit if any(program.kernels[kname].extern for _, kname, _ in ids.parts) else ()
    for fid, kname, core in ids.parts:
        k = program.kernels[kname]
        part = ids.part_name(kname, core)
        entry: dict[str, object] = {"func_id": fid, "name": part, "source": kernel_source(k, core, part),
                                    "core_type": core}
        if k.extern:
            entry["external"] = True
            dirs = include_dirs(k, devkit)
            if dirs is not None:
                entry["extra_include_dirs"] = dirs
        sig = signature(k)
        if sig:
            entry["signature"] = sig
        kernels.append(entry)
    orch: dict[str, object] = {"source": root_path(orch_source), "function_name": "aicpu_orchestration_entry"}
    orch_sig = orchestration_signature(program)
    if orch_sig:
        orch["signature"] = orch_sig
    lines = ["# Kernel and Orchestration Configuration", *(f"# {py_comment(h)}" if h else "#" for h in header), "",
             *(["import os"] if devkit else []), "from pathlib import Path", ""]
    if orch_sig or any("signature" in k for k in kernels):
        lines += ["from simpler.task_interface import ArgDirection as _D", ""]
    lines += [
        "_ROOT_DIR = Path(__file__).parent",
        "",
        *(devkit_lines(devkit) if devkit else []),
        "# Runtime configuration for tensormap_and_ringbuffer",
        "# aicpu_thread_num = 0 selects the platform default (a2a3: 4, a5: 5)",
        "RUNTIME_CONFIG = " + py_literal({"runtime": "tensormap_and_ringbuffer", "aicpu_thread_num": 0}),
        "",
        "ORCHESTRATION = " + py_literal(orch),
        "",
        "KERNELS = " + py_literal(kernels),
        "",
    ]
    return "\n".join(lines)
