"""The orchestration C++ for simpler's tensormap_and_ringbuffer runtime (platform a2a3).

File shape (pypto `GenerateOrchestration`, reference §2.1): header comments; includes; the
floor-division helpers when the code uses them; `extern "C" {`; `aicpu_orchestration_config`
returning the expected argument count (tensor plus scalar parameters);
`aicpu_orchestration_entry(const ChipTaskArgs&)` binding each external tensor
(`orch_args.tensor(k).ref()`) and scalar (`from_u64`), the dimensions declared `runtime` that
the body reads, then the body (`blocks.entry_lines`). The context is built once
(`naming.build_context`); every function after it reads it and returns lines.
"""

from __future__ import annotations

import re
from pathlib import Path as FsPath

from pgraph.ir import program as ir
from pgraph.kinds import Storage

from .blocks import entry_lines, view_lines
from .cexpr import FLOOR_HELPERS
from .context import Context
from .dtypes import DTYPES
from .naming import build_context
from .writer import Decl, Writer

#: A call of a floor helper in the code (C++ names never take a reserved name, `layout.RESERVED`).
_FLOOR = re.compile(r"\bpgraph_floor(?:div|mod)\(")


def render_cpp(program: ir.Program, header: list[str]) -> tuple[str, Context]:
    """The whole .cpp text of `program`'s entry, and the context it was written from."""
    ctx = build_context(program, header)
    return render(ctx), ctx


def render(ctx: Context) -> str:
    """The .cpp text: header, includes, helpers, the config function and the entry function."""
    body = mark_unused(entry_lines(ctx))
    code = "\n".join(ln.split("//", 1)[0] for ln in body)  # comments hold spec names: not uses
    out = Writer()
    for h in ctx.header:
        out.comment(h) if h else out.line("//")
    out.blank()
    for inc in ("<stddef.h>", "<stdint.h>", "<stdio.h>", '"pto_orchestration_api.h"'):
        out.line(f"#include {inc}")
    out.blank()
    if _FLOOR.search(code):
        out.lines.extend(FLOOR_HELPERS.rstrip("\n").split("\n"))
        out.blank()
    out.line('extern "C" {')
    out.lines.append("")
    n_args = sum(1 for t in ctx.p.tensors.values() if t.storage is Storage.EXTERNAL) + len(ctx.p.scalars)
    out.line('__attribute__((visibility("default")))')
    with out.block("PTO2OrchestrationConfig aicpu_orchestration_config(const ChipTaskArgs& orch_args)"):
        out.line("(void)orch_args;")
        out.line("return PTO2OrchestrationConfig{")
        out.line(f"    .expected_arg_count = {n_args},")
        out.line("};")
    out.blank()
    out.line('__attribute__((visibility("default")))')
    with out.block("void aicpu_orchestration_entry(const ChipTaskArgs& orch_args)"):
        out.extend(binding_lines(ctx, "\n".join(body), code))
        out.extend(body)
    out.blank()
    out.line('}  // extern "C"')
    return out.text()


def binding_lines(ctx: Context, text: str, code: str) -> list[str]:
    """The entry's bindings: external tensors, scalars (`(void)` when the body `text` never names
    them), the runtime dimensions the body's `code` reads, and the views of external tensors."""
    p = ctx.p
    w = Writer()
    externals = [t for t in p.tensors.values() if t.storage is Storage.EXTERNAL]
    unused = []
    if externals:
        w.comment("External tensors")
    for t in externals:
        c = ctx.tensor_c[t.name]
        w.line(f"const ChipTensor& {c} = orch_args.tensor({t.arg_index}).ref();")
        if not re.search(rf"\b{c}\b", text):
            unused.append(c)
    if p.scalars:
        w.comment("Scalars")
    for s in p.scalars.values():
        c = ctx.scalar_c[s.name]
        ctype = DTYPES[s.dtype].ctype
        w.line(f"{ctype} {c} = from_u64<{ctype}>(orch_args.scalar({s.arg_index}));")
        if not re.search(rf"\b{c}\b", text):
            unused.append(c)
    for c in unused:
        w.line(f"(void){c};")
    dims = sorted((td for td, c in ctx.dim_c.items() if re.search(rf"\b{c}\b", code)),
                  key=lambda td: (p.tensors[td[0]].arg_index or 0, td[1]))
    if dims:
        w.comment("Dimensions read at run time (`runtime` in the spec: planned at the declared value)")
    for tname, axis in dims:
        w.line(f"const int64_t {ctx.dim_c[(tname, axis)]} = (int64_t)orch_args.tensor({p.tensors[tname].arg_index})"
               f".ref().shapes[{axis}];")
    for t in p.tensors.values():
        if t.storage is Storage.VIEW and t.scope is None:
            w.extend(view_lines(ctx, t, declare=False))
            if not re.search(rf"\b{ctx.tensor_c[t.name]}\b", text):
                w.line(f"(void){ctx.tensor_c[t.name]};")
    w.blank()
    return w.lines


def mark_unused(lines: list[str]) -> list[str]:
    """`(void)name;` after declarations nothing reads (-Wall: unused / set-but-unused variable).

    An allocation must happen even when no task reads the buffer (pgraph counts it), and a
    tensor carry may be written but never read; assignments `name = ...;` are not reads.
    """
    out = []
    for idx, ln in enumerate(lines):
        out.append(ln)
        if not isinstance(ln, Decl):
            continue
        word = re.compile(rf"\b{re.escape(ln.name)}\b")
        assign = re.compile(rf"^\s*{re.escape(ln.name)}(\[[^\]]*\])? = ")
        if not any(word.search(other) and not assign.match(other) for i, other in enumerate(lines) if i != idx):
            out.append(f"{ln[:len(ln) - len(ln.lstrip())]}(void){ln.name};")
    return out


def spec_display(path: str) -> str:
    """The spec path relative to its repository root (a `.git` ancestor), else its base name."""
    p = FsPath(path).resolve()
    for parent in p.parents:
        if (parent / ".git").exists():
            return p.relative_to(parent).as_posix()
    return p.name
