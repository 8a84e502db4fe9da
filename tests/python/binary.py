"""Locating and running the attnbench binary from the end-to-end tests."""

import os
import re
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
    kwargs.setdefault("cwd", REPO)
    result = subprocess.run([str(attnbench_binary()), *map(str, args)], capture_output=True, text=True,
                            **kwargs)
    if check:
        assert result.returncode == 0, f"attnbench {' '.join(map(str, args))} failed:\n{result.stderr}"
    return result


def error_lines(result: subprocess.CompletedProcess) -> list[str]:
    """stderr less the progress lines and warnings a run prints before its error."""
    return [line for line in result.stderr.strip().splitlines()
            if not re.match(r"\[\d+/\d+\] |attnbench: warning: ", line)]


def assert_usage_error(result: subprocess.CompletedProcess, *expected: str, prefixed=False) -> None:
    """Exit 2 and one line of error that names each of `expected` (a failure part-way through a
    run follows its progress lines and a busy machine's load warning: the error is still one line,
    the last); with `prefixed`, the line is attnbench's own ("attnbench: error: ...")."""
    assert result.returncode == 2, (result.returncode, result.stderr)
    lines = error_lines(result)
    assert len(lines) == 1, result.stderr
    if prefixed:
        assert lines[0].startswith("attnbench: error: "), lines[0]
    for text in expected:
        assert text in lines[0], lines[0]
