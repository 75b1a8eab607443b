// `gpuxray run --kernel-metrics`: measures the first N launches of each kernel whose name matches,
// with CUPTI's range profiler in kernel replay (auto range: one range per kernel). The range
// profiler starts at the launch call's entry and stops at its exit, on the application's thread;
// CUPTI replays the kernel once per pass inside the call, so a profiled launch is slow and its
// kernel record's duration is not the kernel's (the analyzer keeps it out of time figures). Off by
// default; graph launches are not profiled. Without a pattern it chooses the kernels itself: the
// kKernelsChosen compute kernels with the most time in the first kLearnNs of kernel records the
// capture thread sees (noteKernel); launches before that choice are not measured.
#pragma once

#include <cuda.h>
#include <cupti.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <regex>
#include <string>
#include <unordered_map>
#include <vector>

#include "inject/kernel_metric_config.h"
#include "proto/records.h"

namespace gpuxray::inject {

// The runtime and driver launch calls whose callbacks the collector needs.
struct LaunchCallback {
  CUpti_CallbackDomain domain;
  CUpti_CallbackId cbid;
};
const std::vector<LaunchCallback>& kernelLaunchCallbacks();

class KernelMetricCollector {
 public:
  // At most this many launches are profiled in one process, whatever the pattern matches.
  static constexpr uint32_t kMaxProfiledLaunches = 4096;
  static constexpr uint64_t kLearnNs = 2'000'000'000;
  static constexpr size_t kKernelsChosen = 5;

  // `match` unset: choose the kernels from the first kLearnNs of kernels.
  KernelMetricCollector(const KernelProfilerApi& api, std::optional<std::regex> match, uint32_t launches_per_kernel);
  ~KernelMetricCollector();
  KernelMetricCollector(const KernelMetricCollector&) = delete;
  KernelMetricCollector& operator=(const KernelMetricCollector&) = delete;

  // A launch callback from CUPTI (CUpti_CallbackData), on the application's thread. Only the
  // outermost launch call of a thread counts (a runtime launch calls the driver's); `may_profile`
  // false (outside the capture windows) lets the launch run unmeasured.
  void onLaunch(const CUpti_CallbackData& call, bool may_profile);

  // A kernel record as the capture thread translates it (CUPTI's name, mangled), for the choice.
  void noteKernel(const char* name, uint64_t start_ns, uint64_t end_ns);
  // At the capture's end: says so when the kernels were never chosen.
  void finish();

  // The launches measured since the last call, for the capture thread to write.
  void takeMeasured(std::vector<format::KernelMetricsRecord>& out);
  // One line per thing that went wrong (each said once), for the log and the trailer.
  std::vector<std::string> takeWarnings();
  uint64_t profiledLaunches() const;

 private:
  struct ContextProfiler {
    CUpti_RangeProfiler_Object* profiler = nullptr;
    KernelMetricConfig config;
    std::vector<const char*> metric_names;
    std::vector<uint8_t> counter_data;
    uint32_t device = 0;
    bool usable = false;
  };

  // Whether this launch of `symbol` is one to measure (counts it when it is).
  bool shouldProfile(const char* symbol);
  ContextProfiler* profilerFor(CUcontext context);
  bool start(ContextProfiler& profiler);
  void finish(ContextProfiler& profiler, uint32_t correlation_id);
  bool resetCounterData(ContextProfiler& profiler);
  void warn(const std::string& line);

  KernelProfilerApi api_;
  std::optional<std::regex> match_;
  uint32_t launches_per_kernel_;
  bool profiler_initialized_ = false;
  bool profiler_failed_ = false;

  // Serializes profiled launches (the range profiler measures one at a time; kernel replay
  // serializes them on the GPU anyway) and guards everything below.
  mutable std::mutex mutex_;
  // Per kernel symbol: launches profiled so far, or nullopt when the name does not match.
  std::unordered_map<std::string, std::optional<uint32_t>> symbols_;
  std::unordered_map<CUcontext, ContextProfiler> contexts_;
  std::vector<format::KernelMetricsRecord> measured_;
  std::vector<std::string> warnings_;
  std::vector<std::string> said_;
  uint64_t profiled_ = 0;
  // Choosing the kernels (no pattern): time per kernel name until kLearnNs after the first start.
  std::atomic<bool> chosen_{false};
  std::unordered_map<std::string, uint64_t> learned_;
  uint64_t first_start_ns_ = 0;
  std::vector<std::string> chosen_names_;
};

}  // namespace gpuxray::inject
