// --runtime, --python and --min-speedup where no Python package is needed: the option checks, the missing
// interpreter or package (exit 2 before anything is written), the report's runtime, spread and per-node table on
// the executor, and the --min-speedup gate. The Python runtimes themselves: check_runtime_*.py.
#include <cstdio>
#include <map>
#include <regex>

#include "tests/e2e/cli_runner.h"
#include "tests/e2e/report_json.h"

namespace dwdeconv::test {
namespace {

// "1.38x faster on", "0.61x (slower) on" or "1.00x (as fast) on": how the summary says `speedup`.
std::string speedup_words(double speedup) {
  char figure[32];
  std::snprintf(figure, sizeof figure, "%.2f", speedup);
  const std::string shown = figure;
  return "; " + shown + (shown == "1.00" ? "x (as fast) on " : speedup > 1 ? "x faster on " : "x (slower) on ");
}

bool python3_runs(const TempDir& dir) { return run_shell("python3 -c pass", dir).exit_code == 0; }

}  // namespace

TEST_CASE("a precision the runtime cannot convert to is a usage error before anything runs, naming it", "[e2e][runtime]") {
  // Each case is refused by the command line alone: no interpreter is started (the default python3 has none of the
  // runtimes' packages here, which would be a different error), nothing is written, and the report says why.
  TempDir dir;
  const auto in = dir.copy_example("migan_tiny_deconv.onnx");
  const auto out = dir.path / "out.onnx", report = dir.path / "r.json";
  const std::string base = in.string() + " -o " + out.string() + " --report " + report.string() + " ";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--verify --precision int8", "--precision int8: --runtime xnnpack runs fp32 only; int8 runs on --runtime litert, executorch"},
      {"--bench --runtime ort --precision fp16",
       "--precision fp16: --runtime ort runs fp32 only; fp16 runs on --runtime litert, executorch"},
      {"--precision int8", "--precision applies to --verify, --bench and --compare"},
      {"--verify --runtime litert --precision int4", "--precision: int4 not in {fp32,fp16,int8,bf16}"},
      {"--verify --runtime litert --precision int8 --atol 0.1", "--precision int8 is judged in quantisation steps: give --max-steps"},
      {"--verify --runtime litert --precision fp16 --max-steps 3", "--max-steps bounds --precision int8's comparison"},
      {"--tune --runtime litert --precision int8", "--tune times fp32 only"},
      // bf16 is OpenVINO's alone, and OpenVINO has no fp16 or int8: each refusal names what the runtime runs.
      {"--compare " + in.string() + " --runtime ort --precision bf16",
       "--precision bf16: --runtime ort runs fp32 only; bf16 runs on --runtime openvino"},
      {"--verify --runtime litert --precision BF16",
       "--precision bf16: --runtime litert runs fp32, fp16, int8; bf16 runs on --runtime openvino"},
      {"--verify --runtime OpenVINO --precision fp16",
       "--precision fp16: --runtime openvino runs fp32, bf16; fp16 runs on --runtime litert, executorch"},
  };
  for (const auto& [args, message] : cases) {
    INFO(args);
    fs::remove(report);
    const auto r = run_cli(base + args, dir);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains(message));
    CHECK_THAT(r.err, !Catch::Contains("Python interpreter"));
    CHECK_FALSE(fs::exists(out));
    CHECK(read_report(report).at("exit_code") == 2);
  }
  // Any case: INT8 is int8 (and so refused on the executor for the same reason).
  const auto upper = run_cli(base + "--verify --precision INT8", dir);
  CHECK(upper.exit_code == 2);
  CHECK_THAT(upper.err, Catch::Contains("--precision int8: --runtime xnnpack runs fp32 only"));
}

TEST_CASE("the --runtime option names a known runtime and needs something to run", "[e2e][runtime]") {
  TempDir dir;
  const auto in = dir.copy_example("migan_tiny_deconv.onnx");
  const auto out = dir.path / "out.onnx";
  auto r = run_cli(in.string() + " -o " + out.string() + " --verify --runtime tflight", dir);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("unknown runtime 'tflight'") && Catch::Contains("xnnpack, ort, litert, executorch"));
  r = run_cli(in.string() + " -o " + out.string() + " --runtime ort", dir);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("--runtime and --python apply to --verify, --bench, --compare and --tune"));
  r = run_cli(in.string() + " -o " + out.string() + " --verify --min-speedup 1.2", dir);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("--min-speedup gates the timing of --bench"));
  r = run_cli(in.string() + " -o " + out.string() + " --bench --min-speedup 0", dir);
  CHECK(r.exit_code == 2);
  CHECK(!fs::exists(out));
}

TEST_CASE("a Python --runtime whose interpreter cannot run is exit 2 before any model is written", "[e2e][runtime]") {
  TempDir dir;
  const auto in = dir.copy_example("migan_tiny_deconv.onnx");
  const auto out = dir.path / "out.onnx", report = dir.path / "r.json";
  const auto r = run_cli(in.string() + " -o " + out.string() + " --verify --runtime ort --python " +
                             (dir.path / "no-such-python").string() + " --report " + report.string(),
                         dir);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("cannot run the Python interpreter '" + (dir.path / "no-such-python").string() + "'"));
  CHECK_THAT(r.err, Catch::Contains("--python PATH or set DWDECONV_PYTHON"));
  CHECK(!fs::exists(out));
  // The report says it, as after any usage error (docs/report.md).
  const Report json = read_report(report);
  CHECK(json.at("exit_code") == 2);
  CHECK_THAT(report_error(json), Catch::Contains("cannot run the Python interpreter"));
}

TEST_CASE("a Python --runtime without its packages names them and the pip command, exit 2, no model written", "[e2e][runtime]") {
  TempDir dir;
  if (!python3_runs(dir)) {
    WARN("SKIPPED: no python3 on PATH to run the missing-package check with");
    return;
  }
  // python3 -S has no site-packages: numpy, onnx and onnxruntime are all missing, whatever this machine has.
  const auto bare = dir.path / "bare-python";
  std::ofstream(bare) << "#!/bin/sh\nexec python3 -S \"$@\"\n";
  fs::permissions(bare, fs::perms::owner_all);
  const auto in = dir.copy_example("migan_tiny_deconv.onnx");
  const auto out = dir.path / "out.onnx", report = dir.path / "r.json";
  const auto r = run_shell("DWDECONV_PYTHON=" + bare.string() + " " + DWDECONV_CLI + " " + in.string() + " -o " + out.string() +
                               " --bench --runtime ort --report " + report.string(),
                           dir);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("--runtime ort: the Python interpreter"));
  CHECK_THAT(r.err, Catch::Contains("lacks numpy, onnx, onnxruntime"));
  CHECK_THAT(r.err, Catch::Contains("-m pip install numpy onnx onnxruntime"));
  CHECK(!fs::exists(out));
  const Report json = read_report(report);
  CHECK(json.at("exit_code") == 2);
  CHECK_THAT(report_error(json), Catch::Contains("lacks numpy, onnx, onnxruntime"));
}

TEST_CASE("a --bench on the executor reports the runtime, each side's spread, the pairs and a per-upsampler table", "[e2e][runtime]") {
  TempDir dir;
  const auto in = dir.copy_example("migan_tiny_deconv.onnx");
  const auto out = dir.path / "out.onnx", report = dir.path / "r.json";
  const auto r = run_cli(in.string() + " -o " + out.string() + " --target xnnpack --bench --runs 3 --report " + report.string(), dir);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("x faster on XNNPACK") || Catch::Contains("x (slower) on XNNPACK") ||
                        Catch::Contains("x (as fast) on XNNPACK"));
  CHECK_THAT(r.err, Catch::Contains("(this tool's executor)"));
  CHECK_THAT(r.err, Catch::Contains("per upsampler on XNNPACK"));
  const Report json = read_report(report);
  CHECK(json.at("runtime").at("name") == "xnnpack");
  const Report& bench = json.at("bench");
  CHECK(bench.at("pairs") == 3);
  for (const std::string side : {"original", "rewritten"}) {
    const double lo = bench.at(side + "_min_ms"), mid = bench.at(side + "_ms"), hi = bench.at(side + "_max_ms");
    CHECK(lo > 0);
    CHECK(lo <= mid);
    CHECK(mid <= hi);
  }
  // The speedup is the two medians' ratio (docs/report.md), and the summary says that figure, faster or slower by it:
  // a figure that did not come from the two timings fails here, whatever it is.
  const double speedup = bench.at("speedup");
  CHECK(speedup == Approx(bench.at("original_ms").get<double>() / bench.at("rewritten_ms").get<double>()).epsilon(1e-12));
  CHECK_THAT(r.err, Catch::Contains(speedup_words(speedup)));
  // One row per rewritten upsampler: the example's 8 depthwise ConvTransposes, each timed on both sides, by name (the
  // executor's profile names nodes; nothing is timed with them, and every row has times).
  const std::regex shape("1x[0-9]+x[0-9]+x[0-9]+");
  const Report& rows = json.at("upsamplers");
  CHECK(rows.size() == 8);
  for (const auto& row : rows) {
    INFO(row.dump());
    CHECK(!row.at("name").get<std::string>().empty());
    CHECK(row.at("form") == "conv_transpose");
    CHECK(std::regex_match(row.at("input_shape").get<std::string>(), shape));
    REQUIRE(row.at("original_ms").is_number());
    REQUIRE(row.at("rewritten_ms").is_number());
    CHECK(row.at("original_ms").get<double>() > 0);
    CHECK(row.at("rewritten_ms").get<double>() > 0);
    CHECK(row.at("timed_with") == Report::array());
    CHECK(row.at("not_attributable").is_null());
  }
}

TEST_CASE("the --min-speedup gate fails a bench under the figure with exit 1 and writes no model, and passes one over it",
          "[e2e][runtime]") {
  TempDir dir;
  const auto in = dir.copy_example("migan_tiny_deconv.onnx");
  const auto out = dir.path / "out.onnx", report = dir.path / "r.json";
  auto r = run_cli(
      in.string() + " -o " + out.string() + " --target xnnpack --bench --runs 2 --min-speedup 1000 --report " + report.string(), dir);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("--min-speedup 1000: the rewritten model ran") && Catch::Contains("under the 1000x asked for"));
  CHECK(!fs::exists(out));
  Report json = read_report(report);
  CHECK(json.at("min_speedup") == 1000);
  const double speedup = json.at("bench").at("speedup");
  CHECK(speedup > 0);
  CHECK(speedup < 1000);
  CHECK(speedup ==
        Approx(json.at("bench").at("original_ms").get<double>() / json.at("bench").at("rewritten_ms").get<double>()).epsilon(1e-12));
  CHECK(json.at("exit_code") == 1);
  r = run_cli(in.string() + " -o " + out.string() + " --target xnnpack --bench --runs 2 --min-speedup 0.001 --report " + report.string(),
              dir);
  CHECK(r.exit_code == 0);
  CHECK(fs::exists(out));
  json = read_report(report);
  CHECK(json.at("min_speedup") == 0.001);
}

TEST_CASE("a --bench with no node rewritten times nothing, and --min-speedup passes it: nothing to rewrite", "[e2e][runtime]") {
  // --target ort keeps every depthwise ConvTranspose: both sides would be one model, and a ratio of two timings of
  // it ("1.04x faster") is noise presented as a speedup. The tool did the right thing and the output is the input, so
  // a gate passes it, saying so (1.00x used to fail any --min-speedup over 1).
  TempDir dir;
  const auto in = dir.copy_example("migan_tiny_deconv.onnx");
  const auto out = dir.path / "out.onnx";
  auto r = run_cli(in.string() + " -o " + out.string() + " --target ort --bench --runs 2", dir);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("rewrote 0 of 8") && Catch::Contains("nothing to time (1.00x: the output is the input)"));
  CHECK_THAT(r.err, !Catch::Contains("faster on") && !Catch::Contains("slower"));
  CHECK(fs::exists(out));
  fs::remove(out);
  r = run_cli(in.string() + " -o " + out.string() + " --target ort --bench --min-speedup 1.05", dir);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("--min-speedup 1.05 passes: nothing to rewrite (the output is the input)"));
  CHECK_THAT(r.err, !Catch::Contains("faster on") && !Catch::Contains("slower"));
  CHECK(fs::exists(out));
  fs::remove(out);
  // A model with something rewritten is still held to the gate: the executor's 1.3x-1.5x on this model is no 100x.
  r = run_cli(in.string() + " -o " + out.string() + " --target xnnpack --bench --runs 2 --min-speedup 100", dir);
  CHECK(r.exit_code == 1);
  CHECK(!fs::exists(out));
}

TEST_CASE("a --target for another runtime than the checks ran on is named in the summary", "[e2e][runtime]") {
  TempDir dir;
  const auto in = dir.copy_example("migan_tiny_deconv.onnx");
  const auto out = dir.path / "out.onnx";
  auto r = run_cli(in.string() + " -o " + out.string() + " --target litert --verify", dir);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("--target litert ships to LiteRT: --runtime litert would check there"));
  r = run_cli(in.string() + " -o " + out.string() + " --target xnnpack --verify", dir);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, !Catch::Contains("would check there"));
}

}  // namespace dwdeconv::test

namespace dwdeconv::test {

TEST_CASE("the --tune option times each candidate alone on the runtime and rewrites only those measured faster", "[e2e][runtime][tune]") {
  TempDir dir;
  const auto in = dir.copy_example("migan_tiny_deconv.onnx");
  const auto report = dir.path / "r.json";
  const auto r = run_cli(in.string() + " --dry-run --target xnnpack --tune --runs 3 --report " + report.string(), dir);
  REQUIRE(r.exit_code == 0);
  // One figure per candidate, on stdout with the plan, and the same in the report.
  const std::regex line(
      "tune: \"([^\"]+)\" \\((1x[0-9]+x[0-9]+x[0-9]+)\\) [0-9.]+ ms -> [0-9.]+ ms, [0-9.]+x alone on XNNPACK [^\\n]*"
      "\\(this tool's executor\\): (rewrite|keep)");
  std::map<std::string, std::string> decisions;
  for (auto it = std::sregex_iterator(r.out.begin(), r.out.end(), line); it != std::sregex_iterator(); ++it) decisions[(*it)[1]] = (*it)[3];
  CHECK(decisions.size() == 8);
  const Report json = read_report(report);
  const std::regex shape("[0-9x]+");
  size_t entries = 0, kept = 0;
  for (const auto& figure : json.at("tune")) {
    INFO(figure.dump());
    ++entries;
    // Exactly these members, in this order: a timed candidate has no "not_timed".
    std::vector<std::string> members;
    for (const auto& [key, value] : figure.items()) members.push_back(key);
    CHECK(members == std::vector<std::string>{"name", "input_shape", "original_ms", "rewritten_ms", "speedup", "decision"});
    CHECK(std::regex_match(figure.at("input_shape").get<std::string>(), shape));
    const std::string name = figure.at("name"), decision = figure.at("decision");
    REQUIRE((decision == "rewritten" || decision == "kept"));
    const double original_ms = figure.at("original_ms"), rewritten_ms = figure.at("rewritten_ms"), speedup = figure.at("speedup");
    CHECK(original_ms > 0);
    CHECK(rewritten_ms > 0);
    // The figure is the candidate's two timings' ratio, the decision follows it, and the plan says the same.
    CHECK(speedup == Approx(original_ms / rewritten_ms).epsilon(1e-12));
    CHECK((decision == "rewritten") == (speedup >= 1.0));
    CHECK(decisions[name] == (decision == "rewritten" ? "rewrite" : "keep"));
    if (decision == "kept") {
      ++kept;
      CHECK_THAT(r.out, Catch::Contains("keep    \"" + name + "\"") && Catch::Contains("--tune: measured"));
    } else {
      CHECK_THAT(r.out, Catch::Contains("rewrite \"" + name + "\""));
    }
  }
  CHECK(entries == 8);
  CHECK_THAT(r.out,
             Catch::Contains("plan: rewrite " + std::to_string(8 - kept) + " of 8 ConvTranspose nodes, keep " + std::to_string(kept)));
}

TEST_CASE("the --tune option takes --input-shape, also with --dry-run", "[e2e][runtime][tune]") {
  // upsampler_small.onnx has a symbolic batch: --tune needs the shape, and --input-shape was refused without
  // --verify or --bench.
  TempDir dir;
  const auto in = dir.copy_example("upsampler_small.onnx");
  auto r = run_cli(in.string() + " --dry-run --tune --input-shape 1,8,8,8", dir);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("tune: "));
  r = run_cli(in.string() + " --dry-run --tune", dir);
  CHECK(r.exit_code == 4);  // could not time: no shape for the symbolic batch
  CHECK_THAT(r.err, Catch::Contains("give its shape with --input-shape"));
  r = run_cli(in.string() + " --dry-run --input-shape 1,8,8,8", dir);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("--input-shape and --input apply to --verify, --bench, --compare and --tune"));
}

TEST_CASE("the --tune option does not combine with --compare or --check", "[e2e][runtime][tune]") {
  TempDir dir;
  const auto in = dir.copy_example("migan_tiny_deconv.onnx");
  auto r = run_cli(in.string() + " --check --tune", dir);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("--tune decides a rewrite"));
}

}  // namespace dwdeconv::test

namespace dwdeconv::test {

TEST_CASE("the --tune option keeps what it cannot time alone, such as a ConvTranspose inside an If branch, with a line each",
          "[e2e][runtime][tune]") {
  // --tune cuts out main-graph regions only. The If branch's ConvTranspose was rewritten untimed (0.77x on ONNX
  // Runtime): everything --tune lets through must have been timed, or the plan says it was not and keeps it.
  auto m = parse_model(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[1,8,8,8] X, bool c) => (float[1,8,16,16] Y, float[1,8,16,16] Z) {
  Y = ConvTranspose <group=8, strides=[2,2], kernel_shape=[4,4], pads=[1,1,1,1]> (X, W)
  Z = If (c) <
    then_branch = then1 () => (float[1,8,16,16] T) {
      T = ConvTranspose <group=8, strides=[2,2], kernel_shape=[4,4], pads=[1,1,1,1]> (X, W)
    },
    else_branch = else1 () => (float[1,8,16,16] E) {
      E = Identity (Y)
    }>
})");
  set_random_initializer(*m.mutable_graph(), "W", onnx::TensorProto::FLOAT, {8, 1, 4, 4}, 26);
  name_node(m, "Y", "up_main");
  name_node(m, "T", "up_branch");
  TempDir dir;
  const auto in = dir.path / "if.onnx", out = dir.path / "out.onnx", report = dir.path / "r.json";
  save(m, in);
  const auto plain = run_cli(in.string() + " --dry-run --target xnnpack", dir);
  REQUIRE(plain.exit_code == 0);
  REQUIRE_THAT(plain.out, Catch::Contains("rewrite \"up_branch\""));  // without --tune the target rewrites it
  const auto r = run_cli(in.string() + " -o " + out.string() + " --target xnnpack --tune --runs 3 --report " + report.string(), dir);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err,
             Catch::Contains("tune: \"up_branch\" (?) not timed alone (inside ") && Catch::Contains("main-graph upsamplers only): keep"));
  const Report json = read_report(report);
  const Report& branch = row_named(json.at("tune"), "up_branch");
  CHECK_THAT(branch.at("not_timed").get<std::string>(), Catch::StartsWith("inside "));
  const auto written = load(out);
  // The branch keeps its ConvTranspose; the main graph's was timed and decided by its figure.
  CHECK(count_ops_everywhere(written, "ConvTranspose") - count_ops(written.graph(), "ConvTranspose") == 1);
  CHECK_THAT(read_file(report), Catch::Contains("--tune: not timed alone (inside "));
}

}  // namespace dwdeconv::test

namespace dwdeconv::test {

TEST_CASE("the --tune option keeps, untimed, upsamplers that share a name, since it tells them apart by name", "[e2e][runtime][tune]") {
  // Two upsamplers named "n": the first one's region was timed twice and the second rewritten on that figure
  // (review finding 8).
  auto m = parse_model(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,8,8,8] X) => (float[1,8,16,16] Y, float[1,8,16,16] Z) {
  Y = ConvTranspose <group=8, strides=[2,2], kernel_shape=[4,4], pads=[1,1,1,1]> (X, W)
  Z = ConvTranspose <group=8, strides=[2,2], kernel_shape=[4,4], pads=[1,1,1,1]> (X, V)
})");
  set_random_initializer(*m.mutable_graph(), "W", onnx::TensorProto::FLOAT, {8, 1, 4, 4}, 1);
  set_random_initializer(*m.mutable_graph(), "V", onnx::TensorProto::FLOAT, {8, 1, 4, 4}, 2);
  name_node(m, "Y", "n");
  name_node(m, "Z", "n");
  TempDir dir;
  const auto in = dir.path / "dup.onnx";
  save(m, in);
  const auto r = run_cli(in.string() + " --dry-run --target xnnpack --tune --runs 2", dir);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(lines_with(r.out, "tune: \"n\" (?) not timed alone (another upsampler has the same name").size() == 2);
  CHECK(lines_with(r.out, "keep    \"n\"").size() == 2);
  CHECK_THAT(r.out, Catch::Contains("plan: rewrite 0 of 2"));
}

}  // namespace dwdeconv::test

namespace dwdeconv::test {

TEST_CASE("the compare of two models that are the same times nothing, and a --min-speedup over 1 fails it", "[e2e][runtime][compare]") {
  // What the API's check() and the Action's gate get when the rewrite changed nothing: timing one model twice gave
  // 0.97x-1.05x and passed or failed a 1.02x gate on noise (review finding 13).
  TempDir dir;
  const auto a = dir.copy_example("migan_tiny_deconv.onnx");
  const auto b = dir.path / "same.onnx";
  fs::copy_file(a, b);
  const auto report = dir.path / "r.json";
  auto r = run_cli(a.string() + " --compare " + b.string() + " --bench --min-speedup 1.01 --report " + report.string(), dir);
  INFO(r.err);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("--min-speedup 1.01: the two models are the same (1.00x)"));
  r = run_cli(a.string() + " --compare " + b.string() + " --bench --report " + report.string(), dir);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("nothing to time: the two models are the same (1.00x)"));
  CHECK_FALSE(read_report(report).contains("bench"));
}

}  // namespace dwdeconv::test
