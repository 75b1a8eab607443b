#include "inject/cupti_api.h"

#include <dlfcn.h>
#include <link.h>

#include <string_view>
#include <vector>

#include "inject/symbol_binding.h"

namespace gpuxray::inject {
namespace {

// CUDA 13's, then CUDA 12's.
constexpr const char* kLibraryNames[] = {"libcupti.so.13", "libcupti.so.12"};

// Binds every function; returns the names of those missing.
std::string bindAll(void* library, CuptiApi& api) {
  std::string missing;
  bindSymbol(library, "cuptiGetVersion", api.getVersion, missing);
  bindSymbol(library, "cuptiGetTimestamp", api.getTimestamp, missing);
  bindSymbol(library, "cuptiGetResultString", api.getResultString, missing);
  bindSymbol(library, "cuptiGetCallbackName", api.getCallbackName, missing);
  bindSymbol(library, "cuptiSubscribe", api.subscribe, missing);
  bindSymbol(library, "cuptiUnsubscribe", api.unsubscribe, missing);
  bindSymbol(library, "cuptiEnableCallback", api.enableCallback, missing);
  bindSymbol(library, "cuptiActivityEnable", api.activityEnable, missing);
  bindSymbol(library, "cuptiActivityEnableAndDump", api.activityEnableAndDump, missing);
  bindSymbol(library, "cuptiActivityDisable", api.activityDisable, missing);
  bindSymbol(library, "cuptiActivityRegisterCallbacks", api.activityRegisterCallbacks, missing);
  bindSymbol(library, "cuptiActivityGetNextRecord", api.activityGetNextRecord, missing);
  bindSymbol(library, "cuptiActivityGetNumDroppedRecords", api.activityGetNumDroppedRecords, missing);
  bindSymbol(library, "cuptiActivityFlushAll", api.activityFlushAll, missing);
  bindSymbol(library, "cuptiActivitySetAttribute", api.activitySetAttribute, missing);
  bindSymbol(library, "cuptiFinalize", api.finalize, missing);
  bindSymbol(library, "InitializeInjectionNvtx2", api.nvtxInitialize2, missing);
  return missing;
}

// Functions the capture does without when a libcupti lacks them.
void bindOptional(void* library, CuptiApi& api) {
  std::string absent;
  bindSymbol(library, "cuptiActivityGetNvtxExtPayloadAttr", api.activityGetNvtxExtPayloadAttr, absent);
  bindSymbol(library, "cuptiActivityGetNvtxExtPayloadEntryTypeInfo", api.activityGetNvtxExtPayloadEntryTypeInfo,
             absent);
  bindSymbol(library, "InitializeInjectionNvtxExtension", api.nvtxExtensionInitialize, absent);
  bindSymbol(library, "cuptiActivityEnableRuntimeApi", api.activityEnableRuntimeApi, absent);
  bindSymbol(library, "cuptiActivityEnableDriverApi", api.activityEnableDriverApi, absent);
}

// Python environments keep CUDA libraries in site-packages/nvidia/<package>/lib: look beside
// every loaded library that lives in a site-packages folder (PyTorch's, typically).
std::vector<std::string> wheelCandidates() {
  std::vector<std::string> roots;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto& found = *static_cast<std::vector<std::string>*>(data);
        std::string_view path = info->dlpi_name != nullptr ? info->dlpi_name : "";
        for (std::string_view marker : {"/site-packages/", "/dist-packages/"}) {
          size_t at = path.find(marker);
          if (at == std::string_view::npos) continue;
          std::string root(path.substr(0, at + marker.size()));
          bool known = false;
          for (const auto& r : found) known |= r == root;
          if (!known) found.push_back(root);
        }
        return 0;
      },
      &roots);
  std::vector<std::string> candidates;
  for (const auto& root : roots) {
    for (const char* package : {"nvidia/cu13/lib/", "nvidia/cuda_cupti/lib/", "nvidia/cupti/lib/", "torch/lib/"}) {
      for (const char* name : kLibraryNames) candidates.push_back(root + package + name);
    }
  }
  return candidates;
}

std::vector<std::string> toolkitCandidates(const EnvironmentLookup& environment) {
  std::vector<std::string> roots;
  for (const char* variable : {"CUDA_HOME", "CUDA_PATH"}) {
    if (const char* root = environment(variable); root != nullptr && *root != '\0') roots.emplace_back(root);
  }
  roots.emplace_back("/usr/local/cuda");
  std::vector<std::string> candidates;
  for (const auto& root : roots) {
    for (const char* folder : {"/extras/CUPTI/lib64/", "/lib64/", "/targets/x86_64-linux/lib/", "/targets/sbsa-linux/lib/"}) {
      for (const char* name : kLibraryNames) candidates.push_back(root + folder + name);
    }
  }
  return candidates;
}

// Opens `path` (or a bare name through the linker's search), binds and checks the version.
// Returns an empty string on success, else why it was not usable.
std::string tryLoad(const std::string& path, int flags, LoadedCupti& loaded) {
  void* library = dlopen(path.c_str(), flags);
  if (library == nullptr) return "not found";
  CuptiApi api;
  std::string missing = bindAll(library, api);
  if (!missing.empty()) return "lacks " + missing;
  bindOptional(library, api);
  uint32_t version = 0;
  if (api.getVersion(&version) != CUPTI_SUCCESS) return "cuptiGetVersion failed";
  auto layouts = cuptiRecordLayouts(version);
  if (!layouts) {
    return "CUPTI API version " + std::to_string(version) + ", whose record layouts this gpuxray does not know (it reads " +
           knownCuptiApiVersions() + ")";
  }
  char resolved[4096] = {};
  if (dlinfo(library, RTLD_DI_ORIGIN, resolved) == 0) {
    std::string_view name = path;
    if (size_t slash = name.rfind('/'); slash != std::string_view::npos) name.remove_prefix(slash + 1);
    loaded.path = std::string(resolved) + "/" + std::string(name);
  } else {
    loaded.path = path;
  }
  loaded.api = api;
  loaded.api_version = version;
  loaded.layouts = *layouts;
  loaded.handle = library;
  return {};
}

}  // namespace

std::string CuptiApi::describe(CUptiResult result) const {
  const char* text = nullptr;
  if (getResultString != nullptr && getResultString(result, &text) == CUPTI_SUCCESS && text != nullptr)
    return std::string(text) + " (" + std::to_string(static_cast<int>(result)) + ")";
  return "CUPTI error " + std::to_string(static_cast<int>(result));
}

bool loadCupti(const EnvironmentLookup& environment, LoadedCupti& loaded, std::string& error) {
  std::string unusable;
  int places_without = 0;
  auto attempt = [&](const std::string& label, const std::string& path, int flags) {
    std::string why = tryLoad(path, flags, loaded);
    if (why.empty()) return true;
    if (why == "not found") {
      ++places_without;
    } else {
      unusable += (unusable.empty() ? "" : "; ") + label + ": " + why;
    }
    return false;
  };
  if (const char* explicit_path = environment("GPUXRAY_CUPTI_PATH"); explicit_path != nullptr && *explicit_path) {
    std::string why = tryLoad(explicit_path, RTLD_NOW | RTLD_LOCAL, loaded);
    if (why.empty()) return true;
    error = "GPUXRAY_CUPTI_PATH=" + std::string(explicit_path) + " is not usable: " + why;
    return false;
  }
  for (const char* name : kLibraryNames) {
    if (attempt(std::string("already loaded ") + name, name, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD)) return true;
  }
  for (const char* name : kLibraryNames) {
    if (attempt(std::string("library search path ") + name, name, RTLD_NOW | RTLD_LOCAL)) return true;
  }
  for (const auto& path : toolkitCandidates(environment)) {
    if (attempt(path, path, RTLD_NOW | RTLD_LOCAL)) return true;
  }
  for (const auto& path : wheelCandidates()) {
    if (attempt(path, path, RTLD_NOW | RTLD_LOCAL)) return true;
  }
  error = "no usable libcupti.so.13 or libcupti.so.12 (CUPTI API " + knownCuptiApiVersions() + ") in " +
          std::to_string(places_without) +
          " places searched" + (unusable.empty() ? "" : "; unusable: " + unusable) + "; set GPUXRAY_CUPTI_PATH to one";
  return false;
}

}  // namespace gpuxray::inject
