// CUPTI's profiler host API (cupti_profiler_host.h) as both of the capture's profilers use it: the PM
// sampler (metric_sampler.*) and the range profiler of --kernel-metrics (kernel_metric_config.*). On
// the host, with no GPU, it turns a chip's name and a list of metrics into a configuration image and
// the number of passes that image needs.
#pragma once

#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_target.h>

#include <cstddef>
#include <string>
#include <vector>

namespace gpuxray::inject {

// A CUPTI parameter struct: its structSize set, everything else zero.
template <typename Params, size_t Size>
Params cuptiParams() {
  Params p{};
  p.structSize = Size;
  return p;
}

// The functions both profilers take from libcupti; each profiler's table adds its own.
struct ProfilerHostApi {
  CUptiResult (*profilerInitialize)(CUpti_Profiler_Initialize_Params*) = nullptr;
  CUptiResult (*deviceGetChipName)(CUpti_Device_GetChipName_Params*) = nullptr;
  CUptiResult (*hostInitialize)(CUpti_Profiler_Host_Initialize_Params*) = nullptr;
  CUptiResult (*hostDeinitialize)(CUpti_Profiler_Host_Deinitialize_Params*) = nullptr;
  CUptiResult (*hostConfigAddMetrics)(CUpti_Profiler_Host_ConfigAddMetrics_Params*) = nullptr;
  CUptiResult (*hostGetConfigImageSize)(CUpti_Profiler_Host_GetConfigImageSize_Params*) = nullptr;
  CUptiResult (*hostGetConfigImage)(CUpti_Profiler_Host_GetConfigImage_Params*) = nullptr;
  CUptiResult (*hostGetNumOfPasses)(CUpti_Profiler_Host_GetNumOfPasses_Params*) = nullptr;
  CUptiResult (*hostEvaluateToGpuValues)(CUpti_Profiler_Host_EvaluateToGpuValues_Params*) = nullptr;
  CUptiResult (*getResultString)(CUptiResult, const char**) = nullptr;
};

// Binds them from an opened libcupti; appends the names of any missing to `missing`.
void bindProfilerHostApi(void* cupti_library, ProfilerHostApi& api, std::string& missing);

// CUPTI's name of `result` and its number, or the number alone.
std::string describeProfilerResult(const ProfilerHostApi& api, CUptiResult result);

// A host object of profiler `type` for `chip`; null, with `result` saying why, when refused.
CUpti_Profiler_Host_Object* initializeProfilerHost(const ProfilerHostApi& api, CUpti_ProfilerType type,
                                                   const std::string& chip, const std::vector<uint8_t>& availability,
                                                   CUptiResult& result);
void deinitializeProfilerHost(const ProfilerHostApi& api, CUpti_Profiler_Host_Object* host);
CUptiResult addProfilerMetrics(const ProfilerHostApi& api, CUpti_Profiler_Host_Object* host,
                               const std::vector<std::string>& metrics);
// The configuration image of the metrics added to `host`, and the passes it needs.
CUptiResult buildProfilerConfigImage(const ProfilerHostApi& api, CUpti_Profiler_Host_Object* host,
                                     std::vector<uint8_t>& image, size_t& passes);

}  // namespace gpuxray::inject
