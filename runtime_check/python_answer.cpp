#include "python_answer.h"

#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/text.h"

namespace dwdeconv::runtime_check {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The string at `key` of an answer line; nlohmann throws (type_error, out_of_range) when it is missing or not a
// string, which makes the line unreadable.
std::string text(const json& line, const char* key) { return line.at(key).get<std::string>(); }

// The number at `key`: a JSON number, never text to be parsed.
double number(const json& line, const char* key) {
  const json& value = line.at(key);
  if (!value.is_number()) throw json::type_error::create(302, std::string(key) + " is not a number", &value);
  return value.get<double>();
}

std::vector<std::string> names(const json& line, const char* key) { return line.at(key).get<std::vector<std::string>>(); }

// A side's field of `run`: the original's or the rewritten's.
template <typename T>
T& side_of(const json& line, T& original, T& rewritten) {
  const std::string side = text(line, "side");
  if (side != "original" && side != "rewritten") throw json::other_error::create(501, "side " + side, &line);
  return side == "original" ? original : rewritten;
}

ImportFailure import_failure(const json& line) {
  return ImportFailure{text(line, "runtime"), text(line, "message"), text(line, "module"), text(line, "pip")};
}

// Reads each line of `answer` with `read` (by its "kind"); the first line that is not an answer line ends it with
// that line as the error.
core::Status read_lines(const std::string& answer, const std::function<void(const std::string& kind, const json& line)>& read) {
  std::istringstream in(answer);
  for (std::string raw; std::getline(in, raw);) {
    if (raw.empty()) continue;
    try {
      const json line = json::parse(raw);
      if (!line.is_object()) throw json::other_error::create(501, "not an object", &line);
      read(text(line, "kind"), line);
    } catch (const json::exception&) {
      return core::cannot_verify(core::printable_line(raw.substr(0, 200)));
    }
  }
  return core::Ok{};
}

void read_error(const json& line, CheckAnswer& answer) {
  const std::string stage = text(line, "stage");
  if (stage == "import") {
    answer.import_failure = import_failure(line);
  } else if (stage == "usage") {
    answer.usage_error = text(line, "message");
  } else {
    answer.failure = StageFailure{stage, text(line, "side"), text(line, "message")};
  }
}

// One line of a check answer into `answer`, by kind.
void read_check_line(const std::string& kind, const json& line, CheckAnswer& answer) {
  static const std::map<std::string, std::function<void(const json&, CheckAnswer&)>> kReaders = {
      {"label", [](const json& l, CheckAnswer& a) { a.run.runtime.label = text(l, "text"); }},
      {"version", [](const json& l, CheckAnswer& a) { a.run.runtime.versions.emplace_back(text(l, "package"), text(l, "version")); }},
      {"outside", [](const json& l, CheckAnswer& a) { side_of(l, a.run.original_outside, a.run.rewritten_outside) = text(l, "ops"); }},
      {"note", [](const json& l, CheckAnswer& a) { a.run.notes.push_back(text(l, "side") + ": " + text(l, "text")); }},
      {"precision",
       [](const json& l, CheckAnswer& a) {
         std::string side = text(l, "side");
         side_of(l, side, side);  // refuses a side that is neither
         a.precisions.emplace_back(side, text(l, "precision"));
         a.run.precision = text(l, "precision");
       }},
      {"output",
       [](const json& l, CheckAnswer& a) {
         std::string side = text(l, "side");
         side_of(l, side, side);
         a.outputs.push_back(OutputFile{side, text(l, "name"), text(l, "file")});
       }},
      {"sample",
       [](const json& l, CheckAnswer& a) { side_of(l, a.run.original_samples_ms, a.run.rewritten_samples_ms).push_back(number(l, "ms")); }},
      {"node",
       [](const json& l, CheckAnswer& a) {
         NodeMs node{text(l, "node"), text(l, "op"), number(l, "ms"), names(l, "inputs"), names(l, "outputs")};
         side_of(l, a.run.original_nodes, a.run.rewritten_nodes).push_back(std::move(node));
       }},
      {"quant",
       [](const json& l, CheckAnswer& a) {
         const QuantStep q{number(l, "scale"), number(l, "zero_point")};
         // A step that is no positive finite number counts nothing: the output is judged in float.
         if (std::isfinite(q.scale) && q.scale > 0 && std::isfinite(q.zero_point)) {
           side_of(l, a.run.original_steps, a.run.rewritten_steps)[text(l, "name")] = q;
         }
       }},
      {"error", read_error},
      {"runtime", [](const json& l, CheckAnswer&) { (void)text(l, "name"); }},
  };
  if (const auto reader = kReaders.find(kind); reader != kReaders.end()) reader->second(line, answer);
}

}  // namespace

core::Status write_tensor_list(const fs::path& dir, const std::vector<NamedTensor>& set) {
  // A short write (a full disk) would hand the runtime truncated inputs: every file is checked.
  const auto write_file = [](const fs::path& path, const std::string& bytes) -> core::Status {
    std::ofstream f(path, std::ios::binary);
    f << bytes;
    f.close();
    if (!f) return core::io_error("--runtime: cannot write " + path.string());
    return core::Ok{};
  };
  std::error_code ec;
  fs::create_directories(dir, ec);
  json tensors = json::array();
  for (size_t k = 0; k < set.size(); ++k) {
    const std::string file = std::to_string(k) + ".pb";
    if (auto written = write_file(dir / file, tensor_to_proto(set[k].tensor, set[k].name).SerializeAsString()); !written) {
      return written.error();
    }
    tensors.push_back({{"name", set[k].name}, {"file", file}});
  }
  // Names are bytes from the model: written as they are, invalid UTF-8 replaced rather than refused.
  return write_file(dir / kTensorListFile, json{{"tensors", tensors}}.dump(-1, ' ', false, json::error_handler_t::replace) + "\n");
}

core::Result<ProbeAnswer> parse_probe_answer(const std::string& text_in) {
  ProbeAnswer answer;
  auto read = read_lines(text_in, [&answer](const std::string& kind, const json& line) {
    if (kind == "python") {
      answer.executable = text(line, "executable");
      answer.version = text(line, "version");
    } else if (kind == "missing") {
      (void)text(line, "module");
      answer.missing_pip.push_back(text(line, "pip"));
    } else if (kind == "error" && text(line, "stage") == "import") {
      answer.import_failure = import_failure(line);
    }
  });
  if (!read) return read.error();
  return answer;
}

core::Result<CheckAnswer> parse_check_answer(const std::string& text_in) {
  CheckAnswer answer;
  auto read = read_lines(text_in, [&answer](const std::string& kind, const json& line) { read_check_line(kind, line, answer); });
  if (!read) return read.error();
  return answer;
}

}  // namespace dwdeconv::runtime_check
