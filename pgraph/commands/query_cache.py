"""A cache of the queries' expansions, so that `pgraph deps` and `why` skip the parse.

An entry holds the compiled Program and the instance graph of one spec under one set of
options and one query window, and the list of the files it was compiled from with a digest
of each. It is used only when every one of those files still has its digest, and the pgraph
code (every .py file of the package and the grammar: size and modification time) and the
Python version are those that wrote it; anything else is a miss, and a miss compiles as if
there were no cache. A broken or unreadable entry is a miss too; writing one that fails is
ignored (the answer does not depend on the cache).

Where: `$PGRAPH_CACHE_DIR`, else `$XDG_CACHE_HOME/pgraph`, else `~/.cache/pgraph`;
`PGRAPH_CACHE=0` turns it off, and so does `PGRAPH_REFERENCE=1` (a fast path of
docs/architecture.md: its reference is the compile it skips; measured, a warm entry saves
~40 ms of a whole `pgraph deps` and ~60 ms of a `why` on the decode spec). Entries are written atomically (a temporary file and a rename);
the folder keeps the MAX_ENTRIES most recently written.
"""

from __future__ import annotations

import os
import pickle
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pgraph.fastpath import reference_mode
from pgraph.source import MAX_SOURCE_BYTES, read_input

__all__ = ["cache_dir", "cached", "enabled"]

PKG = Path(__file__).resolve().parents[1]
GRAMMAR = PKG.parent / "grammar" / "pgl.lark"


def enabled() -> bool:
    """False when `PGRAPH_CACHE=0` (or empty) is set, or under `PGRAPH_REFERENCE=1`."""
    return os.environ.get("PGRAPH_CACHE", "1") not in ("0", "") and not reference_mode("query-cache")


def cache_dir() -> Path:
    """The folder of the entries (see the module docstring)."""
    if os.environ.get("PGRAPH_CACHE_DIR"):
        return Path(os.environ["PGRAPH_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pgraph"


def _digest(data: bytes) -> str:
    from _blake2 import blake2b  # hashlib's OpenSSL import costs more than the whole lookup

    return blake2b(data, digest_size=20).hexdigest()


def _code_stamp() -> str:
    """Size and modification time of every file of the package and of the grammar."""
    rows = [sys.version, str(GRAMMAR.stat().st_size if GRAMMAR.exists() else 0)]
    for root, dirs, files in os.walk(PKG):
        dirs.sort()
        for f in sorted(files):
            if f.endswith(".py"):
                st = os.stat(os.path.join(root, f))
                rows.append(f"{root}/{f}:{st.st_size}:{st.st_mtime_ns}")
    if GRAMMAR.exists():
        rows.append(str(GRAMMAR.stat().st_mtime_ns))
    return _digest("\n".join(rows).encode())


def _files_ok(manifest: Sequence[tuple[str, str]]) -> bool:
    try:
        return all(_digest(read_input(path, MAX_SOURCE_BYTES)) == digest for path, digest in manifest)
    except OSError:
        return False


#: Entries kept (about 1 MB each for the 40-layer HEAD spec); the least recently written go first.
MAX_ENTRIES = 64


def _prune(folder: Path) -> None:
    entries = sorted(folder.glob("q-*.pickle"), key=lambda p: p.stat().st_mtime_ns)
    for old in entries[:-MAX_ENTRIES]:
        old.unlink(missing_ok=True)


def cached(key: tuple[Any, ...], build: Callable[[], tuple[Any, Sequence[Path]] | None]) -> Any:
    """The value stored under `key`, or `build()`'s (value, files read), stored when it is not None.

    `key` must hold everything the value depends on besides the files (spec path, options,
    window); the files' digests and the code stamp are checked on every lookup."""
    if not enabled():
        made = build()
        return None if made is None else made[0]
    stamp = _code_stamp()
    name = _digest(repr((stamp, key)).encode())
    path = cache_dir() / f"q-{name}.pickle"
    try:
        with open(path, "rb") as fh:
            entry = pickle.load(fh)
        if entry["stamp"] == stamp and entry["key"] == key and _files_ok(entry["files"]):
            return entry["value"]
    except Exception:  # noqa: BLE001 - a missing, old or broken entry is a miss
        pass
    made = build()
    if made is None:
        return None
    value, files = made
    try:
        manifest = [(str(Path(f).resolve()), _digest(read_input(f, MAX_SOURCE_BYTES))) for f in sorted(set(files))]
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        with open(tmp, "wb") as fh:
            pickle.dump({"stamp": stamp, "key": key, "files": manifest, "value": value}, fh,
                        protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
        _prune(path.parent)
    except Exception:  # noqa: BLE001 - the cache is an optimisation: a failed write only costs time
        pass
    return value
