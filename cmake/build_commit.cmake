# Writes the commit the sources are at into OUTPUT (from TEMPLATE), run at every build: the
# binary's manifests and --version name the commit it was built from, not the one its checkout
# is at when it runs. configure_file leaves OUTPUT untouched when the commit has not changed, so
# nothing recompiles then. "+dirty": tracked files differed from the commit; "unknown": no git.
execute_process(COMMAND git -C "${SOURCE_DIR}" rev-parse HEAD
                OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE
                RESULT_VARIABLE status ERROR_QUIET)
if(NOT status EQUAL 0 OR commit STREQUAL "")
  set(ATTNBENCH_BUILD_COMMIT "unknown")
else()
  execute_process(COMMAND git -C "${SOURCE_DIR}" status --porcelain --untracked-files=no
                  OUTPUT_VARIABLE changes OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(changes STREQUAL "")
    set(ATTNBENCH_BUILD_COMMIT "${commit}")
  else()
    set(ATTNBENCH_BUILD_COMMIT "${commit}+dirty")
  endif()
endif()
configure_file("${TEMPLATE}" "${OUTPUT}" @ONLY)
