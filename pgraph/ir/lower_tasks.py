"""Lower task declarations: index spaces, waves, deps, kernel calls, regions and accesses."""


from __future__ import annotations

import math
from collections.abc import Iterable

import attrs

from pgraph.diagnostics import Note
from pgraph.ir import program as ir
from pgraph.ir.expr import EvalError, evaluate, free_vars, substitute
from pgraph.ir.lower_base import LowerState, _closest, _Env, _zero_env, expr_span
from pgraph.source import Span
from pgraph.syntax import ast

ACCESS_KIND = {"reads": "read", "writes": "write", "atomic_add": "atomic"}
ACCESS_VERB = {"read": "reads it", "write": "writes it", "atomic": "accumulates into it (atomic_add)"}
#: The accesses a parameter direction implies when a task states none; also the explicit
#: access kinds it admits.
DIRECTION_DEFAULT = {"in": ("read",), "out": ("write",), "inout": ("read", "write"), "atomic_add": ("atomic",)}
DIRECTION_ACCESSES = {direction: set(kinds) for direction, kinds in DIRECTION_DEFAULT.items()}
#: (wave name, task axes, block axes, wave flags, wave deps, span) of one dispatch of a task.
WaveSpec = tuple[str | None, list[ir.IAxis], list[ir.IAxis], tuple[str, ...], tuple[ast.Dep, ...], Span]


class TaskLowering(LowerState):
    """Lowers `at`/`spmd`/`parallel`/`dummy`/`tiles` declarations into Dispatches and TileSets."""

    # ---- tasks ----
    def axes(self, axes: Iterable[ast.Axis], env: _Env) -> list[ir.IAxis] | None:
        out = []
        seen: set[str] = set()
        for a in axes:
            lo = self.fold_int(a.lo, env, "an index bound")
            hi = self.fold_int(a.hi, env, "an index bound")
            if lo is None or hi is None:
                return None
            if hi < lo:
                self.err("PG006", f"index range {a.var} in {lo}..{hi} has a negative extent", a.span,
                         hint="ranges are half-open lo..hi with lo <= hi (an empty range is legal)")
                return None
            if a.var in seen:
                self.err("PG003", f"index variable '{a.var}' appears twice", a.span)
                return None
            seen.add(a.var)
            out.append(ir.IAxis(a.var, lo, hi, a.span))
        return out

    def lower_task(self, t: ast.Task, scope: int, env: _Env, phase: str | None, loops: tuple[int, ...]) -> None:
        if t.name in self.tilesets or t.name in self.carries:
            first = self.tilesets.get(t.name) or self.carries.get(t.name)
            self.dup(t.name, t.name_span, first.span if first else t.span, "task")
            return
        self.failed.add(t.name)  # until its tile set is registered below
        axes = self.axes(t.axes, env)
        if axes is None:
            return
        if t.kind == "at" and axes:
            self.err("PG020", f"`at {t.name}` is one task with one block; it takes no index space", t.axes[0].span,
                     hint="use `spmd` for blocks of one task, `parallel` for separate tasks, `tiles` for waves")
            return
        if t.kind in ("spmd", "parallel", "tiles") and not axes:
            self.err("PG020", f"`{t.kind} {t.name}` needs an index space, e.g. `[i in 0..N]`", t.name_span)
            return
        if t.kind == "dummy" and t.body:
            self.err("PG019", f"dummy '{t.name}' is dependency-only and takes no body", t.span,
                     hint="a dummy has no kernel; use `at` for a task that does work")
            return
        waves = [b for b in t.body if isinstance(b, ast.Wave)]
        if t.kind != "tiles" and waves:
            self.err("PG019", "waves belong to a `tiles` declaration", waves[0].span)
            return
        if t.kind == "tiles" and not waves:
            self.err("PG021", f"tiles '{t.name}' declares no wave", t.name_span,
                     hint="add `wave NAME ... : parallel|spmd ...` lines that cover every tile once")
            return
        self.tilesets[t.name] = ir.TileSet(t.name, tuple(axes), (), scope, t.kind, t.name_span)
        self.failed.discard(t.name)
        local = env.child()
        local.variables.update(a.var for a in axes)
        body = self.lower_body(t, local, scope) if t.kind != "dummy" else ([], None, [])
        if body is None:
            return
        accesses, kernel, args = body
        specs: list[WaveSpec]
        if t.kind == "tiles":
            specs = self.wave_specs(t, axes, waves, local)
        elif t.kind == "spmd":
            specs = [(None, [], axes, (), (), t.span)]
        else:
            specs = [(None, axes, [], (), (), t.span)]
        names = []
        for wave, task_axes, block_axes, wflags, wdeps, span in specs:
            name = f"{t.name}.{wave}" if wave else t.name
            flags = set(t.flags) | set(wflags)
            kind = t.kind if t.kind != "tiles" else ("spmd" if block_axes else "parallel")
            if t.kind == "tiles" and not task_axes and not block_axes:
                kind = "at"
            deps = self.lower_deps((*(t.deps or ()), *wdeps), local, task_axes, block_axes, loops, name)
            if deps is None:
                continue
            self.dispatches.append(ir.Dispatch(
                name=name, tileset=t.name, wave=wave, kind=kind, task_axes=tuple(task_axes),
                block_axes=tuple(block_axes), accesses=tuple(accesses), kernel=kernel, args=tuple(args),
                early="early" in flags, sync_start="sync_start" in flags, deps=deps, scope=scope, phase=phase,
                order=len(self.dispatches), loops=loops, span=span if wave else t.span,
                interleave=self.interleave[0] if self.interleave else None,
            ))
            names.append(name)
        self.tilesets[t.name] = attrs.evolve(self.tilesets[t.name], dispatches=tuple(names))

    def wave_specs(self, t: ast.Task, axes: list[ir.IAxis], waves: list[ast.Wave], env: _Env) -> list[WaveSpec]:
        out: list[WaveSpec] = []
        boxes: list[tuple[str, Span, list[ir.IAxis]]] = []
        by_var = {a.var: a for a in axes}
        seen: dict[str, Span] = {}
        for w in waves:
            if w.name in seen:
                self.dup(w.name, w.span, seen[w.name], "wave")
                continue
            seen[w.name] = w.span
            restricted = dict(by_var)
            sub = self.axes(w.axes, env)
            if sub is None:
                continue
            bad = False
            for a in sub:
                full = by_var.get(a.var)
                if full is None:
                    self.err("PG002", f"wave '{w.name}' restricts '{a.var}', which is not an index of '{t.name}'",
                             a.span)
                    bad = True
                elif a.size and not (full.lo <= a.lo and a.hi <= full.hi):
                    self.err("PG026", f"wave '{w.name}' selects {a.var} in {a.lo}..{a.hi}, outside "
                             f"{full.lo}..{full.hi}", a.span)
                    bad = True
                else:
                    restricted[a.var] = ir.IAxis(a.var, a.lo, a.hi, a.span)
            if bad:
                continue
            box = [restricted[a.var] for a in axes]
            spmd_vars = set(w.spmd_axes) if w.spmd_axes is not None else set(by_var) if w.kind == "spmd" else set()
            for v in spmd_vars - set(by_var):
                self.err("PG002", f"wave '{w.name}' names SPMD index '{v}', which is not an index of '{t.name}'",
                         w.span)
                bad = True
            if bad:
                continue
            task_axes = [a for a in box if a.var not in spmd_vars]
            block_axes = [a for a in box if a.var in spmd_vars]
            boxes.append((w.name, w.span, box))
            out.append((w.name, task_axes, block_axes, w.flags, w.deps or (), w.span))
        total = math.prod(a.size for a in axes)
        covered = sum(math.prod(a.size for a in box) for _, _, box in boxes)
        for i, (na, sa, ba) in enumerate(boxes):
            for nb, sb, bb in boxes[i + 1:]:
                if all(max(x.lo, y.lo) < min(x.hi, y.hi) for x, y in zip(ba, bb)):
                    self.err("PG021", f"waves '{na}' and '{nb}' of '{t.name}' both take some tiles", sb,
                             [Note(f"wave '{na}'", sa)], hint="make the wave ranges disjoint")
                    return out
        if covered != total and not self.bag.has_errors:
            self.err("PG021", f"the waves of '{t.name}' cover {covered} of its {total} tiles", t.name_span,
                     hint="every tile must belong to exactly one wave")
        return out

    def lower_deps(self, deps: Iterable[ast.Dep], env: _Env, task_axes: list[ir.IAxis],
                   block_axes: list[ir.IAxis], loops: tuple[int, ...], consumer: str) -> tuple[ir.DepRef, ...] | None:
        out = []
        allowed = {a.var for a in task_axes} | {self.loops[lp].axis.var for lp in loops}
        block_vars = {a.var for a in block_axes}
        ok = True
        for dep in deps:
            if dep.name in self.carries and self.carries[dep.name].kind == "task":
                if dep.sels:
                    self.err("PG020", f"carry '{dep.name}' is one TaskId; it takes no selection", dep.span)
                    ok = False
                    continue
                out.append(ir.DepRef(dep.name, "carry", None, dep.span))
                continue
            sels = []
            for sel in dep.sels or ():
                parts: list[ast.Expr | None] = []
                for e in (sel.a, sel.b):
                    if e is None:
                        parts.append(None)
                        continue
                    folded = self.fold(e, env)
                    if folded is None:
                        ok = False
                        parts.append(None)
                        continue
                    used = free_vars(folded)
                    if used & block_vars:
                        self.err("PG027", f"a dep of '{consumer}' uses SPMD block index "
                                 f"{', '.join(sorted(used & block_vars))}; one task waits for all its deps",
                                 expr_span(e), hint="deps may use the task indices and loop variables only")
                        ok = False
                    elif used - allowed:
                        self.err("PG002", f"'{sorted(used - allowed)[0]}' is not defined here", expr_span(e))
                        ok = False
                    parts.append(folded)
                sels.append(ir.DepSel(sel.kind, parts[0], parts[1], sel.span))
            out.append(ir.DepRef(dep.name, "tiles", tuple(sels) if dep.sels else None, dep.span))
        return tuple(out) if ok else None

    def lower_body(self, t: ast.Task, env: _Env, scope: int) -> tuple[list[ir.Access], str | None, list[ir.Arg]] | None:
        explicit: list[ir.Access] = []
        call: ast.Call | None = None
        ok = True
        for item in t.body:
            if isinstance(item, ast.Let):
                folded = None if self.let_shadows(item, env) else self.fold(item.expr, env)
                if folded is None:
                    ok = False
                else:
                    env.values[item.name] = folded
            elif isinstance(item, ast.Access):
                for r in item.regions:
                    reg = self.region(r, env)
                    ok = ok and reg is not None
                    if reg is not None:
                        explicit.append(ir.Access(ACCESS_KIND[item.kind], reg, (), r.span))
            elif isinstance(item, ast.ItemLoop):
                got = self.item_loop(item, env)
                ok = ok and got is not None
                explicit.extend(got or [])
            elif isinstance(item, ast.Call):
                if call is not None:
                    self.err("PG003", "a task calls one kernel", item.span, [Note("first call", call.span)])
                    ok = False
                call = item
        if not ok:
            return None
        if call is None:
            self.err("PG028", f"task '{t.name}' has no `call`", t.name_span,
                     hint="add `call KERNEL(args)`; a task that only orders others is a `dummy`")
            return None
        kernel = self.kernels.get(call.kernel)
        if kernel is None:
            self.err("PG002", f"kernel '{call.kernel}' is not declared", call.span,
                     hint="declare it with `kernel NAME aic|aiv|mix (params)`")
            return None
        args = self.bind_args(call, kernel, env)
        if args is None:
            return None
        accesses = self.accesses_for(args, explicit, kernel)
        if accesses is None:
            return None
        return accesses, kernel.name, args

    def item_loop(self, item: ast.ItemLoop, env: _Env) -> list[ir.Access] | None:
        ax = self.axes([item.axis], env)
        if ax is None:
            return None
        inner = env.child()
        inner.variables.add(item.axis.var)
        out: list[ir.Access] = []
        for sub in item.items:
            if isinstance(sub, ast.Let):
                folded = None if self.let_shadows(sub, inner) else self.fold(sub.expr, inner)
                if folded is None:
                    return None
                inner.values[sub.name] = folded
            elif isinstance(sub, ast.Access):
                for r in sub.regions:
                    reg = self.region(r, inner)
                    if reg is None:
                        return None
                    out.append(ir.Access(ACCESS_KIND[sub.kind], reg, (ir.ItemAxis(ax[0].var, ax[0].lo, ax[0].hi),),
                                         r.span))
            else:
                self.err("PG019", "only `let` and access clauses may stand in an item loop", sub.span)
                return None
        return out

    def region(self, r: ast.Region, env: _Env) -> ir.RegionRef | None:
        t = self.tensor_type(r.tensor)
        if t is None and r.tensor in self.failed:
            return None
        if t is None:
            what = "a task" if r.tensor in self.tilesets else "not declared"
            self.err("PG019" if r.tensor in self.tilesets else "PG002",
                     f"'{r.tensor}' is {what}; a region needs a tensor", r.span)
            return None
        for idx in r.indirect or ():
            if idx not in self.tensors:
                self.err("PG002", f"indirect index tensor '{idx}' is not declared", r.span)
                return None
        if r.slices is None:
            return ir.RegionRef(r.tensor, None, r.indirect if r.indirect is not None else None, r.span)
        if len(r.slices) != len(t.shape):
            self.err("PG020", f"'{r.tensor}' has {len(t.shape)} dimension(s) but the region gives {len(r.slices)}",
                     r.span, [Note(f"'{t.name}' declared here", t.span)])
            return None
        dims = []
        for s in r.slices:
            a = self.fold(s.a, env) if s.a is not None else None
            b = self.fold(s.b, env) if s.b is not None else None
            if (s.a is not None and a is None) or (s.b is not None and b is None):
                return None
            dims.append(ir.Dim(s.kind, a, b))
        return ir.RegionRef(r.tensor, tuple(dims), r.indirect, r.span)

    def bind_args(self, call: ast.Call, kernel: ir.Kernel, env: _Env) -> list[ir.Arg] | None:
        if len(call.args) != len(kernel.params):
            self.err("PG009", f"kernel '{kernel.name}' takes {len(kernel.params)} argument(s), "
                     f"this call passes {len(call.args)}", call.span,
                     [Note(f"'{kernel.name}' declared here", kernel.span)])
            return None
        args = []
        ok = True
        for arg, param in zip(call.args, kernel.params):
            got = self.bind_arg(arg, param, kernel, env)
            if got is None:
                ok = False
            else:
                args.append(got)
        return args if ok else None

    def bind_arg(self, arg: ast.Expr | ast.Region, param: ir.Param, kernel: ir.Kernel, env: _Env) -> ir.Arg | None:
        span = arg.span
        note = [Note(f"parameter '{param.name}' declared here", param.span)]
        if isinstance(arg, ast.Name) and arg.id in self.failed:
            return None
        is_tensor_name = isinstance(arg, ast.Name) and self.tensor_type(arg.id) is not None
        if not param.is_tensor:
            if isinstance(arg, ast.Region) or is_tensor_name:
                self.err("PG019", f"parameter '{param.name}' of '{kernel.name}' is a scalar, got a tensor", span, note)
                return None
            scalar_env = env.child()
            scalar_env.variables.update(self.scalars)
            folded = self.fold(arg, scalar_env)
            return None if folded is None else ir.Arg(param, None, folded, span)
        if isinstance(arg, ast.Name) and is_tensor_name:
            arg = ast.Region(arg.id, None, None, arg.span)
        if isinstance(arg, ast.Name) and not self.known_value(arg.id, env) and arg.id not in self.tilesets:
            guess = _closest(arg.id, [*self.tensors, *self.carry_types])
            self.err("PG002", f"'{arg.id}' is not declared (parameter '{param.name}' of '{kernel.name}' takes a "
                     "tensor)", span, note, hint=f"did you mean '{guess}'?" if guess else
                     "declare the tensor (`tensor NAME : dtype[shape]`) before the task")
            return None
        if not isinstance(arg, ast.Region):
            self.err("PG019", f"parameter '{param.name}' of '{kernel.name}' is a tensor, got an expression", span, note)
            return None
        region = self.region(arg, env)
        if region is None:
            return None
        t = self.tensor_type(region.tensor)
        assert t is not None
        if t.dtype != param.dtype:
            self.err("PG011", f"'{region.tensor}' is {t.dtype} but parameter '{param.name}' of '{kernel.name}' "
                     f"is {param.dtype}", span, note, hint="pass a tensor of the declared dtype, or fix the kernel")
            return None
        if param.shape is not None:
            shape = self.region_shape(region, t, env)
            if shape is not None and any(n < 0 for n in shape):
                self.err("PG006", f"the region of '{region.tensor}' has shape {list(shape)}: a slice has a negative "
                         "extent", span, hint="a slice `a:b` needs a <= b; `a +: n` needs n >= 0")
                return None
            if shape is not None and tuple(shape) != tuple(param.shape):
                self.err("PG012", f"the region of '{region.tensor}' has shape {list(shape)} but parameter "
                         f"'{param.name}' of '{kernel.name}' expects {list(param.shape)}", span, note,
                         hint="single indices drop their dimension; `a +: n` keeps n")
                return None
        return ir.Arg(param, region, None, span)

    def known_value(self, name: str, env: _Env) -> bool:
        """True when `name` is a constant, a let, an index/loop variable or a scalar argument."""
        return name in self.const_decls or name in env.values or name in env.variables or name in self.scalars

    def region_shape(self, region: ir.RegionRef, t: ir.Tensor, env: _Env) -> list[int] | None:
        """Shape of a region, evaluated with every free index at its lower bound."""
        if region.dims is None:
            return list(t.shape)
        shape = []
        for dim, full in zip(region.dims, t.shape):
            if dim.kind == "all":
                shape.append(full)
            elif dim.kind == "index":
                continue
            else:
                assert dim.a is not None and dim.b is not None
                extent = dim.b if dim.kind == "extent" else ast.BinOp("-", dim.b, dim.a, region.span)
                try:
                    value = evaluate(substitute(extent, {}), _zero_env(extent))
                except EvalError:
                    return None
                shape.append(value)
        return shape

    def accesses_for(self, args: list[ir.Arg], explicit: list[ir.Access], kernel: ir.Kernel) -> list[ir.Access] | None:
        by_tensor: dict[str, ir.Arg] = {}
        for arg in args:
            if arg.region is not None:
                by_tensor.setdefault(self.root_of(arg.region.tensor), arg)
        explicit_roots = {self.root_of(a.region.tensor) for a in explicit}
        out: list[ir.Access] = []
        ok = True
        for acc in explicit:
            bound = by_tensor.get(self.root_of(acc.region.tensor))
            if bound is None:
                self.err("PG010", f"the task accesses '{acc.region.tensor}' but does not pass it to "
                         f"'{kernel.name}'", acc.span, hint="a kernel touches only the tensors it is passed")
                ok = False
            elif acc.kind not in DIRECTION_ACCESSES[bound.param.direction]:
                self.err("PG010", f"'{acc.region.tensor}' is passed as {bound.param.direction} "
                         f"('{bound.param.name}') but the task {ACCESS_VERB[acc.kind]}", acc.span,
                         [Note(f"parameter '{bound.param.name}' declared here", bound.param.span)],
                         hint="the direction decides the runtime's edges: In reads, Out writes, InOut both, "
                              "atomic_add accumulates")
                ok = False
            else:
                out.append(acc)
        for arg in args:
            if arg.region is None or self.root_of(arg.region.tensor) in explicit_roots:
                continue
            for kind in DIRECTION_DEFAULT[arg.param.direction]:
                out.append(ir.Access(kind, arg.region, (), arg.span))
        return out if ok else None
