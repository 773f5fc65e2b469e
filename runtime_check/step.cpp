#include "step.h"

#include "internal.h"
#include "onnx_io/attributes.h"
#include "ops/ops.h"

namespace dwdeconv::runtime_check::detail {

std::vector<size_t> storage_shape(const std::vector<int64_t>& dims, Layout layout) {
  std::vector<size_t> s;
  for (int64_t d : dims) s.push_back(static_cast<size_t>(d));
  if (layout == Layout::kNhwc) s = {s[0], s[2], s[3], s[1]};
  if (s.empty()) s.push_back(1);
  return s;
}

const Tensor& Values::read(int id, Layout want) {
  Slot& s = slots[static_cast<size_t>(id)];
  if (!layout_applies(s.t) || s.layout == want) return s.t;
  if (s.converted_version != s.version) {
    const Clock::time_point start = time_conversions ? Clock::now() : Clock::time_point{};
    const auto& d = s.t.dims;
    reuse(s.converted, static_cast<size_t>(s.t.numel()));
    s.converted.reshape(s.t.dtype, d);
    if (want == Layout::kNhwc) nchw_to_nhwc(s.t.f.data(), s.converted.f.data(), d[0], d[1], d[2], d[3]);
    else nhwc_to_nchw(s.t.f.data(), s.converted.f.data(), d[0], d[1], d[2], d[3]);
    s.converted_version = s.version;
    if (time_conversions) conversion_ms += ms_between(start, Clock::now());
  }
  return s.converted;
}

Tensor& Values::write(int id, Layout layout, int32_t dtype, const std::vector<int64_t>& dims) {
  Slot& s = slots[static_cast<size_t>(id)];
  s.layout = layout;
  if (is_float_type(dtype)) {
    size_t size = 1;
    for (int64_t d : dims) size *= static_cast<size_t>(d);
    reuse(s.t, size);
  }
  s.t.reshape(dtype, dims);
  s.defined = true;
  ++s.version;
  return s.t;
}

void Values::touch(int id, Layout layout) {
  Slot& s = slots[static_cast<size_t>(id)];
  s.layout = layout;
  s.defined = true;
  ++s.version;
}

void Values::retire(int id) {
  Slot& s = slots[static_cast<size_t>(id)];
  for (Tensor* t : {&s.t, &s.converted}) {
    std::vector<float> buffer = t->f.take_owned();
    if (reuse_spare && buffer.capacity() > 0) spare.push_back(std::move(buffer));
  }
  s.converted_version = ~uint64_t{0};
}

void Values::reuse(Tensor& t, size_t size) {
  if (!reuse_spare || !t.f.empty() || t.f.is_view() || size == 0) return;
  size_t best = spare.size();
  for (size_t k = 0; k < spare.size(); ++k) {
    if (spare[k].capacity() >= size && (best == spare.size() || spare[k].capacity() < spare[best].capacity())) best = k;
  }
  if (best == spare.size()) return;
  t.f = FloatStorage(std::move(spare[best]));  // keeps its old size: shrinking to `size` writes nothing
  spare[best] = std::move(spare.back());
  spare.pop_back();
}

core::Error xnn_failure(const onnx::NodeProto& node, const char* call, xnn_status status) {
  return node_error(node, std::string(call) + " failed with XNNPACK status " + std::to_string(static_cast<int>(status)));
}

core::Status check_dims(const onnx::NodeProto& node, const Tensor& t, const std::vector<int64_t>& want) {
  if (t.dims != want) {
    return node_error(node, "input is " + format_dims(t.dims) + " but the plan was made for " + format_dims(want));
  }
  return core::Ok{};
}

void XnnStep::accesses(const Values&, std::vector<Access>& out) const {
  for (const Input& in : inputs_) out.push_back(Access{in.id, in.layout, false});
  out.push_back(Access{y_, y_layout_, true});
  for (const Output& o : more_outputs_) out.push_back(Access{o.id, y_layout_, true});
}

float* XnnStep::output(Values& v, int32_t dtype) { return v.write(y_, y_layout_, dtype, y_dims_).f.data(); }

core::Status XnnStep::run(Values& v) {
  x_.clear();
  for (const Input& in : inputs_) {
    const Tensor& t = v.read(in.id, in.layout);
    RC_CHECK(check_dims(node_, t, in.dims));
    x_.push_back(t.f.data());
  }
  RC_CHECK(prepare(v));
  const int32_t dtype = v.peek(inputs_[0].id).dtype;
  float* y = output(v, dtype);
  more_y_.clear();
  for (const Output& o : more_outputs_) more_y_.push_back(v.write(o.id, y_layout_, dtype, o.dims).f.data());
  // Setup is only redone when a pointer changed: they stay put across runs, so normally once.
  pointers_.assign(x_.begin(), x_.end());
  pointers_.push_back(y);
  pointers_.insert(pointers_.end(), more_y_.begin(), more_y_.end());
  for (const auto& op : ops_) pointers_.push_back(op.get());
  if (pointers_ != bound_) {
    const xnn_status status = setup(x_, y, v.threadpool);
    if (status != xnn_status_success) return xnn_failure(node_, setup_call_, status);
    bound_ = pointers_;
  }
  for (const auto& op : ops_) {
    const xnn_status status = xnn_run_operator(op.get(), v.threadpool);
    if (status != xnn_status_success) return xnn_failure(node_, "xnn_run_operator", status);
  }
  return core::Ok{};
}

float attr_float_or(const onnx::NodeProto& node, const std::string& name, float fallback) {
  const auto* a = onnx_io::find_attribute(node, name);
  return a != nullptr && a->type() == onnx::AttributeProto::FLOAT ? a->f() : fallback;
}

namespace {

class ReferenceStep : public Step {
 public:
  ReferenceStep(const onnx::NodeProto& node, int64_t opset, std::vector<int> in, std::vector<int> out, bool layout_preserving)
      : node_(node), opset_(opset), in_(std::move(in)), out_(std::move(out)), preserving_(layout_preserving) {}

  core::Status run(Values& v) override {
    const Layout layout = preserving_ && in_[0] >= 0 ? v.layout(in_[0]) : Layout::kNchw;
    std::vector<const Tensor*> inputs;
    for (int id : in_) inputs.push_back(id < 0 ? nullptr : &v.read(id, inputs.empty() ? layout : Layout::kNchw));
    std::vector<Tensor*> outputs;
    // The output's size is known only once the kernel ran; the first input's is the size of most (Reshape, Transpose,
    // InstanceNormalization, elementwise ops), and a buffer that turns out too small is simply reallocated.
    const size_t guess = inputs.empty() || inputs[0] == nullptr || !inputs[0]->is_float() ? 0 : inputs[0]->f.size();
    for (int id : out_) {
      if (id >= 0) v.lend_spare(id, guess);
      outputs.push_back(id < 0 ? nullptr : &v.slots[static_cast<size_t>(id)].t);
    }
    RC_CHECK(run_reference_node(node_, OpContext{opset_}, inputs, outputs));
    for (int id : out_) {
      if (id >= 0) v.touch(id, layout);
    }
    return core::Ok{};
  }

  void accesses(const Values& v, std::vector<Access>& out) const override {
    const Layout layout = preserving_ && in_[0] >= 0 ? v.layout(in_[0]) : Layout::kNchw;
    bool first = true;
    for (int id : in_) {
      if (id >= 0) out.push_back(Access{id, first ? layout : Layout::kNchw, false});
      first = false;
    }
    for (int id : out_) {
      if (id >= 0) out.push_back(Access{id, layout, true});
    }
  }

 private:
  onnx::NodeProto node_;
  int64_t opset_;
  std::vector<int> in_, out_;
  bool preserving_;
};

}  // namespace

std::unique_ptr<Step> make_reference_step(const onnx::NodeProto& node, int64_t opset, std::vector<int> in, std::vector<int> out,
                                          bool layout_preserving) {
  return std::make_unique<ReferenceStep>(node, opset, std::move(in), std::move(out), layout_preserving);
}

}  // namespace dwdeconv::runtime_check::detail
