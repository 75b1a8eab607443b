// Inside the kernels (docs/analyses.md, "Kernel metrics"): for each kernel measured by
// `gpuxray run --kernel-metrics`, its counters (median over the measured launches), achieved
// occupancy next to theoretical, the memory hierarchy's bytes and hit rates, and its roofline
// position (arithmetic intensity from the FLOPs a GEMM's recorded shape gives, DRAM bytes measured)
// with memory-, compute- or latency-bound and the evidence. Findings: a top kernel whose achieved
// occupancy is far below theoretical, and consecutive elementwise kernels on one stream that move
// the same tensor through HBM (a fusion candidate, with the bytes fusing them would save).
// Profiled launches were replayed: their durations are in no time figure (run_trace.h, ProfiledKernel).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analyzer/analysis/analysis_input.h"
#include "analyzer/report/report.h"

namespace gpuxray::analysis {

enum class KernelBound { kUnknown, kMemory, kCompute, kLatency };
const char* kernelBoundName(KernelBound bound);

struct MeasuredKernel {
  std::string name;
  size_t launches = 0;  // measured launches, all ranks
  uint32_t passes = 0;
  // Medians over the measured launches; empty: not measured.
  format::KernelMetricsRecord median;
  std::optional<double> theoretical_occupancy_pct;  // of the first measured launch's shape
  std::optional<double> dram_throughput_pct;        // (read + written) / duration / the device's bandwidth
  std::optional<double> flops;                      // per launch, from a GEMM's recorded shape
  std::string flops_source;                         // "aten::mm [512, 1024] x [1024, 256]", or why not known
  std::optional<double> arithmetic_intensity;       // FLOPs per DRAM byte
  std::optional<double> ridge_intensity;            // the device's peak FLOP/s / bandwidth
  KernelBound bound = KernelBound::kUnknown;
  std::vector<std::string> evidence;
};

struct FusionCandidate {
  std::string first;
  std::string second;
  int32_t rank = -1;
  uint32_t device = 0;
  uint32_t stream = 0;
  // The first one writes to HBM and the second reads back: min(written, read) twice.
  double bytes_saved = 0;
  double first_written_bytes = 0;
  double second_read_bytes = 0;
};

// The per-rank part (rank_digest.h): each measured launch with what the rank's events say of it.
struct KernelMetricsPart {
  struct Launch {
    std::string name;
    format::KernelMetricsRecord metrics;
    bool found = false;  // its kernel record is in the file
    model::LaunchConfig shape;
    std::optional<uint32_t> device;  // its device's id in the rank's header, when the header describes it
    std::optional<double> flops;
    std::string flops_source;
  };
  std::vector<Launch> launches;
  std::vector<FusionCandidate> fusion;
};
KernelMetricsPart kernelMetricsOfRank(const AnalysisInput& input, size_t r);

struct KernelMetricsResult {
  size_t profiled_launches = 0;
  size_t launches_not_found = 0;        // counters whose kernel record is not in the file
  std::vector<MeasuredKernel> kernels;  // by measured duration x the kernel's launches, highest first
  std::vector<FusionCandidate> fusion;
};

KernelMetricsResult computeKernelMetrics(const AnalysisInput& input);
// The `kernel_metrics` section (when any launch was measured), its findings and typed result.
void presentKernelMetrics(const KernelMetricsResult& result, report::Report& report);

// Kernels that only map elements (PyTorch's elementwise and vectorized kernels, Triton pointwise).
bool isElementwiseKernel(std::string_view name);
// 2*M*N*K (times the batch) for a matrix product's recorded input shapes ("float[512, 1024],
// float[1024, 256]"), by the op's name (aten::mm, addmm, bmm, matmul, linear); nullopt when the
// op is no matrix product or the shapes do not say.
std::optional<double> gemmFlops(std::string_view op, std::string_view inputs);

}  // namespace gpuxray::analysis
