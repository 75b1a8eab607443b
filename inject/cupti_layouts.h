// Which activity record struct a libcupti delivers for each kind the capture reads, by its CUPTI
// API version (cuptiGetVersion). Only versions whose layouts were confirmed from NVIDIA's headers
// are known (docs/cuda-versions.md gives the source of each fact); any other version is refused
// rather than misread. Every struct named here is declared by the CUDA 13.0 headers the project
// builds against (cupti_activity.h and cupti_activity_deprecated.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace gpuxray::inject {

struct CuptiRecordLayouts {
  // What the capture says it read, e.g. "CUDA 12.6".
  const char* toolkit = "CUDA 13.0";
  // CONCURRENT_KERNEL: CUpti_ActivityKernel9 or CUpti_ActivityKernel10.
  uint8_t kernel = 10;
  // MEMCPY: CUpti_ActivityMemcpy5 or CUpti_ActivityMemcpy6.
  uint8_t memcpy = 6;
  // MEMORY2: CUpti_ActivityMemory3 or CUpti_ActivityMemory4.
  uint8_t memory = 4;
  // SYNCHRONIZATION: CUpti_ActivitySynchronization (1) or CUpti_ActivitySynchronization2.
  uint8_t synchronization = 2;
  // MARKER_DATA: CUpti_ActivityMarkerData (1, no NVTX extended payloads) or CUpti_ActivityMarkerData2.
  uint8_t marker_data = 2;
  // Whether the client frees (with free()) CUpti_ActivityDevice5::name and
  // CUpti_ActivityOverhead3::overheadData: the header of the version says so, or they are left alone
  // (a shared name must not be freed; an overhead detail left unfreed costs a few bytes).
  bool client_frees_device_name = true;
  bool client_frees_overhead_data = true;
};

// The layouts of a CUPTI API version, or nullopt when this gpuxray does not know them.
std::optional<CuptiRecordLayouts> cuptiRecordLayouts(uint32_t api_version);

// For messages: "22 (CUDA 12.4), 23 (CUDA 12.5), ... and 130000-130099 (CUDA 13.0)".
std::string knownCuptiApiVersions();

}  // namespace gpuxray::inject
