"""The orchestration C++ for simpler's tensormap_and_ringbuffer runtime (platform a2a3).

File shape (pypto `GenerateOrchestration`, reference §2.1): header comments; includes;
`extern "C" {`; `aicpu_orchestration_config` returning the expected argument count (tensor
plus scalar parameters); `aicpu_orchestration_entry(const ChipTaskArgs&)` binding each external
tensor (`orch_args.tensor(k).ref()`) and scalar (`from_u64`), then the body as nested
`PTO2_SCOPE()` / `PTO2_SCOPE(PTO2ScopeMode::MANUAL)` blocks matching the spec's scopes.
Allocations are hoisted to the top of the scope owning them, and the buffers a manual scope
declares are a batch of their own in the enclosing scope, just before the MANUAL header (pypto
`EmitBatchedAllocTensors`); each batch is split into `alloc_tensors` calls of at most the
target's `alloc_batch` (16 by default, pypto kMaxAllocTensorsArgs). The dimensions declared
`runtime` that the body reads are read from the orchestration tensors at the entry.
Scope-level loops and `parallel`/`tiles`/dummy index spaces stay C++ `for` loops, so a
40-layer build has the size of a 2-layer one. Per-task blocks: `pgraph.backends.a2a3.tasks`.
"""

from __future__ import annotations

import re
from pathlib import PurePath

from pgraph.expr import Expr, Name, Num
from pgraph.ir import program as ir
from pgraph.kinds import CarryKind, NodeKind, ScopeMode, Storage, TaskKind

from .cexpr import FLOOR_HELPERS, add, mul, sub
from .context import Context
from .dtypes import DTYPES, spelling
from .layout import Node, Path, SlotKind, is_single
from .tasks import TaskEmitter, axis_range, tile_index
from .writer import Writer


class Emitter:
    """Writes one entry's orchestration source; `render()` returns the file text.

    The emission state lives in one Context `c` shared with the per-task TaskEmitter `tasks`.
    """

    def __init__(self, program: ir.Program, header: list[str]) -> None:
        self.c = Context(program, header)
        self.tasks = TaskEmitter(self.c)
        self.ids = self.c.ids
        self._declared: set[tuple[Path, tuple[str, object]]] = set()

    # ---- file ----
    def render(self) -> str:
        """The whole .cpp text."""
        body = self.entry_body()
        out = Writer()
        for h in self.c.header:
            out.comment(h) if h else out.line("//")
        out.blank()
        for inc in ("<stddef.h>", "<stdint.h>", "<stdio.h>", '"pto_orchestration_api.h"'):
            out.line(f"#include {inc}")
        out.blank()
        if any(p.uses_floor for p in self.c.printers):
            out.lines.extend(FLOOR_HELPERS.rstrip("\n").split("\n"))
            out.blank()
        out.line('extern "C" {')
        out.lines.append("")
        n_args = sum(1 for t in self.c.p.tensors.values() if t.storage is Storage.EXTERNAL) + len(self.c.p.scalars)
        out.line('__attribute__((visibility("default")))')
        with out.block("PTO2OrchestrationConfig aicpu_orchestration_config(const ChipTaskArgs& orch_args)"):
            out.line("(void)orch_args;")
            out.line("return PTO2OrchestrationConfig{")
            out.line(f"    .expected_arg_count = {n_args},")
            out.line("};")
        out.blank()
        out.line('__attribute__((visibility("default")))')
        with out.block("void aicpu_orchestration_entry(const ChipTaskArgs& orch_args)"):
            out.lines.extend(self.bindings(body))
            out.lines.extend(body)
        out.blank()
        out.line('}  // extern "C"')
        return out.text()

    def bindings(self, body: list[str]) -> list[str]:
        w = Writer(level=1)
        text = "\n".join(body)
        externals = [t for t in self.c.p.tensors.values() if t.storage is Storage.EXTERNAL]
        unused = []
        if externals:
            w.comment("External tensors")
        for t in externals:
            c = self.c.tensor_c[t.name]
            w.line(f"const ChipTensor& {c} = orch_args.tensor({t.arg_index}).ref();")
            if not re.search(rf"\b{c}\b", text):
                unused.append(c)
        if self.c.p.scalars:
            w.comment("Scalars")
        for s in self.c.p.scalars.values():
            c = self.c.scalar_c[s.name]
            ctype = DTYPES[s.dtype].ctype
            w.line(f"{ctype} {c} = from_u64<{ctype}>(orch_args.scalar({s.arg_index}));")
            if not re.search(rf"\b{c}\b", text):
                unused.append(c)
        for c in unused:
            w.line(f"(void){c};")
        dims = sorted(set().union(*(pr.dims_used for pr in self.c.printers)), key=lambda td: (
            self.c.p.tensors[td[0]].arg_index or 0, td[1]))
        if dims:
            w.comment("Dimensions read at run time (`runtime` in the spec: planned at the declared value)")
        for tname, axis in dims:
            t = self.c.p.tensors[tname]
            w.line(f"const int64_t {self.c.dim_c[(tname, axis)]} = (int64_t)orch_args.tensor({t.arg_index})"
                   f".ref().shapes[{axis}];")
        views = [t for t in self.c.p.tensors.values() if t.storage is Storage.VIEW and t.scope is None]
        for t in views:
            self.view_decl(t, w)
            if not re.search(rf"\b{self.c.tensor_c[t.name]}\b", text):
                w.line(f"(void){self.c.tensor_c[t.name]};")
        w.blank()
        return w.lines

    def entry_body(self) -> list[str]:
        s = self.c.p.scopes[0]
        self.c.w.comment(f"entry scope: depth {s.depth}, ring {s.ring}")
        with self.c.w.block("PTO2_SCOPE()"):
            self.scope_body(self.c.tree, ((NodeKind.SCOPE, 0),))
        return self.mark_unused(self.c.w.lines)

    def mark_unused(self, lines: list[str]) -> list[str]:
        """`(void)name;` after declarations nothing reads (-Wall: unused / set-but-unused variable).

        An allocation must happen even when no task reads the buffer (pgraph counts it), and a
        tensor carry may be written but never read; assignments `name = ...;` are not reads.
        """
        out = list(lines)
        for idx, name in sorted(self.c.decls, reverse=True):
            word = re.compile(rf"\b{re.escape(name)}\b")
            assign = re.compile(rf"^\s*{re.escape(name)}(\[[^\]]*\])? = ")
            if any(word.search(ln) and not assign.match(ln) for i, ln in enumerate(lines) if i != idx):
                continue
            indent = lines[idx][:len(lines[idx]) - len(lines[idx].lstrip())]
            out.insert(idx + 1, f"{indent}(void){name};")
        return out

    # ---- blocks ----
    def scope_body(self, node: Node, path: Path) -> None:
        self.children(node, path)

    def children(self, node: Node, path: Path) -> None:
        phase = None
        kids = node.children
        i = 0
        while i < len(kids):
            child = kids[i]
            i += 1
            if child.kind is NodeKind.DISPATCH:
                d = self.c.p.dispatch(child.name)
                if d.phase and d.phase != phase:
                    self.c.w.blank()
                    self.c.w.comment(f"---- phase {d.phase} ----")
                phase = d.phase
                self.declare_storage(path, child.key)
                if d.interleave is None:
                    self.tasks.emit_dispatch(d)
                    continue
                members = [d]
                while (i < len(kids) and kids[i].kind is NodeKind.DISPATCH
                       and self.c.p.dispatch(kids[i].name).interleave == d.interleave):
                    self.declare_storage(path, kids[i].key)
                    members.append(self.c.p.dispatch(kids[i].name))
                    i += 1
                for group in ir.interleave_groups(members):
                    self.tasks.emit_interleaved(group)
                phase = members[-1].phase
                continue
            self.declare_storage(path, child.key)
            if child.kind is NodeKind.ALLOC:
                key = self.c.alloc_keys[child.name]
                if key[1] != key[0]:  # a manual scope's batch: its TaskIds come first, as pypto emits them
                    self.declare_storage(path, (NodeKind.SCOPE, key[1]))
                    self.c.w.blank()
                self.allocations(key)
                continue
            if child.kind is NodeKind.SCOPE:
                phase = None
                s = self.c.p.scopes[child.num]
                self.c.w.blank()
                where = f"{PurePath(s.span.filename).name}:{s.span.line}"
                self.c.w.comment(f"{s.mode} scope ({where}): depth {s.depth}, ring {s.ring}")
                header = "PTO2_SCOPE(PTO2ScopeMode::MANUAL)" if s.mode is ScopeMode.MANUAL else "PTO2_SCOPE()"
                with self.c.w.block(header):
                    self.scope_body(child, (*path, child.key))
            else:
                phase = None
                self.loop(child, path)

    def loop(self, node: Node, path: Path) -> None:
        lp = self.c.p.loops[node.num]
        a = lp.axis
        v = self.c.var(a.var)
        self.c.w.blank()
        per = "one PTO2_SCOPE per iteration" if lp.body_scope is not None else "no scope of its own"
        self.c.w.comment(f"for {a.var} in {a.lo}..{a.hi} ({per})")
        for c in lp.carries:
            if c.kind is CarryKind.TENSOR:
                init = self.c.tensor_ref(c.init, path=path)
                self.c.w.line(f"ChipTensor {self.c.tensor_c[c.name]} = {init};")
                self.c.declared(self.c.tensor_c[c.name])
        inner: Path = (*path, node.key)
        with self.c.w.block(f"for (int64_t {v} = {a.lo}; {v} < {a.hi}; ++{v})"):
            if lp.body_scope is None:
                self.children(node, inner)
                self.carry_updates(lp, inner)
                return
            body = node.children[0]
            s = self.c.p.scopes[lp.body_scope]
            self.c.w.comment(f"loop body scope: depth {s.depth}, ring {s.ring}")
            with self.c.w.block("PTO2_SCOPE()"):
                self.scope_body(body, (*inner, body.key))
                self.carry_updates(lp, (*inner, body.key))

    def carry_updates(self, lp: ir.Loop, path: Path) -> None:
        if not lp.carries:
            return
        self.c.w.blank()
        self.c.w.comment("loop carries for the next iteration")
        for c in lp.carries:
            if c.kind is CarryKind.TENSOR:
                self.c.w.line(f"{self.c.tensor_c[c.name]} = {self.c.tensor_ref(c.next, path=path)};")
            elif c.name in self.c.carry_store:
                self.copy_slots(self.c.carry_store[c.name].cname, self.c.carry_store[c.name].size, c.next)

    def copy_slots(self, dst: str, size: int, src_tileset: str) -> None:
        """dst[i] = one TaskId per task of `src_tileset`; slots past its task count become invalid."""
        src = self.c.storage[src_tileset]
        ts = self.c.p.tilesets[src_tileset]
        if is_single(ts):
            self.c.w.line(f"{dst}[0] = {src.cname if src.kind == 'local' else src.cname + '[0]'};")
            count = 1
        elif ts.kind is not TaskKind.TILES:
            self.c.w.line(f"for (int64_t i = 0; i < {src.size}; ++i) {dst}[i] = {src.cname}[i];")
            count = src.size
        else:
            count = 0
            for dn in ts.dispatches:
                d = self.c.p.dispatch(dn)
                if d.kind is TaskKind.SPMD and d.block_count == 0:
                    continue  # an empty SPMD wave submits no task: it holds no slot (and has no tile to read)
                self.copy_wave_tasks(dst, count, src.cname, ts, d)
                count += d.task_count
        if max(size, 1) > count:
            self.c.w.line(f"for (int64_t i = {count}; i < {max(size, 1)}; ++i) {dst}[i] = PTO2TaskId::invalid();")

    def copy_wave_tasks(self, dst: str, base: int, src: str, ts: ir.TileSet, d: ir.Dispatch) -> None:
        """One slot per task of wave `d`: its first tile (block indices at their lower bounds)."""
        tvars = {a.var for a in d.task_axes}
        blocks = {a.var: a for a in d.block_axes}
        coords: list[Expr] = [Name(a.var, a.span) if a.var in tvars else Num(blocks[a.var].lo, a.span)
                              for a in ts.axes]
        flat: Expr = Num(base, ts.span)
        stride = 1
        for a in reversed(d.task_axes):
            flat = add(mul(sub(Name(a.var, a.span), Num(a.lo, a.span)), Num(stride, a.span)), flat)
            stride *= a.size
        pr = self.c.printer({a.var: axis_range(a) for a in d.task_axes})
        for a in d.task_axes:
            v = self.c.var(a.var)
            self.c.w.line(f"for (int64_t {v} = {a.lo}; {v} < {a.hi}; ++{v}) {{")
            self.c.w.level += 1
        self.c.w.line(f"{dst}[{pr(flat)}] = {src}[{pr(tile_index(ts, coords))}];")
        for _ in d.task_axes:
            self.c.w.level -= 1
            self.c.w.line("}")

    def declare_storage(self, path: Path, before: tuple[str, object]) -> None:
        """Declare the TaskId arrays and carries that live in block `path` just before child `before` (once)."""
        if (path, before) in self._declared:
            return
        self._declared.add((path, before))
        for st in self.c.storage.values():
            if st.kind is SlotKind.ARRAY and st.home == path and st.before == before:
                self.c.w.blank()
                self.c.w.comment(f"TaskIds of {st.name}: one slot per tile")
                self.declare_array(st.cname, st.size)
        for name, st in self.c.carry_store.items():
            if st.home == path and st.before == before:
                lp = next(lp for lp in self.c.p.loops if any(c.name == name for c in lp.carries))
                c = next(c for c in lp.carries if c.name == name)
                self.c.w.blank()
                self.c.w.comment(f"carry {name}: {c.init} before the loop, then {c.next} of the previous iteration")
                self.c.w.line(f"PTO2TaskId {st.cname}[{max(st.size, 1)}];")
                self.c.declared(st.cname)
                self.copy_slots(st.cname, st.size, c.init)

    def declare_array(self, cname: str, size: int) -> None:
        size = max(size, 1)  # an empty tile set still gets one (invalid) slot: no zero-length array
        if size == 1:
            self.c.w.line(f"PTO2TaskId {cname}[1] = {{PTO2TaskId::invalid()}};")
            return
        self.c.w.line(f"PTO2TaskId {cname}[{size}];")
        self.c.w.line(f"for (int64_t i = 0; i < {size}; ++i) {cname}[i] = PTO2TaskId::invalid();")

    # ---- tensors ----
    def allocations(self, key: ir.AllocKey) -> None:
        """One allocation site (`ir.alloc_key`): the group's buffers in batches of alloc_batch, then
        their views; a scope's own buffers at its top, a manual scope's buffers in the enclosing
        scope before its header, an `unscoped` loop body's at the top of each iteration."""
        p = self.c.p
        tensors = [t for t in p.tensors.values() if t.storage is Storage.ALLOC and t.scope is not None
                   and ir.alloc_key(p, t) == key]
        if not tensors:
            return
        sid, group, _ = key
        s = p.scopes[sid]
        whose = "" if group == sid else f" (declared in the manual scope at line {p.scopes[group].span.line})"
        self.c.w.comment(f"Allocations: {len(tensors)} buffer(s) on ring {s.ring}{whose}")
        batch = self.c.p.target["alloc_batch"]  # pypto kMaxAllocTensorsArgs (16) unless the spec's target says
        for i in range(0, len(tensors), batch):
            chunk = tensors[i:i + batch]
            cis = []
            for t in chunk:
                c = self.c.tensor_c[t.name]
                ci = self.c.unique_name(f"{c}_ci")
                dims = ", ".join(str(x) for x in t.shape)
                self.c.w.line(f"uint32_t {ci}_shapes[{len(t.shape)}] = {{{dims}}};")
                self.c.w.line(f"TensorCreateInfo {ci}({ci}_shapes, {len(t.shape)}, {spelling(t.dtype)});")
                cis.append(ci)
            k = self.c.alloc_counter
            self.c.alloc_counter += 1
            self.c.w.line(f"TaskOutputTensors alloc_{k} = alloc_tensors({', '.join(cis)});")
            for j, t in enumerate(chunk):
                self.c.w.line(f"const ChipTensor& {self.c.tensor_c[t.name]} = alloc_{k}.get_ref({j});")
                self.c.declared(self.c.tensor_c[t.name])
        roots = {t.name for t in tensors}
        views = [t for t in p.tensors.values() if t.storage is Storage.VIEW and t.base in roots]
        if views:
            self.c.w.blank()
        for t in views:
            self.view_decl(t, self.c.w)
        self.c.w.blank()

    def view_decl(self, t: ir.Tensor, w: Writer) -> None:
        assert t.base is not None
        c = self.c.tensor_c[t.name]
        dims = ", ".join(str(x) for x in t.shape)
        w.line(f"uint32_t {c}_shapes[{len(t.shape)}] = {{{dims}}};")
        w.line(f"ChipTensor {c} = {self.c.tensor_c[t.base]}.reshape({c}_shapes, {len(t.shape)});")
        if w is self.c.w:
            self.c.declared(c)
        self.c.names.add(f"{c}_shapes")


def spec_display(path: str) -> str:
    """The spec path relative to its repository root (a `.git` ancestor), else its base name."""
    from pathlib import Path as FsPath

    p = FsPath(path).resolve()
    for parent in p.parents:
        if (parent / ".git").exists():
            return p.relative_to(parent).as_posix()
    return p.name
