// libFuzzer target over the whole pipeline a CI step runs: parse, validate, plan and rewrite, validate the
// output, serialize. Any input must end in a value (ok or an error), never a crash, leak or sanitizer report.
//
//   cmake -S . -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DDWDECONV_FUZZ=ON \
//         -DDWDECONV_SANITIZE=address,undefined && cmake --build build-fuzz --target fuzz_rewrite
//   build-fuzz/tests/fuzz/fuzz_rewrite -max_total_time=1800 corpus/ examples/ tests/bad_inputs/
//
// libonnx's shape inference runs in a forked child (onnx_io::infer_shapes_isolated); a crash there is
// contained, an error and not a fuzzer crash. With DWDECONV_FUZZ_CONTAINED_DIR=DIR set, each input whose
// inference crashed in the child is saved in DIR (contained-<hash>), so such crashes can still be triaged.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "onnx_io/model_io.h"
#include "onnx_io/validate.h"
#include "rewrite/rewriter.h"

namespace {

void save_contained(const std::string& bytes, const std::string& message) {
  static const char* const dir = std::getenv("DWDECONV_FUZZ_CONTAINED_DIR");
  if (dir == nullptr || message.find("ONNX shape inference crashed") == std::string::npos) return;
  uint64_t hash = 14695981039346656037ULL;  // FNV-1a, for a stable file name per input
  for (unsigned char c : bytes) hash = (hash ^ c) * 1099511628211ULL;
  char name[32];
  std::snprintf(name, sizeof name, "contained-%016llx", static_cast<unsigned long long>(hash));
  std::ofstream(std::string(dir) + "/" + name, std::ios::binary) << bytes;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dwdeconv;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  auto model = onnx_io::parse_model(bytes, "fuzz input");
  if (!model) return 0;
  if (auto valid = onnx_io::validate_model(*model, {}); !valid) {
    save_contained(bytes, valid.error().message);
    return 0;
  }
  for (bool explicit_pad : {false, true}) {
    onnx::ModelProto copy = *model;
    rewrite::RewriteOptions options;
    options.emit.explicit_pad = explicit_pad;
    auto result = rewrite::rewrite_model(copy, options);
    if (!result) continue;
    // The input passed validation, so an output that fails it is the rewriter's bug: stop and keep the input.
    if (!onnx_io::validate_model(copy, rewrite::emitted_node_names(*result))) __builtin_trap();
    (void)onnx_io::serialize_model(copy);
  }
  return 0;
}
