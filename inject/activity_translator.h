// Turns CUPTI activity records into trace records. It runs on the capture's background thread,
// never in a CUPTI callback. It keeps what pairing needs (NVTX range starts waiting for their
// ends, marker data waiting for its marker) and counts what it cannot translate.
#pragma once

#include <cupti.h>

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "proto/trace_writer.h"

namespace gpuxray::inject {

struct TranslationStats {
  // Records seen, by CUpti_ActivityKind value.
  std::array<uint64_t, CUPTI_ACTIVITY_KIND_COUNT> seen{};
  // Kinds this translator does not handle (counted, not written).
  uint64_t unknown_kind = 0;
  // Kernels, copies and memsets delivered without an end time (a forced flush caught them
  // running); written with end = start and counted here.
  uint64_t incomplete = 0;
  // NVTX range ends without a start, and starts never closed by the end of the capture.
  uint64_t unmatched_nvtx = 0;
};

class ActivityTranslator {
 public:
  // Gives the name of a runtime or driver API function (CUPTI's cuptiGetCallbackName); may
  // return nullptr.
  using ApiNameLookup = std::function<const char*(CUpti_CallbackDomain domain, uint32_t cbid)>;

  ActivityTranslator(format::TraceWriter& writer, ApiNameLookup api_names);

  void translate(const CUpti_Activity& record);

  // Devices from CUPTI's DEVICE records, by device id, as translated so far. The capture
  // completes them with the driver attributes CUPTI lacks before writing them.
  const std::unordered_map<uint32_t, format::DeviceProperties>& devices() const { return devices_; }

  // Writes NVTX ranges still open (end = their start, counted as unmatched); call at the end.
  void finish();

  const TranslationStats& stats() const { return stats_; }

 private:
  // What a MARKER start record said, kept until its end record arrives.
  struct OpenRange {
    format::NvtxEventRecord event;
  };

  format::TraceWriter& writer_;
  ApiNameLookup api_names_;
  TranslationStats stats_;
  std::unordered_map<uint32_t, format::DeviceProperties> devices_;
  std::unordered_map<uint32_t, OpenRange> open_ranges_;
  // MARKER_DATA (color, category, payload) by marker id, until the marker's record is written.
  std::unordered_map<uint32_t, format::NvtxEventRecord> marker_data_;
  std::unordered_map<uint64_t, bool> named_api_functions_;
};

}  // namespace gpuxray::inject
