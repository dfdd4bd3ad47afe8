"""Record what every command prints on every spec of the repository, to compare two revisions.

    python3 tests/support/corpus_snapshot.py OUT_DIR [--jobs N] [--quick]

runs, from the repository root this file sits in, each command of `COMMANDS` on each spec under
`specs/` and `tests/` (a spec's `# args:` line adds its options), in a subprocess (the whole
command, as a user runs it), and writes `OUT_DIR/<spec path>/<command>.txt`: the exit code, the
stdout, the stderr and, for commands that write files, every file written (path and text).
Two snapshots are compared with `diff -r A B`: a restructuring that changes no behaviour leaves
none. Timings are not recorded (they differ run to run); text that prints a time is not a command
of the list. With `--quick` only `specs/` and `tests/examples/` are recorded.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ARGS = re.compile(r"^# args:(.*?)(?:#.*)?$")

#: (name, arguments after the spec; OUT is a temporary file or folder the command writes)
COMMANDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("check", ("check",)),
    ("check-json", ("check", "--format", "json")),
    ("check-notes", ("check", "--notes")),
    ("emit-ast", ("check", "--emit", "ast")),
    ("emit-ir", ("check", "--emit", "ir")),
    ("emit-graph", ("check", "--emit", "graph")),
    ("emit-plan", ("check", "--emit", "plan")),
    ("plan", ("plan",)),
    ("plan-full", ("plan", "--full")),
    ("plan-json", ("plan", "--format", "json")),
    ("plan-dot", ("plan", "--dot")),
    ("build-a2a3", ("build", "--target", "a2a3", "-o", "OUT")),
    ("build-dot", ("build", "--target", "dot", "-o", "OUT")),
    ("export", ("export", "--deps-json", "OUT")),
    ("stats", ("stats",)),
    ("sim", ("sim",)),
)


def specs(quick: bool) -> list[Path]:
    """Every .pgl of specs/ and tests/ (relative to the root), sorted."""
    roots = [ROOT / "specs", ROOT / "tests" / "examples"] if quick else [ROOT / "specs", ROOT / "tests"]
    return sorted({p.relative_to(ROOT) for r in roots for p in r.rglob("*.pgl")})


def spec_args(spec: Path) -> list[str]:
    """The options of the spec's `# args:` line, if any."""
    for line in (ROOT / spec).read_text(encoding="utf-8").splitlines():
        m = ARGS.match(line)
        if m:
            return shlex.split(m.group(1))
    return []


def written(out: Path) -> str:
    """The files a command wrote under `out` (a file or a folder), path and text."""
    if out.is_file():
        return f"--- file {out.name}\n{out.read_text(encoding='utf-8', errors='replace')}"
    if not out.is_dir():
        return "--- nothing written\n"
    parts = []
    for p in sorted(out.rglob("*")):
        if p.is_file():
            parts.append(f"--- file {p.relative_to(out)}\n{p.read_text(encoding='utf-8', errors='replace')}")
    return "".join(parts) or "--- empty folder\n"


#: a temporary output path as a record prints it (the folder's name differs run to run)
TEMP_OUT = re.compile(r"/tmp/tmp[A-Za-z0-9_]+/out(?:\.json)?")


def normalize(text: str, out: str = "") -> str:
    """`text` with the command's temporary output path written as OUT."""
    return TEMP_OUT.sub("OUT", text.replace(out, "OUT") if out else text)


def run_one(spec: Path, name: str, argv: tuple[str, ...], dest: Path) -> None:
    """Run one command on one spec and write its record."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / ("out.json" if name == "export" else "out")
        words = [str(out) if w == "OUT" else w for w in argv]
        cmd = [sys.executable, "-m", "pgraph", words[0], str(spec), *words[1:], *spec_args(spec)]
        env = dict(os.environ, PYTHONHASHSEED="0")
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env, timeout=600)
        text = (f"$ pgraph {' '.join(shlex.quote(w) for w in cmd[3:])}\nexit {proc.returncode}\n"
                f"--- stdout\n{proc.stdout}--- stderr\n{proc.stderr}")
        if "OUT" in argv:
            text += written(out)
        text = normalize(text, str(out))
    target = dest / spec / f"{name}.txt"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="specs/ and tests/examples/ only")
    ap.add_argument("--only", action="append", default=[], help="command names to run (default all)")
    args = ap.parse_args()
    todo = [(s, n, a) for s in specs(args.quick) for n, a in COMMANDS if not args.only or n in args.only]
    with ThreadPoolExecutor(args.jobs) as pool:
        for f in [pool.submit(run_one, s, n, a, args.out.resolve()) for s, n, a in todo]:
            f.result()
    print(f"{len(todo)} records under {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
