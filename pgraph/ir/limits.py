"""Runtime limits of a target (a2a3 defaults), overridable with a `target` block."""

from __future__ import annotations

#: a2a3 defaults, each with its source in the simpler runtime / pypto backend.
A2A3_DEFAULTS: dict[str, int] = {
    "task_window": 16384,           # simpler: PTO2_TASK_WINDOW_SIZE per ring; at most W-1 live, W-1 per scope
    "heap": 256 * 1024 * 1024,      # simpler: PTO2_HEAP_SIZE per ring (256 MiB)
    "dep_pool": 16384,              # simpler: PTO2_DEP_LIST_POOL_SIZE per ring (fanout entries)
    "tensormap": 65536,             # simpler: PTO2_TENSORMAP_POOL_SIZE, global to all rings
    "rings": 4,                     # simpler: PTO2_MAX_RING_DEPTH; ring = min(depth, rings - 1)
    "aic": 24,                      # a2a3: PLATFORM_MAX_BLOCKDIM clusters, one AIC each
    "aiv": 48,                      # a2a3: two AIV per cluster
    "clusters": 24,                 # a2a3: MIX blocks take one cluster (1 AIC + 2 AIV)
    "max_tensor_args": 32,          # simpler: MAX_TENSOR_ARGS of CoreTaskArgs
    "max_scalar_args": 16,          # simpler: MAX_SCALAR_ARGS of CoreTaskArgs
    "max_dims": 5,                  # simpler: ChipTensor shapes[5]
    "alloc_batch": 16,              # pypto: kMaxAllocTensorsArgs create-infos per alloc_tensors
    "output_align": 1024,           # simpler: PTO2_PACKED_OUTPUT_ALIGN bytes per packed output
}

#: Compatibility keys of a `target` table: which compiler generated the orchestration. Not limits,
#: so absent by default (the current compiler). `pypto_pr = N`: the newest pypto pull request the
#: compiler includes; below EMPTY_DUMMY_SUBMITTED it drops every empty-deps dummy (pypto
#: EmitDummyTask before #1987: the `deps_count > 0` guard is statically false for `deps=[]`, the
#: dummy is never submitted and its consumers skip its invalid id; docs/upstream.md §6.6).
COMPAT_KEYS: dict[str, str] = {"pypto_pr": "the newest pypto pull request the generating compiler includes"}

#: pypto #1987 (12aa8bdb2, fixing #1976): from it on an empty `task_dummy(deps=[])` is submitted.
EMPTY_DUMMY_SUBMITTED = 1987


def drops_empty_dummies(target: dict[str, int]) -> bool:
    """True when the target's compiler drops empty-deps dummies (`pypto_pr` below #1987)."""
    return target.get("pypto_pr", EMPTY_DUMMY_SUBMITTED) < EMPTY_DUMMY_SUBMITTED


def parse_compat(text: str) -> tuple[str, int]:
    """`pypto<1987` (the compiler before pypto pull request 1987) -> ("pypto_pr", 1986); ValueError
    for anything else."""
    name, sep, number = text.replace(" ", "").partition("<")
    if name != "pypto" or not sep or not number.isdigit() or int(number) < 2:
        raise ValueError(f"unknown compatibility mode {text!r}; the one known is pypto<N (e.g. pypto<1987: "
                         "the compiler before pypto pull request 1987)")
    return "pypto_pr", int(number) - 1


#: Default per-block cost (µs) of a core shape; `cost NAME = N` overrides per kernel or shape.
DEFAULT_COSTS: dict[str, int] = {"aic": 10, "aiv": 5, "mix": 20, "dummy": 0}


def heap_bytes(nbytes: int, align: int = A2A3_DEFAULTS["output_align"]) -> int:
    """Heap bytes of one output: rounded up to `align` (simpler: PTO2_PACKED_OUTPUT_ALIGN = 1024)."""
    return -(-nbytes // align) * align
