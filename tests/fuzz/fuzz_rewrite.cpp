// libFuzzer target over the whole pipeline a CI step runs: parse, validate, plan and rewrite, validate the
// output, serialize. Any input must end in a value (ok or an error), never a crash, leak or sanitizer report.
//
//   cmake -S . -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DDWDECONV_FUZZ=ON \
//         -DDWDECONV_SANITIZE=address,undefined && cmake --build build-fuzz --target fuzz_rewrite
//   build-fuzz/tests/fuzz/fuzz_rewrite -max_total_time=1800 corpus/ examples/ tests/bad_inputs/
#include <cstddef>
#include <cstdint>
#include <string>

#include "onnx_io/model_io.h"
#include "onnx_io/validate.h"
#include "rewrite/rewriter.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dwdeconv;
  auto model = onnx_io::parse_model(std::string(reinterpret_cast<const char*>(data), size), "fuzz input");
  if (!model) return 0;
  if (!onnx_io::validate_model(*model, {})) return 0;
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
