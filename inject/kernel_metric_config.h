// The per-kernel metric set of `gpuxray run --kernel-metrics` and its CUPTI configuration: which
// CUPTI metric gives each quantity on each chip, and the range profiler's configuration image and
// pass count, built with libcupti's profiler host API (no GPU needed). docs/kernel-metrics.md holds
// the table and the pass counts.
#pragma once

#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "inject/profiler_host.h"
#include "proto/records.h"

namespace gpuxray::inject {

struct KernelProfilerApi : ProfilerHostApi {
  CUptiResult (*getDeviceId)(CUcontext, uint32_t*) = nullptr;
  CUptiResult (*getCounterAvailability)(CUpti_Profiler_GetCounterAvailability_Params*) = nullptr;
  CUptiResult (*enable)(CUpti_RangeProfiler_Enable_Params*) = nullptr;
  CUptiResult (*disable)(CUpti_RangeProfiler_Disable_Params*) = nullptr;
  CUptiResult (*setConfig)(CUpti_RangeProfiler_SetConfig_Params*) = nullptr;
  CUptiResult (*start)(CUpti_RangeProfiler_Start_Params*) = nullptr;
  CUptiResult (*stop)(CUpti_RangeProfiler_Stop_Params*) = nullptr;
  CUptiResult (*decodeData)(CUpti_RangeProfiler_DecodeData_Params*) = nullptr;
  CUptiResult (*getCounterDataSize)(CUpti_RangeProfiler_GetCounterDataSize_Params*) = nullptr;
  CUptiResult (*counterDataImageInitialize)(CUpti_RangeProfiler_CounterDataImage_Initialize_Params*) = nullptr;
  CUptiResult (*getCounterDataInfo)(CUpti_RangeProfiler_GetCounterDataInfo_Params*) = nullptr;
};

// Binds the range profiler and host functions of an opened libcupti; returns the names of any missing.
std::string bindKernelProfilerApi(void* cupti_library, KernelProfilerApi& api);

// One measured quantity: its CUPTI metric (the same name on GA100, GH100 and GB100, which the
// tests check against the real host library) and where it goes in the trace record.
struct KernelQuantity {
  std::string_view metric;
  std::string_view description;
  std::optional<double> format::KernelMetricsRecord::*field;
};
const std::vector<KernelQuantity>& kernelQuantities();

struct KernelMetricConfig {
  std::string chip;
  // The quantities the chip offers (indices into kernelQuantities()), and the metrics they read.
  std::vector<size_t> quantities;
  std::vector<std::string> metrics;
  // The metrics the chip (or the counter availability) does not offer.
  std::vector<std::string> unavailable;
  std::vector<uint8_t> image;
  // Kernel replays per profiled launch.
  size_t passes = 0;
  // Evaluates the counter data later; release with releaseKernelMetricConfig.
  CUpti_Profiler_Host_Object* host = nullptr;
};
void releaseKernelMetricConfig(const KernelProfilerApi& api, KernelMetricConfig& config);

// Builds the configuration on the host for a chip ("GH100"). The counter availability image may be
// empty (then every counter of the chip is assumed available). False with a one-line reason when
// the chip is unknown or none of the metrics is available.
bool buildKernelMetricConfig(const KernelProfilerApi& api, const std::string& chip,
                             const std::vector<uint8_t>& counter_availability, KernelMetricConfig& config,
                             std::string& error);

}  // namespace gpuxray::inject
