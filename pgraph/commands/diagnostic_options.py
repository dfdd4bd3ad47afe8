"""The options every command that reads a spec takes for its diagnostics (`-W/--allow CODE`,
`--notes`) and the per-side overrides of a comparison (`--a-define`, `--b-define`): argument
tables only, so that `pgraph.cli` and the queries share them without importing a backend.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from pgraph.diagnostics import RULES
from pgraph.frontend.loader import UsageError

__all__ = ["diagnostic_options", "parse_allow", "side_defines"]

ALLOW_HELP = ("waive diagnostic CODE (PG104 or its slug dummy-effect; repeatable): its warnings and notes are not "
              "shown but counted as allowed; errors are never waived")
NOTES_HELP = "print notes (and the diagnostics allows waived) in full; otherwise they are counted by code"


def diagnostic_options(p: argparse.ArgumentParser) -> None:
    """`-W/--allow CODE` and `--notes`: how a command shows the diagnostics of the specs it reads
    (every command that reads a spec takes them; docs/tools.md)."""
    p.add_argument("-W", "--allow", dest="allow", action="append", default=[], metavar="CODE", help=ALLOW_HELP)
    p.add_argument("--notes", action="store_true", help=NOTES_HELP)


def side_defines(p: argparse.ArgumentParser, a: str, b: str) -> None:
    """`--a-define` and `--b-define`: -D overrides of one side of a comparison (`diff`, `sim --vs`)."""
    p.add_argument("--a-define", dest="a_defines", action="append", default=[], metavar="NAME=VALUE",
                   help=f"override a constant of {a} only, after the -D of both (repeatable)")
    p.add_argument("--b-define", dest="b_defines", action="append", default=[], metavar="NAME=VALUE",
                   help=f"override a constant of {b} only, after the -D of both (repeatable)")


def parse_allow(words: Sequence[str]) -> tuple[str, ...]:
    """The codes of `-W/--allow` words (a code, any case, or a slug); UsageError for another word."""
    from pgraph.suggest import closest

    slugs = {r.slug: code for code, r in RULES.items()}
    out = []
    for w in words:
        code = w.upper() if w.upper() in RULES else slugs.get(w.lower())
        if code is None:
            near = closest(w.upper(), RULES) or closest(w.lower(), slugs)
            extra = f"; did you mean '{near}'?" if near else ""
            raise UsageError(f"--allow {w}: no diagnostic code or slug '{w}'{extra} (`pgraph explain CODE`)")
        out.append(code)
    return tuple(dict.fromkeys(out))
