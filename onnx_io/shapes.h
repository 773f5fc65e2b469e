// What ONNX shape inference knows about a model's tensors.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "core/result.h"

namespace dwdeconv::onnx_io {

// A copy of `model` in which every tensor (initializers and Constant-like attributes, in every graph) holding more
// than `max_bytes` of data keeps its name, type and dims but no data. Shape inference needs no more, and the
// copy costs a fraction of a full one. Each sparse initializer becomes a dense initializer with its name, type
// and dims and no data: libonnx 1.12 types a sparse initializer as a sparse tensor, which no dense op accepts
// (and ConvTranspose's inference crashes on), although it stands for a dense tensor. `model` is observably
// unchanged: its large data is moved out and back (O(1) swaps, no copies), so no other thread may use it meanwhile.
onnx::ModelProto skeleton_copy(const onnx::ModelProto& model, size_t max_bytes = 4096);

// Runs ONNX shape inference on `skeleton` (see skeleton_copy) in a forked child process and replaces it with the
// result. libonnx 1.12's inference dereferences null on some malformed models (e.g. a ConvTranspose weight of
// lower rank than its input); isolated, such a crash becomes an error (kFailedValidation) naming the signal, and an
// exception from inference becomes one with its message. The child ends quietly: the signal handlers and
// sanitizer reporting it inherits (libFuzzer's, ASan's) are switched off first, so a contained crash is never
// reported as a crash of the calling process.
// When `crashed` is given, it says whether an error was such a crash.
core::Status infer_shapes_isolated(onnx::ModelProto& skeleton, bool strict, bool data_propagation, bool* crashed = nullptr);

// Runs `work` in a forked child, as infer_shapes_isolated runs inference, and returns what it returned: a crash in
// it (libonnx's) becomes an error naming the signal, an exception one with its message. For work that runs libonnx
// many times (shape propagation's rounds) at the cost of one fork.
core::Result<std::string> run_isolated(const std::function<std::string()>& work, bool* crashed = nullptr);

// ONNX shape inference on `skeleton` in this process: only where a crash ends no more than a child (run_isolated).
core::Status infer_shapes_in_process(onnx::ModelProto& skeleton, bool strict, bool data_propagation);

// What shape inference knows about the tensors of each graph of a model, looked up as ONNX scopes names.
class ScopedTypes {
 public:
  // The type of `name` as graph number `scope` reads it, as inferred (see infer_types): from the graph that defines
  // it (as an input, initializer, sparse initializer or node output), the nearest enclosing one.
  // nullptr when that graph does not know the type, or no graph defines the name: an outer graph's tensor of
  // the same name is hidden, never used. Graphs are numbered in for_each_graph's order, the main graph 0.
  const onnx::TypeProto* find(size_t scope, const std::string& name) const;
  size_t size() const { return scopes_.size(); }

 private:
  friend ScopedTypes collect_types(const onnx::ModelProto& inferred);
  struct Scope {
    size_t parent = 0;                                            // the main graph is its own parent
    std::map<std::string, std::optional<onnx::TypeProto>> names;  // every name defined here, typed when known
  };
  std::vector<Scope> scopes_;
};

// The skeleton infer_types infers on: skeleton_copy(model) without what the file declares about computed tensors
// (value_info and graph output shapes, see infer_types), nor the dims declared for a Loop body's loop-carried inputs
// and a Scan body's state inputs, which hold for the first iteration only.
onnx::ModelProto inference_skeleton(const onnx::ModelProto& model);

// The types of every graph of `inferred`, a skeleton that shape inference has run on, numbered as infer_types
// numbers them.
ScopedTypes collect_types(const onnx::ModelProto& inferred);

// Runs shape inference (with data propagation) on a skeleton of `model` and collects the types of every graph.
// Inference errors are ignored: what was inferred before them is kept. Every shape comes from the graph inputs'
// types, the initializers and the ops: the value_info entries and graph output shapes the file declares are dropped
// before inference, since a declared dim would win over an inferred symbol (a symbolic tensor declared 13 wide is
// 13 wide for one input size only). `model` itself keeps them.
ScopedTypes infer_types(const onnx::ModelProto& model);

// The tensor type's dims as numbers when every dim is known; empty otherwise.
std::vector<int64_t> known_dims(const onnx::TypeProto& type);

// A type as messages show it: "float[1,4,8,8]", "float[N,3,H,W]" (a symbol by its name, "?" when it has none),
// "float" without a shape, "a sequence" or "a map" for the non-tensor types. Names are as the model gives them.
std::string describe_type(const onnx::TypeProto& type);

}  // namespace dwdeconv::onnx_io
