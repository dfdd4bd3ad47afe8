"""`pgraph sim`: a discrete-event model of the simpler scheduler on a2a3.

Layout: `target` (the entry point: the sim runner of `pgraph.backends.target`), `records`
(the simulator's own task records), `graph_input` (the one adapter from a Plan), `config` +
`a2a3.toml` (every timing figure with its source), `cost` (kernel roofline), `hbm` (shared
bandwidth), `machine` (cores and slots), `engine` (the scheduler model), `analysis`
(makespan, critical path, waits, utilisation), `trace` (merged_swimlane-style Chrome trace),
`report` (text, JSON, comparisons), `calibrate` (per-kernel costs from a captured swimlane);
the subcommand is `pgraph.commands.sim`. See docs/backend_sim.md.
"""
