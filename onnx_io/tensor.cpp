#include "onnx_io/tensor.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace dwdeconv::onnx_io {
namespace {

using onnx::TensorProto;

// Which repeated field holds a type's values when raw_data is not used (see onnx.proto).
enum class Field { kFloat, kInt32, kInt64, kDouble, kUint64, kNone };

Field typed_field(int32_t data_type) {
  switch (data_type) {
    case TensorProto::FLOAT: return Field::kFloat;
    case TensorProto::UINT8:
    case TensorProto::INT8:
    case TensorProto::UINT16:
    case TensorProto::INT16:
    case TensorProto::INT32:
    case TensorProto::BOOL:
    case TensorProto::FLOAT16:
    case TensorProto::BFLOAT16: return Field::kInt32;
    case TensorProto::INT64: return Field::kInt64;
    case TensorProto::DOUBLE: return Field::kDouble;
    case TensorProto::UINT32:
    case TensorProto::UINT64: return Field::kUint64;
    default: return Field::kNone;
  }
}

int64_t typed_field_size(const TensorProto& t) {
  switch (typed_field(t.data_type())) {
    case Field::kFloat: return t.float_data_size();
    case Field::kInt32: return t.int32_data_size();
    case Field::kInt64: return t.int64_data_size();
    case Field::kDouble: return t.double_data_size();
    case Field::kUint64: return t.uint64_data_size();
    case Field::kNone: return 0;
  }
  return 0;
}

template <typename T>
T load_raw(const std::string& raw, int64_t index) {
  T value;
  std::memcpy(&value, raw.data() + index * static_cast<int64_t>(sizeof(T)), sizeof(T));  // little-endian host
  return value;
}

std::string tensor_label(const TensorProto& t) { return t.name().empty() ? std::string("tensor") : "tensor '" + t.name() + "'"; }

void copy_metadata(const TensorProto& src, const std::vector<int64_t>& dims, TensorProto& dst) {
  dst.set_data_type(src.data_type());
  for (int64_t d : dims) dst.add_dims(d);
}

}  // namespace

size_t element_size(int32_t data_type) {
  switch (data_type) {
    case TensorProto::FLOAT:
    case TensorProto::INT32:
    case TensorProto::UINT32: return 4;
    case TensorProto::UINT8:
    case TensorProto::INT8:
    case TensorProto::BOOL: return 1;
    case TensorProto::UINT16:
    case TensorProto::INT16:
    case TensorProto::FLOAT16:
    case TensorProto::BFLOAT16: return 2;
    case TensorProto::INT64:
    case TensorProto::UINT64:
    case TensorProto::DOUBLE: return 8;
    default: return 0;
  }
}

std::string data_type_name(int32_t data_type) {
  if (TensorProto::DataType_IsValid(data_type)) return TensorProto::DataType_Name(static_cast<TensorProto::DataType>(data_type));
  return "type " + std::to_string(data_type);
}

core::Result<int64_t> element_count(const std::vector<int64_t>& dims, const std::string& what) {
  int64_t count = 1;
  for (int64_t d : dims) {
    if (d < 0) return core::invalid_model(what + ": negative dimension " + std::to_string(d));
    if (d != 0 && count > std::numeric_limits<int64_t>::max() / d) {
      return core::invalid_model(what + ": dimensions overflow when multiplied");
    }
    count *= d;
  }
  return count;
}

core::Result<int64_t> element_count(const TensorProto& tensor) { return element_count(dims_of(tensor), tensor_label(tensor)); }

std::vector<int64_t> dims_of(const TensorProto& tensor) { return {tensor.dims().begin(), tensor.dims().end()}; }

bool is_external(const TensorProto& tensor) { return tensor.data_location() == TensorProto::EXTERNAL; }

core::Status validate_tensor_data(const TensorProto& tensor, const std::string& what) {
  const auto count = element_count(dims_of(tensor), what);
  if (!count) return count.error();
  const size_t size = element_size(tensor.data_type());
  if (size == 0) return core::invalid_model(what + ": element type " + data_type_name(tensor.data_type()) + " is not numeric");
  if (is_external(tensor)) return core::invalid_model(what + ": data is stored externally and was not loaded");
  if (tensor.has_raw_data()) {
    const auto want = static_cast<uint64_t>(*count) * size;
    if (tensor.raw_data().size() != want) {
      return core::invalid_model(what + ": raw_data holds " + std::to_string(tensor.raw_data().size()) + " bytes, but dims and type need " +
                                 std::to_string(want));
    }
    return core::Ok{};
  }
  if (typed_field_size(tensor) != *count) {
    return core::invalid_model(what + ": holds " + std::to_string(typed_field_size(tensor)) + " values, but dims need " +
                               std::to_string(*count));
  }
  return core::Ok{};
}

core::Result<TensorProto> gather_elements(const TensorProto& src, const std::vector<int64_t>& indices, const std::vector<int64_t>& dims) {
  if (auto status = validate_tensor_data(src, tensor_label(src)); !status) return status.error();
  TensorProto dst;
  copy_metadata(src, dims, dst);
  if (src.has_raw_data()) {
    const size_t size = element_size(src.data_type());
    std::string raw(indices.size() * size, '\0');
    for (size_t i = 0; i < indices.size(); ++i) {
      std::memcpy(raw.data() + i * size, src.raw_data().data() + static_cast<size_t>(indices[i]) * size, size);
    }
    dst.set_raw_data(std::move(raw));
    return dst;
  }
  for (int64_t i : indices) {
    switch (typed_field(src.data_type())) {
      case Field::kFloat: dst.add_float_data(src.float_data(static_cast<int>(i))); break;
      case Field::kInt32: dst.add_int32_data(src.int32_data(static_cast<int>(i))); break;
      case Field::kInt64: dst.add_int64_data(src.int64_data(static_cast<int>(i))); break;
      case Field::kDouble: dst.add_double_data(src.double_data(static_cast<int>(i))); break;
      case Field::kUint64: dst.add_uint64_data(src.uint64_data(static_cast<int>(i))); break;
      case Field::kNone: break;
    }
  }
  return dst;
}

TensorProto zeros_like_storage(const TensorProto& src, const std::vector<int64_t>& dims) {
  TensorProto dst;
  copy_metadata(src, dims, dst);
  int64_t count = 1;
  for (int64_t d : dims) count *= d;
  if (src.has_raw_data()) {
    dst.set_raw_data(std::string(static_cast<size_t>(count) * element_size(src.data_type()), '\0'));
    return dst;
  }
  for (int64_t i = 0; i < count; ++i) {
    switch (typed_field(src.data_type())) {
      case Field::kFloat: dst.add_float_data(0.0f); break;
      case Field::kInt32: dst.add_int32_data(0); break;
      case Field::kInt64: dst.add_int64_data(0); break;
      case Field::kDouble: dst.add_double_data(0.0); break;
      case Field::kUint64: dst.add_uint64_data(0); break;
      case Field::kNone: break;
    }
  }
  return dst;
}

core::Result<std::vector<double>> to_doubles(const TensorProto& t) {
  if (auto status = validate_tensor_data(t, tensor_label(t)); !status) return status.error();
  const int64_t count = *element_count(t);
  std::vector<double> out(static_cast<size_t>(count));
  const bool raw = t.has_raw_data();
  const std::string& bytes = t.raw_data();
  for (int64_t i = 0; i < count; ++i) {
    const int ii = static_cast<int>(i);
    double v = 0;
    switch (t.data_type()) {
      case TensorProto::FLOAT: v = raw ? load_raw<float>(bytes, i) : t.float_data(ii); break;
      case TensorProto::DOUBLE: v = raw ? load_raw<double>(bytes, i) : t.double_data(ii); break;
      case TensorProto::FLOAT16: v = half_to_float(raw ? load_raw<uint16_t>(bytes, i) : static_cast<uint16_t>(t.int32_data(ii))); break;
      case TensorProto::BFLOAT16:
        v = bfloat16_to_float(raw ? load_raw<uint16_t>(bytes, i) : static_cast<uint16_t>(t.int32_data(ii)));
        break;
      case TensorProto::INT8: v = raw ? load_raw<int8_t>(bytes, i) : t.int32_data(ii); break;
      case TensorProto::UINT8: v = raw ? load_raw<uint8_t>(bytes, i) : t.int32_data(ii); break;
      case TensorProto::BOOL: v = raw ? load_raw<uint8_t>(bytes, i) != 0 : t.int32_data(ii) != 0; break;
      case TensorProto::INT16: v = raw ? load_raw<int16_t>(bytes, i) : t.int32_data(ii); break;
      case TensorProto::UINT16: v = raw ? load_raw<uint16_t>(bytes, i) : t.int32_data(ii); break;
      case TensorProto::INT32: v = raw ? load_raw<int32_t>(bytes, i) : t.int32_data(ii); break;
      case TensorProto::UINT32: v = raw ? load_raw<uint32_t>(bytes, i) : static_cast<double>(t.uint64_data(ii)); break;
      case TensorProto::INT64: v = static_cast<double>(raw ? load_raw<int64_t>(bytes, i) : t.int64_data(ii)); break;
      case TensorProto::UINT64: v = static_cast<double>(raw ? load_raw<uint64_t>(bytes, i) : t.uint64_data(ii)); break;
      default: return core::invalid_model(tensor_label(t) + ": element type " + data_type_name(t.data_type()) + " is not supported");
    }
    out[static_cast<size_t>(i)] = v;
  }
  return out;
}

TensorProto make_tensor(const std::string& name, int32_t data_type, const std::vector<int64_t>& dims, const std::vector<double>& values,
                        bool raw) {
  TensorProto t;
  t.set_name(name);
  t.set_data_type(data_type);
  for (int64_t d : dims) t.add_dims(d);
  std::string bytes;
  auto put = [&](const void* p, size_t n) { bytes.append(static_cast<const char*>(p), n); };
  for (double v : values) {
    switch (data_type) {
      case TensorProto::FLOAT: {
        const float f = static_cast<float>(v);
        raw ? put(&f, 4) : t.add_float_data(f);
        break;
      }
      case TensorProto::DOUBLE: raw ? put(&v, 8) : t.add_double_data(v); break;
      case TensorProto::FLOAT16: {
        const uint16_t h = float_to_half(static_cast<float>(v));
        raw ? put(&h, 2) : t.add_int32_data(h);
        break;
      }
      case TensorProto::BFLOAT16: {
        const uint16_t b = float_to_bfloat16(static_cast<float>(v));
        raw ? put(&b, 2) : t.add_int32_data(b);
        break;
      }
      case TensorProto::INT64: {
        const auto i = static_cast<int64_t>(v);
        raw ? put(&i, 8) : t.add_int64_data(i);
        break;
      }
      default: break;
    }
  }
  if (raw) t.set_raw_data(bytes);
  return t;
}

TensorProto make_int64_tensor(const std::string& name, const std::vector<int64_t>& dims, const std::vector<int64_t>& values) {
  TensorProto t;
  t.set_name(name);
  t.set_data_type(TensorProto::INT64);
  for (int64_t d : dims) t.add_dims(d);
  t.set_raw_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(int64_t)));
  return t;
}

float half_to_float(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1f;
  const uint32_t mantissa = h & 0x3ffu;
  float magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -24);  // subnormal
  } else if (exponent == 31) {
    magnitude = mantissa ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  } else {
    magnitude = std::ldexp(static_cast<float>(mantissa | 0x400u), static_cast<int>(exponent) - 25);
  }
  return sign ? -magnitude : magnitude;
}

uint16_t float_to_half(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs_bits = bits & 0x7fffffffu;
  if (abs_bits >= 0x7f800000u) return sign | (abs_bits > 0x7f800000u ? 0x7e00u : 0x7c00u);  // NaN, inf
  if (abs_bits >= 0x477ff000u) return sign | 0x7c00u;                                       // overflow -> inf
  if (abs_bits < 0x38800000u) {                                                             // subnormal or zero
    const float abs_value = std::fabs(value);
    return sign | static_cast<uint16_t>(std::nearbyint(abs_value * 16777216.0f));  // units of 2^-24
  }
  // Normal: rebias the exponent and round the 13 dropped mantissa bits to nearest even.
  const uint32_t rebased = abs_bits - 0x38000000u;
  const uint32_t rounded = rebased + 0x0fffu + ((rebased >> 13) & 1u);
  return sign | static_cast<uint16_t>(rounded >> 13);
}

float bfloat16_to_float(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t float_to_bfloat16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);  // quiet NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

}  // namespace dwdeconv::onnx_io
