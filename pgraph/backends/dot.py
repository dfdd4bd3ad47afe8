"""Graphviz backend: one node per dispatch, the layer body drawn once, scopes as nested clusters.

The picture is built from the Plan alone (no re-checking): nodes are `program.dispatches`
(an SPMD grid, a `parallel` loop, a dummy array or one wave of a `tiles` declaration is ONE
node), edges are the instance-graph edges of the drawn copy bundled per dispatch pair.
Every loop is drawn once, at its representative iteration (`Plan.representative_iteration`:
the second iteration when there are two or more, which the window expansion weights for the
remaining ones); `plan.in_layer(inst)` is exactly "drawn" for the layer loop. Text is built
with `graphviz.Digraph` in sorted/declaration order, so the output is byte-identical across
runs and PYTHONHASHSEED values. docs/backend_dot.md has the legend.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from pathlib import Path

import attrs
import graphviz

from pgraph import records
from pgraph.backends.escape import dot_tooltip
from pgraph.backends.target import BuildInfo
from pgraph.ir.instances import Instance
from pgraph.ir.program import Dispatch, Program
from pgraph.ir.queries import representative_iteration
from pgraph.kinds import Provenance, ScopeMode, TaskKind
from pgraph.plan.base import Plan

#: Phase fill colours in `program.phases` order (ColorBrewer Set3, 12 classes; cycles after 12).
PHASE_PALETTE = (
    "#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462",
    "#b3de69", "#fccde5", "#d9d9d9", "#bc80bd", "#ccebc5", "#ffed6f",
)
#: Fill of a dispatch declared outside every `phase` block.
NO_PHASE_FILL = "#ffffff"

#: Provenance precedence when one instance edge has several: the strongest one styles it.
PROV_ORDER = (Provenance.CARRIED, Provenance.EXPLICIT, Provenance.INFERRED)

#: Edge style per provenance; 'creator' edges (alloc task -> first user) are omitted.
PROV_STYLE: dict[str, dict[str, str]] = {
    Provenance.CARRIED: {"style": "bold", "color": "#b2182b", "fontcolor": "#b2182b", "penwidth": "2"},
    Provenance.EXPLICIT: {"style": "solid", "color": "#000000"},
    Provenance.INFERRED: {"style": "dashed", "color": "#2166ac", "fontcolor": "#2166ac"},
}

#: Node shape per dispatch kind (the kind is also written in the label).
KIND_SHAPE = {"at": "box", "spmd": "box3d", "parallel": "tab", "dummy": "diamond"}


@records.value
@attrs.frozen(repr=False, eq=False)
class DotEdge:
    """One drawn (bundled) edge between two dispatch nodes.

    `kind` is 'forward' (same drawn iteration, or into/out of a loop), 'back' (from an earlier
    iteration of a loop into the drawn one: constraint=false, labelled with its trip count) or
    'init' (into the first iteration only, from outside the loop: a carry's initial value or a
    TensorMap read of it; note e.g. 'init L=0').
    `count` is the number of instance edges bundled; `note` is the trip/iteration text.
    """

    src: str
    dst: str
    kind: str
    prov: str
    count: int
    note: str

    @property
    def label(self) -> str:
        """The edge label: '<count> edges' when bundled, then the note; '' for a single plain edge."""
        parts = [f"{self.count} edges"] if self.count > 1 else []
        if self.note:
            parts.append(self.note)
        return ", ".join(parts)


def representative_iterations(plan: Plan) -> dict[int, int]:
    """Loop id -> the iteration drawn for it (`pgraph.ir.queries.representative_iteration`; empty
    loops are absent: nothing inside is drawn)."""
    out = {}
    for lp in plan.program.loops:
        rep = representative_iteration(lp.axis)
        if rep is not None:
            out[lp.id] = rep
    return out


def is_drawn(p: Program, reps: dict[int, int], inst: Instance) -> bool:
    """True when every loop iteration of `inst` is its loop's representative (alloc tasks: never)."""
    if inst.kind is TaskKind.ALLOC:
        return False
    return all(reps.get(lid) == it for lid, it in zip(inst.loops, inst.iters, strict=True))


def _primary_prov(prov: Iterable[str]) -> str | None:
    got = set(prov)
    return next((p for p in PROV_ORDER if p in got), None)


def _classify(plan: Plan, reps: dict[int, int], u: Instance, v: Instance, prov: str) -> tuple[str, str] | None:
    """(kind, note) of instance edge u -> v in the picture, or None when it is not drawn.

    Into the drawn copy: 'forward', or 'back' when u sits in an earlier iteration of a loop
    both share (note '<prov> ×<trips>': the iterations that receive the edge). Into the first
    iteration of a loop u is outside of: 'init' (note 'init L=0') when the drawn copy of v
    does not get the same edge from u (a carry's initial value, a TensorMap read of it).
    """
    p = plan.program
    g = plan.graph
    du, dv = p.dispatch(u.dispatch), p.dispatch(v.dispatch)
    it_u = dict(zip(du.loops, u.iters, strict=True))
    first: list[int] = []
    for lid, it in zip(dv.loops, v.iters, strict=True):
        lp = p.loops[lid]
        if lid not in it_u and it == lp.axis.lo and (reps.get(lid) != it or prov is Provenance.CARRIED):
            first.append(lid)
        elif reps.get(lid) != it:
            return None
    if first:
        twin_iters = tuple(reps[lid] if lid in first else it for lid, it in zip(dv.loops, v.iters, strict=True))
        twin = g.by_key.get((v.dispatch, twin_iters, v.index))
        if twin is not None and twin != v.id and g.graph.has_edge(u.id, twin):
            return None
        return "init", "init " + ",".join(f"{p.loops[lid].axis.var}={p.loops[lid].axis.lo}" for lid in first)
    for lid, it in zip(dv.loops, v.iters, strict=True):
        src = it_u.get(lid)
        if src is None or src == it:
            continue
        if src > it:
            return None
        trips = p.loops[lid].axis.size - (it - src)
        return "back", f"{prov} ×{trips}"
    return "forward", ""


def collect_edges(plan: Plan, reps: dict[int, int] | None = None) -> list[DotEdge]:
    """The bundled edges of the picture, sorted by (source, target) declaration order.

    Alloc (creator) sources are skipped; an instance edge with several provenances counts
    once, under the strongest of carried > explicit > inferred.
    """
    p = plan.program
    g = plan.graph
    reps = representative_iterations(plan) if reps is None else reps
    order = {d.name: d.order for d in p.dispatches}
    bundles: dict[tuple[str, str, str, str, str], int] = {}
    for u, v, data in g.graph.edges(data=True):
        iu, iv = g.instance(u), g.instance(v)
        prov = _primary_prov(data.get("prov", ()))
        if prov is None or iu.kind is TaskKind.ALLOC or iv.kind is TaskKind.ALLOC:
            continue
        cls = _classify(plan, reps, iu, iv, prov)
        if cls is None:
            continue
        key = (iu.dispatch, iv.dispatch, cls[0], prov, cls[1])
        bundles[key] = bundles.get(key, 0) + 1
    kinds = ("forward", "init", "back")
    keys = sorted(bundles, key=lambda k: (order[k[0]], order[k[1]], kinds.index(k[2]), PROV_ORDER.index(k[3]), k[4]))
    return [DotEdge(s, t, kind, prov, bundles[(s, t, kind, prov, note)], note) for s, t, kind, prov, note in keys]


def node_label(p: Program, d: Dispatch) -> str:
    """'name', then 'kind core ×N' (N = tasks for parallel/dummy arrays, blocks for SPMD), then flags.

    A multi-task SPMD wave reads 'T × spmd core ×B' (T grids of B blocks each).
    """
    core = p.kernels[d.kernel].core if d.kernel is not None and d.kernel in p.kernels else ""
    head = " ".join(x for x in (d.kind, core) if x)
    if d.kind is TaskKind.SPMD:
        shape = f"{head} ×{d.block_count}"
        if d.task_axes:
            shape = f"{d.task_count} × {shape}"
    elif d.task_axes:
        shape = f"{head} ×{d.task_count}"
    else:
        shape = head
    flags = [f for f, on in (("early", d.early), ("sync_start", d.sync_start)) if on]
    lines = [d.name, shape] + ([" · ".join(flags)] if flags else [])
    return "\\n".join(lines)


def _phase_fill(p: Program, phase: str | None) -> str:
    if phase is None or phase not in p.phases:
        return NO_PHASE_FILL
    return PHASE_PALETTE[p.phases.index(phase) % len(PHASE_PALETTE)]


def _node_attrs(p: Program, d: Dispatch) -> dict[str, str]:
    attrs_: dict[str, str] = {
        "label": node_label(p, d),
        "shape": KIND_SHAPE.get(d.kind, "box"),
        "style": "rounded,filled" if d.kind is TaskKind.AT else "filled",
        "fillcolor": _phase_fill(p, d.phase),
        "tooltip": graphviz.nohtml(dot_tooltip(f"{d.name} ({d.phase or 'no phase'}) {Path(d.span.filename).name}:{d.span.line}")),
    }
    if d.kind is TaskKind.DUMMY:
        attrs_.update({"fontsize": "9", "margin": "0.02", "width": "0.3", "height": "0.3"})
    if d.early:
        attrs_["peripheries"] = "2"
    if d.sync_start:
        attrs_["penwidth"] = "3"
    return attrs_


Key = tuple[str, int]


def _container_path(p: Program, d: Dispatch) -> list[Key]:
    """Clusters around `d`, outermost first: its scopes, then loops that have no scope of their own."""
    path: list[Key] = [("scope", s) for s in reversed(p.ancestors(d.scope))]
    path += [("loop", lid) for lid in d.loops if p.loops[lid].body_scope is None]
    return path


def _loop_text(plan: Plan, lid: int, reps: dict[int, int]) -> str:
    ax = plan.program.loops[lid].axis
    drawn = f"{ax.var}={reps[lid]} drawn" if lid in reps else "empty: not expanded"
    noun = "iteration" if ax.size == 1 else "iterations"
    return f"for {ax.var} in {ax.lo}..{ax.hi} ({ax.size} {noun}, {drawn})"


def _cluster_label(plan: Plan, key: Key, reps: dict[int, int]) -> str:
    p = plan.program
    kind, ident = key
    if kind == "loop":
        return _loop_text(plan, ident, reps) + "\\l"
    s = p.scopes[ident]
    where = {"entry": f"entry {p.entry}", "loop": _loop_text(plan, s.loop, reps) if s.loop is not None else "loop"}
    head = where.get(s.kind, f"scope #{s.id} (line {s.span.line})")
    return f"{head}\\l{s.mode} · depth {s.depth} · ring {s.ring}\\l"


def _cluster_attrs(plan: Plan, key: Key, reps: dict[int, int]) -> dict[str, str]:
    manual = key[0] == "scope" and plan.program.scopes[key[1]].mode is ScopeMode.MANUAL
    return {
        "label": _cluster_label(plan, key, reps),
        "labeljust": "l",
        "labelloc": "t",
        "style": "rounded,dashed" if key[0] == "loop" else "rounded",
        "color": "#7f2704" if manual else "#525252",
        "penwidth": "2" if manual else "1",
        "fontsize": "11",
    }


def _legend(p: Program) -> str:
    """An HTML-like graph label (not nodes, so the node count stays the dispatch count)."""
    cells = [f'<td border="1" bgcolor="{_phase_fill(p, ph)}">{html.escape(ph)}</td>' for ph in p.phases]
    width = max(len(cells), 1)
    keys = [
        "box: at · box3d: spmd grid (×blocks) · tab: parallel (×tasks) · diamond: dummy",
        "double border: early · thick border: sync_start · dashed cluster: loop without a scope",
        "solid: explicit dep · bold red: carried · dashed blue: inferred (TensorMap) · creator edges omitted",
        "'N edges': bundled · back-edge '<prov> ×N': from the previous iteration, taken by N iterations"
        " · 'init L=0': into the first iteration only",
    ]
    rows = [f'<tr><td align="left" colspan="{width}"><b>phases (fill colour)</b></td></tr>']
    if cells:
        rows.append("<tr>" + "".join(cells) + "</tr>")
    rows += [f'<tr><td align="left" colspan="{width}">{html.escape(k, quote=False)}</td></tr>' for k in keys]
    return '<<table border="0" cellborder="0" cellspacing="2" cellpadding="2">' + "".join(rows) + "</table>>"


def _emit(plan: Plan, parent: graphviz.Digraph, key: Key | None, tree: dict[Key | None, list[tuple[str, object]]],
          reps: dict[int, int]) -> None:
    p = plan.program
    for kind, item in tree.get(key, []):
        if kind == "node":
            d = p.dispatch(str(item))
            parent.node(d.name, **_node_attrs(p, d))
            continue
        child: Key = item  # type: ignore[assignment]
        name = f"cluster_{child[1]}" if child[0] == "scope" else f"cluster_loop_{child[1]}"
        with parent.subgraph(name=name) as sub:
            sub.attr(**_cluster_attrs(plan, child, reps))
            _emit(plan, sub, child, tree, reps)


def build_digraph(plan: Plan) -> graphviz.Digraph:
    """The `graphviz.Digraph` of the plan (see the module docstring for what is drawn)."""
    p = plan.program
    reps = representative_iterations(plan)
    tree: dict[Key | None, list[tuple[str, object]]] = {}
    placed: set[Key] = set()
    for d in p.dispatches:
        parent: Key | None = None
        for key in _container_path(p, d):
            if key not in placed:
                placed.add(key)
                tree.setdefault(parent, []).append(("cluster", key))
            parent = key
        tree.setdefault(parent, []).append(("node", d.name))
    g = graphviz.Digraph(name=p.entry)
    g.attr("graph", rankdir="TB", newrank="true", fontname="Helvetica", fontsize="10", labelloc="b",
           labeljust="l", label=_legend(p))
    g.attr("node", fontname="Helvetica", fontsize="10")
    g.attr("edge", fontname="Helvetica", fontsize="9", arrowsize="0.7")
    _emit(plan, g, None, tree, reps)
    for e in collect_edges(plan, reps):
        attrs_ = dict(PROV_STYLE[e.prov])
        if e.label:
            attrs_["label"] = e.label
        if e.kind == "back":
            attrs_["constraint"] = "false"
        g.edge(e.src, e.dst, **attrs_)
    return g


def render_dot(plan: Plan) -> str:
    """Render the plan as DOT text (deterministic; feed it to `dot -Tsvg`)."""
    return build_digraph(plan).source


@records.value
@attrs.frozen(repr=False, eq=False)
class DotTarget:
    """The dot emitter (`pgraph plan --dot`, `pgraph build --target dot`): the picture as `<entry>.dot`."""

    name: str = "dot"
    description: str = "the Graphviz picture of the plan (<entry>.dot)"
    needs_full: bool = False  # every loop is drawn once, at its representative iteration

    def emit(self, plan: Plan, info: BuildInfo) -> dict[str, str]:
        """{'<entry>.dot': the DOT text} (the same text as `pgraph plan --dot`)."""
        return {f"{plan.program.entry}.dot": render_dot(plan)}


TARGET = DotTarget()
