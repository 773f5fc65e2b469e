#include "runtime_check/tensor_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <random>
#include <set>
#include <sstream>

#include "internal.h"
#include "onnx_io/model_io.h"
#include "onnx_io/tensor.h"

namespace dwdeconv::runtime_check {

core::Result<std::vector<int64_t>> resolve_input_dims(const onnx::ValueInfoProto& input,
                                                      const std::map<std::string, std::vector<int64_t>>& input_shapes) {
  if (const auto it = input_shapes.find(input.name()); it != input_shapes.end()) return it->second;
  if (!input.type().has_tensor_type()) {
    return core::invalid_model("graph input '" + input.name() + "' is not a tensor");
  }
  const auto& tensor_type = input.type().tensor_type();
  if (!tensor_type.has_shape()) {
    return core::invalid_model("graph input '" + input.name() + "' declares no shape; give it with --input-shape " + input.name() + "=...");
  }
  std::vector<int64_t> dims;
  for (const auto& d : tensor_type.shape().dim()) {
    if (!d.has_dim_value()) {
      const std::string label = d.has_dim_param() ? "symbolic dim '" + d.dim_param() + "'" : "an unknown dim";
      return core::invalid_model("graph input '" + input.name() + "' has " + label + "; give its shape with --input-shape " + input.name() +
                                 "=...");
    }
    dims.push_back(d.dim_value());
  }
  return dims;
}

namespace {

// "graph input 'x' FLOAT[1x4x8x8]": how size errors name a graph input.
std::string input_label(const std::string& name, int32_t type, const std::vector<int64_t>& dims) {
  return "graph input '" + name + "' " + onnx_io::data_type_name(type) + "[" + format_dims(dims) + "]";
}

// The element type the executor gives a graph input (FLOAT when undeclared).
int32_t input_type(const onnx::ValueInfoProto& input) {
  const int32_t type = input.type().tensor_type().elem_type();
  return type == onnx::TensorProto::UNDEFINED ? onnx::TensorProto::FLOAT : type;
}

// A decimal integer that is the whole text and fits int64. A '-' sign parses, so the size check can name the dim.
std::optional<int64_t> parse_dim(const std::string& text) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

}  // namespace

core::Status check_input_sizes(const onnx::ModelProto& model, const std::map<std::string, std::vector<int64_t>>& input_shapes) {
  std::set<std::string> initializers;
  for (const auto& init : model.graph().initializer()) initializers.insert(init.name());
  for (const auto& input : model.graph().input()) {
    if (initializers.count(input.name()) != 0) continue;
    const auto dims = resolve_input_dims(input, input_shapes);
    if (!dims) continue;  // unknown dims: make_random_inputs says what to pass
    const int32_t type = input_type(input);
    RC_CHECK(checked_element_count(*dims, storage_bytes(type), input_label(input.name(), type, *dims)));
  }
  return core::Ok{};
}

core::Result<std::vector<NamedTensor>> make_random_inputs(const onnx::ModelProto& model,
                                                          const std::map<std::string, std::vector<int64_t>>& input_shapes, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<std::string> initializers;
  for (const auto& init : model.graph().initializer()) initializers.push_back(init.name());
  std::vector<NamedTensor> result;
  for (const auto& input : model.graph().input()) {
    if (std::find(initializers.begin(), initializers.end(), input.name()) != initializers.end()) continue;
    RC_ASSIGN(const auto dims, resolve_input_dims(input, input_shapes));
    const int32_t type = input_type(input);
    if (!is_float_type(type) && !is_integer_type(type)) {
      return core::invalid_model("graph input '" + input.name() + "' has unsupported type " + onnx_io::data_type_name(type));
    }
    RC_CHECK(checked_element_count(dims, storage_bytes(type), input_label(input.name(), type, dims)));
    NamedTensor t{input.name(), {}};
    t.tensor.reshape(type, dims);
    for (float& x : t.tensor.f) x = round_to_type(uniform(rng), type);
    result.push_back(std::move(t));
  }
  return result;
}

namespace {

core::Result<std::string> read_file(const std::string& path) {
  // Opened without blocking and checked to be a regular file before a byte is read: a FIFO would wait for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return core::io_error("cannot open '" + path + "': " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return core::io_error("'" + path + "' is not a regular file");
  }
  std::string bytes;
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      return core::io_error("cannot read '" + path + "': " + std::strerror(errno));
    }
    if (n == 0) break;
    bytes.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return bytes;
}

// The value of `key` in a .npy header dict: "'descr': '<f4', 'fortran_order': False, 'shape': (1, 3), }".
std::string header_value(const std::string& header, const std::string& key) {
  const auto k = header.find("'" + key + "'");
  if (k == std::string::npos) return {};
  auto p = header.find(':', k);
  if (p == std::string::npos) return {};
  ++p;
  while (p < header.size() && header[p] == ' ') ++p;
  if (p >= header.size()) return {};
  if (header[p] == '(') return header.substr(p, header.find(')', p) - p + 1);
  if (header[p] == '\'') return header.substr(p + 1, header.find('\'', p + 1) - p - 1);
  const auto e = header.find_first_of(",}", p);
  return header.substr(p, e - p);
}

}  // namespace

core::Result<Tensor> parse_npy(const std::string& bytes, const std::string& origin) {
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) return core::io_error(origin + ": not a .npy file");
  const auto major = static_cast<unsigned char>(bytes[6]);
  size_t header_len = 0, offset = 0;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) | static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8;
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return core::io_error(origin + ": truncated .npy header");
    for (int k = 0; k < 4; ++k) header_len |= static_cast<size_t>(static_cast<unsigned char>(bytes[8 + k])) << (8 * k);
    offset = 12;
  } else {
    return core::io_error(origin + ": unsupported .npy version " + std::to_string(major));
  }
  if (bytes.size() < offset + header_len) return core::io_error(origin + ": truncated .npy header");
  const std::string header = bytes.substr(offset, header_len);
  const std::string descr = header_value(header, "descr");
  const std::string fortran = header_value(header, "fortran_order");
  const std::string shape = header_value(header, "shape");
  if (fortran.find("False") == std::string::npos)
    return core::io_error(origin + ": Fortran-order arrays are not supported; save with C order");
  // numpy's descr: byte order ('<' little, '|' not applicable, '>' big), kind and size.
  struct NpyType {
    const char* descr;
    int32_t type;
    size_t size;
    bool is_signed;
  };
  static const NpyType kTypes[] = {
      {"<f4", onnx::TensorProto::FLOAT, 4, true},   {"<f2", onnx::TensorProto::FLOAT16, 2, true},
      {"<f8", onnx::TensorProto::DOUBLE, 8, true},  {"<i8", onnx::TensorProto::INT64, 8, true},
      {"<i4", onnx::TensorProto::INT32, 4, true},   {"<i2", onnx::TensorProto::INT16, 2, true},
      {"|i1", onnx::TensorProto::INT8, 1, true},    {"<u8", onnx::TensorProto::UINT64, 8, false},
      {"<u4", onnx::TensorProto::UINT32, 4, false}, {"<u2", onnx::TensorProto::UINT16, 2, false},
      {"|u1", onnx::TensorProto::UINT8, 1, false},  {"|b1", onnx::TensorProto::BOOL, 1, false},
  };
  const auto found = std::find_if(std::begin(kTypes), std::end(kTypes), [&descr](const NpyType& t) { return descr == t.descr; });
  if (found == std::end(kTypes)) {
    return core::io_error(origin + ": dtype '" + descr +
                          "' is not supported (little-endian float32, float16, float64, int8 to int64, "
                          "uint8 to uint64 or bool)");
  }
  const int32_t type = found->type;
  const size_t size = found->size;
  if (shape.size() < 2 || shape.front() != '(') return core::io_error(origin + ": bad shape in .npy header");
  std::vector<int64_t> dims;
  std::stringstream parts(shape.substr(1, shape.size() - 2));
  std::string item;
  while (std::getline(parts, item, ',')) {
    if (item.find_first_not_of(' ') == std::string::npos) continue;
    const auto first = item.find_first_not_of(' '), last = item.find_last_not_of(' ');
    const auto dim = parse_dim(item.substr(first, last - first + 1));
    if (!dim) return core::io_error(origin + ": bad dim '" + item + "' in the .npy shape " + shape);
    dims.push_back(*dim);
  }
  const std::string label = origin + ": shape " + shape;
  RC_ASSIGN(const size_t n, checked_element_count(dims, storage_bytes(type), label));
  // n * 4 bytes fit in physical memory, so n * size (at most 8) cannot overflow.
  const size_t data = offset + header_len;
  if (bytes.size() != data + n * size) {
    return core::io_error(origin + ": holds " + std::to_string(bytes.size() - data) + " data bytes, shape needs " +
                          std::to_string(n * size));
  }
  Tensor t;
  t.reshape(type, dims);
  const char* p = bytes.data() + data;
  for (size_t k = 0; k < n; ++k) {
    const char* at = p + size * k;
    if (type == onnx::TensorProto::FLOAT) {
      float v;
      std::memcpy(&v, at, 4);
      t.f[k] = v;
    } else if (type == onnx::TensorProto::FLOAT16) {
      uint16_t v;
      std::memcpy(&v, at, 2);
      t.f[k] = onnx_io::half_to_float(v);
    } else if (type == onnx::TensorProto::DOUBLE) {
      double v;
      std::memcpy(&v, at, 8);
      t.f[k] = static_cast<float>(v);
    } else {
      // An integer of `size` bytes, little-endian, sign-extended when signed (uint64 keeps its bits in int64).
      uint64_t bits = 0;
      std::memcpy(&bits, at, size);
      if (found->is_signed && size < 8 && (bits >> (8 * size - 1)) != 0) bits |= ~uint64_t{0} << (8 * size);
      t.i[k] = type == onnx::TensorProto::BOOL ? (bits != 0 ? 1 : 0) : static_cast<int64_t>(bits);
    }
  }
  return t;
}

core::Result<NamedTensor> load_tensor_file(const std::string& path) {
  RC_ASSIGN(const std::string bytes, read_file(path));
  if (bytes.size() < 1024 && onnx_io::is_lfs_pointer(bytes)) return onnx_io::lfs_pointer_error(path, "a tensor file");
  const auto slash = path.find_last_of('/');
  const std::string file = slash == std::string::npos ? path : path.substr(slash + 1);
  const auto dot = file.find_last_of('.');
  const std::string stem = dot == std::string::npos ? file : file.substr(0, dot);
  const std::string ext = dot == std::string::npos ? "" : file.substr(dot);
  if (ext == ".npy") {
    RC_ASSIGN(Tensor t, parse_npy(bytes, path));
    return NamedTensor{stem, std::move(t)};
  }
  if (ext != ".pb") return core::io_error(path + ": expected a .npy or .pb (TensorProto) file");
  onnx::TensorProto proto;
  if (!proto.ParseFromString(bytes)) return core::io_error(path + ": not a serialized TensorProto");
  RC_ASSIGN(Tensor t, tensor_from_proto(proto, path));
  return NamedTensor{proto.name().empty() ? stem : proto.name(), std::move(t)};
}

core::Result<std::pair<std::string, std::vector<int64_t>>> parse_input_shape(const std::string& text) {
  const auto eq = text.rfind('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) {
    return core::Error{core::ErrorKind::kUsage, "input shape '" + text + "' is not NAME=D0xD1x..."};
  }
  const std::string dims_text = text.substr(eq + 1);
  if (dims_text.front() == 'x' || dims_text.back() == 'x') {
    return core::Error{core::ErrorKind::kUsage, "input shape '" + text + "' is not NAME=D0xD1x...: it has an empty dim"};
  }
  std::vector<int64_t> dims;
  std::stringstream parts(dims_text);
  std::string item;
  while (std::getline(parts, item, 'x')) {
    if (item.empty() || item.find_first_not_of("0123456789") != std::string::npos) {
      return core::Error{core::ErrorKind::kUsage, "input shape '" + text + "' has a bad dim '" + item + "'"};
    }
    const auto dim = parse_dim(item);
    if (!dim) {
      return core::Error{core::ErrorKind::kUsage, "input shape '" + text + "' has a dim '" + item + "' beyond int64's " +
                                                      std::to_string(std::numeric_limits<int64_t>::max())};
    }
    // A 0 dim leaves nothing to compare, and a verifier must not pass what it did not check.
    if (*dim == 0) return core::Error{core::ErrorKind::kUsage, "input shape '" + text + "' has a 0 dim: there would be nothing to run"};
    dims.push_back(*dim);
  }
  // The type is not known yet: size as float, the smallest storage; the executor checks again with the type.
  if (auto count = checked_element_count(dims, storage_bytes(onnx::TensorProto::FLOAT), "input shape '" + text + "'"); !count) {
    return core::Error{core::ErrorKind::kUsage, count.error().message};
  }
  return std::make_pair(text.substr(0, eq), dims);
}

}  // namespace dwdeconv::runtime_check
