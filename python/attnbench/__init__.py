"""attnbench's Python side: read results folders (attnbench.results: `load` gives a pandas
DataFrame), draw their plots (attnbench.plots), compare runs and write reports; the commands
are in attnbench.cli (attnbench-plot, attnbench-compare, attnbench-report, ...)."""

__version__ = "0.1.0"
