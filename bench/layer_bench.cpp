// Layer-level benchmark (issues 4 and 11): one upsampling layer as written, run as a stock XNNPACK runtime runs it,
// against the same layer after rewrite::rewrite_model with every form enabled (phase Convs writing into the
// Concat's channel slices, then DepthToSpace), both under the runtime_check executor, 1 thread by default.
// The layer kinds: a depthwise ConvTranspose (one XNNPACK deconvolution as written), and three hand-written
// upsamplers, 2x: nearest_mask (nearest Resize, Mul by a [[1,0],[0,0]] mask, Pad [2,2,1,1], depthwise 4x4 Conv:
// MI-GAN's form, = k4 s2 p1), nearest_conv_dw (nearest Resize, depthwise 3x3 Conv pads 1) and nearest_conv_dense
// (nearest Resize, dense 3x3 Conv pads 1, C in and out); and dense ConvTranspose k4 s2 p1 and k2 s2 (C in and out), which
// the tool keeps (rewritten here with RewriteOptions::dense_conv_transpose, to show why). A layer the rewrite leaves alone (its form not
// recognised by this build) is not timed; its row says "not rewritten" and why.
//
// Each benchmark is one layer. Its single Google Benchmark iteration runs a warm-up, checks once that both graphs
// give the same output (a mismatch skips the layer with an error, so a broken rewrite is never timed), then runs
// interleaved pairs A B A B so drift hits both, and reports medians and their ratio, measured in the same run:
//   steps: Executor::run_steps(), the XNNPACK operators alone on NHWC data (the layer as XNNPACK runs it);
//   run:   Executor::run(), which adds loading the NCHW input, converting the output to NCHW and copying it out.
// A table of every layer is printed at the end.
//
//   build/bench/dwdeconv-layer-bench                                  # the full sweep, a few minutes
//   build/bench/dwdeconv-layer-bench --benchmark_filter='k4s2p1op0/'  # one geometry (a regex over the names)
//   build/bench/dwdeconv-layer-bench --benchmark_filter='^nearest'    # the hand-written upsamplers
//   build/bench/dwdeconv-layer-bench --budget=0.5 --threads=2 --no_fusion
//   perf record -g build/bench/dwdeconv-layer-bench --benchmark_filter='k4s2p1op0/C16/H128' --only=rewritten
// --budget is the seconds of timed pairs per layer (at least --min_pairs pairs, at most --max_pairs). --only times
// one side alone and --steps_only skips timing run(), so that a profile shows only what is asked for.
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <onnx/onnx_pb.h>

#include "examples/model_builder.h"
#include "rewrite/forms.h"
#include "rewrite/rewriter.h"
#include "runtime_check/compare.h"
#include "runtime_check/executor.h"

namespace {

using dwdeconv::runtime_check::Executor;
using dwdeconv::runtime_check::ExecutorOptions;
using dwdeconv::runtime_check::NamedTensor;

struct Settings {
  double budget_seconds = 0.5;  // timed pairs per layer
  int min_pairs = 5;
  int max_pairs = 200;
  size_t threads = 1;
  bool fusion = true;
  std::string only;                // "stock" or "rewritten": time one side alone (for a profiler); empty times both
  bool steps_only = false;         // skip timing Executor::run() (for a profiler)
  std::string target = "xnnpack";  // the profile whose phase layout the rewritten side gets (its keep rules are not asked)
};
Settings g_settings;

// What a layer is as written.
enum class Kind { kConvTranspose, kNearestMask, kNearestConvDepthwise, kNearestConvDense, kDenseConvTranspose };

// One upsampling layer on x [1, C, H, H]. A ConvTranspose has weight [C, 1, k, k] and bias [C]; the hand-written
// kinds are 2x and fix their own geometry (nearest_mask is k4 s2 p1, nearest + 3x3 Conv pads 1 is too).
struct Layer {
  Kind kind = Kind::kConvTranspose;
  int64_t channels = 0, size = 0, kernel = 4, stride = 2, pad = 1, output_padding = 0;

  // "k4s2p1op0" for a ConvTranspose, else the kind: the first part of the benchmark's name.
  std::string geometry() const {
    switch (kind) {
      case Kind::kNearestMask: return "nearest_mask";
      case Kind::kNearestConvDepthwise: return "nearest_conv_dw";
      case Kind::kNearestConvDense: return "nearest_conv_dense";
      case Kind::kConvTranspose: break;
      case Kind::kDenseConvTranspose: return "dense_k" + std::to_string(kernel) + "s" + std::to_string(stride) + "p" + std::to_string(pad);
    }
    return "k" + std::to_string(kernel) + "s" + std::to_string(stride) + "p" + std::to_string(pad) + "op" + std::to_string(output_padding);
  }
  // The table's layer column: "4/2/1/0" (k/s/p/op) for a ConvTranspose, else the kind.
  std::string column() const {
    if (kind != Kind::kConvTranspose) return geometry();
    return std::to_string(kernel) + "/" + std::to_string(stride) + "/" + std::to_string(pad) + "/" + std::to_string(output_padding);
  }
  std::string name() const { return geometry() + "/C" + std::to_string(channels) + "/H" + std::to_string(size); }
};

struct Row {
  Layer layer;
  bool ok = false;
  bool rewritten = true;  // false: the rewrite left the layer alone, so it was not timed (error says why)
  std::string error;
  double steps_stock_ms = 0, steps_rewritten_ms = 0, run_stock_ms = 0, run_rewritten_ms = 0;
  double max_abs_diff = 0, max_rel_diff = 0;
  int pairs = 0;
  std::string placement;        // the rewritten graph's placement summary
  std::string stock_placement;  // the stock graph's
};
std::vector<Row> g_rows;

// A hand-written 2x upsampler as PyTorch exports it: nearest Resize (asymmetric, floor), then for nearest_mask
// Mul by the mask and Pad, then the Conv, which writes "y".
onnx::ModelProto make_handwritten_model(const Layer& l, uint32_t seed) {
  dwdeconv::examples::ModelBuilder b("layer_" + l.geometry(), 17, seed);
  const int64_t c = l.channels, h = l.size;
  b.input("x", {"1", std::to_string(c), std::to_string(h), std::to_string(h)});
  b.output("y", {"1", std::to_string(c), std::to_string(2 * h), std::to_string(2 * h)});
  auto& resize = b.node("Resize", "nearest", {"x", "", b.constant("scales", {4}, {1, 1, 2, 2})}, "u");
  dwdeconv::examples::set_string(resize, "mode", "nearest");
  dwdeconv::examples::set_string(resize, "coordinate_transformation_mode", "asymmetric");
  dwdeconv::examples::set_string(resize, "nearest_mode", "floor");
  std::string conv;
  if (l.kind == Kind::kNearestMask) {
    // Keep pixel (0, 0) of each 2x2 cell, pad begin 2 / end 1, correlate with 4x4: ConvTranspose k4 s2 p1.
    std::vector<double> mask(static_cast<size_t>(4 * h * h), 0.0);
    for (int64_t y = 0; y < 2 * h; y += 2) {
      for (int64_t x = 0; x < 2 * h; x += 2) mask[static_cast<size_t>(y * 2 * h + x)] = 1.0;
    }
    b.node("Mul", "mask", {"u", b.constant("mask", {1, 1, 2 * h, 2 * h}, mask)}, "m");
    b.node("Pad", "pad", {"m", b.int64s("pads", {0, 0, 2, 2, 0, 0, 1, 1})}, "p");
    conv = b.conv("up", "p", c, c, 4, 1, {0, 0, 0, 0}, c);
  } else {
    conv = b.conv("up", "u", c, c, 3, 1, {1, 1, 1, 1}, l.kind == Kind::kNearestConvDense ? 1 : c);
  }
  for (auto& node : *b.model().mutable_graph()->mutable_node()) {
    if (node.output(0) == conv) node.set_output(0, "y");
  }
  return b.model();
}

onnx::ModelProto make_layer_model(const Layer& l) {
  const auto seed =
      static_cast<uint32_t>(l.channels * 7919 + l.size * 104729 + l.kernel * 31 + l.stride * 7 + l.pad + static_cast<int64_t>(l.kind) * 13);
  const bool dense = l.kind == Kind::kDenseConvTranspose;
  if (l.kind != Kind::kConvTranspose && !dense) return make_handwritten_model(l, seed);
  dwdeconv::examples::ModelBuilder b("layer_" + l.geometry(), 17, seed);
  const std::string c = std::to_string(l.channels), h = std::to_string(l.size);
  const int64_t out = l.stride * (l.size - 1) + l.output_padding + l.kernel - 2 * l.pad;
  b.input("x", {"1", c, h, h});
  b.output("y", {"1", c, std::to_string(out), std::to_string(out)});
  // Depthwise [C, 1, k, k] with group C, or dense [C, C, k, k] with group 1 (C in and out).
  const std::string w =
      b.random("w", {l.channels, dense ? l.channels : 1, l.kernel, l.kernel}, dense ? 0.5 / static_cast<double>(l.channels) : 0.5);
  const std::string bias = b.random("b", {l.channels}, 0.1);
  auto& node = b.node("ConvTranspose", "up", {"x", w, bias}, "y");
  dwdeconv::examples::set_int(node, "group", dense ? 1 : l.channels);
  dwdeconv::examples::set_ints(node, "kernel_shape", {l.kernel, l.kernel});
  dwdeconv::examples::set_ints(node, "strides", {l.stride, l.stride});
  dwdeconv::examples::set_ints(node, "pads", {l.pad, l.pad, l.pad, l.pad});
  dwdeconv::examples::set_ints(node, "output_padding", {l.output_padding, l.output_padding});
  return b.model();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0.0 : n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Seconds one call of `f` takes; aborts the process if it fails (a benchmark must not time a failing run).
template <typename F>
double timed(F&& f) {
  const auto start = Clock::now();
  const bool ok = f();
  const double elapsed = seconds_since(start);
  if (!ok) {
    std::fprintf(stderr, "layer bench: an executor run failed while timing\n");
    std::exit(1);
  }
  return elapsed;
}

void bench_layer(benchmark::State& state, Layer layer) {
  Row row;
  row.layer = layer;
  auto fail = [&](const std::string& message) {
    row.error = message;
    g_rows.push_back(row);
    state.SkipWithError(((row.rewritten ? "" : "not rewritten: ") + message).c_str());
  };

  const onnx::ModelProto original = make_layer_model(layer);
  onnx::ModelProto rewritten = original;
  dwdeconv::rewrite::RewriteOptions all_forms;
  all_forms.forms = dwdeconv::rewrite::all_forms();
  all_forms.dense_conv_transpose = layer.kind == Kind::kDenseConvTranspose;  // the tool keeps these; measured here
  // The target's phase layout (DCR, Gather + CRD, batch + CRD) on every layer: its keep rules are what this measures.
  static const dwdeconv::rewrite::Target layout_only = [] {
    const auto* named = dwdeconv::rewrite::find_target(g_settings.target);
    dwdeconv::rewrite::Target t = *named;
    t.rules.clear();  // no keep rule: every layer is rewritten in the target's join
    return t;
  }();
  all_forms.target = &layout_only;
  const auto rewrite = dwdeconv::rewrite::rewrite_model(rewritten, all_forms);
  if (!rewrite.ok()) return fail("rewrite failed: " + rewrite.error().message);
  if (rewrite->rewritten != 1) {
    // Not a failure of the rewrite: this build may not recognise the form. Said in the row, never timed.
    row.rewritten = false;
    return fail(rewrite->nodes.empty() ? "no form recognised" : rewrite->nodes.at(0).reason);
  }

  ExecutorOptions options;
  options.threads = g_settings.threads;
  options.fuse_concat = g_settings.fusion;
  options.seed = 1;
  auto stock = Executor::create(original, options);
  if (!stock.ok()) return fail("stock executor: " + stock.error().message);
  options.inputs = stock->creation_inputs();
  auto polyphase = Executor::create(rewritten, options);
  if (!polyphase.ok()) return fail("rewritten executor: " + polyphase.error().message);
  row.placement = polyphase->placement_summary();
  row.stock_placement = stock->placement_summary();
  if (g_settings.fusion && polyphase->count_fused("Concat") != 1) return fail("the Concat was not fused: " + row.placement);
  const bool transposed = layer.kind == Kind::kConvTranspose || layer.kind == Kind::kDenseConvTranspose;
  const std::string stock_op = transposed ? "ConvTranspose" : "Conv";
  if (stock->count(stock_op, dwdeconv::runtime_check::Placement::kXnnpack) != 1) {
    return fail("the stock " + stock_op + " did not run on XNNPACK: " + stock->placement_summary());
  }

  // Both graphs must agree before anything is timed.
  const std::vector<NamedTensor> inputs = stock->creation_inputs();
  auto y_stock = stock->run(inputs);
  auto y_polyphase = polyphase->run(inputs);
  if (!y_stock.ok() || !y_polyphase.ok()) return fail("a verification run failed");
  const auto comparison = dwdeconv::runtime_check::compare_outputs(y_polyphase.value(), y_stock.value(), {});
  row.max_abs_diff = comparison.outputs.empty() ? 0.0 : comparison.outputs[0].max_abs_error;
  row.max_rel_diff = comparison.outputs.empty() ? 0.0 : comparison.outputs[0].max_rel_error;
  if (!comparison.passed) return fail("outputs differ: " + comparison.summary());

  const bool time_stock = g_settings.only != "rewritten", time_polyphase = g_settings.only != "stock";
  auto run_stock = [&] { return !time_stock || g_settings.steps_only || stock->run(inputs).ok(); };
  auto run_polyphase = [&] { return !time_polyphase || g_settings.steps_only || polyphase->run(inputs).ok(); };
  auto steps_stock = [&] { return !time_stock || stock->run_steps().ok(); };
  auto steps_polyphase = [&] { return !time_polyphase || polyphase->run_steps().ok(); };

  std::vector<double> a_steps, b_steps, a_run, b_run;
  for (auto _ : state) {
    // Warm-up (a second round only for quick layers), which also sizes the number of pairs to the budget.
    double pair = 0.0;
    for (int k = 0; k < 2 && (k == 0 || pair < 0.1 * g_settings.budget_seconds); ++k) {
      pair = timed(steps_stock) + timed(steps_polyphase) + timed(run_stock) + timed(run_polyphase);
    }
    const int pairs = std::clamp(static_cast<int>(std::ceil(g_settings.budget_seconds / std::max(pair, 1e-9))), g_settings.min_pairs,
                                 g_settings.max_pairs);
    for (int k = 0; k < pairs; ++k) {
      a_steps.push_back(timed(steps_stock));
      b_steps.push_back(timed(steps_polyphase));
      a_run.push_back(timed(run_stock));
      b_run.push_back(timed(run_polyphase));
    }
    row.pairs = pairs;
    // The reported time is one median pair of operator runs (stock + rewritten).
    state.SetIterationTime(median(a_steps) + median(b_steps));
  }
  row.ok = true;
  row.steps_stock_ms = 1e3 * median(a_steps);
  row.steps_rewritten_ms = 1e3 * median(b_steps);
  row.run_stock_ms = 1e3 * median(a_run);
  row.run_rewritten_ms = 1e3 * median(b_run);
  state.counters["stock_ms"] = row.steps_stock_ms;
  state.counters["rewr_ms"] = row.steps_rewritten_ms;
  state.counters["speedup"] = row.steps_stock_ms / row.steps_rewritten_ms;
  state.counters["run_speedup"] = row.run_stock_ms / row.run_rewritten_ms;
  state.counters["max_abs_diff"] = row.max_abs_diff;
  state.counters["pairs"] = row.pairs;
  g_rows.push_back(row);
}

void print_table() {
  std::printf(
      "\nLayer sweep: each layer as written (stock: a ConvTranspose is one XNNPACK deconvolution) vs rewritten, "
      "%zu thread(s), Concat fusion %s.\nMedians of interleaved pairs measured in one run; speedup = stock / rewritten.\n"
      "steps = XNNPACK operators on NHWC data (Executor::run_steps); run = Executor::run with NCHW I/O.\n\n",
      g_settings.threads, g_settings.fusion ? "on" : "off");
  std::printf("%5s %4s %-18s | %10s %12s %8s | %10s %12s %8s | %9s %5s\n", "C", "H", "k/s/p/op or form", "stock ms", "rewritten ms",
              "speedup", "run stock", "run rewr.", "speedup", "max|diff|", "pairs");
  std::map<std::string, std::string> placements, stock_placements;
  for (const Row& r : g_rows) {
    const Layer& l = r.layer;
    const std::string geometry = l.column();
    if (!r.ok) {
      std::printf("%5lld %4lld %-18s | %s: %s\n", static_cast<long long>(l.channels), static_cast<long long>(l.size), geometry.c_str(),
                  r.rewritten ? "FAILED" : "not rewritten", r.error.c_str());
      continue;
    }
    std::printf("%5lld %4lld %-18s | %10.3f %12.3f %7.1fx | %10.3f %12.3f %7.1fx | %9.2e %5d\n", static_cast<long long>(l.channels),
                static_cast<long long>(l.size), geometry.c_str(), r.steps_stock_ms, r.steps_rewritten_ms,
                r.steps_stock_ms / r.steps_rewritten_ms, r.run_stock_ms, r.run_rewritten_ms, r.run_stock_ms / r.run_rewritten_ms,
                r.max_abs_diff, r.pairs);
    placements.emplace(geometry, r.placement);
    if (l.kind != Kind::kConvTranspose) stock_placements.emplace(geometry, r.stock_placement);
  }
  std::printf("\nRewritten graph placements (a stock ConvTranspose is one XNNPACK deconvolution):\n");
  for (const auto& [geometry, placement] : placements) std::printf("  %-18s %s\n", geometry.c_str(), placement.c_str());
  if (!stock_placements.empty()) std::printf("Stock placements of the hand-written layers:\n");
  for (const auto& [geometry, placement] : stock_placements) std::printf("  %-18s %s\n", geometry.c_str(), placement.c_str());
}

// Takes this program's own flags out of argv; Google Benchmark parses the rest.
bool parse_own_flags(int& argc, char** argv) {
  int kept = 1;
  for (int k = 1; k < argc; ++k) {
    const std::string arg = argv[k];
    auto value = [&](const char* flag) -> const char* {
      const size_t n = std::strlen(flag);
      return arg.compare(0, n, flag) == 0 ? argv[k] + n : nullptr;
    };
    if (const char* v = value("--budget=")) g_settings.budget_seconds = std::atof(v);
    else if (const char* v2 = value("--min_pairs=")) g_settings.min_pairs = std::atoi(v2);
    else if (const char* v3 = value("--max_pairs=")) g_settings.max_pairs = std::atoi(v3);
    else if (const char* v4 = value("--threads=")) g_settings.threads = static_cast<size_t>(std::atoi(v4));
    else if (const char* v5 = value("--only=")) g_settings.only = v5;
    else if (const char* v6 = value("--target=")) g_settings.target = v6;
    else if (arg == "--no_fusion") g_settings.fusion = false;
    else if (arg == "--steps_only") g_settings.steps_only = true;
    else argv[kept++] = argv[k];
  }
  argc = kept;
  if (g_settings.budget_seconds <= 0 || g_settings.min_pairs < 1 || g_settings.max_pairs < g_settings.min_pairs || g_settings.threads < 1 ||
      (!g_settings.only.empty() && g_settings.only != "stock" && g_settings.only != "rewritten")) {
    std::fprintf(stderr,
                 "layer bench: need --budget > 0, 1 <= --min_pairs <= --max_pairs, --threads >= 1, "
                 "--only=stock|rewritten\n");
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (!parse_own_flags(argc, argv)) return 2;
  if (dwdeconv::rewrite::find_target(g_settings.target) == nullptr) {
    std::fprintf(stderr, "layer bench: --target takes one of %s\n", dwdeconv::rewrite::target_names().c_str());
    return 2;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;

  // The sweeps (k, s, p, op) x C x H and hand-written form x C x H.
  std::vector<Layer> kinds;
  for (const auto& g : std::vector<std::array<int64_t, 4>>{{4, 2, 1, 0}, {3, 2, 1, 1}, {2, 2, 0, 0}, {6, 3, 2, 1}}) {
    kinds.push_back({Kind::kConvTranspose, 0, 0, g[0], g[1], g[2], g[3]});
  }
  for (Kind kind : {Kind::kNearestMask, Kind::kNearestConvDepthwise, Kind::kNearestConvDense}) kinds.push_back({kind});
  // Dense ConvTranspose: the tool keeps it; these rows are the measurement that says why.
  std::vector<Layer> dense;
  for (const auto& g : std::vector<std::array<int64_t, 3>>{{4, 2, 1}, {2, 2, 0}}) {
    dense.push_back({Kind::kDenseConvTranspose, 0, 0, g[0], g[1], g[2], 0});
  }
  for (const Layer& kind : kinds) {
    for (int64_t c : {16, 64, 256, 512}) {
      for (int64_t h : {32, 64, 128}) {
        Layer layer = kind;
        layer.channels = c;
        layer.size = h;
        benchmark::RegisterBenchmark(layer.name().c_str(), bench_layer, layer)
            ->Iterations(1)
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond);
      }
    }
  }
  for (const Layer& kind : dense) {
    for (int64_t c : {16, 64, 256}) {
      for (int64_t h : {32, 64}) {
        Layer layer = kind;
        layer.channels = c;
        layer.size = h;
        benchmark::RegisterBenchmark(layer.name().c_str(), bench_layer, layer)
            ->Iterations(1)
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond);
      }
    }
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  print_table();
  // A layer the rewrite left alone is reported, not a failure: this build may not recognise its form yet.
  bool all_ok = true;
  for (const Row& r : g_rows) all_ok = all_ok && (r.ok || !r.rewritten);
  return all_ok ? 0 : 1;
}
