"""Run a list of pgraph commands in one process and print what each one gave, as JSON.

    python3 -m tests.support.command_outputs JOBS.json > OUTPUTS.json

JOBS.json is a list of `{"argv": [...], "out": FOLDER or null}`; each job runs through
`pgraph.cli.main(argv)` in this process with stdout and stderr captured, and gives
`{"code": exit code, "stdout": ..., "stderr": ..., "files": {relative path: text}}`, the files
being every file under `out` after the command (the folder is removed afterwards, so a second
run of the same jobs writes the same paths). tests/unit/test_fast_paths_corpus.py runs the same
jobs once with and once without `PGRAPH_REFERENCE=1` (each run its own process, so that no fast
path's state of one run reaches the other) and requires the two outputs to be identical.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import sys
from pathlib import Path
from typing import Any


def run_job(argv: list[str], out: str | None) -> dict[str, Any]:
    """One command: its exit code, stdout, stderr and the files it wrote under `out`."""
    from pgraph.cli import main

    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            code = main(argv)
        except SystemExit as e:  # argparse's usage errors
            code = e.code if isinstance(e.code, int) else 2
    files: dict[str, str] = {}
    if out is not None:
        folder = Path(out)
        if folder.is_dir():
            for p in sorted(folder.rglob("*")):
                if p.is_file():
                    files[p.relative_to(folder).as_posix()] = p.read_text(encoding="utf-8", errors="replace")
            shutil.rmtree(folder)
    return {"code": code, "stdout": stdout.getvalue(), "stderr": stderr.getvalue(), "files": files}


def main(args: list[str]) -> int:
    jobs = json.loads(Path(args[0]).read_text(encoding="utf-8"))
    results = [run_job(job["argv"], job.get("out")) for job in jobs]
    sys.stdout.write(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
