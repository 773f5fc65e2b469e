// The runtimes' registry the bridge reads (python_bridge.cpp): the text of a registry.json, defined by the library
// dwdeconv_runtime_registry (runtime_check/CMakeLists.txt) links in. The binary's is
// python/dwdeconv_rewrite/runtimes/registry.json's; a test binary may link another registry in its place (an object
// library listed before runtime_check), which is how a runtime is added through the registry alone in the tests.
#pragma once

namespace dwdeconv::runtime_check {

// The registry's JSON text, embedded at build time.
extern const char* const kRuntimeRegistryJson;

}  // namespace dwdeconv::runtime_check
