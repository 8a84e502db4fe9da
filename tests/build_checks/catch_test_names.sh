#!/usr/bin/env bash
# ctest splits a discovered test's name at ';' (a CMake list separator): a Catch2 case whose name
# holds one becomes two ctest entries that match no case and pass having run nothing. So none may.
# Usage: tests/build_checks/catch_test_names.sh BUILD_DIR
set -euo pipefail
split=$("$1/attnbench_tests" --list-test-names-only | grep ';' || true)
if [ -n "$split" ]; then
  echo "Catch2 test names with ';' (ctest would run none of them):"
  echo "$split"
  exit 1
fi
echo "no Catch2 test name holds ';'"
