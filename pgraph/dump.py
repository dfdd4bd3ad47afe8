"""Stable text dumps of the pipeline's stages, for `pgraph check --emit ast|ir|graph|plan`.

- ast: the loaded files (includes spliced in) as canonical .pgl (`frontend.unparse`);
- ir: the lowered Program, one line per declaration, expressions as .pgl text;
- graph: the instance graph, one line per instance and its incoming edges;
- plan: the report's facts as sorted JSON.

The dumps hold no absolute path, address or hash order: golden files of them
(tests/golden/ir/) show a lowering change as a reviewed diff.
"""

from __future__ import annotations

import json

from pgraph.expr import Expr
from pgraph.frontend import ast
from pgraph.frontend.unparse import expr, unparse
from pgraph.ir import program as ir
from pgraph.ir.instances import InstanceGraph
from pgraph.kinds import DimKind, unhandled
from pgraph.pipeline import Stopped
from pgraph.source import Span


def render(stopped: Stopped, stage: str) -> str:
    """The dump of `stage` from what `run_until` reached."""
    match stage:
        case "ast":
            assert stopped.loaded is not None
            root = stopped.loaded.root
            return unparse(ast.Module(stopped.loaded.items, Span(root, 1, 1, 1, 1)))
        case "ir":
            assert stopped.program is not None
            return program_text(stopped.program)
        case "graph":
            assert stopped.graph is not None
            return graph_text(stopped.graph)
        case "plan":
            from pgraph.backends.report import report_facts

            assert stopped.plan is not None
            return json.dumps(report_facts(stopped.plan), indent=2, sort_keys=True) + "\n"
    raise ValueError(stage)


def _e(e: Expr | None) -> str:
    return "?" if e is None else expr(e)


def _dims(dims: tuple[ir.Dim, ...] | None) -> str:
    if dims is None:
        return ""
    out = []
    for d in dims:
        match d.kind:
            case DimKind.ALL:
                out.append(":")
            case DimKind.INDEX:
                out.append(_e(d.a))
            case DimKind.RANGE:
                out.append(f"{_e(d.a)}:{_e(d.b)}")
            case DimKind.EXTENT:
                out.append(f"{_e(d.a)} +: {_e(d.b)}")
            case _:
                unhandled(d.kind)
    return "[" + ", ".join(out) + "]"


def region_text(r: ir.RegionRef) -> str:
    """`x[a, b +: n] indirect(i)`."""
    text = r.tensor + _dims(r.dims)
    if r.indirect is not None:
        text += f" indirect({', '.join(r.indirect)})"
    return text


def _axes(axes: tuple[ir.IAxis, ...]) -> str:
    return "[" + ", ".join(f"{a.var} in {a.lo}..{a.hi}" for a in axes) + "]"


def _sels(sels: tuple[ir.DepSel, ...] | None) -> str:
    if sels is None:
        return ""
    parts = []
    for s in sels:
        match s.kind:
            case DimKind.ALL:
                parts.append("*")
            case DimKind.INDEX:
                parts.append(_e(s.a))
            case DimKind.RANGE:
                parts.append(f"{_e(s.a)}..{_e(s.b)}")
            case DimKind.EXTENT:
                parts.append(f"{_e(s.a)} +: {_e(s.b)}")
            case _:
                unhandled(s.kind)
    return "[" + ", ".join(parts) + "]"


def program_text(p: ir.Program) -> str:
    """The Program, one line per declaration (see the module docstring)."""
    out = [f"program {p.entry}"]
    for name in sorted(p.consts):
        out.append(f"  const {name} = {p.consts[name]}")
    for key in sorted(p.target):
        out.append(f"  target {key} = {p.target[key]}")
    for key in sorted(p.costs):
        out.append(f"  cost {key} = {p.costs[key]}")
    for t in p.tensors.values():
        where = f" arg {t.arg_index}" if t.arg_index is not None else ""
        where += f" heap scope#{t.scope}" if t.scope is not None else ""
        where += f" declared scope#{t.declared_scope}" if t.declared_scope is not None else ""
        where += f" of {t.base}" if t.base else ""
        where += f" loops {list(t.loops)}" if t.loops else ""
        where += " manual_dep" if t.manual_dep else ""
        out.append(f"  tensor {t.name} : {t.dtype}{list(t.shape)} {t.storage}{where}")
    for sc in p.scalars.values():
        out.append(f"  scalar {sc.name} : {sc.dtype} arg {sc.arg_index}")
    for k in p.kernels.values():
        params = ", ".join(f"{q.name} : {q.direction} {q.dtype}{list(q.shape) if q.shape is not None else ''}"
                           for q in k.params)
        out.append(f"  kernel {k.name} {k.core}{' extern' if k.extern else ''}"
                   f"{f' source {k.source!r}' if k.source else ''} ({params})")
    for s in p.scopes:
        parent = f" in scope#{s.parent}" if s.parent is not None else ""
        ring = f" ring {s.ring}" + (f" (stated {s.expected_ring})" if s.expected_ring is not None else "")
        held = f" taskids {', '.join(n for n, _ in s.taskids)}" if s.taskids else ""
        out.append(f"  scope#{s.id} {s.kind} {s.mode} depth {s.depth}{ring}{parent}{held}")
    for lp in p.loops:
        body = f" body scope#{lp.body_scope}" if lp.body_scope is not None else " no scope"
        out.append(f"  loop#{lp.id} {lp.axis.var} in {lp.axis.lo}..{lp.axis.hi} in scope#{lp.parent_scope}{body}")
        for c in lp.carries:
            out.append(f"    carry {c.name} ({c.kind}) = {c.init} then {c.next}")
    for ts in p.tilesets.values():
        waves = "".join(f" {w.name}{_axes(w.box)}" for w in ts.waves)
        out.append(f"  tiles {ts.name} {ts.kind}{_axes(ts.axes)} -> {', '.join(ts.dispatches)}"
                   + (f" waves{waves}" if waves else ""))
    for d in p.dispatches:
        flags = "".join(f" {f}" for f, on in (("early", d.early), ("sync_start", d.sync_start)) if on)
        loops = f" loops {list(d.loops)}" if d.loops else ""
        phase = f" phase {d.phase}" if d.phase else ""
        out.append(f"  dispatch #{d.order} {d.name} {d.kind} tasks{_axes(d.task_axes)} blocks{_axes(d.block_axes)}"
                   f"{flags} scope#{d.scope}{loops}{phase}")
        for dep in d.deps:
            out.append(f"    dep {dep.kind} {dep.target}{_sels(dep.sels)}")
        if d.kernel:
            out.append(f"    call {d.kernel}")
        for a in d.args:
            value = region_text(a.region) if a.region is not None else _e(a.scalar)
            out.append(f"      arg {a.param.name} = {value}")
        for acc in d.accesses:
            items = "".join(f" for {i.var} in {i.lo}..{i.hi}" for i in acc.items)
            out.append(f"    {acc.kind} {region_text(acc.region)}{items}{' (explicit)' if acc.explicit else ''}")
    for st in p.asserts:
        out.append(f"  assert {_e(st.expr)}" + (f" {st.message!r}" if st.message else ""))
    return "\n".join(out) + "\n"


def graph_text(g: InstanceGraph) -> str:
    """The instance graph: one line per instance, then its producers with provenance."""
    out = [f"graph {'full' if g.full else 'window'}: {len(g.instances)} instances, {g.graph.number_of_edges()} edges"]
    for inst in g.instances:
        out.append(f"  %{inst.id} {inst.label} {inst.kind} blocks {inst.blocks} weight {inst.weight} "
                   f"scope#{inst.scope}")
        for u in sorted(g.graph.predecessors(inst.id)):
            data = g.graph.edges[u, inst.id]
            prov = ",".join(sorted(str(x) for x in data.prov))
            out.append(f"    <- %{u} {prov}" + (f" x{data.entries}" if data.entries > 1 else ""))
    return "\n".join(out) + "\n"
