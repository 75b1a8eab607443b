// A small CUDA program that does a bit of everything gpuxray captures, and says what it did, so that
// scripts/gpu-check.sh can compare the trace with the program's own account:
//
//   - several streams (one of them high-priority) with copies, kernels, memsets and cross-stream
//     event waits;
//   - copies in every direction: host to device and back from pageable and pinned memory, device to
//     device, host to host (pinned and pageable), and peer to peer when there are two GPUs;
//   - cudaMalloc/cudaFree, cudaMallocAsync/cudaFreeAsync, cudaMallocHost/cudaFreeHost;
//   - NVTX ranges: push/pop in the default domain, a range in a domain of its own, a start/end
//     range and a mark, and named streams;
//   - long kernels that spin for a fixed time, each timed with CUDA events around its one launch;
//   - a cuBLAS GEMM loop, each GEMM timed with CUDA events, the loop timed on the host.
//
// Its own kernels are extern "C" (unmangled) and named xray_*: it counts every launch of them and
// prints the count. cuBLAS launches kernels of its own (how many per GEMM is cuBLAS's business),
// which are not counted; the GEMM calls are.
//
// At the end it prints machine-readable lines (key=value), among them:
//   kernel_prefix=xray_  kernels_launched=N  long_kernel index=I name=xray_spin cuda_event_ms=T
//   gemm_loop_seconds=S  nvtx_ranges=a,b,c  copy_issued kind=K src=S dst=D count=N bytes=B
//
// Usage: stream_workload [--streams N] [--stream-kernels N] [--copy-mb N] [--long-kernels N]
//                        [--long-ms MS] [--gemm-n N] [--gemm-iters N] [--gemm-warmup N]
//                        [--dtype bf16|fp32] [--allocs N] [--gemm-only]

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtCudaRt.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace {

#define CK(call)                                                                                   \
  do {                                                                                             \
    cudaError_t err_ = (call);                                                                     \
    if (err_ != cudaSuccess) {                                                                     \
      std::fprintf(stderr, "stream_workload: %s failed: %s (%s:%d)\n", #call, cudaGetErrorString(err_), \
                   __FILE__, __LINE__);                                                            \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)

#define CB(call)                                                                                           \
  do {                                                                                                     \
    cublasStatus_t st_ = (call);                                                                           \
    if (st_ != CUBLAS_STATUS_SUCCESS) {                                                                    \
      std::fprintf(stderr, "stream_workload: %s failed: %s (%s:%d)\n", #call, cublasGetStatusString(st_), \
                   __FILE__, __LINE__);                                                                    \
      std::exit(1);                                                                                        \
    }                                                                                                      \
  } while (0)

// Every launch of one of our own kernels goes through LAUNCH, which counts it.
uint64_t g_kernels_launched = 0;
#define LAUNCH(kernel, grid, block, shared, stream, ...)         \
  do {                                                           \
    kernel<<<(grid), (block), (shared), (stream)>>>(__VA_ARGS__); \
    CK(cudaGetLastError());                                      \
    ++g_kernels_launched;                                        \
  } while (0)

struct Options {
  int streams = 4;
  int stream_kernels = 8;
  int copy_mb = 32;
  int long_kernels = 3;
  double long_ms = 10.0;
  int gemm_n = 4096;
  int gemm_iters = 50;
  int gemm_warmup = 3;
  std::string dtype = "bf16";
  int allocs = 8;
  bool gemm_only = false;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "stream_workload: %s\nusage: stream_workload [--streams N] [--stream-kernels N] [--copy-mb N] "
               "[--long-kernels N] [--long-ms MS] [--gemm-n N] [--gemm-iters N] [--gemm-warmup N] "
               "[--dtype bf16|fp32] [--allocs N] [--gemm-only]\n",
               why);
  std::exit(2);
}

Options parseOptions(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--gemm-only") {
      o.gemm_only = true;
      continue;
    }
    if (a == "-h" || a == "--help") usage("runs a mixed CUDA workload");
    if (i + 1 >= argc) usage(("missing value for " + a).c_str());
    const char* v = argv[++i];
    auto integer = [&](int minimum) {
      char* end = nullptr;
      long value = std::strtol(v, &end, 10);
      if (end == v || *end != '\0' || value < minimum || value > (1L << 30)) usage(("bad value for " + a).c_str());
      return static_cast<int>(value);
    };
    if (a == "--streams") o.streams = integer(1);
    else if (a == "--stream-kernels") o.stream_kernels = integer(0);
    else if (a == "--copy-mb") o.copy_mb = integer(1);
    else if (a == "--long-kernels") o.long_kernels = integer(0);
    else if (a == "--long-ms") o.long_ms = integer(1);
    else if (a == "--gemm-n") o.gemm_n = integer(16);
    else if (a == "--gemm-iters") o.gemm_iters = integer(0);
    else if (a == "--gemm-warmup") o.gemm_warmup = integer(0);
    else if (a == "--allocs") o.allocs = integer(0);
    else if (a == "--dtype") {
      o.dtype = v;
      if (o.dtype != "bf16" && o.dtype != "fp32") usage("--dtype is bf16 or fp32");
    } else {
      usage(("unknown option " + a).c_str());
    }
  }
  return o;
}

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// --- Our kernels (extern "C": their names in the trace are exactly these) -------------------------

__device__ __forceinline__ uint32_t hash32(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return static_cast<uint32_t>(x);
}

__device__ __forceinline__ uint64_t globalTimerNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

}  // namespace

extern "C" __global__ void xray_fill_bf16(__nv_bfloat16* out, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    float value = static_cast<float>(hash32(seed * 0x9e3779b97f4a7c15ull + i) % 2001u) / 1000.0f - 1.0f;
    out[i] = __float2bfloat16(value);
  }
}

extern "C" __global__ void xray_fill_f32(float* out, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    out[i] = static_cast<float>(hash32(seed * 0x9e3779b97f4a7c15ull + i) % 2001u) / 1000.0f - 1.0f;
}

extern "C" __global__ void xray_scale(float* data, size_t n, float factor) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    data[i] = data[i] * factor + 1.0f;
}

// Spins for `ns` nanoseconds of the GPU's global timer: a long kernel of known length.
extern "C" __global__ void xray_spin(uint64_t ns, uint64_t* sink) {
  uint64_t start = globalTimerNs();
  uint64_t now = start;
  uint64_t iterations = 0;
  while (now - start < ns) {
    now = globalTimerNs();
    ++iterations;
  }
  if (threadIdx.x == 0 && blockIdx.x == 0) sink[0] = iterations;
}

namespace {

struct CopyKey {
  std::string kind, src, dst;
  bool operator<(const CopyKey& o) const { return std::tie(kind, src, dst) < std::tie(o.kind, o.src, o.dst); }
};
struct CopyCount {
  int count = 0;
  uint64_t bytes = 0;
};
std::map<CopyKey, CopyCount> g_copies;
int g_memsets = 0;
int g_device_allocations = 0;
int g_device_frees = 0;
int g_pinned_allocations = 0;
std::vector<std::string> g_nvtx_ranges;

void noteCopy(const char* kind, const char* src, const char* dst, size_t bytes) {
  CopyCount& c = g_copies[{kind, src, dst}];
  ++c.count;
  c.bytes += bytes;
}

// Default-domain push/pop, remembered so the script knows which names to look for.
void rangePush(const char* name) {
  nvtxRangePushA(name);
  if (std::find(g_nvtx_ranges.begin(), g_nvtx_ranges.end(), name) == g_nvtx_ranges.end())
    g_nvtx_ranges.emplace_back(name);
}
void rangePop() { nvtxRangePop(); }

int gridFor(size_t n, int block) {
  size_t blocks = (n + block - 1) / block;
  return static_cast<int>(std::min<size_t>(blocks, 132 * 8));
}

void runCopiesAndStreams(const Options& o, cudaStream_t main_stream, const std::vector<cudaStream_t>& streams) {
  const size_t bytes = static_cast<size_t>(o.copy_mb) << 20;
  const size_t floats = bytes / sizeof(float);

  rangePush("allocations");
  std::vector<void*> scratch;
  for (int i = 0; i < o.allocs; ++i) {
    void* p = nullptr;
    CK(cudaMalloc(&p, (size_t(1) << 20) * (i + 1)));
    ++g_device_allocations;
    scratch.push_back(p);
  }
  int pools = 0;
  CK(cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, 0));
  std::vector<void*> async_scratch;
  if (pools) {
    for (int i = 0; i < o.allocs; ++i) {
      void* p = nullptr;
      CK(cudaMallocAsync(&p, (size_t(1) << 20) * (i + 1), main_stream));
      ++g_device_allocations;
      async_scratch.push_back(p);
    }
  }
  float *d_a = nullptr, *d_b = nullptr;
  CK(cudaMalloc(&d_a, bytes));
  CK(cudaMalloc(&d_b, bytes));
  g_device_allocations += 2;
  float *h_pinned = nullptr, *h_pinned2 = nullptr;
  CK(cudaMallocHost(&h_pinned, bytes));
  CK(cudaMallocHost(&h_pinned2, bytes));
  g_pinned_allocations += 2;
  std::memset(h_pinned, 0, bytes);
  std::vector<float> h_pageable(floats, 1.0f), h_pageable2(floats, 0.0f);
  rangePop();

  rangePush("copies");
  CK(cudaMemcpy(d_a, h_pageable.data(), bytes, cudaMemcpyHostToDevice));
  noteCopy("HtoD", "pageable", "device", bytes);
  CK(cudaMemcpyAsync(d_b, h_pinned, bytes, cudaMemcpyHostToDevice, main_stream));
  noteCopy("HtoD", "pinned", "device", bytes);
  CK(cudaMemcpyAsync(d_b, d_a, bytes, cudaMemcpyDeviceToDevice, main_stream));
  noteCopy("DtoD", "device", "device", bytes);
  CK(cudaMemcpyAsync(h_pinned2, d_b, bytes, cudaMemcpyDeviceToHost, main_stream));
  noteCopy("DtoH", "device", "pinned", bytes);
  CK(cudaStreamSynchronize(main_stream));
  CK(cudaMemcpy(h_pageable2.data(), d_a, bytes, cudaMemcpyDeviceToHost));
  noteCopy("DtoH", "device", "pageable", bytes);
  CK(cudaMemcpyAsync(h_pinned2, h_pinned, bytes, cudaMemcpyHostToHost, main_stream));
  noteCopy("HtoH", "pinned", "pinned", bytes);
  CK(cudaStreamSynchronize(main_stream));
  CK(cudaMemcpy(h_pageable2.data(), h_pageable.data(), bytes, cudaMemcpyHostToHost));
  noteCopy("HtoH", "pageable", "pageable", bytes);
  CK(cudaMemsetAsync(d_a, 0, bytes, main_stream));
  ++g_memsets;
  CK(cudaMemset(d_b, 0x7f, bytes));
  ++g_memsets;

  int devices = 0;
  CK(cudaGetDeviceCount(&devices));
  int peer_ok = 0;
  if (devices >= 2) CK(cudaDeviceCanAccessPeer(&peer_ok, 0, 1));
  if (peer_ok) {
    void* d_peer = nullptr;
    CK(cudaSetDevice(1));
    CK(cudaMalloc(&d_peer, bytes));
    ++g_device_allocations;
    CK(cudaSetDevice(0));
    cudaError_t enabled = cudaDeviceEnablePeerAccess(1, 0);
    if (enabled != cudaSuccess && enabled != cudaErrorPeerAccessAlreadyEnabled) CK(enabled);
    cudaGetLastError();
    CK(cudaMemcpyPeerAsync(d_peer, 1, d_a, 0, bytes, main_stream));
    noteCopy("PtoP", "device", "device", bytes);
    CK(cudaStreamSynchronize(main_stream));
    CK(cudaFree(d_peer));
    ++g_device_frees;
    std::printf("peer_copies=1\n");
  } else {
    std::printf("peer_copies=0 reason=%s\n", devices >= 2 ? "no_peer_access" : "one_gpu");
  }
  CK(cudaStreamSynchronize(main_stream));
  rangePop();

  rangePush("streams");
  // Each stream works on its own slice: copy in, kernels, memset of a tail, copy out. The last
  // stream waits for the first one's event, so there is a cross-stream dependency.
  const size_t slice = floats / streams.size();
  std::vector<cudaEvent_t> done(streams.size());
  for (size_t s = 0; s < streams.size(); ++s) {
    CK(cudaEventCreateWithFlags(&done[s], cudaEventDisableTiming));
    float* d_slice = d_a + s * slice;
    float* h_slice = h_pinned + s * slice;
    CK(cudaMemcpyAsync(d_slice, h_slice, slice * sizeof(float), cudaMemcpyHostToDevice, streams[s]));
    noteCopy("HtoD", "pinned", "device", slice * sizeof(float));
    if (s + 1 == streams.size() && streams.size() > 1) CK(cudaStreamWaitEvent(streams[s], done[0], 0));
    for (int k = 0; k < o.stream_kernels; ++k)
      LAUNCH(xray_scale, gridFor(slice, 256), 256, 0, streams[s], d_slice, slice, 1.0001f);
    CK(cudaMemsetAsync(d_slice + slice / 2, 0, (slice - slice / 2) * sizeof(float), streams[s]));
    ++g_memsets;
    CK(cudaMemcpyAsync(h_pinned2 + s * slice, d_slice, slice * sizeof(float), cudaMemcpyDeviceToHost, streams[s]));
    noteCopy("DtoH", "device", "pinned", slice * sizeof(float));
    CK(cudaEventRecord(done[s], streams[s]));
  }
  for (size_t s = 0; s < streams.size(); ++s) {
    CK(cudaEventSynchronize(done[s]));
    CK(cudaEventDestroy(done[s]));
  }
  rangePop();

  rangePush("frees");
  for (void* p : async_scratch) {
    CK(cudaFreeAsync(p, main_stream));
    ++g_device_frees;
  }
  CK(cudaStreamSynchronize(main_stream));
  for (void* p : scratch) {
    CK(cudaFree(p));
    ++g_device_frees;
  }
  CK(cudaFree(d_a));
  CK(cudaFree(d_b));
  g_device_frees += 2;
  CK(cudaFreeHost(h_pinned));
  CK(cudaFreeHost(h_pinned2));
  rangePop();
}

void runLongKernels(const Options& o, cudaStream_t stream) {
  rangePush("long_kernels");
  uint64_t* sink = nullptr;
  CK(cudaMalloc(&sink, sizeof(uint64_t)));
  ++g_device_allocations;
  cudaEvent_t before, after;
  CK(cudaEventCreate(&before));
  CK(cudaEventCreate(&after));
  const uint64_t ns = static_cast<uint64_t>(o.long_ms * 1e6);
  for (int i = 0; i < o.long_kernels; ++i) {
    // Different lengths, so that a mismatch between trace and program shows.
    uint64_t length = ns + static_cast<uint64_t>(i) * (ns / 4);
    CK(cudaEventRecord(before, stream));
    LAUNCH(xray_spin, 1, 32, 0, stream, length, sink);
    CK(cudaEventRecord(after, stream));
    CK(cudaEventSynchronize(after));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, before, after));
    std::printf("long_kernel index=%d name=xray_spin target_ms=%.3f cuda_event_ms=%.4f\n", i, length / 1e6, ms);
  }
  CK(cudaEventDestroy(before));
  CK(cudaEventDestroy(after));
  CK(cudaFree(sink));
  ++g_device_frees;
  rangePop();
}

void runGemmLoop(const Options& o, cudaStream_t stream) {
  const int n = o.gemm_n;
  const size_t elements = size_t(n) * n;
  const bool bf16 = o.dtype == "bf16";
  const size_t element_bytes = bf16 ? sizeof(__nv_bfloat16) : sizeof(float);
  cublasHandle_t handle;
  CB(cublasCreate(&handle));
  CB(cublasSetStream(handle, stream));
  void *a = nullptr, *b = nullptr, *c = nullptr;
  CK(cudaMalloc(&a, elements * element_bytes));
  CK(cudaMalloc(&b, elements * element_bytes));
  CK(cudaMalloc(&c, elements * element_bytes));
  g_device_allocations += 3;
  int grid = gridFor(elements, 256);
  if (bf16) {
    LAUNCH(xray_fill_bf16, grid, 256, 0, stream, static_cast<__nv_bfloat16*>(a), elements, 1ull);
    LAUNCH(xray_fill_bf16, grid, 256, 0, stream, static_cast<__nv_bfloat16*>(b), elements, 2ull);
  } else {
    LAUNCH(xray_fill_f32, grid, 256, 0, stream, static_cast<float*>(a), elements, 1ull);
    LAUNCH(xray_fill_f32, grid, 256, 0, stream, static_cast<float*>(b), elements, 2ull);
  }
  const cudaDataType type = bf16 ? CUDA_R_16BF : CUDA_R_32F;
  const cublasComputeType_t compute = bf16 ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_32F_FAST_TF32;
  const float alpha = 1.0f / static_cast<float>(n), beta = 0.0f;
  int gemm_calls = 0;
  auto gemm = [&] {
    CB(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, a, type, n, b, type, n, &beta, c, type, n,
                    compute, CUBLAS_GEMM_DEFAULT));
    ++gemm_calls;
  };

  rangePush("gemm_warmup");
  for (int i = 0; i < o.gemm_warmup; ++i) gemm();
  CK(cudaStreamSynchronize(stream));
  rangePop();

  std::vector<cudaEvent_t> marks(o.gemm_iters + 1);
  for (auto& e : marks) CK(cudaEventCreate(&e));
  rangePush("gemm_loop");
  auto start = std::chrono::steady_clock::now();
  CK(cudaEventRecord(marks[0], stream));
  for (int i = 0; i < o.gemm_iters; ++i) {
    gemm();
    CK(cudaEventRecord(marks[i + 1], stream));
  }
  CK(cudaStreamSynchronize(stream));
  double loop_seconds = secondsSince(start);
  rangePop();

  double sum_ms = 0, min_ms = 1e30, max_ms = 0;
  for (int i = 0; i < o.gemm_iters; ++i) {
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, marks[i], marks[i + 1]));
    sum_ms += ms;
    min_ms = std::min<double>(min_ms, ms);
    max_ms = std::max<double>(max_ms, ms);
  }
  for (auto& e : marks) CK(cudaEventDestroy(e));
  double mean_ms = o.gemm_iters > 0 ? sum_ms / o.gemm_iters : 0;
  double tflops = mean_ms > 0 ? 2.0 * n * double(n) * n / (mean_ms * 1e-3) / 1e12 : 0;
  std::printf("gemm n=%d dtype=%s calls=%d iterations=%d event_mean_ms=%.4f event_min_ms=%.4f event_max_ms=%.4f "
              "tflops=%.1f\n",
              n, o.dtype.c_str(), gemm_calls, o.gemm_iters, mean_ms, o.gemm_iters ? min_ms : 0, max_ms, tflops);
  std::printf("gemm_calls=%d\n", gemm_calls);
  std::printf("gemm_loop_seconds=%.6f\n", loop_seconds);
  CK(cudaFree(a));
  CK(cudaFree(b));
  CK(cudaFree(c));
  g_device_frees += 3;
  CB(cublasDestroy(handle));
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parseOptions(argc, argv);
  auto program_start = std::chrono::steady_clock::now();

  // CUDA first, NVTX after: under CUDA_INJECTION64_PATH alone, the injection library is loaded by
  // cuInit and points NVTX at itself then, so NVTX must not have initialized before.
  CK(cudaSetDevice(0));
  CK(cudaFree(nullptr));
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  int devices = 0;
  CK(cudaGetDeviceCount(&devices));
  std::printf("device name=\"%s\" sms=%d cc=%d.%d gpus=%d\n", prop.name, prop.multiProcessorCount, prop.major,
              prop.minor, devices);

  nvtxDomainHandle_t domain = nvtxDomainCreateA("gpuxray_example");
  nvtxEventAttributes_t attributes{};
  attributes.version = NVTX_VERSION;
  attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
  attributes.message.ascii = "domain_work";
  attributes.colorType = NVTX_COLOR_ARGB;
  attributes.color = 0xff76b900u;
  nvtxDomainRangePushEx(domain, &attributes);
  nvtxRangeId_t whole = nvtxRangeStartA("whole_run");
  nvtxMarkA("started");

  rangePush("setup");
  cudaStream_t main_stream;
  CK(cudaStreamCreateWithFlags(&main_stream, cudaStreamNonBlocking));
  nvtxNameCudaStreamA(main_stream, "main");
  std::vector<cudaStream_t> streams(o.streams);
  int least = 0, greatest = 0;
  CK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  for (int s = 0; s < o.streams; ++s) {
    CK(cudaStreamCreateWithPriority(&streams[s], cudaStreamNonBlocking, s == 0 ? greatest : least));
    nvtxNameCudaStreamA(streams[s], ("worker_" + std::to_string(s)).c_str());
  }
  rangePop();

  if (!o.gemm_only) {
    runCopiesAndStreams(o, main_stream, streams);
    runLongKernels(o, main_stream);
  }
  runGemmLoop(o, main_stream);

  CK(cudaDeviceSynchronize());
  for (auto s : streams) CK(cudaStreamDestroy(s));
  CK(cudaStreamDestroy(main_stream));
  nvtxRangeEnd(whole);
  nvtxDomainRangePop(domain);

  std::string names;
  for (const auto& name : g_nvtx_ranges) names += (names.empty() ? "" : ",") + name;
  std::printf("nvtx_ranges=%s\n", names.c_str());
  std::printf("nvtx_start_end_range=whole_run\n");
  std::printf("nvtx_domain=gpuxray_example range=domain_work\n");
  for (const auto& [key, count] : g_copies) {
    std::printf("copy_issued kind=%s src=%s dst=%s count=%d bytes=%llu\n", key.kind.c_str(), key.src.c_str(),
                key.dst.c_str(), count.count, static_cast<unsigned long long>(count.bytes));
  }
  std::printf("memsets_issued=%d\n", g_memsets);
  std::printf("device_allocations=%d\n", g_device_allocations);
  std::printf("device_frees=%d\n", g_device_frees);
  std::printf("pinned_allocations=%d\n", g_pinned_allocations);
  std::printf("streams_created=%d\n", o.streams + 1);
  std::printf("kernel_prefix=xray_\n");
  std::printf("kernels_launched=%llu\n", static_cast<unsigned long long>(g_kernels_launched));
  std::printf("total_seconds=%.6f\n", secondsSince(program_start));
  return 0;
}
