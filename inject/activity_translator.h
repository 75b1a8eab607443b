// Turns CUPTI activity records into trace records. It runs on the capture's background thread,
// never in a CUPTI callback. It keeps what pairing needs (NVTX range starts waiting for their
// ends, marker data waiting for its marker) and counts what it cannot translate.
//
// Record layouts are those TranslatorOptions::layouts names (cupti_layouts.h): the capture must
// refuse a libcupti whose layouts it does not know before handing records here.
//
// NVTX pairing. CUPTI reports a range as a START and an END MARKER record with the same id, and
// the range's color, category and payload as a separate MARKER_DATA record with that id, which may
// come before or after the MARKER record(s). So:
// - MARKER_DATA for an open range is attached to it at once;
// - a finished NVTX event (an instantaneous mark, or a range at its END) that has no data yet is
//   held until its data arrives (then written at once) or until it has outlived one full
//   flushPending() period, when it is written without data;
// - MARKER_DATA whose marker has not been seen is kept for the same time, then dropped and counted.
// Call flushPending() once per completed CUPTI buffer: an event then waits at most until the end of
// the next buffer for data that was cut off into it. finish() writes everything still held.
//
// An NVTX extended payload (NCCL's ranges carry one) becomes named payload fields, decoded by the
// schema its client registered (NvtxPayloadDecoder), learned from `payload_types`.
#pragma once

#include <cupti.h>

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "inject/cupti_layouts.h"
#include "inject/nvtx_payload_decoder.h"
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
  // Kernels CUPTI gave no times at all (start and end 0): on an H200 with CUDA 13.0, every launch
  // the range profiler replayed (--kernel-metrics). Written with both times 0.
  uint64_t untimed_kernels = 0;
  // NVTX range ends without a start, and starts never closed by the end of the capture.
  uint64_t unmatched_nvtx = 0;
  // MARKER_DATA records whose marker never arrived (dropped).
  uint64_t orphan_marker_data = 0;
  // MARKER_DATA records carrying an NVTX extended payload, and how decoding them went.
  uint64_t extended_payloads = 0;
  NvtxPayloadStats nvtx_payloads;
};

struct TranslatorOptions {
  // The structs the records are (CUDA 13.0's by default).
  CuptiRecordLayouts layouts;
  // CUDA 13.0's cupti_activity.h makes the client free (with free()) CUpti_ActivityDevice5::name,
  // CUpti_ActivityOverhead3::overheadData and the nvtxPayloadData_t of an NVTX extended payload
  // (and its `payload`); `layouts` says which of them an older version leaves to the client. Set
  // this when the records come from a real libcupti; leave it off for hand-built records whose
  // pointers were not malloc'ed.
  bool free_cupti_allocations = false;
  // Held NVTX events and marker data beyond this many force a flushPending() (bounds memory if
  // the capture never calls it).
  size_t max_held_nvtx = 1u << 16;
  // Sees every kernel as it is written, with its name (the capture matches NCCL's kernels to
  // NCCL's operations with it).
  std::function<void(const format::KernelRecord&, const char* name)> on_kernel;
};

// When a record happened on the capture clock (a start, or an instant), for deciding whether it
// falls in a capture window; nullopt for kinds without a time (names, devices, topology, ...) and
// for kernels CUPTI left untimed.
std::optional<uint64_t> activityTime(const CUpti_Activity& record);

class ActivityTranslator {
 public:
  // Gives the name of a runtime or driver API function (CUPTI's cuptiGetCallbackName); may
  // return nullptr.
  using ApiNameLookup = std::function<const char*(CUpti_CallbackDomain domain, uint32_t cbid)>;

  // Without `payload_types` (no describe function) extended payloads keep only their schema id.
  ActivityTranslator(format::TraceWriter& writer, ApiNameLookup api_names, TranslatorOptions options = {},
                     NvtxPayloadTypeSource payload_types = {});

  void translate(const CUpti_Activity& record);

  // Devices from CUPTI's DEVICE records, by device id, as translated so far. The capture
  // completes them with the driver attributes CUPTI lacks before writing them.
  const std::unordered_map<uint32_t, format::DeviceProperties>& devices() const { return devices_; }

  // Ends one holding period for NVTX pairing (see above): writes the finished NVTX events and
  // drops the marker data that have waited a full period. Call after each completed buffer.
  void flushPending();

  // Writes NVTX ranges still open (end = their start, counted as unmatched) and every held NVTX
  // event; call at the end.
  void finish();

  const TranslationStats& stats() const { return stats_; }

 private:
  // The color, category and payload of one marker (a MARKER_DATA record).
  struct MarkerData {
    uint32_t color = 0;
    uint32_t category = 0;
    uint64_t payload_schema = 0;
    std::vector<format::PayloadField> payload;
  };
  // Where a range's nesting depth is counted: per thread (or stream) and domain.
  using DepthKey = std::tuple<uint32_t, uint64_t, format::StringId>;
  // What a MARKER start record said, kept until its end record arrives.
  struct OpenRange {
    format::NvtxEventRecord event;
    bool has_data = false;
    DepthKey depth_key;
  };
  // A finished NVTX event waiting for its MARKER_DATA, or MARKER_DATA waiting for its marker.
  struct HeldEvent {
    format::NvtxEventRecord event;
    uint64_t period = 0;
  };
  struct HeldData {
    MarkerData data;
    uint64_t period = 0;
  };

  template <typename Kernel>
  void translateKernel(const Kernel& k);
  template <typename Copy>
  void translateMemcpy(const Copy& m);
  void translatePeerMemcpy(const CUpti_Activity& record);
  void translateMemset(const CUpti_Activity& record);
  template <typename Memory>
  void translateMemory(const Memory& m);
  void translateApi(const CUpti_Activity& record, format::ApiDomain domain);
  void translateMarker(const CUpti_Activity& record);
  template <typename Data>
  void translateMarkerData(const Data& d);
  template <typename Synchronization>
  void translateSynchronization(const Synchronization& s);
  void translateExternalCorrelation(const CUpti_Activity& record);
  void translateOverhead(const CUpti_Activity& record);
  void translateName(const CUpti_Activity& record);
  void translateStream(const CUpti_Activity& record);
  void translateContext(const CUpti_Activity& record);
  void translateDevice(const CUpti_Activity& record);
  void translateNvLink(const CUpti_Activity& record);
  void translatePcie(const CUpti_Activity& record);

  // end, or start (counted as incomplete) when the record has no valid end.
  uint64_t endOrStart(uint64_t start, uint64_t end);
  template <typename Copy>
  format::MemcpyRecord copyRecord(const Copy& copy, uint32_t src_device, uint32_t dst_device);
  // The device of a context from CONTEXT records, 0 if unknown.
  uint32_t deviceOfContext(uint32_t context) const;
  // The CUDA device index of the GPU with this raw 16-byte uuid (from DEVICE records), -1 if unknown.
  int32_t deviceOfUuid(const std::string& uuid) const;
  // Writes a finished NVTX event now if it has its data, else holds it.
  void finishNvtxEvent(uint32_t id, format::NvtxEventRecord event, bool has_data);
  static void attach(format::NvtxEventRecord& event, MarkerData data);
  void closeDepth(const DepthKey& key);
  void enforceHoldLimit();

  format::TraceWriter& writer_;
  ApiNameLookup api_names_;
  TranslatorOptions options_;
  TranslationStats stats_;
  NvtxPayloadDecoder payload_decoder_;
  std::unordered_map<uint32_t, format::DeviceProperties> devices_;
  std::unordered_map<uint32_t, uint32_t> context_devices_;
  std::unordered_map<uint32_t, OpenRange> open_ranges_;
  std::unordered_map<uint32_t, HeldEvent> held_events_;
  // MARKER_DATA (color, category, payload) by marker id, until the marker's record is written.
  std::unordered_map<uint32_t, HeldData> marker_data_;
  std::map<DepthKey, uint32_t> open_depth_;
  uint64_t period_ = 0;
  std::unordered_map<uint64_t, bool> named_api_functions_;
  // NVLink endpoints already linked to the NVSwitch fabric (raw uuid), so each is written once.
  std::unordered_map<std::string, bool> nvswitch_linked_;
};

}  // namespace gpuxray::inject
