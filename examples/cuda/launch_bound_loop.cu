// A launch-bound loop: N empty kernels back to back on one stream, the worst case for a tracer's
// per-launch cost. scripts/gpu-check.sh runs it with and without capture and compares the times.
//
// A short warm-up (not timed) loads the kernel's module first, so that lazy loading is not counted.
// The timed part is the loop of launches and the synchronize that waits for the last kernel.
//
// Prints: kernel_prefix=xray_  kernels_launched=<warm-up + timed>  timed_kernels=N
//         wall_seconds=<timed part>  us_per_kernel=...
//
// Usage: launch_bound_loop [N] [--warmup W]     (N defaults to 100000, W to 1000)

#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#define CK(call)                                                                                      \
  do {                                                                                                \
    cudaError_t err_ = (call);                                                                        \
    if (err_ != cudaSuccess) {                                                                        \
      std::fprintf(stderr, "launch_bound_loop: %s failed: %s (%s:%d)\n", #call, cudaGetErrorString(err_), \
                   __FILE__, __LINE__);                                                               \
      std::exit(1);                                                                                   \
    }                                                                                                 \
  } while (0)

extern "C" __global__ void xray_tiny() {}

namespace {

long parseCount(const char* text, const char* what) {
  char* end = nullptr;
  long value = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || value < 0 || value > 100000000) {
    std::fprintf(stderr, "launch_bound_loop: bad %s '%s'\nusage: launch_bound_loop [N] [--warmup W]\n", what, text);
    std::exit(2);
  }
  return value;
}

}  // namespace

int main(int argc, char** argv) {
  long n = 100000;
  long warmup = 1000;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--warmup") == 0 && i + 1 < argc) {
      warmup = parseCount(argv[++i], "warm-up count");
    } else {
      n = parseCount(argv[i], "kernel count");
    }
  }

  CK(cudaSetDevice(0));
  CK(cudaFree(nullptr));
  cudaStream_t stream;
  CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  unsigned long long launched = 0;

  for (long i = 0; i < warmup; ++i) {
    xray_tiny<<<1, 1, 0, stream>>>();
    ++launched;
  }
  CK(cudaGetLastError());
  CK(cudaStreamSynchronize(stream));

  auto start = std::chrono::steady_clock::now();
  for (long i = 0; i < n; ++i) {
    xray_tiny<<<1, 1, 0, stream>>>();
    ++launched;
  }
  CK(cudaStreamSynchronize(stream));
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CK(cudaGetLastError());
  CK(cudaStreamDestroy(stream));

  std::printf("kernel_prefix=xray_\n");
  std::printf("kernels_launched=%llu\n", launched);
  std::printf("timed_kernels=%ld\n", n);
  std::printf("wall_seconds=%.6f\n", seconds);
  std::printf("us_per_kernel=%.3f\n", n > 0 ? seconds * 1e6 / n : 0.0);
  return 0;
}
