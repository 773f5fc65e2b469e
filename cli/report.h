// The machine-readable --report JSON and the --dry-run plan text.
#pragma once

#include <string>

#include "rewrite/rewriter.h"

namespace dwdeconv::cli {

struct RunInfo {
  std::string input;
  std::string output;  // empty when nothing is written (--dry-run, --check)
  int64_t opset = 0;
  std::string validation;  // what the output validation checked; empty when nothing is written
};

// {"tool_version", "input", "output", "opset", "nodes": [...], "rewritten", "kept", "validation"}.
std::string report_json(const RunInfo& run, const rewrite::RewriteResult& result);

// One line per ConvTranspose: decision, name, C, k, s, resolved pads, output_padding, and the reason if kept.
std::string plan_text(const rewrite::RewriteResult& result);

// JSON string literal with escapes.
std::string json_string(const std::string& s);

}  // namespace dwdeconv::cli
