#include "cli/batch_inputs.h"

#include <algorithm>
#include <filesystem>

namespace dwdeconv::cli {

core::Result<Options> expand_model_directories(const Options& opt) {
  namespace fs = std::filesystem;
  Options expanded = opt;
  expanded.models.clear();
  for (const auto& model : opt.models) {
    std::error_code ec;
    if (model == "-" || !fs::is_directory(model, ec)) {
      expanded.models.push_back(model);
      continue;
    }
    if (!opt.output.empty()) {
      return core::Error{core::ErrorKind::kUsage, model + " is a directory: its models take --out-dir DIR (or --dry-run, --check), not -o"};
    }
    std::vector<std::string> found;
    for (fs::directory_iterator it(model, ec), end; !ec && it != end; it.increment(ec)) {
      std::error_code kind;
      if (it->path().extension() == ".onnx" && it->is_regular_file(kind)) found.push_back(it->path().string());
    }
    if (ec) return core::Error{core::ErrorKind::kIo, model + ": cannot list the directory: " + ec.message()};
    if (found.empty()) return core::Error{core::ErrorKind::kUsage, model + " is a directory with no .onnx files in it"};
    std::sort(found.begin(), found.end());
    expanded.models.insert(expanded.models.end(), found.begin(), found.end());
    expanded.from_directory = true;
  }
  // One model found in a directory is still a batch: its lines name it, and it goes to --out-dir.
  return expanded;
}

}  // namespace dwdeconv::cli
