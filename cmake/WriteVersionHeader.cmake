# Writes cli/version.h from cli/version.h.in with the project version and the git revision of the sources.
# Run with cmake -P at configure time and again before every build, so --version follows commits and edits.
# configure_file rewrites the header only when its text changes, so an unchanged revision rebuilds nothing.
#
# In:  SOURCE_DIR, PROJECT_VERSION, INPUT, OUTPUT, and GIT_EXECUTABLE (empty when git is not installed).
# Out: @DWDECONV_GIT_REVISION@, e.g. "1a2b3c4" or "1a2b3c4, dirty", empty outside a checkout, and
#      @DWDECONV_FULL_VERSION@, e.g. "0.1.0 (git 1a2b3c4, dirty)", or "0.1.0" outside a checkout.
cmake_minimum_required(VERSION 3.18)

set(DWDECONV_GIT_REVISION "")
if(GIT_EXECUTABLE)
  execute_process(COMMAND "${GIT_EXECUTABLE}" rev-parse --show-toplevel
                  WORKING_DIRECTORY "${SOURCE_DIR}" RESULT_VARIABLE top_rc
                  OUTPUT_VARIABLE top_level OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  # Only this project's own checkout counts, not some other repository a source tarball was unpacked into.
  get_filename_component(source_real "${SOURCE_DIR}" REALPATH)
  get_filename_component(top_real "${top_level}" REALPATH)
  if(top_rc EQUAL 0 AND top_real STREQUAL source_real)
    execute_process(COMMAND "${GIT_EXECUTABLE}" rev-parse --short=7 HEAD
                    WORKING_DIRECTORY "${SOURCE_DIR}" RESULT_VARIABLE head_rc
                    OUTPUT_VARIABLE head OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(head_rc EQUAL 0 AND head MATCHES "^[0-9a-f]+$")
      set(DWDECONV_GIT_REVISION "${head}")
      # Tracked files only, like `git describe --dirty`. --no-optional-locks: read the index without
      # refreshing it, so a build never takes index.lock while someone commits in the same checkout.
      execute_process(COMMAND "${GIT_EXECUTABLE}" --no-optional-locks status --porcelain --untracked-files=no
                      WORKING_DIRECTORY "${SOURCE_DIR}" RESULT_VARIABLE status_rc
                      OUTPUT_VARIABLE changes OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
      if(status_rc EQUAL 0 AND NOT changes STREQUAL "")
        string(APPEND DWDECONV_GIT_REVISION ", dirty")
      endif()
    endif()
  endif()
endif()

if(DWDECONV_GIT_REVISION)
  set(DWDECONV_FULL_VERSION "${PROJECT_VERSION} (git ${DWDECONV_GIT_REVISION})")
else()
  set(DWDECONV_FULL_VERSION "${PROJECT_VERSION}")
endif()
configure_file("${INPUT}" "${OUTPUT}" @ONLY)
