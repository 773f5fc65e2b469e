#pragma once
// Where the tests find the repository's files (examples/, tests/fixtures/, docs/): DWDECONV_SOURCE_DIR when ctest
// sets it, else the source tree the test was built from, so a test binary run by hand (or under the sanitizer step of
// .ci/run) reads the same files.
#include <cstdlib>
#include <string>

namespace dwdeconv::test {

inline std::string source_dir() {
  if (const char* env = std::getenv("DWDECONV_SOURCE_DIR"); env != nullptr && *env != '\0') return env;
  return DWDECONV_TEST_SOURCE_DIR;
}

}  // namespace dwdeconv::test
