// What a rewrite replaced: the record the rewriter keeps of each rewritten upsampler, in the names of the model it
// rewrote. Per-node verification, the per-upsampler bench table and --tune read it instead of working it out again
// from the two graphs (which stays the check for two files the tool did not write: --compare).
#pragma once

#include <string>
#include <vector>

namespace dwdeconv::core {

struct ReplacedRegion {
  std::string input;   // x, the one activation the region reads
  std::string output;  // y, which the emitted nodes write under the same name
  std::string bias;    // the bias the emitted Convs read, or ""
  // The nodes of the original it replaced, each by its first output: the upsampler's own node first, then the nodes
  // of its hand-written form or of its weight's chain that nothing else reads (Constant nodes left out).
  std::vector<std::string> nodes;
};

}  // namespace dwdeconv::core
