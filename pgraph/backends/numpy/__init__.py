"""NumPy backend: execute a planned instance graph in any legal order, detect races, compare with a dense reference.

Entry points: `runner.TARGET`, the numpy runner of `pgraph.backends.target` (`pgraph run`), and
`runner.Session` (plan + inputs + reference + executions) for tests and tools.
See docs/backend_numpy.md.
"""
