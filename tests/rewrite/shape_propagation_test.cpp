// The tool's own shape propagation (rewrite/shape_propagation.h): shapes computed from the graph inputs through the
// chains libonnx 1.12 cannot evaluate, declared shapes never used (and a warning where they disagree), symbolic dims
// kept symbolic; and the PyTorch exports whose shapes only propagation computes (tests/fixtures) rewritten whole.
#include <catch2/catch.hpp>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <limits>

#include "onnx_io/model_io.h"
#include "onnx_io/tensor.h"
#include "rewrite/shape_propagation.h"
#include "rewrite_fixtures.h"
#include "tests/support/source_dir.h"

using namespace dwdeconv;
using namespace dwdeconv::test;

namespace {

std::string dims_of(const onnx_io::ScopedTypes& types, const std::string& name) {
  const auto* t = types.find(0, name);
  return t == nullptr ? "unknown" : onnx_io::describe_type(*t);
}

// x -> Resize by sizes Concat(Shape(x)[0:2], Shape(x)[2:4] * 2), as torch exports F.interpolate(size=...), then Relu.
onnx::ModelProto computed_sizes(const std::string& x_dims) {
  auto m = parse_model(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float)" + x_dims + R"( x) => (float[n,c,h,w] y) {
  s = Shape (x)
  nc = Slice (s, zero, two)
  hw = Slice (s, two, four)
  hw2 = Mul (hw, factor)
  sizes = Concat <axis = 0> (nc, hw2)
  u = Resize <mode = "nearest", coordinate_transformation_mode = "asymmetric", nearest_mode = "floor"> (x, , , sizes)
  y = Relu (u)
})");
  auto& g = *m.mutable_graph();
  *g.add_initializer() = onnx_io::make_int64_tensor("zero", {1}, {0});
  *g.add_initializer() = onnx_io::make_int64_tensor("two", {1}, {2});
  *g.add_initializer() = onnx_io::make_int64_tensor("four", {1}, {4});
  *g.add_initializer() = onnx_io::make_int64_tensor("factor", {2}, {2, 2});
  return m;
}

}  // namespace

TEST_CASE("a Resize by sizes computed from Shape gets its output shape, which libonnx alone does not know", "[rewrite][propagation]") {
  const auto m = computed_sizes("[1,8,5,7]");
  CHECK(dims_of(onnx_io::infer_types(m), "u") != "FLOAT[1,8,10,14]");  // what libonnx 1.12 makes of it alone
  const auto propagated = rewrite::propagate_types(m);
  CHECK(dims_of(propagated.types, "u") == "FLOAT[1,8,10,14]");
  CHECK(dims_of(propagated.types, "y") == "FLOAT[1,8,10,14]");
  CHECK(propagated.rounds >= 2);
  CHECK(propagated.warnings.empty());
}

TEST_CASE("symbolic dims stay symbolic, and a declared shape that disagrees is named and not used", "[rewrite][propagation]") {
  // H and W symbolic: the sizes cannot be folded, and nothing is made up.
  const auto symbolic = rewrite::propagate_types(computed_sizes("[1,8,H,W]"));
  CHECK(dims_of(symbolic.types, "x") == "FLOAT[1,8,H,W]");
  const auto* u = symbolic.types.find(0, "u");
  CHECK((u == nullptr || !u->tensor_type().has_shape() || !u->tensor_type().shape().dim(2).has_dim_value()));
  // A value_info saying 9 high for what computes as 10: a warning names both, and the computed one stands.
  auto declared = computed_sizes("[1,8,5,7]");
  auto* vi = declared.mutable_graph()->add_value_info();
  vi->set_name("u");
  vi->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : {1, 8, 9, 14}) vi->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
  const auto p = rewrite::propagate_types(declared);
  CHECK(dims_of(p.types, "u") == "FLOAT[1,8,10,14]");
  REQUIRE(p.warnings.size() == 1);
  CHECK(p.warnings[0] ==
        "'u' is declared FLOAT[1,8,9,14] but computes as FLOAT[1,8,10,14] from the graph inputs: the declared "
        "shape is not used");
}

TEST_CASE(
    "PyTorch exports whose sizes are computed are rewritten whole: MI-GAN's ScatterND masks, FastDepth's computed Unpool "
    "weights, upfirdn2d's literal crop ends",
    "[rewrite][propagation][fixtures]") {
  const std::string source = test::source_dir();
  const struct {
    const char* file;
    int upsamplers;
    std::vector<std::string> gone;  // ops only the hand-written upsamplers (or the weight chains) used
  } cases[] = {
      {"migan_nearest_scatternd_32_opset13.onnx", 6, {"ScatterND", "Resize", "Pad", "Where", "Expand"}},
      {"migan_nearest_scatternd_256_opset13.onnx", 12, {"ScatterND", "Resize", "Pad", "Where", "Expand"}},
      {"migan_nearest_sizes_32_opset13.onnx", 6, {"ScatterND", "Resize", "Pad"}},
      {"fastdepth_upconv_opset13.onnx", 5, {"ConvTranspose", "Expand", "Where", "Equal", "ConstantOfShape"}},
      {"upfirdn2d_literal_ends_opset13.onnx", 2, {"Pad", "Slice"}},
  };
  for (const auto& c : cases) {
    for (const char* target : {"xnnpack", "executorch"}) {  // DCR, and the Gather + CRD join
      CAPTURE(c.file, target);
      auto loaded = onnx_io::load_model(source + "/tests/fixtures/" + c.file);
      REQUIRE(loaded.ok());
      rewrite::RewriteOptions options;
      options.target = rewrite::find_target(target);
      const auto out = rewrite_copy(*loaded, options);
      std::string kept;
      for (const auto& n : out.result.nodes) kept += n.rewritten ? "" : n.summary.name + ": " + n.reason + "; ";
      CAPTURE(kept);
      CHECK(out.result.nodes.size() == static_cast<size_t>(c.upsamplers));
      CHECK(out.result.rewritten == c.upsamplers);
      CHECK(count_ops_everywhere(out.model, "DepthToSpace") == c.upsamplers);
      for (const auto& op : c.gone) {
        CAPTURE(op);
        CHECK(count_ops_everywhere(out.model, op) == 0);
      }
      CHECK(checker_error(out.model).empty());
      CHECK(out.result.warnings.empty());
    }
  }
}

TEST_CASE("a dim libonnx infers unlike the ONNX spec is unknown, and so is everything downstream of it", "[rewrite][propagation][spec]") {
  // A ceil_mode MaxPool k2 s2 pads 1 on 9: ceil((9 + 2 - 2) / 2 + 1) = 6 windows, but the 6th would start at 10, in
  // the right padding (at or past 9 + 1): the spec and ONNX Runtime's kernel drop it, 5. libonnx 1.12 keeps it, 6, and
  // ONNX Runtime 1.32 folds Shape (p) to [1,8,6,6] from its own inference: neither length may decide anything.
  auto m = parse_model(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,8,9,9] x) => (float[n,c,h,w] y) {
  p = MaxPool <kernel_shape = [2, 2], strides = [2, 2], pads = [1, 1, 1, 1], ceil_mode = 1> (x)
  s = Shape (p)
  y = Relu (p)
})");
  CHECK(dims_of(onnx_io::infer_types(m), "p") == "FLOAT[1,8,6,6]");  // libonnx alone
  const auto p = rewrite::propagate_types(m);
  CHECK(dims_of(p.types, "p") == "FLOAT[1,8,?,?]");
  CHECK_THAT(dims_of(p.types, "y"),
             Catch::Matches(R"(FLOAT\[1,8,(\?|[A-Za-z_]\w*),(\?|[A-Za-z_]\w*)\])"));  // unknown, or symbols of inference's own
  REQUIRE(p.spec_overrides.size() == 1);
  CHECK(p.spec_overrides[0] ==
        "MaxPool producing 'p': ONNX shape inference (libonnx 1.12) gives 'p' FLOAT[1,8,6,6], the ONNX spec FLOAT[1,8,5,5]: "
        "runtimes compute either (ONNX Runtime's kernel the spec's, its folded Shape inference's), so the dims they differ "
        "on are not known, and an upsampler that depends on them is kept");
  CHECK(p.warnings == p.spec_overrides);

  // A ConvTranspose SAME_UPPER with output_padding: out = in * stride (8 -> 16), where libonnx adds output_padding (17):
  // unknown.
  // A Slice backwards to INT64_MAX: the spec takes nothing, ONNX Runtime everything: no length is claimed.
  auto n = parse_model(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,2,8,8] x, float[6] v) => (float[n,c,h,w] y, float[k] z) {
  y = ConvTranspose <strides = [2, 2], auto_pad = "SAME_UPPER", output_padding = [1, 1]> (x, w)
  z = Slice (v, st, en, ax, sp)
})");
  auto& g = *n.mutable_graph();
  *g.add_initializer() = onnx_io::make_tensor("w", onnx::TensorProto::FLOAT, {2, 2, 3, 3}, std::vector<double>(36, 0.5), false);
  *g.add_initializer() = onnx_io::make_int64_tensor("st", {1}, {3});
  *g.add_initializer() = onnx_io::make_int64_tensor("en", {1}, {std::numeric_limits<int64_t>::max()});
  *g.add_initializer() = onnx_io::make_int64_tensor("ax", {1}, {0});
  *g.add_initializer() = onnx_io::make_int64_tensor("sp", {1}, {-1});
  const auto q = rewrite::propagate_types(n);
  CHECK(dims_of(q.types, "y") == "FLOAT[1,2,?,?]");
  const auto* z = q.types.find(0, "z");
  CHECK((z == nullptr || !z->tensor_type().has_shape() || !z->tensor_type().shape().dim(0).has_dim_value()));
}

namespace {

// Runs propagate_types(m) in a child limited to `cpu_seconds` of CPU (and so each of its children); "" when it finished within them and its
// peak resident memory grew by less than 512 MiB, else how it ended. The bounds are generous (the work takes well under a second and a few
// MiB): they catch work that grows with rounds x values, not a slow machine.
std::string propagate_within_bounds(const onnx::ModelProto& m, rlim_t cpu_seconds, int* rounds) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[0]);
    const rlimit cpu{cpu_seconds, cpu_seconds};
    ::setrlimit(RLIMIT_CPU, &cpu);
    // A forked child starts with the test process's pages resident (hundreds of MiB after a long test run, under
    // AddressSanitizer): only what it grows by counts, and its own children start with its pages too.
    rusage start{};
    ::getrusage(RUSAGE_SELF, &start);
    long reply[2] = {-1, -1};
    try {
      reply[0] = rewrite::propagate_types(m).rounds;
    } catch (...) {
      ::_exit(3);
    }
    // Its own peak and its children's (inference runs in one), in KiB, over what it started with.
    rusage self{}, children{};
    ::getrusage(RUSAGE_SELF, &self);
    ::getrusage(RUSAGE_CHILDREN, &children);
    reply[1] = std::max(self.ru_maxrss, children.ru_maxrss) - start.ru_maxrss;
    (void)!::write(fds[1], reply, sizeof reply);
    ::_exit(0);
  }
  ::close(fds[1]);
  long reply[2] = {-1, -1};
  (void)!::read(fds[0], reply, sizeof reply);
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  *rounds = static_cast<int>(reply[0]);
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return "exit status " + std::to_string(WEXITSTATUS(status));
  if (reply[1] > 512 * 1024) return "peak resident memory " + std::to_string(reply[1] / 1024) + " MiB";
  return "";
}

}  // namespace

TEST_CASE("shape propagation computes no value larger than it could keep, and no value twice", "[rewrite][propagation][bounds]") {
  // A 1 KB model: a ConstantOfShape [4096,4096] and 24 Adds of it (the old propagation computed and cached each, 16M
  // elements, every round: 3.3 GiB, 52 s).
  std::string text = R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,8,8,8] x) => (float[1,8,8,8] y) {
  s = Constant <value = int64[2] {4096, 4096}> ()
  c0 = ConstantOfShape <value = float[1] {1.0}> (s)
)";
  for (int i = 0; i < 24; ++i) text += "  c" + std::to_string(i + 1) + " = Add (c" + std::to_string(i) + ", c" + std::to_string(i) + ")\n";
  text += "  r = ReduceMax <keepdims = 0> (c24)\n  y = Add (x, r)\n}";
  int rounds = 0;
  CHECK(propagate_within_bounds(parse_model(text), 20, &rounds).empty());
  CHECK(rounds == 1);

  // A 9 KB chain of 128 links, t[i+1] = Reshape(t[i], Div(Shape(t[i]), 1)) from a ConstantOfShape [1024,1024]: each
  // link's shape needs the round before (libonnx does not fold Div), and the old propagation recomputed every 1M
  // element value in every one of the 129 rounds (137 s, 1 GiB).
  std::string chain = R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,8,8,8] x) => (float[1,8,8,8] y) {
  s = Constant <value = int64[2] {1024, 1024}> ()
  one = Constant <value = int64[1] {1}> ()
  t0 = ConstantOfShape <value = float[1] {1.0}> (s)
)";
  for (int i = 0; i < 128; ++i) {
    const std::string a = std::to_string(i), b = std::to_string(i + 1);
    chain += "  sh" + a + " = Shape (t" + a + ")\n  q" + a + " = Div (sh" + a + ", one)\n  t" + b + " = Reshape (t" + a + ", q" + a + ")\n";
  }
  chain += "  r = ReduceMax <keepdims = 0> (t128)\n  y = Add (x, r)\n}";
  const auto m = parse_model(chain);
  CHECK(propagate_within_bounds(m, 20, &rounds).empty());
  CHECK(rounds == 129);
  // And every link's shape is still computed.
  CHECK(dims_of(rewrite::propagate_types(m).types, "t128") == "FLOAT[1024,1024]");
}

TEST_CASE("a Loop body's loop-carried inputs are of unknown dims, whatever the body declares and the Loop starts with",
          "[rewrite][propagation][subgraph]") {
  // v grows one column per iteration; the body declares it (and the ConvTranspose on it) as the first iteration has it.
  auto m = parse_model(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,4,4,4] x, int64 trips) => (float[1,4,4,w] v_final, float[1,4,4,w2] y) {
  t = Constant <value = bool {1}> ()
  col = Constant <value = float[1,4,4,1] {1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1}> ()
  w = Constant <value = float[4,1,1,3] {1,2,3,1,2,3,1,2,3,1,2,3}> ()
  v_final, y = Loop (trips, t, x) <body = body (int64 i, bool c_in, float[1,4,4,4] v_in) => (bool c_out, float[1,4,4,5] v_out, float[1,4,4,8] u) {
    u = ConvTranspose <group = 4, strides = [1, 2], pads = [0, 1, 0, 1], output_padding = [0, 1]> (v_in, w)
    v_out = Concat <axis = 3> (v_in, col)
    c_out = Identity (c_in)
  }>
})");
  const auto p = rewrite::propagate_types(m);
  REQUIRE(p.types.size() == 2);
  const auto dims_in = [&p](const std::string& name) {
    const auto* t = p.types.find(1, name);
    return t == nullptr ? std::string("unknown") : onnx_io::describe_type(*t);
  };
  // libonnx names each unknown dim (unk__0, ...); none is a number.
  const auto* v_in = p.types.find(1, "v_in");
  REQUIRE(v_in != nullptr);
  CAPTURE(dims_in("v_in"));
  CHECK(onnx_io::known_dims(*v_in).empty());
  for (const auto& d : v_in->tensor_type().shape().dim()) CHECK_FALSE(d.has_dim_value());
  // Nothing downstream of it in the body claims the first iteration's width.
  for (const char* name : {"u", "v_out"}) {
    CAPTURE(name, dims_in(name));
    const auto* t = p.types.find(1, name);
    CHECK((t == nullptr || !t->tensor_type().has_shape() || t->tensor_type().shape().dim_size() < 4 ||
           !t->tensor_type().shape().dim(3).has_dim_value()));
  }
}
