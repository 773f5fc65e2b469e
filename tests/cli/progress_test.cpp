// The phase lines of a log that is not a terminal: counted steps collapse to one phase, and a long phase says it is
// still running. Captured from spdlog's default logger, which is what the binary logs through.
#include <chrono>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <catch2/catch.hpp>

#include "cli/help_text.h"
#include "cli/progress.h"

using namespace dwdeconv;

namespace {

// Sends the default logger to a string for the life of the object, at `level`.
class CapturedLog {
 public:
  explicit CapturedLog(spdlog::level::level_enum level) : previous_(spdlog::default_logger()) {
    auto logger = std::make_shared<spdlog::logger>("captured", std::make_shared<spdlog::sinks::ostream_sink_mt>(text_));
    logger->set_pattern("%l: %v");
    logger->set_level(level);
    spdlog::set_default_logger(logger);
  }
  ~CapturedLog() { spdlog::set_default_logger(previous_); }
  std::string text() const { return text_.str(); }
  size_t lines() const {
    const std::string t = text_.str();
    return static_cast<size_t>(std::count(t.begin(), t.end(), '\n'));
  }

 private:
  std::ostringstream text_;
  std::shared_ptr<spdlog::logger> previous_;
};

}  // namespace

TEST_CASE("counted steps are one phase: two info lines for ten runs, each run a debug line", "[cli][progress]") {
  for (const bool verbose : {false, true}) {
    CAPTURE(verbose);
    CapturedLog log(verbose ? spdlog::level::debug : spdlog::level::info);
    {
      cli::PhaseLog phases("m.onnx", true, cli::kHeartbeat, std::chrono::milliseconds(0));
      phases.start("bench: warming up");
      for (int k = 1; k <= 10; ++k) phases.start("bench: run " + std::to_string(k) + "/10");
      for (int k = 1; k <= 3; ++k) phases.start("bench: profiled run " + std::to_string(k) + "/3");
      phases.end();
    }
    const std::string text = log.text();
    CHECK_THAT(text, Catch::Contains("m.onnx: bench: warming up: started"));
    CHECK_THAT(text, Catch::Contains("m.onnx: bench: run 1..10: started"));
    CHECK_THAT(text, Catch::Contains("m.onnx: bench: run 1..10: done in"));
    CHECK_THAT(text, Catch::Contains("m.onnx: bench: profiled run 1..3: done in"));
    // 2 lines for each of the three phases, and with -v one more for each run.
    CHECK(log.lines() == (verbose ? 6u + 13u : 6u));
    CHECK((text.find("bench: run 7/10") != std::string::npos) == verbose);
  }
}

TEST_CASE("a step counted again from 1, or another text, starts a new phase", "[cli][progress]") {
  CapturedLog log(spdlog::level::info);
  {
    cli::PhaseLog phases("m.onnx", true, cli::kHeartbeat, std::chrono::milliseconds(0));
    phases.start("verify: node 1/2 'a'");  // not counted: the count is not the last word
    phases.start("run 1/2");
    phases.start("run 2/2");
    phases.start("run 1/2");
    phases.start("walk 2/2");
  }
  const std::string text = log.text();
  CHECK_THAT(text, Catch::Contains("verify: node 1/2 'a': started"));
  CHECK(log.lines() == 8u);
}

TEST_CASE("a phase that runs long says so at every heartbeat, and nothing is logged once it ends", "[cli][progress]") {
  CapturedLog log(spdlog::level::info);
  {
    cli::PhaseLog phases("m.onnx", true, std::chrono::milliseconds(50), std::chrono::milliseconds(0));
    phases.start("verify: running the original model");
    std::this_thread::sleep_for(std::chrono::milliseconds(180));
    phases.end();
    std::this_thread::sleep_for(std::chrono::milliseconds(120));  // no phase open: no heartbeat
  }
  const std::string text = log.text();
  const auto beats = [&text] {
    size_t n = 0;
    for (size_t at = text.find(": running for "); at != std::string::npos; at = text.find(": running for ", at + 1)) ++n;
    return n;
  }();
  CHECK(beats >= 2);
  CHECK(beats <= 4);
  CHECK(text.rfind(": running for ") < text.find(": done in"));
}

TEST_CASE("a phase shorter than the quiet time logs nothing at info level and a longer one says so once it is due", "[cli][progress]") {
  for (const bool verbose : {false, true}) {
    CAPTURE(verbose);
    CapturedLog log(verbose ? spdlog::level::debug : spdlog::level::info);
    {
      cli::PhaseLog phases("m.onnx", true, std::chrono::milliseconds(10000), std::chrono::milliseconds(150));
      phases.start("load");  // ends at once: quiet
      phases.start("verify: running the original model");
      std::this_thread::sleep_for(std::chrono::milliseconds(400));  // past the quiet time: one line, then its end
      phases.start("save");                                         // quiet again
      phases.end();
    }
    const std::string text = log.text();
    CHECK((text.find("load: done in") != std::string::npos) == verbose);
    CHECK((text.find("save: started") != std::string::npos) == verbose);
    CHECK_THAT(text, Catch::Contains("m.onnx: verify: running the original model: running for 0 s"));
    CHECK_THAT(text, Catch::Contains("m.onnx: verify: running the original model: done in 0.4"));
    // Without -v: the long phase's two lines only; with -v also each phase's start and end (3 starts, 2 short ends).
    CHECK(log.lines() == (verbose ? 2u + 5u : 2u));
  }
  // A short phase that fails says so at info level.
  CapturedLog log(spdlog::level::info);
  {
    cli::PhaseLog phases("m.onnx", true);
    phases.start("load");
    phases.fail();
  }
  CHECK_THAT(log.text(), Catch::Contains("m.onnx: load: failed after 0.0"));
  CHECK(log.lines() == 1u);
}

TEST_CASE("a disabled phase log (a terminal, or -q) logs nothing", "[cli][progress]") {
  CapturedLog log(spdlog::level::debug);
  {
    cli::PhaseLog phases("m.onnx", false, std::chrono::milliseconds(10));
    phases.start("load");
    std::this_thread::sleep_for(std::chrono::milliseconds(40));
  }
  CHECK(log.text().empty());
}

TEST_CASE("wrap_text keeps every line within the width and every word", "[cli][help]") {
  const std::string text = "  alpha beta gamma delta epsilon zeta eta theta\nshort\n    a-very-long-unbreakable-word-longer-than-width x";
  const std::string wrapped = cli::wrap_text(text, 20);
  std::istringstream lines(wrapped);
  size_t count = 0;
  for (std::string line; std::getline(lines, line); ++count) {
    CAPTURE(line);
    CHECK((line.size() <= 20 || line.find("a-very-long") != std::string::npos));
  }
  CHECK(count == 6);
  CHECK_THAT(wrapped, Catch::StartsWith("  alpha beta gamma\n    delta epsilon\n"));
  std::istringstream a(text), b(wrapped);
  std::string word, all_a, all_b;
  while (a >> word) all_a += word + " ";
  while (b >> word) all_b += word + " ";
  CHECK(all_a == all_b);
}
