"""The block structure of the entry: scopes, loops, allocations, TaskId storages and carries.

Each function returns the lines of one construct, indented from level 0 (`writer.Writer`).
Allocations are hoisted to the top of the scope owning them, and the buffers a manual scope
declares are a batch of their own in the enclosing scope, just before the MANUAL header (pypto
`EmitBatchedAllocTensors`); each batch is split into `alloc_tensors` calls of at most the
target's `alloc_batch` (16 by default, pypto kMaxAllocTensorsArgs). Scope-level loops stay C++
`for` loops, so a 40-layer build has the size of a 2-layer one.
"""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import PurePath

from pgraph.expr import Expr, Name, Num
from pgraph.ir import program as ir
from pgraph.kinds import CarryKind, NodeKind, ScopeMode, Storage, TaskKind

from .cexpr import add, mul, sub
from .context import Context, printer, tensor_ref
from .dtypes import spelling
from .layout import Node, Path, SlotKind, axis_range, is_single, tile_index
from .order import Alloc, Declare, Phase, Scope, Submit, block_items
from .tasks import group_lines
from .writer import Writer


def entry_lines(ctx: Context) -> list[str]:
    """The entry scope: one `PTO2_SCOPE()` holding the whole body, or for an `unscoped` entry
    (depth 0) the body itself, submitted in the root scope the executor opens around the entry."""
    s = ctx.p.scopes[0]
    w = Writer()
    body = children_lines(ctx, ctx.tree, ((NodeKind.SCOPE, 0),))
    if s.depth == 0:
        w.comment("unscoped entry: the executor's root scope, depth 0, ring 0")
        w.extend(body)
        return w.lines
    w.comment(f"entry scope: depth {s.depth}, ring {s.ring}")
    with w.block("PTO2_SCOPE()"):
        w.extend(body)
    return w.lines


def children_lines(ctx: Context, node: Node, path: Path) -> list[str]:
    """The contents of block `node` at `path`: its items (`order.block_items`) in order."""
    w = Writer()
    for item in block_items(ctx, node, path):
        if isinstance(item, Phase):
            w.blank()
            w.comment(f"---- phase {item.name} ----")
        elif isinstance(item, Declare):
            w.extend(storage_lines(ctx, path, item.before))
        elif isinstance(item, Submit):
            w.extend(group_lines(ctx, item.group))
        elif isinstance(item, Alloc):
            w.extend(alloc_lines(ctx, item.key, item.manual))
        elif isinstance(item, Scope):
            w.extend(scope_lines(ctx, item.node, path))
        else:
            w.extend(loop_lines(ctx, item.node, path))
    return w.lines


def scope_lines(ctx: Context, node: Node, path: Path) -> list[str]:
    """A nested scope: `PTO2_SCOPE()` or `PTO2_SCOPE(PTO2ScopeMode::MANUAL)`."""
    s = ctx.p.scopes[node.num]
    w = Writer()
    w.blank()
    w.comment(f"{s.mode} scope ({PurePath(s.span.filename).name}:{s.span.line}): depth {s.depth}, ring {s.ring}")
    with w.block("PTO2_SCOPE(PTO2ScopeMode::MANUAL)" if s.mode is ScopeMode.MANUAL else "PTO2_SCOPE()"):
        w.extend(children_lines(ctx, node, (*path, node.key)))
    return w.lines


def loop_lines(ctx: Context, node: Node, path: Path) -> list[str]:
    """A scope-level loop: its tensor carries, the `for`, one `PTO2_SCOPE()` per iteration when
    it has a body scope, the body and the carry updates."""
    lp = ctx.p.loops[node.num]
    a = lp.axis
    v = ctx.names.var[a.var]
    w = Writer()
    w.blank()
    per = "one PTO2_SCOPE per iteration" if lp.body_scope is not None else "no scope of its own"
    w.comment(f"for {a.var} in {a.lo}..{a.hi} ({per})")
    for c in lp.carries:
        if c.kind is CarryKind.TENSOR:
            cname = ctx.tensor_c[c.name]
            w.decl(f"ChipTensor {cname} = {tensor_ref(ctx, c.init, path=path)};", cname)
    inner: Path = (*path, node.key)
    with w.block(f"for (int64_t {v} = {a.lo}; {v} < {a.hi}; ++{v})"):
        if lp.body_scope is None:
            w.extend(children_lines(ctx, node, inner))
            w.extend(carry_update_lines(ctx, lp, inner))
        else:
            body = node.children[0]
            s = ctx.p.scopes[lp.body_scope]
            w.comment(f"loop body scope: depth {s.depth}, ring {s.ring}")
            with w.block("PTO2_SCOPE()"):
                w.extend(children_lines(ctx, body, (*inner, body.key)))
                w.extend(carry_update_lines(ctx, lp, (*inner, body.key)))
    return w.lines


def carry_update_lines(ctx: Context, lp: ir.Loop, path: Path) -> list[str]:
    """The end of an iteration: each carry takes its `then` value."""
    if not lp.carries:
        return []
    w = Writer()
    w.blank()
    w.comment("loop carries for the next iteration")
    for c in lp.carries:
        if c.kind is CarryKind.TENSOR:
            w.line(f"{ctx.tensor_c[c.name]} = {tensor_ref(ctx, c.next, path=path)};")
        elif c.name in ctx.carry_store:
            st = ctx.carry_store[c.name]
            w.extend(copy_slot_lines(ctx, st.cname, st.size, c.next))
    return w.lines


def storage_lines(ctx: Context, path: Path, before: tuple[str, object]) -> list[str]:
    """The TaskId arrays and carries declared in block `path` just before its child `before`."""
    w = Writer()
    for st in ctx.declared_at.get((path, before), ()):
        w.blank()
        if st.kind is SlotKind.ARRAY:
            w.comment(f"TaskIds of {st.name}: one slot per tile")
            size = max(st.size, 1)  # an empty tile set still gets one (invalid) slot: no zero-length array
            if size == 1:
                w.line(f"PTO2TaskId {st.cname}[1] = {{PTO2TaskId::invalid()}};")
                continue
            w.line(f"PTO2TaskId {st.cname}[{size}];")
            w.line(f"for (int64_t i = 0; i < {size}; ++i) {st.cname}[i] = PTO2TaskId::invalid();")
            continue
        c = ctx.p.carries[st.name]
        w.comment(f"carry {st.name}: {c.init} before the loop, then {c.next} of the previous iteration")
        w.decl(f"PTO2TaskId {st.cname}[{max(st.size, 1)}];", st.cname)
        w.extend(copy_slot_lines(ctx, st.cname, st.size, c.init))
    return w.lines


def copy_slot_lines(ctx: Context, dst: str, size: int, src_tileset: str) -> list[str]:
    """dst[i] = one TaskId per task of `src_tileset`; slots past its task count become invalid."""
    src = ctx.storage[src_tileset]
    ts = ctx.p.tilesets[src_tileset]
    w = Writer()
    if is_single(ts):
        w.line(f"{dst}[0] = {src.cname if src.kind == 'local' else src.cname + '[0]'};")
        count = 1
    elif ts.kind is not TaskKind.TILES:
        w.line(f"for (int64_t i = 0; i < {src.size}; ++i) {dst}[i] = {src.cname}[i];")
        count = src.size
    else:
        count = 0
        for d in map(ctx.p.dispatch, ts.dispatches):
            if d.kind is TaskKind.SPMD and d.block_count == 0:
                continue  # an empty SPMD wave submits no task: it holds no slot (and has no tile to read)
            w.extend(copy_wave_lines(ctx, dst, count, src.cname, ts, d))
            count += d.task_count
    if max(size, 1) > count:
        w.line(f"for (int64_t i = {count}; i < {max(size, 1)}; ++i) {dst}[i] = PTO2TaskId::invalid();")
    return w.lines


def copy_wave_lines(ctx: Context, dst: str, base: int, src: str, ts: ir.TileSet, d: ir.Dispatch) -> list[str]:
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
    pr = printer(ctx, {a.var: axis_range(a) for a in d.task_axes})
    w = Writer()
    with ExitStack() as loops:
        for a in d.task_axes:
            v = ctx.names.var[a.var]
            loops.enter_context(w.block(f"for (int64_t {v} = {a.lo}; {v} < {a.hi}; ++{v})"))
        w.line(f"{dst}[{pr(flat)}] = {src}[{pr(tile_index(ts, coords))}];")
    return w.lines


def manual_dep_arg(t: ir.Tensor) -> str:
    """The TensorCreateInfo's trailing argument for a `manual_dep` tensor (simpler
    TRB/runtime/tensor_create_info.h `bool manual_dep=false`: no TensorMap lookup or insert)."""
    return ", /*manual_dep=*/true" if t.manual_dep else ""


def alloc_lines(ctx: Context, key: ir.AllocKey, manual: bool) -> list[str]:
    """One allocation site (`ir.alloc_key`): the group's buffers in batches of alloc_batch, then
    their views; a scope's own buffers at its top, a manual scope's buffers in the enclosing
    scope before its header, an `unscoped` loop body's at the top of each iteration."""
    p = ctx.p
    w = Writer()
    if manual:
        w.blank()
    members = [t for t in p.tensors.values() if t.storage is Storage.ALLOC and t.scope is not None
               and ir.alloc_key(p, t) == key]
    if not members:
        return w.lines
    tensors = [t for t in members if not t.created]
    sid, group, _ = key
    whose = "" if group == sid else f" (declared in the manual scope at line {p.scopes[group].span.line})"
    if tensors:
        w.comment(f"Allocations: {len(tensors)} buffer(s) on ring {p.scopes[sid].ring}{whose}")
    batch = p.target["alloc_batch"]  # pypto kMaxAllocTensorsArgs (16) unless the spec's target says
    for i in range(0, len(tensors), batch):
        chunk = tensors[i:i + batch]
        for t in chunk:
            ci = ctx.names.ci[t.name]
            w.line(f"uint32_t {ci}_shapes[{len(t.shape)}] = {{{', '.join(str(x) for x in t.shape)}}};")
            w.line(f"TensorCreateInfo {ci}({ci}_shapes, {len(t.shape)}, {spelling(t.dtype)}{manual_dep_arg(t)});")
        k = ctx.names.alloc[key] + i // batch
        w.line(f"TaskOutputTensors alloc_{k} = alloc_tensors({', '.join(ctx.names.ci[t.name] for t in chunk)});")
        for j, t in enumerate(chunk):
            w.decl(f"const ChipTensor& {ctx.tensor_c[t.name]} = alloc_{k}.get_ref({j});", ctx.tensor_c[t.name])
    created = [t for t in members if t.created]
    if created:
        # simpler add_output(TensorCreateInfo) (OUTPUT): the creator's submit carves the buffer
        # from the ring heap and returns it; no alloc task (docs/language.md §5.2)
        w.comment(f"Runtime-created: {len(created)} buffer(s), each made by its first writer's submit{whose}")
    for t in created:
        ci = ctx.names.ci[t.name]
        w.line(f"uint32_t {ci}_shapes[{len(t.shape)}] = {{{', '.join(str(x) for x in t.shape)}}};")
        w.line(f"TensorCreateInfo {ci}({ci}_shapes, {len(t.shape)}, {spelling(t.dtype)}{manual_dep_arg(t)});")
        w.decl(f"ChipTensor {ctx.tensor_c[t.name]}{{}};  // set from its creator's outputs", ctx.tensor_c[t.name])
    roots = {t.name for t in members}
    views = [t for t in p.tensors.values() if t.storage is Storage.VIEW and t.base in roots]
    if views:
        w.blank()
    for t in views:
        w.extend(view_lines(ctx, t, declare=True))
    w.blank()
    return w.lines


def view_lines(ctx: Context, t: ir.Tensor, declare: bool) -> list[str]:
    """`ChipTensor v = base.reshape(shapes, ndims);` for a `view` (`declare`: a Decl line)."""
    assert t.base is not None
    c = ctx.tensor_c[t.name]
    w = Writer()
    w.line(f"uint32_t {c}_shapes[{len(t.shape)}] = {{{', '.join(str(x) for x in t.shape)}}};")
    text = f"ChipTensor {c} = {ctx.tensor_c[t.base]}.reshape({c}_shapes, {len(t.shape)});"
    w.decl(text, c) if declare else w.line(text)
    return w.lines
