// Continuous GPU metrics through CUPTI's PM sampling: SM activity, DRAM, NVLink and PCIe bytes,
// tensor-pipe activity, sampled by the GPU at a fixed interval and decoded by the capture thread.
// Optional (GPUXRAY_METRICS=1): it needs profiling permission and a GPU that supports it, and
// when either is missing it says so in one line and the capture goes on without it.
#pragma once

#include <cupti_pmsampling.h>
#include <cupti_profiler_target.h>
#include <cupti_target.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "inject/profiler_host.h"

namespace gpuxray::inject {

struct PmSamplingApi : ProfilerHostApi {
  CUptiResult (*getCounterAvailability)(CUpti_PmSampling_GetCounterAvailability_Params*) = nullptr;
  CUptiResult (*enable)(CUpti_PmSampling_Enable_Params*) = nullptr;
  CUptiResult (*disable)(CUpti_PmSampling_Disable_Params*) = nullptr;
  CUptiResult (*setConfig)(CUpti_PmSampling_SetConfig_Params*) = nullptr;
  CUptiResult (*start)(CUpti_PmSampling_Start_Params*) = nullptr;
  CUptiResult (*stop)(CUpti_PmSampling_Stop_Params*) = nullptr;
  CUptiResult (*decodeData)(CUpti_PmSampling_DecodeData_Params*) = nullptr;
  CUptiResult (*getCounterDataSize)(CUpti_PmSampling_GetCounterDataSize_Params*) = nullptr;
  CUptiResult (*counterDataImageInitialize)(CUpti_PmSampling_CounterDataImage_Initialize_Params*) = nullptr;
  CUptiResult (*getCounterDataInfo)(CUpti_PmSampling_GetCounterDataInfo_Params*) = nullptr;
  CUptiResult (*getSampleInfo)(CUpti_PmSampling_CounterData_GetSampleInfo_Params*) = nullptr;
};

// Binds the PM sampling functions of an opened libcupti; returns the names of any missing.
std::string bindPmSamplingApi(void* cupti_library, PmSamplingApi& api);

// The metrics wanted, most useful first. PM sampling takes one hardware pass only, so
// buildSamplingConfig drops the optional groups until the set fits.
const std::vector<std::string>& wantedMetrics();

struct SamplingConfig {
  std::vector<std::string> metrics;
  std::vector<uint8_t> image;
  // Evaluates decoded samples later; release with releaseSamplingConfig.
  CUpti_Profiler_Host_Object* host = nullptr;
};
void releaseSamplingConfig(const PmSamplingApi& api, SamplingConfig& config);

// Builds the configuration on the host for a chip ("GH100"); no GPU is needed. The counter
// availability image may be empty (then every counter of the chip is assumed available).
bool buildSamplingConfig(const PmSamplingApi& api, const std::string& chip,
                         const std::vector<uint8_t>& counter_availability, SamplingConfig& config, std::string& error);

struct MetricSample {
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  std::vector<double> values;  // one per SamplingConfig metric
};

class MetricSampler {
 public:
  MetricSampler(const PmSamplingApi& api, uint32_t device, uint32_t interval_us, uint32_t decode_interval_ms);
  ~MetricSampler();
  MetricSampler(const MetricSampler&) = delete;
  MetricSampler& operator=(const MetricSampler&) = delete;

  // Configures and starts sampling on the device; false with a one-line reason.
  bool start(std::string& error);
  // Appends the samples completed since the last call.
  void collect(std::vector<MetricSample>& out);
  void stop();

  const std::vector<std::string>& metrics() const { return config_.metrics; }
  uint32_t device() const { return device_; }
  // Times the hardware buffer overflowed between two decodes (older samples were overwritten).
  uint64_t overflows() const { return overflows_; }
  uint64_t failedDecodes() const { return failed_decodes_; }

 private:
  std::string describe(CUptiResult result) const;
  bool resetCounterData();

  PmSamplingApi api_;
  uint32_t device_;
  uint32_t interval_us_;
  uint32_t max_samples_;
  std::string chip_;
  SamplingConfig config_;
  std::vector<const char*> metric_names_;
  CUpti_PmSampling_Object* sampler_ = nullptr;
  std::vector<uint8_t> counter_data_;
  bool started_ = false;
  uint64_t overflows_ = 0;
  uint64_t failed_decodes_ = 0;
};

}  // namespace gpuxray::inject
