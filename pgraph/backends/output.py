"""Writing outputs atomically: one file through a temporary file and a rename, a build tree as a unit.

`write_atomic(path, text)`: the single-file outputs (`plan -o`, `sim -o`, `--trace`).

`write_tree(files, outdir)`: `pgraph build -o OUTDIR`. The whole tree is written into a fresh
temporary folder beside OUTDIR (`.OUTDIR.pgraph-new-*`, mode 0700 while it is written) and
put in place in one step: renamed when OUTDIR does not exist, else exchanged with the old
OUTDIR (Linux `renameat2(RENAME_EXCHANGE)`, through ctypes), after which the old tree is
removed. A failure or a signal at any point before that step leaves the old OUTDIR exactly as
it was (the temporary folder is removed, except after SIGKILL). Nothing is written through a
path of the old tree, so a symlink planted inside it (`OUTDIR/kernel_config.py -> /elsewhere`)
is never followed: it goes away with the old tree and its target is untouched.

OUTDIR given as a symlink to a folder replaces that folder (the link stays); a symlink to
nothing (dangling) is refused, as a single-file output through one is: the build would create
the link's target wherever it points, outside the place the user named.

Which folders are replaced: OUTDIR must be missing, empty, a previous build (it holds the
marker `.pgraph-build`, which lists the files that build wrote), or hold only files this build
writes (an output of a pgraph without the marker). Anything else is refused (OSError, exit 2):
`-o ~` must not replace a home folder. Files of a previous build that the marker lists and this
build does not write (an orchestration file of a renamed entry) are dropped; every other file
(kernel bodies placed at the conventional `kernels/<core>/<kernel>.cpp`, notes) is carried
into the new tree as a hard link (a copy where links fail; a symlink as the same symlink,
never followed), so it survives the rebuild. A carried entry in the way of a file the build
writes (a folder named `kernel_config.py`) is refused before anything is written.

Without `renameat2` (not Linux, an old kernel, a file system without RENAME_EXCHANGE) the
step is two renames: the old OUTDIR to `.OUTDIR.pgraph-old-*`, the new tree to OUTDIR. Between
them OUTDIR is briefly missing; a failure of the second puts the old tree back.
"""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import stat
import tempfile
from pathlib import Path, PurePosixPath

#: The marker file of a build output (one written path per line after a comment line).
MARKER = ".pgraph-build"
_MARKER_HEAD = ("# pgraph build output. `pgraph build -o` replaces this folder as a whole; files not listed "
                "below are kept.\n")


def _umask_mode(mode: int = 0o666) -> int:
    umask = os.umask(0)
    os.umask(umask)
    return mode & ~umask


def write_atomic(path: Path, text: str | bytes) -> None:
    """Write `text` (str: as UTF-8; bytes: as given, e.g. a rendered picture) to `path` through a
    temporary file and a rename (no half-written file).

    A symlink is followed (its target is replaced); a symlink to nothing is refused
    (`DanglingLink`: the file would be created wherever the link points); a device or FIFO
    (`-o /dev/null`) is written in place, never replaced by a rename. OSError propagates (the
    CLI turns it into exit 2).
    """
    data = text.encode("utf-8") if isinstance(text, str) else text
    if path.is_symlink():
        link = path
        path = Path(os.path.realpath(path))  # update the file the link names; keep the link
        if path.is_symlink():  # realpath stops at a symlink loop (Path.resolve raised RuntimeError)
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP))
        if not os.path.lexists(path):
            raise DanglingLink(link, path)
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
    if path.exists() and not path.is_file():  # /dev/null, a FIFO: a rename would replace the node itself
        with path.open("wb") as fh:
            fh.write(data)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, _umask_mode())  # mkstemp makes 0600; a normal output file follows the umask
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class DanglingLink(OSError):
    """An output path that is a symlink to nothing: writing through it would create a file or a
    folder wherever the link points, outside the place the user named; refused (exit 2)."""

    def __init__(self, link: Path, target: Path) -> None:
        super().__init__(errno.ENOENT, f"it is a symlink to {target}, which does not exist: pgraph does not create "
                                       "an output through a link (create the target first, or remove the link)")


# ---- build trees ------------------------------------------------------------------------------------

class OutputError(OSError):
    """OUTDIR cannot be replaced (not a build output, a file in the way); the CLI exits 2."""

    def __init__(self, message: str) -> None:
        super().__init__(errno.EEXIST, message)


def _check_relative(rel: str) -> PurePosixPath:
    p = PurePosixPath(rel)
    if p.is_absolute() or not p.parts or any(part in ("", ".", "..") for part in p.parts) or rel != p.as_posix():
        raise ValueError(f"a build output path must be relative and normalised, got {rel!r}")
    return p


def marker_text(files: dict[str, str]) -> str:
    """The text of `.pgraph-build` for a build writing `files` (sorted, deterministic)."""
    return _MARKER_HEAD + "".join(f"{rel}\n" for rel in sorted(files))


def _read_marker(outdir: Path) -> set[str] | None:
    """The paths the previous build wrote, or None when OUTDIR has no marker (a regular file,
    opened without following a symlink, at most 1 MiB read)."""
    try:
        fd = os.open(outdir / MARKER, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError:  # missing, a symlink (ELOOP), unreadable: not a marker
        return None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        text = fh.read(2**20).decode("utf-8", errors="replace")
    return {line for line in text.splitlines() if line and not line.startswith("#")}


def _walk(root: Path) -> list[tuple[str, os.stat_result]]:
    """Every entry under `root` (relative POSIX path, lstat), parents first; symlinks not followed."""
    out: list[tuple[str, os.stat_result]] = []
    stack = [""]
    while stack:
        rel = stack.pop()
        with os.scandir(root / rel if rel else root) as it:
            entries = sorted(it, key=lambda e: e.name)
        for e in entries:
            sub = f"{rel}/{e.name}" if rel else e.name
            st = e.stat(follow_symlinks=False)
            out.append((sub, st))
            if stat.S_ISDIR(st.st_mode):
                stack.append(sub)
    return sorted(out, key=lambda x: (x[0].count("/"), x[0]))


def _carried(outdir: Path, shown: str, files: dict[str, str]) -> list[tuple[str, os.stat_result]]:
    """The entries of an existing OUTDIR to keep in the new tree; OutputError when OUTDIR must not
    be replaced, or an entry to keep is in the way of what the build writes."""
    entries = _walk(outdir)
    if not entries:
        return []
    new_dirs = {str(p) for rel in files for p in PurePosixPath(rel).parents if str(p) != "."}

    def builds(rel: str, st: os.stat_result) -> bool:
        """The build makes this entry itself; a symlink in its place is replaced, never followed."""
        is_dir, is_link = stat.S_ISDIR(st.st_mode), stat.S_ISLNK(st.st_mode)
        return (rel in files and not is_dir) or (rel in new_dirs and (is_dir or is_link))

    owned = _read_marker(outdir)
    if owned is None:  # no marker: replace it only when it holds nothing but what this build writes
        strays = [rel for rel, st in entries if not builds(rel, st)]
        if strays:
            listed = ", ".join(strays[:3]) + (", ..." if len(strays) > 3 else "")
            raise OutputError(f"{shown} is not empty and is not a pgraph build output (no {MARKER} file; it holds "
                              f"{listed}): pgraph replaces its output folder as a whole, so choose a new or empty "
                              "folder, or move those files out")
        return []
    keep = []
    for rel, st in entries:
        if rel == MARKER or builds(rel, st):
            continue
        if rel in files or rel in new_dirs:
            what = "a folder" if stat.S_ISDIR(st.st_mode) else "a file"
            needs = "a file" if rel in files else "a folder"
            raise OutputError(f"{shown}/{rel} is in the way of the build ({what} where it writes {needs}); move it out")
        if any(rel.startswith(f + "/") for f in files):
            continue  # inside a folder that stands where the build writes a file: refused above
        if rel in owned:
            continue  # written by the previous build, not by this one (a renamed entry's .cpp): dropped
        if not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
            raise OutputError(f"{shown}/{rel} is a special file (FIFO, device or socket), which a rebuild cannot "
                              "carry over; move it out")
        keep.append((rel, st))
    return keep


def _carry(outdir: Path, new: Path, keep: list[tuple[str, os.stat_result]]) -> None:
    """Recreate the kept entries of `outdir` under `new`: folders, hard links of files (copies where a
    link fails), symlinks as symlinks (never followed)."""
    for rel, st in keep:
        src, dst = outdir / rel, new / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        if stat.S_ISDIR(st.st_mode):
            dst.mkdir(exist_ok=True)
            os.chmod(dst, stat.S_IMODE(st.st_mode))
        elif stat.S_ISLNK(st.st_mode):
            os.symlink(os.readlink(src), dst)
        else:
            try:
                os.link(src, dst, follow_symlinks=False)
            except OSError:
                shutil.copy2(src, dst, follow_symlinks=False)


def _write_file(path: Path, text: str) -> None:
    """A new regular file (never through an existing entry or a symlink)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o666)
    with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
        fh.write(text)


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def exchange(a: Path, b: Path) -> bool:
    """Swap the directory entries `a` and `b` atomically (Linux renameat2 RENAME_EXCHANGE).

    False when the system cannot (no renameat2 in libc, ENOSYS, EINVAL: a file system without
    the flag); another failure is OSError.
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    renameat2.restype = ctypes.c_int
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(a))


def _put_in_place(new: Path, outdir: Path) -> Path | None:
    """Make `new` the tree at `outdir` in one step; the old tree's new path (to remove), if any."""
    if not os.path.lexists(outdir):
        os.rename(new, outdir)
        return None
    if exchange(new, outdir):
        return new  # `new` now names the old tree
    old = Path(tempfile.mkdtemp(prefix=f".{outdir.name}.pgraph-old-", dir=outdir.parent))
    os.rmdir(old)
    os.rename(outdir, old)
    try:
        os.rename(new, outdir)
    except BaseException:
        os.rename(old, outdir)
        raise
    return old


def write_tree(files: dict[str, str], outdir: str | Path) -> None:
    """Write a build (relative POSIX path -> text) as the whole of `outdir`, in one step.

    See the module docstring for the rules (what is replaced, what is kept, the marker). OSError
    (OutputError for a folder that is not a build output) propagates: the CLI exits 2.
    """
    rels = {rel: _check_relative(rel) for rel in files}
    if MARKER in rels:
        raise ValueError(f"a target may not write {MARKER}")
    shown = str(outdir)
    target = Path(outdir)
    if target.is_symlink():  # the folder the user named through a link: replace the folder it names
        link = target
        target = Path(os.path.realpath(target))
        if target.is_symlink():
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP))
        if not os.path.lexists(target):  # a dangling link: never create its target, wherever it points
            raise DanglingLink(link, target)
    target = Path(os.path.abspath(target))
    keep: list[tuple[str, os.stat_result]] = []
    mode = _umask_mode(0o777)
    if os.path.lexists(target):
        st = os.stat(target)
        if not stat.S_ISDIR(st.st_mode):
            raise NotADirectoryError(errno.ENOTDIR, "it exists and is not a directory")
        mode = stat.S_IMODE(st.st_mode)
        keep = _carried(target, shown, files)
    target.parent.mkdir(parents=True, exist_ok=True)
    new = Path(tempfile.mkdtemp(prefix=f".{target.name}.pgraph-new-", dir=target.parent))
    try:
        _carry(target, new, keep)
        for rel in sorted(files):
            path = new.joinpath(*rels[rel].parts)
            path.parent.mkdir(parents=True, exist_ok=True)
            _write_file(path, files[rel])
        _write_file(new / MARKER, marker_text(files))
        os.chmod(new, mode)
        old = _put_in_place(new, target)
    except BaseException:
        shutil.rmtree(new, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)  # best effort: the new output is in place already
