// A stand-in for libcupti that plays CUPTI's part in a capture: it hands out the buffer callbacks'
// buffers, packs queued hand-built records into them at each flush, and reports drops. One fake
// per process (CUPTI's callbacks carry no user data); tests call reset() first.
#pragma once

#include <cupti.h>

#include <cstring>
#include <mutex>
#include <set>
#include <string>
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
    flushes = forced_flushes = buffers_refused = 0;
    queued_.clear();
    request_ = nullptr;
    complete_ = nullptr;
  }

  // A record CUPTI will deliver at the next flush.
  template <typename Record>
  void queue(const Record& record) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<uint8_t> bytes(sizeof(Record));
    std::memcpy(bytes.data(), &record, sizeof(Record));
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
  int flushes = 0;
  int forced_flushes = 0;
  int buffers_refused = 0;

  inject::CuptiApi api() const {
    inject::CuptiApi api;
    api.getVersion = [](uint32_t* version) {
      *version = 130001;
      return CUPTI_SUCCESS;
    };
    api.getTimestamp = [](uint64_t* timestamp) {
      timespec now{};
      clock_gettime(CLOCK_REALTIME, &now);
      *timestamp = static_cast<uint64_t>(now.tv_sec) * 1000000000u + static_cast<uint64_t>(now.tv_nsec);
      return CUPTI_SUCCESS;
    };
    api.getResultString = [](CUptiResult result, const char** text) {
      *text = result == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED ? "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"
                                                                        : "CUPTI_ERROR_UNKNOWN";
      return CUPTI_SUCCESS;
    };
    api.getCallbackName = [](CUpti_CallbackDomain domain, uint32_t cbid, const char** name) {
      *name = callbackName(domain, cbid);
      return CUPTI_SUCCESS;
    };
    api.subscribe = [](CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*) { return instance().subscribe_result; };
    api.unsubscribe = [](CUpti_SubscriberHandle) { return CUPTI_SUCCESS; };
    api.activityEnable = [](CUpti_ActivityKind kind) {
      instance().enabled_kinds.insert(kind);
      return CUPTI_SUCCESS;
    };
    api.activityEnableAndDump = api.activityEnable;
    api.activityDisable = [](CUpti_ActivityKind kind) {
      instance().enabled_kinds.erase(kind);
      return CUPTI_SUCCESS;
    };
    api.activityEnableRuntimeApi = [](CUpti_CallbackId cbid, uint8_t enable) {
      if (!enable) instance().runtime_disabled.insert(cbid);
      return CUPTI_SUCCESS;
    };
    api.activityEnableDriverApi = [](CUpti_CallbackId cbid, uint8_t enable) {
      if (enable) instance().driver_enabled.insert(cbid);
      return CUPTI_SUCCESS;
    };
    api.activityRegisterCallbacks = [](CUpti_BuffersCallbackRequestFunc request,
                                       CUpti_BuffersCallbackCompleteFunc complete) {
      instance().request_ = request;
      instance().complete_ = complete;
      return CUPTI_SUCCESS;
    };
    api.activityGetNextRecord = [](uint8_t* buffer, size_t valid, CUpti_Activity** record) {
      size_t offset = 0;
      if (*record != nullptr) {
        offset = static_cast<size_t>(reinterpret_cast<uint8_t*>(*record) - buffer) + recordSize((*record)->kind);
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

  static size_t recordSize(CUpti_ActivityKind kind) {
    switch (kind) {
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      case CUPTI_ACTIVITY_KIND_KERNEL: return sizeof(CUpti_ActivityKernel10);
      case CUPTI_ACTIVITY_KIND_RUNTIME:
      case CUPTI_ACTIVITY_KIND_DRIVER: return sizeof(CUpti_ActivityAPI);
      case CUPTI_ACTIVITY_KIND_DEVICE: return sizeof(CUpti_ActivityDevice5);
      default: return sizeof(CUpti_Activity);
    }
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
    for (size_t b = 0; b < buffers.size(); ++b) {
      auto [buffer, size] = buffers[b];
      size_t used = 0;
      // Everything goes into the first buffer; the others come back empty.
      while (b == 0 && !records.empty() && used + records.front().size() <= size) {
        std::memcpy(buffer + used, records.front().data(), records.front().size());
        used += records.front().size();
        records.erase(records.begin());
      }
      complete_(nullptr, 0, buffer, size, used);
    }
  }

  std::mutex mutex_;
  std::vector<std::vector<uint8_t>> queued_;
  CUpti_BuffersCallbackRequestFunc request_ = nullptr;
  CUpti_BuffersCallbackCompleteFunc complete_ = nullptr;

};

}  // namespace gpuxray::testing
