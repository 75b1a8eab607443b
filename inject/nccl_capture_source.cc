#include "inject/nccl_capture_source.h"

#include <dlfcn.h>
#include <link.h>

#include <cstdlib>
#include <string_view>
#include <vector>

#include "inject/nccl_plugin.h"

namespace gpuxray::inject {
namespace {

bool isSet(const char* value) { return value != nullptr && *value != '\0'; }

// NCCL reads its integer parameters with strtoll: any non-zero number turns NVTX off.
bool disablesNcclNvtx(const char* value) { return isSet(value) && std::strtoll(value, nullptr, 0) != 0; }

// NVTX hands ranges to CUPTI when it loads this library (which forwards them) or libcupti itself.
bool nvtxReachesCupti(const char* injection, const std::string& library_path) {
  if (!isSet(injection) || library_path.empty() || library_path == injection) return true;
  std::string_view path(injection);
  std::string_view file = path.substr(path.find_last_of('/') + 1);
  return file.starts_with("libcupti.so");
}

using GetVersion = int (*)(int* version);

int versionFrom(void* symbol) {
  int version = 0;
  // ncclGetVersion returns ncclSuccess (0) and writes NCCL_VERSION_CODE.
  return symbol != nullptr && reinterpret_cast<GetVersion>(symbol)(&version) == 0 && version > 0 ? version : 0;
}

}  // namespace

NcclCaptureChoice chooseNcclCaptureSource(const NcclCaptureInputs& inputs) {
  std::string plugin_unusable;
  if (isSet(inputs.profiler_plugin) && !inputs.library_path.empty() && inputs.library_path != inputs.profiler_plugin) {
    plugin_unusable = std::string_view(inputs.profiler_plugin) == "none"
                          ? "NCCL_PROFILER_PLUGIN=none turns NCCL's profiler plugins off"
                          : std::string("NCCL_PROFILER_PLUGIN=") + inputs.profiler_plugin +
                                " names another profiler plugin, and NCCL loads only one";
  } else if (inputs.nccl_version > 0 && inputs.nccl_version < kOldestNcclForPlugin) {
    plugin_unusable = "NCCL " + ncclVersionText(inputs.nccl_version) + " is older than " +
                      ncclVersionText(kOldestNcclForPlugin) + ", the oldest that can load gpuxray's profiler plugin";
  }
  if (plugin_unusable.empty()) return {format::NcclCaptureSource::kProfilerPlugin, ""};

  std::string nvtx_missing;
  if (!inputs.nvtx_configured) {
    nvtx_missing = "NVTX is not captured (GPUXRAY_CAPTURE leaves it out)";
  } else if (!inputs.cupti_active) {
    nvtx_missing = "NVTX cannot be captured without CUPTI";
  } else if (disablesNcclNvtx(inputs.nccl_nvtx_disable)) {
    nvtx_missing = std::string("NCCL_NVTX_DISABLE=") + inputs.nccl_nvtx_disable + " turns NCCL's NVTX ranges off";
  } else if (!nvtxReachesCupti(inputs.nvtx_injection, inputs.library_path)) {
    nvtx_missing = std::string("NVTX_INJECTION64_PATH=") + inputs.nvtx_injection + " sends NVTX ranges to another tool";
  }
  if (nvtx_missing.empty()) {
    return {format::NcclCaptureSource::kNvtx,
            plugin_unusable + ": NCCL's operations are taken from its NVTX ranges instead (operation, bytes, root "
                              "or peer, communicator; no algorithm, protocol or channels)"};
  }
  return {format::NcclCaptureSource::kNone,
          plugin_unusable + ", and " + nvtx_missing + ": NCCL's operations are not captured"};
}

int loadedNcclVersion() {
  if (int version = versionFrom(dlsym(RTLD_DEFAULT, "ncclGetVersion"))) return version;
  // Libraries are opened only after the walk over them, which holds the loader's list lock.
  std::vector<std::string> candidates;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        std::string_view path = info->dlpi_name != nullptr ? info->dlpi_name : "";
        std::string_view file = path.substr(path.find_last_of('/') + 1);
        if (file.starts_with("libnccl.so")) static_cast<std::vector<std::string>*>(data)->emplace_back(path);
        return 0;
      },
      &candidates);
  for (const auto& path : candidates) {
    void* library = dlopen(path.c_str(), RTLD_LAZY | RTLD_NOLOAD);
    if (library == nullptr) continue;
    int version = versionFrom(dlsym(library, "ncclGetVersion"));
    dlclose(library);
    if (version > 0) return version;
  }
  return 0;
}

std::string ncclVersionText(int code) {
  if (code <= 0) return "";
  // NCCL_VERSION(X, Y, Z): X*10000 + Y*100 + Z from 2.9 on, X*1000 + Y*100 + Z before.
  int major = code >= 10000 ? code / 10000 : code / 1000;
  int minor = code >= 10000 ? code % 10000 / 100 : code % 1000 / 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(code % 100);
}

}  // namespace gpuxray::inject
