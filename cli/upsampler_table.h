// The per-upsampler table of --bench and the regions --tune cuts out: each rewritten upsampler as the rewrite
// recorded it, timed from the node times any runner gives (runtime_check/runner.h: the executor's profile or a
// Python runtime's profiler, as NodeMs).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "core/region.h"
#include "rewrite/rewriter.h"
#include "runtime_check/runner.h"
#include "runtime_check/tensor.h"

namespace dwdeconv::cli {

using runtime_check::NodeMs;
using runtime_check::NodeValues;

// One upsampler's time on the runtime timed, from its profiler (the per-node table of --bench).
struct UpsamplerTime {
  std::string name;  // the plan's name
  std::string form;
  std::string input_shape;  // "1x64x32x32", or "?" when shape inference does not know it
  double original_ms = 0;   // the original region's nodes, per run; NaN when not attributable
  double rewritten_ms = 0;  // the emitted nodes, per run; NaN when not attributable
  // Nodes outside the upsampler timed with it on both sides, because the runtime ran them in one kernel with its nodes
  // on one side at least (a Relu ONNX Runtime fused into the last Conv), by plan name, in graph order.
  std::vector<std::string> timed_with;
  // Why the row has no times ("" when it has): a kernel that computes part of it and part of something else that
  // cannot be timed with it on both sides (another upsampler), or a kernel whose work could not be told.
  std::string not_attributable;
};

// One rewritten upsampler of the main graph as a region of the original: the rewrite's record of it
// (rewrite::NodeReport::region: input, output, bias, the replaced nodes' names) and, beside it, what the table and
// --tune read: the plan's name and form, the nodes it replaced (pointers into `original`, the named node first), the
// nodes emitted for it (pointers into `rewritten`), and the types propagation gives its input and output.
struct UpsamplerRegion : core::ReplacedRegion {
  std::string name;
  std::string form;
  std::vector<const onnx::NodeProto*> original_nodes;
  std::vector<const onnx::NodeProto*> emitted_nodes;
  std::optional<onnx::TypeProto> input_type;
  std::optional<onnx::TypeProto> output_type;
  std::string input_shape;  // "1x64x32x32", "?" where unknown
};

// The regions of `result`'s rewritten upsamplers; `inputs` fix the original's input dims for shape inference.
std::vector<UpsamplerRegion> upsampler_regions(const onnx::ModelProto& original, const onnx::ModelProto& rewritten,
                                               const rewrite::RewriteResult& result, const std::vector<runtime_check::NamedTensor>& inputs);

// The per-node table: per rewritten upsampler of `result`, the profiler's time of the original region (the named
// node and the nodes feeding it that the rewrite removed) and of the emitted nodes. `original` is the model before
// the rewrite; `inputs` fix its input dims for shape inference.
// With `values` kNames a profiled node counts for the region whose node it is named after (plus the layout reorders
// around it). With kOnnx each profiled node is a kernel of the graph the runtime ran, and what it computes is read from
// the values it reads and writes: the model's nodes between them. A kernel that computes a region's nodes and nodes
// outside it (ORT's Conv with the Relu after it) cannot be split, so those outside nodes are timed with the region on
// both sides (`timed_with`); when that cannot be done the row is not attributable, saying why (docs/runtime-checks.md).
std::vector<UpsamplerTime> upsampler_times(const onnx::ModelProto& original, const onnx::ModelProto& rewritten,
                                           const rewrite::RewriteResult& result, const std::vector<NodeMs>& original_nodes,
                                           const std::vector<NodeMs>& rewritten_nodes,
                                           const std::vector<runtime_check::NamedTensor>& inputs, NodeValues values = NodeValues::kNames);

// The table for the log: "  upsampler  form  input  original ms  rewritten ms  ratio" rows, each followed by a line
// naming the nodes timed with it or why it has no times, when it has one.
std::string format_upsampler_times(const std::vector<UpsamplerTime>& rows);

}  // namespace dwdeconv::cli
