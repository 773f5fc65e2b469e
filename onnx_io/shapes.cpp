#include "onnx_io/shapes.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <stdexcept>

#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

#include "core/cleanup.h"
#include "onnx_io/graph_walk.h"
#include "onnx_io/tensor.h"

// The sanitizer runtime's interface, declared weak: non-null only in a build that links a sanitizer (ASan, UBSan,
// and so libFuzzer's builds, which install their crash reporting through them).
extern "C" {
void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));
void __sanitizer_set_report_fd(void* fd) __attribute__((weak));
const char* __sanitizer_get_report_path() __attribute__((weak));
}

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

// Replaces each sparse initializer of `graph` and its subgraphs by a dense initializer with its name, type and
// dims, and no data.
void densify_sparse_initializers(onnx::GraphProto& graph) {
  for (const auto& sparse : graph.sparse_initializer()) {
    auto& dense = *graph.add_initializer();
    dense.set_name(sparse.values().name());
    dense.set_data_type(sparse.values().data_type());
    for (int64_t d : sparse.dims()) dense.add_dims(d);
  }
  graph.clear_sparse_initializer();
  for (auto& node : *graph.mutable_node()) {
    for (auto& attr : *node.mutable_attribute()) {
      if (attr.has_g()) densify_sparse_initializers(*attr.mutable_g());
      for (auto& g : *attr.mutable_graphs()) densify_sparse_initializers(g);
    }
  }
}

// Makes the forked child of infer_shapes_isolated end quietly when libonnx crashes in it. The child inherits
// its parent's signal handlers: a sanitizer's (ASan's SEGV, BUS and FPE handlers) or libFuzzer's (ABRT, ILL,
// INT, ...), which would report the child's crash as the parent's, and under libFuzzer also dump the current
// input as a crash artifact from inside the child. With the default actions a crash just kills the child by its
// signal, which the parent turns into an error. What a sanitizer still finds in the child (a bad free inside
// libonnx, say) ends it with the sanitizer's exit status, but calls no death callback (libFuzzer's writes the
// artifact) and prints its report to /dev/null, unless ASAN_OPTIONS=log_path (or UBSAN_OPTIONS) asked for a file.
void quiet_child() {
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  sigset_t deadly;
  sigemptyset(&deadly);
  for (int sig :
       {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS, SIGXCPU, SIGXFSZ, SIGINT, SIGTERM, SIGALRM, SIGUSR1, SIGUSR2}) {
    ::sigaction(sig, &default_action, nullptr);
    sigaddset(&deadly, sig);
  }
  ::sigprocmask(SIG_UNBLOCK, &deadly, nullptr);
  if (__sanitizer_set_death_callback != nullptr) __sanitizer_set_death_callback(nullptr);
  const bool report_file = __sanitizer_get_report_path != nullptr && __sanitizer_get_report_path() != nullptr;
  if (__sanitizer_set_report_fd != nullptr && !report_file) {
    const int null_fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null_fd >= 0) __sanitizer_set_report_fd(reinterpret_cast<void*>(static_cast<intptr_t>(null_fd)));
  }
}

// Keeps the rank of a declared shape and forgets its dims: each becomes unknown.
void forget_dims(onnx::TypeProto_Tensor& tensor) {
  if (!tensor.has_shape()) return;
  for (auto& d : *tensor.mutable_shape()->mutable_dim()) {
    d.clear_dim_value();
    d.clear_dim_param();
  }
}

// Drops what `graph` and its subgraphs declare about tensors they compute: every value_info entry, and the shape of
// every graph output (a subgraph's outputs type the node that holds it). ONNX shape inference merges a declared dim
// into the one it infers, and a declared 13 wins over an inferred symbol: a file could say that a crop of a symbolic
// tensor ends at its dim, or that a Resize's input is 4x5, for one input size only. Graph
// inputs keep their types: they are what a caller feeds. The element types of outputs stay, so nothing else changes.
void drop_declared_shapes(onnx::GraphProto& graph) {
  graph.clear_value_info();
  for (auto& out : *graph.mutable_output()) {
    if (out.type().has_tensor_type()) out.mutable_type()->mutable_tensor_type()->clear_shape();
  }
  for (auto& node : *graph.mutable_node()) {
    for (auto& attr : *node.mutable_attribute()) {
      if (attr.has_g()) drop_declared_shapes(*attr.mutable_g());
      for (auto& g : *attr.mutable_graphs()) drop_declared_shapes(g);
    }
    // A Loop body's loop-carried inputs (after the iteration number and the condition) and a Scan body's state inputs
    // (before its num_scan_inputs scan inputs) are what the last iteration left: their declared shapes hold for the
    // first iteration only, and a value that grows each iteration has another shape in each.
    const bool loop = node.op_type() == "Loop" && (node.domain().empty() || node.domain() == "ai.onnx");
    const bool scan = node.op_type() == "Scan" && (node.domain().empty() || node.domain() == "ai.onnx");
    if (!loop && !scan) continue;
    int64_t scan_inputs = 0;
    for (const auto& attr : node.attribute()) {
      if (attr.name() == "num_scan_inputs") scan_inputs = attr.i();
    }
    for (auto& attr : *node.mutable_attribute()) {
      if (attr.name() != "body" || !attr.has_g()) continue;
      auto& inputs = *attr.mutable_g()->mutable_input();
      const int first = loop ? 2 : 0;
      const int end = loop ? inputs.size() : std::max(0, inputs.size() - static_cast<int>(std::max<int64_t>(0, scan_inputs)));
      for (int k = first; k < end; ++k) {
        if (inputs[k].type().has_tensor_type()) forget_dims(*inputs[k].mutable_type()->mutable_tensor_type());
      }
    }
  }
}

bool has_type(const onnx::ValueInfoProto& v) { return v.has_type() && v.type().value_case() != onnx::TypeProto::VALUE_NOT_SET; }

}  // namespace

onnx::ModelProto skeleton_copy(const onnx::ModelProto& model, size_t max_bytes) {
  onnx::ModelProto copy;
  {
    // The data is moved out and back, never changed, so the model is logically const throughout.
    LargeDataDetacher detached(const_cast<onnx::ModelProto&>(model), max_bytes);
    copy = model;
  }
  densify_sparse_initializers(*copy.mutable_graph());
  return copy;
}

core::Result<std::string> run_isolated(const std::function<std::string()>& work, bool* crashed) {
  if (crashed != nullptr) *crashed = false;
  int fds[2];
  if (::pipe(fds) != 0) return core::io_error(std::string("shape inference: pipe failed: ") + std::strerror(errno));
  std::fflush(nullptr);
  // Registered as it starts: a signal to this run kills it too (core/cleanup.h).
  pid_t pid = -1;
  core::cleanup::atomically([&](core::cleanup::Registration& r) {
    pid = ::fork();
    if (pid > 0) r.process(pid, /*own_group=*/false);
  });
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return core::io_error(std::string("shape inference: fork failed: ") + std::strerror(errno));
  }
  if (pid == 0) {
    // Child: work, send 'O' and its answer (or 'E' and the message), and leave with _exit (no atexit handlers, no
    // leak check, no flushing of the parent's buffers).
    quiet_child();
    ::close(fds[0]);
    std::string reply;
    try {
      reply = "O" + work();
    } catch (const std::exception& e) {
      reply = std::string("E") + e.what();
    } catch (...) {
      reply = "Ean exception that is not a std::exception";
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
  core::cleanup::atomically([&](core::cleanup::Registration& r) { r.forget_process(pid); });
  const core::ErrorKind kind = core::ErrorKind::kFailedValidation;
  // A crash kills the child by a signal, or, under a sanitizer, ends it with a non-zero status and no reply.
  const bool died = WIFSIGNALED(status) || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || reply.empty();
  if (died) {
    if (crashed != nullptr) *crashed = true;
    const std::string how = WIFSIGNALED(status) ? "signal " + std::to_string(WTERMSIG(status)) + ", " + strsignal(WTERMSIG(status))
                                                : "exit status " + std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return core::Error{kind, "ONNX shape inference crashed on this model (" + how + "); the model is malformed in a way libonnx " +
                                 "1.12 does not check (e.g. a Conv or ConvTranspose weight whose rank disagrees with its input)"};
  }
  if (reply[0] == 'E') return core::Error{kind, reply.substr(1)};
  return reply.substr(1);
}

core::Status infer_shapes_in_process(onnx::ModelProto& skeleton, bool strict, bool data_propagation) {
  try {
    onnx::shape_inference::InferShapes(skeleton, onnx::OpSchemaRegistry::Instance(),
                                       onnx::ShapeInferenceOptions{strict, strict ? 1 : 0, data_propagation});
  } catch (const std::exception& e) {
    return core::Error{core::ErrorKind::kFailedValidation, e.what()};
  }
  return core::Ok{};
}

core::Status infer_shapes_isolated(onnx::ModelProto& skeleton, bool strict, bool data_propagation, bool* crashed) {
  auto reply = run_isolated(
      [&]() {
        if (auto status = infer_shapes_in_process(skeleton, strict, data_propagation); !status)
          throw std::runtime_error(status.error().message);
        return skeleton.SerializeAsString();
      },
      crashed);
  if (!reply) return reply.error();
  onnx::ModelProto inferred;
  if (!inferred.ParseFromString(*reply)) return core::Error{core::ErrorKind::kFailedValidation, "ONNX shape inference: bad reply"};
  skeleton = std::move(inferred);
  return core::Ok{};
}

const onnx::TypeProto* ScopedTypes::find(size_t scope, const std::string& name) const {
  for (size_t s = scope; s < scopes_.size(); s = scopes_[s].parent) {
    const auto it = scopes_[s].names.find(name);
    if (it != scopes_[s].names.end()) return it->second ? &*it->second : nullptr;
    if (s == 0) break;
  }
  return nullptr;
}

onnx::ModelProto inference_skeleton(const onnx::ModelProto& model) {
  onnx::ModelProto copy = skeleton_copy(model);
  drop_declared_shapes(*copy.mutable_graph());
  return copy;
}

ScopedTypes infer_types(const onnx::ModelProto& model) {
  onnx::ModelProto copy = inference_skeleton(model);
  // Non-strict: partial information is still useful, and a crash only means there is none.
  (void)infer_shapes_isolated(copy, /*strict=*/false, /*data_propagation=*/true);
  return collect_types(copy);
}

ScopedTypes collect_types(const onnx::ModelProto& copy) {
  // The copy has the model's graphs in the same places, so numbering them in for_each_graph's order (as the
  // rewrite's GraphTree does) maps each graph of the copy to the same graph of the model.
  ScopedTypes types;
  const auto collect = [&types](const onnx::GraphProto& g, size_t parent, const auto& self) -> void {
    const size_t index = types.scopes_.size();
    types.scopes_.push_back({parent, {}});
    auto& names = types.scopes_[index].names;
    // Every name this graph defines hides an outer one; the first known type wins, most specific first.
    auto define = [&names](const std::string& name, const onnx::TypeProto* type) {
      if (name.empty()) return;
      auto& slot = names[name];
      if (!slot && type != nullptr) slot = *type;
    };
    for (const auto& v : g.value_info()) define(v.name(), has_type(v) ? &v.type() : nullptr);
    for (const auto& v : g.output()) define(v.name(), has_type(v) ? &v.type() : nullptr);
    for (const auto& v : g.input()) define(v.name(), has_type(v) ? &v.type() : nullptr);
    for (const auto& t : g.initializer()) {
      onnx::TypeProto type;
      type.mutable_tensor_type()->set_elem_type(t.data_type());
      for (int64_t d : t.dims()) type.mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
      define(t.name(), &type);
    }
    for (const auto& node : g.node()) {
      for (const auto& out : node.output()) define(out, nullptr);
    }
    for (const auto& node : g.node()) {
      for (const auto& attr : node.attribute()) {
        if (attr.has_g()) self(attr.g(), index, self);
        for (const auto& sub : attr.graphs()) self(sub, index, self);
      }
    }
  };
  collect(copy.graph(), 0, collect);
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

std::string describe_type(const onnx::TypeProto& type) {
  if (type.has_sequence_type()) return "a sequence";
  if (type.has_map_type()) return "a map";
  if (type.has_optional_type()) return "an optional";
  if (!type.has_tensor_type()) return "an unknown type";
  std::string text = data_type_name(type.tensor_type().elem_type());
  if (!type.tensor_type().has_shape()) return text;
  text += "[";
  for (int k = 0; k < type.tensor_type().shape().dim_size(); ++k) {
    const auto& d = type.tensor_type().shape().dim(k);
    text += (k ? "," : "") + (d.has_dim_value() ? std::to_string(d.dim_value()) : d.has_dim_param() ? d.dim_param() : std::string("?"));
  }
  return text + "]";
}

}  // namespace dwdeconv::onnx_io
