"""The front end: .pgl text to the AST (Lark's tables), includes, syntax diagnostics.

A valid spec is parsed without importing Lark (`pgraph.frontend.lalr` drives the tables Lark
built); Lark is imported, through `import_lark`, only to report a syntax error, to rebuild the
tables, and by the tools and tests that compare the two parsers.

Importing lark also imports the third-party `regex` module when it is installed (lark only
needs it for Unicode-category patterns, which grammar/pgl.lark does not use): ~35 ms on a
machine that has it. `import_lark` hides `regex` while lark is first imported, then puts the
import system back as it was, so lark falls back to `re`.
"""

from __future__ import annotations

import sys
from types import ModuleType


def import_lark() -> ModuleType:
    """The `lark` module, imported on first use (without the `regex` module, see above)."""
    if "lark" not in sys.modules and "regex" not in sys.modules:
        sys.modules["regex"] = None  # type: ignore[assignment]  # an import of it raises ImportError
        try:
            import lark
        finally:
            del sys.modules["regex"]
        return lark
    import lark

    return lark
