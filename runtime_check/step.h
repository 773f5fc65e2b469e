// The executor's values and steps; not part of the library's API (executor.h is).
//
// A step runs one node (or the part of a fused group that is left to do) on every run(). Values holds the graph's
// values by slot id. XnnStep is the one base of every step that runs XNNPACK operators: it owns the body they all
// share (read the inputs in the planned layout, check their dims, set the operators up again only when a bound
// pointer changed, run them), and each family (step_conv.cpp, step_elementwise.cpp, step_data.cpp,
// step_spatial.cpp) adds only its create and setup calls, as XNNPACK's src/subgraph/*.c files do.
#pragma once

#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>
#include <pthreadpool.h>
#include <xnnpack.h>

#include "core/result.h"
#include "runtime_check/executor.h"
#include "runtime_check/tensor.h"

namespace dwdeconv::runtime_check::detail {

using XnnOperator = std::unique_ptr<xnn_operator, decltype(&xnn_delete_operator)>;
using Clock = std::chrono::steady_clock;

inline constexpr float kNoMin = -std::numeric_limits<float>::infinity();
inline constexpr float kNoMax = std::numeric_limits<float>::infinity();

inline double ms_between(Clock::time_point start, Clock::time_point stop) {
  return std::chrono::duration<double, std::milli>(stop - start).count();
}

// Storage order of a rank-4 float value. Dims are always logical [N, C, H, W].
enum class Layout { kNchw, kNhwc };

// True for the values that have a layout at all: rank-4 floats (everything else is stored in ONNX order).
inline bool layout_applies(const Tensor& t) { return t.is_float() && t.dims.size() == 4; }

// The dims a value has in storage: NHWC permutes [N, C, H, W] to [N, H, W, C]; rank 0 becomes [1].
std::vector<size_t> storage_shape(const std::vector<int64_t>& dims, Layout layout);

struct Slot {
  Tensor t;
  Layout layout = Layout::kNchw;
  bool defined = false;
  bool constant = false;
  uint64_t version = 0;
  Tensor converted;  // `t` in the other layout, valid while converted_version == version
  uint64_t converted_version = ~uint64_t{0};
};

// The graph's values, indexed by slot id. The vector is sized once, so Tensor storage pointers stay put.
class Values {
 public:
  std::vector<Slot> slots;
  pthreadpool_t threadpool = nullptr;
  bool time_conversions = false;  // profiling: add each conversion's time to conversion_ms
  double conversion_ms = 0;

  // The value stored in `want` order (a cached conversion when the producer wrote the other one).
  const Tensor& read(int id, Layout want);
  // The layout the value is stored in (NCHW for values without a layout).
  Layout layout(int id) const {
    const Slot& s = slots[static_cast<size_t>(id)];
    return layout_applies(s.t) ? s.layout : Layout::kNchw;
  }
  const Tensor& peek(int id) const { return slots[static_cast<size_t>(id)].t; }
  bool constant(int id) const { return id >= 0 && slots[static_cast<size_t>(id)].constant; }
  // Storage for a new value of `id`; reuses the buffer when the size is unchanged.
  Tensor& write(int id, Layout layout, int32_t dtype, const std::vector<int64_t>& dims);
  // Marks `id` as written in place (by a reference kernel, or into slices by its producers).
  void touch(int id, Layout layout);

  // Frees the storage of `id` and of its conversion, which no later step reads. While reuse_spare is set (creation
  // with a memory plan) the buffers are kept in `spare` and handed to the next values written, so the creation run
  // does not fault in fresh pages for every activation.
  void retire(int id);
  // Creation: gives an empty float `id` a spare buffer of at least `size` floats before a kernel that sizes its own
  // outputs (a reference step) writes it, so those outputs recycle retired buffers too instead of piling up beside them.
  void lend_spare(int id, size_t size) { reuse(slots[static_cast<size_t>(id)].t, size); }
  bool reuse_spare = false;
  std::vector<std::vector<float>> spare;

 private:
  // Gives an empty owned `t` the smallest spare buffer that holds `size` floats, if reuse_spare and there is one.
  void reuse(Tensor& t, size_t size);
};

// A value a step reads or writes on every run: what the memory plan places values by.
struct Access {
  int id = -1;
  Layout layout = Layout::kNchw;  // the layout it is read in: a conversion when the value is stored in the other one
  bool write = false;
};

class Step {
 public:
  virtual ~Step() = default;
  virtual core::Status run(Values& v) = 0;
  // Appends every value run() reads or writes (`v` as planned, for the layouts values are stored in).
  virtual void accesses(const Values& v, std::vector<Access>& out) const = 0;
  // True when `id` is a constant this step's operators hold their own packed copy of and run() never reads (a Conv's
  // weights): once planning is done, a constant no step reads otherwise is freed.
  virtual bool packed_copy_of(const Values&, int) const { return false; }
};

core::Error xnn_failure(const onnx::NodeProto& node, const char* call, xnn_status status);

// The dims check every step makes before it touches a pointer: inputs must have the dims the plan was made for.
core::Status check_dims(const onnx::NodeProto& node, const Tensor& t, const std::vector<int64_t>& want);

// One node on XNNPACK operators (see the file comment). A family's plan() fills inputs_, the output and ops_.
class XnnStep : public Step {
 public:
  core::Status run(Values& v) final;
  // The inputs, and y_ (and any add_output()) as written.
  void accesses(const Values& v, std::vector<Access>& out) const override;

 protected:
  struct Input {
    int id = -1;
    Layout layout = Layout::kNchw;
    std::vector<int64_t> dims;  // as planned; run() refuses anything else
  };

  XnnStep(const onnx::NodeProto& node, const char* setup_call) : node_(node), setup_call_(setup_call) {}

  // Reads `id` in `layout` on every run, expecting its current dims.
  void add_input(const Values& v, int id, Layout layout) { inputs_.push_back(Input{id, layout, v.peek(id).dims}); }
  // Writes `id` (in y_layout_, with `dims`) besides y_ on every run: Split's later outputs. setup() finds their
  // pointers in more_y_, in the order added.
  void add_output(int id, std::vector<int64_t> dims) { more_outputs_.push_back(Output{id, std::move(dims)}); }
  // Keeps an operator created by xnn_create_*; ops run in the order added.
  void add_operator(xnn_operator_t raw) { ops_.emplace_back(raw, &xnn_delete_operator); }

  // Binds the operators to the input and output pointers: called on the first run and whenever one changed.
  virtual xnn_status setup(const std::vector<const float*>& x, float* y, pthreadpool_t threadpool) = 0;
  // Where the output goes: by default the value y_, sized to y_dims_ in y_layout_.
  virtual float* output(Values& v, int32_t dtype);
  // Runs after the inputs are read and before the pointers are compared (Conv repacks changed weights here).
  virtual core::Status prepare(Values&) { return core::Ok{}; }
  // Forces setup() on the next run (the operators were created again).
  void invalidate_setup() { bound_.clear(); }

  onnx::NodeProto node_;
  std::vector<Input> inputs_;
  int y_ = -1;
  Layout y_layout_ = Layout::kNhwc;
  std::vector<int64_t> y_dims_;
  std::vector<XnnOperator> ops_;
  std::vector<float*> more_y_;  // this run's pointers of the outputs added with add_output()

 private:
  struct Output {
    int id = -1;
    std::vector<int64_t> dims;
  };
  std::vector<Output> more_outputs_;
  const char* setup_call_;
  std::vector<const float*> x_;        // this run's input pointers (kept to avoid an allocation per run)
  std::vector<const void*> pointers_;  // this run's bound pointers
  std::vector<const void*> bound_;     // the pointers of the last setup()
};

// Runs a node on the plain reference kernels. Elementwise ops with one data input keep the producer's layout;
// everything else reads NCHW.
std::unique_ptr<Step> make_reference_step(const onnx::NodeProto& node, int64_t opset, std::vector<int> in, std::vector<int> out,
                                          bool layout_preserving);

// ---------------------------------------------------------------- the families

// A node, its slot ids (-1 for a missing optional input) and the model opset: what every family's factory reads.
struct NodeIo {
  const onnx::NodeProto& node;
  int64_t opset;
  const std::vector<int>& in;
  const std::vector<int>& out;
  int input(size_t k) const { return k < in.size() ? in[k] : -1; }
};

// A family factory's answer: the step, or a null step and why XNNPACK cannot run the node.
struct Built {
  std::unique_ptr<Step> step;
  std::string declined;  // why XNNPACK was not used; empty when it was
  std::string note;      // how the step differs from the node as written (NodePlacement::note)
};

inline Built declined(std::string why) { return Built{nullptr, std::move(why), {}}; }
inline Built built(std::unique_ptr<Step> step, std::string note = {}) { return Built{std::move(step), {}, std::move(note)}; }

float attr_float_or(const onnx::NodeProto& node, const std::string& name, float fallback);

// Conv and ConvTranspose (step_conv.cpp). A Conv can later be redirected into a Concat's channel slice.
class ConvStep;
core::Result<Built> make_conv_step(const NodeIo& io, Values& v, bool zero_extend_depthwise, ConvStep** conv);
bool is_transpose(const ConvStep& conv);
// True once fuse_activation() gave the Conv an output range.
bool has_output_range(const ConvStep& conv);
// From now on `conv` clamps its output to [lo, hi] in the microkernel and writes the value `y` (the output of the
// Relu or Clip that was the only reader of its own output) instead.
core::Status fuse_activation(ConvStep& conv, Values& v, int y, float lo, float hi);
// From now on `conv` writes channels [offset, offset + C_out) of `target` (NHWC, logical dims `target_dims`); the
// caller sizes `target` before the next run and guarantees nothing else reads the Conv's own output.
core::Status write_into(ConvStep& conv, Values& v, int target, const std::vector<int64_t>& target_dims, int64_t offset);

// Relu, LeakyRelu, Sigmoid, HardSwish, Clip, Neg, Sqrt; Add, Sub, Mul, Div (step_elementwise.cpp).
core::Result<Built> make_unary_step(const NodeIo& io, Values& v);
// PRelu whose slope is a constant that is one value, per channel of a rank-4 x (run NHWC) or along x's last axis.
core::Result<Built> make_prelu_step(const NodeIo& io, Values& v);
// What Relu ([0, inf]) or Clip (its constant bounds) clamps to; `declined` says why there is no such range.
struct ClampRange {
  float lo = kNoMin, hi = kNoMax;
  std::string declined;
};
ClampRange clamp_range(const NodeIo& io, const Values& v);
core::Result<Built> make_binary_step(const NodeIo& io, Values& v);
// Pow by a constant 2 as XNNPACK's square; Softmax over the innermost axis (before opset 13, the axes from `axis` on).
core::Result<Built> make_pow_step(const NodeIo& io, Values& v);
core::Result<Built> make_softmax_step(const NodeIo& io, Values& v);
// BatchNormalization in inference mode, as a per-channel affine map in either layout; null when it does not apply.
std::unique_ptr<Step> make_batch_norm_step(const NodeIo& io, const Values& v);

// Pad, Concat, DepthToSpace (step_data.cpp), and the Concat whose inputs were all written into its slices.
core::Result<Built> make_pad_step(const NodeIo& io, Values& v);
core::Result<Built> make_concat_step(const NodeIo& io, Values& v);
core::Result<Built> make_depth_to_space_step(const NodeIo& io, Values& v);
std::unique_ptr<Step> make_fused_concat_step(int y);
// Split on the axis innermost in storage: channels of an NHWC value, else the last axis (step_data.cpp).
core::Result<Built> make_split_step(const NodeIo& io, Values& v);

// MaxPool, AveragePool, GlobalAveragePool, bilinear Resize (and Upsample), MatMul / Gemm (step_spatial.cpp).
core::Result<Built> make_pool_step(const NodeIo& io, Values& v);
core::Result<Built> make_global_average_pool_step(const NodeIo& io, Values& v);
// ReduceMean over H and W of a rank-4 value with keepdims: global average pooling.
core::Result<Built> make_reduce_mean_step(const NodeIo& io, Values& v);
core::Result<Built> make_resize_step(const NodeIo& io, Values& v);
core::Result<Built> make_fully_connected_step(const NodeIo& io, Values& v);

// NodePlacement::fusion of a Relu or Clip that became its Conv's output range: "fused into Conv 'c'".
inline constexpr const char* kFusedIntoNote = "fused into";

inline constexpr const char* kNearestUpsampleNote = "optimized nearest upsample";
// An integer-factor nearest Resize or Upsample as row/pixel replication in the input's layout, with its placement note
// ("optimized nearest upsample (2x2 replication, NHWC)"); a null step when the node is not one.
Built make_nearest_upsample_step(const NodeIo& io, Values& v);

inline constexpr const char* kChannelPermuteNote = "optimized channel permutation";
// A Gather on the channel axis of a rank-4 value with constant 1-D indices, or a CRD DepthToSpace, as a per-pixel
// channel copy in NHWC, with its placement note; a null step when the node is not one (step_data.cpp).
Built make_channel_permute_step(const NodeIo& io, Values& v);

inline constexpr const char* kGroupNormNote = "optimized group normalization";
// GroupNorm as PyTorch exports it: Reshape [N, G, -1] -> InstanceNormalization -> Reshape back -> optional Mul and Add
// by per-channel constants, given as the chain's nodes and their slots in that order (step_norm.cpp). One step in
// x's layout, with its placement note ("optimized group normalization (32 groups of 4 channels, NHWC; ...)"); a null
// step when the values make the chain something else (a Reshape that does not group channels, a scale that is not
// one per group, ...).
Built make_group_norm_step(const std::vector<const onnx::NodeProto*>& chain, const std::vector<NodeIo>& io, Values& v);

}  // namespace dwdeconv::runtime_check::detail
