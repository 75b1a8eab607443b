// Where a capture takes NCCL's operations from. NCCL loads one profiler plugin; when that is this
// library and NCCL is new enough to load it, the plugin gives the most detail (algorithm, protocol,
// channels, network bytes). Otherwise NCCL's NVTX ranges (domain "NCCL", recorded through CUPTI,
// their payloads decoded into operation, bytes, root or peer and communicator) stand in, if they are
// recorded at all. Decided once, when the capture starts; the file header says which.
#pragma once

#include <string>

#include "proto/records.h"

namespace gpuxray::inject {

struct NcclCaptureInputs {
  // NCCL_PROFILER_PLUGIN, NVTX_INJECTION64_PATH and NCCL_NVTX_DISABLE (null when unset). The library's
  // constructor points the first two at itself unless the user set them.
  const char* profiler_plugin = nullptr;
  const char* nvtx_injection = nullptr;
  const char* nccl_nvtx_disable = nullptr;
  // This library's own path; empty when unknown (a path in the variables is then taken for it).
  std::string library_path;
  // ncclGetVersion() of the NCCL loaded when the capture starts; 0 when none is loaded yet.
  int nccl_version = 0;
  // NVTX is among the captured categories, and CUPTI (which records NVTX) is ours.
  bool nvtx_configured = false;
  bool cupti_active = false;
};

struct NcclCaptureChoice {
  format::NcclCaptureSource source = format::NcclCaptureSource::kUnknown;
  // Why not the plugin, and what stands in: one line for the log and the trailer. Empty for the plugin.
  std::string note;
};

NcclCaptureChoice chooseNcclCaptureSource(const NcclCaptureInputs& inputs);

// ncclGetVersion() of the NCCL in this process: one in the global scope (linked into the program,
// or loaded RTLD_GLOBAL), else a libnccl.so* loaded privately (as PyTorch's wheels load it). 0 when
// there is none, or it is linked statically into a library that does not export it.
int loadedNcclVersion();

// NCCL's version code as text: 22803 -> "2.28.3"; codes before 2.9 (2708) -> "2.7.8"; 0 -> "".
std::string ncclVersionText(int code);

}  // namespace gpuxray::inject
