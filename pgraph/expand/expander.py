"""Expand the symbolic Program into an instance graph, only as far as needed.

A loop whose iterations are provably identical (`pgraph.expand.window`) is expanded for its
first two iterations only: iteration `lo` stands for itself and iteration `lo+1` stands for
the remaining `hi-lo-1`, carrying that count as its `weight`. Carried edges from iteration
`lo` into `lo+1` are exactly the edges every later iteration receives from its predecessor,
so per-iteration counts and whole-program totals follow without expanding 40 layers.
`full=True` expands everything.

The expansion is a few plain functions of one explicit `ExpansionState` (the program, the
window, the issues met, the work done, the fast paths), adding to one `GraphBuilder`, which
freezes into the `InstanceGraph` once: the instances in submission order (`pgraph.expand.tasks`),
the declared deps' edges (`pgraph.expand.edges.resolve_deps`), the dummies never submitted left
out, the TensorMap's edges (`edges.inferred_edges`), the regions of the iterations a window
skips checked. Edges carry a provenance set (`pgraph.kinds.Provenance`): EXPLICIT (declared
deps), CARRIED (through a loop carry), INFERRED (the runtime TensorMap in an auto scope: reads
of an overlapping region written earlier, InOut writes after an earlier writer; simpler
`compute_task_fanin`), CREATOR (an auto-scope task using a buffer of an alloc task).
The expander reports nothing: what it cannot evaluate becomes an issue record of the graph
(`InstanceGraph.issues`), reported by `pgraph.plan.expansion_issues`.
"""

from __future__ import annotations

from pgraph.expand import edges, tasks
from pgraph.expand.builder import GraphBuilder
from pgraph.expand.state import ExpansionState
from pgraph.ir import program as ir
from pgraph.ir.instances import InstanceGraph
from pgraph.ir.queries import Window


def build(st: ExpansionState) -> InstanceGraph:
    """The instance graph of `st`'s program under its window (the state records the issues and
    the work done)."""
    b = GraphBuilder(st.p, st.full)
    tasks.expand_tree(st, b, st.p.tree, (), 1)
    edges.resolve_deps(st, b)
    b.drop_unsubmitted_dummies()
    for u, v, prov in edges.inferred_edges(st, b.instances, b.args, b.alloc_of):
        b.add_edge(u, v, prov)
    tasks.check_last_iterations(st)
    return b.freeze(loop_weights=st.loop_weights(), windowed=st.windowed(), scope_loops=st.scope_loops,
                    issues=st.issues)


def expand(program: ir.Program, full: bool = False, window: Window | None = None) -> InstanceGraph:
    """Build the instance graph of `program` (window expansion unless `full`; `window` defaults
    to `make_window(program, full)`)."""
    return build(ExpansionState(program, full, window))
