"""Checks of index spaces, regions and dep selections: negative ranges (PG006) and ranks (PG020)."""

from __future__ import annotations

from collections.abc import Iterable

from pgraph.diagnostics import DiagnosticBag, Note
from pgraph.findings import AtIndexSpace, MissingIndexSpace
from pgraph.ir.program import IAxis, Program, RegionRef
from pgraph.ir.queries import region_shape, tensor_of
from pgraph.kinds import DepKind
from pgraph.plan.base import ProgramCheck


class RangesCheck(ProgramCheck):
    """PG006: a loop, index or item range `lo..hi` with hi < lo (an empty range is legal), and a
    kernel argument whose slice ends before it starts (evaluated with the indices at 0)."""

    name = "ranges"

    def run(self, program: Program, bag: DiagnosticBag) -> None:
        hint = "ranges are half-open lo..hi with lo <= hi (an empty range is legal)"
        for lp in program.loops:
            a = lp.axis
            if a.hi < a.lo:
                bag.add("PG006", f"loop range {a.lo}..{a.hi} has a negative extent", a.span, hint=hint)
        seen: set[tuple[str, int, int]] = set()
        for a in self.index_axes(program):
            key = (a.span.filename, a.span.line, a.span.col)
            if a.hi < a.lo and key not in seen:
                seen.add(key)
                bag.add("PG006", f"index range {a.var} in {a.lo}..{a.hi} has a negative extent", a.span, hint=hint)
        for d in program.dispatches:
            for arg in d.args:
                t = tensor_of(program, arg.region.tensor) if arg.region is not None else None
                if arg.region is None or t is None or arg.param.shape is None:
                    continue
                if arg.region.dims is not None and len(arg.region.dims) != len(t.shape):
                    continue  # PG020
                shape = region_shape(arg.region, t.shape)
                if shape is not None and any(n < 0 for n in shape):
                    bag.add("PG006", f"the region of '{arg.region.tensor}' has shape {list(shape)}: a slice has a "
                            "negative extent", arg.span, hint="a slice `a:b` needs a <= b; `a +: n` needs n >= 0")

    @staticmethod
    def index_axes(p: Program) -> Iterable[IAxis]:
        for ts in p.tilesets.values():
            yield from ts.axes
            for w in ts.waves:
                yield from w.box
        for d in p.dispatches:
            for acc in d.accesses:
                for it in acc.items:
                    if it.span is not None:
                        yield IAxis(it.var, it.lo, it.hi, it.span)


class RanksCheck(ProgramCheck):
    """PG020: a region with another number of dimensions than its tensor; a dep selecting another
    number of tile indices than its tile set has, or selecting on a TaskId carry."""

    name = "ranks"

    def run(self, program: Program, bag: DiagnosticBag) -> None:
        p = program
        seen: set[tuple[str, int, int]] = set()
        for d in p.dispatches:
            regions: list[RegionRef] = [a.region for a in d.accesses]
            regions += [a.region for a in d.args if a.region is not None]
            for r in regions:
                key = (r.span.filename, r.span.line, r.span.col)
                t = tensor_of(p, r.tensor)
                if key in seen or t is None or r.dims is None or len(r.dims) == len(t.shape):
                    continue
                seen.add(key)
                bag.add("PG020", f"'{r.tensor}' has {len(t.shape)} dimension(s) but the region gives {len(r.dims)}",
                        r.span, [Note(f"'{t.name}' declared here", t.span)])
            for dep in d.deps:
                key = (dep.span.filename, dep.span.line, dep.span.col)
                if key in seen:
                    continue
                if dep.kind is DepKind.CARRY:
                    if dep.sels:
                        seen.add(key)
                        bag.add("PG020", f"carry '{dep.target}' is one TaskId; it takes no selection", dep.span)
                    continue
                ts = p.tilesets[dep.target]
                if dep.sels is not None and len(dep.sels) != len(ts.axes):
                    seen.add(key)
                    n = len(ts.axes)
                    bag.add("PG020", f"'{ts.name}' has {n} tile ind{'ex' if n == 1 else 'ices'} but the dep selects "
                            f"{len(dep.sels)}", dep.span, [Note(f"'{ts.name}' declared here", ts.span)])


# ---- PG020 met by the form checks (handed over: pgraph.findings) ----

def at_index_space(f: AtIndexSpace, bag: DiagnosticBag) -> None:
    """PG020: `at` is one task with one block, so it takes no index space."""
    bag.add("PG020", f"`at {f.task}` is one task with one block; it takes no index space", f.span, f.notes,
            hint="use `spmd` for blocks of one task, `parallel` for separate tasks, `tiles` for waves")


def missing_index_space(f: MissingIndexSpace, bag: DiagnosticBag) -> None:
    """PG020: `spmd`, `parallel` and `tiles` need an index space."""
    bag.add("PG020", f"`{f.kind} {f.task}` needs an index space, e.g. `[i in 0..N]`", f.span, f.notes)
