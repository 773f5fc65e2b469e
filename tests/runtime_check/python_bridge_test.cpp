// The protocol between the binary and the Python runtimes, from this side: the tensor lists the bridge writes are
// bridge.schema.json's tensor_list, and the answer lines it reads are taken by their named keys, a line the schema
// refuses being refused here too (tests/python/bridge_test.py checks what the Python side writes).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/text.h"
#include "runtime_check/python_answer.h"
#include "runtime_check/tensor_io.h"
#include "tests/runtime_check/bridge_schema_validator.h"
#include "tests/support/source_dir.h"

namespace dwdeconv::runtime_check {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

test::BridgeSchemaValidator validator() {
  std::ifstream in(test::source_dir() + "/python/dwdeconv_rewrite/runtimes/bridge.schema.json");
  std::stringstream text;
  text << in.rdbuf();
  return test::BridgeSchemaValidator(json::parse(text.str()));
}

std::string joined(const std::vector<std::string>& problems) {
  std::string out;
  for (const auto& p : problems) out += p + "\n";
  return out;
}

// A scratch folder of this test, removed with everything in it.
struct Folder {
  fs::path path = fs::temp_directory_path() / ("dwdeconv-bridge-test-" + std::to_string(::getpid()));
  Folder() { fs::remove_all(path); }
  ~Folder() { fs::remove_all(path); }
};

// Answer lines of each kind, written out by hand from the schema's definitions: what a Python side may say.
const std::vector<std::string> kCheckAnswer = {
    R"j({"kind": "runtime", "name": "ort"})j",
    R"j({"kind": "label", "text": "ONNX Runtime 1.32.0 (CPU provider)"})j",
    R"j({"kind": "version", "package": "onnxruntime", "version": "1.32.0"})j",
    R"j({"kind": "precision", "side": "original", "precision": "int8"})j",
    R"j({"kind": "outside", "side": "original", "ops": "GATHER x2, SPLIT"})j",
    R"j({"kind": "note", "side": "original", "text": "the quantizer left Resize in float"})j",
    R"j({"kind": "precision", "side": "rewritten", "precision": "int8"})j",
    R"j({"kind": "output", "side": "rewritten", "name": "y\nz", "file": "/nowhere/rewritten_0.npy"})j",
    R"j({"kind": "quant", "side": "rewritten", "name": "y\nz", "scale": 0.25, "zero_point": -3})j",
    R"j({"kind": "sample", "side": "original", "ms": 1.5})j",
    R"j({"kind": "sample", "side": "rewritten", "ms": 0.75})j",
    R"j({"kind": "node", "side": "rewritten", "node": "up/phase_0", "op": "Conv", "ms": 0.125, "inputs": ["x", ""], "outputs": ["p0"]})j",
};

TEST_CASE("the bridge writes each input set as the schema's tensor_list", "[python_bridge]") {
  Folder folder;
  Tensor a;
  a.reshape(onnx::TensorProto::FLOAT, {1, 2});
  a.f[0] = 1.5F;
  a.f[1] = -2.0F;
  Tensor b;
  b.reshape(onnx::TensorProto::INT64, {3});
  b.i = {7, 8, 9};
  // Graph input order, not name order; a name with a line break is carried as it is.
  REQUIRE(write_tensor_list(folder.path, {NamedTensor{"z\nimage", a}, NamedTensor{"a", b}}));
  std::ifstream in(folder.path / kTensorListFile);
  const json list = json::parse(in);
  const auto problems = validator().problems(list, "tensor_list");
  INFO(list.dump() << "\n" << joined(problems));
  CHECK(problems.empty());
  REQUIRE(list.at("tensors").size() == 2);
  CHECK(list.at("tensors")[0] == json{{"name", "z\nimage"}, {"file", "0.pb"}});
  CHECK(list.at("tensors")[1] == json{{"name", "a"}, {"file", "1.pb"}});
  // Each file holds the tensor its entry names.
  auto first = load_tensor_file((folder.path / "0.pb").string());
  auto second = load_tensor_file((folder.path / "1.pb").string());
  REQUIRE(first);
  REQUIRE(second);
  CHECK(first->name == "z\nimage");
  CHECK(first->tensor.dims == std::vector<int64_t>{1, 2});
  CHECK(first->tensor.f[1] == -2.0F);
  CHECK(second->name == "a");
  CHECK(second->tensor.i == std::vector<int64_t>{7, 8, 9});
}

TEST_CASE("the bridge reads a check answer by its named keys, numbers as numbers", "[python_bridge]") {
  const auto schema = validator();
  std::string text;
  for (const auto& line : kCheckAnswer) {
    const auto problems = schema.problems(json::parse(line), "answer");
    INFO(line << "\n" << joined(problems));
    CHECK(problems.empty());
    text += line + "\n";
  }
  const auto answer = parse_check_answer(text);
  REQUIRE(answer);
  const PythonRun& run = answer->run;
  CHECK(run.runtime.label == "ONNX Runtime 1.32.0 (CPU provider)");
  CHECK(run.runtime.versions == std::vector<std::pair<std::string, std::string>>{{"onnxruntime", "1.32.0"}});
  CHECK(answer->precisions == std::vector<std::pair<std::string, std::string>>{{"original", "int8"}, {"rewritten", "int8"}});
  CHECK(run.precision == "int8");
  CHECK(run.original_outside == "GATHER x2, SPLIT");
  CHECK(run.rewritten_outside.empty());
  CHECK(run.notes == std::vector<std::string>{"original: the quantizer left Resize in float"});
  REQUIRE(answer->outputs.size() == 1);
  CHECK(answer->outputs[0].side == "rewritten");
  CHECK(answer->outputs[0].name == "y\nz");
  CHECK(answer->outputs[0].file == "/nowhere/rewritten_0.npy");
  REQUIRE(run.rewritten_steps.count("y\nz") == 1);
  CHECK(run.rewritten_steps.at("y\nz").scale == 0.25);
  CHECK(run.rewritten_steps.at("y\nz").zero_point == -3);
  CHECK(run.original_steps.empty());
  CHECK(run.original_samples_ms == std::vector<double>{1.5});
  CHECK(run.rewritten_samples_ms == std::vector<double>{0.75});
  REQUIRE(run.rewritten_nodes.size() == 1);
  CHECK(run.rewritten_nodes[0].node == "up/phase_0");
  CHECK(run.rewritten_nodes[0].op == "Conv");
  CHECK(run.rewritten_nodes[0].ms == 0.125);
  CHECK(run.rewritten_nodes[0].inputs == std::vector<std::string>{"x", ""});  // an optional input left out
  CHECK(run.rewritten_nodes[0].outputs == std::vector<std::string>{"p0"});
  CHECK_FALSE(answer->failure);
  CHECK_FALSE(answer->import_failure);
  CHECK_FALSE(answer->usage_error);
}

TEST_CASE("the bridge reads the error lines apart by their stage", "[python_bridge]") {
  const auto schema = validator();
  const std::string conversion = R"j({"kind": "error", "stage": "onnx2tf", "side": "rewritten", "message": "no Resize"})j";
  const std::string usage = R"j({"kind": "error", "stage": "usage", "message": "--precision int8 needs --calibration DIR"})j";
  const std::string import =
      R"j({"kind": "error", "stage": "import", "runtime": "ort", "message": "importing onnxruntime failed: OSError: x", "module": "onnxruntime", "pip": "onnxruntime"})j";
  for (const auto& line : {conversion, usage, import}) {
    const auto problems = schema.problems(json::parse(line), "answer");
    INFO(line << "\n" << joined(problems));
    CHECK(problems.empty());
  }
  const auto failed = parse_check_answer(conversion + "\n");
  REQUIRE(failed);
  REQUIRE(failed->failure);
  CHECK(failed->failure->stage == "onnx2tf");
  CHECK(failed->failure->side == "rewritten");
  CHECK(failed->failure->message == "no Resize");
  const auto refused = parse_check_answer(usage + "\n");
  REQUIRE(refused);
  CHECK(refused->usage_error == std::optional<std::string>("--precision int8 needs --calibration DIR"));
  const auto broken = parse_probe_answer(R"j({"kind": "python", "executable": "/usr/bin/python3", "version": "3.11.2"})j"
                                         "\n" +
                                         import + "\n");
  REQUIRE(broken);
  CHECK(broken->executable == "/usr/bin/python3");
  CHECK(broken->version == "3.11.2");
  REQUIRE(broken->import_failure);
  CHECK(broken->import_failure->module == "onnxruntime");
  CHECK(broken->import_failure->pip == "onnxruntime");
  CHECK(broken->import_failure->message == "importing onnxruntime failed: OSError: x");
  const auto missing = parse_probe_answer(R"j({"kind": "python", "executable": "p", "version": "3.10.0"})j"
                                          "\n"
                                          R"j({"kind": "missing", "module": "ai_edge_litert", "pip": "ai-edge-litert"})j"
                                          "\n");
  REQUIRE(missing);
  CHECK(missing->missing_pip == std::vector<std::string>{"ai-edge-litert"});
}

TEST_CASE("an answer line the schema refuses is refused, naming the line", "[python_bridge]") {
  const auto schema = validator();
  // The positional arrays of before, a number as text, a key missing, a side that is neither: none is an answer line.
  const std::vector<std::string> bad = {
      R"j(["sample", "original", 1.5])j",
      R"j({"kind": "sample", "side": "original", "ms": "1.5"})j",
      R"j({"kind": "output", "side": "original", "name": "y"})j",
      R"j({"kind": "sample", "side": "both", "ms": 1.5})j",
      R"j({"kind": "node", "side": "original", "node": "n", "op": "Conv", "ms": 1, "inputs": "x", "outputs": []})j",
      R"j({"kind": "quant", "side": "original", "name": "y", "scale": "0.5", "zero_point": 0})j",
      R"j({"kind": "label"})j",
      R"j({"text": "no kind"})j",
      "not JSON",
  };
  for (const auto& line : bad) {
    INFO(line);
    if (line != "not JSON") CHECK_FALSE(schema.problems(json::parse(line), "answer").empty());
    const std::string text = kCheckAnswer[0] + "\n" + line + "\n" + kCheckAnswer[1] + "\n";
    const auto answer = parse_check_answer(text);
    REQUIRE_FALSE(answer);
    CHECK(answer.error().message == core::printable_line(line));
  }
  const auto probe = parse_probe_answer(R"j({"kind": "missing", "module": "onnx"})j"
                                        "\n");
  CHECK_FALSE(probe);
}

}  // namespace
}  // namespace dwdeconv::runtime_check
