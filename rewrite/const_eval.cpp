#include "rewrite/const_eval.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "onnx_io/attributes.h"
#include "onnx_io/tensor.h"

namespace dwdeconv::rewrite {
namespace {

using core::declined;
using onnx::TensorProto;

bool integer_type(int32_t t) {
  switch (t) {
    case TensorProto::INT8: case TensorProto::UINT8: case TensorProto::INT16: case TensorProto::UINT16:
    case TensorProto::INT32: case TensorProto::UINT32: case TensorProto::INT64: case TensorProto::UINT64:
    case TensorProto::BOOL:
      return true;
    default:
      return false;
  }
}

bool float_type(int32_t t) {
  return t == TensorProto::FLOAT || t == TensorProto::DOUBLE || t == TensorProto::FLOAT16 || t == TensorProto::BFLOAT16;
}

std::string join(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return "[" + s + "]";
}

core::Result<int64_t> count_of(const std::vector<int64_t>& dims, const std::string& who) {
  auto n = onnx_io::element_count(dims, who);
  if (!n) return declined(n.error().message);
  if (*n > kMaxFoldedElements) {
    return declined(who + " would have " + std::to_string(*n) + " elements, more than the " + std::to_string(kMaxFoldedElements) +
                    " this tool folds");
  }
  return *n;
}

// Row-major strides of `dims`.
std::vector<int64_t> strides_of(const std::vector<int64_t>& dims) {
  std::vector<int64_t> strides(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) strides[i - 1] = strides[i] * dims[i];
  return strides;
}

// A new value with `src`'s type, `dims`, and elements src[index[i]].
ConstTensor gather(const ConstTensor& src, std::vector<int64_t> dims, const std::vector<int64_t>& index) {
  ConstTensor out;
  out.data_type = src.data_type;
  out.dims = std::move(dims);
  if (src.is_integer()) {
    for (int64_t i : index) out.ints.push_back(src.ints[static_cast<size_t>(i)]);
  } else {
    for (int64_t i : index) out.reals.push_back(src.reals[static_cast<size_t>(i)]);
  }
  return out;
}

// For every element of an output of `out_dims`, the flat source index that `source_of` maps its coordinates to.
template <typename F>
std::vector<int64_t> map_indices(const std::vector<int64_t>& out_dims, int64_t count, F source_of) {
  std::vector<int64_t> index(static_cast<size_t>(count));
  std::vector<int64_t> coord(out_dims.size(), 0);
  for (int64_t i = 0; i < count; ++i) {
    index[static_cast<size_t>(i)] = source_of(coord);
    for (size_t d = out_dims.size(); d-- > 0;) {
      if (++coord[d] < out_dims[d]) break;
      coord[d] = 0;
    }
  }
  return index;
}

// An axis attribute or input value in [-rank, rank) made non-negative.
core::Result<int64_t> normalize_axis(int64_t axis, int64_t rank, const std::string& who) {
  if (axis < -rank || axis >= rank) return declined(who + ": axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

// Numpy broadcasting of two shapes (Expand is bidirectional).
core::Result<std::vector<int64_t>> broadcast(const std::vector<int64_t>& a, const std::vector<int64_t>& b, const std::string& who) {
  const size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i + a.size() >= rank ? a[i + a.size() - rank] : 1;
    const int64_t db = i + b.size() >= rank ? b[i + b.size() - rank] : 1;
    if (da != db && da != 1 && db != 1) return declined(who + ": shapes " + join(a) + " and " + join(b) + " do not broadcast");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

// Where `name` is defined as `scope` reads it: the graph, and the node that outputs it (nullptr for an
// initializer or graph input). Inner definitions hide outer ones, as ONNX scopes names.
std::pair<const GraphScope*, const onnx::NodeProto*> find_definition(const std::string& name, const GraphScope& scope) {
  for (const GraphScope* at = &scope; at != nullptr; at = at->parent) {
    for (const auto& node : at->graph->node()) {
      for (const auto& out : node.output()) {
        if (out == name) return {at, &node};
      }
    }
    for (const auto& init : at->graph->initializer()) {
      if (init.name() == name) return {at, nullptr};
    }
    for (const auto& input : at->graph->input()) {
      if (input.name() == name) return {at, nullptr};
    }
  }
  return {nullptr, nullptr};
}

}  // namespace

bool ConstTensor::is_integer() const { return integer_type(data_type); }

core::Result<ConstTensor> to_const_tensor(const TensorProto& tensor) {
  ConstTensor out;
  out.data_type = tensor.data_type();
  out.dims = onnx_io::dims_of(tensor);
  const std::string who = "tensor '" + tensor.name() + "'";
  if (!integer_type(out.data_type) && !float_type(out.data_type)) {
    return declined(who + " has element type " + onnx_io::data_type_name(out.data_type) + ", which is not folded");
  }
  if (onnx_io::is_external(tensor) && !tensor.has_raw_data()) return declined(who + " has its data outside the model");
  auto count = count_of(out.dims, who);
  if (!count) return count.error();
  if (out.data_type == TensorProto::INT64) {
    // Read exactly: Slice bounds such as INT64_MAX do not survive a trip through double.
    if (auto status = onnx_io::validate_tensor_data(tensor, who); !status) return status.error();
    out.ints.resize(static_cast<size_t>(*count));
    if (tensor.has_raw_data()) {
      if (*count > 0) std::memcpy(out.ints.data(), tensor.raw_data().data(), out.ints.size() * sizeof(int64_t));
    } else {
      std::copy(tensor.int64_data().begin(), tensor.int64_data().end(), out.ints.begin());
    }
    return out;
  }
  auto values = onnx_io::to_doubles(tensor);
  if (!values) return declined(values.error().message);
  if (out.is_integer()) {
    for (double v : *values) out.ints.push_back(static_cast<int64_t>(v));  // exact: every other integer type fits
  } else {
    out.reals = std::move(*values);
  }
  return out;
}

core::Result<ConstTensor> ConstEvaluator::evaluate(const std::string& name, const GraphScope& scope) {
  const auto [where, producer] = find_definition(name, scope);
  if (where == nullptr) return core::invalid_model("tensor '" + name + "' is read but never defined");
  const auto key = std::make_pair(where->index, name);
  if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  if (depth_ > 256) return declined("'" + name + "' is computed by a chain deeper than 256 nodes");
  core::Result<ConstTensor> result = declined("not evaluated");
  if (producer != nullptr && producer->op_type() != "Constant") {
    ++depth_;
    result = evaluate_node(*producer, name, *where);
    --depth_;
  } else {
    // Initializers and Constants, with the same rules the weights follow (no overridable initializers, ...).
    auto source = resolve_constant(name, *where, ir_version_);
    if (!source) {
      result = source.error();
    } else if (source->sparse != nullptr) {
      result = declined("'" + name + "' is a sparse initializer, which is not folded");
    } else {
      result = to_const_tensor(*source->tensor);
    }
  }
  cache_.emplace(key, result);
  return result;
}

core::Result<std::vector<int64_t>> ConstEvaluator::ints_of(const onnx::NodeProto& node, int index, const GraphScope& scope) {
  auto value = evaluate(node.input(index), scope);
  if (!value) return value.error();
  if (!value->is_integer()) return declined(onnx_io::describe_node(node) + ": input '" + node.input(index) + "' is not an integer tensor");
  return value->ints;
}

core::Result<ConstTensor> ConstEvaluator::evaluate_node(const onnx::NodeProto& node, const std::string& name, const GraphScope& scope) {
  const std::string who = onnx_io::describe_node(node);
  const std::string& op = node.op_type();
  if (!node.domain().empty() && node.domain() != "ai.onnx") {
    return declined("'" + name + "' is computed by " + who + " in domain '" + node.domain() + "', which is not folded");
  }
  if (node.output_size() != 1) return declined("'" + name + "' is computed by " + who + ", which has more than one output");
  auto input = [&](int i) -> core::Result<ConstTensor> {
    if (i >= node.input_size() || node.input(i).empty()) return declined(who + ": input " + std::to_string(i) + " is missing");
    return evaluate(node.input(i), scope);
  };
  auto has_input = [&](int i) { return i < node.input_size() && !node.input(i).empty(); };

  if (op == "Identity") return input(0);

  if (op == "Shape") {
    const auto* type = types_.find(scope.index, node.input(0));
    if (type == nullptr || !type->has_tensor_type() || !type->tensor_type().has_shape()) {
      return declined(who + ": the shape of '" + node.input(0) + "' is not known");
    }
    const auto& shape = type->tensor_type().shape();
    std::vector<int64_t> dims;
    for (const auto& d : shape.dim()) {
      if (!d.has_dim_value()) return declined(who + ": the shape of '" + node.input(0) + "' has a dim that is not known");
      dims.push_back(d.dim_value());
    }
    const auto rank = static_cast<int64_t>(dims.size());
    auto start = onnx_io::get_int(node, "start", 0);
    auto end = onnx_io::get_int(node, "end", rank);
    if (!start || !end) return declined((start ? end : start).error().message);
    const auto clamp = [rank](int64_t v) { return std::clamp(v < 0 ? v + rank : v, int64_t{0}, rank); };
    const int64_t b = clamp(*start), e = std::max(b, clamp(*end));
    ConstTensor out;
    out.data_type = TensorProto::INT64;
    out.ints.assign(dims.begin() + b, dims.begin() + e);
    out.dims = {e - b};
    return out;
  }

  if (op == "ConstantOfShape") {
    auto shape = ints_of(node, 0, scope);
    if (!shape) return shape.error();
    auto count = count_of(*shape, who);
    if (!count) return count.error();
    ConstTensor fill;
    fill.dims = {1};
    fill.reals = {0.0};
    if (const auto* value = onnx_io::find_attribute(node, "value"); value != nullptr && value->has_t()) {
      auto t = to_const_tensor(value->t());
      if (!t) return t.error();
      if (t->size() != 1) return declined(who + ": `value` must hold one element");
      fill = std::move(*t);
    }
    return gather(fill, *shape, std::vector<int64_t>(static_cast<size_t>(*count), 0));
  }

  if (op == "Cast") {
    auto x = input(0);
    if (!x) return x;
    auto to = onnx_io::get_int(node, "to", 0);
    if (!to) return declined(to.error().message);
    const auto target = static_cast<int32_t>(*to);
    ConstTensor out;
    out.data_type = target;
    out.dims = x->dims;
    if (target == TensorProto::INT64 || target == TensorProto::INT32) {
      for (size_t i = 0; i < x->size(); ++i) {
        if (x->is_integer()) {
          out.ints.push_back(x->ints[i]);
          continue;
        }
        const double v = std::trunc(x->reals[i]);
        if (!(std::abs(v) < 9.2e18)) return declined(who + ": " + std::to_string(x->reals[i]) + " does not fit an integer");
        out.ints.push_back(static_cast<int64_t>(v));
      }
      if (target == TensorProto::INT32) {
        for (int64_t& v : out.ints) v = static_cast<int32_t>(v);  // wraps, as a C cast does
      }
    } else if (target == TensorProto::FLOAT || target == TensorProto::DOUBLE) {
      for (size_t i = 0; i < x->size(); ++i) {
        const double v = x->at(i);
        out.reals.push_back(target == TensorProto::FLOAT ? static_cast<double>(static_cast<float>(v)) : v);
      }
    } else {
      return declined(who + ": Cast to " + onnx_io::data_type_name(target) + " is not folded");
    }
    return out;
  }

  if (op == "Concat") {
    auto axis_attr = onnx_io::get_int(node, "axis", 0);
    if (!axis_attr) return declined(axis_attr.error().message);
    std::vector<ConstTensor> parts;
    for (int i = 0; i < node.input_size(); ++i) {
      auto part = input(i);
      if (!part) return part;
      parts.push_back(std::move(*part));
    }
    if (parts.empty()) return declined(who + ": no inputs");
    const auto rank = static_cast<int64_t>(parts[0].dims.size());
    auto axis = normalize_axis(*axis_attr, rank, who);
    if (!axis) return axis.error();
    // Concatenated along `axis`: one flat value holding every part, then gathered in output order.
    ConstTensor all;
    all.data_type = parts[0].data_type;
    std::vector<int64_t> dims = parts[0].dims;
    dims[static_cast<size_t>(*axis)] = 0;
    std::vector<int64_t> offsets, begins;  // element offset of each part in `all`, and its first index on axis
    for (const auto& p : parts) {
      if (p.data_type != all.data_type || p.dims.size() != dims.size()) return declined(who + ": inputs differ in type or rank");
      for (size_t d = 0; d < dims.size(); ++d) {
        if (d != static_cast<size_t>(*axis) && p.dims[d] != dims[d]) return declined(who + ": input dims " + join(p.dims) + " do not match");
      }
      offsets.push_back(static_cast<int64_t>(all.size()));
      begins.push_back(dims[static_cast<size_t>(*axis)]);
      dims[static_cast<size_t>(*axis)] += p.dims[static_cast<size_t>(*axis)];
      all.ints.insert(all.ints.end(), p.ints.begin(), p.ints.end());
      all.reals.insert(all.reals.end(), p.reals.begin(), p.reals.end());
    }
    auto count = count_of(dims, who);
    if (!count) return count.error();
    const auto index = map_indices(dims, *count, [&](const std::vector<int64_t>& c) {
      const int64_t along = c[static_cast<size_t>(*axis)];
      size_t k = parts.size() - 1;
      while (begins[k] > along) --k;
      std::vector<int64_t> local = c;
      local[static_cast<size_t>(*axis)] -= begins[k];
      const auto strides = strides_of(parts[k].dims);
      int64_t flat = offsets[k];
      for (size_t d = 0; d < local.size(); ++d) flat += local[d] * strides[d];
      return flat;
    });
    return gather(all, dims, index);
  }

  if (op == "Reshape") {
    auto x = input(0);
    if (!x) return x;
    auto shape = ints_of(node, 1, scope);
    if (!shape) return shape.error();
    auto allowzero = onnx_io::get_int(node, "allowzero", 0);
    if (!allowzero) return declined(allowzero.error().message);
    std::vector<int64_t> dims = *shape;
    int64_t known = 1;
    int infer = -1;
    for (size_t i = 0; i < dims.size(); ++i) {
      if (dims[i] == 0 && *allowzero == 0) {
        if (i >= x->dims.size()) return declined(who + ": shape " + join(*shape) + " copies a dim the input lacks");
        dims[i] = x->dims[i];
      }
      if (dims[i] == -1) {
        if (infer >= 0) return declined(who + ": shape " + join(*shape) + " has two -1");
        infer = static_cast<int>(i);
      } else if (dims[i] < 0) {
        return declined(who + ": shape " + join(*shape) + " has a negative dim");
      } else if (dims[i] > 0 && known > std::numeric_limits<int64_t>::max() / dims[i]) {
        return declined(who + ": shape " + join(*shape) + " holds more elements than int64 counts");
      } else {
        known *= dims[i];
      }
    }
    const auto total = static_cast<int64_t>(x->size());
    if (infer >= 0) {
      if (known == 0 || total % known != 0) return declined(who + ": cannot reshape " + join(x->dims) + " to " + join(*shape));
      dims[static_cast<size_t>(infer)] = total / known;
    } else if (known != total) {
      return declined(who + ": cannot reshape " + join(x->dims) + " to " + join(*shape));
    }
    ConstTensor out = std::move(*x);
    out.dims = dims;
    return out;
  }

  if (op == "Transpose") {
    auto x = input(0);
    if (!x) return x;
    const auto rank = static_cast<int64_t>(x->dims.size());
    std::vector<int64_t> reverse(static_cast<size_t>(rank));
    for (int64_t i = 0; i < rank; ++i) reverse[static_cast<size_t>(i)] = rank - 1 - i;
    auto perm = onnx_io::get_ints(node, "perm", reverse);
    if (!perm) return declined(perm.error().message);
    std::vector<int64_t> sorted = *perm;
    std::sort(sorted.begin(), sorted.end());
    std::vector<int64_t> identity(static_cast<size_t>(rank));
    std::iota(identity.begin(), identity.end(), 0);
    if (sorted != identity) return declined(who + ": perm " + join(*perm) + " is not a permutation of the input's axes");
    std::vector<int64_t> dims;
    for (int64_t p : *perm) dims.push_back(x->dims[static_cast<size_t>(p)]);
    const auto in_strides = strides_of(x->dims);
    const auto index = map_indices(dims, static_cast<int64_t>(x->size()), [&](const std::vector<int64_t>& c) {
      int64_t flat = 0;
      for (size_t d = 0; d < c.size(); ++d) flat += c[d] * in_strides[static_cast<size_t>((*perm)[d])];
      return flat;
    });
    return gather(*x, dims, index);
  }

  if (op == "Unsqueeze" || op == "Squeeze") {
    auto x = input(0);
    if (!x) return x;
    // Axes are an attribute before opset 13 and an input from 13 on; the node's own form says which.
    std::vector<int64_t> axes;
    if (has_input(1)) {
      auto a = ints_of(node, 1, scope);
      if (!a) return a.error();
      axes = *a;
    } else {
      auto a = onnx_io::get_ints(node, "axes", {});
      if (!a) return declined(a.error().message);
      axes = *a;
    }
    std::vector<int64_t> dims;
    if (op == "Unsqueeze") {
      const auto rank = static_cast<int64_t>(x->dims.size() + axes.size());
      std::vector<bool> inserted(static_cast<size_t>(rank), false);
      for (int64_t a : axes) {
        auto axis = normalize_axis(a, rank, who);
        if (!axis) return axis.error();
        if (inserted[static_cast<size_t>(*axis)]) return declined(who + ": axes " + join(axes) + " repeat an axis");
        inserted[static_cast<size_t>(*axis)] = true;
      }
      size_t next = 0;
      for (int64_t i = 0; i < rank; ++i) dims.push_back(inserted[static_cast<size_t>(i)] ? 1 : x->dims[next++]);
    } else {
      const auto rank = static_cast<int64_t>(x->dims.size());
      std::vector<bool> removed(static_cast<size_t>(rank), axes.empty());
      for (int64_t a : axes) {
        auto axis = normalize_axis(a, rank, who);
        if (!axis) return axis.error();
        if (x->dims[static_cast<size_t>(*axis)] != 1) return declined(who + ": axis " + std::to_string(a) + " has size " + std::to_string(x->dims[static_cast<size_t>(*axis)]) + ", not 1");
        removed[static_cast<size_t>(*axis)] = true;
      }
      for (int64_t i = 0; i < rank; ++i) {
        if (!removed[static_cast<size_t>(i)] || x->dims[static_cast<size_t>(i)] != 1) dims.push_back(x->dims[static_cast<size_t>(i)]);
      }
    }
    ConstTensor out = std::move(*x);
    out.dims = dims;
    return out;
  }

  if (op == "Expand" || op == "Tile") {
    auto x = input(0);
    if (!x) return x;
    auto arg = ints_of(node, 1, scope);
    if (!arg) return arg.error();
    std::vector<int64_t> dims;
    if (op == "Expand") {
      auto b = broadcast(x->dims, *arg, who);
      if (!b) return b.error();
      dims = *b;
    } else {
      if (arg->size() != x->dims.size()) return declined(who + ": repeats " + join(*arg) + " do not match rank " + std::to_string(x->dims.size()));
      for (size_t d = 0; d < arg->size(); ++d) {
        if ((*arg)[d] < 0) return declined(who + ": negative repeats " + join(*arg));
        // x's dims are at most kMaxFoldedElements, so the product cannot overflow; count_of bounds it below.
        if ((*arg)[d] > kMaxFoldedElements) return declined(who + ": repeats " + join(*arg) + " are too large to fold");
        dims.push_back(x->dims[d] * (*arg)[d]);
      }
    }
    auto count = count_of(dims, who);
    if (!count) return count.error();
    const auto in_strides = strides_of(x->dims);
    const size_t lead = dims.size() - x->dims.size();  // Expand may add leading axes
    const auto index = map_indices(dims, *count, [&](const std::vector<int64_t>& c) {
      int64_t flat = 0;
      for (size_t d = 0; d < x->dims.size(); ++d) {
        const int64_t extent = x->dims[d];
        const int64_t at = c[d + lead];
        flat += (op == "Tile" ? at % extent : (extent == 1 ? 0 : at)) * in_strides[d];
      }
      return flat;
    });
    return gather(*x, dims, index);
  }

  if (op == "Gather") {
    auto x = input(0);
    if (!x) return x;
    auto indices = input(1);
    if (!indices) return indices;
    if (!indices->is_integer()) return declined(who + ": indices are not integers");
    auto axis_attr = onnx_io::get_int(node, "axis", 0);
    if (!axis_attr) return declined(axis_attr.error().message);
    const auto rank = static_cast<int64_t>(x->dims.size());
    auto axis = normalize_axis(*axis_attr, rank, who);
    if (!axis) return axis.error();
    const auto a = static_cast<size_t>(*axis);
    const int64_t extent = x->dims[a];
    // Output dims: x.dims[:axis] + indices.dims + x.dims[axis+1:].
    std::vector<int64_t> dims(x->dims.begin(), x->dims.begin() + *axis);
    dims.insert(dims.end(), indices->dims.begin(), indices->dims.end());
    dims.insert(dims.end(), x->dims.begin() + *axis + 1, x->dims.end());
    for (int64_t i : indices->ints) {
      if (i < -extent || i >= extent) return declined(who + ": index " + std::to_string(i) + " is out of range for a dim of " + std::to_string(extent));
    }
    auto count = count_of(dims, who);
    if (!count) return count.error();
    const auto in_strides = strides_of(x->dims);
    const auto index_strides = strides_of(indices->dims);
    const size_t q = indices->dims.size();
    const auto index = map_indices(dims, *count, [&](const std::vector<int64_t>& c) {
      int64_t which = 0;
      for (size_t d = 0; d < q; ++d) which += c[a + d] * index_strides[d];
      int64_t i = indices->ints[static_cast<size_t>(which)];
      if (i < 0) i += extent;
      int64_t flat = i * in_strides[a];
      for (size_t d = 0; d < a; ++d) flat += c[d] * in_strides[d];
      for (size_t d = a + 1; d < x->dims.size(); ++d) flat += c[d - 1 + q] * in_strides[d];
      return flat;
    });
    return gather(*x, dims, index);
  }

  if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") {
    auto a = input(0);
    if (!a) return a;
    auto b = input(1);
    if (!b) return b;
    if (a->data_type != b->data_type) return declined(who + ": inputs differ in element type");
    auto dims = broadcast(a->dims, b->dims, who);
    if (!dims) return dims.error();
    auto count = count_of(*dims, who);
    if (!count) return count.error();
    // Each operand's flat index for every output element, with broadcast axes pinned to 0.
    auto operand_index = [&](const ConstTensor& t) {
      const auto strides = strides_of(t.dims);
      const size_t lead = dims->size() - t.dims.size();
      return map_indices(*dims, *count, [&](const std::vector<int64_t>& c) {
        int64_t flat = 0;
        for (size_t d = 0; d < t.dims.size(); ++d) flat += (t.dims[d] == 1 ? 0 : c[d + lead]) * strides[d];
        return flat;
      });
    };
    const auto ia = operand_index(*a), ib = operand_index(*b);
    ConstTensor out;
    out.data_type = a->data_type;
    out.dims = *dims;
    for (size_t i = 0; i < ia.size(); ++i) {
      if (out.is_integer()) {
        const int64_t x = a->ints[static_cast<size_t>(ia[i])], y = b->ints[static_cast<size_t>(ib[i])];
        int64_t r = 0;
        bool overflow = false;
        if (op == "Add") overflow = __builtin_add_overflow(x, y, &r);
        if (op == "Sub") overflow = __builtin_sub_overflow(x, y, &r);
        if (op == "Mul") overflow = __builtin_mul_overflow(x, y, &r);
        if (op == "Div") {
          // Runtimes disagree on rounding a negative quotient, so only exact divisions are folded.
          if (y == 0 || (x == std::numeric_limits<int64_t>::min() && y == -1) || x % y != 0) return declined(who + ": integer division is not exact");
          r = x / y;
        }
        if (overflow) return declined(who + ": the result overflows int64");
        // Narrower integers wrap in the runtime: fold INT32 only while it does not, and no other width.
        if (out.data_type == TensorProto::INT32 && r != static_cast<int32_t>(r)) return declined(who + ": the result overflows INT32");
        if (out.data_type != TensorProto::INT64 && out.data_type != TensorProto::INT32) {
          return declined(who + ": arithmetic in " + onnx_io::data_type_name(out.data_type) + " is not folded");
        }
        out.ints.push_back(r);
      } else {
        const double x = a->reals[static_cast<size_t>(ia[i])], y = b->reals[static_cast<size_t>(ib[i])];
        double r = op == "Add" ? x + y : op == "Sub" ? x - y : op == "Mul" ? x * y : x / y;
        if (out.data_type == TensorProto::FLOAT) r = static_cast<double>(static_cast<float>(r));  // as the runtime computes it
        if (out.data_type == TensorProto::FLOAT16 || out.data_type == TensorProto::BFLOAT16) {
          return declined(who + ": arithmetic in " + onnx_io::data_type_name(out.data_type) + " is not folded");
        }
        out.reals.push_back(r);
      }
    }
    return out;
  }

  if (op == "Slice") {
    auto x = input(0);
    if (!x) return x;
    const auto rank = static_cast<int64_t>(x->dims.size());
    std::vector<int64_t> starts, ends, axes, steps;
    if (node.input_size() == 1) {  // opset < 10: attributes, no steps
      auto s = onnx_io::get_ints(node, "starts", {});
      auto e = onnx_io::get_ints(node, "ends", {});
      auto a = onnx_io::get_ints(node, "axes", {});
      for (const auto* r : {&s, &e, &a}) {
        if (!*r) return declined(r->error().message);
      }
      starts = *s;
      ends = *e;
      axes = *a;
    } else {
      for (auto [i, target] : {std::pair<int, std::vector<int64_t>*>{1, &starts}, {2, &ends}, {3, &axes}, {4, &steps}}) {
        if (!has_input(i)) continue;
        auto v = ints_of(node, i, scope);
        if (!v) return v.error();
        *target = *v;
      }
    }
    if (axes.empty()) {
      for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
    }
    if (steps.empty()) steps.assign(starts.size(), 1);
    if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size()) {
      return declined(who + ": starts, ends, axes and steps differ in length");
    }
    // Per axis: first element and step, after the schema's clamping (negative steps walk backwards).
    std::vector<int64_t> first(static_cast<size_t>(rank), 0), step(static_cast<size_t>(rank), 1), dims = x->dims;
    for (size_t i = 0; i < starts.size(); ++i) {
      auto axis = normalize_axis(axes[i], rank, who);
      if (!axis) return axis.error();
      const auto a = static_cast<size_t>(*axis);
      const int64_t n = x->dims[a], st = steps[i];
      if (st == 0) return declined(who + ": step 0");
      if (st == std::numeric_limits<int64_t>::min()) return declined(who + ": step " + std::to_string(st) + " is out of range");
      if (n == 0) {  // nothing to take, and the clamps below would have empty ranges
        dims[a] = 0;
        continue;
      }
      int64_t b = starts[i], e = ends[i];
      if (b < 0) b = b < -n ? 0 : b + n;  // written to avoid overflow at INT64_MIN
      if (e < 0) e = e < -n ? -1 : e + n;
      if (st > 0) {
        b = std::clamp<int64_t>(b, 0, n);
        e = std::clamp<int64_t>(e, 0, n);
        dims[a] = e > b ? 1 + (e - b - 1) / st : 0;  // ceil((e - b) / st), without overflow for a huge step
      } else {
        b = std::clamp<int64_t>(b, 0, n - 1);
        e = std::clamp<int64_t>(e, -1, n - 1);
        dims[a] = b > e ? 1 + (b - e - 1) / (-st) : 0;
      }
      first[a] = b;
      step[a] = st;
    }
    auto count = count_of(dims, who);
    if (!count) return count.error();
    const auto in_strides = strides_of(x->dims);
    const auto index = map_indices(dims, *count, [&](const std::vector<int64_t>& c) {
      int64_t flat = 0;
      for (size_t d = 0; d < c.size(); ++d) flat += (first[d] + c[d] * step[d]) * in_strides[d];
      return flat;
    });
    return gather(*x, dims, index);
  }

  return declined("'" + name + "' is computed by " + who + ", which is not folded");
}

}  // namespace dwdeconv::rewrite
