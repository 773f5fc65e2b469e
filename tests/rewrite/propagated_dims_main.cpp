// Test-only: prints, for each model named on the command line, the dims the tool's shape propagation computes for
// each main-graph output, one JSON object a line: {"model": "...", "outputs": {"y": [1, 8, 5, null]}}, null where a
// dim is not known (symbolic or unknown), "outputs": {"y": null} where not even the rank is. A model that does not
// load prints {"model": "...", "error": "..."}. The differential test of the shape rules against ONNX Runtime
// (tests/e2e/check_shape_rules_ort.py) compares these with the shapes ORT computes.
#include <cstdio>
#include <string>

#include "onnx_io/model_io.h"
#include "rewrite/shape_propagation.h"

namespace {

// A JSON string of `text`: every byte outside printable ASCII as \u00XX, so any name prints as valid JSON.
std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c >= 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

}  // namespace

int main(int argc, char** argv) {
  using namespace dwdeconv;
  for (int i = 1; i < argc; ++i) {
    const std::string path = argv[i];
    auto model = onnx_io::load_model(path);
    if (!model) {
      std::printf("{\"model\": %s, \"error\": %s}\n", json_string(path).c_str(), json_string(model.error().message).c_str());
      continue;
    }
    const auto propagated = rewrite::propagate_types(*model);
    std::string line = "{\"model\": " + json_string(path) + ", \"rounds\": " + std::to_string(propagated.rounds) + ", \"outputs\": {";
    for (int k = 0; k < model->graph().output_size(); ++k) {
      const std::string& name = model->graph().output(k).name();
      line += (k ? ", " : "") + json_string(name) + ": ";
      const auto* type = propagated.types.find(0, name);
      if (type == nullptr || !type->has_tensor_type() || !type->tensor_type().has_shape()) {
        line += "null";
        continue;
      }
      line += "[";
      const auto& shape = type->tensor_type().shape();
      for (int d = 0; d < shape.dim_size(); ++d) {
        line += d ? ", " : "";
        line += shape.dim(d).has_dim_value() ? std::to_string(shape.dim(d).dim_value()) : "null";
      }
      line += "]";
    }
    std::printf("%s}}\n", line.c_str());
  }
  return 0;
}
