"""The Python side is the attnbench package (python/attnbench), imported as installed by
scripts/setup.sh (`pip install -e python`); these tests check that the one imported is this
checkout's, so they never test another checkout's code."""

from pathlib import Path

import attnbench

REPO = Path(__file__).resolve().parents[2]
SCRIPTS_DIR = REPO / "scripts"

_IMPORTED = Path(attnbench.__file__).resolve().parent
assert _IMPORTED == REPO / "python" / "attnbench", (
    f"attnbench is imported from {_IMPORTED}, not this checkout's {REPO / 'python' / 'attnbench'}: "
    f"run `python3 -m pip install -e {REPO / 'python'}` (scripts/setup.sh does)")
