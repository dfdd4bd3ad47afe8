"""Writing outputs atomically: one file through a temporary file and a rename, a build tree as a unit."""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path


def _umask_mode(mode: int = 0o666) -> int:
    umask = os.umask(0)
    os.umask(umask)
    return mode & ~umask


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` through a temporary file and a rename (no half-written file).

    A symlink is followed (its target is replaced); a device or FIFO (`-o /dev/null`) is written
    in place, never replaced by a rename. OSError propagates (the CLI turns it into exit 2).
    """
    if path.is_symlink():
        path = path.resolve()  # update the file the link names; keep the link
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
    if path.exists() and not path.is_file():  # /dev/null, a FIFO: a rename would replace the node itself
        with path.open("w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        os.chmod(tmp, _umask_mode())  # mkstemp makes 0600; a normal output file follows the umask
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_tree(files: dict[str, str], outdir: str | Path) -> None:
    """Write every file of a build under `outdir` (relative paths -> text), atomically per file.

    Every folder is created first, so a file in the way fails before anything is written.
    """
    root = Path(outdir)
    for rel in sorted(files):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
    for rel in sorted(files):
        write_atomic(root / rel, files[rel])
