"""`PGRAPH_REFERENCE=1`: every fast path runs the reference it must equal instead.

docs/architecture.md ("Fast paths") lists each fast path, its reference and the test that holds
the two equal; CI runs a corpus both ways and requires identical output.
"""

from __future__ import annotations

import os


def reference_mode() -> bool:
    """True when the environment sets PGRAPH_REFERENCE to anything but '' or '0': the fast paths
    of docs/architecture.md then run their references (read at each call, so a test may set it)."""
    return os.environ.get("PGRAPH_REFERENCE", "") not in ("", "0")
