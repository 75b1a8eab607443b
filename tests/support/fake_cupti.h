// A stand-in for libcupti that plays CUPTI's part in a capture: it hands out the buffer callbacks'
// buffers, packs queued hand-built records into them at each flush, and reports drops. One fake
// per process (CUPTI's callbacks carry no user data); tests call reset() first.
#pragma once

#include <cupti.h>
#include <nvtx3/nvToolsExtPayload.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "inject/cupti_api.h"

namespace gpuxray::testing {

class FakeCupti {
 public:
  static FakeCupti& instance() {
    static FakeCupti fake;
    return fake;
  }

  void reset() {
    std::lock_guard<std::mutex> lock(mutex_);
    subscribe_result = CUPTI_SUCCESS;
    dropped_to_report = 0;
    buffers_per_flush = 1;
    enabled_kinds.clear();
    runtime_disabled.clear();
    driver_enabled.clear();
    enabled_callbacks.clear();
    callback_ = nullptr;
    flushes = forced_flushes = buffers_refused = 0;
    queued_.clear();
    request_ = nullptr;
    complete_ = nullptr;
    payload_schemas_.clear();
    payload_enums_.clear();
    describes_payloads = true;
    payload_descriptions = 0;
    api_version = 130001;
    selects_api_calls = true;
    record_ends_.clear();
  }

  // An NVTX payload schema or enum registered in a CUPTI domain, as an NVTX client registers it.
  // The attributes and their entries must outlive the fake's use (static arrays in the tests).
  void registerPayloadSchema(uint32_t cupti_domain, uint64_t schema_id, const nvtxPayloadSchemaAttr_t& attributes) {
    std::lock_guard<std::mutex> lock(mutex_);
    payload_schemas_[{cupti_domain, schema_id}] = attributes;
  }
  void registerPayloadEnum(uint32_t cupti_domain, uint64_t schema_id, const nvtxPayloadEnumAttr_t& attributes) {
    std::lock_guard<std::mutex> lock(mutex_);
    payload_enums_[{cupti_domain, schema_id}] = attributes;
  }

  // CUPTI calling the subscriber for an API or NVTX call, if that callback is enabled.
  void call(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
    CUpti_CallbackFunc callback = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!enabled_callbacks.contains({domain, cbid})) return;
      callback = callback_;
    }
    if (callback != nullptr) callback(nullptr, domain, cbid, data);
  }
  // A runtime or driver call's callbacks at its entry or exit.
  void callApi(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, CUpti_ApiCallbackSite site) {
    CUpti_CallbackData data{};
    data.callbackSite = site;
    call(domain, cbid, &data);
  }

  // Whether CUPTI would record activities of this kind now (safe while the capture switches kinds).
  bool isEnabled(CUpti_ActivityKind kind) {
    std::lock_guard<std::mutex> lock(mutex_);
    return enabled_kinds.count(kind) == 1;
  }

  // A record CUPTI will deliver at the next flush.
  template <typename Record>
  void queue(const Record& record) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<uint8_t> bytes(sizeof(Record));
    std::memcpy(bytes.data(), &record, sizeof(Record));
    queued_.push_back(std::move(bytes));
  }
  // A record given as its bytes (a layout of another CUDA version than the headers').
  void queueBytes(std::vector<uint8_t> bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    queued_.push_back(std::move(bytes));
  }

  CUptiResult subscribe_result = CUPTI_SUCCESS;
  // Reported by activityGetNumDroppedRecords at the next buffer completion.
  size_t dropped_to_report = 0;
  // How many buffers a flush requests before completing any (CUPTI keeps several in flight).
  int buffers_per_flush = 1;
  std::set<int> enabled_kinds;
  std::set<uint32_t> runtime_disabled;
  std::set<uint32_t> driver_enabled;
  std::set<std::pair<int, uint32_t>> enabled_callbacks;
  int flushes = 0;
  int forced_flushes = 0;
  int buffers_refused = 0;
  // false: a libcupti without cuptiActivityGetNvtxExtPayloadAttr and ...EntryTypeInfo.
  bool describes_payloads = true;
  // Calls of activityGetNvtxExtPayloadAttr.
  int payload_descriptions = 0;
  // What cuptiGetVersion answers.
  uint32_t api_version = 130001;
  // false: a libcupti without cuptiActivityEnableRuntimeApi and ...DriverApi (CUDA 12.4).
  bool selects_api_calls = true;

  inject::CuptiApi api() const {
    inject::CuptiApi api;
    api.getVersion = [](uint32_t* version) {
      *version = instance().api_version;
      return CUPTI_SUCCESS;
    };
    api.getTimestamp = [](uint64_t* timestamp) {
      timespec now{};
      clock_gettime(CLOCK_REALTIME, &now);
      *timestamp = static_cast<uint64_t>(now.tv_sec) * 1000000000u + static_cast<uint64_t>(now.tv_nsec);
      return CUPTI_SUCCESS;
    };
    api.getResultString = [](CUptiResult result, const char** text) {
      *text = result == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
                  ? "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"
                  : "CUPTI_ERROR_UNKNOWN";
      return CUPTI_SUCCESS;
    };
    api.getCallbackName = [](CUpti_CallbackDomain domain, uint32_t cbid, const char** name) {
      *name = callbackName(domain, cbid);
      return CUPTI_SUCCESS;
    };
    api.subscribe = [](CUpti_SubscriberHandle*, CUpti_CallbackFunc callback, void*) {
      if (instance().subscribe_result == CUPTI_SUCCESS) instance().callback_ = callback;
      return instance().subscribe_result;
    };
    api.enableCallback = [](uint32_t enable, CUpti_SubscriberHandle, CUpti_CallbackDomain domain,
                            CUpti_CallbackId cbid) {
      std::lock_guard<std::mutex> lock(instance().mutex_);
      if (enable) {
        instance().enabled_callbacks.insert({domain, cbid});
      } else {
        instance().enabled_callbacks.erase({domain, cbid});
      }
      return CUPTI_SUCCESS;
    };
    api.unsubscribe = [](CUpti_SubscriberHandle) { return CUPTI_SUCCESS; };
    api.activityEnable = [](CUpti_ActivityKind kind) {
      std::lock_guard<std::mutex> lock(instance().mutex_);
      instance().enabled_kinds.insert(kind);
      return CUPTI_SUCCESS;
    };
    api.activityEnableAndDump = api.activityEnable;
    api.activityDisable = [](CUpti_ActivityKind kind) {
      std::lock_guard<std::mutex> lock(instance().mutex_);
      instance().enabled_kinds.erase(kind);
      return CUPTI_SUCCESS;
    };
    if (selects_api_calls) {
      api.activityEnableRuntimeApi = [](CUpti_CallbackId cbid, uint8_t enable) {
        if (!enable) instance().runtime_disabled.insert(cbid);
        return CUPTI_SUCCESS;
      };
      api.activityEnableDriverApi = [](CUpti_CallbackId cbid, uint8_t enable) {
        if (enable) {
          instance().driver_enabled.insert(cbid);
        } else {
          instance().driver_enabled.erase(cbid);
        }
        return CUPTI_SUCCESS;
      };
    }
    api.activityRegisterCallbacks = [](CUpti_BuffersCallbackRequestFunc request,
                                       CUpti_BuffersCallbackCompleteFunc complete) {
      instance().request_ = request;
      instance().complete_ = complete;
      return CUPTI_SUCCESS;
    };
    // Like libcupti, which knows the size of each record it packed.
    api.activityGetNextRecord = [](uint8_t* buffer, size_t valid, CUpti_Activity** record) {
      size_t offset = 0;
      if (*record != nullptr) {
        size_t at = static_cast<size_t>(reinterpret_cast<uint8_t*>(*record) - buffer);
        offset = instance().recordEnd(buffer, at);
      }
      if (offset >= valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
      *record = reinterpret_cast<CUpti_Activity*>(buffer + offset);
      return CUPTI_SUCCESS;
    };
    api.activityGetNumDroppedRecords = [](CUcontext, uint32_t, size_t* dropped) {
      *dropped = instance().dropped_to_report;
      instance().dropped_to_report = 0;
      return CUPTI_SUCCESS;
    };
    api.activityFlushAll = [](uint32_t flag) {
      instance().flush(flag);
      return CUPTI_SUCCESS;
    };
    api.activitySetAttribute = [](CUpti_ActivityAttribute, size_t*, void*) { return CUPTI_SUCCESS; };
    api.finalize = [] { return CUPTI_SUCCESS; };
    if (describes_payloads) {
      api.activityGetNvtxExtPayloadAttr = [](uint32_t cupti_domain, uint64_t schema_id,
                                             CUpti_NvtxExtPayloadAttr* attributes) {
        return instance().describePayload(cupti_domain, schema_id, attributes);
      };
      api.activityGetNvtxExtPayloadEntryTypeInfo = [] { return entryTypeInfo(); };
    }
    return api;
  }

 private:
  static const char* callbackName(CUpti_CallbackDomain domain, uint32_t cbid) {
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
      if (cbid == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000) return "cudaLaunchKernel";
      if (cbid == CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020) return "cudaGetDevice";
      return "cudaSomethingElse";
    }
    if (cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel) return "cuLaunchKernel";
    return "cuCtxGetCurrent";
  }

  // Where the record packed at `at` in `buffer` ends.
  size_t recordEnd(const uint8_t* buffer, size_t at) {
    std::lock_guard<std::mutex> lock(mutex_);
    // The ends are in increasing order: a search, not a walk (a walk made each buffer quadratic in its
    // records, which the per-launch benchmarks measured as the capture's own cost).
    const auto& ends = record_ends_[buffer];
    auto next = std::upper_bound(ends.begin(), ends.end(), at);
    return next == ends.end() ? SIZE_MAX : *next;
  }

  // Like CUPTI: take buffers from the request callback, pack queued records, complete them.
  void flush(uint32_t flag) {
    std::vector<std::vector<uint8_t>> records;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++flushes;
      if (flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) ++forced_flushes;
      records.swap(queued_);
    }
    if (request_ == nullptr) return;
    std::vector<std::pair<uint8_t*, size_t>> buffers;
    for (int i = 0; i < buffers_per_flush; ++i) {
      uint8_t* buffer = nullptr;
      size_t size = 0;
      size_t max_records = 0;
      request_(&buffer, &size, &max_records);
      if (buffer == nullptr) {
        ++buffers_refused;
        continue;
      }
      buffers.emplace_back(buffer, size);
    }
    size_t next = 0;
    for (size_t b = 0; b < buffers.size(); ++b) {
      auto [buffer, size] = buffers[b];
      size_t used = 0;
      std::vector<size_t> ends;
      // Everything goes into the first buffer; the others come back empty.
      while (b == 0 && next < records.size() && used + records[next].size() <= size) {
        std::memcpy(buffer + used, records[next].data(), records[next].size());
        used += records[next].size();
        ends.push_back(used);
        ++next;
      }
      {
        std::lock_guard<std::mutex> lock(mutex_);
        record_ends_[buffer] = std::move(ends);
      }
      complete_(nullptr, 0, buffer, size, used);
    }
    // What did not fit waits for the next flush, as CUPTI keeps records in its own buffers.
    records.erase(records.begin(), records.begin() + static_cast<std::ptrdiff_t>(next));
    if (!records.empty() && !buffers.empty()) {
      std::lock_guard<std::mutex> lock(mutex_);
      queued_.insert(queued_.begin(), std::make_move_iterator(records.begin()), std::make_move_iterator(records.end()));
    }
  }

  // Like libcupti: the description and its entries in malloc'ed copies, which the caller frees.
  CUptiResult describePayload(uint32_t cupti_domain, uint64_t schema_id, CUpti_NvtxExtPayloadAttr* attributes) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++payload_descriptions;
    if (attributes == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
    if (auto schema = payload_schemas_.find({cupti_domain, schema_id}); schema != payload_schemas_.end()) {
      auto* copy = static_cast<nvtxPayloadSchemaAttr_t*>(std::malloc(sizeof(nvtxPayloadSchemaAttr_t)));
      *copy = schema->second;
      copy->entries = copied(schema->second.entries, schema->second.numEntries);
      attributes->type = CUPTI_NVTX_EXT_PAYLOAD_TYPE_SCHEMA;
      attributes->attributes = copy;
      return CUPTI_SUCCESS;
    }
    if (auto values = payload_enums_.find({cupti_domain, schema_id}); values != payload_enums_.end()) {
      auto* copy = static_cast<nvtxPayloadEnumAttr_t*>(std::malloc(sizeof(nvtxPayloadEnumAttr_t)));
      *copy = values->second;
      copy->entries = copied(values->second.entries, values->second.numEntries);
      attributes->type = CUPTI_NVTX_EXT_PAYLOAD_TYPE_ENUM;
      attributes->attributes = copy;
      return CUPTI_SUCCESS;
    }
    return CUPTI_ERROR_INVALID_PARAMETER;
  }

  template <typename Entry>
  static Entry* copied(const Entry* entries, size_t count) {
    if (entries == nullptr || count == 0) return nullptr;
    auto* copy = static_cast<Entry*>(std::malloc(count * sizeof(Entry)));
    std::memcpy(static_cast<void*>(copy), entries, count * sizeof(Entry));
    return copy;
  }

  // NVTX's own table for this platform, as a client reports it: element 0 holds the length.
  static const nvtxPayloadEntryTypeInfo_t* entryTypeInfo() {
    static const auto table = [] {
      std::vector<nvtxPayloadEntryTypeInfo_t> info(NVTX_PAYLOAD_ENTRY_TYPE_INFO_ARRAY_SIZE);
      info[0] = {NVTX_PAYLOAD_ENTRY_TYPE_INFO_ARRAY_SIZE, sizeof(nvtxPayloadEntryTypeInfo_t)};
      auto set = [&](int type, size_t size, size_t align) {
        info[static_cast<size_t>(type)] = {static_cast<uint16_t>(size), static_cast<uint16_t>(align)};
      };
      set(NVTX_PAYLOAD_ENTRY_TYPE_CHAR, 1, 1);
      set(NVTX_PAYLOAD_ENTRY_TYPE_UCHAR, 1, 1);
      set(NVTX_PAYLOAD_ENTRY_TYPE_SHORT, 2, 2);
      set(NVTX_PAYLOAD_ENTRY_TYPE_USHORT, 2, 2);
      set(NVTX_PAYLOAD_ENTRY_TYPE_INT, 4, 4);
      set(NVTX_PAYLOAD_ENTRY_TYPE_UINT, 4, 4);
      set(NVTX_PAYLOAD_ENTRY_TYPE_LONG, 8, 8);
      set(NVTX_PAYLOAD_ENTRY_TYPE_ULONG, 8, 8);
      set(NVTX_PAYLOAD_ENTRY_TYPE_LONGLONG, 8, 8);
      set(NVTX_PAYLOAD_ENTRY_TYPE_ULONGLONG, 8, 8);
      set(NVTX_PAYLOAD_ENTRY_TYPE_INT8, 1, 1);
      set(NVTX_PAYLOAD_ENTRY_TYPE_UINT8, 1, 1);
      set(NVTX_PAYLOAD_ENTRY_TYPE_INT16, 2, 2);
      set(NVTX_PAYLOAD_ENTRY_TYPE_UINT16, 2, 2);
      set(NVTX_PAYLOAD_ENTRY_TYPE_INT32, 4, 4);
      set(NVTX_PAYLOAD_ENTRY_TYPE_UINT32, 4, 4);
      set(NVTX_PAYLOAD_ENTRY_TYPE_INT64, 8, 8);
      set(NVTX_PAYLOAD_ENTRY_TYPE_UINT64, 8, 8);
      set(NVTX_PAYLOAD_ENTRY_TYPE_FLOAT, 4, 4);
      set(NVTX_PAYLOAD_ENTRY_TYPE_DOUBLE, 8, 8);
      set(NVTX_PAYLOAD_ENTRY_TYPE_LONGDOUBLE, 16, 16);
      set(NVTX_PAYLOAD_ENTRY_TYPE_SIZE, 8, 8);
      set(NVTX_PAYLOAD_ENTRY_TYPE_ADDRESS, 8, 8);
      set(NVTX_PAYLOAD_ENTRY_TYPE_WCHAR, 4, 4);
      set(NVTX_PAYLOAD_ENTRY_TYPE_CHAR8, 1, 1);
      set(NVTX_PAYLOAD_ENTRY_TYPE_CHAR16, 2, 2);
      set(NVTX_PAYLOAD_ENTRY_TYPE_CHAR32, 4, 4);
      return info;
    }();
    return table.data();
  }

  std::mutex mutex_;
  std::map<std::pair<uint32_t, uint64_t>, nvtxPayloadSchemaAttr_t> payload_schemas_;
  std::map<std::pair<uint32_t, uint64_t>, nvtxPayloadEnumAttr_t> payload_enums_;
  std::vector<std::vector<uint8_t>> queued_;
  // The end of each record in each buffer handed to the complete callback.
  std::map<const uint8_t*, std::vector<size_t>> record_ends_;
  CUpti_CallbackFunc callback_ = nullptr;
  CUpti_BuffersCallbackRequestFunc request_ = nullptr;
  CUpti_BuffersCallbackCompleteFunc complete_ = nullptr;
};

// The activity records CUPTI delivers for one kernel launch, as the tests and benchmarks queue them
// on the fake: the kernel (stream 7, context-free) and the runtime API call that launched it.
struct KernelActivity {
  const char* name = "gemm_kernel";
  uint32_t correlation = 0;
  uint64_t start = 0;
  uint64_t duration = 1500;
  uint32_t grid_x = 132;
  uint32_t block_x = 256;
  uint16_t registers = 64;
};

inline CUpti_ActivityKernel10 kernelActivity(const KernelActivity& spec) {
  CUpti_ActivityKernel10 kernel{};
  kernel.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  kernel.start = spec.start;
  kernel.end = spec.start + spec.duration;
  kernel.streamId = 7;
  kernel.correlationId = spec.correlation;
  kernel.gridX = static_cast<int32_t>(spec.grid_x);
  kernel.gridY = kernel.gridZ = 1;
  kernel.blockX = static_cast<int32_t>(spec.block_x);
  kernel.blockY = kernel.blockZ = 1;
  kernel.registersPerThread = spec.registers;
  kernel.name = spec.name;
  return kernel;
}

inline CUpti_ActivityAPI launchActivity(uint32_t correlation, uint64_t start, uint64_t duration) {
  CUpti_ActivityAPI call{};
  call.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  call.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
  call.start = start;
  call.end = start + duration;
  call.correlationId = correlation;
  return call;
}

}  // namespace gpuxray::testing
