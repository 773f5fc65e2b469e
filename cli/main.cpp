// dwdeconv-rewrite: rewrites clean xs upsamplers (depthwise ConvTranspose and hand-written forms) into
// polyphase Conv + Concat + DepthToSpace. This file only parses the command line and sets up logging; cli/run.cpp does the run,
// cli/options.cpp defines the options, cli/output_files.cpp guards the files a run writes.
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "cli/exit_codes.h"
#include "cli/help_text.h"
#include "cli/options.h"
#include "cli/report.h"
#include "cli/run.h"
#include "cli/usage_errors.h"
#include "core/cleanup.h"
#include "core/text.h"

namespace {

using namespace dwdeconv;

// Gives every physical line of the log the tool's prefix, and passes each through core::printable before the terminal
// sink formats and colours it: messages quote node and tensor names straight from the model, and those are untrusted
// bytes. A message of several lines becomes several lines, each "dwdeconv-rewrite: LEVEL: " and the continuation
// indented after it, so that no line of the log can be taken for another of the tool's lines or, in a CI log, for
// a workflow command (a line starting with "::", once the runner has trimmed its leading spaces).
class PrintableSink : public spdlog::sinks::sink {
 public:
  explicit PrintableSink(std::shared_ptr<spdlog::sinks::sink> inner) : inner_(std::move(inner)) {}
  void log(const spdlog::details::log_msg& msg) override {
    const std::string_view payload(msg.payload.data(), msg.payload.size());
    size_t start = 0;
    for (bool first = true; first || start < payload.size(); first = false) {
      const size_t end = std::min(payload.find('\n', start), payload.size());
      const std::string text = (first ? "" : "  ") + core::printable_line(payload.substr(start, end - start));
      spdlog::details::log_msg safe = msg;
      safe.payload = text;
      inner_->log(safe);
      if (end == payload.size()) break;
      start = end + 1;
    }
  }
  void flush() override { inner_->flush(); }
  void set_pattern(const std::string& pattern) override { inner_->set_pattern(pattern); }
  void set_formatter(std::unique_ptr<spdlog::formatter> formatter) override { inner_->set_formatter(std::move(formatter)); }

 private:
  std::shared_ptr<spdlog::sinks::sink> inner_;
};

}  // namespace

int main(int argc, char** argv) {
  // Before any thread exists: SIGINT, SIGTERM and SIGHUP end the run through one cleanup that removes what it staged
  // and ends its child processes, exit 128 + N (core/cleanup.h).
  core::cleanup::handle_signals();
  // Started by the Python API or the Action (DWDECONV_EXIT_WITH_PARENT=1): should that process die, even by SIGKILL,
  // Linux sends this one SIGTERM, and the cleanup above ends the run as for any SIGTERM.
  if (const char* e = std::getenv("DWDECONV_EXIT_WITH_PARENT"); e != nullptr && std::string(e) == "1") {
    const pid_t parent = ::getppid();
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::kill(::getpid(), SIGTERM);  // it died before the request took effect
  }
  cli::Options opt;
  CLI::App app{cli::app_description(), "dwdeconv-rewrite"};
  cli::add_options(app, opt);
  cli::use_readable_value_names(app);
  cli::wrap_help(app);
  // `--completion bash|zsh`: the shell completion script, from the option table just declared. Alone on the command
  // line, as --version is, since MODEL is otherwise required.
  if (argc >= 2 && std::string_view(argv[1]) == "--completion") {
    const std::string script = argc == 3 ? cli::completion_script(app, argv[2]) : std::string();
    if (script.empty()) {
      std::fprintf(stderr, "dwdeconv-rewrite: error: --completion takes one shell, bash or zsh, and nothing else\n");
      return cli::exit_code_for(core::ErrorKind::kUsage);
    }
    std::fputs(script.c_str(), stdout);
    return std::fflush(stdout) == 0 ? cli::kExitOk : cli::exit_code_for(core::ErrorKind::kIo);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // In the tool's voice, as every other error: the prefix, and for a typo the option meant.
    const std::string message = cli::parse_error_message(app, e);
    std::fprintf(stderr, "dwdeconv-rewrite: error: %s\n", core::printable(message).c_str());
    // A --report PATH that was read still gets the report, saying the error (docs/report.md).
    if (auto written = cli::write_early_report(cli::options_as_given(app), cli::exit_code_for(core::ErrorKind::kUsage), message);
        !written) {
      std::fprintf(stderr, "dwdeconv-rewrite: error: %s\n", core::printable(written.error().message).c_str());
    }
    return cli::exit_code_for(core::ErrorKind::kUsage);
  }

  opt.target_given = app.count("--target") > 0;

  // Colour only on a terminal, and never with NO_COLOR set (https://no-color.org).
  const char* no_color = std::getenv("NO_COLOR");
  auto terminal = std::make_shared<spdlog::sinks::stderr_color_sink_mt>(
      no_color != nullptr && *no_color != '\0' ? spdlog::color_mode::never : spdlog::color_mode::automatic);
  auto logger = std::make_shared<spdlog::logger>("dwdeconv", std::make_shared<PrintableSink>(terminal));
  logger->set_pattern("dwdeconv-rewrite: %^%l%$: %v");
  spdlog::set_default_logger(logger);
  spdlog::set_level(opt.verbosity < 0 ? spdlog::level::err : opt.verbosity > 0 ? spdlog::level::debug : spdlog::level::info);

  return cli::run(opt);
}
