"""The front end: .pgl text to the AST (Lark's tables), includes, syntax diagnostics.

A valid spec is parsed without importing Lark (`pgraph.frontend.lalr` drives the tables Lark
built); Lark is imported, through `import_lark`, only to report a syntax error, to parse under
`PGRAPH_REFERENCE=1` (or with a Lark the tables were not built by), to rebuild the tables, and
by the tools and tests that compare the two parsers.
"""

from __future__ import annotations

from types import ModuleType


def import_lark() -> ModuleType:
    """The `lark` module, imported on first use (a plain import: lark also imports the
    third-party `regex` module where that is installed, ~9 ms, on these paths only)."""
    import lark

    return lark
