"""One generated block per task: arguments, launch spec, flags, deps, submit, TaskId capture.

Shape (pypto `TaskDispatchPlan::Emit`, reference §2.2): a comment naming the task;
`CoreTaskArgs params_t<n>;`; one `add_input` / `add_output` / `add_inout` per tensor
parameter in declaration order (In -> INPUT, Out -> OUTPUT_EXISTING, i.e. an existing buffer
with no write-after-write lookup, InOut and atomic_add -> INOUT), then the scalars; for an
SPMD task `launch_spec.set_block_num(n)` (+ `set_require_sync_start(true)`), then
`set_allow_early_resolve(true)` only when flagged, then the deps array; a direct task puts
the deps first. Dummies (`// Phase-fence barrier`) carry only deps; a dep-carrying dummy is
submitted only when at least one id is valid. An empty SPMD grid submits nothing.
Each function returns lines indented from level 0 (`writer.Writer`).
"""

from __future__ import annotations

from contextlib import ExitStack

from pgraph.expr import Expr, Name, show
from pgraph.ir import program as ir
from pgraph.kinds import Core, TaskKind

from .arguments import scalar_value, tensor_arg_lines
from .cexpr import Interval
from .context import Context, env_ranges, printer
from .deps import deps_lines
from .layout import SlotKind, axis_range, is_single, tile_index
from .writer import Writer

#: CoreTaskArgs method per parameter direction.
ADD_METHOD = {"in": "add_input", "out": "add_output", "inout": "add_inout", "atomic_add": "add_inout"}


def group_lines(ctx: Context, group: tuple[ir.Dispatch, ...]) -> list[str]:
    """A dispatch, or an `interleave` group: one `for` nest over the shared index space, each
    member's task inside (`member_lines`)."""
    lead = group[0]
    if not lead.task_axes or len(group) == 1:
        w = Writer()
        for d in group:
            w.extend(dispatch_lines(ctx, d))
        return w.lines
    w = Writer()
    w.blank()
    space = ", ".join(f"{a.var} in {a.lo}..{a.hi}" for a in lead.task_axes)
    w.comment(f"interleave {', '.join(d.name for d in group)} [{space}]: {len(group)} x {lead.task_count} "
              "task(s), submitted index by index")
    body = Writer()
    for d in group:
        body.extend(member_lines(ctx, d, lead))
    w.extend(loop_nest(ctx, lead.task_axes, body.lines))
    return w.lines


def member_lines(ctx: Context, d: ir.Dispatch, lead: ir.Dispatch) -> list[str]:
    """One member of an interleave group inside the lead's loops.

    A member whose task axes are named differently from the lead's reads them through
    `[[maybe_unused]] const int64_t` aliases of the loop variables; when a member reuses a loop
    variable's name for another axis, the loop values go through fresh temporaries first, so
    every alias reads the loop's value, not an alias before it.
    """
    ranges = env_ranges(ctx.p, d)
    renamed = [(a, b) for a, b in zip(d.task_axes, lead.task_axes, strict=True) if a.var != b.var]
    if not renamed:
        return task_lines(ctx, d, ranges)
    var = ctx.names.var
    sources = {b.var: var[b.var] for _, b in renamed}
    temps = ctx.names.temps.get(d.name, {})
    w = Writer()
    with w.block(""):
        for lead_var in sorted(temps):
            w.line(f"const int64_t {temps[lead_var]} = {sources[lead_var]};")
            sources[lead_var] = temps[lead_var]
        for a, b in renamed:
            w.line(f"[[maybe_unused]] const int64_t {var[a.var]} = {sources[b.var]};")
        w.extend(task_lines(ctx, d, ranges))
    return w.lines


def dispatch_lines(ctx: Context, d: ir.Dispatch) -> list[str]:
    """A dispatch: a `for` nest over its task axes around one task block."""
    ranges = env_ranges(ctx.p, d)
    if not d.task_axes:
        return task_lines(ctx, d, ranges)
    w = Writer()
    w.blank()
    space = ", ".join(f"{a.var} in {a.lo}..{a.hi}" for a in d.task_axes)
    w.comment(f"{d.kind} {d.name}[{space}]: {d.task_count} task(s)")
    w.extend(loop_nest(ctx, d.task_axes, task_lines(ctx, d, ranges)))
    return w.lines


def loop_nest(ctx: Context, axes: tuple[ir.IAxis, ...] | list[ir.IAxis], body: list[str]) -> list[str]:
    """`body` inside one C++ `for` per axis, outermost first."""
    w = Writer()
    with ExitStack() as loops:
        for a in axes:
            v = ctx.names.var[a.var]
            loops.enter_context(w.block(f"for (int64_t {v} = {a.lo}; {v} < {a.hi}; ++{v})"))
        w.extend(body)
    return w.lines


def task_lines(ctx: Context, d: ir.Dispatch, ranges: dict[str, Interval]) -> list[str]:
    """The block of one task of `d` by its kind: a dummy, an empty SPMD grid or a submit."""
    if d.kind is TaskKind.DUMMY:
        return dummy_lines(ctx, d, ranges)
    if d.kind is TaskKind.SPMD and d.block_count == 0:
        return empty_grid_lines(ctx, d, ranges)
    return submit_lines(ctx, d, ranges)


def empty_grid_lines(ctx: Context, d: ir.Dispatch, ranges: dict[str, Interval]) -> list[str]:
    """An SPMD grid of 0 blocks: nothing is submitted, its TaskId stays invalid."""
    w = Writer()
    w.blank()
    w.comment(f"Spmd {d.name}: an empty grid (0 blocks) submits nothing")
    if d.tileset in ctx.storage:
        w.extend(capture_lines(ctx, d, "PTO2TaskId::invalid()", ranges, declare=True))
    return w.lines


def submit_lines(ctx: Context, d: ir.Dispatch, ranges: dict[str, Interval]) -> list[str]:
    """An `at`, `parallel` or `spmd` task (or a wave of `tiles`): arguments, launch spec, flags,
    deps, the `rt_submit_*` call and the capture of its TaskId when a later task reads it."""
    n = ctx.names.task[d.name]
    assert d.kernel is not None
    kernel = ctx.p.kernels[d.kernel]
    pr = f"params_t{n}"
    spmd = d.kind is TaskKind.SPMD
    w = Writer()
    w.blank()
    callee = kernel.name if d.kernel_table is None else f"{d.kernel_table}[{show(d.kernel_index)}]"  # type: ignore[arg-type]
    if spmd:
        w.comment(f"Spmd {n}: {d.name} -> {callee} ({d.block_count} blocks, {kernel.core})")
    else:
        w.comment(f"Task {n}: {d.name} -> {callee} ({kernel.core})")
    fid_lines, fids = func_ids(ctx, d, pr, ranges)
    w.extend(fid_lines)
    w.line(f"CoreTaskArgs {pr};")
    views = {v.param.name: v for v in ctx.views[d.name]}
    made = creates(ctx, d)
    for arg in d.args:
        if arg.region is not None and arg.region.tensor in made:
            w.line(f"{pr}.add_output({ctx.names.ci[arg.region.tensor]});")  # OUTPUT: the runtime makes it
        elif arg.region is not None:
            view_lines, ref = tensor_arg_lines(ctx, views[arg.param.name], d, ranges)
            w.extend(view_lines)
            w.line(f"{pr}.{ADD_METHOD[arg.param.direction]}({ref});")
    for arg in d.args:
        if arg.scalar is not None:
            w.line(f"{pr}.add_scalar({scalar_value(ctx, arg, ranges)});")
    if kernel.core is Core.MIX:
        w.line(f"MixedKernels mixed_{n} = {{{fids[0]}, {fids[1]}, {fids[1]}}};")
    if spmd:
        w.extend(launch_lines(d, pr))
        w.extend(deps_lines(ctx, d, pr, ranges))
    else:
        w.extend(deps_lines(ctx, d, pr, ranges))
        w.extend(launch_lines(d, pr))
    call = {"aic": f"rt_submit_aic_task({fids[0]}, {pr})", "aiv": f"rt_submit_aiv_task({fids[0]}, {pr})",
            "mix": f"rt_submit_task(mixed_{n}, {pr})"}[kernel.core]
    if d.tileset not in ctx.storage and not made:
        w.line(f"{call};")
        return w.lines
    w.line(f"TaskOutputTensors task_{n}_outs = {call};")
    for i, name in enumerate(made):
        w.line(f"{ctx.tensor_c[name]} = task_{n}_outs.get_ref({i});")
    if d.tileset in ctx.storage:
        w.extend(capture_lines(ctx, d, f"task_{n}_outs.task_id()", ranges, declare=True))
    return w.lines


def creates(ctx: Context, d: ir.Dispatch) -> list[str]:
    """The `created` tensors `d`'s submit makes (add_output(TensorCreateInfo)), in argument
    order: the order of its OUTPUT refs in the returned TaskOutputTensors."""
    if not any(t.created for t in ctx.p.tensors.values()):
        return []
    mine = {t for t, c in ir.creators(ctx.p).items() if c == d.name}
    return [a.region.tensor for a in d.args if a.region is not None and a.region.tensor in mine]


def func_ids(ctx: Context, d: ir.Dispatch, pr: str, ranges: dict[str, Interval]) -> tuple[list[str], list[str]]:
    """The func id of each part as C++ (and the lines declaring them): a literal, or for a
    `kernels` table a lookup by the task's index in `const int32_t <params>_fids[N]` (one
    array per part; a member no task selects is INVALID_KERNEL_ID)."""
    assert d.kernel is not None
    if d.kernel_table is None or d.kernel_index is None:
        return [], [str(f) for f in ctx.ids.ids(d.kernel)]
    members = ctx.p.kernel_tables[d.kernel_table].members
    parts = 2 if ctx.p.kernels[d.kernel].core is Core.MIX else 1
    index = printer(ctx, ranges)(d.kernel_index)
    lines, out = [], []
    for part in range(parts):
        values = [str(ctx.ids.by_kernel[m][part]) if m in ctx.ids.by_kernel else "INVALID_KERNEL_ID"
                  for m in members]
        name = f"{pr}_fids" if parts == 1 else f"{pr}_fids_{('aic', 'aiv')[part]}"
        lines.append(f"const int32_t {name}[{len(members)}] = {{{', '.join(values)}}};  // {', '.join(members)}")
        out.append(f"{name}[{index}]")
    return lines, out


def launch_lines(d: ir.Dispatch, pr: str) -> list[str]:
    """The launch spec and flags: block count (SPMD), sync start, early resolve."""
    out = []
    if d.kind is TaskKind.SPMD:
        out.append(f"{pr}.launch_spec.set_block_num({d.block_count});")
    if d.sync_start:
        out.append(f"{pr}.launch_spec.set_require_sync_start(true);")
    if d.early:
        out.append(f"{pr}.set_allow_early_resolve(true);")
    return out


def dummy_lines(ctx: Context, d: ir.Dispatch, ranges: dict[str, Interval]) -> list[str]:
    """A dependency-only dummy: submitted unconditionally without deps (its id is valid), else
    only when at least one dep id was appended (its id stays invalid otherwise)."""
    k = ctx.names.barrier[d.name]
    pr = f"params_phase_fence_barrier_{k}"
    outs = f"phase_fence_barrier_{k}_outs"
    stored = d.tileset in ctx.storage
    w = Writer()
    w.blank()
    w.comment(f"Phase-fence barrier {k}: dependency-only dummy task {d.name}")
    w.line(f"CoreTaskArgs {pr};")
    if not d.deps:
        if not stored:
            w.line(f"rt_submit_dummy_task({pr});")
            return w.lines
        w.line(f"TaskOutputTensors {outs} = rt_submit_dummy_task({pr});")
        w.extend(capture_lines(ctx, d, f"{outs}.task_id()", ranges, declare=True))
        return w.lines
    w.extend(deps_lines(ctx, d, pr, ranges))
    if stored:
        w.extend(capture_lines(ctx, d, "PTO2TaskId::invalid()", ranges, declare=True))
    with w.block(f"if ({pr}_deps_count > 0)"):
        if not stored:
            w.line(f"rt_submit_dummy_task({pr});")
        else:
            w.line(f"TaskOutputTensors {outs} = rt_submit_dummy_task({pr});")
            w.extend(capture_lines(ctx, d, f"{outs}.task_id()", ranges, declare=False))
    return w.lines


def capture_lines(ctx: Context, d: ir.Dispatch, value: str, ranges: dict[str, Interval], declare: bool) -> list[str]:
    """Store the task's id: a local (`declare` writes its declaration) or its tile slots."""
    st = ctx.storage[d.tileset]
    if st.kind is SlotKind.LOCAL:
        return [f"PTO2TaskId {st.cname} = {value};" if declare else f"{st.cname} = {value};"]
    ts = ctx.p.tilesets[d.tileset]
    if is_single(ts):
        return [f"{st.cname}[0] = {value};"]
    coords: list[Expr] = [Name(a.var, a.span) for a in ts.axes]
    block_axes = {a.var: a for a in d.block_axes}
    loops = [block_axes[a.var] for a in ts.axes if a.var in block_axes]
    inner = dict(ranges)
    inner.update({a.var: axis_range(a) for a in loops})
    index = printer(ctx, inner)(tile_index(ts, coords))
    w = Writer()
    with ExitStack() as nest:
        for a in loops:
            v = ctx.names.var[a.var]
            nest.enter_context(w.block(f"for (int64_t {v} = {a.lo}; {v} < {a.hi}; ++{v})"))
        w.line(f"{st.cname}[{index}] = {value};")
    return w.lines
