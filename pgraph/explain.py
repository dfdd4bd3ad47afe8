"""`pgraph explain CODE`: print a rule's section of docs/rules.md."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

from pgraph.diagnostics import RULES


def _rules_doc() -> str:
    here = Path(__file__).resolve().parents[1] / "docs" / "rules.md"
    if here.is_file():
        return here.read_text(encoding="utf-8")
    return resources.files("pgraph").joinpath("docs/rules.md").read_text(encoding="utf-8")


def explain(code_or_slug: str) -> str | None:
    """The documentation of a code (`PG013`) or slug (`dependency-cycle`); None if unknown."""
    key = code_or_slug.strip()
    rule = RULES.get(key.upper()) or next((r for r in RULES.values() if r.slug == key.lower()), None)
    if rule is None:
        return None
    doc = _rules_doc()
    match = re.search(rf"^## {rule.code}\b.*?(?=^## |\Z)", doc, flags=re.S | re.M)
    if match is None:
        return f"{rule.code} {rule.slug} ({rule.severity.value}): {rule.summary}"
    return match.group(0).rstrip()
