// Every CUPTI function the capture calls, as a table of function pointers. The real table comes
// from a libcupti found and opened at run time (so the library has no link-time dependency on
// it and can say which one it used); tests fill the table with fakes to drive the capture
// without a GPU.
#pragma once

#include <cupti.h>
#include <nvtx3/nvToolsExtPayload.h>

#include <string>

#include "inject/cupti_layouts.h"
#include "inject/process_identity.h"

namespace gpuxray::inject {

struct CuptiApi {
  CUptiResult (*getVersion)(uint32_t* version) = nullptr;
  CUptiResult (*getTimestamp)(uint64_t* timestamp) = nullptr;
  CUptiResult (*getResultString)(CUptiResult result, const char** text) = nullptr;
  CUptiResult (*getCallbackName)(CUpti_CallbackDomain domain, uint32_t cbid, const char** name) = nullptr;
  CUptiResult (*subscribe)(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback, void* data) = nullptr;
  CUptiResult (*unsubscribe)(CUpti_SubscriberHandle subscriber) = nullptr;
  CUptiResult (*enableCallback)(uint32_t enable, CUpti_SubscriberHandle subscriber, CUpti_CallbackDomain domain,
                                CUpti_CallbackId cbid) = nullptr;
  CUptiResult (*activityEnable)(CUpti_ActivityKind kind) = nullptr;
  CUptiResult (*activityEnableAndDump)(CUpti_ActivityKind kind) = nullptr;
  CUptiResult (*activityDisable)(CUpti_ActivityKind kind) = nullptr;
  CUptiResult (*activityRegisterCallbacks)(CUpti_BuffersCallbackRequestFunc request,
                                           CUpti_BuffersCallbackCompleteFunc complete) = nullptr;
  CUptiResult (*activityGetNextRecord)(uint8_t* buffer, size_t valid_bytes, CUpti_Activity** record) = nullptr;
  CUptiResult (*activityGetNumDroppedRecords)(CUcontext context, uint32_t stream, size_t* dropped) = nullptr;
  CUptiResult (*activityFlushAll)(uint32_t flag) = nullptr;
  CUptiResult (*activitySetAttribute)(CUpti_ActivityAttribute attribute, size_t* size, void* value) = nullptr;
  CUptiResult (*finalize)() = nullptr;
  // libcupti's own NVTX injection entry points, to which ours forward.
  int (*nvtxInitialize2)(const void* get_export_table) = nullptr;
  // Exported by libcupti 13 but not declared in its headers; optional (null when absent: NVTX
  // extended payloads are then kept undecoded). The layout of a payload schema or enum registered
  // in an NVTX domain (CUPTI mallocs `attributes` and the entries array; the caller frees them),
  // and the sizes and alignments of NVTX's predefined entry types.
  CUptiResult (*activityGetNvtxExtPayloadAttr)(uint32_t cupti_domain_id, uint64_t schema_id,
                                               CUpti_NvtxExtPayloadAttr* attributes) = nullptr;
  const nvtxPayloadEntryTypeInfo_t* (*activityGetNvtxExtPayloadEntryTypeInfo)() = nullptr;
  // Optional too: NVTX's payload extension entry point, and switching single API calls' records on
  // and off (CUDA 12.5 and later; without them every runtime call is recorded and no driver call).
  int (*nvtxExtensionInitialize)(const void* get_export_table) = nullptr;
  CUptiResult (*activityEnableRuntimeApi)(CUpti_CallbackId cbid, uint8_t enable) = nullptr;
  CUptiResult (*activityEnableDriverApi)(CUpti_CallbackId cbid, uint8_t enable) = nullptr;

  // The name CUPTI gives a result code, or its number.
  std::string describe(CUptiResult result) const;
};

struct LoadedCupti {
  CuptiApi api;
  std::string path;
  uint32_t api_version = 0;
  // The record structs this version delivers.
  CuptiRecordLayouts layouts;
  // The dlopen handle, for the optional APIs (PM sampling) bound later.
  void* handle = nullptr;
};

// Finds a usable libcupti (libcupti.so.13, else libcupti.so.12) whose API version has known record
// layouts (cupti_layouts.h): GPUXRAY_CUPTI_PATH; one the process already loaded; the dynamic linker's
// search (LD_LIBRARY_PATH); CUDA_HOME, CUDA_PATH and /usr/local/cuda; the `nvidia` wheel folders
// next to a loaded PyTorch. On failure returns false with `error` saying what was tried and
// which library is needed.
bool loadCupti(const EnvironmentLookup& environment, LoadedCupti& loaded, std::string& error);

}  // namespace gpuxray::inject
