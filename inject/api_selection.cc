#include "inject/api_selection.h"

#include <array>

namespace gpuxray::inject {
namespace {

bool startsWithAny(std::string_view name, std::initializer_list<std::string_view> prefixes) {
  for (auto prefix : prefixes) {
    if (name.substr(0, prefix.size()) == prefix) return true;
  }
  return false;
}

}  // namespace

bool isTracedRuntimeApi(std::string_view name) {
  return !startsWithAny(name, {"cudaGetDevice", "cudaSetDevice", "cudaGetLastError", "cudaPeekAtLastError",
                               "cudaStreamIsCapturing", "cudaStreamGetCaptureInfo", "cudaThreadExchangeStreamCaptureMode",
                               "cudaPointerGetAttributes", "cudaDeviceGetAttribute", "cudaFuncGetAttributes",
                               "cudaGetDeviceProperties", "cudaGetDeviceCount", "cudaEventQuery", "cudaStreamQuery",
                               "cudaDriverGetVersion", "cudaRuntimeGetVersion", "cudaGetDriverEntryPoint",
                               "cudaGetFuncBySymbol", "cudaOccupancy", "cudaGetErrorString", "cudaGetErrorName",
                               "cudaGetSymbolAddress", "cudaStreamGetPriority", "cudaStreamGetFlags",
                               "cudaStreamGetDevice", "cudaStreamGetId", "cudaDeviceGetStreamPriorityRange"});
}

bool isTracedDriverApi(std::string_view name) {
  return startsWithAny(name, {"cuLaunch", "cuGraphLaunch", "cuMemcpy", "cuMemset", "cuMemAlloc", "cuMemFree",
                              "cuMemCreate", "cuMemRelease", "cuStreamSynchronize", "cuCtxSynchronize",
                              "cuEventSynchronize", "cuStreamWaitEvent", "cuEventRecord", "cuModuleLoad",
                              "cuLibraryLoad"});
}

}  // namespace gpuxray::inject
