#include "inject/kernel_metric_collector.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <utility>

namespace gpuxray::inject {
namespace {

std::string demangled(const char* symbol) {
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> name(abi::__cxa_demangle(symbol, nullptr, nullptr, &status), &std::free);
  return status == 0 && name ? std::string(name.get()) : std::string(symbol);
}

// The thread's outermost launch call, and whether the range profiler runs for it.
struct ThreadLaunch {
  int depth = 0;
  bool profiling = false;
  CUcontext context = nullptr;
};
thread_local ThreadLaunch t_launch;

}  // namespace

const std::vector<LaunchCallback>& kernelLaunchCallbacks() {
  static const std::vector<LaunchCallback> callbacks = {
      {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000},
      {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000},
      {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060},
      {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060},
      {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000},
      {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000},
      {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel},
      {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz},
      {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx},
      {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz},
      {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel},
      {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz},
  };
  return callbacks;
}

KernelMetricCollector::KernelMetricCollector(const KernelProfilerApi& api, std::optional<std::regex> match,
                                             uint32_t launches_per_kernel)
    : api_(api), match_(std::move(match)), launches_per_kernel_(launches_per_kernel) {}

void KernelMetricCollector::noteKernel(const char* name, uint64_t start_ns, uint64_t end_ns) {
  if (match_ || chosen_.load(std::memory_order_acquire) || name == nullptr || end_ns < start_ns) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (first_start_ns_ == 0 || start_ns < first_start_ns_) first_start_ns_ = start_ns;
  learned_[name] += end_ns - start_ns;
  if (end_ns - first_start_ns_ < kLearnNs) return;
  std::vector<std::pair<uint64_t, std::string>> ranked;
  for (const auto& [kernel, time] : learned_) ranked.emplace_back(time, kernel);
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::string names;
  for (size_t i = 0; i < ranked.size() && i < kKernelsChosen; ++i) {
    chosen_names_.push_back(ranked[i].second);
    names += (i > 0 ? ", " : "") + demangled(ranked[i].second.c_str()).substr(0, 80);
  }
  learned_.clear();
  symbols_.clear();
  chosen_.store(true, std::memory_order_release);
  warn("kernel metrics: measuring the " + std::to_string(chosen_names_.size()) +
       " kernels with the most time in the first 2 s of kernels: " + names);
}

void KernelMetricCollector::finish() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!match_ && !chosen_.load(std::memory_order_acquire)) {
    warn(
        "kernel metrics: no kernel measured: the kernels ran for less than 2 s, too short to choose the ones with "
        "the most time (give --kernel-metrics=REGEX)");
  }
}

KernelMetricCollector::~KernelMetricCollector() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [context, profiler] : contexts_) {
    if (profiler.profiler != nullptr) {
      auto disable = cuptiParams<CUpti_RangeProfiler_Disable_Params, CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE>();
      disable.pRangeProfilerObject = profiler.profiler;
      api_.disable(&disable);
    }
    releaseKernelMetricConfig(api_, profiler.config);
  }
}

void KernelMetricCollector::onLaunch(const CUpti_CallbackData& call, bool may_profile) {
  if (call.callbackSite == CUPTI_API_ENTER) {
    if (t_launch.depth++ > 0 || !may_profile || call.symbolName == nullptr || call.context == nullptr) return;
    mutex_.lock();
    ContextProfiler* profiler = shouldProfile(call.symbolName) ? profilerFor(call.context) : nullptr;
    if (profiler != nullptr && start(*profiler)) {
      // Held until the exit: the next profiled launch waits for this one's counters.
      t_launch.profiling = true;
      t_launch.context = call.context;
      return;
    }
    mutex_.unlock();
    return;
  }
  if (t_launch.depth == 0 || --t_launch.depth > 0 || !t_launch.profiling) return;
  t_launch.profiling = false;
  auto it = contexts_.find(t_launch.context);
  if (it != contexts_.end()) finish(it->second, call.correlationId);
  mutex_.unlock();
}

bool KernelMetricCollector::shouldProfile(const char* symbol) {
  if (profiled_ >= kMaxProfiledLaunches) return false;
  if (!match_ && !chosen_.load(std::memory_order_acquire)) return false;
  auto [it, inserted] = symbols_.try_emplace(symbol);
  if (inserted) {
    bool matches = false;
    if (match_) {
      matches = std::regex_search(symbol, *match_) || std::regex_search(demangled(symbol), *match_);
    } else {
      matches = std::find(chosen_names_.begin(), chosen_names_.end(), symbol) != chosen_names_.end();
    }
    if (matches) it->second = 0;
  }
  if (!it->second || *it->second >= launches_per_kernel_) return false;
  ++*it->second;
  return true;
}

KernelMetricCollector::ContextProfiler* KernelMetricCollector::profilerFor(CUcontext context) {
  auto [it, inserted] = contexts_.try_emplace(context);
  ContextProfiler& profiler = it->second;
  if (!inserted) return profiler.usable ? &profiler : nullptr;
  const std::string prefix = "kernel metrics are off";
  if (!profiler_initialized_ && !profiler_failed_) {
    auto init = cuptiParams<CUpti_Profiler_Initialize_Params, CUpti_Profiler_Initialize_Params_STRUCT_SIZE>();
    CUptiResult r = api_.profilerInitialize(&init);
    profiler_initialized_ = r == CUPTI_SUCCESS;
    profiler_failed_ = !profiler_initialized_;
    if (profiler_failed_) warn(prefix + ": CUPTI's profiler did not initialize: " + describeProfilerResult(api_, r));
  }
  if (!profiler_initialized_) return nullptr;
  if (CUptiResult r = api_.getDeviceId(context, &profiler.device); r != CUPTI_SUCCESS) {
    warn(prefix + " for a context: its device is unknown: " + describeProfilerResult(api_, r));
    return nullptr;
  }
  const std::string on_device = prefix + " on device " + std::to_string(profiler.device) + ": ";
  auto chip = cuptiParams<CUpti_Device_GetChipName_Params, CUpti_Device_GetChipName_Params_STRUCT_SIZE>();
  chip.deviceIndex = profiler.device;
  if (CUptiResult r = api_.deviceGetChipName(&chip); r != CUPTI_SUCCESS || chip.pChipName == nullptr) {
    warn(on_device + "no chip name: " + describeProfilerResult(api_, r));
    return nullptr;
  }
  auto availability = cuptiParams<CUpti_Profiler_GetCounterAvailability_Params,
                                  CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE>();
  availability.ctx = context;
  std::vector<uint8_t> availability_image;
  if (api_.getCounterAvailability(&availability) == CUPTI_SUCCESS && availability.counterAvailabilityImageSize > 0) {
    availability_image.resize(availability.counterAvailabilityImageSize);
    availability.pCounterAvailabilityImage = availability_image.data();
    if (api_.getCounterAvailability(&availability) != CUPTI_SUCCESS) availability_image.clear();
  }
  std::string error;
  if (!buildKernelMetricConfig(api_, chip.pChipName, availability_image, profiler.config, error)) {
    warn(on_device + error);
    return nullptr;
  }
  if (!profiler.config.unavailable.empty()) {
    std::string names;
    for (const auto& m : profiler.config.unavailable) names += (names.empty() ? "" : ", ") + m;
    warn("kernel metrics on device " + std::to_string(profiler.device) + " (" + profiler.config.chip +
         ") leave out what the chip does not offer: " + names);
  }
  for (const auto& m : profiler.config.metrics) profiler.metric_names.push_back(m.c_str());
  auto give_up = [&](const std::string& why) {
    warn(on_device + why);
    releaseKernelMetricConfig(api_, profiler.config);
    return nullptr;
  };

  auto enable = cuptiParams<CUpti_RangeProfiler_Enable_Params, CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE>();
  enable.ctx = context;
  if (CUptiResult r = api_.enable(&enable); r != CUPTI_SUCCESS) {
    std::string why = describeProfilerResult(api_, r);
    if (r == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES)
      why +=
          ": GPU performance counters are restricted to administrators (run as root, or load the driver with "
          "NVreg_RestrictProfilingToAdminUsers=0)";
    return give_up(why);
  }
  profiler.profiler = enable.pRangeProfilerObject;
  auto size = cuptiParams<CUpti_RangeProfiler_GetCounterDataSize_Params,
                          CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE>();
  size.pRangeProfilerObject = profiler.profiler;
  size.pMetricNames = profiler.metric_names.data();
  size.numMetrics = profiler.metric_names.size();
  size.maxNumOfRanges = 1;
  size.maxNumRangeTreeNodes = 1;
  CUptiResult r = api_.getCounterDataSize(&size);
  if (r == CUPTI_SUCCESS) profiler.counter_data.resize(size.counterDataSize);
  if (r != CUPTI_SUCCESS || !resetCounterData(profiler)) {
    auto disable = cuptiParams<CUpti_RangeProfiler_Disable_Params, CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE>();
    disable.pRangeProfilerObject = profiler.profiler;
    api_.disable(&disable);
    profiler.profiler = nullptr;
    return give_up("no counter data image: " + describeProfilerResult(api_, r));
  }
  profiler.usable = true;
  return &profiler;
}

bool KernelMetricCollector::resetCounterData(ContextProfiler& profiler) {
  auto init = cuptiParams<CUpti_RangeProfiler_CounterDataImage_Initialize_Params,
                          CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE>();
  init.pRangeProfilerObject = profiler.profiler;
  init.counterDataSize = profiler.counter_data.size();
  init.pCounterData = profiler.counter_data.data();
  return api_.counterDataImageInitialize(&init) == CUPTI_SUCCESS;
}

bool KernelMetricCollector::start(ContextProfiler& profiler) {
  auto set = cuptiParams<CUpti_RangeProfiler_SetConfig_Params, CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE>();
  set.pRangeProfilerObject = profiler.profiler;
  set.configSize = profiler.config.image.size();
  set.pConfig = profiler.config.image.data();
  set.counterDataImageSize = profiler.counter_data.size();
  set.pCounterDataImage = profiler.counter_data.data();
  set.range = CUPTI_AutoRange;
  set.replayMode = CUPTI_KernelReplay;
  set.maxRangesPerPass = 1;
  set.numNestingLevels = 1;
  set.minNestingLevel = 1;
  set.passIndex = 0;
  set.targetNestingLevel = 1;
  CUptiResult r = api_.setConfig(&set);
  auto start_params = cuptiParams<CUpti_RangeProfiler_Start_Params, CUpti_RangeProfiler_Start_Params_STRUCT_SIZE>();
  start_params.pRangeProfilerObject = profiler.profiler;
  if (r == CUPTI_SUCCESS) r = api_.start(&start_params);
  if (r != CUPTI_SUCCESS) {
    warn("kernel metrics on device " + std::to_string(profiler.device) +
         ": the range profiler did not start: " + describeProfilerResult(api_, r));
    return false;
  }
  ++profiled_;
  return true;
}

void KernelMetricCollector::finish(ContextProfiler& profiler, uint32_t correlation_id) {
  const std::string prefix = "kernel metrics on device " + std::to_string(profiler.device) + ": ";
  auto stop = cuptiParams<CUpti_RangeProfiler_Stop_Params, CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE>();
  stop.pRangeProfilerObject = profiler.profiler;
  CUptiResult r = api_.stop(&stop);
  if (r == CUPTI_SUCCESS && !stop.isAllPassSubmitted) {
    warn(prefix + "a launch was not replayed for every pass; its counters are left out");
    resetCounterData(profiler);
    return;
  }
  auto decode = cuptiParams<CUpti_RangeProfiler_DecodeData_Params, CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE>();
  decode.pRangeProfilerObject = profiler.profiler;
  if (r == CUPTI_SUCCESS) r = api_.decodeData(&decode);
  auto info = cuptiParams<CUpti_RangeProfiler_GetCounterDataInfo_Params,
                          CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE>();
  info.pCounterDataImage = profiler.counter_data.data();
  info.counterDataImageSize = profiler.counter_data.size();
  if (r == CUPTI_SUCCESS) r = api_.getCounterDataInfo(&info);
  std::vector<double> values(profiler.metric_names.size());
  auto evaluate = cuptiParams<CUpti_Profiler_Host_EvaluateToGpuValues_Params,
                              CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE>();
  evaluate.pHostObject = profiler.config.host;
  evaluate.pCounterDataImage = profiler.counter_data.data();
  evaluate.counterDataImageSize = profiler.counter_data.size();
  evaluate.rangeIndex = 0;
  evaluate.ppMetricNames = profiler.metric_names.data();
  evaluate.numMetrics = profiler.metric_names.size();
  evaluate.pMetricValues = values.data();
  if (r == CUPTI_SUCCESS && info.numTotalRanges < 1) {
    warn(prefix + "a profiled launch left no range (the kernel did not run?)");
  } else if (r == CUPTI_SUCCESS && (r = api_.hostEvaluateToGpuValues(&evaluate)) == CUPTI_SUCCESS) {
    format::KernelMetricsRecord record;
    record.correlation_id = correlation_id;
    record.device = profiler.device;
    record.passes = static_cast<uint32_t>(profiler.config.passes);
    const auto& quantities = kernelQuantities();
    for (size_t i = 0; i < profiler.config.quantities.size(); ++i)
      record.*(quantities[profiler.config.quantities[i]].field) = values[i];
    measured_.push_back(record);
  }
  if (r != CUPTI_SUCCESS) warn(prefix + "a profiled launch's counters were lost: " + describeProfilerResult(api_, r));
  if (!resetCounterData(profiler)) {
    warn(prefix + "the counter data image could not be reset; no more launches are profiled there");
    profiler.usable = false;
  }
}

void KernelMetricCollector::warn(const std::string& line) {
  if (std::find(said_.begin(), said_.end(), line) != said_.end()) return;
  said_.push_back(line);
  warnings_.push_back(line);
}

void KernelMetricCollector::takeMeasured(std::vector<format::KernelMetricsRecord>& out) {
  std::lock_guard<std::mutex> lock(mutex_);
  out.insert(out.end(), measured_.begin(), measured_.end());
  measured_.clear();
}

std::vector<std::string> KernelMetricCollector::takeWarnings() {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::exchange(warnings_, {});
}

uint64_t KernelMetricCollector::profiledLaunches() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return profiled_;
}

}  // namespace gpuxray::inject
