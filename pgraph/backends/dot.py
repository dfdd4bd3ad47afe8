"""Graphviz backend (placeholder until the picture lands)."""

from pgraph.plan.base import Plan


def render_dot(plan: Plan) -> str:
    """Render the plan as DOT text."""
    return "digraph pgraph {}\n"
