#include "onnx_io/shapes.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

#include "onnx_io/graph_walk.h"

namespace dwdeconv::onnx_io {
namespace {

// Moves the data of large tensors out of a model and back again. Only the data fields move (std::string moves
// and RepeatedField swaps, no copies); every other field stays, so a copy taken in between is a skeleton.
class LargeDataDetacher {
 public:
  LargeDataDetacher(onnx::ModelProto& model, size_t max_bytes) : max_bytes_(max_bytes) {
    for_each_mutable_tensor(*model.mutable_graph(), [this](onnx::TensorProto& t) { detach(t); });
  }
  ~LargeDataDetacher() {
    for (auto& d : detached_) {
      if (d.had_raw) *d.tensor->mutable_raw_data() = std::move(d.raw);
      swap_typed(*d.tensor, d.typed);
    }
  }
  LargeDataDetacher(const LargeDataDetacher&) = delete;
  LargeDataDetacher& operator=(const LargeDataDetacher&) = delete;

 private:
  struct Detached {
    onnx::TensorProto* tensor;
    bool had_raw;
    std::string raw;
    onnx::TensorProto typed;  // holds the typed data fields while they are out
  };

  static void swap_typed(onnx::TensorProto& a, onnx::TensorProto& b) {
    a.mutable_float_data()->Swap(b.mutable_float_data());
    a.mutable_int32_data()->Swap(b.mutable_int32_data());
    a.mutable_int64_data()->Swap(b.mutable_int64_data());
    a.mutable_double_data()->Swap(b.mutable_double_data());
    a.mutable_uint64_data()->Swap(b.mutable_uint64_data());
  }

  static size_t data_bytes(const onnx::TensorProto& t) {
    return t.raw_data().size() + 4 * static_cast<size_t>(t.float_data_size() + t.int32_data_size()) +
           8 * static_cast<size_t>(t.int64_data_size() + t.double_data_size() + t.uint64_data_size());
  }

  void detach(onnx::TensorProto& t) {
    if (data_bytes(t) <= max_bytes_) return;
    Detached d{&t, t.has_raw_data(), {}, {}};
    if (d.had_raw) {
      d.raw = std::move(*t.mutable_raw_data());
      t.clear_raw_data();
    }
    swap_typed(t, d.typed);
    detached_.push_back(std::move(d));
  }

  size_t max_bytes_;
  std::vector<Detached> detached_;
};

}  // namespace

onnx::ModelProto skeleton_copy(const onnx::ModelProto& model, size_t max_bytes) {
  // The data is moved out and back, never changed, so the model is logically const throughout.
  LargeDataDetacher detached(const_cast<onnx::ModelProto&>(model), max_bytes);
  return model;
}

core::Status infer_shapes_isolated(onnx::ModelProto& skeleton, bool strict, bool data_propagation) {
  int fds[2];
  if (::pipe(fds) != 0) return core::io_error(std::string("shape inference: pipe failed: ") + std::strerror(errno));
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return core::io_error(std::string("shape inference: fork failed: ") + std::strerror(errno));
  }
  if (pid == 0) {
    // Child: infer, send 'O' and the inferred skeleton (or 'E' and the message), and leave without cleanup.
    ::close(fds[0]);
    std::string reply;
    try {
      onnx::shape_inference::InferShapes(skeleton, onnx::OpSchemaRegistry::Instance(),
                                         onnx::ShapeInferenceOptions{strict, strict ? 1 : 0, data_propagation});
      reply = "O" + skeleton.SerializeAsString();
    } catch (const std::exception& e) {
      reply = std::string("E") + e.what();
    }
    size_t done = 0;
    while (done < reply.size()) {
      const ssize_t n = ::write(fds[1], reply.data() + done, reply.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) ::_exit(2);
      done += static_cast<size_t>(n);
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string reply;
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::read(fds[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    reply.append(buffer, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  const core::ErrorKind kind = core::ErrorKind::kCheckFailed;
  // A crash kills the child by a signal, or, under a sanitizer, ends it with a non-zero status and no reply.
  const bool crashed = WIFSIGNALED(status) || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || reply.empty();
  if (crashed) {
    const std::string how = WIFSIGNALED(status) ? "signal " + std::to_string(WTERMSIG(status)) + ", " + strsignal(WTERMSIG(status))
                                                : "exit status " + std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return core::Error{kind, "ONNX shape inference crashed on this model (" + how + "); the model is malformed in a way libonnx " +
                                 "1.12 does not check (e.g. a Conv or ConvTranspose weight whose rank disagrees with its input)"};
  }
  if (reply[0] == 'E') return core::Error{kind, reply.substr(1)};
  onnx::ModelProto inferred;
  if (!inferred.ParseFromArray(reply.data() + 1, static_cast<int>(reply.size() - 1))) return core::Error{kind, "ONNX shape inference: bad reply"};
  skeleton = std::move(inferred);
  return core::Ok{};
}

std::map<std::string, onnx::TypeProto> infer_types(const onnx::ModelProto& model) {
  onnx::ModelProto copy = skeleton_copy(model);
  // Non-strict: partial information is still useful, and a crash only means there is none.
  (void)infer_shapes_isolated(copy, /*strict=*/false, /*data_propagation=*/true);
  std::map<std::string, onnx::TypeProto> types;
  for_each_graph(copy.graph(), [&types](const onnx::GraphProto& g) {
    for (const auto& v : g.input()) types.emplace(v.name(), v.type());
    for (const auto& v : g.output()) types.emplace(v.name(), v.type());
    for (const auto& v : g.value_info()) types.emplace(v.name(), v.type());
    for (const auto& t : g.initializer()) {
      onnx::TypeProto type;
      type.mutable_tensor_type()->set_elem_type(t.data_type());
      for (int64_t d : t.dims()) type.mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
      types.emplace(t.name(), type);
    }
  });
  return types;
}

std::vector<int64_t> known_dims(const onnx::TypeProto& type) {
  if (!type.has_tensor_type() || !type.tensor_type().has_shape()) return {};
  std::vector<int64_t> dims;
  for (const auto& d : type.tensor_type().shape().dim()) {
    if (!d.has_dim_value()) return {};
    dims.push_back(d.dim_value());
  }
  return dims;
}

}  // namespace dwdeconv::onnx_io
