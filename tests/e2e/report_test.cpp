// End-to-end tests of the report a program reads: schema_version on every object, cpu and outside_delegate as
// structures, the report of a usage error once --report PATH was read (never over a file the run reads or writes),
// and the copy the binary leaves in DWDECONV_REPORT_ARCHIVE for the schema check (tests/CMakeLists.txt).
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "tests/e2e/cli_runner.h"

using namespace dwdeconv::test;
using json = nlohmann::ordered_json;  // in the order the report has its members

namespace {

// Runs the binary inside `dir` with `args` (shell words, paths relative to `dir`).
RunResult run_in(const TempDir& dir, const std::string& args) {
  return run_shell("cd '" + dir.path.string() + "' && '" + DWDECONV_CLI + "' " + args, dir);
}

json read_json(const fs::path& p) {
  REQUIRE(fs::exists(p));
  return json::parse(read_file(p));
}

}  // namespace

TEST_CASE("every report object says its schema_version, a batch's each", "[e2e][report]") {
  TempDir dir;
  dir.copy_example();
  fs::copy_file(dir.path / "model.onnx", dir.path / "b.onnx");
  REQUIRE(run_in(dir, "model.onnx --dry-run --report r.json").exit_code == 0);
  const json single = read_json(dir.path / "r.json");
  CHECK(single.at("schema_version") == 1);
  CHECK(single.begin().key() == "schema_version");  // first: what a reader checks before anything else
  REQUIRE(run_in(dir, "model.onnx b.onnx --dry-run --report batch.json").exit_code == 0);
  const json batch = read_json(dir.path / "batch.json");
  REQUIRE(batch.is_array());
  REQUIRE(batch.size() == 2);
  for (const auto& entry : batch) CHECK(entry.at("schema_version") == 1);
}

TEST_CASE("cpu is an object of features, outside_delegate a list of ops, both null without a target", "[e2e][report]") {
  TempDir dir;
  dir.copy_example();
  REQUIRE(run_in(dir, "model.onnx --dry-run --report r.json").exit_code == 0);
  const json def = read_json(dir.path / "r.json");
  REQUIRE(def.at("cpu").is_object());
  CHECK(def.at("cpu").size() == 1);
  CHECK(def.at("cpu").at("avx512f").is_boolean());
  // The default's Gather + CRD join: its Gather runs outside the delegate on ExecuTorch and on LiteRT.
  const json expected = json::parse(R"([
    {"op": "Gather", "layout": "gather_crd", "runtime": "executorch", "runs_as": "aten.index.Tensor", "on": "portable kernels"},
    {"op": "Gather", "layout": "gather_crd", "runtime": "litert", "runs_as": "GATHER", "on": "TFLite's own kernel"}])");
  CHECK(def.at("outside_delegate") == expected);
  // The rewritten nodes that have it are those joined in that layout.
  for (const auto& node : def.at("nodes")) {
    if (node.at("decision") == "rewritten") CHECK(node.at("layout") == "gather_crd");
  }

  REQUIRE(run_in(dir, "model.onnx --dry-run --target executorch --report e.json").exit_code == 0);
  CHECK(read_json(dir.path / "e.json").at("outside_delegate") == json::array({expected[0]}));
  REQUIRE(run_in(dir, "model.onnx --dry-run --target xnnpack --report x.json").exit_code == 0);
  CHECK(read_json(dir.path / "x.json").at("outside_delegate") == json::array());

  // A model that does not load: no target decided.
  std::ofstream(dir.path / "junk.onnx") << "not a model";
  CHECK(run_in(dir, "junk.onnx --dry-run --report j.json").exit_code == 3);
  const json junk = read_json(dir.path / "j.json");
  CHECK(junk.at("target").is_null());
  CHECK(junk.at("cpu").is_null());
  CHECK(junk.at("outside_delegate").is_null());
  CHECK(junk.at("opset").is_null());
}

TEST_CASE("a usage error after --report PATH writes the report with exit code 2 and the error", "[e2e][report][usage]") {
  TempDir dir;
  dir.copy_example();
  struct Case {
    std::string args;
    std::string error;  // a part of the message, in the log and in the report
  };
  const std::vector<Case> cases = {
      // What the options mean (usage_problem): an unknown target, no output, options that exclude each other.
      {"model.onnx --report r.json --target nosuch", "unknown target 'nosuch'"},
      {"model.onnx --report r.json", "no output: give -o OUT"},
      {"model.onnx --report r.json --dry-run --check", "--dry-run and --check cannot be combined"},
      {"model.onnx --report r.json --forms nosuch --dry-run", "--forms: unknown form 'nosuch'"},
      // CLI11's parse errors, wherever --report stands on the line.
      {"model.onnx --report r.json --threads abc -o out.onnx", "--threads"},
      {"model.onnx --threads abc --report r.json -o out.onnx", "--threads"},
      {"model.onnx --report r.json --verfy -o out.onnx", "unknown option '--verfy': did you mean '--verify'?"},
      {"model.onnx --report r.json --runs 0 -o out.onnx --bench", "--runs"},
  };
  for (const auto& c : cases) {
    INFO(c.args);
    const auto r = run_in(dir, c.args);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains(c.error));
    CHECK_FALSE(fs::exists(dir.path / "out.onnx"));
    const json report = read_json(dir.path / "r.json");
    REQUIRE(report.is_object());
    CHECK(report.at("schema_version") == 1);
    CHECK(report.at("exit_code") == 2);
    CHECK_THAT(report.at("error").get<std::string>(), Catch::Contains(c.error));
    CHECK(report.at("input") == "model.onnx");
    CHECK(report.at("output").is_null());
    CHECK(report.at("validation").is_null());
    CHECK(report.at("nodes") == json::array());
    fs::remove(dir.path / "r.json");
  }
}

TEST_CASE("a usage error's report is a list in a batch, and has a null input when no model was given", "[e2e][report][usage]") {
  TempDir dir;
  dir.copy_example();
  fs::copy_file(dir.path / "model.onnx", dir.path / "b.onnx");
  auto r = run_in(dir, "model.onnx b.onnx --out-dir od --report r.json --target nosuch");
  CHECK(r.exit_code == 2);
  CHECK_FALSE(fs::exists(dir.path / "od"));
  const json batch = read_json(dir.path / "r.json");
  REQUIRE(batch.is_array());
  REQUIRE(batch.size() == 2);
  CHECK(batch[0].at("input") == "model.onnx");
  CHECK(batch[1].at("input") == "b.onnx");
  for (const auto& entry : batch) CHECK(entry.at("exit_code") == 2);

  r = run_in(dir, "--report none.json");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("no model given"));
  const json none = read_json(dir.path / "none.json");
  CHECK(none.at("input").is_null());
  CHECK_THAT(none.at("error").get<std::string>(), Catch::Contains("no model given"));
}

TEST_CASE("a usage error writes no report over a file the run reads or writes, nor one named twice", "[e2e][report][usage]") {
  TempDir dir;
  const auto model = dir.copy_example();
  const std::string before = read_file(model);
  std::ofstream(dir.path / "in.npy") << "not read";
  struct Case {
    std::string args;
    std::string refused;  // what the log says the report would have been; "" when no report was asked for
  };
  const std::vector<Case> cases = {
      {"model.onnx --report model.onnx --target nosuch -o out.onnx", "it is model.onnx (the input model)"},
      {"model.onnx -o out.onnx --report out.onnx --threads abc", "it is out.onnx (the output model of model.onnx)"},
      {"model.onnx -o out.onnx --verify --input in.npy --report in.npy --target nosuch", "it is in.npy (an --input file)"},
      {"model.onnx --compare model.onnx --report model.onnx --threads abc", "it is model.onnx (the input model)"},
      // --report given twice, or without its value, names no report.
      {"model.onnx --report r.json --report s.json --target nosuch -o out.onnx", ""},
      {"model.onnx -o out.onnx --target nosuch --report", ""},
  };
  for (const auto& c : cases) {
    INFO(c.args);
    const size_t files = dir.file_count();
    const auto r = run_in(dir, c.args);
    CHECK(r.exit_code == 2);
    if (!c.refused.empty()) CHECK_THAT(r.err, Catch::Contains("refusing to write") && Catch::Contains(c.refused));
    CHECK(read_file(model) == before);
    CHECK(read_file(dir.path / "in.npy") == "not read");
    CHECK(dir.file_count() == files);  // nothing written: not out.onnx, r.json nor s.json
  }
}

TEST_CASE("with DWDECONV_REPORT_ARCHIVE set, the binary copies each report it writes there, with its command", "[e2e][report]") {
  TempDir dir;
  dir.copy_example();
  const auto archive = dir.path / "archive";
  const auto r = run_shell("cd '" + dir.path.string() + "' && DWDECONV_REPORT_ARCHIVE='" + archive.string() + "' '" + DWDECONV_CLI +
                               "' model.onnx --dry-run --report r.json",
                           dir);
  REQUIRE(r.exit_code == 0);
  std::vector<fs::path> copies, commands;
  for (const auto& e : fs::directory_iterator(archive)) (e.path().extension() == ".json" ? copies : commands).push_back(e.path());
  REQUIRE(copies.size() == 1);
  REQUIRE(commands.size() == 1);
  CHECK(read_file(copies.front()) == read_file(dir.path / "r.json"));
  CHECK(commands.front().extension() == ".args");
  CHECK_THAT(read_file(commands.front()),
             Catch::Contains("cd '" + dir.path.string() + "' &&") && Catch::Contains("'model.onnx' '--dry-run' '--report' 'r.json'"));
  // Not set: no copy anywhere but where --report says.
  const auto quiet = run_shell(
      "cd '" + dir.path.string() + "' && env -u DWDECONV_REPORT_ARCHIVE '" + DWDECONV_CLI + "' model.onnx --dry-run --report r2.json", dir);
  REQUIRE(quiet.exit_code == 0);
  CHECK(std::distance(fs::directory_iterator(archive), fs::directory_iterator()) == 2);
}
