// Each target names the --runtime that checks it (Target::runs_on) as a name --runtime takes, so the summary's
// "--runtime X would check there" never rests on the target's prose agreeing with a runtime's name.
#include <catch2/catch.hpp>

#include "cli/options.h"
#include "cli/runtime_python.h"
#include "rewrite/targets.h"
#include "runtime_check/python_bridge.h"

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
  CHECK(with_runtime == 4);
}
