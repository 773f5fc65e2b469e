#include "onnx_io/external_data.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <vector>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>

#include "onnx_io/graph_walk.h"
#include "onnx_io/model_io.h"
#include "onnx_io/tensor.h"

namespace dwdeconv::onnx_io {
namespace {

namespace fs = std::filesystem;

std::string label(const onnx::TensorProto& t) { return t.name().empty() ? std::string("an unnamed tensor") : "tensor '" + t.name() + "'"; }

bool parse_int(const std::string& text, int64_t& out) {
  if (text.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || v < 0) return false;
  out = v;
  return true;
}

// Calls fn(tensor, key) for every tensor for_each_mutable_tensor visits, with the key ExternalDataRead
// describes: how the tensor is known across a rewrite. An empty key: the tensor cannot be told apart.
template <typename Fn>
void for_each_keyed_tensor(onnx::GraphProto& graph, const Fn& fn) {
  for (auto& t : *graph.mutable_initializer()) fn(t, t.name());
  for (auto& node : *graph.mutable_node()) {
    const bool constant = node.op_type() == "Constant" && (node.domain().empty() || node.domain() == "ai.onnx") && node.output_size() == 1;
    for (auto& attr : *node.mutable_attribute()) {
      if (attr.has_t()) fn(*attr.mutable_t(), constant && attr.name() == "value" ? node.output(0) : attr.t().name());
      for (auto& t : *attr.mutable_tensors()) fn(t, t.name());
      if (attr.has_g()) for_each_keyed_tensor(*attr.mutable_g(), fn);
      for (auto& g : *attr.mutable_graphs()) for_each_keyed_tensor(g, fn);
    }
  }
}

std::string location_of(const onnx::TensorProto& t) {
  for (const auto& kv : t.external_data()) {
    if (kv.key() == "location") return kv.value();
  }
  return "";
}

// Reads one external tensor into raw_data and makes it inline; the file it read, as `dir/location`.
core::Result<std::string> load_one(onnx::TensorProto& t, const fs::path& dir, const fs::path& canonical_dir, const std::string& origin) {
  const std::string who = origin + ": " + label(t);
  std::map<std::string, std::string> entries;
  for (const auto& kv : t.external_data()) entries[kv.key()] = kv.value();
  const std::string location = entries["location"];
  if (location.empty()) return core::invalid_model(who + ": external data has no location");
  const fs::path rel(location);
  if (rel.is_absolute()) return core::invalid_model(who + ": external data location '" + location + "' is absolute");
  const fs::path normal = rel.lexically_normal();
  if (normal.empty() || *normal.begin() == "..") {
    return core::invalid_model(who + ": external data location '" + location + "' leaves the model's directory");
  }
  const fs::path full = dir / normal;
  std::error_code ec;
  if (!fs::is_regular_file(full, ec)) return core::invalid_model(who + ": external data file '" + full.string() + "' is missing");
  const fs::path real = fs::canonical(full, ec);
  if (ec) return core::io_error(who + ": cannot resolve '" + full.string() + "': " + ec.message());
  const auto [end_dir, end_real] = std::mismatch(canonical_dir.begin(), canonical_dir.end(), real.begin(), real.end());
  if (end_dir != canonical_dir.end()) {
    return core::invalid_model(who + ": external data location '" + location + "' resolves outside the model's directory (" +
                               real.string() + ")");
  }
  const auto file_size = static_cast<int64_t>(fs::file_size(real, ec));
  if (ec) return core::io_error(who + ": cannot stat '" + real.string() + "': " + ec.message());
  // A checkout without LFS leaves a pointer of about 130 bytes in place of the data, which a tiny tensor's length fits.
  if (file_size < 1024) {
    std::ifstream in(real, std::ios::binary);
    std::string head(static_cast<size_t>(file_size), '\0');
    in.read(head.data(), file_size);
    if (is_lfs_pointer(head)) return lfs_pointer_error(who + ": external data file '" + full.string() + "'", "tensor data");
  }
  int64_t offset = 0, length = -1;
  if (entries.count("offset") && !parse_int(entries["offset"], offset)) {
    return core::invalid_model(who + ": external data offset '" + entries["offset"] + "' is not a non-negative integer");
  }
  if (entries.count("length") && !parse_int(entries["length"], length)) {
    return core::invalid_model(who + ": external data length '" + entries["length"] + "' is not a non-negative integer");
  }
  if (offset > file_size) {
    return core::invalid_model(who + ": external data offset " + std::to_string(offset) + " is past the end of '" + location + "' (" +
                               std::to_string(file_size) + " bytes)");
  }
  if (length < 0) length = file_size - offset;
  if (length > file_size - offset) {
    return core::invalid_model(who + ": external data offset " + std::to_string(offset) + " + length " + std::to_string(length) +
                               " is past the end of '" + location + "' (" + std::to_string(file_size) + " bytes)");
  }
  const auto count = element_count(t);
  if (!count) return core::invalid_model(who + ": " + count.error().message);
  const size_t size = element_size(t.data_type());
  if (size == 0) return core::invalid_model(who + ": external data of element type " + data_type_name(t.data_type()) + " is not supported");
  if (static_cast<uint64_t>(length) != static_cast<uint64_t>(*count) * size) {
    return core::invalid_model(who + ": external data length " + std::to_string(length) + " disagrees with its dims and type (" +
                               std::to_string(static_cast<uint64_t>(*count) * size) + " bytes)");
  }
  std::string bytes(static_cast<size_t>(length), '\0');
  const int fd = ::open(real.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return core::io_error(who + ": cannot open '" + real.string() + "': " + std::strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::pread(fd, bytes.data() + done, bytes.size() - done, offset + static_cast<int64_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      return core::io_error(who + ": read of '" + real.string() + "' failed");
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  t.set_raw_data(std::move(bytes));
  t.clear_external_data();
  t.clear_data_location();
  return full.string();
}

size_t data_bytes(const onnx::TensorProto& t) {
  return t.raw_data().size() + 4 * static_cast<size_t>(t.float_data_size() + t.int32_data_size()) +
         8 * static_cast<size_t>(t.int64_data_size() + t.double_data_size() + t.uint64_data_size());
}

void add_entry(onnx::TensorProto& t, const std::string& key, const std::string& value) {
  auto* e = t.add_external_data();
  e->set_key(key);
  e->set_value(value);
}

}  // namespace

core::Result<std::string> raw_bytes_of(const onnx::TensorProto& t) {
  if (t.has_raw_data()) return t.raw_data();
  auto values = to_doubles(t);
  if (!values) return values.error();
  // Re-encode through make_tensor for the float types and INT64; other integer types are written by width.
  const size_t size = element_size(t.data_type());
  std::string bytes;
  bytes.reserve(values->size() * size);
  for (size_t i = 0; i < values->size(); ++i) {
    switch (t.data_type()) {
      case onnx::TensorProto::FLOAT: {
        const float f = static_cast<float>((*values)[i]);
        bytes.append(reinterpret_cast<const char*>(&f), 4);
        break;
      }
      case onnx::TensorProto::DOUBLE: bytes.append(reinterpret_cast<const char*>(&(*values)[i]), 8); break;
      case onnx::TensorProto::INT64: {
        const int64_t v = t.int64_data(static_cast<int>(i));
        bytes.append(reinterpret_cast<const char*>(&v), 8);
        break;
      }
      case onnx::TensorProto::UINT64:
      case onnx::TensorProto::UINT32: {
        const uint64_t v = t.uint64_data(static_cast<int>(i));
        bytes.append(reinterpret_cast<const char*>(&v), size);
        break;
      }
      default: {  // int32_data holds every narrower type, including the bits of FLOAT16 and BFLOAT16
        const int32_t v = t.int32_data(static_cast<int>(i));
        bytes.append(reinterpret_cast<const char*>(&v), size);
      }
    }
  }
  return bytes;
}

core::Result<ExternalDataRead> load_external_data(onnx::ModelProto& model, const std::string& model_dir, const std::string& model_path) {
  ExternalDataRead read;
  std::error_code ec;
  const fs::path dir = model_dir.empty() ? fs::path(".") : fs::path(model_dir);
  const fs::path canonical_dir = fs::canonical(dir, ec);
  if (ec) return core::io_error(model_path + ": cannot resolve the model's directory: " + ec.message());
  core::Status status = core::Ok{};
  for_each_keyed_tensor(*model.mutable_graph(), [&](onnx::TensorProto& t, const std::string& key) {
    if (!status || t.data_location() != onnx::TensorProto::EXTERNAL) return;
    auto file = load_one(t, dir, canonical_dir, model_path);
    if (!file) {
      status = file.error();
      return;
    }
    read.files.insert(*file);
    if (!key.empty()) read.tensors.insert(key);
  });
  if (!status) return status.error();
  return read;
}

std::set<std::string> external_data_files(const onnx::ModelProto& model, const std::string& model_dir) {
  std::set<std::string> files;
  const fs::path dir = model_dir.empty() ? fs::path(".") : fs::path(model_dir);
  for_each_tensor(model.graph(), [&](const onnx::TensorProto& t) {
    if (t.data_location() != onnx::TensorProto::EXTERNAL) return;
    const fs::path normal = fs::path(location_of(t)).lexically_normal();
    // What load_external_data refuses is never read, so it cannot be overwritten either.
    if (normal.empty() || normal.is_absolute() || *normal.begin() == "..") return;
    files.insert((dir / normal).string());
  });
  return files;
}

core::Status refuse_external_data(const onnx::ModelProto& model, const std::string& origin) {
  core::Status status = core::Ok{};
  for_each_tensor(model.graph(), [&](const onnx::TensorProto& t) {
    if (status && t.data_location() == onnx::TensorProto::EXTERNAL) {
      status = core::invalid_model(origin + ": " + label(t) +
                                   " stores its data in an external file, which a model read from "
                                   "stdin cannot reach; give the model's file path instead");
    }
  });
  return status;
}

core::Status save_model_with_external_data(onnx::ModelProto& model, const std::string& path, const ExternalSaveOptions& options) {
  if (options.data_name.empty()) return save_model(model, path);
  if (options.data_name.find('/') != std::string::npos) {
    return core::Error{core::ErrorKind::kUsage, "external data name '" + options.data_name + "' must be a file name, not a path"};
  }
  // Move the chosen tensors' data out, point them at the data file, and remember how to put everything back.
  struct Moved {
    onnx::TensorProto* tensor;
    bool had_raw;
    std::string bytes;
    onnx::TensorProto typed;  // typed fields, swapped out while the tensor is external
    int64_t offset;
  };
  std::vector<Moved> moved;
  int64_t offset = 0;
  core::Status status = core::Ok{};
  for_each_keyed_tensor(*model.mutable_graph(), [&](onnx::TensorProto& t, const std::string& key) {
    if (!status || element_size(t.data_type()) == 0) return;
    const bool chosen = (!key.empty() && options.tensor_names.count(key) != 0) || data_bytes(t) >= options.threshold_bytes;
    if (!chosen) return;
    auto bytes = raw_bytes_of(t);
    if (!bytes) {
      status = bytes.error();
      return;
    }
    Moved m{&t, t.has_raw_data(), std::move(*bytes), {}, offset};
    t.clear_raw_data();
    t.mutable_float_data()->Swap(m.typed.mutable_float_data());
    t.mutable_int32_data()->Swap(m.typed.mutable_int32_data());
    t.mutable_int64_data()->Swap(m.typed.mutable_int64_data());
    t.mutable_double_data()->Swap(m.typed.mutable_double_data());
    t.mutable_uint64_data()->Swap(m.typed.mutable_uint64_data());
    t.set_data_location(onnx::TensorProto::EXTERNAL);
    add_entry(t, "location", options.data_name);
    add_entry(t, "offset", std::to_string(offset));
    add_entry(t, "length", std::to_string(m.bytes.size()));
    offset += static_cast<int64_t>((m.bytes.size() + 63) / 64 * 64);  // 64-byte aligned tensors
    moved.push_back(std::move(m));
  });
  auto restore = [&]() {
    for (auto& m : moved) {
      auto& t = *m.tensor;
      t.clear_external_data();
      t.clear_data_location();
      if (m.had_raw) *t.mutable_raw_data() = std::move(m.bytes);
      t.mutable_float_data()->Swap(m.typed.mutable_float_data());
      t.mutable_int32_data()->Swap(m.typed.mutable_int32_data());
      t.mutable_int64_data()->Swap(m.typed.mutable_int64_data());
      t.mutable_double_data()->Swap(m.typed.mutable_double_data());
      t.mutable_uint64_data()->Swap(m.typed.mutable_uint64_data());
    }
  };
  if (!status) {
    restore();
    return status;
  }
  if (moved.empty()) return save_model(model, path);  // nothing goes outside: no (empty) data file
  const std::string dir = fs::path(path).parent_path().empty() ? std::string(".") : fs::path(path).parent_path().string();
  const std::string data_path = dir + "/" + options.data_name;
  if (fs::path(data_path).lexically_normal() == fs::path(path).lexically_normal()) {
    restore();
    return core::Error{core::ErrorKind::kUsage, "external data file '" + data_path + "' would overwrite the model itself"};
  }
  auto write_data = [&moved](int fd) -> core::Status {
    static const char kZeros[64] = {};
    for (const auto& m : moved) {
      const size_t padded = (m.bytes.size() + 63) / 64 * 64;
      for (const auto& [ptr, size] : {std::pair<const char*, size_t>{m.bytes.data(), m.bytes.size()},
                                      std::pair<const char*, size_t>{kZeros, padded - m.bytes.size()}}) {
        size_t done = 0;
        while (done < size) {
          const ssize_t n = ::write(fd, ptr + done, size - done);
          if (n < 0 && errno == EINTR) continue;
          if (n <= 0) return core::io_error(std::string("write failed: ") + std::strerror(errno));
          done += static_cast<size_t>(n);
        }
      }
    }
    return core::Ok{};
  };
  auto write_model = [&model](int fd) { return serialize_to_fd(model, fd); };
  // The data file first, the model last: a reader never sees a model whose data is not there yet.
  status = write_files_atomic({{data_path, write_data}, {path, write_model}});
  restore();
  return status;
}

}  // namespace dwdeconv::onnx_io
