"""`pgraph explain CODE`: print a rule's section of docs/rules.md."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

from pgraph.diagnostics import RULES, Rule


def _rules_doc() -> str:
    """docs/rules.md from the source checkout, else from the installed package data ('' if absent)."""
    here = Path(__file__).resolve().parents[1] / "docs" / "rules.md"
    if here.is_file():
        return here.read_text(encoding="utf-8")
    try:
        return resources.files("pgraph").joinpath("docs/rules.md").read_text(encoding="utf-8")
    except (FileNotFoundError, OSError):
        return ""


def find_rule(code_or_slug: str) -> Rule | None:
    """The rule named by a code (`PG013`, case-insensitive) or a slug (`dependency-cycle`)."""
    key = code_or_slug.strip()
    return RULES.get(key.upper()) or next((r for r in RULES.values() if r.slug == key.lower()), None)


def section(doc: str, rule: Rule) -> str | None:
    """The text of `## PGxxx slug` up to the next `#`/`##` heading or `<!--` marker line, or None."""
    heading = re.escape(f"## {rule.code} {rule.slug}")
    match = re.search(rf"^{heading}[ \t]*\n.*?(?=^##? |^<!--|\Z)", doc, flags=re.S | re.M)
    return match.group(0).rstrip() if match else None


def explain(code_or_slug: str) -> str | None:
    """The documentation of a code (`PG013`) or slug (`dependency-cycle`); None if unknown.

    A known code without a section in docs/rules.md gets its one-line summary from RULES.
    """
    rule = find_rule(code_or_slug)
    if rule is None:
        return None
    text = section(_rules_doc(), rule)
    if text is None:
        return f"{rule.code} {rule.slug} ({rule.severity.value}): {rule.summary}"
    return text
