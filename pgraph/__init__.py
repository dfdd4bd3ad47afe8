"""pgraph: a declarative task-graph language (.pgl) and planner for NPU runtimes."""

__version__ = "0.1.0"
