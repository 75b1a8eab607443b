#include "inject/kernel_metric_config.h"

#include "inject/symbol_binding.h"

namespace gpuxray::inject {
namespace {

using format::KernelMetricsRecord;

// A host object of the range profiler for `chip`; null (and `result` says why) when refused.
CUpti_Profiler_Host_Object* initialize(const KernelProfilerApi& api, const std::string& chip,
                                       const std::vector<uint8_t>& availability, CUptiResult& result) {
  return initializeProfilerHost(api, CUPTI_PROFILER_TYPE_RANGE_PROFILER, chip, availability, result);
}

}  // namespace

std::string bindKernelProfilerApi(void* library, KernelProfilerApi& api) {
  std::string missing;
  auto bind = [&](const char* symbol, auto& slot) { bindSymbol(library, symbol, slot, missing); };
  bindProfilerHostApi(library, api, missing);
  bind("cuptiGetDeviceId", api.getDeviceId);
  bind("cuptiProfilerGetCounterAvailability", api.getCounterAvailability);
  bind("cuptiRangeProfilerEnable", api.enable);
  bind("cuptiRangeProfilerDisable", api.disable);
  bind("cuptiRangeProfilerSetConfig", api.setConfig);
  bind("cuptiRangeProfilerStart", api.start);
  bind("cuptiRangeProfilerStop", api.stop);
  bind("cuptiRangeProfilerDecodeData", api.decodeData);
  bind("cuptiRangeProfilerGetCounterDataSize", api.getCounterDataSize);
  bind("cuptiRangeProfilerCounterDataImageInitialize", api.counterDataImageInitialize);
  bind("cuptiRangeProfilerGetCounterDataInfo", api.getCounterDataInfo);
  return missing;
}

const std::vector<KernelQuantity>& kernelQuantities() {
  static const std::vector<KernelQuantity> quantities = {
      {"sm__warps_active.avg.pct_of_peak_sustained_active", "achieved occupancy: active warps / maximum, % (ncu's)",
       &KernelMetricsRecord::achieved_occupancy_pct},
      {"sm__throughput.avg.pct_of_peak_sustained_elapsed", "SM throughput, % of peak (ncu's Compute (SM) Throughput)",
       &KernelMetricsRecord::sm_throughput_pct},
      {"sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active", "tensor pipe active, % of active cycles",
       &KernelMetricsRecord::tensor_pipe_pct},
      {"dram__bytes_read.sum", "DRAM (HBM) bytes read", &KernelMetricsRecord::dram_read_bytes},
      {"dram__bytes_write.sum", "DRAM (HBM) bytes written", &KernelMetricsRecord::dram_write_bytes},
      {"lts__t_bytes.sum", "L2 bytes (all requests to L2)", &KernelMetricsRecord::l2_bytes},
      {"lts__t_sector_hit_rate.pct", "L2 sector hit rate, %", &KernelMetricsRecord::l2_hit_rate_pct},
      {"l1tex__t_bytes.sum", "L1 bytes (global and local requests)", &KernelMetricsRecord::l1_bytes},
      {"l1tex__t_sector_hit_rate.pct", "L1 sector hit rate, %", &KernelMetricsRecord::l1_hit_rate_pct},
      {"l1tex__data_pipe_lsu_wavefronts_mem_shared.sum", "shared-memory wavefronts (up to 128 B each)",
       &KernelMetricsRecord::shared_wavefronts},
      {"l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum", "local-memory (spill) bytes loaded",
       &KernelMetricsRecord::local_load_bytes},
      {"l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum", "local-memory (spill) bytes stored",
       &KernelMetricsRecord::local_store_bytes},
      {"gpu__time_duration.sum", "GPU duration of the profiled pass, ns", &KernelMetricsRecord::gpu_duration_ns},
  };
  return quantities;
}

void releaseKernelMetricConfig(const KernelProfilerApi& api, KernelMetricConfig& config) {
  if (config.host == nullptr) return;
  deinitializeProfilerHost(api, config.host);
  config.host = nullptr;
}

bool buildKernelMetricConfig(const KernelProfilerApi& api, const std::string& chip,
                             const std::vector<uint8_t>& availability, KernelMetricConfig& out, std::string& error) {
  KernelMetricConfig config;
  config.chip = chip;
  CUptiResult result = CUPTI_SUCCESS;
  config.host = initialize(api, chip, availability, result);
  if (config.host == nullptr) {
    error = "the profiler host API does not know chip " + chip + ": " + describeProfilerResult(api, result);
    return false;
  }
  // Each metric on its own first: a chip that lacks one keeps the others.
  const auto& quantities = kernelQuantities();
  for (size_t i = 0; i < quantities.size(); ++i) {
    std::string metric(quantities[i].metric);
    CUpti_Profiler_Host_Object* probe = initialize(api, chip, availability, result);
    bool offered = probe != nullptr && addProfilerMetrics(api, probe, {metric}) == CUPTI_SUCCESS;
    if (probe != nullptr) deinitializeProfilerHost(api, probe);
    if (!offered) {
      config.unavailable.push_back(metric);
      continue;
    }
    config.quantities.push_back(i);
    config.metrics.push_back(metric);
  }
  if (config.metrics.empty()) {
    releaseKernelMetricConfig(api, config);
    error = "chip " + chip + " offers none of the kernel metrics";
    return false;
  }
  size_t passes = 0;
  result = addProfilerMetrics(api, config.host, config.metrics);
  if (result == CUPTI_SUCCESS) result = buildProfilerConfigImage(api, config.host, config.image, passes);
  if (result != CUPTI_SUCCESS || passes == 0) {
    error = "kernel metric configuration for " + chip + " failed: " + describeProfilerResult(api, result);
    releaseKernelMetricConfig(api, config);
    return false;
  }
  config.passes = passes;
  out = std::move(config);
  return true;
}

}  // namespace gpuxray::inject
