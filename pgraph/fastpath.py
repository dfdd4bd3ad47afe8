"""`PGRAPH_REFERENCE`: a fast path runs the reference it must equal instead.

docs/architecture.md ("Fast paths") lists each fast path, its name here, its reference, the test
that holds the two equal and its measured gain; CI runs a corpus both ways and requires identical
output. `PGRAPH_REFERENCE=1` (any value but '', '0' or a list of names) turns every fast path off;
`PGRAPH_REFERENCE=lalr,race-numpy` turns off the named ones only (bench/bench_fast_paths.py
measures each that way). A value that is not a list of known names turns every one off: the
references give the same answers, so a misspelt name can only cost time.
"""

from __future__ import annotations

import os

#: every fast path, by the name PGRAPH_REFERENCE takes (docs/architecture.md, "Fast paths")
FAST_PATHS: dict[str, str] = {
    "lalr": "the start-up LALR driver (frontend/lalr.py) beside Lark's parser",
    "query-cache": "the pickled expansions of `deps`/`why` (commands/query_cache.py) beside compiling",
    "race-numpy": "the NumPy pairing of a tensor name's touches (plan/races.py _numpy_pairs) beside the sweep",
    "reach-mask": "Reach.ordered_mask over arrays of pairs beside Reach.ordered_pairs",
    "tensormap-index": "the interval index of live TensorMap entries per buffer (expand/tensormap.py) beside scanning every entry",
    "race-frontier": "the happens-before frontier search of a buffer with many conflicting pairs (plan/race_frontier.py) beside listing every pair",
    "interval-reach": "above the bitset limit, reachability as ranges of ancestor ids (plan/reach.py interval_reach) beside bounded searches",
    "funnel-latest": "the funnel pass's early exit for a producer's common later consumer (plan/hygiene.py) beside the full search",
    "compiled-regions": "region boxes and dep selections compiled to Python (expand/compiled.py) beside the ir/queries Evaluator",
    "expander-memo": "the expander's memo tables (ExpansionState.memo_table) beside making each again",
    "writes-shortcuts": "PG122's shortcuts (a direct predecessor's cover, the 16 nearest writers, an interval index of writes) beside asking every earlier write (plan/writes.py)",
    "steady-jump": "critical_path.unrolled_length's jump to the last pass of a steady loop beside every pass",
}


def _names() -> frozenset[str] | None:
    """The fast paths PGRAPH_REFERENCE switches off: None for every one, else the named ones."""
    value = os.environ.get("PGRAPH_REFERENCE", "")
    if value in ("", "0"):
        return frozenset()
    words = frozenset(w.strip() for w in value.split(",") if w.strip())
    return words if words and words <= FAST_PATHS.keys() else None


def reference_mode(name: str | None = None) -> bool:
    """True when the fast path `name` (a key of FAST_PATHS) must run its reference: the
    environment sets PGRAPH_REFERENCE to 1 (all) or to a comma list naming it. With no name:
    True when PGRAPH_REFERENCE turns every fast path off. Read at each call, so a test may set it.

    Raises ValueError when `name` is not a key of FAST_PATHS (a programming error).
    """
    if name is not None and name not in FAST_PATHS:
        raise ValueError(f"{name!r} is not a fast path of pgraph.fastpath.FAST_PATHS")
    off = _names()
    if off is None:
        return True
    return name is not None and name in off
