// Each target names the --runtime that checks it (Target::runs_on) as a name --runtime takes, so the summary's
// "--runtime X would check there" never rests on the target's prose agreeing with a runtime's name.
#include <cctype>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <catch2/catch.hpp>

#include "cli/options.h"
#include "cli/runtime_python.h"
#include "rewrite/targets.h"
#include "runtime_check/python_bridge.h"
#include "tests/support/source_dir.h"

using namespace dwdeconv;

TEST_CASE("every target but the default runs on a runtime --runtime knows, and the summary points there", "[cli][targets]") {
  size_t with_runtime = 0;
  for (const auto& target : rewrite::targets()) {
    CAPTURE(target.name);
    if (target.name == "default") {
      CHECK(target.runs_on.empty());
      continue;
    }
    REQUIRE_FALSE(target.runs_on.empty());
    cli::Options opt;
    opt.runtime = target.runs_on;
    opt.verify = true;
    CHECK(cli::runtime_usage_problem(opt).empty());  // a name --runtime accepts
    CHECK((target.runs_on == cli::kBuiltinRuntime || runtime_check::find_python_runtime(target.runs_on) != nullptr));
    // Checked elsewhere, the summary names the target's runtime; checked there, it says nothing more.
    opt.target = target.name;
    opt.runtime = target.runs_on == cli::kBuiltinRuntime ? "ort" : cli::kBuiltinRuntime;
    CHECK_THAT(cli::target_runtime_note(opt), Catch::EndsWith("--runtime " + target.runs_on + " would check there"));
    opt.runtime = target.runs_on;
    CHECK(cli::target_runtime_note(opt).empty());
    ++with_runtime;
  }
  CHECK(with_runtime == 7);
}

// Parses `args` (after the program name) with the tool's own option table, as main() does.
static cli::Options parse(std::vector<std::string> args) {
  cli::Options opt;
  CLI::App app{"test", "dwdeconv-rewrite"};
  cli::add_options(app, opt);
  args.insert(args.begin(), "dwdeconv-rewrite");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  app.parse(static_cast<int>(argv.size()), argv.data());
  return opt;
}

TEST_CASE("the target and runtime options take the names users say, in any case, and store the canonical one", "[cli][targets]") {
  CHECK(parse({"m.onnx", "--dry-run", "--target", "tflite"}).target == "litert");
  CHECK(parse({"m.onnx", "--dry-run", "--target", "TFLite"}).target == "litert");
  CHECK(parse({"m.onnx", "--dry-run", "--target", "LiteRT"}).target == "litert");
  CHECK(parse({"m.onnx", "--dry-run", "--target=ONNXRuntime"}).target == "ort");
  CHECK(parse({"m.onnx", "--dry-run", "--target", "ExecuTorch"}).target == "executorch");
  CHECK(parse({"m.onnx", "--dry-run", "--target", "DEFAULT"}).target == "default");
  CHECK(parse({"m.onnx", "-o", "o.onnx", "--verify", "--runtime", "TFLite"}).runtime == "litert");
  CHECK(parse({"m.onnx", "-o", "o.onnx", "--verify", "--runtime", "XNNPACK"}).runtime == "xnnpack");
  // A name it does not know stays as given, and the usage error lists the names with their aliases.
  const cli::Options unknown = parse({"m.onnx", "--dry-run", "--target", "tflight"});
  CHECK(unknown.target == "tflight");
  CHECK_THAT(cli::usage_problem(unknown),
             Catch::Equals("--target: unknown target 'tflight' (known: default, xnnpack, litert (also tflite), ort (also onnxruntime), "
                           "executorch, openvino (also ov), mnn, ncnn)"));
  // "default" is a target, not a runtime.
  const cli::Options not_runtime = parse({"m.onnx", "-o", "o.onnx", "--verify", "--runtime", "default"});
  CHECK(not_runtime.runtime == "default");
  CHECK_THAT(cli::usage_problem(not_runtime), Catch::StartsWith("--runtime: unknown runtime 'default'"));
  // The aliases are lower case and name no other target.
  for (const auto& target : rewrite::targets()) {
    for (const auto& alias : target.aliases) {
      CAPTURE(alias);
      CHECK(rewrite::find_target(alias) == nullptr);
      CHECK(rewrite::canonical_target_name(alias) == target.name);
    }
  }
}

TEST_CASE("checked on a runtime with the default target, the summary says what that runtime's target measured", "[cli][targets]") {
  // The figure is the README's, which the target table there states: the two must not drift apart.
  std::ifstream file(dwdeconv::test::source_dir() + "/README.md");
  const std::string readme((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  REQUIRE_FALSE(readme.empty());
  size_t noted = 0;
  for (const auto& target : rewrite::targets()) {
    if (target.runs_on.empty() || target.runs_on == cli::kBuiltinRuntime) continue;
    CAPTURE(target.name);
    REQUIRE_FALSE(target.headline.empty());
    CHECK_THAT(readme, Catch::Contains("| " + target.headline + " | `--target " + target.name + "` |"));
    cli::Options opt;
    opt.target = rewrite::kDefaultTarget;
    opt.runtime = target.runs_on;
    CHECK_THAT(cli::target_runtime_note(opt),
               Catch::Contains("--target " + target.name + ", ") && Catch::Contains("measured " + target.headline + " there"));
    ++noted;
  }
  CHECK(noted == 6);  // litert, ort, executorch, openvino, mnn, ncnn
  // On the tool's own executor (the default runtime), the default target's summary says nothing more.
  cli::Options opt;
  CHECK(cli::target_runtime_note(opt).empty());
}

TEST_CASE("with --compare, the summary names no target as OTHER's writer, only what the runtime's own target measured", "[cli][targets]") {
  // --compare rewrites nothing and OTHER records no target: whichever --target is given (or none), the summary must not
  // call OTHER the default target's form, nor say where --target ships.
  size_t noted = 0;
  for (const auto& own : rewrite::targets()) {
    if (own.runs_on.empty() || own.runs_on == cli::kBuiltinRuntime) continue;
    for (const auto& given : rewrite::targets()) {
      CAPTURE(own.name, given.name);
      cli::Options opt;
      opt.compare = "other.onnx";
      opt.runtime = own.runs_on;
      opt.target = given.name;
      const std::string note = cli::target_runtime_note(opt);
      CHECK_THAT(note, !Catch::Contains("default target") && !Catch::Contains("ships to") && !Catch::Contains("would check"));
      CHECK_THAT(note, Catch::StartsWith("; other.onnx does not say which target wrote it: --target " + own.name + ", ") &&
                           Catch::Contains("measured " + own.headline + " there"));
      ++noted;
    }
  }
  CHECK(noted == 6 * rewrite::targets().size());
  // On the executor, nothing: no target is the executor's own measured form to point at.
  cli::Options opt;
  opt.compare = "other.onnx";
  opt.target = "litert";
  CHECK(cli::target_runtime_note(opt).empty());
}

TEST_CASE("the runtime option takes the registry's aliases in any case, and a target has the aliases of the runtime it runs on",
          "[cli][targets][runtimes]") {
  // Every spelling users write (the names and the aliases tflite, onnxruntime and ov), in any case.
  CHECK(cli::canonical_runtime_name("TFLite") == "litert");
  CHECK(cli::canonical_runtime_name("tflite") == "litert");
  CHECK(cli::canonical_runtime_name("OnnxRuntime") == "ort");
  CHECK(cli::canonical_runtime_name("OV") == "openvino");
  CHECK(cli::canonical_runtime_name("XNNPACK") == "xnnpack");
  CHECK(cli::canonical_runtime_name("ExecuTorch") == "executorch");
  CHECK(cli::canonical_runtime_name("default").empty());  // a target, not a runtime
  CHECK(cli::canonical_runtime_name("tflight").empty());
  CHECK(cli::runtime_aliases() == std::vector<std::string>{"onnxruntime", "tflite", "ov"});
  // Each alias comes from the runtime's registry row; the target checked on that runtime is called the same.
  for (const auto& runtime : runtime_check::python_runtimes()) {
    CAPTURE(runtime.name);
    for (const auto& alias : runtime.aliases) {
      std::string upper = alias;
      for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      CHECK(cli::canonical_runtime_name(alias) == runtime.name);
      CHECK(cli::canonical_runtime_name(upper) == runtime.name);
    }
    for (const auto& target : rewrite::targets()) {
      if (target.runs_on == runtime.name) CHECK(target.aliases == runtime.aliases);
    }
  }
}
