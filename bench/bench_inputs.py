"""Benchmark of reading a deps.json (issue 23): time and memory to reject a malformed file, and to
accept a good one, at 1x/2x/4x/8x sizes; writes its section of docs/performance.md.

    python3 bench/bench_inputs.py              # 3 runs per row (~10 minutes on a quiet machine)
    python3 bench/bench_inputs.py --runs 1
    python3 bench/bench_inputs.py --print      # print the section instead of writing the doc
    python3 bench/bench_inputs.py --scale 0.25 # smaller files (a quick look; not for the doc)

The files are synthetic deps.json captures laid out as `pgraph export` writes them (one record
per line, tasks[] then tensors[] then edges[]; per task three arguments, per task about two
edge records, explicit and tensormap), 1x = 36,000 tasks (about 36 MB), 8x about
290 MB: the size of the file the issue reports rejected after 115 s and 2.2 GB. Each file is
written once; the malformed variants are the same file with one record changed in place (same
length): the first task (`scope` "aut0"), the first edge (`source` "magic!!!") and the last
edge. Each row runs `python3 -m pgraph import FILE` as a child process (`bench/run.py`'s
`child`: wall, CPU seconds and peak RSS of the child alone, `os.wait4`); the "json.load
alone" row is a child that only decodes the whole text with the standard library, the first
thing the reader before issue 23 did, whatever the file held. Medians of the runs.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import child, compile_bytecode  # noqa: E402  (bench/run.py: the whole-process measurement)

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "performance.md"
BEGIN, END = "<!-- bench_inputs:begin -->", "<!-- bench_inputs:end -->"
BASE_TASKS = 36_000
SCALES = (1, 2, 4, 8)


def _region(prefix: str, off: int) -> dict[str, object]:
    return {f"{prefix}shape": [16, 512], f"{prefix}start_offset": off, f"{prefix}strides": [5120, 1]}


def write_capture(path: Path, tasks: int) -> dict[str, int]:
    """A synthetic deps.json of `tasks` tasks; the byte offsets of the values patched later."""
    marks: dict[str, int] = {}
    ring = 2 << 32
    with path.open("w", encoding="utf-8") as fh:
        fh.write('{"tasks": [\n')
        for i in range(tasks):
            rec = {"task_id": str(ring | i), "scope": "auto", "early_dispatch": i % 3 == 0,
                   "kernel_ids": [i % 7, -1, -1], "block_num": 1 + i % 24,
                   "args": [{"idx": j, "type": ("INPUT", "INPUT", "INOUT")[j], "tensor_id": str(1000 + (i + j) % 600),
                             "dtype": "FLOAT32", **_region("", (i * 512 + j) % 81920)} for j in range(3)]}
            text = json.dumps(rec, separators=(", ", ": "))
            if i == 0:
                marks["task"] = fh.tell() + text.index('"auto"') + 1
            fh.write(text + (",\n" if i < tasks - 1 else "\n"))
        fh.write('],\n"tensors": [\n')
        fh.write(",\n".join(json.dumps({"tensor_id": str(1000 + t), "buffer_addr": str(4096 * (t + 1)), "version": 0,
                                        "dtype": "FLOAT32", "buffer_numel": 81920}) for t in range(600)))
        fh.write('\n],\n"edges": [\n')
        n = 0
        total = 2 * (tasks - 1)
        for i in range(1, tasks):
            for k in range(2):
                pred = ring | (i - 1 - k if i - 1 - k >= 0 else i - 1)
                if k == 0:
                    rec = {"pred": str(pred), "succ": str(ring | i), "arg": -1, "source": "explicit",
                           "flags": ["wait", "retain"]}
                else:
                    rec = {"pred": str(pred), "succ": str(ring | i), "arg": 0, "source": "tensormap",
                           "flags": ["wait", "retain"], "tensor_id": str(1000 + i % 600), "consumer_dtype": "FLOAT32",
                           **_region("consumer_", i * 512 % 81920), "overlap": "covered",
                           **_region("producer_", i * 512 % 81920)}
                text = json.dumps(rec, separators=(", ", ": "))
                if n == 0:
                    marks["edge"] = fh.tell() + text.index('"explicit"') + 1
                if n == total - 1:
                    marks["last_edge"] = fh.tell() + text.index('"tensormap"') + 1
                n += 1
                fh.write(text + (",\n" if n < total else "\n"))
        fh.write("]}\n")
    return marks


def patch(path: Path, offset: int, text: str) -> bytes:
    """Overwrite the bytes at `offset` with `text` (same length); the old bytes."""
    data = text.encode()
    with path.open("r+b") as fh:
        fh.seek(offset)
        old = fh.read(len(data))
        fh.seek(offset)
        fh.write(data)
    return old


def measure(runs: int, scale: float, work: Path) -> list[dict[str, object]]:
    """One row per (size, case): medians of wall s, CPU s, peak RSS MiB; the exit code."""
    out: list[dict[str, object]] = []
    exe = [sys.executable, "-m", "pgraph", "import"]
    for mult in SCALES:
        tasks = int(BASE_TASKS * mult * scale)
        path = work / f"capture_{mult}x.json"
        marks = write_capture(path, tasks)
        size = path.stat().st_size
        cases = [("accept (a good file)", None, None), ("reject: first task bad", "task", "aut0"),
                 ("reject: first edge bad", "edge", "magic!!!"), ("reject: last edge bad", "last_edge", "magic!!!!")]
        for name, mark, text in cases:
            old = patch(path, marks[mark], text) if mark else None
            samples = [child([*exe, str(path)], timeout=1800) for _ in range(runs)]
            if mark and old is not None:
                patch(path, marks[mark], old.decode())
            codes = {s[3] for s in samples}
            out.append({"size": f"{mult}x", "tasks": tasks, "mb": size / 1e6, "case": name, "code": sorted(codes),
                        "wall": statistics.median(s[0] for s in samples), "cpu": statistics.median(s[1] for s in samples),
                        "rss": statistics.median(s[2] for s in samples)})
        load = [sys.executable, "-c", f"import json; json.load(open({str(path)!r}, encoding='utf-8'))"]
        samples = [child(load, timeout=1800) for _ in range(runs)]
        out.append({"size": f"{mult}x", "tasks": tasks, "mb": size / 1e6, "case": "json.load alone (before issue 23)",
                    "code": sorted({s[3] for s in samples}), "wall": statistics.median(s[0] for s in samples),
                    "cpu": statistics.median(s[1] for s in samples), "rss": statistics.median(s[2] for s in samples)})
        path.unlink()
    return out


def section(rows: list[dict[str, object]], runs: int, note: str) -> str:
    """The markdown section of docs/performance.md."""
    lines = [BEGIN, "## Reading a deps.json (`bench/bench_inputs.py`)", "",
             f"Measured {datetime.date.today().isoformat()} on {platform.machine()} "
             f"({os.cpu_count()} cores, shared), Python {platform.python_version()}, median of {runs} run(s); {note}. "
             "`pgraph import FILE` as a child process; synthetic captures laid out as `pgraph export` writes them "
             "(1x = 36,000 tasks). The reader streams: each record is checked as it is read, so a bad first task "
             "is rejected at once and a bad first edge after tasks[] only; the rows before it were decoded one "
             "record at a time, never as one text or one JSON tree. The last row of each size is what the reader "
             "before issue 23 did first whatever the file held: decode the whole text at once.", "",
             "| size | tasks | MB | case | exit | wall s | CPU s | peak RSS MiB |", "|---|---:|---:|---|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['size']} | {r['tasks']:,} | {r['mb']:.0f} | {r['case']} | "
                     f"{','.join(map(str, r['code']))} | {r['wall']:.2f} | {r['cpu']:.2f} | {r['rss']:.0f} |")
    lines.append(END)
    return "\n".join(lines)


def main() -> None:
    """Run, then print or write the section."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every file size (1.0 for the doc)")
    ap.add_argument("--print", action="store_true", help="print the section instead of writing the doc")
    args = ap.parse_args()
    note = compile_bytecode()
    with tempfile.TemporaryDirectory(prefix="pgraph-bench-inputs-") as work:
        rows = measure(args.runs, args.scale, Path(work))
    text = section(rows, args.runs, note)
    if args.print or args.scale != 1.0:
        print(text)
        return
    doc = DOC.read_text(encoding="utf-8")
    if BEGIN in doc:
        doc = doc[:doc.index(BEGIN)] + text + doc[doc.index(END) + len(END):]
    else:
        doc = doc.rstrip("\n") + "\n\n" + text + "\n"
    DOC.write_text(doc, encoding="utf-8")
    print(f"wrote the bench_inputs section of {DOC.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
