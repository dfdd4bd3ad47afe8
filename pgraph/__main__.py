"""`python -m pgraph` runs the command line."""

import sys

from pgraph.cli import main

sys.exit(main())
