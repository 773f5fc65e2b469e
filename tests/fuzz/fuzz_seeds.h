// A seed of the fuzzer's corpus and what the tool must do with it (make_fuzz_seeds.cpp checks it before writing).
#pragma once

#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

namespace dwdeconv::fuzz {

// What the tool must do with a seed.
enum class Expect {
  kRewrite,  // validates, and an upsampler of `form` is rewritten
  kKeep,     // validates, and nothing is rewritten (a near miss, or a form that is always kept)
  kInvalid,  // validation refuses it
  kAny,      // no promise: a spec corner whose outcome is not the point
};

struct Seed {
  std::string name;
  onnx::ModelProto model;
  Expect expect;
  std::string form;  // for kRewrite
};

// The hostile seeds (convolution ranks libonnx's shape inference crashes on, a deconv beside the ops the shape chains
// read at a newer opset), appended to `out` (fuzz_hostile_seeds.cpp).
void add_hostile_seeds(std::vector<Seed>& out);

}  // namespace dwdeconv::fuzz
