"""`pgraph deps`, `pgraph why`, `pgraph stats`: questions about the instance graph of a spec.

They answer from the expansion (no planner pass runs for `deps` and `why`), so that they
take about as long as the parse. Task names are the report's spellings:
`out_proj.direct`, `gate_proj[n=3,k=1]@L=2`, `gate_proj[3,1]@2`, `alloc@scope3@L=0`; a
part left out selects every task index, and the first iteration of every loop. A wave of a
`tiles` set can be named by the set (`out_proj[t=3]` is whichever wave holds tile 3).

Windowed loops (identical iterations, expanded as `lo` and `lo + 1`) are re-expanded for a
named iteration: `L=5` enumerates `{lo} | {4, 5, 6}`, whose edges at L=5 are the real ones
(the iterations are identical: an edge only joins one iteration to itself or to the next).

Errors: a name that selects no task, or a malformed name, is a usage error (exit 2) with a
"did you mean" from `pgraph.suggest`.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import attrs

from pgraph import records
from pgraph.commands.diagnostic_options import diagnostic_options, parse_allow
from pgraph.commands.numbers import count
from pgraph.diagnostics import DiagnosticBag
from pgraph.ir import program as ir
from pgraph.ir.instances import ArgBox, BlockAccess, Edge, Instance, InstanceGraph, box_intersection, boxes_overlap
from pgraph.ir.queries import Window
from pgraph.kinds import Direction, Provenance, TaskKind
from pgraph.pipeline import Options, UsageError, expand_window, parse_define, plan_program, run_until
from pgraph.suggest import closest

__all__ = ["Query", "TaskName", "compile_spec", "parse_task_name", "query_for", "render_deps", "render_why"]

_NAME = re.compile(r"^(?P<base>alloc@scope\d+|[^\[\]@\s]+)(?:\[(?P<index>[^\]]*)\])?(?:@(?P<iters>[^\[\]@\s]+))?$")

#: How the report calls each provenance (simpler's deps.json: explicit / creator / tensormap).
PROVENANCE_WORDS = {Provenance.EXPLICIT: "explicit dep", Provenance.CARRIED: "carried dep (explicit)",
                    Provenance.INFERRED: "tensormap", Provenance.CREATOR: "creator"}


@records.value
@attrs.frozen(repr=False, eq=False)
class TaskName:
    """A parsed task spelling: the dispatch (or tile set) name, the index and the loop iterations.

    `index` and `iters` are tuples of (variable or None, value): `[n=3,k=1]` gives
    (("n", 3), ("k", 1)), `[3,1]` gives ((None, 3), (None, 1)); None when the part is absent.
    """

    text: str
    base: str
    index: tuple[tuple[str | None, int], ...] | None
    iters: tuple[tuple[str | None, int], ...] | None


def _pairs(text: str, what: str, whole: str) -> tuple[tuple[str | None, int], ...]:
    out: list[tuple[str | None, int]] = []
    for part in text.split(","):
        var, eq, value = part.strip().rpartition("=")
        try:
            out.append((var.strip() if eq else None, int(value)))
        except ValueError:
            raise UsageError(f"task name '{whole}': {what} '{part.strip()}' is not VAR=INTEGER or INTEGER") from None
    return tuple(out)


def parse_task_name(text: str) -> TaskName:
    """Parse a task spelling (UsageError when it does not have the form NAME[INDEX]@ITERS)."""
    m = _NAME.match(text.strip())
    if m is None:
        raise UsageError(f"task name '{text}' is not of the form NAME, NAME[n=3,k=1] or NAME[n=3]@L=2")
    index = _pairs(m["index"], "index", text) if m["index"] else None
    iters = _pairs(m["iters"], "iteration", text) if m["iters"] else None
    return TaskName(text.strip(), m["base"], index, iters)


def _bind(pairs: Sequence[tuple[str | None, int]], variables: Sequence[str], what: str, name: TaskName
          ) -> dict[str, int]:
    """Match `pairs` to `variables` (by name, or by position when unnamed); UsageError otherwise."""
    if all(v is None for v, _ in pairs):
        if len(pairs) != len(variables):
            raise UsageError(f"task '{name.text}': {len(pairs)} {what} value(s) given, "
                             f"{name.base} has {len(variables)} ({', '.join(variables) or 'none'})")
        return dict(zip(variables, (v for _, v in pairs)))
    out: dict[str, int] = {}
    for var, value in pairs:
        if var is None:
            raise UsageError(f"task '{name.text}': name every {what} value or none ({', '.join(variables)})")
        if var not in variables:
            hint = closest(var, variables)
            extra = f"; did you mean '{hint}'?" if hint else ""
            raise UsageError(f"task '{name.text}': {name.base} has no {what} variable '{var}' "
                             f"({', '.join(variables) or 'none'}){extra}")
        out[var] = value
    return out


class Query:
    """A program, the instance graph expanded for the names asked about, and name lookup."""

    def __init__(self, program: ir.Program, graph: InstanceGraph, full: bool) -> None:
        self.program = program
        self.graph = graph
        self.full = full

    # ---- names ----
    def dispatches_named(self, base: str) -> list[ir.Dispatch]:
        """The dispatches a base name selects: the dispatch itself, or every wave of a tile set."""
        exact = [d for d in self.program.dispatches if d.name == base]
        return exact or [d for d in self.program.dispatches if d.tileset == base]

    def resolve(self, name: TaskName) -> list[Instance]:
        """The instances a name selects, in submission order (UsageError when none).

        A tile set's name with an index names a tile (`gate_proj[n=3,k=1]`): the task of the
        wave that computes it (gate_proj.critical[k=1], whose block n=3 it is). A dispatch's
        name with an index names its task index (`gate_proj.critical[k=1]`)."""
        inst_names = {i.dispatch for i in self.graph.instances}
        ds = self.dispatches_named(name.base)
        if not ds and name.base not in inst_names:
            names = sorted(inst_names | {d.tileset for d in self.program.dispatches})
            hint = closest(name.base, names)
            extra = f"; did you mean '{hint}'?" if hint else ""
            raise UsageError(f"no task '{name.base}' in this spec{extra} "
                             "(task names are spelt as in the `pgraph plan` report)")
        wanted = self._task_indices(name, ds)
        loops = {lp.id: lp for lp in self.program.loops}
        out = []
        for inst in self.graph.instances:
            if inst.dispatch not in wanted:
                continue
            if wanted[inst.dispatch] is not None and inst.index not in wanted[inst.dispatch]:  # type: ignore[operator]
                continue
            want_it = (_bind(name.iters, [loops[lid].axis.var for lid in inst.loops], "loop", name)
                       if name.iters is not None else {})
            if all(v == want_it.get(loops[lid].axis.var, loops[lid].axis.lo) for lid, v in zip(inst.loops, inst.iters)):
                out.append(inst)
        if not out:
            raise UsageError(f"no task '{name.text}' in this spec: {self.describe_space(ds or name.base)}")
        return out

    def _task_indices(self, name: TaskName, ds: list[ir.Dispatch]) -> dict[str, set[tuple[int, ...]] | None]:
        """Dispatch name -> the task indices the name's index selects (None: every index)."""
        if not ds:
            return {name.base: None}
        if name.index is None:
            return {d.name: None for d in ds}
        if ds[0].name == name.base and name.base not in self.program.tilesets:
            axes = ds[0].task_axes
            want = _bind(name.index, [a.var for a in axes], "index", name)
            return {ds[0].name: {tuple(want[a.var] for a in axes)}}
        ts = self.program.tilesets[ds[0].tileset]
        tile = _bind(name.index, [a.var for a in ts.axes], "tile", name)
        out: dict[str, set[tuple[int, ...]] | None] = {}
        for d in ds:
            box = {a.var: a for a in (*d.task_axes, *d.block_axes)}
            if all(v in box and box[v].lo <= x < box[v].hi for v, x in tile.items()):
                out[d.name] = {tuple(tile[a.var] for a in d.task_axes)}
        return out

    def describe_space(self, ds: list[ir.Dispatch] | str) -> str:
        """What the tasks of a name are indexed by (for an error message)."""
        if isinstance(ds, str):
            return f"{ds} is an allocation task"
        d = ds[0]
        parts = [f"{a.var} in {a.lo}..{a.hi}" for a in d.task_axes]
        loops = {lp.id: lp for lp in self.program.loops}
        parts += [f"@{loops[lid].axis.var} in {loops[lid].axis.lo}..{loops[lid].axis.hi}" for lid in d.loops]
        waves = f" (waves {', '.join(x.name for x in ds)})" if len(ds) > 1 else ""
        return f"{d.tileset if len(ds) > 1 else d.name}{waves} has " + (", ".join(parts) or "one task")

    def one(self, name: TaskName) -> Instance:
        """The single instance a name selects (UsageError when it selects several)."""
        found = self.resolve(name)
        if len(found) > 1:
            raise UsageError(f"'{name.text}' names {len(found)} tasks ({found[0].label} ... {found[-1].label}); "
                             "give the index, e.g. " + found[0].label)
        return found[0]

    # ---- edges ----
    def standing(self, inst: Instance, seen_from: Instance | None = None) -> list[str]:
        """'L=1..39' for each windowed loop iteration of `inst` standing for more than itself
        (loops of `seen_from` left out: from inside a loop, its neighbours are real iterations)."""
        if self.full:
            return []
        out = []
        loops = {lp.id: lp for lp in self.program.loops}
        for lid, v in zip(inst.loops, inst.iters):
            if (seen_from is not None and lid in seen_from.loops) or self.graph.loop_weight(lid, v) <= 1:
                continue
            out.append(f"{loops[lid].axis.var}={v}..{v + self.graph.loop_weight(lid, v) - 1}")
        return out

    def stands_for(self, inst: Instance, seen_from: Instance) -> str:
        """' (stands for L=1..39)' for a windowed instance seen from outside its loop, else ''."""
        out = self.standing(inst, seen_from)
        return f" (stands for {', '.join(out)})" if out else ""

    def regions(self, a: int, b: int, writer_needed: bool = True) -> list[str]:
        """The tensor regions instances `a` and `b` both touch, at least one writing (unless
        `writer_needed` is False): the declared accesses of their blocks (`declared_regions`);
        when the accesses share nothing, the kernel arguments' boxes (`argument_regions`, what
        the TensorMap compares), marked 'argument'."""
        return self.declared_regions(a, b, writer_needed) or self.argument_regions(a, b, writer_needed)

    def declared_regions(self, a: int, b: int, writer_needed: bool = True) -> list[str]:
        """The regions the declared accesses of `a`'s and `b`'s blocks (`reads`, `writes`,
        `atomic_add`) both touch, at least one writing unless `writer_needed` is False: the common
        part of each pair merged into one bounding box per tensor and kind, as
        'attn_proj[0:16, 2048:5120] (atomic_add -> read)'."""
        tensors = self.program.tensors
        found: dict[tuple[str, str, str, str], list[tuple[int, int]] | str] = {}
        theirs = self._accesses(b)
        for kx, x in self._accesses(a):
            for ky, y in theirs:
                if x.buffer != y.buffer or (writer_needed and kx == ky == "read"):
                    continue
                if not boxes_overlap(x.box, x.tensor, y.box, y.tensor, tensors):
                    continue
                key = (x.tensor, y.tensor, kx, ky)
                if x.tensor == y.tensor or tensors[x.tensor].shape == tensors[y.tensor].shape:
                    common = box_intersection(x.box, y.box)
                    have = found.get(key)
                    found[key] = list(common) if not isinstance(have, list) else [
                        (min(p[0], c[0]), max(p[1], c[1])) for p, c in zip(have, common)]
                else:
                    found[key] = f"{_box_text(x.tensor, x.box)} ~ {_box_text(y.tensor, y.box)}"
        return [f"{v if isinstance(v, str) else _box_text(k[0], v)} ({k[2]} -> {k[3]})" for k, v in found.items()]

    def argument_regions(self, a: int, b: int, writer_needed: bool = True) -> list[str]:
        """The boxes of `a`'s and `b`'s kernel arguments that overlap (what the runtime's TensorMap
        compares), at least one not `in` unless `writer_needed` is False, as 'argument x[0:8, 0:64]
        (inout x -> in x)'."""
        tensors = self.program.tensors
        out: list[str] = []
        for ax in self.graph.args.get(a, []):
            for ay in self.graph.args.get(b, []):
                if ax.buffer != ay.buffer or (writer_needed and _reads(ax) and _reads(ay)):
                    continue
                if not boxes_overlap(ax.box, ax.tensor, ay.box, ay.tensor, tensors):
                    continue
                if ax.tensor == ay.tensor or tensors[ax.tensor].shape == tensors[ay.tensor].shape:
                    where = _box_text(ax.tensor, box_intersection(ax.box, ay.box))
                else:
                    where = f"{_box_text(ax.tensor, ax.box)} ~ {_box_text(ay.tensor, ay.box)}"
                text = (f"argument {where} ({ax.param.direction.value} {ax.param.name} -> "
                        f"{ay.param.direction.value} {ay.param.name})")
                if text not in out:
                    out.append(text)
        return out

    def _accesses(self, node: int) -> list[tuple[str, BlockAccess]]:
        """(kind, access) of every declared access of every block of instance `node`."""
        return [(kind.value, acc) for blk in self.graph.blocks.get(node, []) for kind, accs in blk.items()
                for acc in accs]

    def edge_text(self, u: int, v: int, data: Edge) -> str:
        """Provenance, declaring line and regions of the edge u -> v."""
        provs = sorted(data.prov, key=lambda p: list(PROVENANCE_WORDS).index(p))
        words = ", ".join(PROVENANCE_WORDS[p] for p in provs)
        span = data.span
        if span is not None and data.prov & {Provenance.EXPLICIT, Provenance.CARRIED}:
            words += f" at {span.location()}"
        regs = self.regions(u, v)
        if Provenance.CREATOR in data.prov and u in self.graph.alloc_info:
            used = {acc.buffer[0] for _, acc in self._accesses(v)} | {a.buffer[0] for a in self.graph.args.get(v, [])}
            made = [t.name for t in self.graph.alloc_info[u][2] if t.name in used]
            regs = regs or [f"allocates {', '.join(made) or 'its buffers'}"]
        return words + ("; " + "; ".join(regs) if regs else "; no shared region (order only)")


def _reads(a: ArgBox) -> bool:
    return a.param.direction is Direction.IN


def _box_text(tensor: str, box: Iterable[tuple[int, int]]) -> str:
    return tensor + "[" + ", ".join(f"{lo}:{hi}" for lo, hi in box) + "]"


# ---- loading -------------------------------------------------------------------------------


def query_window(program: ir.Program, window: Window, names: Sequence[TaskName]) -> Window:
    """`window` with the iterations the names ask for.

    For a windowed loop `lo..hi` and the values a..b the names give its variable (a name that
    does not give it stands for `lo`): `{lo} | [a - 1, b + 1]`, clipped to the loop; the last
    enumerated iteration stands for the rest of the loop. Every path between two of the
    named tasks stays inside a..b (a path only goes forward in submission order), and each
    named task meets its real neighbours (an edge only joins an iteration to itself or to the
    next one: the loop's iterations are identical). UsageError for a value outside its loop.
    """
    its = dict(window.iterations)
    for lp in program.loops:
        ax = lp.axis
        given = [v for n in names for var, v in n.iters or () if var == ax.var]
        bad = sorted(v for v in given if not ax.lo <= v < ax.hi)
        if bad:
            raise UsageError(f"{ax.var}={bad[0]} is outside the loop `{ax.var} in {ax.lo}..{ax.hi}`")
        if not any(w > 1 for _, w in its.get(lp.id, [])) or not given or max(given) <= ax.lo:
            continue
        low = min(given) if all(any(var == ax.var for var, _ in n.iters or ()) for n in names) else ax.lo
        keep = sorted({ax.lo, ax.lo + 1} | set(range(max(ax.lo, low - 1), min(ax.hi, max(given) + 2))))
        its[lp.id] = [(v, 1) for v in keep[:-1]] + [(keep[-1], ax.hi - keep[-1])]
    return Window(its)


def compile_spec(spec: str, opts: Options) -> tuple[ir.Program | None, DiagnosticBag]:
    """Parse, lower and check `spec` (no expansion); (None, bag) on errors."""
    bag = DiagnosticBag()
    stopped = run_until(spec, opts, bag, "ir")
    if stopped.program is None or bag.has_errors:
        return None, bag
    return stopped.program, bag


def query_for(program: ir.Program, opts: Options, names: Sequence[TaskName]) -> Query:
    """The Query whose expansion holds the iterations `names` ask for (see `query_window`)."""
    from pgraph.expand.window import make_window

    window = query_window(program, make_window(program, opts.full), names)
    return Query(program, expand_window(program, window, opts), opts.full)


class Loader:
    """Queries of one spec and options: compiled at most once per process, expansions cached
    across processes (pgraph.commands.query_cache) keyed by the window the names ask for."""

    def __init__(self, spec: str, opts: Options) -> None:
        self.spec, self.opts = spec, opts
        self.bag = DiagnosticBag()
        self._program: ir.Program | None = None
        self._files: list[Path] = []
        self._compiled = False

    def program(self) -> ir.Program | None:
        """The compiled Program (None: errors, in `self.bag`)."""
        if not self._compiled:
            self._compiled = True
            stopped = run_until(self.spec, self.opts, self.bag, "ir")
            if stopped.program is not None and not self.bag.has_errors and stopped.loaded is not None:
                self._program = stopped.program
                loaded = stopped.loaded
                files = {loaded.root.path} | {it.span.file.path for it in loaded.items}  # type: ignore[attr-defined]
                if self.opts.config is not None:
                    from pgraph.frontend.overrides import resolve_config

                    files.add(resolve_config(Path(self.spec), self.opts.config))
                self._files = [f for f in files if f is not None]
        return self._program

    def query(self, names: Sequence[TaskName]) -> Query | None:
        """The Query for `names` (None: the spec has errors, in `self.bag`)."""
        from pgraph.commands.query_cache import cached

        def build() -> tuple[Query, list[Path]] | None:
            program = self.program()
            return None if program is None else (query_for(program, self.opts, names), self._files)

        o = self.opts
        key = ("query", 1, os.getcwd(), self.spec, o.defines, o.config, o.layers, o.full, o.verify,
               tuple(n.iters for n in names), tuple(n.iters is not None for n in names))
        return cached(key, build)  # type: ignore[no-any-return]


# ---- deps ----------------------------------------------------------------------------------


def _head(q: Query, inst: Instance) -> str:
    d = q.program.dispatch(inst.dispatch) if inst.kind is not TaskKind.ALLOC else None
    where = f", declared at {d.span.location()}" if d is not None else ""
    blocks = f", {inst.blocks} block(s)" if inst.kind is TaskKind.SPMD else ""
    return f"{inst.label}: {inst.kind.value}{blocks}, scope #{inst.scope}{where}"


def render_deps(q: Query, insts: Sequence[Instance]) -> str:
    """Producers and consumers of each instance with the provenance and regions of each edge."""
    g = q.graph
    out = []
    for inst in insts:
        out.append(_head(q, inst))
        for title, adj, forward in (("producers", g.pred[inst.id], False), ("consumers", g.succ[inst.id], True)):
            out.append(f"  {title} ({len(adj)}):")
            rows = [(g.instances[o].label + q.stands_for(g.instances[o], inst), o, d) for o, d in sorted(adj.items())]
            width = max((len(label) for label, _, _ in rows), default=0)
            for label, other, data in rows:
                u, v = (inst.id, other) if forward else (other, inst.id)
                out.append(f"    {label:<{width}}  {q.edge_text(u, v, data)}")
    return "\n".join(out) + "\n"


# ---- why -----------------------------------------------------------------------------------


def shortest_path(g: InstanceGraph, a: int, b: int) -> list[int] | None:
    """The fewest-edge path a -> b (breadth first, neighbours in id order), or None."""
    if a == b:
        return [a]
    parent = {a: a}
    todo = deque([a])
    while todo:
        u = todo.popleft()
        for v in sorted(g.succ[u]):
            if v in parent or v > b:  # ids are submission order: nothing after b leads to b
                continue
            parent[v] = u
            if v == b:
                path = [b]
                while path[-1] != a:
                    path.append(parent[path[-1]])
                return path[::-1]
            todo.append(v)
    return None


def render_why(q: Query, a: Instance, b: Instance) -> str:
    """Why `b` waits for `a` (or `a` for `b`): the shortest ordering path with each edge's
    provenance and regions; else 'unordered' and the regions the two share."""
    g = q.graph
    if a.id == b.id:
        return f"{a.label} and {b.label} are the same task\n"
    for x, y in ((a, b), (b, a)):
        path = shortest_path(g, x.id, y.id)
        if path is not None:
            lines = [f"{y.label} waits for {x.label}: ordered by a path of {len(path) - 1} edge(s)",
                     f"  {g.instances[path[0]].label}"]
            for u, v in zip(path, path[1:]):
                lines.append(f"  -> {g.instances[v].label}   [{q.edge_text(u, v, g.succ[u][v])}]")
            stand = sorted({r for n in path for r in q.standing(g.instances[n])})
            if stand:
                its = ", ".join(f"{r.split('..')[0]} stands for {r}" for r in stand)
                lines.append(f"  note: identical iterations are expanded once ({its}): the real path passes every "
                             "iteration in between (`--full`, or naming the iterations, spells it out)")
            return "\n".join(lines) + "\n"
    lines = [f"{a.label} and {b.label} are unordered: no path joins them, either may run first"]
    lines.extend(_unordered_lines(q, a.id, b.id))
    return "\n".join(lines) + "\n"


def _unordered_lines(q: Query, a: int, b: int) -> list[str]:
    """What two unordered instances share. The race checks (PG100) read the blocks' declared
    accesses; the runtime's TensorMap compares the kernel arguments' boxes, which may be wider.
    The verdict follows the declared accesses, and an argument overlap with a writer behind
    read-only accesses is named as such, so the lines never contradict each other."""
    shared = q.declared_regions(a, b, writer_needed=False)
    if not shared:
        shared = q.argument_regions(a, b, writer_needed=False)
        if not shared:
            return ["  they share no tensor region"]
        lines = ["  regions both touch (kernel arguments; their blocks' accesses share nothing):"]
        lines.extend(f"    {r}" for r in shared)
        if q.argument_regions(a, b):
            lines.append("  one of them writes: a race unless the kernels make it safe (`pgraph check`: PG100)")
        return lines
    lines = ["  regions both touch:", *(f"    {r}" for r in shared)]
    if q.declared_regions(a, b):
        lines.append("  one of them writes: a race unless the kernels make it safe (`pgraph check`: PG100)")
        return lines
    wider = q.argument_regions(a, b)
    if wider:
        lines.append("  both only read every shared region, so no race; their kernel arguments overlap with a "
                     "writer (" + "; ".join(wider) + "): the runtime's TensorMap compares arguments, so an auto "
                     "scope orders the two")
    return lines


# ---- the subcommands -----------------------------------------------------------------------


def add_spec_arguments(p: argparse.ArgumentParser) -> None:
    """The spec and the constant options every query takes (as `pgraph plan`'s)."""
    p.add_argument("spec", help="the .pgl file")
    p.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME=VALUE",
                   help="override a constant before folding (repeatable)")
    p.add_argument("--config", metavar="NAME|FILE.pgl", help="constant overrides (see `plan --config`)")
    p.add_argument("--layers", type=count(1), metavar="N", help="same as -D NUM_LAYERS=N")
    p.add_argument("--full", action="store_true", help="expand every loop iteration (slower; for checking)")
    diagnostic_options(p)


def options(args: argparse.Namespace) -> Options:
    """The compile options of a query's arguments (a what-if of the spec's budgets: `stats`
    reports an overrun as a PG121 warning; `deps` and `why` do not plan, so check none)."""
    return Options(defines=tuple(parse_define(d) for d in args.defines), config=args.config, layers=args.layers,
                   full=args.full, allow=parse_allow(args.allow), what_if=f"`pgraph {args.command}` is a what-if",
                   compat=tuple(getattr(args, "compat", ())))


Emit = Callable[[DiagnosticBag], None]


def run_deps(args: argparse.Namespace, emit: Emit) -> int:
    """`pgraph deps FILE TASK...`: exit 0, 1 when the spec has errors, 2 for an unknown task."""
    names = [parse_task_name(t) for t in args.task]
    loader = Loader(args.spec, options(args))
    texts = []
    for n in names:  # each name in its own expansion: the iterations it asks for, the window's weights
        q = loader.query([n])
        if q is None:
            emit(loader.bag)
            return 1
        texts.append(render_deps(q, q.resolve(n)))
    sys.stdout.write("\n".join(texts))
    return 0


def run_why(args: argparse.Namespace, emit: Emit) -> int:
    """`pgraph why FILE A B`: exit 0 (ordered or not), 1 when the spec has errors, 2 for an unknown task."""
    names = [parse_task_name(args.a), parse_task_name(args.b)]
    loader = Loader(args.spec, options(args))
    q = loader.query(names)
    if q is None:
        emit(loader.bag)
        return 1
    sys.stdout.write(render_why(q, q.one(names[0]), q.one(names[1])))
    return 0


def run_stats(args: argparse.Namespace, emit: Emit) -> int:
    """`pgraph stats FILE`: the spec's diagnostics (stderr: a budget overrun is a PG121 warning),
    then the figures of any spec that plans; exit 1 when it has errors (the figures are still
    printed when the planner ran to its end, as for a race)."""
    from pgraph.commands.stats import render_stats

    plan, bag = plan_program(args.spec, options(args))
    emit(bag)
    if plan is None:
        return 1
    sys.stdout.write(render_stats(plan, args.spec))
    return 1 if bag.has_errors else 0
