#!/usr/bin/env python3
"""Runs `attnbench-gpu-summary` from this checkout's python/ folder, for callers on a machine where
the package is not installed (scripts/gpu_run.sh runs on a GPU host without scripts/setup.sh).
Everywhere else, use the command itself (`pip install -e python`, which setup.sh runs)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

from attnbench.cli import gpu_summary  # noqa: E402  (after the path it is found on)

sys.exit(gpu_summary())
