#include "inject/cupti_layouts.h"

#include <array>

namespace gpuxray::inject {
namespace {

constexpr uint32_t kFirstCuda13Api = 130000;
constexpr uint32_t kLastCuda13Api = 130099;

struct KnownVersion {
  uint32_t api_version;
  CuptiRecordLayouts layouts;
};

// CUDA 12.x delivers Kernel9 throughout (Kernel10 is new in 13.0); Memcpy6 and Synchronization2
// replaced Memcpy5 and Synchronization in 12.8; Memory4 replaced Memory3 in 12.6; MarkerData2
// (with the NVTX domain of an extended payload) is new in 13.0. CUDA 12.9 Update 1's header says
// the device name is shared (not to be freed) and that the client frees overheadData; for 12.4 to
// 12.8 neither is confirmed, so neither is freed. CUPTI API 25 was never released; 27 (CUDA 12.9)
// is left out: no header of it was found.
constexpr std::array<KnownVersion, 5> kCuda12 = {{
    {22, {"CUDA 12.4", 9, 5, 3, 1, 1, false, false}},
    {23, {"CUDA 12.5", 9, 5, 3, 1, 1, false, false}},
    {24, {"CUDA 12.6", 9, 5, 4, 1, 1, false, false}},
    {26, {"CUDA 12.8", 9, 6, 4, 2, 1, false, false}},
    {28, {"CUDA 12.9 Update 1", 9, 6, 4, 2, 1, false, true}},
}};

}  // namespace

std::optional<CuptiRecordLayouts> cuptiRecordLayouts(uint32_t api_version) {
  if (api_version >= kFirstCuda13Api && api_version <= kLastCuda13Api) return CuptiRecordLayouts{};
  for (const auto& known : kCuda12) {
    if (known.api_version == api_version) return known.layouts;
  }
  return std::nullopt;
}

std::string knownCuptiApiVersions() {
  std::string text;
  for (const auto& known : kCuda12) text += std::to_string(known.api_version) + " (" + known.layouts.toolkit + "), ";
  return text + "and " + std::to_string(kFirstCuda13Api) + "-" + std::to_string(kLastCuda13Api) + " (CUDA 13.0)";
}

}  // namespace gpuxray::inject
