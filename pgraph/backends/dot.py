"""Graphviz backend: one node per dispatch, the layer body drawn once, scopes as nested clusters.

The picture is built from the Plan alone (no re-checking): nodes are `program.dispatches`
(an SPMD grid, a `parallel` loop, a dummy array or one wave of a `tiles` declaration is ONE
node), edges are the instance-graph edges of the drawn copy bundled per dispatch pair.
Every loop is drawn once, at its representative iteration (`Plan.representative_iteration`:
the second iteration when there are two or more, which the window expansion weights for the
remaining ones); `plan.in_layer(inst)` is exactly "drawn" for the layer loop.

What helps tuning is drawn from the planner's facts: the critical path (`CriticalPath`: its
nodes and edges in orange, each of its nodes labelled with its cost, the total in the graph
label) and the edges that block early dispatch (`EarlyStatus`: a consumer made ineligible by
an unflagged producer; the edge ends in a bar). The edges a loop iteration receives from the
previous one are drawn once per loop and producer: one dotted back-edge into a "ghost" of the
producer at the top of the loop (`X@L-1`), whose short edges reach the consumers. A `DotView`
narrows the picture to one task's neighbourhood (`focus`) or collapses the waves of a `tiles`
declaration, phases or loops into one node each (`collapse`).

Text is built with `graphviz.Digraph` in sorted/declaration order, so the output is
byte-identical across runs and PYTHONHASHSEED values; `render_image` turns it into SVG, PNG
or PDF through Graphviz's `dot`. docs/backend_dot.md has the legend.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import attrs
import graphviz
import networkx as nx

from pgraph import records
from pgraph.backends.escape import dot_tooltip
from pgraph.backends.target import BuildInfo, TargetRefused
from pgraph.ir.instances import Instance
from pgraph.ir.program import Dispatch, Program
from pgraph.ir.queries import representative_iteration
from pgraph.kinds import InternalError, Provenance, ScopeMode, TaskKind
from pgraph.plan.base import Plan
from pgraph.plan.critical_path import CriticalPath
from pgraph.plan.early_dispatch import EarlyState, EarlyStatus
from pgraph.suggest import closest

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

#: The critical path's colour (ColorBrewer Dark2 orange): its nodes' borders, its edges.
PATH_COLOUR = "#d95f02"
#: The arrowhead of an edge that blocks its consumer's early dispatch: an arrow ending in a bar.
BLOCKING_ARROW = "teenormal"
#: A ghost (the producer of the previous iteration) and its dotted back-edge.
GHOST_COLOUR = "#737373"

#: The `collapse` levels, from the smallest group to the largest (docs/backend_dot.md):
#: tiles: the waves of one `tiles` declaration; phase: the dispatches of one phase block;
#: loop: everything inside an outermost loop (one node per loop, its body drawn once).
COLLAPSE_LEVELS = ("tiles", "phase", "loop")

#: The picture formats `render_image` makes (Graphviz `-T` names).
IMAGE_FORMATS = ("svg", "png", "pdf")


# ---- the view ----------------------------------------------------------------------------------

def _check_levels(_inst: object, _attr: object, value: tuple[str, ...]) -> None:
    bad = [x for x in value if x not in COLLAPSE_LEVELS]
    if bad:
        raise ValueError(f"unknown collapse level(s) {', '.join(bad)} (levels: {', '.join(COLLAPSE_LEVELS)})")


def _check_depth(_inst: object, _attr: object, value: int) -> None:
    if value < 0:
        raise ValueError(f"the focus depth must be 0 or more, got {value}")


@records.value
@attrs.frozen(repr=False, eq=False)
class DotView:
    """What the picture shows (the default: every dispatch, nothing collapsed).

    `focus` names a task: a dispatch (`out_proj.deferred`), a declaration (`out_proj`: all its
    waves), an instance label (`q_proj@L=1`: its dispatch) or a collapsed node; the picture then
    keeps its producers and consumers up to `depth` edges away (0: the task alone) and counts
    what it elides. `collapse` holds levels of COLLAPSE_LEVELS (ValueError for others).
    """

    focus: str | None = None
    depth: int = attrs.field(default=1, validator=_check_depth)
    collapse: tuple[str, ...] = attrs.field(default=(), validator=_check_levels)


def parse_collapse(text: str) -> tuple[str, ...]:
    """`tiles,phase` -> ('tiles', 'phase') in COLLAPSE_LEVELS order; ValueError naming an
    unknown level (with the nearest known one)."""
    got = [x.strip() for x in text.split(",") if x.strip()]
    for x in got:
        if x not in COLLAPSE_LEVELS:
            near = closest(x, COLLAPSE_LEVELS)
            hint = f" (did you mean {near}?)" if near else ""
            raise ValueError(f"unknown collapse level {x!r}{hint}: the levels are {', '.join(COLLAPSE_LEVELS)}")
    if not got:
        raise ValueError(f"no collapse level given: the levels are {', '.join(COLLAPSE_LEVELS)}")
    return tuple(x for x in COLLAPSE_LEVELS if x in got)


# ---- the drawn edges ---------------------------------------------------------------------------

@records.value
@attrs.frozen(repr=False, eq=False)
class DotEdge:
    """One drawn (bundled) edge between two dispatch nodes.

    `kind` is 'forward' (same drawn iteration, or into/out of a loop), 'back' (from an earlier
    iteration of loop `loop` into the drawn one, taken by `trips` iterations: drawn through the
    producer's ghost) or 'init' (into the first iteration only, from outside the loop: a carry's
    initial value or a TensorMap read of it; note e.g. 'init L=0').
    `count` is the number of instance edges bundled; `note` is the trip/iteration text;
    `blocking` how many of them make their consumer ineligible for early dispatch (the producer
    is unflagged: `EarlyStatus`); `on_path` whether the critical path takes one of them.
    """

    src: str
    dst: str
    kind: str
    prov: str
    count: int
    note: str
    loop: int | None = None
    trips: int = 0
    blocking: int = 0
    on_path: bool = False

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


def _primary_prov(prov: Iterable[str]) -> str | None:
    got = set(prov)
    return next((p for p in PROV_ORDER if p in got), None)


def _edge_prov(data: Any) -> str | None:
    """The provenance that styles one instance edge (its edge data's `prov`), None for creator edges."""
    return _primary_prov(data.prov)


#: (kind, note, loop of a back-edge, trips of a back-edge)
EdgeClass = tuple[str, str, int | None, int]


def _classify(plan: Plan, reps: dict[int, int], u: Instance, v: Instance, prov: str) -> EdgeClass | None:
    """(kind, note, loop, trips) of instance edge u -> v in the picture, or None when it is not drawn.

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
        note = "init " + ",".join(f"{p.loops[lid].axis.var}={p.loops[lid].axis.lo}" for lid in first)
        return "init", note, None, 0
    for lid, it in zip(dv.loops, v.iters, strict=True):
        src = it_u.get(lid)
        if src is None or src == it:
            continue
        if src > it:
            return None
        trips = p.loops[lid].axis.size - (it - src)
        return "back", f"{prov} ×{trips}", lid, trips
    return "forward", "", None, 0


def _blocks_early(status: dict[int, tuple[EarlyState, list[int]]], u: int, v: int) -> bool:
    """True when u is one of the unflagged producers that make consumer v ineligible."""
    state, blocking = status.get(v, (EarlyState.READY, []))
    return state is EarlyState.INELIGIBLE and u in blocking


BundleKey = tuple[str, str, str, str, str, int | None]


def _collect(plan: Plan, reps: dict[int, int]) -> tuple[list[DotEdge], PathMarks]:
    """The bundled edges of the picture, sorted by (source, target) declaration order, and the
    critical path's marks on them.

    Alloc (creator) sources are skipped; an instance edge with several provenances counts
    once, under the strongest of carried > explicit > inferred. Each bundle says how many of
    its edges block early dispatch and whether the critical path takes it (`path_marks`).
    """
    p = plan.program
    g = plan.graph
    status = plan.get(EarlyStatus).status
    order = {d.name: d.order for d in p.dispatches}
    bundles: dict[BundleKey, list[int]] = {}
    for u, v, data in g.graph.edges(data=True):
        iu, iv = g.instance(u), g.instance(v)
        prov = _edge_prov(data)
        if prov is None or iu.kind is TaskKind.ALLOC or iv.kind is TaskKind.ALLOC:
            continue
        cls = _classify(plan, reps, iu, iv, prov)
        if cls is None:
            continue
        key = (iu.dispatch, iv.dispatch, cls[0], prov, cls[1], cls[2])
        got = bundles.setdefault(key, [0, 0, cls[3]])
        got[0] += 1
        got[1] += _blocks_early(status, u, v)
    marks = path_marks(plan, reps, set(bundles))
    kinds = ("forward", "init", "back")
    keys = sorted(bundles, key=lambda k: (order[k[0]], order[k[1]], kinds.index(k[2]), PROV_ORDER.index(k[3]), k[4]))
    edges = []
    for k in keys:
        count, blocking, trips = bundles[k]
        edges.append(DotEdge(k[0], k[1], k[2], k[3], count, k[4], loop=k[5], trips=trips, blocking=blocking,
                             on_path=k in marks.edges))
    return edges, marks


# ---- the critical path -------------------------------------------------------------------------

@records.value
@attrs.frozen(repr=False, eq=False)
class PathMarks:
    """The critical path as the picture draws it (from the `CriticalPath` fact).

    `tasks`: the path's tasks in order (instance, cost, waves; alloc tasks left out); `edges`:
    the bundle keys of `_collect` the path's consecutive tasks project on; `length` (cost
    units, the whole program), `per_layer` (None without two layers), `layers`. A node's share
    of the path is `node_steps`.
    """

    tasks: tuple[tuple[Instance, int, int], ...]
    edges: frozenset[BundleKey]
    length: int
    per_layer: int | None
    layers: int | None


def _path_tasks(plan: Plan) -> tuple[list[tuple[Instance, int, int]], dict[str, Any] | None]:
    """The critical path's tasks (instance, cost, waves), alloc tasks left out, and the fact's value."""
    value = plan.get(CriticalPath).value
    if value is None:
        return [], None
    by_label = {inst.label: inst for inst in plan.graph.instances if inst.kind is not TaskKind.ALLOC}
    out = []
    for step in value["path"]:
        if step["kind"] == TaskKind.ALLOC:   # alloc tasks are not drawn (and cost nothing)
            continue
        inst = by_label.get(step["task"])
        if inst is None:
            raise InternalError(f"the critical path names {step['task']!r}, which is no task of the instance graph")
        out.append((inst, int(step["cost_us"]), int(step["waves"])))
    return out, value


def path_marks(plan: Plan, reps: dict[int, int], keys: set[BundleKey]) -> PathMarks:
    """Project the critical path on the picture: each task on its dispatch, each step u -> v on
    the bundle that draws it (`_classify`; a step between two iterations that are not drawn, as
    layer 0's, on the bundle of the same kind between the same dispatches)."""
    tasks, value = _path_tasks(plan)
    g = plan.graph
    p = plan.program
    on: set[BundleKey] = set()
    by_pair: dict[tuple[str, str, str, str], list[BundleKey]] = {}
    for k in keys:
        by_pair.setdefault((k[0], k[1], k[2], k[3]), []).append(k)
    for (u, _, _), (v, _, _) in zip(tasks, tasks[1:]):
        data = g.graph.get_edge_data(u.id, v.id)
        prov = _edge_prov(data) if data is not None else None
        if prov is None:
            continue
        cls = _classify(plan, reps, u, v, prov)
        if cls is not None:
            on.update(k for k in by_pair.get((u.dispatch, v.dispatch, cls[0], prov), []) if k[4] == cls[1])
            continue
        for kind in _projected_kinds(p, u, v):
            found = by_pair.get((u.dispatch, v.dispatch, kind, prov), [])
            if found:
                on.update(found)
                break
    layers = None
    if value is not None and plan.layer_loop is not None:
        layers = p.loops[plan.layer_loop].axis.size
    return PathMarks(tuple(tasks), frozenset(on), int(value["length_us"]) if value else 0,
                     value.get("per_layer_us") if value else None, layers)


def _projected_kinds(p: Program, u: Instance, v: Instance) -> tuple[str, ...]:
    """The picture edge kinds an undrawn instance edge u -> v stands for, most likely first: 'back'
    when u is in an earlier iteration of a loop both share, else 'forward' then 'init'."""
    it_u = dict(zip(p.dispatch(u.dispatch).loops, u.iters, strict=True))
    for lid, it in zip(p.dispatch(v.dispatch).loops, v.iters, strict=True):
        if lid in it_u and it_u[lid] < it:
            return ("back",)
    return ("forward", "init")


def node_steps(plan: Plan, reps: dict[int, int], marks: PathMarks, members: Iterable[str],
               inside: frozenset[int] = frozenset()) -> list[tuple[int, int, int]]:
    """A node's share of the critical path: (cost, waves, weight) of each path task of `members`
    that the node stands for. A node drawn inside a loop's cluster stands for the drawn iteration
    of that loop; a collapsed node drawn outside the cluster of a loop it holds (`inside`) stands
    for all of that loop's iterations, each window copy weighing the iterations it stands for
    (`InstanceGraph.loop_weights`), so a windowed plan gives a full one's figure. A node whose
    tasks the path takes only in other iterations (a task of layer 0 alone) counts those."""
    names = set(members)
    weights = plan.graph.loop_weights
    mine = [(inst, cost, waves) for inst, cost, waves in marks.tasks if inst.dispatch in names]
    out = []
    for inst, cost, waves in mine:
        weight = 1
        for lid, it in zip(inst.loops, inst.iters, strict=True):
            if lid in inside:
                weight *= weights.get(lid, {}).get(it, 1)
            elif reps.get(lid) != it:
                break
        else:
            out.append((cost, waves, weight))
    return out or [(cost, waves, 1) for _, cost, waves in mine]


def cost_text(steps: list[tuple[int, int]]) -> str:
    """The cost line of a node on the critical path: 'cost 30 = 3 waves × 10' for one task,
    'cost 20 (2 tasks)' when the path takes several tasks of it."""
    if len(steps) == 1:
        cost, waves = steps[0]
        return f"cost {cost}" + (f" = {waves} waves × {cost // waves}" if waves > 1 else "")
    return f"cost {sum(c for c, _ in steps)} ({len(steps)} tasks)"


# ---- nodes and clusters ------------------------------------------------------------------------

def node_label(p: Program, d: Dispatch) -> str:
    """'name', then 'kind core ×N' (N = tasks for parallel/dummy arrays, blocks for SPMD), then flags.

    A multi-task SPMD wave reads 'T × spmd core ×B' (T grids of B blocks each).
    """
    lines = [d.name, _shape_text(p, d)]
    flags = [f for f, on in (("early", d.early), ("sync_start", d.sync_start)) if on]
    if flags:
        lines.append(" · ".join(flags))
    return "\\n".join(lines)


def _shape_text(p: Program, d: Dispatch) -> str:
    core = p.kernels[d.kernel].core if d.kernel is not None and d.kernel in p.kernels else ""
    head = " ".join(x for x in (d.kind, core) if x)
    if d.kind is TaskKind.SPMD:
        shape = f"{head} ×{d.block_count}"
        if d.task_axes:
            shape = f"{d.task_count} × {shape}"
        return shape
    if d.task_axes:
        return f"{head} ×{d.task_count}"
    return head


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


def _loop_key(p: Program, lid: int) -> Key:
    """The cluster that draws loop `lid`: its body scope's, or its own dashed one."""
    body = p.loops[lid].body_scope
    return ("scope", body) if body is not None else ("loop", lid)


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


# ---- the picture model: nodes (dispatches, collapsed groups, ghosts) and edges ------------------

@records.value
@attrs.frozen(repr=False, eq=False)
class PicNode:
    """One node of the picture: `kind` 'dispatch', 'tiles', 'phase', 'loop' (collapsed groups of
    `members`, dispatch names in declaration order) or 'ghost' (`members[0]`'s node of the
    previous iteration of `loop`); `path` is its cluster chain, outermost first."""

    id: str
    kind: str
    members: tuple[str, ...]
    path: tuple[Key, ...]
    order: tuple[int, int]
    loop: int | None = None


@records.value
@attrs.frozen(repr=False, eq=False)
class PicEdge:
    """One edge of the picture between two PicNode ids; `bundle` is the DotEdge it draws (for a
    ghost's back-edge or a collapsed edge, the first of the bundles it stands for), `blockers` the
    (producer, consumer) dispatch pairs of its edges that block early dispatch, and `ghost` marks
    the dotted producer -> ghost edge."""

    src: str
    dst: str
    bundle: DotEdge
    count: int
    blocking: int
    on_path: bool
    ghost: bool = False
    blockers: tuple[tuple[str, str], ...] = ()


@records.value
@attrs.frozen(repr=False, eq=False)
class Picture:
    """What `build_digraph` draws: nodes in emission order, edges in emission order, and what a
    focus elided (`elided_nodes` dispatch/group nodes, `elided_edges` drawn edges)."""

    nodes: list[PicNode]
    edges: list[PicEdge]
    marks: PathMarks
    elided_nodes: int = 0
    elided_edges: int = 0
    focus: tuple[str, ...] = ()


def _outer_loops(p: Program, d: Dispatch) -> tuple[int, ...]:
    """`d.loops` without the innermost loops that hold nothing but dispatches of `d.phase`
    (a loop written inside the phase block belongs to the phase's node)."""
    loops = list(d.loops)
    while loops:
        lid = loops[-1]
        if any(lid in o.loops and o.phase != d.phase for o in p.dispatches):
            break
        loops.pop()
    return tuple(loops)


def _group_key(p: Program, d: Dispatch, levels: tuple[str, ...]) -> tuple[Any, ...]:
    if "loop" in levels and d.loops:
        return ("loop", d.loops[0])
    if "phase" in levels and d.phase is not None:
        return ("phase", d.phase, _outer_loops(p, d))
    if "tiles" in levels and len(p.tilesets[d.tileset].dispatches) > 1:
        return ("tiles", d.tileset)
    return ("dispatch", d.name)


def _groups(p: Program, levels: tuple[str, ...], edges: list[DotEdge]) -> list[tuple[tuple[Any, ...], list[str]]]:
    """The collapsed groups in declaration order: (key, member names). A dispatch joins the last
    group of its key unless the picture would then have a cycle of forward edges (two blocks of
    one phase with another phase between them stay two nodes); otherwise it opens a new one."""
    forward = [(e.src, e.dst) for e in edges if e.kind != "back"]
    groups: list[tuple[tuple[Any, ...], list[str]]] = []
    of: dict[str, int] = {}
    last: dict[tuple[Any, ...], int] = {}
    for d in p.dispatches:
        key = _group_key(p, d, levels)
        at = last.get(key)
        if at is not None and key[0] != "dispatch":
            of[d.name] = at
            q = nx.DiGraph()
            q.add_nodes_from(set(of.values()))
            q.add_edges_from((of[s], of[t]) for s, t in forward if s in of and t in of and of[s] != of[t])
            if nx.is_directed_acyclic_graph(q):
                groups[at][1].append(d.name)
                continue
        last[key] = of[d.name] = len(groups)
        groups.append((key, [d.name]))
    return groups


def _common_prefix(paths: list[list[Key]]) -> list[Key]:
    out: list[Key] = []
    for keys in zip(*paths, strict=False):
        if any(k != keys[0] for k in keys):
            break
        out.append(keys[0])
    return out


def _group_nodes(plan: Plan, levels: tuple[str, ...], edges: list[DotEdge]) -> tuple[list[PicNode], dict[str, str]]:
    """The dispatch and collapsed nodes, and dispatch name -> its node id."""
    p = plan.program
    nodes: list[PicNode] = []
    node_of: dict[str, str] = {}
    groups = _groups(p, levels, edges) if levels else [(("dispatch", d.name), [d.name]) for d in p.dispatches]
    counts: dict[tuple[Any, ...], int] = {}
    for key, members in groups:
        if len(members) > 1:
            counts[key[:2]] = counts.get(key[:2], 0) + 1
    seen: dict[tuple[Any, ...], int] = {}
    for key, members in groups:
        ds = [p.dispatch(m) for m in members]
        first = ds[0]
        if len(members) == 1:
            nodes.append(PicNode(first.name, "dispatch", (first.name,), tuple(_container_path(p, first)),
                                 (first.order, 0)))
            node_of[first.name] = first.name
            continue
        seen[key[:2]] = seen.get(key[:2], 0) + 1
        suffix = f" #{seen[key[:2]]}" if counts[key[:2]] > 1 else ""
        path = _common_prefix([_container_path(p, d) for d in ds])
        loop = None
        if key[0] == "tiles":
            ident = f"{key[1]}{suffix}"
        elif key[0] == "phase":
            ident = f"phase {key[1]}{suffix}"
            # the loops that hold nothing but this phase belong to the node: it sits outside them
            held = [_loop_key(p, lid) for d in ds for lid in d.loops if lid not in key[2]]
            cut = [path.index(k) for k in held if k in path]
            path = path[:min(cut)] if cut else path
        else:
            loop = int(key[1])
            ident = f"for {p.loops[loop].axis.var}{suffix}"
            lk = _loop_key(p, loop)
            path = path[:path.index(lk)] if lk in path else path
        nodes.append(PicNode(ident, str(key[0]), tuple(members), tuple(path), (first.order, 0), loop))
        for m in members:
            node_of[m] = ident
    return nodes, node_of


def build_picture(plan: Plan, view: DotView | None = None) -> Picture:
    """The picture model of `plan` under `view`: nodes, edges (collapsed, ghosts for back-edges),
    the critical path's marks, and the focus's elisions. TargetRefused for a focus that names
    no task of the plan."""
    view = DotView() if view is None else view
    p = plan.program
    reps = representative_iterations(plan)
    edges, marks = _collect(plan, reps)
    nodes, node_of = _group_nodes(plan, view.collapse, edges)
    by_id = {n.id: n for n in nodes}
    # bundle again over the (collapsed) nodes; internal forward/init edges vanish
    merged: dict[tuple[str, str, str, str, str, int | None], list[Any]] = {}
    for e in edges:
        s, t = node_of[e.src], node_of[e.dst]
        if s == t and e.kind != "back":
            continue
        key = (s, t, e.kind, e.prov, e.note, e.loop)
        got = merged.setdefault(key, [e, 0, 0, False, []])
        got[1] += e.count
        got[2] += e.blocking
        got[3] = got[3] or e.on_path
        if e.blocking:
            got[4].append((e.src, e.dst))
    out: list[PicEdge] = []
    ghosts: dict[tuple[int, str], list[PicEdge]] = {}
    for (s, t, kind, _prov, _note, loop), (e, count, blocking, on, blockers) in merged.items():
        edge = PicEdge(s, t, e, count, blocking, on, blockers=tuple(blockers))
        if kind == "back" and s != t:
            assert loop is not None
            ghosts.setdefault((loop, s), []).append(edge)
        else:
            out.append(edge)
    ghost_nodes: list[PicNode] = []
    taken = set(by_id)
    for (loop, s), into in sorted(ghosts.items(), key=lambda kv: (by_id[kv[0][1]].order, kv[0][0])):
        var = p.loops[loop].axis.var
        ident = f"{s}@{var}-1"
        if ident in taken:
            ident = f"{s}@{var}-1 #{loop}"
        taken.add(ident)
        src = by_id[s]
        lk = _loop_key(p, loop)
        inner = [list(_container_path(p, p.dispatch(m))) for m in src.members if loop in p.dispatch(m).loops]
        path = inner[0][:inner[0].index(lk) + 1] if inner and lk in inner[0] else list(src.path)
        ghost = PicNode(ident, "ghost", (s,), tuple(path), (src.order[0], 1), loop)
        ghost_nodes.append(ghost)
        by_id[ident] = ghost
        first = into[0].bundle
        out.append(PicEdge(s, ident, first, sum(x.count for x in into), 0, any(x.on_path for x in into), ghost=True))
        out.extend(attrs.evolve(x, src=ident) for x in into)
    picture = Picture(nodes + ghost_nodes, out, marks)
    return _focus(plan, picture, view) if view.focus is not None else picture


def _focus_ids(plan: Plan, picture: Picture, name: str) -> list[str]:
    """The node ids `--focus name` names (TargetRefused when none)."""
    p = plan.program
    real = [n for n in picture.nodes if n.kind != "ghost"]
    ids = [n.id for n in real if n.id == name]
    if not ids:
        members = {name} if name in {d.name for d in p.dispatches} else set()
        if not members and name in p.tilesets:
            members = set(p.tilesets[name].dispatches)
        if not members:
            inst = next((i for i in plan.graph.instances if i.label == name and i.kind is not TaskKind.ALLOC), None)
            if inst is not None:
                members = {inst.dispatch}
        ids = [n.id for n in real if members & set(n.members)]
    if not ids:
        names = [n.id for n in real] + [d.name for d in p.dispatches] + list(p.tilesets)
        near = closest(name, names)
        hint = f"; did you mean {near}?" if near else ""
        raise TargetRefused(f"--focus {name}: no dispatch, `tiles` declaration, task (such as q_proj@L=1) or "
                            f"collapsed node of the plan is named so{hint}")
    return ids


def _focus(plan: Plan, picture: Picture, view: DotView) -> Picture:
    """Keep the focus nodes and their producers and consumers up to `view.depth` edges away (a
    ghost's edges count as the producer's); count what is elided."""
    assert view.focus is not None
    start = _focus_ids(plan, picture, view.focus)
    ghost_of = {n.id: n.members[0] for n in picture.nodes if n.kind == "ghost"}
    logical = nx.DiGraph()
    logical.add_nodes_from(n.id for n in picture.nodes if n.kind != "ghost")
    for e in picture.edges:
        if not e.ghost:
            logical.add_edge(ghost_of.get(e.src, e.src), e.dst)
    keep = set(start)
    for graph in (logical, logical.reverse(copy=False)):
        reached = nx.single_source_shortest_path_length  # per start node, up to depth
        for s in start:
            keep.update(reached(graph, s, cutoff=view.depth))
    kept_ghosts = {g for g, producer in ghost_of.items() if producer in keep
                   and any(e.src == g and e.dst in keep for e in picture.edges if not e.ghost)}
    alive = keep | kept_ghosts
    nodes = [n for n in picture.nodes if n.id in alive]
    edges = [e for e in picture.edges if e.src in alive and e.dst in alive]
    real = [n for n in picture.nodes if n.kind != "ghost"]
    logical_edges = {(ghost_of.get(e.src, e.src), e.dst) for e in picture.edges if not e.ghost}
    kept_logical = {(s, t) for s, t in logical_edges if s in keep and t in keep}
    return attrs.evolve(picture, nodes=nodes, edges=edges, elided_nodes=len(real) - len(keep),
                        elided_edges=len(logical_edges) - len(kept_logical), focus=tuple(start))


# ---- emission ----------------------------------------------------------------------------------

def _legend(plan: Plan, picture: Picture, view: DotView) -> str:
    """An HTML-like graph label (not nodes, so the node count stays the picture's own)."""
    p = plan.program
    cells = [f'<td border="1" bgcolor="{_phase_fill(p, ph)}">{html.escape(ph)}</td>' for ph in p.phases]
    width = max(len(cells), 1)
    keys = [
        "box: at · box3d: spmd grid (×blocks) · tab: parallel (×tasks) · diamond: dummy",
        "double border: early · thick border: sync_start · dashed cluster: loop without a scope",
        "solid: explicit dep · bold red: carried · dashed blue: inferred (TensorMap) · creator edges omitted",
        "'N edges': bundled · 'init L=0': into the first iteration only · arrow ending in a bar: blocks the "
        "consumer's early dispatch (an unflagged producer)",
        "dashed grey 'X@L-1': X of the previous iteration, its dotted back-edge drawn once per loop "
        "(×N: the iterations that take it)",
    ]
    if view.collapse:
        keys.append(f"folder: a collapsed {' / '.join(view.collapse)} node (--collapse {','.join(view.collapse)})")
    keys.append(_path_text(picture.marks))
    if picture.focus:
        drawn = len([n for n in picture.nodes if n.kind != "ghost"])
        keys.append(f"focus {', '.join(picture.focus)} (depth {view.depth}): {drawn} of "
                    f"{drawn + picture.elided_nodes} nodes drawn; elided {picture.elided_nodes} nodes and "
                    f"{picture.elided_edges} edges")
    rows = [f'<tr><td align="left" colspan="{width}"><b>phases (fill colour)</b></td></tr>']
    if cells:
        rows.append("<tr>" + "".join(cells) + "</tr>")
    rows += [f'<tr><td align="left" colspan="{width}">{html.escape(k, quote=False)}</td></tr>' for k in keys]
    return '<<table border="0" cellborder="0" cellspacing="2" cellpadding="2">' + "".join(rows) + "</table>>"


def _path_text(marks: PathMarks) -> str:
    if not marks.tasks:
        return "critical path: none (no task)"
    per = ""
    if marks.per_layer is not None:
        per = f", {marks.per_layer:,} per layer over {marks.layers} layers"
    return (f"orange: the critical path, {marks.length:,} cost units{per}; each of its nodes shows its cost "
            "(ceil(blocks / cores) × per-block cost)")


def _group_attrs(plan: Plan, n: PicNode, reps: dict[int, int]) -> dict[str, str]:
    p = plan.program
    ds = [p.dispatch(m) for m in n.members]
    if n.kind == "tiles":
        head = [n.id, f"tiles · {len(ds)} waves", " + ".join(_shape_text(p, d) for d in ds)]
    else:
        tasks = sum(d.task_count for d in ds if d.kind is not TaskKind.DUMMY)
        dummies = sum(d.task_count for d in ds if d.kind is TaskKind.DUMMY)
        size = f"{len(ds)} dispatches · {_plural(tasks, 'task')}" + (f" + {_plural(dummies, 'dummy')}" if dummies else "")
        title = n.id if n.kind == "phase" else _loop_text(plan, n.loop or 0, reps)  # `phase norm #2`
        head = [title, size + (" per iteration" if n.kind == "loop" else "")]
    phases = {d.phase for d in ds}
    fill = _phase_fill(p, next(iter(phases))) if len(phases) == 1 else NO_PHASE_FILL
    return {"label": "\\n".join(head), "shape": "folder", "style": "filled", "fillcolor": fill,
            "tooltip": graphviz.nohtml(dot_tooltip(", ".join(n.members)))}


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun[:-1]}ies" if noun.endswith("y") else f"{n} {noun}s"


def _ghost_attrs(plan: Plan, n: PicNode, src: PicNode) -> dict[str, str]:
    assert n.loop is not None
    ax = plan.program.loops[n.loop].axis
    return {"label": f"{src.id}\\n@{ax.var}-1", "shape": "box", "style": "dashed,rounded", "color": GHOST_COLOUR,
            "fontcolor": GHOST_COLOUR, "fontsize": "9", "margin": "0.04",
            "tooltip": graphviz.nohtml(dot_tooltip(f"{src.id} of the previous iteration of {ax.var}: the edges it "
                                                   f"sends into the drawn {ax.var}"))}


def _inside_loops(plan: Plan, n: PicNode) -> frozenset[int]:
    """The loops a collapsed node holds whole: its members' loops whose cluster lies inside the
    node (not on its cluster path); a loop node's own loop is drawn once, per iteration."""
    if n.kind not in ("tiles", "phase", "loop"):
        return frozenset()
    p = plan.program
    lids = {lid for m in n.members for lid in p.dispatch(m).loops}
    return frozenset(lid for lid in lids if _loop_key(p, lid) not in n.path and lid != n.loop)


def _picture_node_attrs(plan: Plan, n: PicNode, by_id: dict[str, PicNode], marks: PathMarks,
                        focus: tuple[str, ...], reps: dict[int, int]) -> dict[str, str]:
    p = plan.program
    if n.kind == "ghost":
        return _ghost_attrs(plan, n, by_id[n.members[0]])
    got = _node_attrs(p, p.dispatch(n.id)) if n.kind == "dispatch" else _group_attrs(plan, n, reps)
    steps = node_steps(plan, reps, marks, n.members, _inside_loops(plan, n))
    if steps:
        if n.kind == "dispatch":
            cost = cost_text([(c, w) for c, w, _ in steps])
        else:
            cost = f"cost {sum(c * k for c, _, k in steps):,}" + (" per iteration" if n.kind == "loop" else "")
        got["label"] += "\\n" + cost
        got["color"] = PATH_COLOUR
        got.setdefault("penwidth", "2")
    if n.id in focus:
        got["fontname"] = "Helvetica-Bold"
    return got


def _edge_attrs(e: PicEdge, plan: Plan) -> dict[str, str]:
    b = e.bundle
    if e.ghost:
        got = {"style": "dotted", "color": GHOST_COLOUR, "fontcolor": GHOST_COLOUR, "constraint": "false",
               "label": f"×{b.trips}"}
    else:
        got = dict(PROV_STYLE[b.prov])
        parts = [f"{e.count} edges"] if e.count > 1 else []
        if b.kind == "init" or (b.kind == "back" and e.src == e.dst):
            parts.append(b.note)
        if parts:
            got["label"] = ", ".join(parts)
        if b.kind == "back" and e.src == e.dst:
            got["constraint"] = "false"
    if e.blocking:
        got["arrowhead"] = BLOCKING_ARROW
        share = "" if e.blocking == e.count else f" ({e.blocking} of {e.count} edges)"
        if len(e.blockers) == 1:
            (prod, cons), = e.blockers
            why = f"blocks early dispatch of {cons}: {prod} is not flagged early{share}"
        else:
            pairs = ", ".join(f"{prod} -> {cons}" for prod, cons in e.blockers)
            why = f"blocks early dispatch (an unflagged producer): {pairs}{share}"
        got["tooltip"] = graphviz.nohtml(dot_tooltip(why))
    if e.on_path:
        got.update({"color": PATH_COLOUR, "fontcolor": PATH_COLOUR, "penwidth": "3"})
    return got


def _emit(plan: Plan, parent: graphviz.Digraph, key: Key | None, tree: dict[Key | None, list[tuple[str, Any]]],
          reps: dict[int, int], node_attrs: dict[str, dict[str, str]]) -> None:
    for kind, item in tree.get(key, []):
        if kind == "node":
            parent.node(item, **node_attrs[item])
            continue
        child: Key = item
        name = f"cluster_{child[1]}" if child[0] == "scope" else f"cluster_loop_{child[1]}"
        with parent.subgraph(name=name) as sub:
            sub.attr(**_cluster_attrs(plan, child, reps))
            _emit(plan, sub, child, tree, reps, node_attrs)


def build_digraph(plan: Plan, view: DotView | None = None) -> graphviz.Digraph:
    """The `graphviz.Digraph` of the plan under `view` (see the module docstring for what is drawn)."""
    view = DotView() if view is None else view
    p = plan.program
    reps = representative_iterations(plan)
    picture = build_picture(plan, view)
    by_id = {n.id: n for n in picture.nodes}
    tree: dict[Key | None, list[tuple[str, Any]]] = {}
    placed: set[Key] = set()
    node_attrs = {n.id: _picture_node_attrs(plan, n, by_id, picture.marks, picture.focus, reps)
                  for n in picture.nodes}
    for n in sorted(picture.nodes, key=lambda n: n.order):
        parent: Key | None = None
        for key in n.path:
            if key not in placed:
                placed.add(key)
                tree.setdefault(parent, []).append(("cluster", key))
            parent = key
        tree.setdefault(parent, []).append(("node", n.id))
    g = graphviz.Digraph(name=p.entry)
    g.attr("graph", rankdir="TB", newrank="true", fontname="Helvetica", fontsize="10", labelloc="b",
           labeljust="l", label=_legend(plan, picture, view))
    g.attr("node", fontname="Helvetica", fontsize="10")
    g.attr("edge", fontname="Helvetica", fontsize="9", arrowsize="0.7")
    _emit(plan, g, None, tree, reps, node_attrs)
    for e in picture.edges:
        g.edge(e.src, e.dst, **_edge_attrs(e, plan))
    return g


def render_dot(plan: Plan, view: DotView | None = None) -> str:
    """Render the plan as DOT text under `view` (default: everything; deterministic; feed it to
    `dot -Tsvg`, or to `render_image`)."""
    return build_digraph(plan, view).source


# ---- pictures ----------------------------------------------------------------------------------

class RenderError(Exception):
    """Graphviz could not make the picture (`dot` missing or failing); the message says why and
    what to do instead. The command reports it as a usage error (exit 2)."""


#: A PDF's creation date (cairo writes the clock's): replaced by a fixed one of the same length,
#: so the byte offsets of the PDF's cross-reference table stay valid and the output is deterministic.
_PDF_DATE = re.compile(rb"(/CreationDate \(D:)(\d{14})")


def render_image(text: str, fmt: str) -> bytes:
    """The picture of DOT `text` in format `fmt` (one of IMAGE_FORMATS), made by Graphviz's `dot`
    (through the `graphviz` package's `pipe`). Deterministic for one Graphviz build: a PDF's
    creation date is fixed at 1970-01-01. RenderError when `dot` is not installed or fails."""
    if fmt not in IMAGE_FORMATS:
        raise ValueError(f"cannot render {fmt!r}: the formats are {', '.join(IMAGE_FORMATS)}")
    try:
        data = graphviz.pipe("dot", fmt, text.encode("utf-8"), quiet=True)
    except graphviz.ExecutableNotFound:
        raise RenderError("Graphviz' `dot` is not installed (not on PATH; Debian: apt-get install graphviz)") from None
    except graphviz.CalledProcessError as err:
        detail = (err.stderr or b"").decode("utf-8", errors="replace").strip().splitlines()
        why = f": {detail[0]}" if detail else ""
        raise RenderError(f"Graphviz' `dot -T{fmt}` failed (exit {err.returncode}){why}") from None
    if fmt == "pdf":
        data = _PDF_DATE.sub(lambda m: m.group(1) + b"19700101000000", data)
    return data


# ---- the target --------------------------------------------------------------------------------

@records.value
@attrs.frozen(repr=False, eq=False)
class DotTarget:
    """The dot emitter (`pgraph plan --dot`, `pgraph build --target dot`): the picture as `<entry>.dot`.

    `view` is the emitter's option (`--focus`, `--depth`, `--collapse`): the command evolves the
    registered TARGET with the view it parsed (`attrs.evolve(TARGET, view=...)`).
    """

    name: str = "dot"
    description: str = "the Graphviz picture of the plan (<entry>.dot)"
    needs_full: bool = False  # every loop is drawn once, at its representative iteration
    view: DotView = DotView()

    def emit(self, plan: Plan, info: BuildInfo) -> dict[str, str]:
        """{'<entry>.dot': the DOT text} (the same text as `pgraph plan --dot`); TargetRefused
        for a focus that names no task of the plan."""
        return {f"{plan.program.entry}.dot": render_dot(plan, self.view)}


TARGET = DotTarget()
