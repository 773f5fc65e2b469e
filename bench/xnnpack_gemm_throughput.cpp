// How fast this machine's XNNPACK runs a dense 3x3 Conv (its indirect GEMM) and the same multiply as a
// fully-connected operator (its plain GEMM), in GFLOP/s on 1 thread. The two are timed
// interleaved, N rounds each, and printed as median, min and max. Run by hand, never by ctest:
//
//   build/bench/dwdeconv-xnnpack-gemm-throughput [rounds]
//
// On Debian bookworm's libxnnpack0 (2022) on an AVX2 + FMA3 machine without AVX-512, both land on the f32 5x16 FMA3
// microkernels, which GCC compiled with one of their ten accumulators spilled to the stack: every iteration of the
// inner loop loads, multiplies into and stores that accumulator, so the loop runs at the store-to-load forwarding
// latency instead of two FMAs per cycle (BENCHMARKS.md, "Stable Diffusion's VAE decoder").
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <xnnpack.h>

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 == 1 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

double seconds(xnn_operator_t op) {
  const auto start = std::chrono::steady_clock::now();
  if (xnn_run_operator(op, nullptr) != xnn_status_success) std::abort();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

struct Shape {
  size_t size, channels_in, channels_out;  // a size x size image
};

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::max(1, std::atoi(argv[1])) : 9;
  if (xnn_initialize(nullptr) != xnn_status_success) return 1;
  std::printf("%-24s %10s %28s %28s\n", "3x3 Conv, 1 thread", "GFLOP", "Conv (igemm) GFLOP/s", "FC (gemm) GFLOP/s");
  std::printf("%-24s %10s %28s %28s\n", "", "", "median [min, max]", "median [min, max]");
  for (const Shape s : {Shape{32, 512, 512}, Shape{64, 512, 512}, Shape{128, 256, 256}, Shape{256, 128, 128}}) {
    const size_t pixels = s.size * s.size, k = 9 * s.channels_in;
    std::vector<float> x(pixels * s.channels_in + 16, 0.5f), y(pixels * s.channels_out + 16);
    std::vector<float> w(s.channels_out * k, 0.01f), b(s.channels_out, 0.0f);
    std::vector<float> a(pixels * k + 16, 0.5f), z(pixels * s.channels_out + 16);  // the im2col'd input
    xnn_operator_t conv = nullptr, fc = nullptr;
    if (xnn_create_convolution2d_nhwc_f32(1, 1, 1, 1, 3, 3, 1, 1, 1, 1, 1, s.channels_in, s.channels_out, s.channels_in, s.channels_out,
                                          w.data(), b.data(), -INFINITY, INFINITY, 0, &conv) != xnn_status_success ||
        xnn_setup_convolution2d_nhwc_f32(conv, 1, s.size, s.size, x.data(), y.data(), nullptr) != xnn_status_success ||
        xnn_create_fully_connected_nc_f32(k, s.channels_out, k, s.channels_out, w.data(), b.data(), -INFINITY, INFINITY, 0, &fc) !=
            xnn_status_success ||
        xnn_setup_fully_connected_nc_f32(fc, pixels, a.data(), z.data(), nullptr) != xnn_status_success) {
      std::fprintf(stderr, "XNNPACK refused the operators\n");
      return 1;
    }
    const double gflop = 2.0 * static_cast<double>(pixels * k * s.channels_out) / 1e9;
    seconds(conv);  // warm-up
    seconds(fc);
    std::vector<double> c, f;
    for (int r = 0; r < rounds; ++r) {
      c.push_back(gflop / seconds(conv));
      f.push_back(gflop / seconds(fc));
    }
    char label[64];
    std::snprintf(label, sizeof label, "%zux%zu, %zu -> %zu", s.size, s.size, s.channels_in, s.channels_out);
    std::printf("%-24s %10.2f %14.1f [%5.1f, %5.1f] %14.1f [%5.1f, %5.1f]\n", label, gflop, median(c),
                *std::min_element(c.begin(), c.end()), *std::max_element(c.begin(), c.end()), median(f),
                *std::min_element(f.begin(), f.end()), *std::max_element(f.begin(), f.end()));
    xnn_delete_operator(conv);
    xnn_delete_operator(fc);
  }
  return 0;
}
