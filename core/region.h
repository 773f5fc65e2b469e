// What a rewrite replaced: the one record of a replaced upsampler, in the names of the model it rewrote. The rewriter
// keeps one per rewritten node; per-node verification (runtime_check::Replacement), the per-upsampler bench table and
// --tune (cli::UpsamplerRegion) extend it with what each needs, instead of working it out again from the two graphs
// (which stays the check for two files the tool did not write: --compare).
#pragma once

#include <string>
#include <vector>

namespace dwdeconv::core {

// One replaced upsampler: the one activation it reads, the value it writes, its bias and the nodes it replaced.
struct ReplacedRegion {
  std::string input;   // x, the one activation the region reads ("" when a region found from the graphs reads none or several)
  std::string output;  // y, which the emitted nodes write under the same name
  std::string bias;    // the bias the emitted Convs read, or ""
  // The nodes of the original it replaced, each by its first output: the upsampler's own node first, then the nodes
  // of its hand-written form or of its weight's chain that nothing else reads (Constant nodes left out). Empty for a
  // region found by matching two graphs, which works out its nodes from the graphs instead.
  std::vector<std::string> nodes;
};

}  // namespace dwdeconv::core
