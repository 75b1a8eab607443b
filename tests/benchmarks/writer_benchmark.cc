// Throughput and size of gpuxray::format::TraceWriter on a realistic kernel stream, next to the
// Chrome-trace JSON that Kineto (the PyTorch profiler) writes for the same kernels.
//
//   writer_benchmark [--records N] [--json-records N] [--reps N] [--levels 0,1,3,5] [--dir DIR]
//
// Exits non-zero only if a file cannot be written or read back, or the read-back records differ
// from the written ones. The targets (>= 5 M records/s on one core, <= 16 B per record) are reported,
// not enforced: the numbers depend on the machine.
#include <cxxabi.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "gpuxray/version.h"
#include "proto/trace_reader.h"
#include "proto/trace_writer.h"

#ifndef GPUXRAY_BUILD_TYPE
#define GPUXRAY_BUILD_TYPE "unknown"
#endif

namespace {

using namespace gpuxray::format;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kSeed = 20240611;
constexpr uint64_t kCaptureStartNs = 1'718'000'000'000'000'000ull;  // CUPTI timestamps: ns since the epoch
constexpr uint64_t kKinetoBaseNs = kCaptureStartNs - 42'000'000'000ull;  // Kineto's "baseTimeNanoseconds"
constexpr uint32_t kSmCount = 132;  // H100 SXM
constexpr double kTargetRecordsPerSecond = 5e6;
constexpr double kTargetBytesPerRecord = 16;

struct Options {
  size_t records = 5'000'000;
  size_t json_records = 500'000;
  int reps = 3;
  std::vector<int> levels = {0, 1, 3, 5};
  std::string dir;
};

[[noreturn]] void fail(const std::string& message) {
  fmt::print(stderr, "writer_benchmark: {}\n", message);
  std::exit(1);
}

// SplitMix64: deterministic on every platform, unlike the std distributions.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  uint32_t below(uint32_t n) { return static_cast<uint32_t>(next() % n); }
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  bool chance(double p) { return unit() < p; }
  double logUniform(double lo, double hi) { return lo * std::exp(unit() * std::log(hi / lo)); }
  uint32_t pick(std::initializer_list<uint32_t> values) { return values.begin()[below(static_cast<uint32_t>(values.size()))]; }

 private:
  uint64_t state_;
};

// Wall time, and this thread's CPU time (user + system), which other processes on the machine do not
// inflate by preempting us.
struct Timing {
  double wall_seconds = 0;
  double cpu_seconds = 0;
};

class Stopwatch {
 public:
  Stopwatch() : wall_start_(Clock::now()), cpu_start_(threadCpuSeconds()) {}
  Timing elapsed() const {
    return {std::chrono::duration<double>(Clock::now() - wall_start_).count(), threadCpuSeconds() - cpu_start_};
  }

 private:
  static double threadCpuSeconds() {
    timespec ts{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
  }
  Clock::time_point wall_start_;
  double cpu_start_;
};

// ---------------------------------------------------------------------------------------------------
// The kernels: names as CUPTI reports them (mangled unless extern "C"), from a bf16 transformer
// training job on H100 with cuBLAS, cutlass, FlashAttention, PyTorch native kernels and NCCL.

enum class Family { kGemm, kGemmHopper, kAttention, kElementwise, kReduce, kNorm, kSoftmax, kLoss, kEmbedding, kOptimizer, kNccl, kTiny };

struct KernelSpec {
  const char* key;
  Family family;
  const char* cupti_name;
};

// clang-format off
constexpr KernelSpec kKernels[] = {
  {"gemm_tn_128x256", Family::kGemm, "ampere_bf16_s16816gemm_bf16_128x256_ldg8_f2f_stages_64x3_tn"},
  {"gemm_nn_256x128", Family::kGemm, "ampere_bf16_s16816gemm_bf16_256x128_ldg8_f2f_stages_64x3_nn"},
  {"gemm_nt_128x128", Family::kGemm, "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_nt"},
  {"gemm_tn_64x64", Family::kGemm, "ampere_bf16_s16816gemm_bf16_64x64_sliced1x2_ldg8_f2f_stages_64x5_tn"},
  {"sgemm_tn", Family::kGemm, "ampere_sgemm_128x64_tn"},
  {"sgemm_nn", Family::kGemm, "ampere_sgemm_32x128_nn"},
  {"xmma80_tn", Family::kGemm, "sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize160x128x32_stage4_warpsize2x2x1_tensor16x8x16_kernel"},
  {"xmma80_nt", Family::kGemm, "sm80_xmma_gemm_bf16bf16_bf16f32_f32_nt_n_tilesize128x128x32_stage5_warpsize2x2x1_tensor16x8x16_kernel"},
  {"xmma90_nt", Family::kGemmHopper, "sm90_xmma_gemm_bf16bf16_bf16f32_f32_nt_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"},
  {"xmma90_tn", Family::kGemmHopper, "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas"},
  {"xmma90_nn", Family::kGemmHopper, "sm90_xmma_gemm_bf16bf16_bf16f32_f32_nn_n_tilesize64x128x64_warpgroupsize1x1x1_execute_segment_k_on_kernel__5x_cublas"},
  {"triton_add", Family::kElementwise, "triton_poi_fused_add_0"},
  {"triton_layer_norm", Family::kNorm, "triton_red_fused_native_layer_norm_1"},
  {"triton_mul_sum", Family::kReduce, "triton_per_fused__to_copy_mul_sum_2"},
  {"cutlass_wmma", Family::kGemm, "_ZN7cutlass7Kernel2I68cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8EEvNT_6ParamsE"},
  {"cutlass_relu", Family::kGemm, "_ZN7cutlass7Kernel2I66cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_nn_align8EEvNT_6ParamsE"},
  {"cutlass_s1688", Family::kGemm, "_ZN7cutlass7Kernel2I57cutlass_80_tensorop_s1688gemm_bf16_256x128_32x3_tn_align8EEvNT_6ParamsE"},
  {"allreduce_ll", Family::kNccl, "_Z40ncclDevKernel_AllReduce_Sum_bf16_RING_LL24ncclDevKernelArgsStorageILm4096EE"},
  {"allreduce_ll128", Family::kNccl, "_Z43ncclDevKernel_AllReduce_Sum_bf16_RING_LL12824ncclDevKernelArgsStorageILm4096EE"},
  {"allreduce_tree", Family::kNccl, "_Z39ncclDevKernel_AllReduce_Sum_f32_TREE_LL24ncclDevKernelArgsStorageILm4096EE"},
  {"reduce_scatter", Family::kNccl, "_Z44ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL24ncclDevKernelArgsStorageILm4096EE"},
  {"all_gather", Family::kNccl, "_Z31ncclDevKernel_AllGather_RING_LL24ncclDevKernelArgsStorageILm4096EE"},
  {"broadcast", Family::kNccl, "_Z31ncclDevKernel_Broadcast_RING_LL24ncclDevKernelArgsStorageILm4096EE"},
  {"send_recv", Family::kNccl, "_Z22ncclDevKernel_SendRecv24ncclDevKernelArgsStorageILm4096EE"},
  {"fill_f32", Family::kElementwise, "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEENS_6detail5ArrayIPcLi1EEEEEviT0_T1_"},
  {"fill_bf16", Family::kElementwise, "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIN3c108BFloat16EEENS_6detail5ArrayIPcLi1EEEEEviT0_T1_"},
  {"fill_i32", Family::kElementwise, "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIiEENS_6detail5ArrayIPcLi1EEEEEviT0_T1_"},
  {"add_f32", Family::kElementwise, "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_15CUDAFunctor_addIfEENS_6detail5ArrayIPcLi3EEEEEviT0_T1_"},
  {"add_bf16", Family::kElementwise, "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_15CUDAFunctor_addIN3c108BFloat16EEENS_6detail5ArrayIPcLi3EEEEEviT0_T1_"},
  {"mul_f32", Family::kElementwise, "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_13BinaryFunctorIfffNS0_15binary_internal10MulFunctorIfEEEENS_6detail5ArrayIPcLi3EEEEEviT0_T1_"},
  {"mul_bf16", Family::kElementwise, "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_13BinaryFunctorIN3c108BFloat16EN3c108BFloat16EN3c108BFloat16ENS0_15binary_internal10MulFunctorIfEEEENS_6detail5ArrayIPcLi3EEEEEviT0_T1_"},
  {"mul_scalar_f32", Family::kElementwise, "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_13AUnaryFunctorIfffNS0_15binary_internal10MulFunctorIfEEEENS_6detail5ArrayIPcLi2EEEEEviT0_T1_"},
  {"div_scalar_bf16", Family::kElementwise, "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_13AUnaryFunctorIN3c108BFloat16EN3c108BFloat16EN3c108BFloat16ENS0_15binary_internal10DivFunctorIfEEEENS_6detail5ArrayIPcLi2EEEEEviT0_T1_"},
  {"div_scalar_f32", Family::kElementwise, "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_13BUnaryFunctorIfffNS0_15binary_internal10DivFunctorIfEEEENS_6detail5ArrayIPcLi2EEEEEviT0_T1_"},
  {"mul_self_f32", Family::kElementwise, "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_21CUDAFunctorOnSelf_mulIfEENS_6detail5ArrayIPcLi2EEEEEviT0_T1_"},
  {"add_other_bf16", Family::kElementwise, "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_22CUDAFunctorOnOther_addIN3c108BFloat16EEENS_6detail5ArrayIPcLi3EEEEEviT0_T1_"},
  {"compare_f32", Family::kElementwise, "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_15compare_functorIfEENS_6detail5ArrayIPcLi3EEEEEviT0_T1_"},
  {"sqrt_f32", Family::kElementwise, "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11SqrtFunctorIfEENS_6detail5ArrayIPcLi2EEEEEviT0_T1_"},
  {"gelu", Family::kElementwise, "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_15GeluCUDAFunctorIN3c108BFloat16EEENS_6detail5ArrayIPcLi2EEEEEviT0_T1_"},
  {"gelu_bwd", Family::kElementwise, "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_19GeluBackwardFunctorIN3c108BFloat16EEENS_6detail5ArrayIPcLi3EEEEEviT0_T1_"},
  {"silu", Family::kElementwise, "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11SiluFunctorIN3c108BFloat16EEENS_6detail5ArrayIPcLi2EEEEEviT0_T1_"},
  {"silu_bwd", Family::kElementwise, "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_19SiluBackwardFunctorIN3c108BFloat16EEENS_6detail5ArrayIPcLi3EEEEEviT0_T1_"},
  {"abs_f32", Family::kElementwise, "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_10AbsFunctorIfEENS_6detail5ArrayIPcLi2EEEEEviT0_T1_"},
  {"copy_f32_bf16", Family::kElementwise, "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_12copy_functorIfN3c108BFloat16EEENS_6detail5ArrayIPcLi2EEEEEviT0_T1_"},
  {"copy_bf16_f32", Family::kElementwise, "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_12copy_functorIN3c108BFloat16EfEENS_6detail5ArrayIPcLi2EEEEEviT0_T1_"},
  {"copy_unrolled", Family::kElementwise, "_ZN2at6native27unrolled_elementwise_kernelINS0_12copy_functorIfN3c108BFloat16EEENS_6detail5ArrayIPcLi2EEE23TrivialOffsetCalculatorILi1EjES9_NS0_6memory12LoadWithCastILi1EEENSA_13StoreWithCastILi1EEEEEviT_T0_T1_T2_T3_T4_"},
  {"copy_strided", Family::kElementwise, "_ZN2at6native18elementwise_kernelILi128ELi2ENS0_12copy_functorIN3c108BFloat16EfEEEEviT1_"},
  {"sum_f32", Family::kReduce, "_ZN2at6native13reduce_kernelILi512ELi1ENS0_8ReduceOpIfNS0_11sum_functorIfffEEjfLi4EEEEEvT1_"},
  {"sum_bf16", Family::kReduce, "_ZN2at6native13reduce_kernelILi512ELi1ENS0_8ReduceOpIfNS0_11sum_functorIN3c108BFloat16EffEEjfLi4EEEEEvT1_"},
  {"max_f32", Family::kReduce, "_ZN2at6native13reduce_kernelILi512ELi1ENS0_8ReduceOpIfNS0_6MaxOpsIfEEjfLi4EEEEEvT1_"},
  {"norm2_f32", Family::kReduce, "_ZN2at6native13reduce_kernelILi512ELi1ENS0_8ReduceOpIfNS0_10NormTwoOpsIffEEjfLi4EEEEEvT1_"},
  {"mean_f32", Family::kReduce, "_ZN2at6native13reduce_kernelILi512ELi1ENS0_8ReduceOpIfNS0_7MeanOpsIffEEjfLi4EEEEEvT1_"},
  {"argmax_f32", Family::kReduce, "_ZN2at6native13reduce_kernelILi512ELi1ENS0_8ReduceOpIfNS0_9ArgMaxOpsIfEEjfLi4EEEEEvT1_"},
  {"layer_norm", Family::kNorm, "_ZN2at6native12_GLOBAL__N_128vectorized_layer_norm_kernelIN3c108BFloat16EfEEviT0_PKT_S8_S8_PS5_S9_PS6_"},
  {"layer_norm_bwd_input", Family::kNorm, "_ZN2at6native12_GLOBAL__N_128layer_norm_grad_input_kernelIN3c108BFloat16EfEEvPKT_S7_PKT0_SA_S7_PS5_i"},
  {"layer_norm_bwd_gamma", Family::kNorm, "_ZN2at6native12_GLOBAL__N_133GammaBetaBackwardCUDAKernel_32x32IN3c108BFloat16EfEEvllPKT_S7_PKT0_SA_PS5_S9_"},
  {"rowwise_moments", Family::kNorm, "_ZN2at6native12_GLOBAL__N_124RowwiseMomentsCUDAKernelIN3c108BFloat16EfEEvlT0_PKT_PS4_S8_"},
  {"softmax", Family::kSoftmax, "_ZN2at6native43_GLOBAL__N__2b6e8dbf_13_SoftMax_cu_9f978f6323cunn_SoftMaxForwardSmemILi8EN3c108BFloat16EffNS1_22SoftMaxForwardEpilogueEEEvPT2_PKT0_l"},
  {"softmax_bwd", Family::kSoftmax, "_ZN2at6native43_GLOBAL__N__2b6e8dbf_13_SoftMax_cu_9f978f6320cunn_SoftMaxBackwardILi8EN3c108BFloat16EffNS1_23SoftMaxBackwardEpilogueEEEvPT0_PKT2_S9_l"},
  {"nll_loss", Family::kLoss, "_ZN2at6native12_GLOBAL__N_138nll_loss_forward_reduce_cuda_kernel_2dIflEEvPT_S4_PKS3_PKT0_S4_bllll"},
  {"nll_loss_bwd", Family::kLoss, "_ZN2at6native12_GLOBAL__N_139nll_loss_backward_reduce_cuda_kernel_2dIflEEvPT_PKS3_PKT0_S6_S6_blll"},
  {"embedding", Family::kEmbedding, "_ZN2at6native12_GLOBAL__N_121indexSelectLargeIndexIN3c108BFloat16ElmLi2ELi2ELin2ELb1EEEvNS_4cuda6detail10TensorInfoIT_T0_EENS7_IKS8_S9_EENS7_IKT1_S9_EEiiS9_S9_l"},
  {"embedding_bwd", Family::kEmbedding, "_ZN2at6native12_GLOBAL__N_133embedding_backward_feature_kernelIN3c108BFloat16EflEEvPKT1_PKT_PT0_iil"},
  {"dropout", Family::kElementwise, "_ZN2at6native12_GLOBAL__N_124fused_dropout_kernel_vecIN3c108BFloat16EfjLi1ELi4EhEEvNS_4cuda6detail10TensorInfoIKT_T1_EENS6_IS7_S9_EENS6_IT4_S9_EES9_T0_NS_15PhiloxCudaStateE"},
  {"masked_scale", Family::kElementwise, "_ZN2at6native12_GLOBAL__N_119masked_scale_kernelIhN3c108BFloat16EEEvPT0_PKS4_PKT_f"},
  {"flash_fwd", Family::kAttention, "_ZN13pytorch_flash16flash_fwd_kernelINS_23Flash_fwd_kernel_traitsILi128ELi128ELi64ELi4ELb0ELb0EN7cutlass10bfloat16_tENS_19Flash_kernel_traitsILi128ELi128ELi64ELi4ES3_EEEELb0ELb1ELb0ELb0ELb0ELb1ELb0ELb0EEEvNS_16Flash_fwd_paramsE"},
  {"flash_bwd", Family::kAttention, "_ZN13pytorch_flash44flash_bwd_dq_dk_dv_loop_seqk_parallel_kernelINS_23Flash_bwd_kernel_traitsILi128ELi64ELi128ELi8ELi2ELi4ELi2ELb0ELb0EN7cutlass10bfloat16_tENS_19Flash_kernel_traitsILi128ELi64ELi128ELi8ES3_EEEELb1ELb0ELb0ELb0ELb1ELb1ELb0EEEvNS_16Flash_bwd_paramsE"},
  {"flash_bwd_dot_do_o", Family::kElementwise, "_ZN13pytorch_flash39flash_bwd_dot_do_o_kernel_seqk_parallelILb1ENS_23Flash_bwd_kernel_traitsILi128ELi64ELi128ELi8ELi2ELi4ELi2ELb0ELb0EN7cutlass10bfloat16_tENS_19Flash_kernel_traitsILi128ELi64ELi128ELi8ES3_EEEEEEvNS_16Flash_bwd_paramsE"},
  {"flash_bwd_convert_dq", Family::kElementwise, "_ZN13pytorch_flash41flash_bwd_convert_dq_kernel_seqk_parallelINS_23Flash_bwd_kernel_traitsILi128ELi64ELi128ELi8ELi2ELi4ELi2ELb0ELb0EN7cutlass10bfloat16_tENS_19Flash_kernel_traitsILi128ELi64ELi128ELi8ES3_EEEEEEvNS_16Flash_bwd_paramsEi"},
  {"fused_adam", Family::kOptimizer, "_ZN2at6native12_GLOBAL__N_125multi_tensor_apply_kernelINS1_18TensorListMetadataILi4EEENS1_20FusedAdamMathFunctorIfLi4ELNS1_9ADAM_MODEE0ELb0EEEJPfddddddbPKfS9_EEEvT_T0_DpT1_"},
  {"foreach_mul_scalar", Family::kOptimizer, "_ZN2at6native12_GLOBAL__N_125multi_tensor_apply_kernelINS1_18TensorListMetadataILi1EEENS1_21BinaryOpScalarFunctorIfLi1ELi1ELi0EEEJSt10multipliesIfEfEEEvT_T0_DpT1_"},
  {"foreach_sqrt", Family::kOptimizer, "_ZN2at6native12_GLOBAL__N_125multi_tensor_apply_kernelINS1_18TensorListMetadataILi1EEENS1_14UnaryOpFunctorIfLi1ELi1ELi0EEEJNS0_4SqrtIfEEEEEvT_T0_DpT1_"},
  {"foreach_addcmul", Family::kOptimizer, "_ZN2at6native12_GLOBAL__N_125multi_tensor_apply_kernelINS1_18TensorListMetadataILi2EEENS1_24PointwiseOpScalarFunctorIfLi2ELi2ELi0EEEJSt10multipliesIfEfEEEvT_T0_DpT1_"},
  {"foreach_norm", Family::kOptimizer, "_ZN2at6native12_GLOBAL__N_125multi_tensor_apply_kernelINS1_18TensorListMetadataILi1EEENS1_13LpNormFunctorIfLNS1_8NormTypeE1EfEEJPfiEEEvT_T0_DpT1_"},
  {"foreach_norm_cleanup", Family::kTiny, "_ZN2at6native12_GLOBAL__N_121lpnorm_cleanup_kernelIfLNS1_8NormTypeE1EffEEvPKT2_NS_6detail5ArrayIPT1_Li30EEEPT0_i"},
  {"foreach_add_alpha", Family::kOptimizer, "_ZN2at6native12_GLOBAL__N_125multi_tensor_apply_kernelINS1_18TensorListMetadataILi2EEENS1_24BinaryOpListAlphaFunctorIfLi2ELi2ELi0EEEJSt4plusIfEfEEEvT_T0_DpT1_"},
  {"amp_update_scale", Family::kTiny, "_ZN2at6native28amp_update_scale_cuda_kernelEPfPiPKfddi"},
};
// clang-format on

// CUDA stream ids as CUPTI reports them; Kineto uses them as the trace's "tid".
enum StreamId : uint32_t { kComputeStream = 7, kCopyStream = 19, kNcclStream = 23, kNcclP2pStream = 27 };
constexpr std::array<uint32_t, 4> kStreams = {kComputeStream, kCopyStream, kNcclStream, kNcclP2pStream};

size_t streamSlot(uint32_t stream) {
  return static_cast<size_t>(std::find(kStreams.begin(), kStreams.end(), stream) - kStreams.begin());
}

struct LaunchConfig {
  uint32_t kernel = 0;
  KernelRecord shape;  // everything but times, stream and correlation id
  double typical_duration_ns = 0;
};

struct Catalogue {
  std::vector<std::string> cupti_names;  // one per kernel; CUPTI hands out stable const char*
  std::vector<std::string> demangled_names;
  std::vector<LaunchConfig> configs;
  std::vector<std::vector<uint32_t>> configs_of_kernel;
};

struct Dim3 {
  uint32_t x, y, z;
};

uint32_t sharedMemoryCarveout(uint32_t bytes) {
  for (uint32_t kib : {0u, 8u, 16u, 32u, 64u, 100u, 132u, 164u, 196u, 228u}) {
    if (bytes <= kib * 1024) return kib * 1024;
  }
  return 228 * 1024;
}

KernelRecord launchShape(Family family, Rng& rng) {
  Dim3 grid{1, 1, 1}, block{128, 1, 1};
  uint32_t registers = 32, static_smem = 0, dynamic_smem = 0;
  Dim3 cluster{0, 0, 0};
  switch (family) {
    case Family::kGemm:
      grid = {rng.pick({8, 16, 24, 32, 48, 64, 96, 128}), rng.pick({1, 2, 4, 8, 16, 32}), 1};
      block = {rng.pick({128, 256}), 1, 1};
      registers = 8 * (16 + rng.below(14));
      dynamic_smem = 1024 * (48 + rng.below(100));
      break;
    case Family::kGemmHopper:
      grid = {rng.pick({66, 132}), rng.pick({1, 2}), 1};
      block = {384, 1, 1};
      registers = 168;
      dynamic_smem = 1024 * (160 + rng.below(67));
      cluster = {2, 1, 1};
      break;
    case Family::kAttention:
      grid = {rng.pick({4, 8, 16, 32}), rng.pick({16, 32}), rng.pick({1, 2, 4, 8})};
      block = {rng.pick({128, 256}), 1, 1};
      registers = 255;
      dynamic_smem = 49152 * rng.pick({1, 2, 3});
      break;
    case Family::kElementwise:
      grid = {1u << (3 + rng.below(13)), 1, 1};
      block = {rng.pick({128, 256, 512}), 1, 1};
      registers = 16 + 2 * rng.below(10);
      break;
    case Family::kReduce:
      grid = {1 + rng.below(512), rng.pick({1, 2, 4, 16, 32}), 1};
      block = {32, 16, 1};
      registers = 32 + rng.below(9);
      static_smem = 16 * (1 + rng.below(256));
      break;
    case Family::kNorm:
      grid = {2048 * (1 + rng.below(8)), 1, 1};
      block = {32, rng.pick({4, 8}), 1};
      registers = 30 + rng.below(19);
      static_smem = rng.pick({0, 2048});
      break;
    case Family::kSoftmax:
      grid = {4096 * (1 + rng.below(4)), 1, 1};
      block = {rng.pick({256, 512, 1024}), 1, 1};
      registers = 32 + rng.below(9);
      dynamic_smem = 16 * 1024;
      break;
    case Family::kLoss:
      grid = {1, 1, 1};
      block = {32, 32, 1};
      registers = 24 + rng.below(9);
      static_smem = 2048;
      break;
    case Family::kEmbedding:
      grid = {1024 * (1 + rng.below(8)), 1, 1};
      block = {32, 32, 1};
      registers = 38;
      static_smem = 8192;
      break;
    case Family::kOptimizer:
      grid = {320, 1, 1};
      block = {512, 1, 1};
      registers = 32 + 8 * rng.below(4);
      break;
    case Family::kNccl:
      grid = {rng.pick({8, 16, 24, 32}), 1, 1};
      block = {rng.pick({512, 640}), 1, 1};
      registers = 96;
      dynamic_smem = 1024 * rng.pick({4, 8, 16});
      break;
    case Family::kTiny:
      grid = {1, 1, 1};
      block = {rng.pick({1, 32, 128}), 1, 1};
      registers = 16 + rng.below(9);
      break;
  }
  KernelRecord k;
  k.device = 0;
  k.context = 1;
  k.grid_x = grid.x;
  k.grid_y = grid.y;
  k.grid_z = grid.z;
  k.block_x = block.x;
  k.block_y = block.y;
  k.block_z = block.z;
  k.registers_per_thread = registers;
  k.static_shared_memory = static_smem;
  k.dynamic_shared_memory = dynamic_smem;
  k.cluster_x = cluster.x;
  k.cluster_y = cluster.y;
  k.cluster_z = cluster.z;
  k.shared_memory_optin = static_smem + dynamic_smem > 48 * 1024;
  k.shared_memory_executed = sharedMemoryCarveout(static_smem + dynamic_smem);
  return k;
}

double typicalDurationNs(Family family, Rng& rng) {
  auto us = [&](double lo, double hi) { return 1e3 * rng.logUniform(lo, hi); };
  switch (family) {
    case Family::kGemm: return us(15, 2000);
    case Family::kGemmHopper: return us(40, 3000);
    case Family::kAttention: return us(80, 3000);
    case Family::kElementwise: return us(2, 60);
    case Family::kReduce: return us(4, 90);
    case Family::kNorm: return us(6, 120);
    case Family::kSoftmax: return us(10, 200);
    case Family::kLoss: return us(3, 30);
    case Family::kEmbedding: return us(10, 200);
    case Family::kOptimizer: return us(8, 600);
    case Family::kNccl: return us(40, 5000);
    case Family::kTiny: return us(2, 8);
  }
  return 1e4;
}

// What Kineto does for every kernel event (libkineto/src/Demangle.cpp).
std::string demangle(const char* name) {
  if (std::strlen(name) > 1024) return name;
  int status = 0;
  size_t length = 0;
  char* demangled = abi::__cxa_demangle(name, nullptr, &length, &status);
  if (status != 0) return name;
  std::string result(demangled);
  std::free(demangled);
  return result;
}

Catalogue buildCatalogue(Rng& rng) {
  Catalogue catalogue;
  for (uint32_t kernel = 0; kernel < std::size(kKernels); ++kernel) {
    const KernelSpec& spec = kKernels[kernel];
    catalogue.cupti_names.emplace_back(spec.cupti_name);
    catalogue.demangled_names.push_back(demangle(spec.cupti_name));
    uint32_t variants = spec.family == Family::kTiny ? 1 : 1 + rng.below(3);
    auto& ids = catalogue.configs_of_kernel.emplace_back();
    for (uint32_t v = 0; v < variants; ++v) {
      ids.push_back(static_cast<uint32_t>(catalogue.configs.size()));
      catalogue.configs.push_back({kernel, launchShape(spec.family, rng), typicalDurationNs(spec.family, rng)});
    }
  }
  return catalogue;
}

// ---------------------------------------------------------------------------------------------------
// One training step of an 8-layer transformer (forward, backward with bucketed gradient all-reduce
// overlapping it, clip + AdamW), as the sequence of kernel launches the host issues.

struct StepOp {
  uint32_t config = 0;
  uint32_t stream = kComputeStream;
  bool waits_for_communication = false;
};

class StepBuilder {
 public:
  explicit StepBuilder(const Catalogue& catalogue) : catalogue_(catalogue), uses_(std::size(kKernels), 0) {}

  StepBuilder& on(uint32_t stream) {
    stream_ = stream;
    return *this;
  }
  StepBuilder& run(std::initializer_list<std::string_view> keys) {
    for (std::string_view key : keys) launch(kernelIndex(key));
    return *this;
  }
  StepBuilder& waitForCommunication() {
    wait_next_ = true;
    return *this;
  }
  // Metrics and bookkeeping at the end of the step use every kernel not launched so far.
  void runUnused() {
    for (uint32_t kernel = 0; kernel < uses_.size(); ++kernel) {
      if (uses_[kernel] != 0) continue;
      stream_ = kKernels[kernel].family == Family::kNccl ? kNcclP2pStream : kComputeStream;
      launch(kernel);
    }
  }
  std::vector<StepOp> take() { return std::move(ops_); }

 private:
  static uint32_t kernelIndex(std::string_view key) {
    for (uint32_t i = 0; i < std::size(kKernels); ++i) {
      if (key == kKernels[i].key) return i;
    }
    throw std::logic_error("unknown kernel key " + std::string(key));
  }
  void launch(uint32_t kernel) {
    const auto& variants = catalogue_.configs_of_kernel[kernel];
    ops_.push_back({variants[uses_[kernel]++ % variants.size()], stream_, wait_next_});
    wait_next_ = false;
  }

  const Catalogue& catalogue_;
  std::vector<uint32_t> uses_;
  std::vector<StepOp> ops_;
  uint32_t stream_ = kComputeStream;
  bool wait_next_ = false;
};

std::vector<StepOp> buildTrainingStep(const Catalogue& catalogue) {
  constexpr int kLayers = 8;
  StepBuilder step(catalogue);
  step.on(kCopyStream).run({"fill_i32", "copy_strided"});
  step.on(kComputeStream).run({"embedding", "copy_f32_bf16", "dropout"});
  for (int layer = 0; layer < kLayers; ++layer) {
    step.run({"layer_norm", "xmma90_tn", "flash_fwd", "xmma90_nt", "dropout", "add_bf16"});
    step.run({"layer_norm", "gemm_tn_128x256", "gelu", "gemm_nn_256x128", "masked_scale", "add_other_bf16"});
  }
  step.run({"triton_layer_norm", "sgemm_tn", "softmax", "nll_loss", "fill_f32"});
  step.run({"nll_loss_bwd", "softmax_bwd", "sgemm_nn", "gemm_tn_64x64", "sum_f32", "layer_norm_bwd_input",
            "layer_norm_bwd_gamma"});
  for (int layer = kLayers - 1; layer >= 0; --layer) {
    step.run({"masked_scale", "gemm_nt_128x128", "xmma80_nt", "sum_bf16", "gelu_bwd", "xmma80_tn",
              "cutlass_s1688", "layer_norm_bwd_input", "layer_norm_bwd_gamma", "add_bf16"});
    step.run({"masked_scale", "xmma90_nn", "xmma90_nt", "flash_bwd_dot_do_o", "flash_bwd", "flash_bwd_convert_dq",
              "xmma90_nn", "xmma90_nt", "mul_bf16", "layer_norm_bwd_input", "layer_norm_bwd_gamma", "add_bf16"});
    if (layer % 2 == 0) step.on(kNcclStream).run({"allreduce_ll128"}).on(kComputeStream);
  }
  step.run({"embedding_bwd", "copy_bf16_f32"});
  step.on(kNcclStream).run({"allreduce_ll"}).on(kComputeStream);
  step.waitForCommunication().run({"foreach_norm", "foreach_norm_cleanup", "norm2_f32"});
  step.on(kNcclStream).run({"allreduce_tree"}).on(kComputeStream);
  step.waitForCommunication().run({"div_scalar_f32", "foreach_mul_scalar", "fused_adam", "fused_adam", "fused_adam",
                                   "fused_adam", "amp_update_scale"});
  step.runUnused();
  return step.take();
}

// ---------------------------------------------------------------------------------------------------
// The kernel stream, as CUPTI delivers it: completion order, each stream its own timeline.

struct Launch {
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  uint32_t correlation_id = 0;
  uint32_t stream = 0;
  uint32_t config = 0;
};

uint64_t launchGapNs(uint32_t stream, Rng& rng) {
  if (stream != kComputeStream) return static_cast<uint64_t>(rng.logUniform(3e3, 40e3));
  if (rng.chance(0.85)) return static_cast<uint64_t>(rng.logUniform(2e3, 25e3));
  return static_cast<uint64_t>(rng.logUniform(25e3, 300e3));
}

std::vector<Launch> simulateKernelStream(const Catalogue& catalogue, const std::vector<StepOp>& step, size_t count,
                                         Rng& rng, size_t* steps) {
  std::vector<Launch> launches;
  launches.reserve(count);
  std::array<uint64_t, kStreams.size()> stream_free;
  stream_free.fill(kCaptureStartNs);
  uint64_t& compute_free = stream_free[streamSlot(kComputeStream)];
  uint32_t correlation = 1000;
  *steps = 0;
  while (launches.size() < count) {
    for (const StepOp& op : step) {
      if (launches.size() == count) break;
      if (op.waits_for_communication) compute_free = *std::max_element(stream_free.begin(), stream_free.end());
      uint64_t& free = stream_free[streamSlot(op.stream)];
      uint64_t ready = std::max(free, compute_free);
      uint64_t start = ready + launchGapNs(op.stream, rng);
      auto duration = static_cast<uint64_t>(catalogue.configs[op.config].typical_duration_ns * (0.9 + 0.2 * rng.unit()));
      free = start + duration;
      correlation += 1 + rng.below(3);
      launches.push_back({start, start + duration, correlation, op.stream, op.config});
    }
    compute_free += static_cast<uint64_t>(rng.logUniform(50e3, 2e6));  // data loading, logging
    ++*steps;
  }
  std::stable_sort(launches.begin(), launches.end(),
                   [](const Launch& a, const Launch& b) { return a.end_ns < b.end_ns; });
  return launches;
}

struct Workload {
  Catalogue catalogue;
  std::vector<StepOp> step;
  std::vector<Launch> launches;
  size_t steps = 0;
};

Workload buildWorkload(size_t count) {
  Rng rng(kSeed);
  Workload w;
  w.catalogue = buildCatalogue(rng);
  w.step = buildTrainingStep(w.catalogue);
  w.launches = simulateKernelStream(w.catalogue, w.step, count, rng, &w.steps);
  return w;
}

KernelRecord kernelRecord(const Workload& w, const Launch& launch, StringId name_id) {
  KernelRecord r = w.catalogue.configs[launch.config].shape;
  r.name_id = name_id;
  r.start_ns = launch.start_ns;
  r.end_ns = launch.end_ns;
  r.stream = launch.stream;
  r.correlation_id = launch.correlation_id;
  return r;
}

// ---------------------------------------------------------------------------------------------------
// gpuxray

FileHeader benchmarkHeader() {
  FileHeader h;
  h.tool_version = gpuxray::kToolVersion;
  h.run_id = "writer-benchmark";
  h.run_id_source = "generated";
  h.rank = 0;
  h.local_rank = 0;
  h.world_size = 8;
  h.local_world_size = 8;
  h.hostname = "benchmark-host";
  h.pid = 4242;
  h.command_line = {"python", "train.py", "--model", "gpt-1.3b"};
  h.start_time_ns = kCaptureStartNs;
  h.time_base = "cupti";
  DeviceProperties d;
  d.name = "NVIDIA H100 80GB HBM3";
  d.compute_major = 9;
  d.sm_count = kSmCount;
  d.max_threads_per_sm = 2048;
  d.max_warps_per_sm = 64;
  d.max_blocks_per_sm = 32;
  d.registers_per_sm = 65536;
  d.shared_memory_per_sm = 233472;
  d.memory_bytes = 85'520'809'984ull;
  h.devices = {d};
  h.capture_config.activities = {"kernel"};
  return h;
}

struct WriteResult {
  Timing timing;
  uint64_t bytes = 0;
  uint64_t chunks = 0;
};

// The timed part: what the injection library does per CUPTI kernel record.
WriteResult writeTrace(const Workload& w, std::unique_ptr<ByteSink> sink, int zstd_level, const FileHeader& header) {
  WriterOptions options;
  options.zstd_level = zstd_level;
  WriteResult result;
  Stopwatch stopwatch;
  {
    TraceWriter writer(std::move(sink), options);
    if (!writer.writeHeader(header)) fail("writeHeader: " + writer.error());
    for (const Launch& launch : w.launches) {
      const LaunchConfig& config = w.catalogue.configs[launch.config];
      const char* cupti_name = w.catalogue.cupti_names[config.kernel].c_str();
      writer.add(kernelRecord(w, launch, writer.intern(cupti_name)));
    }
    Trailer trailer;
    trailer.end = CaptureEnd::kRequested;
    trailer.end_time_ns = w.launches.empty() ? kCaptureStartNs : w.launches.back().end_ns;
    if (!writer.finish(std::move(trailer))) fail("finish: " + writer.error());
    if (writer.written(Category::kKernel) != w.launches.size()) fail("the writer counted a different number of kernels");
    result.bytes = writer.bytesWritten();
    result.chunks = writer.chunksWritten();
  }
  result.timing = stopwatch.elapsed();
  return result;
}

struct ReadResult {
  Timing timing;
  uint64_t kernels = 0;
};

ReadResult readTrace(const std::string& path) {
  ReadResult result;
  Stopwatch stopwatch;
  TraceReader reader(path);
  EventBatch batch;
  while (reader.next(batch)) result.kernels += batch.kernels.size();
  result.timing = stopwatch.elapsed();
  return result;
}

// Every record read back must equal the one written, in order; the trailer must count them all.
void verifyTrace(const std::string& path, const Workload& w) {
  TraceReader reader(path);
  EventBatch batch;
  size_t index = 0;
  while (reader.next(batch)) {
    for (const KernelRecord& r : batch.kernels) {
      if (index >= w.launches.size()) fail(fmt::format("{}: more kernel records than the {} written", path, w.launches.size()));
      const Launch& launch = w.launches[index];
      const std::string& name = w.catalogue.cupti_names[w.catalogue.configs[launch.config].kernel];
      if (!(r == kernelRecord(w, launch, r.name_id)) || reader.strings().get(r.name_id) != name)
        fail(fmt::format("{}: kernel record {} differs from the one written", path, index));
      ++index;
    }
  }
  if (index != w.launches.size()) fail(fmt::format("{}: read {} kernel records, wrote {}", path, index, w.launches.size()));
  if (!reader.warnings().empty()) fail(fmt::format("{}: reader warning: {}", path, reader.warnings().front()));
  const auto& trailer = reader.trailer();
  if (!trailer) fail(path + ": no trailer");
  uint64_t counted = 0;
  for (const auto& c : trailer->counts)
    if (c.category == Category::kKernel) counted = c.written;
  if (counted != w.launches.size()) fail(fmt::format("{}: trailer counts {} kernels, wrote {}", path, counted, w.launches.size()));
}

// ---------------------------------------------------------------------------------------------------
// The peer: Kineto's Chrome-trace JSON, built the way ChromeTraceLogger::handleActivity and
// GpuActivity<CUpti_ActivityKernel4>::metadataJson build it (libkineto/src/output_json.cpp,
// CuptiActivity.cpp), one event per kernel.

void sanitizeStrForJson(std::string& value) {
  std::replace(value.begin(), value.end(), '\\', '/');
  value.erase(std::remove(value.begin(), value.end(), '\n'), value.end());
}

void sanitizeForNonReadableChars(std::string& value) {
  for (char c : value) {
    if (!std::isprint(static_cast<unsigned char>(c))) {
      value = "unknown";
      break;
    }
  }
}

float blocksPerSm(const KernelRecord& k) {
  return static_cast<float>(k.grid_x * k.grid_y * k.grid_z) / static_cast<float>(kSmCount);
}

float warpsPerSm(const KernelRecord& k) {
  return blocksPerSm(k) * static_cast<float>(k.block_x * k.block_y * k.block_z) / 32.0f;
}

// A simplified cudaOccMaxActiveBlocksPerMultiprocessor for sm_90, capped by the grid as Kineto does.
float kernelOccupancy(const KernelRecord& k) {
  uint32_t threads = k.block_x * k.block_y * k.block_z;
  uint32_t warps = (threads + 31) / 32;
  uint32_t by_registers = 65536 / std::max(1u, k.registers_per_thread * warps * 32);
  uint32_t shared = k.static_shared_memory + k.dynamic_shared_memory;
  uint32_t by_shared = shared == 0 ? 32 : 233472 / shared;
  uint32_t by_warps = 64 / std::max(1u, warps);
  uint32_t blocks = std::min({32u, by_registers, by_shared, by_warps});
  float active = std::min(static_cast<float>(blocks), blocksPerSm(k));
  return active * static_cast<float>(warps) / 64.0f;
}

std::string kinetoKernelMetadata(const KernelRecord& k) {
  float blocks = blocksPerSm(k);
  float warps = warpsPerSm(k);
  return fmt::format(R"JSON(
      "queued": {}, "device": {}, "context": {},
      "stream": {}, "correlation": {},
      "registers per thread": {},
      "shared memory": {},
      "blocks per SM": {},
      "warps per SM": {},
      "grid": [{}, {}, {}],
      "block": [{}, {}, {}],
      "est. achieved occupancy %": {})JSON",
                     0, k.device, k.context, k.stream, k.correlation_id, k.registers_per_thread,
                     k.static_shared_memory + k.dynamic_shared_memory,
                     std::isinf(blocks) ? "\"inf\"" : std::to_string(blocks),
                     std::isinf(warps) ? "\"inf\"" : std::to_string(warps), k.grid_x, k.grid_y, k.grid_z,
                     k.block_x, k.block_y, k.block_z, static_cast<int>(0.5f + kernelOccupancy(k) * 100.0f));
}

void appendKinetoKernelEvent(fmt::memory_buffer& out, std::string op_name, const KernelRecord& k, uint64_t external_id) {
  std::string arg_values = fmt::format("\"External id\": {}", external_id);
  std::string metadata = kinetoKernelMetadata(k);
  sanitizeStrForJson(metadata);
  if (metadata.find_first_not_of(" \t\n") != std::string::npos) {
    arg_values.append(",");
    arg_values.append(metadata);
  }
  std::string args = fmt::format(R"JSON(,
    "args": {{
      {}
    }})JSON",
                                 arg_values);
  if (op_name == "kernel") op_name = "Kernel";
  sanitizeStrForJson(op_name);
  sanitizeForNonReadableChars(op_name);
  uint64_t ts = k.start_ns - kKinetoBaseNs;
  uint64_t duration = k.end_ns - k.start_ns;
  fmt::format_to(std::back_inserter(out), R"JSON(
  {{
    "ph": "X", "cat": "{}", "name": "{}", "pid": {}, "tid": {},
    "ts": {}.{:03}, "dur": {}.{:03}{}
  }},)JSON",
                 "kernel", op_name, k.device, k.stream, ts / 1000, ts % 1000, duration / 1000, duration % 1000, args);
}

// Where JSON goes: a buffer drained every MiB, to memory (counted and dropped) or to a file.
class JsonOutput {
 public:
  explicit JsonOutput(const std::string& path) {
    if (path.empty()) return;
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) fail(path + ": cannot create: " + std::strerror(errno));
  }
  ~JsonOutput() {
    if (fd_ >= 0) ::close(fd_);
  }
  JsonOutput(const JsonOutput&) = delete;
  JsonOutput& operator=(const JsonOutput&) = delete;

  fmt::memory_buffer& buffer() { return buffer_; }
  void drainIfFull() {
    if (buffer_.size() >= (1u << 20)) drain();
  }
  void drain() {
    for (size_t done = 0; fd_ >= 0 && done < buffer_.size();) {
      ssize_t n = ::write(fd_, buffer_.data() + done, buffer_.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) fail(std::string("JSON write failed: ") + std::strerror(errno));
      done += static_cast<size_t>(n);
    }
    bytes_ += buffer_.size();
    buffer_.clear();
  }
  uint64_t bytes() const { return bytes_; }

 private:
  fmt::memory_buffer buffer_;
  int fd_ = -1;
  uint64_t bytes_ = 0;
};

struct JsonResult {
  Timing timing;
  uint64_t event_bytes = 0;
};

JsonResult writeKinetoJson(const Workload& w, size_t count, const std::string& path, bool demangle_each_event) {
  JsonResult result;
  Stopwatch stopwatch;
  JsonOutput out(path);
  fmt::format_to(std::back_inserter(out.buffer()), "{{\n  \"schemaVersion\": 1,\n  \"traceEvents\": [");
  out.drain();
  const uint64_t header_bytes = out.bytes();
  for (size_t i = 0; i < count; ++i) {
    const Launch& launch = w.launches[i];
    uint32_t kernel = w.catalogue.configs[launch.config].kernel;
    std::string name = demangle_each_event ? demangle(w.catalogue.cupti_names[kernel].c_str())
                                           : w.catalogue.demangled_names[kernel];
    appendKinetoKernelEvent(out.buffer(), std::move(name), kernelRecord(w, launch, 0), launch.correlation_id / 2 + 7);
    out.drainIfFull();
  }
  out.drain();
  result.event_bytes = out.bytes() - header_bytes;
  fmt::format_to(std::back_inserter(out.buffer()), "\n  {{}}\n  ],\n  \"traceName\": \"{}\"\n}}\n", path);
  out.drain();
  result.timing = stopwatch.elapsed();
  return result;
}

// ---------------------------------------------------------------------------------------------------
// Measurement and report

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

template <typename Run>
auto medianRun(int reps, Run run) {
  std::vector<double> wall, cpu;
  decltype(run()) last{};
  for (int i = 0; i < reps; ++i) {
    last = run();
    wall.push_back(last.timing.wall_seconds);
    cpu.push_back(last.timing.cpu_seconds);
  }
  last.timing = {median(wall), median(cpu)};
  return last;
}

std::string cpuModel() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "unknown CPU";
}

int pinToOneCore() {
  int cpu = sched_getcpu();
  if (cpu < 0) return -1;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(static_cast<size_t>(cpu), &set);
  return sched_setaffinity(0, sizeof set, &set) == 0 ? cpu : -1;
}

std::string levelName(int level) { return level == 0 ? "none" : std::to_string(level); }

std::string thousands(uint64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i != 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

struct StreamStats {
  double average_name_bytes = 0;
  double average_demangled_bytes = 0;
  double negative_start_deltas = 0;
  double gpu_seconds = 0;
};

StreamStats describe(const Workload& w) {
  StreamStats s;
  const auto& c = w.catalogue;
  for (size_t i = 0; i < c.cupti_names.size(); ++i) {
    s.average_name_bytes += static_cast<double>(c.cupti_names[i].size());
    s.average_demangled_bytes += static_cast<double>(c.demangled_names[i].size());
  }
  s.average_name_bytes /= static_cast<double>(c.cupti_names.size());
  s.average_demangled_bytes /= static_cast<double>(c.cupti_names.size());
  size_t negative = 0;
  for (size_t i = 1; i < w.launches.size(); ++i) negative += w.launches[i].start_ns < w.launches[i - 1].start_ns;
  s.negative_start_deltas = 100.0 * static_cast<double>(negative) / static_cast<double>(std::max<size_t>(1, w.launches.size()));
  if (!w.launches.empty()) s.gpu_seconds = static_cast<double>(w.launches.back().end_ns - kCaptureStartNs) / 1e9;
  return s;
}

Options parseOptions(int argc, char** argv) {
  Options o;
  auto value = [&](int& i) -> std::string {
    if (i + 1 >= argc) fail(std::string("missing value after ") + argv[i]);
    return argv[++i];
  };
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--records") {
      o.records = std::stoull(value(i));
    } else if (arg == "--json-records") {
      o.json_records = std::stoull(value(i));
    } else if (arg == "--reps") {
      o.reps = std::max(1, std::stoi(value(i)));
    } else if (arg == "--levels") {
      o.levels.clear();
      std::string list = value(i);
      for (size_t at = 0; at < list.size();) {
        size_t comma = std::min(list.find(',', at), list.size());
        o.levels.push_back(std::stoi(list.substr(at, comma - at)));
        at = comma + 1;
      }
    } else if (arg == "--dir") {
      o.dir = value(i);
    } else {
      fail("usage: writer_benchmark [--records N] [--json-records N] [--reps N] [--levels 0,1,3,5] [--dir DIR]");
    }
  }
  if (o.records == 0) fail("--records must be positive");
  if (std::find(o.levels.begin(), o.levels.end(), 3) == o.levels.end()) o.levels.push_back(3);
  o.json_records = std::min(o.json_records, o.records);
  return o;
}

std::string makeTempDir(const std::string& parent) {
  std::string base = parent.empty() ? std::filesystem::temp_directory_path().string() : parent;
  std::string pattern = base + "/gpuxray_writer_benchmark.XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) fail(base + ": cannot create a temporary directory: " + std::strerror(errno));
  return pattern;
}

struct Row {
  std::string what, sink, codec;
  size_t records = 0;
  Timing timing;
  uint64_t bytes = 0;
  std::string note;

  double cpuRate() const { return static_cast<double>(records) / timing.cpu_seconds; }
  double wallRate() const { return static_cast<double>(records) / timing.wall_seconds; }
  double bytesPerRecord() const { return static_cast<double>(bytes) / static_cast<double>(records); }
};

void printTableHeader() {
  fmt::print("  {:<33} {:<6} {:>4} {:>12} {:>12} {:>11} {:>9} {:>9}\n", "", "sink", "zstd", "Mrec/s cpu",
             "Mrec/s wall", "ns/rec cpu", "B/record", "total MB");
}

void printRow(const Row& r) {
  fmt::print("  {:<33} {:<6} {:>4} {:>12.2f} {:>12.2f} {:>11.1f} {:>9.2f} {:>9.1f}  {}\n", r.what, r.sink, r.codec,
             r.cpuRate() / 1e6, r.wallRate() / 1e6, 1e9 / r.cpuRate(), r.bytesPerRecord(),
             static_cast<double>(r.bytes) / 1e6, r.note);
}

void printPreamble(const Options& options, const Workload& w, int cpu, const std::string& dir, double setup_seconds) {
  StreamStats stats = describe(w);
  utsname host{};
  ::uname(&host);
  std::array<double, 3> load{};
  ::getloadavg(load.data(), 3);
  fmt::print("gpuxray TraceWriter benchmark (kernel records)\n");
  fmt::print("  machine : {}, {} cores online, pinned to cpu {}, load average {:.1f} at start; {} {} {}\n", cpuModel(),
             sysconf(_SC_NPROCESSORS_ONLN), cpu, load[0], host.sysname, host.release, host.machine);
  fmt::print("  build   : {}, GCC {}.{}.{}, zstd {}, fmt {}.{}.{}, gpuxray {}\n", GPUXRAY_BUILD_TYPE, __GNUC__,
             __GNUC_MINOR__, __GNUC_PATCHLEVEL__, ZSTD_versionString(), FMT_VERSION / 10000, FMT_VERSION / 100 % 100,
             FMT_VERSION % 100, gpuxray::kToolVersion);
  fmt::print("  stream  : {} kernels (seed {}), {} steps x {} launches of an 8-layer bf16 transformer, {:.1f} s GPU time\n",
             thousands(w.launches.size()), kSeed, thousands(w.steps), w.step.size(), stats.gpu_seconds);
  fmt::print("            {} kernel names (CUPTI names avg {:.0f} B, demangled avg {:.0f} B), {} launch configs, "
             "{} streams, completion order ({:.1f}% negative start deltas)\n",
             w.catalogue.cupti_names.size(), stats.average_name_bytes, stats.average_demangled_bytes,
             w.catalogue.configs.size(), kStreams.size(), stats.negative_start_deltas);
  fmt::print("  method  : median of {} runs; timed per record: intern(const char*) + add(); then finish() and close;\n"
             "            cpu = this thread's user+sys time; file sink in {} (page cache, no fsync);\n"
             "            stream generated beforehand in {:.1f} s\n\n",
             options.reps, dir, setup_seconds);
}

}  // namespace

int main(int argc, char** argv) {
  Options options = parseOptions(argc, argv);
  int cpu = pinToOneCore();

  auto setup_start = Clock::now();
  Workload w = buildWorkload(options.records);
  double setup_seconds = std::chrono::duration<double>(Clock::now() - setup_start).count();
  FileHeader header = benchmarkHeader();
  std::string dir = makeTempDir(options.dir);
  const size_t n = w.launches.size();
  printPreamble(options, w, cpu, dir, setup_seconds);

  printTableHeader();
  std::map<std::pair<std::string, int>, Row> gpuxray;
  std::string default_file;
  for (int level : options.levels) {
    auto memory = medianRun(options.reps, [&] { return writeTrace(w, std::make_unique<MemorySink>(), level, header); });
    std::string path = fmt::format("{}/trace_zstd{}.gpuxray", dir, level);
    auto file = medianRun(options.reps, [&] {
      auto sink = std::make_unique<FileSink>(path);
      if (!sink->ok()) fail(sink->error());
      return writeTrace(w, std::move(sink), level, header);
    });
    uint64_t on_disk = std::filesystem::file_size(path);
    if (on_disk != file.bytes) fail(fmt::format("{}: {} bytes on disk, writer reports {}", path, on_disk, file.bytes));
    for (auto& [sink, result] : {std::pair{"memory", memory}, std::pair{"file", file}}) {
      Row row{"gpuxray TraceWriter", sink, levelName(level), n, result.timing, result.bytes,
              fmt::format("{} chunks", result.chunks)};
      printRow(row);
      gpuxray[{sink, level}] = row;
    }
    if (level == 3) default_file = path;
    else std::filesystem::remove(path);
  }

  auto read = medianRun(options.reps, [&] { return readTrace(default_file); });
  if (read.kernels != n) fail(fmt::format("{}: read {} kernel records, wrote {}", default_file, read.kernels, n));
  verifyTrace(default_file, w);
  printRow({"gpuxray TraceReader (read back)", "file", "3", n, read.timing, std::filesystem::file_size(default_file),
            fmt::format("all {} records verified", thousands(n))});

  const size_t json_n = options.json_records;
  const size_t demangle_n = std::max<size_t>(1, json_n / 5);
  fmt::print("\n  peer: Kineto Chrome-trace JSON, same stream (first {} kernels; demangling row: first {})\n",
             thousands(json_n), thousands(demangle_n));
  printTableHeader();
  std::string json_path = dir + "/trace.json";
  auto json_memory = medianRun(options.reps, [&] { return writeKinetoJson(w, json_n, "", false); });
  auto json_file = medianRun(options.reps, [&] { return writeKinetoJson(w, json_n, json_path, false); });
  auto json_demangle = medianRun(options.reps, [&] { return writeKinetoJson(w, demangle_n, "", true); });
  Row kineto_memory{"kineto JSON, names pre-demangled", "memory", "-", json_n, json_memory.timing,
                    json_memory.event_bytes, ""};
  Row kineto_file{"kineto JSON, names pre-demangled", "file", "-", json_n, json_file.timing, json_file.event_bytes,
                  fmt::format("{:.1f} MB file", static_cast<double>(std::filesystem::file_size(json_path)) / 1e6)};
  Row kineto_demangle{"kineto JSON, demangle per event", "memory", "-", demangle_n, json_demangle.timing,
                      json_demangle.event_bytes, "as Kineto does"};
  printRow(kineto_memory);
  printRow(kineto_file);
  printRow(kineto_demangle);
  std::filesystem::remove_all(dir);

  const Row& ours = gpuxray[{"file", 3}];
  const Row& ours_memory = gpuxray[{"memory", 3}];
  fmt::print("\n  gpuxray (zstd 3) vs Kineto JSON: {:.0f}x fewer bytes per kernel ({:.2f} vs {:.0f} B); "
             "{:.1f}x the throughput to a file ({:.2f} vs {:.2f} Mrec/s cpu), {:.1f}x to memory\n",
             kineto_file.bytesPerRecord() / ours.bytesPerRecord(), ours.bytesPerRecord(), kineto_file.bytesPerRecord(),
             ours.cpuRate() / kineto_file.cpuRate(), ours.cpuRate() / 1e6, kineto_file.cpuRate() / 1e6,
             ours_memory.cpuRate() / kineto_memory.cpuRate());
  bool fast = ours.cpuRate() >= kTargetRecordsPerSecond;
  bool small = ours.bytesPerRecord() <= kTargetBytesPerRecord;
  fmt::print("  targets (zstd 3, file, one core): >= {:.0f} M records/s: {:.2f} cpu, {:.2f} wall, {}; "
             "<= {:.0f} B/record: {:.2f}, {}\n",
             kTargetRecordsPerSecond / 1e6, ours.cpuRate() / 1e6, ours.wallRate() / 1e6, fast ? "MET" : "MISSED",
             kTargetBytesPerRecord, ours.bytesPerRecord(), small ? "MET" : "MISSED");
  return 0;
}
