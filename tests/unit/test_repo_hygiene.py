"""The checkout stands alone: no merge-conflict markers, no citation of files users do not have.

Users get this repository only. Facts of the real system are cited by public upstream source
(docs/upstream.md names repository, commit and path); the private reading notes the project was
written from, and machine paths of the machine it was written on, must not appear. A merge that
left `<<<<<<<` in a doc once reached main (docs/backend_a2a3.md); this test would have caught it.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: the private notes' file names and the phrases that named them, and machine paths
PRIVATE = re.compile(
    r"qwen3_14b_decode_layer\.md|qwen3_14b_prefill_layer\.md|runtime_and_orchestration\.md|"
    r"optimisation_history\.md|scheduler_timing\.md|frontend_rules\.md|qwen3_14b_decode_abi|"
    r"ABI reference|\.\./shared/|/work/"
)
#: a conflict marker at the start of a line (git writes seven of them)
MARKER = re.compile(r"^(<{7}|>{7}|={7})( |$)", re.M)
TEXT = {".py", ".md", ".pgl", ".toml", ".cpp", ".h", ".dot", ".json", ".txt", ".ir", ".cfg", ".yml", ".yaml", ""}


def _tracked() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    files = [ROOT / f for f in out.decode().split("\0") if f]
    return [f for f in files if f.is_file() and f.suffix in TEXT]


def test_private_notes_and_machine_paths_are_never_cited() -> None:
    me = Path(__file__).resolve()
    hits = []
    for f in _tracked():
        if f.resolve() == me:
            continue
        for n, line in enumerate(f.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if PRIVATE.search(line):
                hits.append(f"{f.relative_to(ROOT)}:{n}: {line.strip()[:100]}")
    assert not hits, "cite docs/upstream.md sections instead:\n" + "\n".join(hits)


def test_no_merge_conflict_markers() -> None:
    hits = [str(f.relative_to(ROOT)) for f in _tracked()
            if MARKER.search(f.read_text(encoding="utf-8", errors="replace"))]
    assert not hits, hits


def test_the_patterns_catch_what_they_are_for() -> None:
    assert PRIVATE.search("see runtime_and_orchestration.md §2.2")
    assert PRIVATE.search("(ABI reference §6)")
    assert not PRIVATE.search('include "../shared.pgl"')
    assert MARKER.search("text\n<<<<<<< ours\nx\n=======\ny\n>>>>>>> theirs\n")
    assert not MARKER.search("a table rule\n=========\n")
