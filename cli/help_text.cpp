#include "cli/help_text.h"

#include <map>

namespace dwdeconv::cli {

std::string app_description() {
  return "Rewrites the upsamplers of an ONNX model for XNNPACK-based runtimes (LiteRT, ExecuTorch, a custom XNNPACK\n"
         "runtime): depthwise ConvTranspose, and the hand-written forms nearest x mask, zero insertion, upfirdn2d and\n"
         "nearest + Conv, become s*s stride-1 Convs + Concat + DepthToSpace, which XNNPACK runs as fast depthwise\n"
         "kernels. --verify checks the result on XNNPACK; --dry-run shows each node's decision and why.\n\n"
         "Where it does not pay off: ONNX Runtime's CPU provider (use --target ort, which keeps nearly everything);\n"
         "dense and grouped ConvTransposes, which XNNPACK already runs well (kept); and models whose time is mostly\n"
         "elsewhere (a MI-GAN-like generator: 1.38x on this tool's executor, though its upsamplers ran 19x faster).";
}

void use_readable_value_names(CLI::App& app) {
  static const std::map<std::string, std::string> kNames = {
      {"models", "MODEL|DIR..."},
      {"output", "OUT"},
      {"out-dir", "DIR"},
      {"jobs", "N"},
      {"only", "NAME"},
      {"skip", "NAME"},
      {"forms", "LIST"},
      {"target", "NAME"},
      {"max-phases", "N"},
      {"report", "FILE"},
      {"compare", "OTHER"},
      {"input-shape", "[NAME:]D,D,..."},
      {"input", "[NAME=]FILE"},
      {"seed", "N"},
      {"atol", "X"},
      {"rtol", "X"},
      {"runs", "N"},
      {"threads", "N"},
      {"external-data", "NAME"},
      {"external-data-threshold", "BYTES"},
      {"suffix", "TEXT"},
  };
  for (CLI::Option* option : app.get_options()) {
    if (option->get_type_size() == 0) continue;  // a flag takes no value
    const std::string key = option->get_lnames().empty() ? option->get_name() : option->get_lnames().front();
    const auto it = kNames.find(key);
    // "UINT:INT in [1 - 256]": the type, without the validator's text.
    const std::string type = option->get_type_name();
    option->option_text(it != kNames.end() ? it->second : type.substr(0, type.find(':')));
  }
}

}  // namespace dwdeconv::cli
