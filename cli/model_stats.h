// What a rewrite did to a model, as onnxsim reports it: op counts, and model and weight bytes, before and after.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include <onnx/onnx_pb.h>

#include "cli/json.h"

namespace dwdeconv::cli {

// Counts of one model: nodes per op type (every graph, subgraphs included), and sizes in bytes.
struct ModelStats {
  std::map<std::string, int64_t> ops;  // op_type -> node count; sorted, so every text made from it is deterministic
  int64_t nodes = 0;
  int64_t model_bytes = 0;   // the serialized model with every tensor inline (file plus external data)
  int64_t weight_bytes = 0;  // the data of initializers and tensor attributes (Constant values), element count x size
};

// The stats of `model` as it is in memory (external data is inline after loading).
ModelStats model_stats(const onnx::ModelProto& model);

// "ConvTranspose 8 -> 0, Conv 2 -> 34, ...; 18 -> 26 nodes; model 1.2 MB -> 1.4 MB (+13%), weights ...":
// only the ops whose count changed, in name order. "nothing" when nothing did.
std::string stats_change_text(const ModelStats& before, const ModelStats& after);

// The report's "changes" object: {"ops": {"Conv": [2, 34], ...}, "nodes": [18, 26], "model_bytes": [a, b],
// "weight_bytes": [a, b]}, with only the ops whose count changed.
Json stats_change_json(const ModelStats& before, const ModelStats& after);

}  // namespace dwdeconv::cli
