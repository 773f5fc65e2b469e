// End-to-end tests of pipeline use: batches, stdin/stdout, quiet runs, colour, and the summary line.
#include <catch2/catch.hpp>

#include "tests/e2e/cli_runner.h"
#include "tests/e2e/report_json.h"

using namespace dwdeconv::test;

TEST_CASE("a batch rewrites every model, one failure does not stop the others, the report lists each", "[e2e][pipeline]") {
  TempDir dir;
  fs::copy_file(fs::path(DWDECONV_EXAMPLES_DIR) / "upsampler_small.onnx", dir.path / "a.onnx");
  fs::copy_file(fs::path(DWDECONV_EXAMPLES_DIR) / "migan_tiny_deconv.onnx", dir.path / "b.onnx");
  std::ofstream(dir.path / "broken.onnx", std::ios::binary) << "not a model";
  const auto out = dir.path / "out", report = dir.path / "r.json";
  const std::string models =
      (dir.path / "a.onnx").string() + " " + (dir.path / "broken.onnx").string() + " " + (dir.path / "b.onnx").string();
  const auto r = run_cli(models + " --out-dir " + out.string() + " -j 2 --report " + report.string(), dir);
  INFO(r.err);
  CHECK(r.exit_code == 3);                                       // the highest of the models' codes
  CHECK(count_ops(load(out / "a.onnx"), "ConvTranspose") == 1);  // mix_up is kept
  CHECK(count_ops(load(out / "b.onnx"), "ConvTranspose") == 0);
  CHECK_FALSE(fs::exists(out / "broken.onnx"));
  CHECK_THAT(r.err, Catch::Contains("batch: 3 models, 2 ok, 1 failed"));
  const std::string json = read_file(report);
  CHECK(json.rfind("[\n{", 0) == 0);  // a batch's layout: a list, each object from the line's start
  const Report batch = parse_report(json);
  REQUIRE(batch.is_array());
  REQUIRE(batch.size() == 3);  // one object per model, in command-line order
  for (const auto& entry : batch) CHECK(entry.contains("tool_version"));
  CHECK(batch[1].at("exit_code") == 3);
  CHECK_THAT(report_error(batch[1]), Catch::StartsWith((dir.path / "broken.onnx").string() + ": not a valid ONNX ModelProto"));
  CHECK(batch[2].at("output") == (out / "b.onnx").string());
}

TEST_CASE("several models without --out-dir, and two with the same file name, are usage errors", "[e2e][pipeline]") {
  TempDir dir;
  const auto in = dir.copy_example();
  fs::create_directories(dir.path / "other");
  fs::copy_file(in, dir.path / "other" / "model.onnx");
  CHECK(run_cli(in.string() + " " + in.string() + " -o x.onnx", dir).exit_code == 2);
  const auto same =
      run_cli(in.string() + " " + (dir.path / "other" / "model.onnx").string() + " --out-dir " + (dir.path / "o").string(), dir);
  CHECK(same.exit_code == 2);
  CHECK_THAT(same.err, Catch::Contains("would collide"));
  // --check over several models gates them all at once.
  CHECK(run_cli(in.string() + " " + (dir.path / "other" / "model.onnx").string() + " --check", dir).exit_code == 1);
}

TEST_CASE("a model streams from stdin to stdout, and stdout carries nothing else", "[e2e][pipeline]") {
  TempDir dir;
  const auto in = dir.copy_example();
  const auto out = dir.path / "piped.onnx";
  const auto r = run_cli("- -o - < " + in.string() + " -v", dir);
  REQUIRE(r.exit_code == 0);
  std::ofstream(out, std::ios::binary) << r.out;
  const auto model = load(out);  // stdout parses as exactly one model
  CHECK(count_ops(model, "DepthToSpace") == 3);
  CHECK_THAT(r.err, Catch::Contains("rewrote 3 of 4 ConvTranspose nodes (kept 1) -> -"));
  // The same bytes as writing to a file.
  REQUIRE(run_cli(in.string() + " -o " + (dir.path / "file.onnx").string(), dir).exit_code == 0);
  CHECK(read_file(dir.path / "file.onnx") == r.out);
}

TEST_CASE("stdin cannot carry external data and stdout cannot take it", "[e2e][pipeline]") {
  TempDir dir;
  const auto in = dir.copy_example();
  auto model = load(in);
  auto& w = *model.mutable_graph()->mutable_initializer(0);
  w.clear_raw_data();
  w.set_data_location(onnx::TensorProto::EXTERNAL);
  auto* e = w.add_external_data();
  e->set_key("location");
  e->set_value("w.bin");
  save(model, dir.path / "ext.onnx");
  const auto r = run_cli("- -o " + (dir.path / "o.onnx").string() + " < " + (dir.path / "ext.onnx").string(), dir);
  CHECK(r.exit_code == 3);
  CHECK_THAT(r.err, Catch::Contains("<stdin>"));
  CHECK_THAT(r.err, Catch::Contains("stdin cannot reach"));
  const auto to_stdout = run_cli(in.string() + " -o - --external-data w.bin", dir);
  CHECK(to_stdout.exit_code == 2);
  CHECK(to_stdout.out.empty());
}

TEST_CASE("quiet runs print nothing but errors, and logs carry no colour off a terminal", "[e2e][pipeline]") {
  TempDir dir;
  const auto in = dir.copy_example();
  const auto quiet = run_cli(in.string() + " -o " + (dir.path / "q.onnx").string() + " -q", dir);
  CHECK(quiet.exit_code == 0);
  CHECK(quiet.err.empty());
  CHECK(quiet.out.empty());
  const auto loud = run_cli(in.string() + " -o " + (dir.path / "l.onnx").string(), dir);
  CHECK_THAT(loud.err, Catch::Contains("rewrote 3 of 4 ConvTranspose nodes (kept 1)"));
  CHECK(loud.err.find('\x1b') == std::string::npos);  // stderr is a file here
}

TEST_CASE("on a terminal logs are coloured unless NO_COLOR is set", "[e2e][pipeline]") {
  TempDir dir;
  const auto in = dir.copy_example();
  if (std::system("command -v script >/dev/null 2>&1") != 0) {
    WARN("skipped: util-linux `script` (to give the tool a terminal) is not installed");
    return;
  }
  // `script` runs the tool on a pseudo-terminal and copies what it printed to our stdout.
  const std::string cmd = std::string(DWDECONV_CLI) + " " + in.string() + " --dry-run";
  auto on_tty = [&](const std::string& env) {
    const fs::path out = dir.path / "tty.txt";
    const std::string line = env + " script -qec '" + cmd + "' /dev/null > " + out.string() + " 2>&1";
    CHECK(std::system(line.c_str()) == 0);
    return read_file(out);
  };
  CHECK(on_tty("").find("\x1b[") != std::string::npos);
  CHECK(on_tty("NO_COLOR=1").find("\x1b[") == std::string::npos);
}
