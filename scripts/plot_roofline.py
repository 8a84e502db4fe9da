#!/usr/bin/env python3
"""Draws a run's roofline (every case at its arithmetic intensity and achieved GFLOP/s, under the
bandwidth and compute roofs of the run's checks) into <run>/plots/: `attnbench-plot <run> --only
roofline` from this checkout's python/ folder, for a machine where the package is not installed.

    scripts/plot_roofline.py results/<run> [--out DIR]
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

from attnbench.cli import plot  # noqa: E402  (after the path it is found on)

sys.exit(plot([*sys.argv[1:], "--only", "roofline"]))
