#include "cli/input_shape.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <set>

#include "core/text.h"
#include "runtime_check/tensor_io.h"

namespace dwdeconv::cli {
namespace {

constexpr const char* kSpellings =
    "NAME:1,3,256,256, NAME:[1,3,256,256], NAME=1x3x256x256, or a bare 1,3,256,256 for a model with one input";

core::Error usage(const std::string& text, const std::string& problem) {
  return core::Error{core::ErrorKind::kUsage, "--input-shape '" + text + "': " + problem + " (write " + kSpellings + ")"};
}

}  // namespace

core::Result<InputShapeArg> parse_input_shape_arg(const std::string& text) {
  InputShapeArg arg;
  arg.text = text;
  const auto sep = text.find_last_of(":=");
  std::string dims_text = sep == std::string::npos ? text : text.substr(sep + 1);
  if (sep != std::string::npos) {
    arg.name = text.substr(0, sep);
    if (arg.name.empty()) return usage(text, "the name before '" + std::string(1, text[sep]) + "' is empty");
  }
  if (!dims_text.empty() && dims_text.front() == '[') {
    if (dims_text.back() != ']') return usage(text, "'[' without a closing ']'");
    dims_text = dims_text.substr(1, dims_text.size() - 2);
  }
  if (dims_text.empty()) return usage(text, "no dims");
  const bool commas = dims_text.find(',') != std::string::npos, exes = dims_text.find('x') != std::string::npos;
  if (commas && exes) return usage(text, "dims separated by both ',' and 'x'");
  const char delimiter = exes ? 'x' : ',';
  size_t start = 0;
  while (true) {
    const size_t end = std::min(dims_text.find(delimiter, start), dims_text.size());
    const std::string item = dims_text.substr(start, end - start);
    if (item.empty()) return usage(text, "an empty dim");
    int64_t dim = 0;
    const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), dim);
    if (item.size() > 1 && item[0] == '-' && item.find_first_not_of("0123456789", 1) == std::string::npos) {
      return usage(text, "dim '" + item + "' is negative: dims must be positive");
    }
    if (item.find_first_not_of("0123456789") != std::string::npos || ec == std::errc::invalid_argument) {
      return usage(text, "'" + item + "' is not a whole number (symbolic dims need a value to run)");
    }
    if (ec == std::errc::result_out_of_range || ptr != item.data() + item.size()) return usage(text, "dim '" + item + "' is beyond int64");
    // A 0 dim leaves nothing to compare, and a verifier must not pass what it did not check.
    if (dim == 0) return usage(text, "a 0 dim: there would be nothing to run");
    arg.dims.push_back(dim);
    if (end == dims_text.size()) break;
    start = end + 1;
  }
  // The size checks (element and byte counts, physical memory) of the executor's own parser.
  std::string canonical = "x=";
  for (size_t i = 0; i < arg.dims.size(); ++i) canonical += (i ? "x" : "") + std::to_string(arg.dims[i]);
  if (auto sized = runtime_check::parse_input_shape(canonical); !sized) {
    return core::Error{core::ErrorKind::kUsage, "--input-shape '" + text + "': " + sized.error().message};
  }
  return arg;
}

core::Result<std::map<std::string, std::vector<int64_t>>> resolve_input_shapes(const std::vector<InputShapeArg>& args,
                                                                               const onnx::ModelProto& model,
                                                                               const std::string& model_path) {
  std::map<std::string, std::vector<int64_t>> shapes;
  std::set<std::string> initializers;
  for (const auto& init : model.graph().initializer()) initializers.insert(init.name());
  std::vector<std::string> inputs;
  for (const auto& in : model.graph().input()) {
    if (initializers.count(in.name()) == 0) inputs.push_back(in.name());
  }
  for (const auto& arg : args) {
    std::string name = arg.name;
    if (name.empty()) {
      if (inputs.size() != 1) {
        std::string list;
        for (const auto& n : inputs) list += (list.empty() ? "'" : ", '") + n + "'";
        return core::Error{core::ErrorKind::kUsage, "--input-shape '" + arg.text + "' names no input, and " + model_path + " has " +
                                                        std::to_string(inputs.size()) + " graph inputs" +
                                                        (list.empty() ? "" : " (" + list + ")") + ": write NAME:" + arg.text};
      }
      name = inputs.front();
    }
    if (!shapes.emplace(name, arg.dims).second) {
      return core::Error{core::ErrorKind::kUsage, "--input-shape gives the shape of '" + name + "' twice"};
    }
  }
  return shapes;
}

core::Status check_input_shape_names(const std::vector<InputShapeArg>& args, const onnx::ModelProto& model, const std::string& model_path) {
  if (auto resolved = resolve_input_shapes(args, model, model_path); !resolved) return resolved.error();
  std::set<std::string> tensors, initializers;
  for (const auto& init : model.graph().initializer()) initializers.insert(init.name());
  std::string inputs;
  for (const auto& in : model.graph().input()) {
    if (initializers.count(in.name()) != 0) continue;
    tensors.insert(in.name());
    inputs += (inputs.empty() ? "'" : ", '") + in.name() + "'";
  }
  for (const auto& node : model.graph().node()) tensors.insert(node.output().begin(), node.output().end());
  for (const auto& arg : args) {
    if (arg.name.empty() || tensors.count(arg.name) != 0) continue;
    return core::Error{core::ErrorKind::kUsage,
                       "--input-shape '" + arg.text + "': " + model_path + " has no graph input or tensor '" + arg.name +
                           "' in its main graph (graph inputs: " + (inputs.empty() ? std::string("none") : inputs) + ")"};
  }
  return core::Ok{};
}

std::string input_shapes_file_of(const std::string& model_path) {
  if (model_path == "-") return "";
  const std::string suffix = ".onnx";
  const bool onnx = model_path.size() > suffix.size() && model_path.compare(model_path.size() - suffix.size(), suffix.size(), suffix) == 0;
  return (onnx ? model_path.substr(0, model_path.size() - suffix.size()) : model_path) + ".input-shapes";
}

core::Result<std::optional<std::vector<InputShapeArg>>> read_input_shapes_file(const std::string& path) {
  constexpr size_t kMaxBytes = 64 * 1024;  // hundreds of inputs' shapes; a larger file is not a shape list
  const std::string shown = core::printable(path);
  struct stat st {};
  if (path.empty() || ::stat(path.c_str(), &st) != 0) {
    if (path.empty() || errno == ENOENT || errno == ENOTDIR) return std::optional<std::vector<InputShapeArg>>{};
    return core::io_error("cannot read the input-shapes file " + shown + ": " + std::strerror(errno));
  }
  // A FIFO would block the run and a device could be endless: a side file is a regular file, or an error.
  if (!S_ISREG(st.st_mode)) return core::Error{core::ErrorKind::kUsage, shown + ": the input-shapes file is not a regular file"};
  if (static_cast<uint64_t>(st.st_size) > kMaxBytes) {
    return core::Error{core::ErrorKind::kUsage, shown + ": the input-shapes file holds " + std::to_string(st.st_size) +
                                                    " bytes, more than the 65536 a list of shapes needs"};
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return core::io_error("cannot read the input-shapes file " + shown + ": " + std::strerror(errno));
  std::string text;
  char buf[4096];
  while (text.size() <= kMaxBytes) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return core::io_error("cannot read the input-shapes file " + shown + ": " + std::strerror(err));
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  if (text.size() > kMaxBytes) {
    return core::Error{core::ErrorKind::kUsage, shown + ": the input-shapes file holds more than the 65536 bytes a list of shapes needs"};
  }
  std::vector<InputShapeArg> shapes;
  size_t number = 0, start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    start = end + 1;
    ++number;
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    line = line.substr(first, line.find_last_not_of(" \t\r") - first + 1);
    auto parsed = parse_input_shape_arg(line);
    if (!parsed) return core::Error{core::ErrorKind::kUsage, shown + " line " + std::to_string(number) + ": " + parsed.error().message};
    shapes.push_back(std::move(*parsed));
  }
  return std::optional<std::vector<InputShapeArg>>{std::move(shapes)};
}

core::Result<std::vector<InputShapeArg>> merge_input_shapes(const std::vector<InputShapeArg>& given, const std::vector<InputShapeArg>& side,
                                                            const onnx::ModelProto& model, const std::string& model_path,
                                                            const std::string& side_path, std::vector<std::string>& overridden) {
  const std::string shown = core::printable(side_path);
  auto from_side = resolve_input_shapes(side, model, model_path);
  if (!from_side) return core::Error{from_side.error().kind, shown + ": " + from_side.error().message};
  if (auto named = check_input_shape_names(side, model, model_path); !named)
    return core::Error{named.error().kind, shown + ": " + named.error().message};
  auto from_line = resolve_input_shapes(given, model, model_path);
  if (!from_line) return from_line.error();
  std::vector<InputShapeArg> merged = given;
  for (const auto& arg : side) {
    InputShapeArg named = arg;
    if (named.name.empty()) named.name = from_side->begin()->first;  // a bare shape: the model has one input
    if (from_line->count(named.name) != 0) {
      overridden.push_back(arg.text);
      continue;
    }
    merged.push_back(std::move(named));
  }
  return merged;
}

}  // namespace dwdeconv::cli
