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
from collections import Counter
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
#: An identifier: a C++ name is used in a text when it is one of the text's words.
_WORD = re.compile(r"\w+")
#: A line assigning a name or one of its slots.
_ASSIGN = re.compile(r"\s*(\w+)(?:\[[^\]]*\])? = ")


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
        out.extend(binding_lines(ctx, set(_WORD.findall("\n".join(body))), set(_WORD.findall(code))))
        out.extend(body)
    out.blank()
    out.line('}  // extern "C"')
    return out.text()


def binding_lines(ctx: Context, body_words: set[str], code_words: set[str]) -> list[str]:
    """The entry's bindings: external tensors, scalars (`(void)` when no word of the body names
    them), the runtime dimensions the body's code reads (its words outside comments), and the
    views of external tensors."""
    p = ctx.p
    w = Writer()
    externals = [t for t in p.tensors.values() if t.storage is Storage.EXTERNAL]
    unused = []
    if externals:
        w.comment("External tensors")
    for t in externals:
        c = ctx.tensor_c[t.name]
        w.line(f"const ChipTensor& {c} = orch_args.tensor({t.arg_index}).ref();")
        if c not in body_words:
            unused.append(c)
    if p.scalars:
        w.comment("Scalars")
    for s in p.scalars.values():
        c = ctx.scalar_c[s.name]
        ctype = DTYPES[s.dtype].ctype
        w.line(f"{ctype} {c} = from_u64<{ctype}>(orch_args.scalar({s.arg_index}));")
        if c not in body_words:
            unused.append(c)
    for c in unused:
        w.line(f"(void){c};")
    dims = sorted((td for td, c in ctx.dim_c.items() if c in code_words),
                  key=lambda td: (p.tensors[td[0]].arg_index or 0, td[1]))
    if dims:
        w.comment("Dimensions read at run time (`runtime` in the spec: planned at the declared value)")
    for tname, axis in dims:
        w.line(f"const int64_t {ctx.dim_c[(tname, axis)]} = (int64_t)orch_args.tensor({p.tensors[tname].arg_index})"
               f".ref().shapes[{axis}];")
    for t in p.tensors.values():
        if t.storage is Storage.VIEW and t.scope is None:
            w.extend(view_lines(ctx, t, declare=False))
            if ctx.tensor_c[t.name] not in body_words:
                w.line(f"(void){ctx.tensor_c[t.name]};")
    w.blank()
    return w.lines


def mark_unused(lines: list[str]) -> list[str]:
    """`(void)name;` after declarations nothing reads (-Wall: unused / set-but-unused variable).

    An allocation must happen even when no task reads the buffer (pgraph counts it), and a
    tensor carry may be written but never read; a line naming it, other than its declaration, is
    a read unless it assigns it (`name = ...;`, `name[i] = ...;`).
    """
    declared = {ln.name for ln in lines if isinstance(ln, Decl)}
    lines_naming: Counter[str] = Counter()  # the lines naming each declared name, not assigning it
    for ln in lines:
        m = _ASSIGN.match(ln)
        lines_naming.update(w for w in set(_WORD.findall(ln)) & declared if m is None or w != m.group(1))
    out = []
    for ln in lines:
        out.append(ln)
        if isinstance(ln, Decl) and lines_naming[ln.name] < 2:  # its declaration only
            out.append(f"{ln[:len(ln) - len(ln.lstrip())]}(void){ln.name};")
    return out


def spec_display(path: str) -> str:
    """The spec path relative to its repository root (a `.git` ancestor), else its base name."""
    p = FsPath(path).resolve()
    for parent in p.parents:
        if (parent / ".git").exists():
            return p.relative_to(parent).as_posix()
    return p.name
