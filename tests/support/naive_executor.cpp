#include "tests/support/naive_executor.h"

#include <algorithm>
#include <cstdint>
#include <stdexcept>

#include "onnx_io/model_io.h"
#include "onnx_io/tensor.h"
#include "tests/support/naive_ops.h"

namespace dwdeconv::test {
namespace {

using namespace naive;  // Env, the node readers and the op kernels (naive_ops.h)

NaiveTensor from_proto(const onnx::TensorProto& t) {
  auto values = onnx_io::to_doubles(t);
  if (!values) throw std::runtime_error("naive executor: " + values.error().message);
  return NaiveTensor(onnx_io::dims_of(t), std::move(*values));
}

std::map<std::string, NaiveTensor> run_graph(const onnx::GraphProto& graph, Env env, int64_t opset);

std::vector<NaiveTensor> run_if(const onnx::NodeProto& node, const Env& env, int64_t opset) {
  const NaiveTensor& cond = input(node, env, 0);
  if (cond.data.size() != 1) fail(node, "cond must hold one element");
  const auto* branch = attr(node, cond.data[0] != 0.0 ? "then_branch" : "else_branch");
  if (branch == nullptr || !branch->has_g()) fail(node, "missing branch");
  auto outputs = run_graph(branch->g(), env, opset);  // the branch sees every outer-scope value
  std::vector<NaiveTensor> result;
  for (const auto& out : branch->g().output()) result.push_back(outputs.at(out.name()));
  if (static_cast<int>(result.size()) != node.output_size()) fail(node, "branch output count differs from the node's");
  return result;
}

// Loop with an optional trip count and condition; loop-carried values and scan outputs (stacked on a new
// leading axis). The body sees every outer-scope value.
std::vector<NaiveTensor> run_loop(const onnx::NodeProto& node, const Env& env, int64_t opset) {
  const auto* body_attr = attr(node, "body");
  if (body_attr == nullptr || !body_attr->has_g()) fail(node, "missing body");
  const onnx::GraphProto& body = body_attr->g();
  const NaiveTensor* trip = optional_input(node, env, 0);
  const NaiveTensor* cond_in = optional_input(node, env, 1);
  const int64_t max_trips = trip != nullptr ? static_cast<int64_t>(trip->data.at(0)) : INT64_MAX;
  bool cond = cond_in == nullptr || cond_in->data.at(0) != 0.0;
  std::vector<NaiveTensor> carried;
  for (int i = 2; i < node.input_size(); ++i) carried.push_back(input(node, env, i));
  const size_t n_carried = carried.size();
  const size_t n_scan = static_cast<size_t>(body.output_size()) - 1 - n_carried;
  std::vector<std::vector<NaiveTensor>> scans(n_scan);
  for (int64_t iter = 0; iter < max_trips && cond; ++iter) {
    Env inner = env;
    inner[body.input(0).name()] = NaiveTensor({}, {static_cast<double>(iter)});
    inner[body.input(1).name()] = NaiveTensor({}, {cond ? 1.0 : 0.0});
    for (size_t i = 0; i < n_carried; ++i) inner[body.input(static_cast<int>(i) + 2).name()] = carried[i];
    auto outputs = run_graph(body, inner, opset);
    cond = outputs.at(body.output(0).name()).data.at(0) != 0.0;
    for (size_t i = 0; i < n_carried; ++i) carried[i] = outputs.at(body.output(static_cast<int>(i) + 1).name());
    for (size_t i = 0; i < n_scan; ++i) scans[i].push_back(outputs.at(body.output(static_cast<int>(1 + n_carried + i)).name()));
  }
  std::vector<NaiveTensor> result = carried;
  for (const auto& steps : scans) {
    if (steps.empty()) fail(node, "a scan output with zero iterations is not implemented");
    NaiveTensor stacked;
    stacked.dims = steps[0].dims;
    stacked.dims.insert(stacked.dims.begin(), static_cast<int64_t>(steps.size()));
    for (const auto& t : steps) stacked.data.insert(stacked.data.end(), t.data.begin(), t.data.end());
    result.push_back(std::move(stacked));
  }
  return result;
}

void run_node(const onnx::NodeProto& node, Env& env, int64_t opset) {
  if (!node.domain().empty() && node.domain() != "ai.onnx") fail(node, "domain " + node.domain() + " is not implemented");
  const std::string& op = node.op_type();
  std::vector<NaiveTensor> outputs;
  if (op == "Constant") {
    const auto* value = attr(node, "value");
    if (value == nullptr || !value->has_t()) fail(node, "only the `value` form is implemented");
    outputs.push_back(from_proto(value->t()));
  } else if (op == "Identity") {
    outputs.push_back(input(node, env, 0));
  } else if (op == "Relu") {
    NaiveTensor t = input(node, env, 0);
    for (auto& v : t.data) v = std::max(v, 0.0);
    outputs.push_back(std::move(t));
  } else if (op == "Conv") {
    outputs.push_back(run_conv(node, env));
  } else if (op == "ConvTranspose") {
    outputs.push_back(run_conv_transpose(node, env));
  } else if (op == "Pad") {
    outputs.push_back(run_pad(node, env, opset));
  } else if (op == "Concat") {
    outputs.push_back(run_concat(node, env));
  } else if (op == "DepthToSpace") {
    outputs.push_back(run_depth_to_space(node, env, opset));
  } else if (op == "Shape") {
    if (attr(node, "start") != nullptr || attr(node, "end") != nullptr) fail(node, "start and end are not implemented");
    const auto& dims = input(node, env, 0).dims;
    outputs.push_back(NaiveTensor({static_cast<int64_t>(dims.size())}, std::vector<double>(dims.begin(), dims.end())));
  } else if (op == "ConstantOfShape") {
    const auto* value = attr(node, "value");
    const NaiveTensor fill = value != nullptr ? from_proto(value->t()) : NaiveTensor({1}, {0.0});
    if (fill.data.size() != 1) fail(node, "value must hold one element");
    const auto& shape = input(node, env, 0).data;
    NaiveTensor t(std::vector<int64_t>(shape.begin(), shape.end()), {});
    int64_t count = 1;
    for (int64_t d : t.dims) count *= d;
    t.data.assign(static_cast<size_t>(count), fill.data[0]);
    outputs.push_back(std::move(t));
  } else if (op == "Mul" || op == "Sub" || op == "Add") {
    outputs.push_back(run_mul(node, env, op == "Sub"));
  } else if (op == "Resize") {
    outputs.push_back(run_resize(node, env));
  } else if (op == "Reshape") {
    outputs.push_back(run_reshape(node, env));
  } else if (op == "Slice") {
    outputs.push_back(run_slice(node, env));
  } else if (op == "Transpose") {
    outputs.push_back(run_transpose(node, env));
  } else if (op == "Unsqueeze") {
    outputs.push_back(run_unsqueeze(node, env));
  } else if (op == "Flatten") {
    // [d0..d(a-1), da..] -> [d0*..*d(a-1), da*..]: the data as it is, row-major.
    NaiveTensor t = input(node, env, 0);
    const auto* a = attr(node, "axis");
    int64_t axis = a != nullptr ? a->i() : 1;
    if (axis < 0) axis += static_cast<int64_t>(t.dims.size());
    int64_t outer = 1, inner = 1;
    for (size_t d = 0; d < t.dims.size(); ++d) (static_cast<int64_t>(d) < axis ? outer : inner) *= t.dims[d];
    t.dims = {outer, inner};
    outputs.push_back(std::move(t));
  } else if (op == "Squeeze") {
    outputs.push_back(run_squeeze(node, env));
  } else if (op == "Expand" || op == "Tile") {
    outputs.push_back(run_expand_or_tile(node, env, op == "Tile"));
  } else if (op == "Gather") {
    outputs.push_back(run_gather(node, env));
  } else if (op == "Cast") {
    outputs.push_back(input(node, env, 0));  // every value is a double here; the chains cast int64 to int64
  } else if (op == "If") {
    outputs = run_if(node, env, opset);
  } else if (op == "Loop") {
    outputs = run_loop(node, env, opset);
  } else {
    fail(node, "op is not implemented");
  }
  for (int i = 0; i < node.output_size() && i < static_cast<int>(outputs.size()); ++i) {
    if (!node.output(i).empty()) env[node.output(i)] = std::move(outputs[static_cast<size_t>(i)]);
  }
}

std::map<std::string, NaiveTensor> run_graph(const onnx::GraphProto& graph, Env env, int64_t opset) {
  for (const auto& init : graph.initializer()) env.emplace(init.name(), from_proto(init));  // fed inputs win
  for (const auto& node : graph.node()) run_node(node, env, opset);
  std::map<std::string, NaiveTensor> outputs;
  for (const auto& out : graph.output()) {
    auto it = env.find(out.name());
    if (it == env.end()) throw std::runtime_error("naive executor: graph output '" + out.name() + "' was never computed");
    outputs[out.name()] = it->second;
  }
  return outputs;
}

}  // namespace

NaiveTensor::NaiveTensor(const core::Tensor4& t) : dims{t.n, t.c, t.h, t.w}, data(t.data) {}

core::Tensor4 NaiveTensor::as_tensor4() const {
  if (dims.size() != 4) throw std::runtime_error("naive executor: expected a 4-D tensor, got rank " + std::to_string(dims.size()));
  core::Tensor4 t(dims[0], dims[1], dims[2], dims[3]);
  if (t.data.size() != data.size()) throw std::runtime_error("naive executor: tensor data does not match its dims");
  t.data = data;
  return t;
}

NaiveTensor bool_scalar(bool value) { return NaiveTensor({}, {value ? 1.0 : 0.0}); }

std::pair<int64_t, int64_t> naive_deconv_pads(int64_t input, int64_t kernel, int64_t stride, int64_t dilation, int64_t output_padding,
                                              const std::string& auto_pad, int64_t explicit_begin, int64_t explicit_end,
                                              int64_t output_size) {
  const int64_t effective_kernel = (kernel - 1) * dilation + 1;
  const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  if (output_size < 0 && same) output_size = input * stride;
  if (output_size >= 0) {
    const int64_t total = stride * (input - 1) + output_padding + effective_kernel - output_size;
    // total/2 as the ONNX reference (Python) computes it: floor division. A negative total, an output_shape
    // larger than the natural size, then extends the end, as ONNX's test_convtranspose_output_shape expects.
    const int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
    if (auto_pad == "SAME_UPPER") return {half, total - half};
    return {total - half, half};
  }
  if (auto_pad == "VALID") return {0, 0};
  if (auto_pad != "NOTSET" && !auto_pad.empty()) throw std::runtime_error("naive executor: unknown auto_pad " + auto_pad);
  return {explicit_begin, explicit_end};
}

std::map<std::string, NaiveTensor> run_naive(const onnx::ModelProto& model, const std::map<std::string, NaiveTensor>& inputs) {
  const int64_t opset = onnx_io::default_opset(model);
  Env env;
  for (const auto& in : model.graph().input()) {
    auto it = inputs.find(in.name());
    if (it != inputs.end()) {
      env[in.name()] = it->second;
      continue;
    }
    bool is_initializer = false;
    for (const auto& init : model.graph().initializer()) is_initializer = is_initializer || init.name() == in.name();
    if (!is_initializer) throw std::runtime_error("naive executor: graph input '" + in.name() + "' was not fed");
  }
  return run_graph(model.graph(), env, opset);
}

}  // namespace dwdeconv::test
