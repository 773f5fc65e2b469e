// --tune: each upsampler the target would rewrite is timed alone, both ways, on --runtime, and only those that
// measured faster are rewritten. A candidate is its region of the original (rewrite::... as upsampler_regions()
// finds it) cut out into a model of its own, with its input at the shape it has in the whole model.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "cli/options.h"
#include "cli/runtime_python.h"
#include "core/result.h"
#include "rewrite/rewriter.h"

namespace dwdeconv::cli {

// One candidate's figure: its speedup alone (original ms / rewritten ms, medians of --runs interleaved runs), or why
// it was not timed (then it is kept: --tune lets through only what it measured at least as fast).
struct TuneFigure {
  std::string name;
  std::string graph_path;  // "main", or the subgraph's path (never timed: only main-graph regions are cut out)
  std::string input_shape;
  double original_ms = 0;
  double rewritten_ms = 0;
  double speedup = 0;
  std::string not_timed;  // empty when timed
  bool rewritten = true;  // the decision --tune took
};

// Times every rewritten upsampler of `result` alone on opt.runtime. `original` is the model before the rewrite,
// `rewritten` after it, `options` the rewrite's; `inputs` fix the original's input dims. Errors (kUsage,
// kInvalidModel) only when the runtime itself cannot be reached; a candidate that cannot be cut out or timed is a
// figure with not_timed set.
core::Result<std::vector<TuneFigure>> tune_upsamplers(const onnx::ModelProto& original, const onnx::ModelProto& rewritten,
                                                      const rewrite::RewriteResult& result, const rewrite::RewriteOptions& options,
                                                      const Options& opt, const std::vector<runtime_check::NamedTensor>& inputs,
                                                      RuntimeInfo& runtime);

// "tune: 'up1' (1x64x32x32) 1.45x alone on LiteRT 2.3.0 (XNNPACK delegate): rewrite" (or ": keep", or "not timed
// alone (why): keep").
std::string tune_line(const TuneFigure& figure, const RuntimeInfo& runtime);

// The kept reason of a candidate --tune measured slower or could not time.
std::string tune_reason(const TuneFigure& figure, const RuntimeInfo& runtime);

// The rule a second rewrite of the original keeps by (RewriteOptions::caller_keep): a candidate rewritten only when its
// figure says so; an upsampler the first rewrite kept is left to the target; one it did not list at all (the
// ConvTranspose a kept zero_insertion fold had absorbed) was never timed, and is kept.
std::function<std::string(const rewrite::NodeSummary&)> tune_keep_rule(const rewrite::RewriteResult& first,
                                                                       const std::vector<TuneFigure>& figures, const RuntimeInfo& runtime);

}  // namespace dwdeconv::cli
