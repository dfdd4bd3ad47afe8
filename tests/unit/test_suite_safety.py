"""What makes the suite safe to run in parallel workers (pytest-xdist): tests of tests/conftest.py's tools.

- golden files are replaced file by file, atomically, never as a folder that another worker's
  test could find missing (`write_golden`, `write_golden_tree`);
- a read-modify-write of a shared file is serialized between processes (`locked`);
- `time_limit` fails a hang in the main thread (SIGALRM) and, off the main thread, ends the
  process instead of hanging it (faulthandler);
- the run's settings: no hypothesis example database and hypothesis's other files outside the
  checkout (it would write .hypothesis/ into it), the query cache in the session's temporary
  folder. (.ci/run also fails when the suite leaves anything new in the checkout.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from hypothesis import settings

import tests.conftest
from tests.conftest import ROOT, locked, time_limit, write_golden, write_golden_tree


def test_golden_tree_keeps_exactly_the_new_files(tmp_path: Path) -> None:
    root = tmp_path / "case"
    write_golden_tree(root, {"a.txt": "1\n", "sub/b.cpp": "2\n", "old/c.cpp": "3\n"})
    inode = (root / "a.txt").stat().st_ino
    write_golden_tree(root, {"a.txt": "one\n", "sub/b.cpp": "2\n", "sub/new.py": "4\n"})
    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    assert files == ["a.txt", "sub/b.cpp", "sub/new.py"]
    assert (root / "a.txt").read_text() == "one\n" and not (root / "old").exists()
    assert (root / "a.txt").stat().st_ino != inode  # replaced by a rename, not rewritten in place
    assert not list(root.rglob("*.tmp"))


def test_golden_file_is_never_seen_partial(tmp_path: Path) -> None:
    """A reader in another process sees the old text or the new one, never a part of it."""
    path = tmp_path / "g.dot"
    old, new = "a" * 200_000 + "\n", "b" * 200_000 + "\n"
    write_golden(path, old)
    reader = textwrap.dedent(f"""
        import json, time
        from pathlib import Path
        path, seen, end = Path({str(path)!r}), set(), time.monotonic() + 1.5
        while time.monotonic() < end:
            text = path.read_text()
            seen.add(text[:1] + str(len(text)))
        print(json.dumps(sorted(seen)))
    """)
    proc = subprocess.Popen([sys.executable, "-c", reader], stdout=subprocess.PIPE, text=True)
    end = time.monotonic() + 1.2
    while time.monotonic() < end:
        write_golden(path, new)
        write_golden(path, old)
    out, _ = proc.communicate(timeout=30)
    assert set(json.loads(out)) <= {"a200001", "b200001"}, out


def test_locked_serializes_processes(tmp_path: Path) -> None:
    """Two processes appending under the lock each write their two lines together."""
    shared = tmp_path / "doc.md"
    shared.write_text("", encoding="utf-8")
    child = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from pathlib import Path
        from tests.conftest import locked
        path = Path({str(shared)!r})
        for i in range(20):
            with locked(path):
                text = path.read_text()
                time.sleep(0.002)
                path.write_text(text + sys.argv[1] + " begin\\n" + sys.argv[1] + " end\\n")
    """)
    procs = [subprocess.Popen([sys.executable, "-c", child, name]) for name in ("x", "y")]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    lines = shared.read_text().splitlines()
    assert len(lines) == 80  # no update lost
    for begin, end in zip(lines[::2], lines[1::2]):
        assert begin.endswith(" begin") and end == begin.replace("begin", "end")


def test_locked_creates_a_missing_file(tmp_path: Path) -> None:
    with locked(tmp_path / "new.md"):
        pass
    assert (tmp_path / "new.md").read_text() == ""


def test_time_limit_in_the_main_thread_raises() -> None:
    class Late(BaseException):
        pass

    with pytest.raises(Late, match="within 1 s"), time_limit(1, Late):
        time.sleep(5)


def test_time_limit_off_the_main_thread_ends_the_process() -> None:
    """(a test run in a worker thread: SIGALRM cannot reach it, so the process ends, with every stack)"""
    code = textwrap.dedent(f"""
        import sys, threading, time
        sys.path.insert(0, {str(ROOT)!r})
        from tests.conftest import time_limit
        def body():
            with time_limit(1):
                time.sleep(30)
        t = threading.Thread(target=body)
        t.start()
        t.join()
        print("not reached")
    """)
    start = time.monotonic()
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode != 0 and "not reached" not in run.stdout
    assert "Timeout" in run.stderr and "body" in run.stderr, run.stderr
    assert time.monotonic() - start < 20


def test_no_example_database_and_a_session_query_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    assert settings.default.database is None
    # hypothesis's other files (constants and Unicode caches) go to a folder of the run, not .hypothesis/ here
    assert not Path(os.environ["HYPOTHESIS_STORAGE_DIRECTORY"]).resolve().is_relative_to(ROOT)
    if tests.conftest.CACHE_DIR_GIVEN:
        pytest.skip("PGRAPH_CACHE_DIR is set by the caller")
    assert Path(os.environ["PGRAPH_CACHE_DIR"]).is_relative_to(tmp_path_factory.getbasetemp())
