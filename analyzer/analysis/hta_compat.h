// `--compat hta`: the temporal breakdown, the communication/computation overlap and the idle time
// breakdown computed exactly as Holistic Trace Analysis 0.6.1 computes them, so that its users get
// the numbers they know (docs/analyses.md, "HTA compatibility", says how and why gpuxray's own
// definitions differ). Every rule that makes HTA's numbers HTA's is in this header.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "analyzer/analysis/analysis_input.h"
#include "analyzer/model/run_trace.h"
#include "analyzer/report/report.h"

namespace gpuxray::analysis::hta {

// HTA's clock: whole microseconds. A start is rounded up and an end is floor(start + duration),
// both in double precision as pandas does, unless every timestamp of the trace was already a whole
// number of microseconds (HTA then rounds nothing). Returned in nanoseconds.
int64_t roundedStart(int64_t start_ns, bool whole_microseconds);
int64_t roundedEnd(int64_t start_ns, int64_t end_ns, bool whole_microseconds);

// HTA's percentages: round(100 * (part / whole), 2), rounded half-even on the double as Python does.
double percent(double part, double whole);

// HTA's kernel types, decided by name alone, first match wins: communication when the name starts
// with nccl, hip or hccl or contains ncclKernel; memory when it starts with Memcpy, Memset, dma (or
// hip...); computation when it matches none of HTA's non-compute patterns (nccl, Memcpy, Memset, dma,
// Sync, Stream Wait Event, cuda...LaunchKernel, runFunction, ...); other otherwise.
enum class KernelType { kCommunication, kMemory, kComputation, kOther };
KernelType kernelTypeOfName(std::string_view name);
// An activity's type: by its name; copies and memsets without a name are memory, synchronizations
// without one are other.
KernelType kernelTypeOf(const model::RankTrace& rank, const model::GpuActivity& activity);

// HTA's "GPU kernels": every activity with a stream, synchronizations and stream-naming host ops
// included.
// A gap shorter than this (30 µs) between two kernels of a stream whose launch came early is HTA's
// "kernel wait".
inline constexpr int64_t kKernelWaitThresholdNs = 30'000;

// HTA drops the last profiler step: when the run's annotations carry two or more distinct names
// containing "ProfilerStep", a rank keeps only the GPU activities whose launch (the runtime call of
// the same correlation id) started before its last ProfilerStep did. `include_last_step` keeps all.
struct StepFilter {
  size_t step_names = 0;
  bool applied = false;
};
StepFilter stepFilterOf(const model::RunTrace& run, bool include_last_step);
// The rounded start of the rank's last ProfilerStep; -1 when it has none (HTA then keeps nothing).
int64_t lastStepStart(const model::RankTrace& rank);

// HTA's figures of one rank, in ns (whole microseconds, as HTA rounds them).
struct HtaStreamIdle {
  uint32_t stream = 0;
  int64_t host_wait_ns = 0, kernel_wait_ns = 0, other_ns = 0;
};

struct HtaRank {
  int32_t rank = -1;
  int64_t span_ns = 0, idle_ns = 0, compute_ns = 0, non_compute_ns = 0;
  double idle_pct = 0, compute_pct = 0, non_compute_pct = 0;  // HTA's rounding
  double overlap_pct = 0;                                     // NaN: no communication (HTA's NaN)
  std::vector<HtaStreamIdle> streams;                         // by stream
};

struct HtaResult {
  StepFilter filter;
  std::vector<HtaRank> ranks;        // ranks with kernels left, in run order
  std::vector<int32_t> empty_ranks;  // ranks with none left
};

}  // namespace gpuxray::analysis::hta

namespace gpuxray::analysis {

hta::HtaResult computeHtaCompat(const AnalysisInput& input);
// The `hta` section, HTA's idle_pct and overlap_pct metrics and the typed result (`hta`).
void presentHtaCompat(const hta::HtaResult& result, report::Report& report);

}  // namespace gpuxray::analysis
