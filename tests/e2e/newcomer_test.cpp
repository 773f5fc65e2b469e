// End-to-end tests of what a new user meets first: the --input-shape spellings of onnxsim, Polygraphy
// and onnx2tf, parse errors in the tool's voice with the nearest option, phase lines in a CI log, the summary of
// what changed, and batches over a directory.
#include <catch2/catch.hpp>

#include <algorithm>

#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/e2e/cli_runner.h"
#include "tests/e2e/report_json.h"
#include "tests/support/model_builder.h"

using namespace dwdeconv::test;

namespace {

// One depthwise x2 ConvTranspose whose batch dim is the symbol N: --verify cannot run it without a shape.
onnx::ModelProto symbolic_model() {
  auto m = parse_model(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    single (float[N,2,3,3] X) => (float[N,2,6,6] Y) {
      Y = ConvTranspose <group=2, strides=[2,2], pads=[1,1,1,1]> (X, W)
    })");
  set_random_initializer(*m.mutable_graph(), "W", onnx::TensorProto::FLOAT, {2, 1, 4, 4}, 52);
  return m;
}

// The same with a second graph input, so that a bare shape names nothing.
onnx::ModelProto two_input_model() {
  auto m = parse_model(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    two (float[N,2,3,3] X, float[N,2,6,6] Z) => (float[N,2,6,6] Y) {
      U = ConvTranspose <group=2, strides=[2,2], pads=[1,1,1,1]> (X, W)
      Y = Add (U, Z)
    })");
  set_random_initializer(*m.mutable_graph(), "W", onnx::TensorProto::FLOAT, {2, 1, 4, 4}, 53);
  return m;
}

// The lines of `text` that contain `part`.

}  // namespace

TEST_CASE("every input-shape spelling fixes the dims, and a bare shape names the only input", "[e2e][newcomer]") {
  TempDir dir;
  const auto in = dir.path / "model.onnx", out = dir.path / "out.onnx";
  save(symbolic_model(), in);
  const std::string verify = in.string() + " -o " + out.string() + " --verify --input-shape ";
  // Without a shape the symbolic N cannot run: the spellings below are what makes it pass.
  CHECK(run_cli(in.string() + " -o " + out.string() + " --verify", dir).exit_code == 4);
  CHECK_FALSE(fs::exists(out));
  // Each spelling with N = 2 passes; the same spelling with channel dim 5 reaches the executor, which refuses it
  // naming axis 1: so the dims are read, not ignored.
  const std::vector<std::pair<std::string, std::string>> spellings = {
      {"X:2,2,3,3", "X:2,5,3,3"}, {"X:[2,2,3,3]", "X:[2,5,3,3]"}, {"X=2x2x3x3", "X=2x5x3x3"}, {"2,2,3,3", "2,5,3,3"},
      {"[2,2,3,3]", "[2,5,3,3]"}, {"2x2x3x3", "2x5x3x3"},         {"'X:[2, 2, 3, 3]'", ""},
  };
  for (const auto& [good, contradicting] : spellings) {
    INFO(good);
    fs::remove(out);
    const auto ok = run_cli(verify + good, dir);
    INFO(ok.err);
    if (good.find(' ') != std::string::npos) {
      // Polygraphy's spelling with spaces inside the brackets is not taken: a clear usage error naming it.
      CHECK(ok.exit_code == 2);
      CHECK_THAT(ok.err, Catch::Contains("dwdeconv-rewrite: error: --input-shape 'X:[2, 2, 3, 3]'"));
      continue;
    }
    CHECK(ok.exit_code == 0);
    CHECK(fs::exists(out));
    fs::remove(out);
    const auto bad = run_cli(verify + contradicting, dir);
    CHECK(bad.exit_code == 2);
    CHECK_THAT(bad.err, Catch::Contains("axis 1 of input 'X'"));
    CHECK_FALSE(fs::exists(out));
  }
}

TEST_CASE("a malformed input-shape is a usage error naming the argument and the problem", "[e2e][newcomer]") {
  TempDir dir;
  const auto in = dir.path / "model.onnx", out = dir.path / "out.onnx";
  save(symbolic_model(), in);
  const std::map<std::string, std::string> problems = {
      {"X:2,,3,3", "an empty dim"},
      {"X:2,0,3,3", "a 0 dim"},
      {"X:2,H,3,3", "'H' is not a whole number"},
      {"X:2,2x3,3", "both ',' and 'x'"},
      {"X:[2,2,3,3", "without a closing ']'"},
      {":2,2,3,3", "the name before ':' is empty"},
      {"X:", "no dims"},
      {"X:-2,2,3,3", "dim '-2' is negative: dims must be positive"},
  };
  for (const auto& [shape, problem] : problems) {
    INFO(shape);
    const auto r = run_cli(in.string() + " -o " + out.string() + " --verify --input-shape '" + shape + "'", dir);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::StartsWith("dwdeconv-rewrite: error: --input-shape '" + shape + "': ") && Catch::Contains(problem));
    CHECK_FALSE(fs::exists(out));
  }
  // A bare shape for a model with two graph inputs names nothing: the message lists the inputs.
  const auto two = dir.path / "two.onnx";
  save(two_input_model(), two);
  const auto bare = run_cli(two.string() + " -o " + out.string() + " --verify --input-shape 2,2,3,3", dir);
  CHECK(bare.exit_code == 2);
  CHECK_THAT(bare.err, Catch::Contains("names no input") && Catch::Contains("2 graph inputs ('X', 'Z')"));
  CHECK_FALSE(fs::exists(out));
  const auto twice = run_cli(in.string() + " -o " + out.string() + " --verify --input-shape 2,2,3,3 --input-shape X:2,2,3,3", dir);
  CHECK(twice.exit_code == 2);
  CHECK_THAT(twice.err, Catch::Contains("gives the shape of 'X' twice"));
}

TEST_CASE("parse errors carry the tool's prefix and an unknown option suggests the nearest known one", "[e2e][newcomer]") {
  TempDir dir;
  const auto in = dir.copy_example("migan_tiny_deconv.onnx");
  const auto out = dir.path / "out.onnx";
  const std::map<std::string, std::string> typos = {
      {"--verfy", "--verify"},
      {"--input-shapes", "--input-shape"},           // Polygraphy's spelling
      {"--overwrite-input-shape", "--input-shape"},  // onnxsim's
      {"--dryrun", "--dry-run"},
      {"--targte", "--target"},
  };
  for (const auto& [typo, meant] : typos) {
    INFO(typo);
    const auto r = run_cli(in.string() + " -o " + out.string() + " " + typo, dir);
    CHECK(r.exit_code == 2);
    CHECK(r.err == "dwdeconv-rewrite: error: unknown option '" + typo + "': did you mean '" + meant + "'? (see --help)\n");
    CHECK_FALSE(fs::exists(out));
  }
  // Nothing near: no guess.
  const auto far = run_cli(in.string() + " -o " + out.string() + " --zzzzzz", dir);
  CHECK(far.exit_code == 2);
  CHECK(far.err == "dwdeconv-rewrite: error: unknown option '--zzzzzz' (see --help)\n");
  // Other parse errors get the prefix too, and no model says what a command looks like.
  const auto range = run_cli(in.string() + " -o " + out.string() + " --bench --runs 0", dir);
  CHECK(range.exit_code == 2);
  CHECK_THAT(range.err, Catch::StartsWith("dwdeconv-rewrite: error: --runs"));
  const auto none = run_cli("", dir);
  CHECK(none.exit_code == 2);
  CHECK_THAT(none.err, Catch::StartsWith("dwdeconv-rewrite: error: no model given: dwdeconv-rewrite MODEL.onnx -o OUT.onnx"));
}

TEST_CASE("help names the forms and where the rewrite does not pay off, with readable value names", "[e2e][newcomer]") {
  TempDir dir;
  const auto r = run_cli("--help", dir);
  REQUIRE(r.exit_code == 0);
  // The opening paragraphs, their line breaks read as the spaces they stand for.
  const std::string first_lines = std::regex_replace(r.out.substr(0, r.out.find("Usage:")), std::regex("\n"), " ");
  for (const char* part : {"depthwise ConvTranspose", "nearest x mask", "zero insertion", "upfirdn2d", "nearest + Conv", "does not pay off",
                           "ONNX Runtime", "--target ort"}) {
    CHECK_THAT(first_lines, Catch::Contains(part));
  }
  for (const char* raw : {"UINT", "INT in", "TEXT ...", "FLOAT:", "REQUIRED"}) CHECK_THAT(r.out, !Catch::Contains(raw));
  CHECK_THAT(r.out, Catch::Contains("--max-phases N ") && Catch::Contains("--input-shape [NAME:]D,D,...") && Catch::Contains("--runs N ") &&
                        Catch::Contains("--report FILE"));
  // --only, --skip and --dry-run speak of upsamplers, since the hand-written forms are rewritten by default.
  for (const auto& line : lines_with(r.out, "--only")) CHECK_THAT(line, !Catch::Contains("ConvTranspose"));
  for (const auto& line : lines_with(r.out, "--dry-run ")) CHECK_THAT(line, !Catch::Contains("ConvTranspose"));
}

TEST_CASE("a log that is not a terminal gets a timestamped line where each phase starts and ends with -v", "[e2e][newcomer]") {
  TempDir dir;
  const auto in = dir.copy_example("migan_tiny_deconv.onnx");
  const auto out = dir.path / "out.onnx";
  // Each phase here takes milliseconds: without -v none is logged (a phase is once it runs a second: the unit tests
  // of cli/progress.cpp); with -v each has its start and its end, at debug level.
  const auto plain = run_cli(in.string() + " -o " + out.string() + " --verify --bench --runs 2", dir);  // stderr is a file
  REQUIRE(plain.exit_code == 0);
  CHECK(lines_with(plain.err, ": started").empty());
  CHECK(lines_with(plain.err, ": done in ").empty());
  const auto r = run_cli(in.string() + " -o " + out.string() + " --verify --bench --runs 2 -v", dir);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const std::regex stamp(R"(^dwdeconv-rewrite: debug: \d\d:\d\d:\d\d\.\d\d\d )");
  const std::string model = in.string() + ": ";
  const std::vector<std::string> phases = {"load",
                                           "rewrite",
                                           "validate the output",
                                           "verify: running the original model",
                                           "verify: running the rewritten model",
                                           "bench: run 1..2",
                                           "bench: profiled run 1..3",
                                           "save " + out.string()};
  size_t previous_end = 0;
  for (const auto& phase : phases) {
    INFO(phase);
    const auto started = lines_with(r.err, model + phase + ": started");
    const auto done = lines_with(r.err, model + phase + ": done in ");
    REQUIRE(started.size() == 1);
    REQUIRE(done.size() == 1);
    CHECK(std::regex_search(started.front(), stamp));
    CHECK(std::regex_search(done.front(), std::regex(R"(: done in \d+\.\d\d s$)")));
    // In order: each phase starts after the one before it ended, and ends after it started.
    const size_t start_at = r.err.find(started.front()), end_at = r.err.find(done.front());
    CHECK(start_at >= previous_end);
    CHECK(end_at > start_at);
    previous_end = end_at;
  }
  // The timed runs are one phase, each run a debug line of its own.
  CHECK(lines_with(r.err, model + "bench: run 2/2").size() == 1);
  // --compare too: its loads, its validation and both runs.
  const auto compare = run_cli(in.string() + " --compare " + out.string() + " -v", dir);
  CHECK(compare.exit_code == 0);
  for (const char* phase :
       {"load both models", "validate both models", "verify: running the original model", "verify: running the rewritten model"}) {
    INFO(phase);
    CHECK(lines_with(compare.err, model + phase + ": started").size() == 1);
    CHECK(lines_with(compare.err, model + phase + ": done in ").size() == 1);
  }
  // stdin is named as such.
  const auto piped = run_shell(std::string(DWDECONV_CLI) + " - -o - -v < " + in.string() + " > /dev/null", dir);
  CHECK(piped.exit_code == 0);
  CHECK(lines_with(piped.err, "<stdin>: load: started").size() == 1);
  // -q: errors only, no phase lines.
  const auto quiet = run_cli(in.string() + " -o " + out.string() + " --verify -q", dir);
  CHECK(quiet.exit_code == 0);
  CHECK(quiet.err.empty());
  // A phase that fails says so before the error, without -v and however short.
  std::ofstream(dir.path / "junk.onnx") << "not a model";
  const auto junk = run_cli((dir.path / "junk.onnx").string() + " -o " + out.string(), dir);
  CHECK(junk.exit_code == 3);
  CHECK_THAT(junk.err, Catch::Contains("junk.onnx: load: failed after ") && !Catch::Contains("load: done"));
  // So does a save that fails (its directory is missing): never "done" before the error.
  const auto unsaved = run_cli(in.string() + " -o " + (dir.path / "missing" / "out.onnx").string(), dir);
  CHECK(unsaved.exit_code == 3);
  CHECK_THAT(unsaved.err, Catch::Contains("out.onnx: failed after ") && !Catch::Contains("out.onnx: done"));
}

TEST_CASE("the quick start's --verify --bench log on a non-terminal is at most 20 lines", "[e2e][newcomer]") {
  TempDir dir;
  const auto in = dir.copy_example("migan_tiny_deconv.onnx");
  const auto out = dir.path / "out.onnx";
  const auto r = run_cli(in.string() + " -o " + out.string() + " --verify --bench", dir);
  REQUIRE(r.exit_code == 0);
  INFO(r.err);
  // The verify summary (3), the bench line, the per-upsampler table (2 + 8 rows), the summary (2): 16; no phase of
  // milliseconds (the budget is 20 at most; it was 34 with a started and a done line for each of 9 phases).
  const auto all = std::count(r.err.begin(), r.err.end(), '\n');
  CHECK(all <= 20);
  CHECK(lines_with(r.err, "dwdeconv-rewrite: ").size() == static_cast<size_t>(all));
  CHECK(lines_with(r.err, "verification passed").size() == 1);
  CHECK(lines_with(r.err, "bench on XNNPACK").size() == 1);
  CHECK(lines_with(r.err, "conv_transpose ").size() == 8);
  CHECK(lines_with(r.err, "rewrote 8 of 8 ConvTranspose nodes").size() == 1);
  CHECK(lines_with(r.err, ": started").empty());
}

TEST_CASE("docs/cli.md's sample output is what the quick start prints today", "[e2e][newcomer]") {
  TempDir dir;
  const auto in = dir.copy_example("migan_tiny_deconv.onnx");
  const auto r =
      run_shell("cd " + dir.path.string() + " && " + DWDECONV_CLI + " model.onnx -o m.onnx --target xnnpack --verify --bench", dir);
  REQUIRE(r.exit_code == 0);
  // The speedup varies from run to run: compared as a number.
  const auto masked = [](const std::string& line) { return std::regex_replace(line, std::regex(R"(\d+\.\d\dx faster)"), "N.NNx faster"); };
  const auto printed = [&](const std::string& start) {
    const auto lines = lines_with(r.err, start);
    return lines.empty() ? std::string() : masked(lines.back());
  };
  for (const auto& [doc, output] : {std::pair<std::string, std::string>{"docs/cli.md", "m.onnx"}}) {
    INFO(doc);
    const std::string text = read_file(fs::path(DWDECONV_SOURCE_DIR) / doc);
    const auto changed = lines_with(text, "dwdeconv-rewrite: info: changed: ");
    const auto summary = lines_with(text, "dwdeconv-rewrite: info: rewrote 8 of 8");
    REQUIRE(changed.size() == 1);
    REQUIRE(summary.size() == 1);
    CHECK(changed.front() == printed("dwdeconv-rewrite: info: changed: "));
    std::string expected = masked(summary.front());
    expected.replace(expected.rfind("-> ") + 3, std::string::npos, "m.onnx");
    CHECK(expected == printed("dwdeconv-rewrite: info: rewrote "));
    CHECK_THAT(summary.front(), Catch::EndsWith("-> " + output));
  }
}

TEST_CASE("the README's first screen: three lines of what and for whom and the command then the quick start by line 60",
          "[e2e][newcomer]") {
  const std::string text = read_file(fs::path(DWDECONV_SOURCE_DIR) / "README.md");
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  REQUIRE(lines.size() > 60);
  // The title, a blank line, then the opening paragraph: three lines, what it does, for whom, and the one command.
  CHECK(lines[0] == "# dwdeconv-rewrite");
  CHECK(lines[1].empty());
  CHECK_THAT(lines[2], Catch::StartsWith("Rewrites the depthwise `ConvTranspose` upsamplers of an ONNX model"));
  CHECK_THAT(lines[3], Catch::StartsWith("For ML engineers"));
  CHECK_THAT(lines[4], Catch::StartsWith("One command: `dwdeconv-rewrite model.onnx -o "));
  CHECK(lines[5].empty());
  // The quick start's first command within the first 60 lines, and the speedup table only after the quick start.
  const std::string first =
      ".ci/install-deps && cmake -S . -B build -G Ninja && cmake --build build --target dwdeconv-rewrite && "
      "build/cli/dwdeconv-rewrite examples/migan_tiny_deconv.onnx -o migan_tiny.xnn.onnx --target xnnpack "
      "--verify --bench";
  const auto at = std::find(lines.begin(), lines.end(), first);
  REQUIRE(at != lines.end());
  CHECK(at - lines.begin() < 60);
  const auto quick = std::find(lines.begin(), lines.end(), "## Quick start");
  const auto table = std::find_if(lines.begin(), lines.end(), [](const std::string& l) { return l.rfind("| you ship to |", 0) == 0; });
  REQUIRE(quick != lines.end());
  REQUIRE(table != lines.end());
  CHECK(quick < at);
  CHECK(table > at);
}

TEST_CASE("the README's sample output is every line the quick start's command prints today", "[e2e][newcomer]") {
  TempDir dir;
  fs::create_directories(dir.path / "examples");
  fs::copy_file(fs::path(DWDECONV_EXAMPLES_DIR) / "migan_tiny_deconv.onnx", dir.path / "examples/migan_tiny_deconv.onnx");
  const auto r = run_shell("cd " + dir.path.string() + " && " + DWDECONV_CLI +
                               " examples/migan_tiny_deconv.onnx -o migan_tiny.xnn.onnx --target xnnpack --verify --bench",
                           dir);
  REQUIRE(r.exit_code == 0);
  // Timings vary from run to run: every number is compared as N, "faster" and "(slower)" alike, and runs of spaces
  // (the table's columns widen with its numbers) as one.
  const auto masked = [](std::string line) {
    line = std::regex_replace(line, std::regex(R"(\d+(\.\d+)?(e[-+]\d+)?)"), "N");
    line = std::regex_replace(line, std::regex(R"(x (faster|\(slower\)|\(the same\)) on)"), "x SPEED on");
    return std::regex_replace(line, std::regex(" +"), " ");
  };
  std::vector<std::string> printed, shown;
  for (const auto& line : lines_with(r.err, "dwdeconv-rewrite: ")) printed.push_back(masked(line));
  for (const auto& line : lines_with(read_file(fs::path(DWDECONV_SOURCE_DIR) / "README.md"), "dwdeconv-rewrite: info: ")) {
    shown.push_back(masked(line));
  }
  INFO(r.err);
  CHECK(printed.size() == 16);
  CHECK(shown == printed);
}

TEST_CASE("help text: --help fits in 100 columns, the man page's source included", "[e2e][newcomer]") {
  TempDir dir;
  const auto r = run_cli("--help", dir);
  REQUIRE(r.exit_code == 0);
  std::istringstream lines(r.out);
  size_t count = 0;
  for (std::string line; std::getline(lines, line); ++count) {
    CAPTURE(line);
    CHECK(line.size() <= 100);
  }
  CHECK(count > 60);
  // The opening paragraphs and the exit status are wrapped once: no line of prose cut after a word or two and
  // continued flush left (as once: "custom\n  XNNPACK\nruntime"), and the exit status's lines as written.
  std::istringstream prose(r.out.substr(0, r.out.find("Usage:")) + r.out.substr(r.out.find("Exit status:")));
  std::vector<std::string> kept;
  for (std::string line; std::getline(prose, line);) kept.push_back(line);
  for (size_t i = 0; i + 1 < kept.size(); ++i) {
    CAPTURE(kept[i], kept[i + 1]);
    const auto words = std::count(kept[i].begin(), kept[i].end(), ' ') + 1;
    CHECK_FALSE((!kept[i].empty() && words <= 2 && !kept[i + 1].empty() && kept[i].find(':') == std::string::npos));
  }
  CHECK_THAT(r.out, Catch::Contains("  0 ok; 1 --check found a node to rewrite, verification failed, or --min-speedup was not met;\n"
                                    "  2 usage error; 3 invalid model, failed output validation, or I/O error; 4 could not verify (a\n"
                                    "  shape not known, an op the executor lacks, a runtime that cannot convert a model). Nothing is\n"
                                    "  written unless the run succeeds."));
  CHECK_THAT(r.out, Catch::StartsWith("Rewrites the upsamplers of an ONNX model for XNNPACK-based runtimes (LiteRT, ExecuTorch, a custom\n"
                                      "XNNPACK runtime): depthwise ConvTranspose,"));
  // Every option is still there, and wrapping lost no word of the target list.
  for (const char* part : {"--target NAME", "--runtime NAME", "--min-speedup X", "--threads N",
                           "litert (also tflite):", "ort (also onnxruntime):", "Exit status:"}) {
    CHECK_THAT(r.out, Catch::Contains(part));
  }
}

TEST_CASE("a mistyped --input-shape name is refused right after load, before any rewrite", "[e2e][newcomer]") {
  TempDir dir;
  const auto in = dir.copy_example("migan_tiny_deconv.onnx");
  const auto out = dir.path / "out.onnx";
  const auto report = dir.path / "r.json";
  for (const std::string& args : {"-o " + out.string() + " --verify", "-o " + out.string() + " --bench", "--compare " + in.string()}) {
    INFO(args);
    const auto r = run_cli(in.string() + " " + args + " --input-shape imgae:1,4,64,64 --report " + report.string(), dir);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("--input-shape 'imgae:1,4,64,64': ") && Catch::Contains("has no graph input or tensor 'imgae'") &&
                          Catch::Contains("(graph inputs: 'image')"));
    CHECK_THAT(r.err, !Catch::Contains("rewrite: started") && !Catch::Contains("validate"));
    CHECK_FALSE(fs::exists(out));
    CHECK_THAT(read_file(report), Catch::Contains("has no graph input or tensor 'imgae'"));
  }
}

TEST_CASE("the summary says which ops changed and the model and weight bytes before and after", "[e2e][newcomer]") {
  TempDir dir;
  const auto in = dir.copy_example("migan_tiny_deconv.onnx");
  const auto out = dir.path / "out.onnx", report = dir.path / "r.json";
  const auto r = run_cli(in.string() + " -o " + out.string() + " --report " + report.string(), dir);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto changed = lines_with(r.err, "dwdeconv-rewrite: info: changed: ");
  REQUIRE(changed.size() == 1);
  const std::string& line = changed.front();
  const auto before = load(in), after = load(out);
  // Every op whose count differs is listed with both counts, and no op whose count is the same.
  std::set<std::string> ops;
  for (const auto* m : {&before, &after}) {
    for (const auto& n : m->graph().node()) ops.insert(n.op_type());
  }
  size_t listed = 0;
  for (const auto& op : ops) {
    INFO(op);
    const int a = count_ops(before, op), b = count_ops(after, op);
    const std::string entry = " " + op + " " + std::to_string(a) + " -> " + std::to_string(b);
    if (a != b) {
      CHECK_THAT(line, Catch::Contains(entry));
      ++listed;
    } else {
      CHECK_THAT(line, !Catch::Contains(" " + op + " "));
    }
  }
  CHECK(listed >= 4);  // ConvTranspose gone; Conv, Concat, DepthToSpace added
  CHECK_THAT(line, Catch::Contains("ConvTranspose 8 -> 0"));
  CHECK_THAT(line,
             Catch::Contains(std::to_string(before.graph().node_size()) + " -> " + std::to_string(after.graph().node_size()) + " nodes"));
  // The report has the same numbers, and its model bytes are the two files' sizes (both models are inline).
  const Report changes = read_report(report).at("changes");
  CHECK(changes.at("ops").at("ConvTranspose") == Report::array({8, 0}));
  CHECK(changes.at("model_bytes") == Report::array({fs::file_size(in), fs::file_size(out)}));
  CHECK(changes.at("nodes") == Report::array({before.graph().node_size(), after.graph().node_size()}));
  // A model with nothing to rewrite: no change.
  const auto again = run_cli(out.string() + " -o " + (dir.path / "again.onnx").string(), dir);
  CHECK(again.exit_code == 0);
  CHECK(lines_with(again.err, "changed: nothing").size() == 1);
}

TEST_CASE("a batch takes a directory, names each output with --suffix, and its last line lists the failed models", "[e2e][newcomer]") {
  TempDir dir;
  const auto models = dir.path / "models";
  fs::create_directories(models);
  save(small_deconv_model(), models / "b.onnx");
  save(small_deconv_model(7), models / "a.onnx");
  std::ofstream(models / "c.onnx") << "not a model";
  std::ofstream(models / "notes.txt") << "not an .onnx file";
  fs::create_directories(models / "sub.onnx");  // a directory, not a model
  const auto out = dir.path / "out";
  const auto r = run_cli(models.string() + " --out-dir " + out.string() + " --suffix .xnn --verify", dir);
  INFO(r.err);
  CHECK(r.exit_code == 3);
  CHECK(fs::exists(out / "a.xnn.onnx"));
  CHECK(fs::exists(out / "b.xnn.onnx"));
  CHECK_FALSE(fs::exists(out / "a.onnx"));
  CHECK_FALSE(fs::exists(out / "c.xnn.onnx"));
  CHECK(count_ops(load(out / "a.xnn.onnx"), "ConvTranspose") == 0);
  // Every line names its model (the batch's own last line aside), and they come in name order.
  std::istringstream lines(r.err);
  for (std::string line; std::getline(lines, line);) {
    INFO(line);
    if (line.rfind("dwdeconv-rewrite: error: batch: ", 0) == 0) continue;
    CHECK(std::regex_search(line, std::regex("models/[abc]\\.onnx")));
  }
  CHECK(r.err.find("a.onnx: verification passed") < r.err.find("b.onnx: verification passed"));
  CHECK_THAT(r.err,
             Catch::EndsWith("dwdeconv-rewrite: error: batch: 3 models, 2 ok, 1 failed: " + (models / "c.onnx").string() + " (exit 3)\n"));
  // A directory takes --out-dir, not -o; an empty one is a usage error; --suffix needs --out-dir.
  CHECK(run_cli(models.string() + " -o x.onnx", dir).exit_code == 2);
  fs::create_directories(dir.path / "empty");
  const auto empty = run_cli((dir.path / "empty").string() + " --dry-run", dir);
  CHECK(empty.exit_code == 2);
  CHECK_THAT(empty.err, Catch::Contains("no .onnx files"));
  const auto suffix = run_cli((models / "a.onnx").string() + " -o x.onnx --suffix .xnn", dir);
  CHECK(suffix.exit_code == 2);
  CHECK_THAT(suffix.err, Catch::Contains("--suffix") && Catch::Contains("--out-dir"));
  // An --out-dir that maps each input onto itself (its own directory, no --suffix) is refused, inputs untouched;
  // -o naming the one input stays the documented in-place rewrite.
  fs::remove(models / "c.onnx");
  const std::string before = read_file(models / "a.onnx");
  const auto same = run_cli(models.string() + " --out-dir " + models.string(), dir);
  CHECK(same.exit_code == 2);
  CHECK_THAT(same.err, Catch::Contains("give --suffix or another --out-dir"));
  CHECK(read_file(models / "a.onnx") == before);
  CHECK(run_cli(models.string() + " --out-dir " + models.string() + " --suffix .xnn", dir).exit_code == 0);
  CHECK(fs::exists(models / "a.xnn.onnx"));
}

TEST_CASE("docs/cli.md's --forms row names every form --help lists, and counts them", "[e2e][newcomer]") {
  TempDir dir;
  const auto r = run_cli("--help", dir);
  REQUIRE(r.exit_code == 0);
  // --help: "--forms LIST  Upsampler forms to rewrite, comma-separated: a, b, ... (default: ...)", wrapped.
  std::string help = std::regex_replace(r.out, std::regex(R"(\s+)"), " ");
  const auto from = help.find("comma-separated: ");
  REQUIRE(from != std::string::npos);
  const auto to = help.find(" (default:", from);
  REQUIRE(to != std::string::npos);
  std::vector<std::string> names;
  std::istringstream list(help.substr(from + 17, to - from - 17));
  for (std::string name; std::getline(list, name, ',');) names.push_back(std::regex_replace(name, std::regex(R"(^ +| +$)"), ""));
  REQUIRE(names.size() >= 8);
  const std::string text = read_file(fs::path(DWDECONV_SOURCE_DIR) / "docs/cli.md");
  const auto rows = lines_with(text, "| `--forms LIST` |");
  REQUIRE(rows.size() == 1);
  for (const auto& name : names) CHECK_THAT(rows.front(), Catch::Contains("`" + name + "`"));
  const std::vector<std::string> words{"",      "one",   "two",  "three", "four",   "five",  "six",
                                       "seven", "eight", "nine", "ten",   "eleven", "twelve"};
  REQUIRE(names.size() < words.size());
  CHECK_THAT(rows.front(), Catch::Contains("(default: all " + words[names.size()] + ")"));
}
