"""simpler deps.json: the format model, the export of a plan (`export.TARGET`, the deps-json
emitter of `pgraph.backends.target`), the semantic diff (docs/tools.md)."""
