"""simpler deps.json: the format model, the export of a plan, the semantic diff (docs/tools.md)."""
