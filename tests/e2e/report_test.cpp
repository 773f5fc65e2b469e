// End-to-end tests of the report a program reads: schema_version on every object, cpu and outside_delegate as
// structures, the report of a usage error once --report PATH was read (never over a file the run reads or writes),
// and the copy of each report the tests (not the binary) leave in the archive for the schema check (tests/CMakeLists.txt).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <map>

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
  // The default writes no join, so nothing that runs outside a delegate.
  CHECK(def.at("outside_delegate") == json::array());
  for (const auto& node : def.at("nodes")) CHECK(node.at("layout") != "gather_crd");

  // executorch's Gather + CRD join (s = 2): its Gather runs outside the delegate on ExecuTorch.
  const json expected = json::parse(R"([
    {"op": "Gather", "layout": "gather_crd", "runtime": "executorch", "runs_as": "aten.index.Tensor", "on": "portable kernels"}])");
  REQUIRE(run_in(dir, "model.onnx --dry-run --target executorch --report e.json").exit_code == 0);
  const json et = read_json(dir.path / "e.json");
  CHECK(et.at("outside_delegate") == expected);
  for (const auto& node : et.at("nodes")) {
    if (node.at("decision") == "rewritten" && node.at("stride") == 2) CHECK(node.at("layout") == "gather_crd");
  }
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

TEST_CASE("the binary writes its report where --report says and nowhere else, whatever DWDECONV_REPORT_ARCHIVE says", "[e2e][report]") {
  // The archive is the tests' own (cli_runner.h): a shipped binary that wrote there would write, of itself, to a
  // name anyone can predict and through any symlink planted there.
  TempDir dir;
  dir.copy_example();
  const auto archive = dir.path / "archive";
  fs::create_directory(dir.path / "planted");
  fs::create_symlink(dir.path / "planted", dir.path / "link");
  for (const auto& where : {archive, dir.path / "link"}) {
    INFO(where);
    const auto r = run_shell("cd '" + dir.path.string() + "' && DWDECONV_REPORT_ARCHIVE='" + where.string() + "' '" + DWDECONV_CLI +
                                 "' model.onnx --dry-run --report r.json",
                             dir);
    REQUIRE(r.exit_code == 0);
    CHECK(read_json(dir.path / "r.json")["exit_code"] == 0);
  }
  CHECK_FALSE(fs::exists(archive));
  CHECK(fs::is_empty(dir.path / "planted"));
  CHECK(dir.file_count() == 4);  // model.onnx, r.json, planted, link
}

TEST_CASE("the test harness copies each report a command wrote, and only those, into the archive with the command", "[e2e][report]") {
  TempDir dir;
  dir.copy_example();
  const auto archive = dir.path / "archive";
  const char* suite_archive = std::getenv("DWDECONV_REPORT_ARCHIVE");
  const std::string saved = suite_archive != nullptr ? suite_archive : "";
  ::setenv("DWDECONV_REPORT_ARCHIVE", archive.string().c_str(), 1);
  const std::string model_before = read_file(dir.path / "model.onnx");
  // Written: r.json (a relative path after `cd`), and "a b.json" given as --report=PATH; refused (a usage error
  // names the input model as the report): nothing; a report of an earlier run left as it was: nothing.
  const auto written = run_in(dir, "model.onnx --dry-run --report r.json");
  const auto spaced = run_in(dir, "model.onnx --dry-run '--report=a b.json' --target executorch");
  const auto refused = run_in(dir, "model.onnx --report model.onnx --target nosuch -o out.onnx");
  const auto not_run = run_shell("cd '" + dir.path.string() + "' && true --report r.json", dir);
  if (saved.empty()) {
    ::unsetenv("DWDECONV_REPORT_ARCHIVE");
  } else {
    ::setenv("DWDECONV_REPORT_ARCHIVE", saved.c_str(), 1);
  }
  REQUIRE(written.exit_code == 0);
  REQUIRE(spaced.exit_code == 0);
  REQUIRE(refused.exit_code == 2);
  REQUIRE(not_run.exit_code == 0);
  CHECK(read_file(dir.path / "model.onnx") == model_before);
  std::map<std::string, std::string> copies;  // report text -> the command copied beside it
  size_t args_files = 0;
  for (const auto& e : fs::directory_iterator(archive)) {
    if (e.path().extension() != ".json") {
      ++args_files;
      continue;
    }
    fs::path args = e.path();
    copies[read_file(e.path())] = read_file(args.replace_extension(".args"));
  }
  CHECK(args_files == 2);
  REQUIRE(copies.size() == 2);
  REQUIRE(copies.count(read_file(dir.path / "r.json")) == 1);
  CHECK_THAT(copies[read_file(dir.path / "r.json")], Catch::Contains("model.onnx --dry-run --report r.json"));
  REQUIRE(copies.count(read_file(dir.path / "a b.json")) == 1);
  CHECK(read_json(dir.path / "a b.json")["target"] == "executorch");
}

TEST_CASE("the report's layout: members in a fixed order, two-space indent, one line per member and per node", "[e2e][report]") {
  // The one test of the report as text; every other test reads it as data. The values are worked out here from the
  // model: one depthwise ConvTranspose, C = 3, k = 4, s = 2, pads 1, with a bias (W 192 bytes, B 12), which the xnnpack
  // target rewrites into four 2x2 phase Convs (the same 204 weight bytes), a Concat and a DCR DepthToSpace.
  TempDir dir;
  save(small_deconv_model(), dir.path / "m.onnx");
  REQUIRE(run_in(dir, "m.onnx -o out.onnx --target xnnpack --report r.json").exit_code == 0);
  const std::string text = read_file(dir.path / "r.json");
  // The CPU feature is the machine's, the output's size the rewrite's: both outside the layout.
  const bool avx512f = read_json(dir.path / "r.json").at("cpu").at("avx512f");
  const std::string expected = R"({
  "schema_version": 1,
  "tool_version": "0.1.0",
  "exit_code": 0,
  "error": null,
  "input": "m.onnx",
  "output": "out.onnx",
  "opset": 13,
  "target": "xnnpack",
  "cpu": {"avx512f": )" + std::string(avx512f ? "true" : "false") +
                               R"(},
  "outside_delegate": [],
  "nodes": [
    {"name": "Y", "graph": "main", "decision": "rewritten", "reason": "", "channels": 3, "kernel": [4, 4], "stride": 2, "strides": [2, 2], "pads": [1, 1, 1, 1], "output_padding": [0, 0], "dilations": null, "depthwise_in_value": false, "form": "conv_transpose", "layout": "dcr", "note": null}
  ],
  "rewritten": 1,
  "kept": 0,
  "changes": {"ops": {"Concat": [0, 1], "Conv": [0, 4], "ConvTranspose": [1, 0], "DepthToSpace": [0, 1]}, "nodes": [1, 6], "model_bytes": [)" +
                               std::to_string(fs::file_size(dir.path / "m.onnx")) + ", " +
                               std::to_string(fs::file_size(dir.path / "out.onnx")) + R"(], "weight_bytes": [204, 204]},
  "validation": "ONNX checker and strict shape inference passed"
}
)";
  CHECK(text == expected);
}
