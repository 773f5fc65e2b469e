// Executor: runs a whole ONNX model through XNNPACK's operator API (NHWC f32), with plain C++ kernels for the
// ops XNNPACK lacks.
//
// Before: ModelProto + input shapes.  After: a plan of steps, one per non-constant node, with buffers and XNNPACK
// operators created and set up once, so run() can be called many times (the benchmark times repeated runs).
//
// create() evaluates the graph once with its creation inputs: constant subgraphs (initializers, Constant, exporter
// shape arithmetic, Shape of a now-known tensor) are folded then, and every other node becomes a step whose input
// and output shapes are fixed. run() requires inputs of the creation shapes. Graph inputs and outputs are NCHW;
// inside, XNNPACK steps keep rank-4 activations in NHWC and convert only where a consumer needs NCHW.
// Every floating type computes in f32 (FLOAT16/BFLOAT16 outputs are rounded to their type at the boundary).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "core/result.h"
#include "runtime_check/tensor.h"

namespace dwdeconv::runtime_check {

struct ExecutorOptions {
  // Fixes input dims by input name (symbolic or declared), as `--input-shape x=1x4x256x256` gives them.
  std::map<std::string, std::vector<int64_t>> input_shapes;
  // Creation inputs given explicitly; any graph input not listed here gets seeded random values.
  std::vector<NamedTensor> inputs;
  uint64_t seed = 0;
  size_t threads = 1;        // pthreadpool workers; 1 runs XNNPACK on the calling thread
  bool use_xnnpack = true;   // false runs every node on the reference kernels (to isolate an XNNPACK problem)
};

enum class Placement {
  kXnnpack,    // an XNNPACK operator runs on every run()
  kReference,  // a plain C++ kernel runs on every run()
  kFolded,     // constant: evaluated once at creation by the reference kernels
};

// "xnnpack", "reference" or "folded".
const char* placement_name(Placement placement);

// Where one node ran.
struct NodePlacement {
  std::string node;     // describe_node(): "Conv 'c1'" or "Conv producing 'y'"
  std::string op_type;
  Placement placement = Placement::kReference;
  std::string reason;   // why a node that could have run on XNNPACK did not (empty otherwise)
};

class Executor {
 public:
  // Plans `model` and runs it once on the creation inputs. Errors name the node and op (unsupported op,
  // bad attribute, shape mismatch, missing input dims).
  static core::Result<Executor> create(const onnx::ModelProto& model, const ExecutorOptions& options);

  Executor(Executor&&) noexcept;
  Executor& operator=(Executor&&) noexcept;
  ~Executor();

  // Runs the plan. Every graph input must be given, with its creation dtype and dims. Outputs are NCHW, in
  // graph output order.
  core::Result<std::vector<NamedTensor>> run(const std::vector<NamedTensor>& inputs);

  // The inputs create() used (explicit ones, else seeded random values), in graph input order.
  const std::vector<NamedTensor>& creation_inputs() const;

  // One entry per graph node, in graph order.
  const std::vector<NodePlacement>& placements() const;
  size_t count(Placement placement) const;
  // Nodes of `op_type` that ran with `placement`.
  size_t count(const std::string& op_type, Placement placement) const;
  // "xnnpack 5 (Concat 1, Conv 4); reference 1 (Pad 1); folded 2 (Constant 2)".
  std::string placement_summary() const;

 private:
  struct Impl;
  explicit Executor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace dwdeconv::runtime_check
