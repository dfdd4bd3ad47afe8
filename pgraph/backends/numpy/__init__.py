"""NumPy backend: execute a planned instance graph in any legal order, detect races, compare with a dense reference.

Entry points: `runner.Session` (plan + inputs + reference + executions) and `pgraph run`.
See docs/backend_numpy.md.
"""
