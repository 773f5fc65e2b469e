// The pass over a whole model: match every ConvTranspose first, then emit, rebuild and clean up.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "core/region.h"
#include "core/result.h"
#include "rewrite/emitter.h"
#include "rewrite/forms.h"
#include "rewrite/matcher.h"
#include "rewrite/targets.h"

namespace dwdeconv::rewrite {

struct RewriteOptions {
  EmitOptions emit;
  // Node names as the plan shows them: the node's name, or its output's name when the node has none.
  std::set<std::string> only;  // when non-empty, rewrite only these nodes
  std::set<std::string> skip;  // never rewrite these nodes
  // The upsampler forms to rewrite (rewrite/forms.h); a recognised upsampler of another form is kept.
  std::set<Form> forms = default_forms();
  // Also rewrite dense (group 1) ConvTranspose nodes. Off, and not on the command line: XNNPACK runs a dense
  // deconvolution as polyphase subconvolutions already, and the rewrite measured 0.88x-1.08x. The layer bench turns
  // it on to keep that measurement (BENCHMARKS.md, "Dense ConvTranspose") reproducible.
  bool dense_conv_transpose = false;
  // The runtime the model ships to (rewrite/targets.h): which selected upsamplers it rewrites and how it joins the
  // phases. The library's default is xnnpack (every selected form, DCR); the CLI passes the `default` profile when
  // --target is not given.
  const Target* target = find_target("xnnpack");
  CpuFeatures cpu = host_cpu();  // what the target's rules may read
  // A caller's own rule, asked of every upsampler that --forms, the target's forms, --only and --skip select, before
  // the target's keep rule: why it is kept, or "" to leave it to the target. --tune keeps by it what it measured
  // slower or could not time.
  std::function<std::string(const NodeSummary&)> caller_keep;
};

// One upsampler (a ConvTranspose, or a hand-written form named by its Conv) as the plan and the report show it.
struct NodeReport {
  NodeSummary summary;
  bool rewritten = false;
  std::string reason;                      // why it was kept; empty when rewritten
  std::vector<std::string> emitted_nodes;  // names of the nodes that replaced it
  PhaseLayout layout = PhaseLayout::kDcr;  // how the emitted phases are joined (when rewritten)
  // A word about the emitted join for the report's "note" (null when empty). No target writes one now: the default's
  // note on a DCR join below opset 11 went with its Gather + CRD join; the member stays in schema version 1.
  std::string note;
  core::ReplacedRegion region;  // what it replaced, in the original's names (when rewritten)
};

struct RewriteResult {
  const Target* target = nullptr;  // the profile the decisions came from
  CpuFeatures cpu;                 // what its rules read
  std::vector<NodeReport> nodes;   // every default-domain ConvTranspose and recognised upsampler, in graph order
  int rewritten = 0;
  int kept = 0;
  std::vector<std::string> unmatched_names;            // --only/--skip names that name no upsampler
  std::map<std::string, std::string> derived_tensors;  // new phase weight -> the weight it came from
  // A declared shape (value_info, a graph output) that disagrees with the one computed from the graph inputs, per
  // value: neither is used to justify a rewrite (rewrite/shape_propagation.h).
  std::vector<std::string> warnings;
};

// Rewrites `model` in place. Fails (kInvalidModel) without touching the model's meaning when any
// ConvTranspose breaks the spec; in that case the caller must not write the model.
core::Result<RewriteResult> rewrite_model(onnx::ModelProto& model, const RewriteOptions& options);

// The names of every node the rewrite emitted, for validation.
std::set<std::string> emitted_node_names(const RewriteResult& result);

}  // namespace dwdeconv::rewrite
