// Targets: the runtime a model ships to decides which upsamplers pay to rewrite and how to emit them. One table of
// profiles (name, runtime, forms, per-node rule, phase layout, the measurements the rules come from), read by the
// rewriter, the CLI's --help and plan, and the report. No `if (target == ...)` anywhere else.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "rewrite/emitter.h"
#include "rewrite/matcher.h"

namespace dwdeconv::rewrite {

// What of the CPU the tool runs on a rule may read (ONNX Runtime's answer depends on it).
struct CpuFeatures {
  bool avx512f = false;
  std::string describe() const;  // "AVX-512F: no", as the plan header shows it
};

// The features of the CPU this process runs on.
CpuFeatures host_cpu();

struct Target {
  std::string name;       // what --target takes, and the report's "target"
  std::string runtime;    // the runtime it is for, as a user names it
  std::string summary;    // one line: what it rewrites and what it keeps
  std::set<std::string> forms;  // the forms it rewrites at all
  // Why this target keeps an upsampler of a selected form (the rule and the measurement it comes from), or "" to
  // rewrite it.
  std::string (*keep)(const NodeSummary& summary, const DeconvMatch& match, const CpuFeatures& cpu) = nullptr;
  // How its emitted form joins the phases.
  PhaseLayout (*layout)(const DeconvMatch& match) = nullptr;
  std::string measured;  // the BENCHMARKS.md sections its rules cite
  std::string outside_delegate;  // which of its emitted ops the runtime runs outside its XNNPACK delegate ("" none)
};

// The name of the profile used without --target.
inline constexpr const char* kDefaultTarget = "default";

// Every target, the default first.
const std::vector<Target>& targets();

// The target named `name`, or nullptr.
const Target* find_target(const std::string& name);

// "default, xnnpack, litert, ort, executorch": for --help and the usage error of an unknown name.
std::string target_names();

}  // namespace dwdeconv::rewrite
