"""Locating and running the attnbench binary from the end-to-end tests."""

import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def attnbench_binary() -> Path:
    """The binary ctest passes in ATTNBENCH_BINARY, else build/attnbench. A missing binary is
    a test failure, never a skip: these tests are how the CLI is checked at all."""
    path = Path(os.environ.get("ATTNBENCH_BINARY", REPO / "build" / "attnbench"))
    assert path.exists(), f"attnbench binary not found at {path}; build first (scripts/setup.sh)"
    return path


def run_attnbench(*args, check=False, **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run([str(attnbench_binary()), *map(str, args)], cwd=REPO, capture_output=True,
                            text=True, **kwargs)
    if check:
        assert result.returncode == 0, f"attnbench {' '.join(map(str, args))} failed:\n{result.stderr}"
    return result
