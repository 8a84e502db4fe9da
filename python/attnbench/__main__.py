"""`python3 -m attnbench COMMAND ...`: the same commands as attnbench-plot, attnbench-compare, ..."""

import sys

from .cli import main

sys.exit(main())
