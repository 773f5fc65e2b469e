#include "ops/tensor.h"

#include <unistd.h>

#include <cstring>
#include <limits>
#include <new>

#include "onnx_io/tensor.h"

namespace dwdeconv::ops {

bool is_float_type(int32_t data_type) {
  return data_type == onnx::TensorProto::FLOAT || data_type == onnx::TensorProto::FLOAT16 || data_type == onnx::TensorProto::BFLOAT16 ||
         data_type == onnx::TensorProto::DOUBLE;
}

bool is_integer_type(int32_t data_type) {
  switch (data_type) {
    case onnx::TensorProto::INT8:
    case onnx::TensorProto::INT16:
    case onnx::TensorProto::INT32:
    case onnx::TensorProto::INT64:
    case onnx::TensorProto::UINT8:
    case onnx::TensorProto::UINT16:
    case onnx::TensorProto::UINT32:
    case onnx::TensorProto::UINT64:
    case onnx::TensorProto::BOOL: return true;
    default: return false;
  }
}

size_t storage_bytes(int32_t data_type) { return is_float_type(data_type) ? sizeof(float) : sizeof(int64_t); }

core::Result<size_t> checked_element_count(const std::vector<int64_t>& dims, size_t element_bytes, const std::string& what) {
  // Negative dims and int64 overflow, as for any tensor of the model.
  const auto count = onnx_io::element_count(dims, what);
  if (!count) return count.error();
  const auto elements = static_cast<size_t>(*count);
  if (element_bytes != 0 && elements > std::numeric_limits<size_t>::max() / element_bytes) {
    return core::invalid_model(what + ": " + std::to_string(elements) + " elements of " + std::to_string(element_bytes) +
                               " bytes overflow a byte count");
  }
  // Without this, a size that fits but can never be allocated ends in std::bad_alloc, or with overcommit in the
  // kernel's OOM killer once the storage is zero-filled.
  static const uint64_t physical = [] {
    const long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
    return pages > 0 && page_size > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size) : ~uint64_t{0};
  }();
  const size_t bytes = elements * element_bytes;
  if (bytes > physical) {
    return core::invalid_model(what + ": needs " + std::to_string(bytes) + " bytes, more than this machine's " + std::to_string(physical) +
                               " bytes of physical memory");
  }
  return elements;
}

FloatStorage::FloatStorage(FloatStorage&& other) noexcept
    : owned_(std::move(other.owned_)), view_(other.view_), size_(other.size_), capacity_(other.capacity_) {
  other.release();
}

FloatStorage& FloatStorage::operator=(const FloatStorage& other) {
  if (this == &other) return *this;
  if (view_ != nullptr && other.size() <= capacity_) {
    std::copy(other.begin(), other.end(), view_);  // stays in its span
    size_ = other.size();
  } else {
    release();
    owned_.assign(other.begin(), other.end());
  }
  return *this;
}

FloatStorage& FloatStorage::operator=(FloatStorage&& other) noexcept {
  if (this == &other) return *this;
  owned_ = std::move(other.owned_);
  view_ = other.view_;
  size_ = other.size_;
  capacity_ = other.capacity_;
  other.release();
  return *this;
}

void FloatStorage::resize(size_t n) {
  if (view_ == nullptr) {
    owned_.resize(n);
  } else if (n <= capacity_) {
    if (n > size_) std::fill(view_ + size_, view_ + n, 0.0f);
    size_ = n;
  } else {
    std::vector<float> grown(view_, view_ + size_);
    grown.resize(n);
    release();
    owned_ = std::move(grown);
  }
}

void FloatStorage::assign(size_t n, float value) {
  resize(n);
  std::fill(begin(), end(), value);
}

void FloatStorage::push_back(float value) {
  resize(size() + 1);
  data()[size() - 1] = value;
}

void FloatStorage::view(float* memory, size_t size) {
  std::vector<float>().swap(owned_);
  view_ = memory;
  size_ = capacity_ = size;
}

std::vector<float> FloatStorage::take_owned() {
  std::vector<float> taken = std::move(owned_);
  release();
  return taken;
}

void FloatStorage::release() {
  std::vector<float>().swap(owned_);
  view_ = nullptr;
  size_ = capacity_ = 0;
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

void Tensor::reshape(int32_t data_type, std::vector<int64_t> new_dims) {
  // The executor reshapes every step's output on every run; an unchanged value keeps its storage untouched.
  if (data_type == dtype && new_dims == dims && (is_float() ? f.size() : i.size()) == static_cast<size_t>(numel())) return;
  const std::string what = onnx_io::data_type_name(data_type) + "[" + format_dims(new_dims) + "]";
  const auto n = checked_element_count(new_dims, storage_bytes(data_type), what);
  if (!n) throw TensorSizeError(n.error().message);
  dtype = data_type;
  dims = std::move(new_dims);
  try {
    if (is_float()) {
      f.resize(*n);
      i.clear();
    } else {
      i.resize(*n);
      f.clear();
    }
  } catch (const std::bad_alloc&) {
    throw TensorSizeError(what + ": cannot allocate " + std::to_string(*n * storage_bytes(data_type)) + " bytes");
  }
}

float round_to_type(float value, int32_t data_type) {
  if (data_type == onnx::TensorProto::FLOAT16) return onnx_io::half_to_float(onnx_io::float_to_half(value));
  if (data_type == onnx::TensorProto::BFLOAT16) return onnx_io::bfloat16_to_float(onnx_io::float_to_bfloat16(value));
  return value;
}

int64_t wrap_to_type(int64_t value, int32_t data_type) {
  switch (data_type) {
    case onnx::TensorProto::INT8: return static_cast<int8_t>(value);
    case onnx::TensorProto::INT16: return static_cast<int16_t>(value);
    case onnx::TensorProto::INT32: return static_cast<int32_t>(value);
    case onnx::TensorProto::UINT8: return static_cast<uint8_t>(value);
    case onnx::TensorProto::UINT16: return static_cast<uint16_t>(value);
    case onnx::TensorProto::UINT32: return static_cast<uint32_t>(value);
    case onnx::TensorProto::BOOL: return value != 0 ? 1 : 0;
    default: return value;  // INT64; UINT64 keeps its bits
  }
}

namespace {

// Little-endian raw bytes of one integer element.
int64_t read_raw_integer(const std::string& raw, size_t index, int32_t data_type) {
  const size_t size = onnx_io::element_size(data_type);
  const char* p = raw.data() + index * size;
  switch (data_type) {
    case onnx::TensorProto::INT8: {
      int8_t v;
      std::memcpy(&v, p, 1);
      return v;
    }
    case onnx::TensorProto::UINT8: {
      uint8_t v;
      std::memcpy(&v, p, 1);
      return v;
    }
    case onnx::TensorProto::BOOL: {
      uint8_t v;
      std::memcpy(&v, p, 1);
      return v != 0;
    }
    case onnx::TensorProto::INT16: {
      int16_t v;
      std::memcpy(&v, p, 2);
      return v;
    }
    case onnx::TensorProto::UINT16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return v;
    }
    case onnx::TensorProto::INT32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case onnx::TensorProto::UINT32: {
      uint32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    default: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return v;
    }  // INT64, UINT64
  }
}

}  // namespace

core::Result<Tensor> tensor_from_proto(const onnx::TensorProto& proto, const std::string& what) {
  const int32_t type = proto.data_type();
  if (!is_float_type(type) && !is_integer_type(type)) {
    return core::invalid_model(what + ": element type " + onnx_io::data_type_name(type) + " is not supported");
  }
  if (onnx_io::is_external(proto)) return core::invalid_model(what + ": external data is not supported here");
  if (auto status = onnx_io::validate_tensor_data(proto, what); !status.ok()) return status.error();
  // The data is there, but held as float or int64 it may need several times its size (INT8 as int64: 8x).
  const auto dims = onnx_io::dims_of(proto);
  const std::string label = what + " " + onnx_io::data_type_name(type) + "[" + format_dims(dims) + "]";
  const auto n = checked_element_count(dims, storage_bytes(type), label);
  if (!n) return n.error();
  Tensor t;
  t.reshape(type, dims);
  if (t.is_float()) {
    auto values = onnx_io::to_doubles(proto);
    if (!values.ok()) return values.error();
    for (size_t k = 0; k < *n; ++k) t.f[k] = static_cast<float>(values.value()[k]);
    return t;
  }
  if (proto.has_raw_data()) {
    for (size_t k = 0; k < *n; ++k) t.i[k] = read_raw_integer(proto.raw_data(), k, type);
  } else if (type == onnx::TensorProto::INT64) {
    for (size_t k = 0; k < *n; ++k) t.i[k] = proto.int64_data(static_cast<int>(k));
  } else if (type == onnx::TensorProto::UINT32 || type == onnx::TensorProto::UINT64) {
    for (size_t k = 0; k < *n; ++k) t.i[k] = static_cast<int64_t>(proto.uint64_data(static_cast<int>(k)));
  } else {
    for (size_t k = 0; k < *n; ++k) t.i[k] = wrap_to_type(proto.int32_data(static_cast<int>(k)), type);
  }
  return t;
}

onnx::TensorProto tensor_to_proto(const Tensor& tensor, const std::string& name) {
  if (tensor.is_float()) {
    std::vector<double> values(tensor.f.begin(), tensor.f.end());
    return onnx_io::make_tensor(name, tensor.dtype, tensor.dims, values, /*raw=*/false);
  }
  onnx::TensorProto proto;
  proto.set_name(name);
  proto.set_data_type(tensor.dtype);
  for (int64_t d : tensor.dims) proto.add_dims(d);
  for (int64_t v : tensor.i) {
    const int64_t w = wrap_to_type(v, tensor.dtype);
    if (tensor.dtype == onnx::TensorProto::INT64) {
      proto.add_int64_data(w);
    } else if (tensor.dtype == onnx::TensorProto::UINT32 || tensor.dtype == onnx::TensorProto::UINT64) {
      proto.add_uint64_data(static_cast<uint64_t>(w));
    } else {
      proto.add_int32_data(static_cast<int32_t>(w));
    }
  }
  return proto;
}

std::string format_dims(const std::vector<int64_t>& dims) {
  if (dims.empty()) return "scalar";
  std::string s;
  for (size_t k = 0; k < dims.size(); ++k) s += (k ? "x" : "") + std::to_string(dims[k]);
  return s;
}

std::string describe_tensor(const Tensor& tensor) { return onnx_io::data_type_name(tensor.dtype) + "[" + format_dims(tensor.dims) + "]"; }

}  // namespace dwdeconv::ops
