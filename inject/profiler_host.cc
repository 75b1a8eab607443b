#include "inject/profiler_host.h"

#include "inject/symbol_binding.h"

namespace gpuxray::inject {

void bindProfilerHostApi(void* library, ProfilerHostApi& api, std::string& missing) {
  auto bind = [&](const char* symbol, auto& slot) { bindSymbol(library, symbol, slot, missing); };
  bind("cuptiProfilerInitialize", api.profilerInitialize);
  bind("cuptiDeviceGetChipName", api.deviceGetChipName);
  bind("cuptiProfilerHostInitialize", api.hostInitialize);
  bind("cuptiProfilerHostDeinitialize", api.hostDeinitialize);
  bind("cuptiProfilerHostConfigAddMetrics", api.hostConfigAddMetrics);
  bind("cuptiProfilerHostGetConfigImageSize", api.hostGetConfigImageSize);
  bind("cuptiProfilerHostGetConfigImage", api.hostGetConfigImage);
  bind("cuptiProfilerHostGetNumOfPasses", api.hostGetNumOfPasses);
  bind("cuptiProfilerHostEvaluateToGpuValues", api.hostEvaluateToGpuValues);
  bind("cuptiGetResultString", api.getResultString);
}

std::string describeProfilerResult(const ProfilerHostApi& api, CUptiResult result) {
  const char* text = nullptr;
  if (api.getResultString != nullptr && api.getResultString(result, &text) == CUPTI_SUCCESS && text != nullptr)
    return std::string(text) + " (" + std::to_string(static_cast<int>(result)) + ")";
  return "CUPTI error " + std::to_string(static_cast<int>(result));
}

CUpti_Profiler_Host_Object* initializeProfilerHost(const ProfilerHostApi& api, CUpti_ProfilerType type,
                                                   const std::string& chip, const std::vector<uint8_t>& availability,
                                                   CUptiResult& result) {
  auto init = cuptiParams<CUpti_Profiler_Host_Initialize_Params, CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE>();
  init.profilerType = type;
  init.pChipName = chip.c_str();
  init.pCounterAvailabilityImage = availability.empty() ? nullptr : availability.data();
  result = api.hostInitialize(&init);
  return result == CUPTI_SUCCESS ? init.pHostObject : nullptr;
}

void deinitializeProfilerHost(const ProfilerHostApi& api, CUpti_Profiler_Host_Object* host) {
  auto deinit =
      cuptiParams<CUpti_Profiler_Host_Deinitialize_Params, CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE>();
  deinit.pHostObject = host;
  api.hostDeinitialize(&deinit);
}

CUptiResult addProfilerMetrics(const ProfilerHostApi& api, CUpti_Profiler_Host_Object* host,
                               const std::vector<std::string>& metrics) {
  std::vector<const char*> names;
  for (const auto& m : metrics) names.push_back(m.c_str());
  auto add = cuptiParams<CUpti_Profiler_Host_ConfigAddMetrics_Params,
                         CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE>();
  add.pHostObject = host;
  add.ppMetricNames = names.data();
  add.numMetrics = names.size();
  return api.hostConfigAddMetrics(&add);
}

CUptiResult buildProfilerConfigImage(const ProfilerHostApi& api, CUpti_Profiler_Host_Object* host,
                                     std::vector<uint8_t>& image, size_t& passes) {
  passes = 0;
  auto size = cuptiParams<CUpti_Profiler_Host_GetConfigImageSize_Params,
                          CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE>();
  size.pHostObject = host;
  if (CUptiResult r = api.hostGetConfigImageSize(&size); r != CUPTI_SUCCESS) return r;
  image.resize(size.configImageSize);
  auto get =
      cuptiParams<CUpti_Profiler_Host_GetConfigImage_Params, CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE>();
  get.pHostObject = host;
  get.configImageSize = image.size();
  get.pConfigImage = image.data();
  if (CUptiResult r = api.hostGetConfigImage(&get); r != CUPTI_SUCCESS) return r;
  auto count =
      cuptiParams<CUpti_Profiler_Host_GetNumOfPasses_Params, CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE>();
  count.configImageSize = image.size();
  count.pConfigImage = image.data();
  CUptiResult r = api.hostGetNumOfPasses(&count);
  if (r == CUPTI_SUCCESS) passes = count.numOfPasses;
  return r;
}

}  // namespace gpuxray::inject
