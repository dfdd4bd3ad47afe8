"""Ctrl-C at any moment of a `pgraph` process: exit code 130 and one line, never a traceback.

`install()` runs first in the console script (`pgraph.__main__`, before the command line's
modules load). Its SIGINT handler has two modes:

- outside a command (start-up, the imports, the flush after the command): write
  "pgraph: interrupted" to stderr and end the process at once (`os._exit(130)`); nothing is
  half-written then, since outputs are written atomically by the command itself;
- inside a command (`raising()`, which `pgraph.cli.run` holds around `main`): raise
  KeyboardInterrupt as Python's default handler does, so that a build folder or an output file
  being written is cleaned up (`backends/output.py` removes its temporary on any exception)
  before `pgraph.cli.main` turns it into the same line and 130.

A library user who imports pgraph gets none of this: only the console script installs it.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from types import FrameType

EXIT_INTERRUPTED = 130
MESSAGE = b"pgraph: interrupted\n"

_raise = False


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    if _raise:
        raise KeyboardInterrupt
    with contextlib.suppress(OSError):
        os.write(2, MESSAGE)
    os._exit(EXIT_INTERRUPTED)


def install() -> None:
    """Make SIGINT end the process with 130 and one line (see the module docstring)."""
    signal.signal(signal.SIGINT, _on_sigint)


@contextlib.contextmanager
def raising() -> Iterator[None]:
    """While inside: SIGINT raises KeyboardInterrupt (when `install` ran); outside: exit 130 at once."""
    global _raise
    _raise = True
    try:
        yield
    finally:
        _raise = False


def stop() -> None:
    """From now on a SIGINT ends the process at once (the command is handling an interrupt)."""
    global _raise
    _raise = False
