"""One generated block per task: arguments, launch spec, flags, deps, submit, TaskId capture.

Shape (pypto `TaskDispatchPlan::Emit`, reference §2.2): a comment naming the task;
`CoreTaskArgs params_t<n>;`; one `add_input` / `add_output` / `add_inout` per tensor
parameter in declaration order (In -> INPUT, Out -> OUTPUT_EXISTING, i.e. an existing buffer
with no write-after-write lookup, InOut and atomic_add -> INOUT), then the scalars; for an
SPMD task `launch_spec.set_block_num(n)` (+ `set_require_sync_start(true)`), then
`set_allow_early_resolve(true)` only when flagged, then the deps array; a direct task puts
the deps first. The deps array has one slot per dep entry; each append is guarded by
`is_valid()` unless the id is a local known to be valid. Dummies (`// Phase-fence barrier`)
carry only deps; a dep-carrying dummy is submitted only when at least one id is valid.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping

from pgraph.expr import Expr, Name, Num, compile_expr, free_vars, show
from pgraph.ir import program as ir
from pgraph.ir.queries import axis_values
from pgraph.kinds import Core, DepKind, DimKind, InternalError, TaskKind

from .cexpr import CxxPrinter, Interval, add, interval, mul, simplify, sub
from .context import Context
from .dtypes import scalar_ctype
from .layout import SlotKind, is_single
from .regions import ArgView, env_space, task_views

#: CoreTaskArgs method per parameter direction.
ADD_METHOD = {"in": "add_input", "out": "add_output", "inout": "add_inout", "atomic_add": "add_inout"}


class DepItem:
    """One dep entry source: a single TaskId, or a loop over TaskId-array slots."""

    def __init__(self, ref: str, valid: bool, loops: list[tuple[str, Expr, Expr]] | None = None,
                 cond: str | None = None) -> None:
        self.ref = ref
        self.valid = valid
        self.loops = loops or []
        self.cond = cond


def axis_range(a: ir.IAxis) -> Interval:
    """Values of an index axis as an interval."""
    return Interval(a.lo, a.hi - 1)


class TaskEmitter:
    """Per-task emission into the shared emission Context `c` (the block emitter `Emitter` owns both)."""

    def __init__(self, c: Context) -> None:
        self.c = c

    def emit_dispatch(self, d: ir.Dispatch) -> None:
        """A dispatch: a `for` nest over its task axes around one task block."""
        ranges = {lp_axis.var: axis_range(lp_axis) for lp_axis in env_space(self.c.p, d)}
        if not d.task_axes:
            self.emit_task(d, ranges)
            return
        self.c.w.blank()
        space = ", ".join(f"{a.var} in {a.lo}..{a.hi}" for a in d.task_axes)
        self.c.w.comment(f"{d.kind} {d.name}[{space}]: {d.task_count} task(s)")
        self.open_task_loops(list(d.task_axes), 0, d, ranges)

    def emit_interleaved(self, group: list[ir.Dispatch]) -> None:
        """An `interleave` group: one `for` nest over the shared index space, each member's task inside.

        A member whose task axes are named differently from the first member's reads them
        through `[[maybe_unused]] const int64_t` aliases of the loop variables; when a member
        reuses a loop variable's name for another axis, the loop values go through fresh
        temporaries first, so every alias reads the loop's value, not an alias before it.
        """
        lead = group[0]
        if not lead.task_axes or len(group) == 1:
            for d in group:
                self.emit_dispatch(d)
            return
        self.c.w.blank()
        space = ", ".join(f"{a.var} in {a.lo}..{a.hi}" for a in lead.task_axes)
        names = ", ".join(d.name for d in group)
        self.c.w.comment(f"interleave {names} [{space}]: {len(group)} x {lead.task_count} task(s), "
                       "submitted index by index")
        self._interleave_loops(group, 0)

    def _interleave_loops(self, group: list[ir.Dispatch], i: int) -> None:
        lead = group[0]
        if i < len(lead.task_axes):
            a = lead.task_axes[i]
            v = self.c.var(a.var)
            with self.c.w.block(f"for (int64_t {v} = {a.lo}; {v} < {a.hi}; ++{v})"):
                self._interleave_loops(group, i + 1)
            return
        lead_vars = {a.var for a in lead.task_axes}
        for d in group:
            ranges = {lp_axis.var: axis_range(lp_axis) for lp_axis in env_space(self.c.p, d)}
            renamed = [(a, b) for a, b in zip(d.task_axes, lead.task_axes, strict=True) if a.var != b.var]
            if not renamed:
                self.emit_task(d, ranges)
                continue
            with self.c.w.block(""):
                targets = [(self.c.var(a.var), b.var) for a, b in renamed]
                sources = {b.var: self.c.var(b.var) for _, b in renamed}
                if any(a.var in lead_vars for a, _ in renamed):   # e.g. q[b, c] against p[a, b]
                    taken = set(self.c.var_c.values())
                    for var in sorted(sources):
                        tmp = self.c.local_name(f"{sources[var]}_loop", taken)
                        taken.add(tmp)
                        self.c.w.line(f"const int64_t {tmp} = {sources[var]};")
                        sources[var] = tmp
                for target, var in targets:
                    self.c.w.line(f"[[maybe_unused]] const int64_t {target} = {sources[var]};")
                self.emit_task(d, ranges)

    def open_task_loops(self, axes: list[ir.IAxis], i: int, d: ir.Dispatch,
                        ranges: dict[str, Interval]) -> None:
        if i == len(axes):
            self.emit_task(d, ranges)
            return
        a = axes[i]
        v = self.c.var(a.var)
        with self.c.w.block(f"for (int64_t {v} = {a.lo}; {v} < {a.hi}; ++{v})"):
            self.open_task_loops(axes, i + 1, d, ranges)

    # ---- one task ----
    def emit_task(self, d: ir.Dispatch, ranges: dict[str, Interval]) -> None:
        if d.kind is TaskKind.DUMMY:
            self.emit_dummy(d, ranges)
            return
        if d.kind is TaskKind.SPMD and d.block_count == 0:
            self.c.w.blank()
            self.c.w.comment(f"Spmd {d.name}: an empty grid (0 blocks) submits nothing")
            if d.tileset in self.c.storage:
                self.capture(d, "PTO2TaskId::invalid()", ranges, declare=True)
            return
        n = self.c.task_counter
        self.c.task_counter += 1
        assert d.kernel is not None
        kernel = self.c.p.kernels[d.kernel]
        pr = f"params_t{n}"
        spmd = d.kind is TaskKind.SPMD
        self.c.w.blank()
        callee = kernel.name if d.kernel_table is None else f"{d.kernel_table}[{show(d.kernel_index)}]"  # type: ignore[arg-type]
        if spmd:
            self.c.w.comment(f"Spmd {n}: {d.name} -> {callee} ({d.block_count} blocks, {kernel.core})")
        else:
            self.c.w.comment(f"Task {n}: {d.name} -> {callee} ({kernel.core})")
        fids = self.func_ids(d, pr, ranges)
        self.c.w.line(f"CoreTaskArgs {pr};")
        views = {v.param.name: v for v in task_views(self.c.p, d)}
        for arg in d.args:
            if arg.region is not None:
                ref = self.tensor_arg(views[arg.param.name], pr, d, ranges)
                self.c.w.line(f"{pr}.{ADD_METHOD[arg.param.direction]}({ref});")
        for arg in d.args:
            if arg.scalar is not None:
                self.c.w.line(f"{pr}.add_scalar({self.scalar_value(arg, ranges)});")
        if kernel.core is Core.MIX:
            self.c.w.line(f"MixedKernels mixed_{n} = {{{fids[0]}, {fids[1]}, {fids[1]}}};")
        if spmd:
            self.launch_lines(d, pr)
            self.deps_block(d, pr, ranges)
        else:
            self.deps_block(d, pr, ranges)
            self.launch_lines(d, pr)
        call = {"aic": f"rt_submit_aic_task({fids[0]}, {pr})", "aiv": f"rt_submit_aiv_task({fids[0]}, {pr})",
                "mix": f"rt_submit_task(mixed_{n}, {pr})"}[kernel.core]
        st = self.c.storage.get(d.tileset)
        if st is None:
            self.c.w.line(f"{call};")
            return
        outs = f"task_{n}_outs"
        self.c.w.line(f"TaskOutputTensors {outs} = {call};")
        self.capture(d, f"{outs}.task_id()", ranges, declare=True)

    def func_ids(self, d: ir.Dispatch, pr: str, ranges: dict[str, Interval]) -> list[str]:
        """The func id of each part as C++: a literal, or for a `kernels` table a lookup by the
        task's index in `const int32_t <params>_fids[N]` (one array per part; a member no task
        selects is INVALID_KERNEL_ID)."""
        assert d.kernel is not None
        if d.kernel_table is None or d.kernel_index is None:
            return [str(f) for f in self.c.ids.ids(d.kernel)]
        members = self.c.p.kernel_tables[d.kernel_table].members
        parts = 2 if self.c.p.kernels[d.kernel].core is Core.MIX else 1
        index = self.c.printer(ranges)(d.kernel_index)
        out = []
        for part in range(parts):
            values = [str(self.c.ids.by_kernel[m][part]) if m in self.c.ids.by_kernel else "INVALID_KERNEL_ID"
                      for m in members]
            name = f"{pr}_fids" if parts == 1 else f"{pr}_fids_{('aic', 'aiv')[part]}"
            self.c.w.line(f"const int32_t {name}[{len(members)}] = {{{', '.join(values)}}};  // {', '.join(members)}")
            out.append(f"{name}[{index}]")
        return out

    def launch_lines(self, d: ir.Dispatch, pr: str) -> None:
        if d.kind is TaskKind.SPMD:
            self.c.w.line(f"{pr}.launch_spec.set_block_num({d.block_count});")
        if d.sync_start:
            self.c.w.line(f"{pr}.launch_spec.set_require_sync_start(true);")
        if d.early:
            self.c.w.line(f"{pr}.set_allow_early_resolve(true);")

    def emit_dummy(self, d: ir.Dispatch, ranges: dict[str, Interval]) -> None:
        k = self.c.barrier_counter
        self.c.barrier_counter += 1
        pr = f"params_phase_fence_barrier_{k}"
        outs = f"phase_fence_barrier_{k}_outs"
        self.c.w.blank()
        self.c.w.comment(f"Phase-fence barrier {k}: dependency-only dummy task {d.name}")
        self.c.w.line(f"CoreTaskArgs {pr};")
        st = self.c.storage.get(d.tileset)
        if not d.deps:
            if st is None:
                self.c.w.line(f"rt_submit_dummy_task({pr});")
                return
            self.c.w.line(f"TaskOutputTensors {outs} = rt_submit_dummy_task({pr});")
            self.capture(d, f"{outs}.task_id()", ranges, declare=True)
            return
        self.deps_block(d, pr, ranges)
        if st is not None:
            self.capture(d, "PTO2TaskId::invalid()", ranges, declare=True)
        with self.c.w.block(f"if ({pr}_deps_count > 0)"):
            if st is None:
                self.c.w.line(f"rt_submit_dummy_task({pr});")
            else:
                self.c.w.line(f"TaskOutputTensors {outs} = rt_submit_dummy_task({pr});")
                self.capture(d, f"{outs}.task_id()", ranges, declare=False)

    def capture(self, d: ir.Dispatch, value: str, ranges: dict[str, Interval], declare: bool) -> None:
        """Store the task's id: a local (`declare` writes its declaration) or its tile slots."""
        st = self.c.storage[d.tileset]
        if st.kind is SlotKind.LOCAL:
            self.c.w.line(f"PTO2TaskId {st.cname} = {value};" if declare else f"{st.cname} = {value};")
            return
        ts = self.c.p.tilesets[d.tileset]
        if is_single(ts):
            self.c.w.line(f"{st.cname}[0] = {value};")
            return
        coords: list[Expr] = []
        block_axes = {a.var: a for a in d.block_axes}
        for a in ts.axes:
            coords.append(Name(a.var, a.span))
        loops = [block_axes[a.var] for a in ts.axes if a.var in block_axes]
        inner = dict(ranges)
        inner.update({a.var: axis_range(a) for a in loops})
        index = self.c.printer(inner)(tile_index(ts, coords))
        if not loops:
            self.c.w.line(f"{st.cname}[{index}] = {value};")
            return
        for a in loops:
            v = self.c.var(a.var)
            self.c.w.line(f"for (int64_t {v} = {a.lo}; {v} < {a.hi}; ++{v}) {{")
            self.c.w.level += 1
        self.c.w.line(f"{st.cname}[{index}] = {value};")
        for _ in loops:
            self.c.w.level -= 1
            self.c.w.line("}")

    # ---- arguments ----
    def tensor_arg(self, view: ArgView, pr: str, d: ir.Dispatch, ranges: dict[str, Interval]) -> str:
        """The C++ expression passed to add_*: the tensor itself or a named view of it."""
        base = self.c.tensor_ref(view.tensor, d)
        if view.whole:
            return base
        name = self.c.unique_name(f"{pr}_{view.param.name}", generated=True)
        pr_ = self.c.printer(ranges)
        if any(b.fallback for b in view.dims):
            self.fallback_bounds(view, name, d, ranges)
        shapes, offsets = [], []
        for i, b in enumerate(view.dims):
            if b.fallback:
                offsets.append(f"(uint32_t){name}_lo{i}")
                shapes.append(f"(uint32_t)({name}_hi{i} - {name}_lo{i})")
                continue
            where = f"{d.span.location()}: the view of '{view.tensor}' passed to '{view.param.name}' of '{d.name}'"
            offsets.append(u32(pr_, b.lo, f"{where}: offset {i}"))
            shapes.append(u32(pr_, b.size, f"{where}: extent {i}"))
        nd = len(view.dims)
        self.c.w.line(f"uint32_t {name}_shapes[{nd}] = {{{', '.join(shapes)}}};")
        self.c.w.line(f"uint32_t {name}_offsets[{nd}] = {{{', '.join(offsets)}}};")
        self.c.w.line(f"ChipTensor {name} = {base}.view({name}_shapes, {name}_offsets);")
        return name

    def fallback_bounds(self, view: ArgView, name: str, d: ir.Dispatch, ranges: dict[str, Interval]) -> None:
        """Min/max over the SPMD blocks at run time, for bounds no single block attains."""
        inner = dict(ranges)
        inner.update({a.var: axis_range(a) for a in d.block_axes})
        pr_ = self.c.printer(inner)
        dims = [(i, b) for i, b in enumerate(view.dims) if b.fallback]
        for i, _ in dims:
            self.c.w.line(f"int64_t {name}_lo{i} = INT64_MAX;")
            self.c.w.line(f"int64_t {name}_hi{i} = INT64_MIN;")
        depth = 0
        for a in d.block_axes:
            v = self.c.var(a.var)
            self.c.w.line(f"for (int64_t {v} = {a.lo}; {v} < {a.hi}; ++{v}) {{")
            self.c.w.level += 1
            depth += 1
        for i, b in dims:
            assert b.hi is not None
            self.c.w.line(f"if ({pr_(b.lo)} < {name}_lo{i}) {name}_lo{i} = {pr_(b.lo)};")
            self.c.w.line(f"if ({pr_(b.hi)} > {name}_hi{i}) {name}_hi{i} = {pr_(b.hi)};")
        for _ in range(depth):
            self.c.w.level -= 1
            self.c.w.line("}")

    def scalar_value(self, arg: ir.Arg, ranges: dict[str, Interval]) -> str:
        assert arg.scalar is not None
        ctype = scalar_ctype(arg.param.dtype)
        if ctype is None:
            raise InternalError(f"scalar parameter '{arg.param.name}' is {arg.param.dtype}: no C++ scalar type "
                                "(PG011 should have rejected it)")
        text = self.c.printer(ranges)(arg.scalar)
        if ctype in ("float", "double"):
            return f"to_u64(({ctype})({text}))"
        e = simplify(arg.scalar)
        if isinstance(e, Name) and e.id in self.c.p.scalars and self.c.p.scalars[e.id].dtype == arg.param.dtype:
            return text
        return f"({ctype})({text})"

    # ---- deps ----
    def dep_items(self, d: ir.Dispatch, ranges: dict[str, Interval]) -> list[DepItem]:
        items: list[DepItem] = []
        seen: set[tuple[str, str]] = set()  # merged entries: the planner counts them the same way
        for dep in d.deps:
            key = ir.dep_dedup_key(self.c.p, dep)
            if key is not None and key in seen:
                continue
            if dep.kind is DepKind.CARRY:
                st = self.c.carry_store[dep.target]
                if st.size == 1:
                    assert key is not None
                    seen.add(key)
                    items.append(DepItem(f"{st.cname}[0]", False))
                    continue
                j = self.c.local_name("slot", {self.c.var(v) for v in ranges})
                span = dep.span
                items.append(DepItem(f"{st.cname}[{j}]", False, [(j, Num(0, span), Num(st.size, span))]))
                continue
            ts = self.c.p.tilesets[dep.target]
            st = self.c.storage[dep.target]
            if is_single(ts):
                ref = st.cname if st.kind is SlotKind.LOCAL else f"{st.cname}[0]"
                cond = self.single_condition(dep, ts, ranges)
                if cond == "0":
                    continue
                if key is not None:
                    seen.add(key)
                items.append(DepItem(ref, st.valid, cond=cond))
                continue
            items.append(self.array_item(dep, ts, st.cname, ranges))
        return items

    def single_condition(self, dep: ir.DepRef, ts: ir.TileSet, ranges: dict[str, Interval]) -> str | None:
        """C++ condition that a selection on a single-task tile set is non-empty (None: always)."""
        conds = []
        for sel in dep.sels or ():
            if sel.kind in (DimKind.ALL, DimKind.INDEX):
                continue
            assert sel.a is not None and sel.b is not None
            size = sel.b if sel.kind is DimKind.EXTENT else sub(sel.b, sel.a)
            size = simplify(size)
            if isinstance(size, Num):
                if size.value <= 0:
                    return "0"
                continue
            conds.append(f"{self.c.printer(ranges)(size)} > 0")
        return " && ".join(conds) if conds else None

    def array_item(self, dep: ir.DepRef, ts: ir.TileSet, cname: str, ranges: dict[str, Interval]) -> DepItem:
        sels = dep.sels or tuple(ir.DepSel(DimKind.ALL, None, None, dep.span) for _ in ts.axes)
        coords: list[Expr] = []
        loops: list[tuple[str, Expr, Expr]] = []
        taken = {self.c.var(v) for v in ranges}
        inner = dict(ranges)
        for sel, a in zip(sels, ts.axes, strict=True):
            if sel.kind is DimKind.INDEX:
                assert sel.a is not None
                coords.append(sel.a)
                continue
            lo: Expr
            hi: Expr
            if sel.kind is DimKind.ALL:
                lo, hi = Num(a.lo, dep.span), Num(a.hi, dep.span)
            elif sel.kind is DimKind.EXTENT:
                assert sel.a is not None and sel.b is not None
                lo, hi = sel.a, add(sel.a, sel.b)
            else:
                assert sel.a is not None and sel.b is not None
                lo, hi = sel.a, sel.b
            v = self.c.local_name(a.var, taken)
            taken.add(v)
            inner[v] = axis_range(a)
            loops.append((v, simplify(lo), simplify(hi)))
            coords.append(Name(v, dep.span))
        index = self.c.printer(inner, identity=[v for v, _, _ in loops])(tile_index(ts, coords))
        return DepItem(f"{cname}[{index}]", False, loops)

    def dep_capacity(self, d: ir.Dispatch, items: list[DepItem]) -> int:
        """Largest number of entries the appends can produce over every loop/task index value."""
        fixed = sum(1 for it in items if not it.loops)
        looped = [it for it in items if it.loops]
        if not looped:
            return fixed
        bounds = [[(compile_expr(lo), compile_expr(hi)) for _, lo, hi in it.loops] for it in looped]
        used = set().union(*(free_vars(e) for it in looped for _, lo, hi in it.loops for e in (lo, hi)))
        # the counts depend only on the axes the bounds use: enumerate those, not every index
        space = env_space(self.c.p, d)
        if any(a.size == 0 for a in space):
            return fixed   # no index value at all (as the full enumeration would find)
        axes = tuple(a for a in space if a.var in used)
        best = 0
        for combo in axis_values(axes):
            env = {a.var: v for a, v in zip(axes, combo, strict=True)}
            total = 0
            for loops in bounds:
                count = 1
                for flo, fhi in loops:
                    count *= max(fhi(env) - flo(env), 0)
                total += count
            best = max(best, total)
        return fixed + best

    def deps_block(self, d: ir.Dispatch, pr: str, ranges: dict[str, Interval]) -> None:
        items = self.dep_items(d, ranges)
        if not items:
            if d.kind is TaskKind.DUMMY:  # every dep selects nothing: the guarded submit below never runs
                self.c.w.line(f"uint32_t {pr}_deps_count = 0;")
            return
        cap = self.dep_capacity(d, items)
        arr, cnt = f"{pr}_deps", f"{pr}_deps_count"
        self.c.w.line(f"PTO2TaskId {arr}[{max(cap, 1)}];")
        self.c.w.line(f"uint32_t {cnt} = 0;")
        for it in items:
            append = f"{arr}[{cnt}++] = {it.ref};"
            guard = [] if it.valid else [f"{it.ref}.is_valid()"]
            if it.cond:
                guard.insert(0, it.cond)
            depth = 0
            for v, lo, hi in it.loops:
                pr_ = self.c.printer({**ranges, **{x: Interval(None, None) for x, _, _ in it.loops}},
                                   identity=[x for x, _, _ in it.loops])
                self.c.w.line(f"for (int64_t {v} = {pr_(lo)}; {v} < {pr_(hi)}; ++{v}) {{")
                self.c.w.level += 1
                depth += 1
            self.c.w.line(f"if ({' && '.join(guard)}) {append}" if guard else append)
            for _ in range(depth):
                self.c.w.level -= 1
                self.c.w.line("}")
        self.c.w.line(f"{pr}.set_dependencies({arr}, {cnt});")


def tile_index(ts: ir.TileSet, coords: list[Expr]) -> Expr:
    """Row-major slot of a tile in `ts`'s TaskId array: sum of (coord - lo) * stride."""
    out: Expr = Num(0, ts.span)
    stride = 1
    for a, c in reversed(list(zip(ts.axes, coords, strict=True))):
        out = add(mul(sub(c, Num(a.lo, ts.span)), Num(stride, ts.span)), out)
        stride *= a.size
    return simplify(out)


def u32(printer: CxxPrinter, e: Expr, what: str) -> str:
    """A uint32_t view bound: a literal as is, anything else cast after an interval check.

    simpler's view shapes/offsets are 32-bit here (TensorCreateInfo takes `uint32_t shapes[]`);
    a bound that may leave 0..2^32-1 is refused rather than silently wrapped.
    """
    e = simplify(e)
    if isinstance(e, Num):
        if not 0 <= e.value < 2**32:
            raise InternalError(f"{what} is {e.value}, which does not fit uint32_t (PG114 should have rejected it)")
        return str(e.value)
    iv = interval(e, printer.ranges)
    if iv.lo is None or iv.hi is None or iv.lo < 0 or iv.hi >= 2**32:
        lo, hi = _exact_range(e, printer.ranges)
        if lo < 0 or hi >= 2**32:
            raise InternalError(f"{what} takes values {lo}..{hi}, outside uint32_t (PG114 should have rejected it)")
    return f"(uint32_t)({printer(e)})"


def _exact_range(e: Expr, ranges: Mapping[str, Interval]) -> tuple[int, int]:
    """Min and max of `e` over every combination of its index values (bounded ranges only)."""
    names = sorted(free_vars(e))
    bounds: list[tuple[int, int]] = []
    for n in names:
        iv = ranges.get(n)
        if iv is None or iv.lo is None or iv.hi is None:
            raise InternalError(f"cannot bound '{show(e)}' (an unbounded value in a view bound)")
        bounds.append((iv.lo, iv.hi))
    f = compile_expr(e)
    values = [f(dict(zip(names, combo, strict=True)))
              for combo in itertools.product(*(range(lo, hi + 1) for lo, hi in bounds))]
    return (min(values), max(values)) if values else (0, 0)
