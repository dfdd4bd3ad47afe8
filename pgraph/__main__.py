"""`python -m pgraph` runs the command line."""

from pgraph.cli import run

run()
