#include "inject/metric_sampler.h"

#include "inject/symbol_binding.h"

namespace gpuxray::inject {
namespace {

// Grouped by what they tell; the first group is kept whatever happens, the others only if the
// configuration still fits in one pass. On GH100 all fit.
const std::vector<std::vector<std::string>> kMetricGroups = {
    {"gr__cycles_active.avg", "sm__cycles_active.avg", "sm__warps_active.avg.pct_of_peak_sustained_elapsed",
     "dram__bytes_read.sum", "dram__bytes_write.sum"},
    {"nvlrx__bytes.sum", "nvltx__bytes.sum"},
    {"pcie__read_bytes.sum", "pcie__write_bytes.sum"},
    {"sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed"},
};

// The hardware buffer in device memory, and how often it is drained.
constexpr size_t kHardwareBufferBytes = 64u << 20;

// A host configuration of `metrics` for `chip`: the image if it is one pass, else empty.
bool tryConfig(const PmSamplingApi& api, const std::string& chip, const std::vector<uint8_t>& availability,
               const std::vector<std::string>& metrics, SamplingConfig& out, std::string& error) {
  CUptiResult r = CUPTI_SUCCESS;
  SamplingConfig config;
  config.host = initializeProfilerHost(api, CUPTI_PROFILER_TYPE_PM_SAMPLING, chip, availability, r);
  if (config.host == nullptr) {
    error = "the profiler host API does not know chip " + chip + ": " + describeProfilerResult(api, r);
    return false;
  }
  config.metrics = metrics;
  size_t passes = 0;
  r = addProfilerMetrics(api, config.host, metrics);
  if (r == CUPTI_SUCCESS) r = buildProfilerConfigImage(api, config.host, config.image, passes);
  if (r != CUPTI_SUCCESS || passes != 1) {
    error = r != CUPTI_SUCCESS ? "metric configuration failed: " + describeProfilerResult(api, r)
                               : "the metrics need " + std::to_string(passes) + " passes";
    releaseSamplingConfig(api, config);
    return false;
  }
  out = std::move(config);
  return true;
}

}  // namespace

std::string bindPmSamplingApi(void* library, PmSamplingApi& api) {
  std::string missing;
  auto bind = [&](const char* symbol, auto& slot) { bindSymbol(library, symbol, slot, missing); };
  bindProfilerHostApi(library, api, missing);
  bind("cuptiPmSamplingGetCounterAvailability", api.getCounterAvailability);
  bind("cuptiPmSamplingEnable", api.enable);
  bind("cuptiPmSamplingDisable", api.disable);
  bind("cuptiPmSamplingSetConfig", api.setConfig);
  bind("cuptiPmSamplingStart", api.start);
  bind("cuptiPmSamplingStop", api.stop);
  bind("cuptiPmSamplingDecodeData", api.decodeData);
  bind("cuptiPmSamplingGetCounterDataSize", api.getCounterDataSize);
  bind("cuptiPmSamplingCounterDataImageInitialize", api.counterDataImageInitialize);
  bind("cuptiPmSamplingGetCounterDataInfo", api.getCounterDataInfo);
  bind("cuptiPmSamplingCounterDataGetSampleInfo", api.getSampleInfo);
  return missing;
}

const std::vector<std::string>& wantedMetrics() {
  static const std::vector<std::string> all = [] {
    std::vector<std::string> metrics;
    for (const auto& group : kMetricGroups) metrics.insert(metrics.end(), group.begin(), group.end());
    return metrics;
  }();
  return all;
}

void releaseSamplingConfig(const PmSamplingApi& api, SamplingConfig& config) {
  if (config.host == nullptr) return;
  deinitializeProfilerHost(api, config.host);
  config.host = nullptr;
}

bool buildSamplingConfig(const PmSamplingApi& api, const std::string& chip,
                         const std::vector<uint8_t>& counter_availability, SamplingConfig& config, std::string& error) {
  // Drop optional groups from the end until the set is one pass.
  for (size_t groups = kMetricGroups.size(); groups >= 1; --groups) {
    std::vector<std::string> metrics;
    for (size_t g = 0; g < groups; ++g) metrics.insert(metrics.end(), kMetricGroups[g].begin(), kMetricGroups[g].end());
    if (tryConfig(api, chip, counter_availability, metrics, config, error)) return true;
  }
  return false;
}

MetricSampler::MetricSampler(const PmSamplingApi& api, uint32_t device, uint32_t interval_us,
                             uint32_t decode_interval_ms)
    : api_(api),
      device_(device),
      interval_us_(interval_us),
      // Room for two decode intervals of samples, so a late decode loses nothing.
      max_samples_(std::max<uint32_t>(64, 2 * decode_interval_ms * 1000 / std::max<uint32_t>(interval_us, 1))) {}

MetricSampler::~MetricSampler() {
  stop();
  releaseSamplingConfig(api_, config_);
}

std::string MetricSampler::describe(CUptiResult result) const {
  std::string text = describeProfilerResult(api_, result);
  if (result == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES) {
    text +=
        ": GPU performance counters are restricted to administrators (run as root, or load the driver with "
        "NVreg_RestrictProfilingToAdminUsers=0)";
  } else if (result == CUPTI_ERROR_NOT_SUPPORTED) {
    text += ": this GPU (" + (chip_.empty() ? std::string("unknown chip") : chip_) + ") does not support PM sampling";
  }
  return text;
}

bool MetricSampler::start(std::string& error) {
  auto prefix = "GPU metric sampling on device " + std::to_string(device_) + " is off: ";
  auto init = cuptiParams<CUpti_Profiler_Initialize_Params, CUpti_Profiler_Initialize_Params_STRUCT_SIZE>();
  if (CUptiResult r = api_.profilerInitialize(&init); r != CUPTI_SUCCESS) {
    error = prefix + describe(r);
    return false;
  }
  auto chip = cuptiParams<CUpti_Device_GetChipName_Params, CUpti_Device_GetChipName_Params_STRUCT_SIZE>();
  chip.deviceIndex = device_;
  if (CUptiResult r = api_.deviceGetChipName(&chip); r != CUPTI_SUCCESS || chip.pChipName == nullptr) {
    error = prefix + "no chip name: " + describe(r);
    return false;
  }
  chip_ = chip.pChipName;
  auto availability = cuptiParams<CUpti_PmSampling_GetCounterAvailability_Params,
                                  CUpti_PmSampling_GetCounterAvailability_Params_STRUCT_SIZE>();
  availability.deviceIndex = device_;
  std::vector<uint8_t> availability_image;
  if (api_.getCounterAvailability(&availability) == CUPTI_SUCCESS && availability.counterAvailabilityImageSize > 0) {
    availability_image.resize(availability.counterAvailabilityImageSize);
    availability.pCounterAvailabilityImage = availability_image.data();
    if (api_.getCounterAvailability(&availability) != CUPTI_SUCCESS) availability_image.clear();
  }
  std::string config_error;
  if (!buildSamplingConfig(api_, chip_, availability_image, config_, config_error)) {
    error = prefix + config_error;
    return false;
  }
  for (const auto& m : config_.metrics) metric_names_.push_back(m.c_str());

  auto enable = cuptiParams<CUpti_PmSampling_Enable_Params, CUpti_PmSampling_Enable_Params_STRUCT_SIZE>();
  enable.deviceIndex = device_;
  if (CUptiResult r = api_.enable(&enable); r != CUPTI_SUCCESS) {
    error = prefix + describe(r);
    return false;
  }
  sampler_ = enable.pPmSamplingObject;
  auto set = cuptiParams<CUpti_PmSampling_SetConfig_Params, CUpti_PmSampling_SetConfig_Params_STRUCT_SIZE>();
  set.pPmSamplingObject = sampler_;
  set.configSize = config_.image.size();
  set.pConfig = config_.image.data();
  set.hardwareBufferSize = kHardwareBufferBytes;
  set.samplingInterval = static_cast<uint64_t>(interval_us_) * 1000u;
  set.triggerMode = CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL;
  set.hwBufferAppendMode = CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_LATEST;
  auto size =
      cuptiParams<CUpti_PmSampling_GetCounterDataSize_Params, CUpti_PmSampling_GetCounterDataSize_Params_STRUCT_SIZE>();
  size.pPmSamplingObject = sampler_;
  size.pMetricNames = metric_names_.data();
  size.numMetrics = metric_names_.size();
  size.maxSamples = max_samples_;
  CUptiResult r = api_.setConfig(&set);
  if (r == CUPTI_SUCCESS) r = api_.getCounterDataSize(&size);
  if (r == CUPTI_SUCCESS) {
    counter_data_.resize(size.counterDataSize);
    r = resetCounterData() ? CUPTI_SUCCESS : CUPTI_ERROR_UNKNOWN;
  }
  auto start_params = cuptiParams<CUpti_PmSampling_Start_Params, CUpti_PmSampling_Start_Params_STRUCT_SIZE>();
  start_params.pPmSamplingObject = sampler_;
  if (r == CUPTI_SUCCESS) r = api_.start(&start_params);
  if (r != CUPTI_SUCCESS) {
    error = prefix + describe(r);
    auto disable = cuptiParams<CUpti_PmSampling_Disable_Params, CUpti_PmSampling_Disable_Params_STRUCT_SIZE>();
    disable.pPmSamplingObject = sampler_;
    api_.disable(&disable);
    sampler_ = nullptr;
    return false;
  }
  started_ = true;
  return true;
}

bool MetricSampler::resetCounterData() {
  auto init = cuptiParams<CUpti_PmSampling_CounterDataImage_Initialize_Params,
                          CUpti_PmSampling_CounterDataImage_Initialize_Params_STRUCT_SIZE>();
  init.pPmSamplingObject = sampler_;
  init.counterDataSize = counter_data_.size();
  init.pCounterData = counter_data_.data();
  return api_.counterDataImageInitialize(&init) == CUPTI_SUCCESS;
}

void MetricSampler::collect(std::vector<MetricSample>& out) {
  if (!started_) return;
  auto decode = cuptiParams<CUpti_PmSampling_DecodeData_Params, CUpti_PmSampling_DecodeData_Params_STRUCT_SIZE>();
  decode.pPmSamplingObject = sampler_;
  decode.pCounterDataImage = counter_data_.data();
  decode.counterDataImageSize = counter_data_.size();
  if (api_.decodeData(&decode) != CUPTI_SUCCESS) {
    ++failed_decodes_;
    return;
  }
  if (decode.overflow) ++overflows_;
  auto info =
      cuptiParams<CUpti_PmSampling_GetCounterDataInfo_Params, CUpti_PmSampling_GetCounterDataInfo_Params_STRUCT_SIZE>();
  info.pCounterDataImage = counter_data_.data();
  info.counterDataImageSize = counter_data_.size();
  if (api_.getCounterDataInfo(&info) != CUPTI_SUCCESS) {
    ++failed_decodes_;
    return;
  }
  for (size_t index = 0; index < info.numCompletedSamples; ++index) {
    auto sample_info = cuptiParams<CUpti_PmSampling_CounterData_GetSampleInfo_Params,
                                   CUpti_PmSampling_CounterData_GetSampleInfo_Params_STRUCT_SIZE>();
    sample_info.pPmSamplingObject = sampler_;
    sample_info.pCounterDataImage = counter_data_.data();
    sample_info.counterDataImageSize = counter_data_.size();
    sample_info.sampleIndex = index;
    MetricSample sample;
    sample.values.resize(metric_names_.size());
    auto evaluate = cuptiParams<CUpti_Profiler_Host_EvaluateToGpuValues_Params,
                                CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE>();
    evaluate.pHostObject = config_.host;
    evaluate.pCounterDataImage = counter_data_.data();
    evaluate.counterDataImageSize = counter_data_.size();
    evaluate.rangeIndex = index;
    evaluate.ppMetricNames = metric_names_.data();
    evaluate.numMetrics = metric_names_.size();
    evaluate.pMetricValues = sample.values.data();
    if (api_.getSampleInfo(&sample_info) != CUPTI_SUCCESS || api_.hostEvaluateToGpuValues(&evaluate) != CUPTI_SUCCESS) {
      ++failed_decodes_;
      continue;
    }
    sample.start_ns = sample_info.startTimestamp;
    sample.end_ns = sample_info.endTimestamp;
    out.push_back(std::move(sample));
  }
  // The image holds a fixed number of samples: start it afresh for the next decode.
  if (!resetCounterData()) ++failed_decodes_;
}

void MetricSampler::stop() {
  if (!started_) return;
  started_ = false;
  auto stop_params = cuptiParams<CUpti_PmSampling_Stop_Params, CUpti_PmSampling_Stop_Params_STRUCT_SIZE>();
  stop_params.pPmSamplingObject = sampler_;
  api_.stop(&stop_params);
  auto disable = cuptiParams<CUpti_PmSampling_Disable_Params, CUpti_PmSampling_Disable_Params_STRUCT_SIZE>();
  disable.pPmSamplingObject = sampler_;
  api_.disable(&disable);
  sampler_ = nullptr;
}

}  // namespace gpuxray::inject
