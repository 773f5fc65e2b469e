# Settings every target links: language standard, warnings, optional sanitizers.
if(NOT CMAKE_BUILD_TYPE AND NOT CMAKE_CONFIGURATION_TYPES)
  set(CMAKE_BUILD_TYPE RelWithDebInfo CACHE STRING "Build type" FORCE)
endif()

set(DWDECONV_SANITIZE "" CACHE STRING "Comma-separated sanitizers, e.g. address,undefined")
option(DWDECONV_FUZZ "Build the libFuzzer target tests/fuzz (needs clang)" OFF)

add_library(dwdeconv_settings INTERFACE)
target_compile_features(dwdeconv_settings INTERFACE cxx_std_17)
set(CMAKE_CXX_EXTENSIONS OFF)
target_compile_options(dwdeconv_settings INTERFACE -Wall -Wextra -Wpedantic -Wno-unused-parameter)
# No include root here: each library publishes its own (dwdeconv_public_headers below), so a library sees only the
# public headers of what it links, and internal headers stay internal. Tests, examples and benchmarks are white-box:
# their directories add the source root (tests/, examples/ and bench/CMakeLists.txt).

# dwdeconv_public_headers(TARGET DIR PRIVATE a.h b.h ...): every header of DIR but the PRIVATE ones, linked under
# <build>/include/TARGET/DIR/, which is TARGET's PUBLIC include root. Sources include them as "DIR/name.h"; a
# library's own internal headers are included by their bare name from beside them ("internal.h").
function(dwdeconv_public_headers target dir)
  cmake_parse_arguments(ARG "" "" "PRIVATE" ${ARGN})
  file(GLOB headers RELATIVE ${PROJECT_SOURCE_DIR}/${dir} CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${dir}/*.h)
  set(root ${PROJECT_BINARY_DIR}/include/${target})
  file(REMOVE_RECURSE ${root})
  file(MAKE_DIRECTORY ${root}/${dir})
  foreach(header IN LISTS headers)
    if(NOT header IN_LIST ARG_PRIVATE)
      file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${dir}/${header} ${root}/${dir}/${header} SYMBOLIC)
    endif()
  endforeach()
  target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${root}>)
endfunction()
if(DWDECONV_SANITIZE)
  target_compile_options(dwdeconv_settings INTERFACE -fsanitize=${DWDECONV_SANITIZE} -fno-omit-frame-pointer
                                                     -fno-sanitize-recover=all)
  target_link_options(dwdeconv_settings INTERFACE -fsanitize=${DWDECONV_SANITIZE})
endif()
if(DWDECONV_FUZZ)
  # Coverage instrumentation for every project target; the fuzz target itself links libFuzzer's main.
  target_compile_options(dwdeconv_settings INTERFACE -fsanitize=fuzzer-no-link)
endif()
