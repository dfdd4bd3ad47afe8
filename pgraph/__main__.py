"""`python -m pgraph` and the `pgraph` console script: the command line (`pgraph.cli.run`).

The cyclic collector is off while the command line's modules load: their ~200 modules and
~100 attrs classes are some 10^5 objects that live until the process exits, and the passes
the collector would make over them as they are created find no garbage (~5 ms of a start,
docs/performance.md). They are then frozen out of its scans (`gc.freeze`) and it is enabled
again; the pipeline pauses it again while it builds (`pgraph.pipeline`).

Before anything else loads, Ctrl-C is made an exit with code 130 and one line at any moment
(`pgraph.interrupts`): during the imports too, where Python's default prints a traceback.
"""

from pgraph import interrupts

interrupts.install()

import gc  # noqa: E402  (after the SIGINT handler: an interrupt of any import is exit 130)


def main() -> None:
    """Load the command line with the collector off, freeze what was loaded, run it."""
    enabled = gc.isenabled()
    gc.disable()
    from pgraph.cli import run

    gc.freeze()
    if enabled:
        gc.enable()
    run()


if __name__ == "__main__":
    main()
