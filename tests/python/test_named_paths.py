"""Every file of the checkout that the docs, the configs' comments, the scripts or the sources
name by its path exists: a path in prose is not a link (test_doc_links checks those), and when a
script was folded into the Python package or a header moved, the comments that named it went on
naming it (configs/cpu-threads.toml named scripts/compare_runs.py long after it was gone)."""

import re

from conftest import REPO

# A path of the checkout, as prose writes it: a top-level folder, then a file with an extension.
NAMED_PATH = re.compile(
    r"(?<![\w/.<>-])((?:scripts|configs|docs|harness|variants|tests|python|\.ci)/"
    r"[A-Za-z0-9_./-]*[A-Za-z0-9_]\.(?:py|sh|toml|md|h|cpp|cu|cuh|json|txt|cmake|in))\b")

# Placeholders (configs/NAME.toml) and what CMake generates into the build tree.
PLACEHOLDER = re.compile(r"/[A-Z_]+\.[a-z]+$")
GENERATED = {"harness/measure/build_info.h", "harness/measure/build_commit.h"}


def naming_files():
    patterns = ["README.md", "CONTRIBUTING.md", "CMakeLists.txt", ".ci/run", "docs/**/*.md",
                "configs/*.toml", "scripts/**/*.sh", "scripts/**/*.py", "python/attnbench/**/*.py",
                "harness/**/*.h", "harness/**/*.cpp", "harness/**/*.cuh", "harness/**/*.in",
                "variants/**/*.h", "variants/**/*.cpp", "variants/**/*.cu"]
    for pattern in patterns:
        yield from sorted(REPO.glob(pattern))


def missing_paths():
    missing = []
    for source in naming_files():
        text = source.read_text(errors="replace")
        for match in NAMED_PATH.finditer(text):
            path = match.group(1)
            if PLACEHOLDER.search(path) or path in GENERATED or (REPO / path).exists():
                continue
            line = text.count("\n", 0, match.start()) + 1
            missing.append(f"{source.relative_to(REPO)}:{line}: {path}")
    return missing


def test_every_path_the_checkout_names_exists():
    assert missing_paths() == []


def test_the_scan_finds_a_path_in_prose_and_in_a_comment():
    # The pattern reads the forms the checkout writes paths in, so an empty list means something.
    assert NAMED_PATH.findall("see scripts/compare_runs.py, or `docs/gpu.md`.") == [
        "scripts/compare_runs.py", "docs/gpu.md"]
    assert NAMED_PATH.findall("// Generated from harness/measure/build_info.h.in: how") == [
        "harness/measure/build_info.h.in"]
    assert NAMED_PATH.findall("results/x and variants/cpu/flash_cpu/kernels_<isa>.cpp") == []
