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
// FLOAT, FLOAT16 and BFLOAT16 compute in f32 (FLOAT16/BFLOAT16 outputs are rounded to their type at the boundary).
// DOUBLE is refused: a node reading a DOUBLE value (other than Shape, which reads only dims) or writing one fails
// create(), naming the node and the value, since f32 arithmetic passed off as f64 would judge a float64 model in f32.
//
// Memory: activations live in one arena allocated at creation, at offsets shared by values whose lifetimes (first
// step writing, last step reading) do not overlap, layout conversions included (MemoryPlan). A run allocates
// nothing for them. Graph inputs, constants and integer values keep their own storage.
//
// Speed: the original graph runs exactly as a stock XNNPACK runtime would run it (a ConvTranspose is one XNNPACK
// deconvolution). The rewritten graph runs as fast as XNNPACK allows: when every input of a channel Concat comes
// from a Conv that nothing else reads, each Conv writes straight into its channel slice of the Concat's buffer
// (XNNPACK's output pixel stride = total channels, output pointer = channel offset) and the Concat copies nothing.
// Placements record it (NodePlacement::fusion), so a benchmark can say so. Both graphs fuse activations as a real
// XNNPACK runtime does: a Relu or Clip that alone reads a Conv's output becomes the Conv's output range. This XNNPACK has no nearest
// resize, so a real XNNPACK runtime runs nearest Resize in its host's optimized kernel; likewise an integer-factor nearest upsample here
// runs on a row/pixel replication kernel in the input's layout (placed as reference, with a note).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
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
  size_t threads = 1;  // pthreadpool workers; 1 runs XNNPACK on the calling thread
  // false runs every node on the plain reference kernels, including nearest Resize (to isolate an XNNPACK
  // problem, or to check a faster kernel against them).
  bool use_xnnpack = true;
  // Convs feeding only a channel Concat write into its slices (see above); false keeps one copy per input.
  bool fuse_concat = true;
  // A Relu or Clip (Relu6 is Clip 0..6) that is the only reader of a Conv's or ConvTranspose's output becomes that
  // Conv's output range, as XNNPACK's own runtime and the TFLite delegate fuse it; false runs it as its own step.
  bool fuse_activations = true;
  // A depthwise Conv whose tap count has no depthwise microkernel in this XNNPACK (only 3, 4, 9 and 25 taps do;
  // 1x2, 2x3, 4x4 fall back to a per-channel GEMM, 25-70x slower) runs with its kernel zero-extended to one that
  // has, as newer XNNPACK's multipass microkernels would run it. Applies to every depthwise Conv in any graph,
  // never to ConvTranspose. false runs each Conv's kernel as written.
  bool zero_extend_depthwise = true;
  // Places activations in one arena, allocated once at creation, at offsets shared by values whose lifetimes do
  // not overlap (see MemoryPlan); creation frees each value after its last reader. false gives every value its own
  // buffer for the executor's lifetime (a debug switch: the outputs are bit-identical either way).
  bool plan_memory = true;
  // Times every step of each run() / run_steps() (see Executor::profile()). Off, run() reads no clock at all;
  // Executor::set_profiling() switches it later.
  bool profile = false;
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
  std::string node;  // describe_node(): "Conv 'c1'" or "Conv producing 'y'"
  std::string op_type;
  Placement placement = Placement::kReference;
  std::string reason;  // why a node that could have run on XNNPACK did not (empty otherwise)
  // How the node was fused with its neighbours (empty when it was not): on a Concat
  // "fused: phase convs write into slices", on each such Conv "fused: writes into Concat 'cat' channels [0, 8)";
  // on a Relu or Clip "fused into Conv 'c'", and on that Conv "fused: Relu 'r' is its output range".
  std::string fusion;
  // Any other way the node runs differently from how it is written, e.g.
  // "1x2 kernel zero-extended to 1x3 for an XNNPACK depthwise microkernel" or, on a reference Resize,
  // "optimized nearest upsample (2x2 replication, NHWC)" (empty otherwise).
  std::string note;
};

// "xnnpack", or with the fusion and note: "xnnpack (fused: writes into Concat 'cat' channels [0, 8); 1x2 kernel ...)".
std::string describe_placement(const NodePlacement& placement);

// Rows of ExecutorProfile::by_op that are not an op type: NCHW<->NHWC conversions of step inputs, and the work of
// run() outside the steps (copying graph inputs in, converting and copying outputs out).
inline constexpr const char* kLayoutConversionRow = "(layout conversion)";
inline constexpr const char* kGraphIoRow = "(graph inputs/outputs)";

// Time of one op type (or one of the rows above), summed over the profiled runs.
struct OpTime {
  std::string op_type;
  double ms = 0;     // summed over ExecutorProfile::runs
  size_t nodes = 0;  // nodes of this type that run as steps; for the conversion row, nodes that trigger one
  double share = 0;  // ms / ExecutorProfile::total_ms, in [0, 1]
};

// Time of one node, summed over the profiled runs.
struct NodeTime {
  std::string node;  // describe_node()
  std::string op_type;
  Placement placement = Placement::kReference;
  double ms = 0;          // the node's own work, excluding convert_ms
  double convert_ms = 0;  // converting its inputs to the layout it reads (counted in the conversion row)
  double share = 0;       // ms / ExecutorProfile::total_ms
};

// Where the time of the profiled runs went. by_op rows add up to total_ms (up to clock rounding).
struct ExecutorProfile {
  size_t runs = 0;                  // run() and run_steps() calls made while profiling
  double total_ms = 0;              // their wall time, summed
  std::vector<OpTime> by_op;        // slowest first
  std::vector<NodeTime> top_nodes;  // the slowest nodes, slowest first
};

// How an executor holds its activations (ExecutorOptions::plan_memory); all zero when memory is not planned.
struct MemoryPlan {
  size_t arena_bytes = 0;       // the one arena every activation lives in
  size_t value_bytes = 0;       // the activations in it, summed as if each had a buffer of its own
  size_t conversion_bytes = 0;  // their NCHW<->NHWC conversions, summed likewise
  size_t values = 0;            // activations and conversions placed
  // Float constants still held after creation: those a step reads on every run. Weights XNNPACK packed a copy of,
  // and constants only folded nodes read, are freed (held in XNNPACK's packed form, or not at all).
  size_t constant_bytes = 0;
};

// The first element of a value that is inf or NaN. XNNPACK's output clamps (min -inf, max +inf) do not keep NaN: a
// NaN made inside an operator (0 * inf, inf - inf) comes out as -inf or +inf, a NaN read by one does too, and a later
// Relu, Clip or Sigmoid makes that infinity finite; a zero-extended depthwise kernel computes 0 * inf where the model
// has no such product. So a run that met one need not compute what the model computes, and comparing it with another
// model's run proves nothing (kNonFiniteCaveat).
struct NonFiniteValue {
  std::string value;           // the value's name
  std::string node;            // describe_node() of the node that wrote it; empty for a graph input or initializer
  bool graph_input = false;    // with an empty node: a graph input (else an initializer)
  int64_t element = 0;         // the first non-finite element, in ONNX (row-major NCHW) order
  std::vector<int64_t> index;  // the same element per axis
  float number = 0;            // inf, -inf or NaN

  // "Sqrt producing 's' writes NaN to 's' at element 3 [0, 0, 0, 3]", "initializer 'w' holds inf at element 0 [0]".
  std::string describe() const;
};

// Why a run holding a NonFiniteValue is not compared: the sentence verification adds to describe().
inline constexpr const char* kNonFiniteCaveat =
    "the executor cannot compare non-finite values faithfully (XNNPACK's output clamps do not keep NaN: it comes out "
    "as -inf or +inf, which a later op can make finite)";

class Executor {
 public:
  // Plans `model` and runs it once on the creation inputs (see last_outputs()). Errors name the node and op
  // (unsupported op, bad attribute, shape mismatch, missing input dims, a value too large for this machine to hold,
  // a DOUBLE value). A given input of another float type than its graph input's is converted to the declared type.
  static core::Result<Executor> create(const onnx::ModelProto& model, const ExecutorOptions& options);

  Executor(Executor&&) noexcept;
  Executor& operator=(Executor&&) noexcept;
  ~Executor();

  // Runs the plan. Every graph input must be given, with its creation dtype and dims. Outputs are NCHW, in
  // graph output order.
  core::Result<std::vector<NamedTensor>> run(const std::vector<NamedTensor>& inputs);

  // The graph outputs of the latest run, as run() returns them: right after create(), those of its run on
  // creation_inputs(), so a caller that needs one run's outputs (verification) reads them here instead of running
  // the model a second time.
  std::vector<NamedTensor> last_outputs();

  // How many times the steps have run: 1 after create() (its run on the creation inputs), plus one per run() and
  // run_steps(). Lets tests check that verification runs each model once.
  size_t runs() const;

  // Runs the plan's steps again on the inputs already loaded (by create() or the last run()), without copying
  // inputs in or outputs out. NHWC copies of NCHW graph inputs are cached, so this times the operators alone, as
  // a runtime holding NHWC activations between layers would run them. For benchmarks; outputs are not returned.
  core::Status run_steps();

  // The inputs create() used (explicit ones, else seeded random values), in graph input order.
  const std::vector<NamedTensor>& creation_inputs() const;

  // The first value of the creation run holding inf or NaN (see NonFiniteValue): the graph inputs, then the
  // initializers, then every value a node wrote (folded or run), in graph order; nullopt when every one is finite.
  // Later runs are not scanned.
  const std::optional<NonFiniteValue>& first_non_finite() const;

  // One entry per graph node, in graph order.
  const std::vector<NodePlacement>& placements() const;
  size_t count(Placement placement) const;
  // Nodes of `op_type` that ran with `placement`.
  size_t count(const std::string& op_type, Placement placement) const;
  // Nodes of `op_type` with a non-empty fusion note.
  size_t count_fused(const std::string& op_type) const;
  // "xnnpack 5 (Concat 1, Conv 4); reference 1 (Pad 1); folded 2 (Constant 2)", followed by
  // "; fused 1 (Concat 1: input Convs write into its channel slices)" when a Concat was fused,
  // "; fused activations 1 (Relu 'r' fused into Conv 'c')" when an activation became a Conv's output range, and
  // "; zero-extended depthwise kernels 2" when some were, and "; optimized nearest upsample 1" when a nearest
  // Resize runs on the replication kernel.
  std::string placement_summary() const;

  // How the activations are held.
  const MemoryPlan& memory_plan() const;

  // Starts or stops timing the steps of later runs (ExecutorProfile). Totals accumulate until reset_profile().
  void set_profiling(bool on);
  // Per-op-type totals and the `top_nodes` slowest nodes over the runs profiled so far (all zero if none were).
  ExecutorProfile profile(size_t top_nodes = 10) const;
  void reset_profile();

 private:
  struct Impl;
  explicit Executor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace dwdeconv::runtime_check
