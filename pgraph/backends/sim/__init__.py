"""`pgraph sim`: a discrete-event model of the simpler scheduler on a2a3.

Layout: `records` (the simulator's own task records), `graph_input` (the one adapter from a
Plan), `config` + `a2a3.toml` (every timing figure with its source), `cost` (kernel roofline),
`hbm` (shared bandwidth), `machine` (cores and slots), `engine` (the scheduler model),
`analysis` (makespan, critical path, waits, utilisation), `trace` (merged_swimlane-style
Chrome trace), `report` (text, JSON, comparisons), `calibrate` (per-kernel costs from a
captured swimlane), `command` (the CLI subcommand). See docs/backend_sim.md.
"""
