"""The README's (and docs/rules.md's) console examples are real: each `$ pgraph ...` command shown with its output
is run (stdout and stderr together, in the repository root) and every output line the README
shows must appear in the real output, in the same order (lines the README leaves out, and a
`...` line, are gaps). A renamed flag, a reworded diagnostic or a changed figure fails here
instead of misleading a reader.

Skipped: the setup commands of the first block (pip). (`pgraph sim` runs too, ~6 s for the 40
layers: its figures in the README went stale while it was skipped.)
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

README = ROOT / "README.md"
#: the pages whose examples run on their own (docs/tools.md's build on files made by earlier ones)
PAGES = (README, ROOT / "docs" / "rules.md")
FENCE = re.compile(r"^```")
SKIP = ("pip install",)


def examples(page: Path = README) -> list[tuple[int, str, list[str]]]:
    """(line, command, shown output lines) of every `$ ` command in a code block of `page`."""
    out: list[tuple[int, str, list[str]]] = []
    inside = False
    cur: tuple[int, str, list[str]] | None = None
    lines = page.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if FENCE.match(line):
            if inside and cur is not None:
                out.append(cur)
                cur = None
            inside = not inside
        elif inside and line.startswith("$ "):
            if cur is not None:
                out.append(cur)
            start, cmd = i + 1, line[2:]
            while cmd.endswith("\\") and i + 1 < len(lines):  # a continued command line
                i += 1
                cmd = cmd + "\n" + lines[i]  # bash joins it
            cur = (start, cmd, [])
        elif inside and cur is not None:
            cur[2].append(line)
        i += 1
    return [e for e in out if not any(s in e[1] for s in SKIP)]


def test_readme_has_console_examples() -> None:
    """The parser above finds the README's examples (a README without them would pass vacuously)."""
    cmds = [c for _, c, _ in examples()]
    assert len(cmds) >= 10, cmds
    assert any(c.startswith("pgraph check tests/diagnostics/PG101") for c in cmds)


ALL = [(page.name, *e) for page in PAGES for e in examples(page)]


@pytest.mark.parametrize("example", ALL, ids=lambda e: f"{e[0]}:{e[1]}")
def test_readme_example_output_is_real(example: tuple[str, int, str, list[str]], tmp_path: Path) -> None:
    """(A `/tmp/` path of an example, in its command and its output, is this test's own folder
    instead: two runs of the suite at once, or two workers, never write the same file.)"""
    page, line, cmd, shown = example
    if shutil.which("bash") is None:
        pytest.skip("needs bash")
    cmd, shown = cmd.replace("/tmp/", f"{tmp_path}/"), [s.replace("/tmp/", f"{tmp_path}/") for s in shown]
    # `pgraph` is this checkout's command line, whatever is installed
    script = f'pgraph() {{ "{sys.executable}" -m pgraph "$@"; }}\n{{ {cmd}\n}} 2>&1'
    env = {**os.environ, "PGRAPH_CACHE": "0", "PYTHONUNBUFFERED": "1"}  # one stream, in write order
    res = subprocess.run(["bash", "-c", script], cwd=ROOT, stdout=subprocess.PIPE, text=True, timeout=300, env=env)
    real = [ln.rstrip() for ln in res.stdout.splitlines()]
    want = [ln.rstrip() for ln in shown if ln.strip() and ln.strip() != "..."]
    pos = 0
    for w in want:
        try:
            pos = real.index(w, pos) + 1
        except ValueError:
            pytest.fail(f"{page} line {line}: `{cmd}` does not print\n  {w}\n(real output:\n"
                        + "\n".join(real[:60]) + ")")
