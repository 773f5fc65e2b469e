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
target_include_directories(dwdeconv_settings INTERFACE ${PROJECT_SOURCE_DIR})
if(DWDECONV_SANITIZE)
  target_compile_options(dwdeconv_settings INTERFACE -fsanitize=${DWDECONV_SANITIZE} -fno-omit-frame-pointer
                                                     -fno-sanitize-recover=all)
  target_link_options(dwdeconv_settings INTERFACE -fsanitize=${DWDECONV_SANITIZE})
endif()
if(DWDECONV_FUZZ)
  # Coverage instrumentation for every project target; the fuzz target itself links libFuzzer's main.
  target_compile_options(dwdeconv_settings INTERFACE -fsanitize=fuzzer-no-link)
endif()
