"""`pgraph explain CODE`: print a rule's section of docs/rules.md."""

from __future__ import annotations

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
    """The text of `## PGxxx slug` up to the next `#`/`##` heading or `<!--` marker line, or None.

    Lines inside ``` code fences never end a section: a `.pgl` example's `# comment` is not a
    heading.
    """
    heading = f"## {rule.code} {rule.slug}"
    lines = doc.split("\n")
    start = next((i for i, line in enumerate(lines) if line.rstrip() == heading), None)
    if start is None:
        return None
    out = [lines[start]]
    fenced = False
    for line in lines[start + 1:]:
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (line.startswith(("# ", "## ")) or line.startswith("<!--")):
            break
        out.append(line)
    return "\n".join(out).rstrip()


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
