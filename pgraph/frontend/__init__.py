"""The front end: .pgl text to the AST (Lark), includes, syntax diagnostics.

Importing lark also imports the third-party `regex` module when it is installed (lark only
needs it for Unicode-category patterns, which grammar/pgl.lark does not use): ~35 ms of every
process's start on a machine that has it. The package hides `regex` while lark is first
imported, then puts the import system back as it was, so lark falls back to `re`.
"""

import sys

if "lark" not in sys.modules and "regex" not in sys.modules:
    sys.modules["regex"] = None  # type: ignore[assignment]  # an import of it raises ImportError
    try:
        import lark  # noqa: F401
    finally:
        del sys.modules["regex"]
