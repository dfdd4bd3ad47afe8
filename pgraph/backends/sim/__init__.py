"""`pgraph sim`: a discrete-event model of the simpler scheduler on a2a3.

Layout: `target` (the entry point: the sim runner of `pgraph.backends.target`), `records`
(the simulator's own task records), `graph_input` (the one adapter from a Plan), `config` +
`pgraph/ir/a2a3_timing.toml` (every timing figure with its source: the table of the one cost
model, `pgraph.ir.cost_model`, shared with `pgraph plan`), `variants` (the makespan under the
cost model's documented variants, `pgraph/ir/a2a3_variants.toml`), `cost` (kernel roofline), `hbm` (shared
bandwidth), `machine` (cores and slots), `engine` (the scheduler model), `analysis`
(makespan, critical path, waits, utilisation), `trace` (merged_swimlane-style Chrome trace),
`report` (text, JSON, comparisons), `plot` (the SVG swimlane and critical path), `calibrate` (per-kernel costs from a captured swimlane);
the subcommand is `pgraph.commands.sim`. See docs/backend_sim.md.
"""
