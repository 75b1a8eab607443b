// Perfetto's native trace format (perfetto.protos.Trace: a file of TracePackets), written with the
// project's wire encoder rather than the Perfetto SDK or libprotobuf. PerfettoWriter is the packet,
// track-descriptor and interning layer; PerfettoSink puts the timeline export's events through it.
//
// Each track's events go to a packet sequence of their own, set up the way the Perfetto SDK sets up
// its sequences: the first packet clears incremental state and names the track as the sequence's
// default, the second is a clock snapshot that starts an incremental clock (id 64) at the first
// event's time, and every event's timestamp is then the delta from the previous one. That is a few
// bytes instead of ten, per event. Descriptors go to a sequence of their own.
//
// Rules it keeps (trace_processor drops data silently otherwise; docs/perfetto-export.md):
// later packets that use interning say they need incremental state (flag 2); interned ids start at 1
// per sequence and field and are defined in the packet that first uses them; flow ids are fixed64,
// one tag each; zero values that mean something (uuid 0, an order of 0, a counter at 0) are written.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "analyzer/export/timeline_sink.h"
#include "proto/trace_writer.h"
#include "proto/wire_encoder.h"

namespace gpuxray::timeline {

// Field numbers of Perfetto's public schema (protos/perfetto/trace/...).
namespace pf {
inline constexpr uint32_t kTracePacket = 1;  // Trace.packet
// TracePacket
inline constexpr uint32_t kClockSnapshot = 6;
inline constexpr uint32_t kTimestamp = 8;
inline constexpr uint32_t kTrustedPacketSequenceId = 10;
inline constexpr uint32_t kTrackEvent = 11;
inline constexpr uint32_t kInternedData = 12;
inline constexpr uint32_t kSequenceFlags = 13;
inline constexpr uint32_t kTracePacketDefaults = 59;
inline constexpr uint32_t kTrackDescriptor = 60;
inline constexpr uint32_t kSeqIncrementalStateCleared = 1;
inline constexpr uint32_t kSeqNeedsIncrementalState = 2;
// TracePacketDefaults, and TrackEventDefaults inside it
inline constexpr uint32_t kTimestampClockId = 58;
inline constexpr uint32_t kTrackEventDefaults = 11;
inline constexpr uint32_t kDefaultTrackUuid = 11;
// ClockSnapshot { repeated Clock clocks = 1; }, Clock
inline constexpr uint32_t kClocks = 1;
inline constexpr uint32_t kClockId = 1;
inline constexpr uint32_t kClockTimestamp = 2;
inline constexpr uint32_t kClockIsIncremental = 3;
inline constexpr uint32_t kClockUnitMultiplierNs = 4;
inline constexpr uint32_t kBuiltinClockBoottime = 6;  // the trace's clock when no other is named
inline constexpr uint32_t kIncrementalClock = 64;     // ids 64-127 are scoped to their sequence
// TrackDescriptor
inline constexpr uint32_t kUuid = 1;
inline constexpr uint32_t kName = 2;
inline constexpr uint32_t kProcess = 3;
inline constexpr uint32_t kThread = 4;
inline constexpr uint32_t kParentUuid = 5;
inline constexpr uint32_t kCounter = 8;
inline constexpr uint32_t kChildOrdering = 11;
inline constexpr uint32_t kSiblingOrderRank = 12;
inline constexpr uint32_t kDescription = 14;
inline constexpr uint32_t kSiblingMergeBehavior = 15;
inline constexpr uint32_t kProcessOrdering = 19;
inline constexpr uint32_t kThreadOrdering = 20;
inline constexpr uint32_t kChildOrderingExplicit = 3;
inline constexpr uint32_t kSiblingMergeNone = 2;
inline constexpr uint32_t kOrderingExplicit = 1;
// ProcessDescriptor / ThreadDescriptor
inline constexpr uint32_t kPid = 1;
inline constexpr uint32_t kProcessName = 6;
inline constexpr uint32_t kTid = 2;
inline constexpr uint32_t kThreadName = 5;
// CounterDescriptor
inline constexpr uint32_t kUnit = 3;
inline constexpr uint32_t kUnitName = 6;
inline constexpr uint32_t kUnitCount = 2;
inline constexpr uint32_t kUnitSizeBytes = 3;
// TrackEvent
inline constexpr uint32_t kDebugAnnotations = 4;
inline constexpr uint32_t kType = 9;
inline constexpr uint32_t kNameIid = 10;
inline constexpr uint32_t kTrackUuid = 11;
inline constexpr uint32_t kCounterValue = 30;
inline constexpr uint32_t kDoubleCounterValue = 44;
inline constexpr uint32_t kFlowIds = 47;
inline constexpr uint32_t kTerminatingFlowIds = 48;
inline constexpr uint32_t kTypeSliceBegin = 1;
inline constexpr uint32_t kTypeSliceEnd = 2;
inline constexpr uint32_t kTypeInstant = 3;
inline constexpr uint32_t kTypeCounter = 4;
// DebugAnnotation
inline constexpr uint32_t kAnnotationNameIid = 1;
inline constexpr uint32_t kUintValue = 3;
inline constexpr uint32_t kIntValue = 4;
inline constexpr uint32_t kDoubleValue = 5;
inline constexpr uint32_t kStringValue = 6;
// InternedData, and {iid = 1, name = 2} in each of its entries
inline constexpr uint32_t kEventNames = 2;
inline constexpr uint32_t kDebugAnnotationNames = 3;
inline constexpr uint32_t kIid = 1;
inline constexpr uint32_t kEntryName = 2;
}  // namespace pf

class PerfettoWriter {
 public:
  // Packets are buffered and handed to `out` about every `flush_bytes`.
  explicit PerfettoWriter(format::ByteSink& out, size_t flush_bytes = 1 << 20);

  // The root track (uuid 0) asking viewers to order processes and threads explicitly.
  void rootDescriptor();
  void trackDescriptor(const TrackSpec& track);

  // The interned id of an event name on the track's sequence; defined in its next event packet.
  uint64_t internEventName(uint64_t track, std::string_view name);
  // The same, remembered under `key` (non-zero, standing for one name) to skip hashing the text.
  uint64_t internEventName(uint64_t track, uint32_t key, std::string_view name);

  // One TrackEvent packet on the track's sequence. Times on one track must not decrease.
  // `flow_ids` start (or continue) flows; `terminating_flow_ids` end them.
  void event(uint64_t track, uint32_t type, uint64_t timestamp, uint64_t name_iid, std::span<const Arg> args,
             std::span<const uint64_t> flow_ids, std::span<const uint64_t> terminating_flow_ids);
  void counter(uint64_t track, uint64_t timestamp, int64_t value);
  void counter(uint64_t track, uint64_t timestamp, double value);

  // Forgets the sequences written so far (their tracks get no more events): bounds the memory.
  void closeSequences() {
    sequences_.clear();
    last_sequence_ = nullptr;
  }

  // Hands what is buffered to the output; throws std::runtime_error if it cannot be written.
  void flush();
  uint64_t bytesWritten() const { return written_ + buffer_.size(); }
  uint64_t packets() const { return packets_; }

 private:
  struct Sequence {
    uint32_t id = 0;
    bool set_up = false;
    uint64_t last_timestamp = 0;
    std::unordered_map<std::string, uint64_t> event_names;
    std::vector<uint32_t> iid_by_key;
    std::vector<std::pair<const char*, uint64_t>> annotation_names;
    format::WireEncoder pending_interned;  // InternedData fields for the next event packet
  };

  Sequence& sequence(uint64_t track);
  // Before a sequence's first event: its defaults, and its clock starting at `timestamp`.
  void setUp(Sequence& sequence, uint64_t track, uint64_t timestamp);
  uint64_t internAnnotationName(Sequence& sequence, const char* name);
  // Starts an event packet: its delta timestamp, sequence id and flags, and pending interned data.
  void eventPacketHeader(format::WireEncoder& packet, Sequence& sequence, uint64_t timestamp);
  void afterPacket();

  format::ByteSink& out_;
  size_t flush_bytes_;
  format::WireEncoder buffer_;
  uint32_t next_sequence_ = 2;  // 1 holds the descriptors
  bool descriptors_started_ = false;
  std::unordered_map<uint64_t, Sequence> sequences_;  // by track
  uint64_t last_track_ = 0;
  Sequence* last_sequence_ = nullptr;
  uint64_t written_ = 0;
  uint64_t packets_ = 0;
};

// The timeline export written as a Perfetto trace.
class PerfettoSink final : public TimelineSink {
 public:
  explicit PerfettoSink(format::ByteSink& out) : writer_(out) {}
  void begin(const TraceInfo& info) override;
  void beginRank(int32_t rank) override;
  void track(const TrackSpec& track) override { writer_.trackDescriptor(track); }
  void sliceBegin(const SliceEvent& slice) override;
  void sliceEnd(const SliceEvent& slice) override;
  void counter(uint64_t track, int64_t time_ns, int64_t value) override;
  void counter(uint64_t track, int64_t time_ns, double value) override;
  void finish() override { writer_.flush(); }
  uint64_t bytesWritten() const { return writer_.bytesWritten(); }

 private:
  uint64_t timestamp(int64_t time_ns) const { return static_cast<uint64_t>(time_ns + shift_ns_); }

  PerfettoWriter writer_;
  int64_t shift_ns_ = 0;  // added when the run's clock has negative times (Perfetto's are unsigned)
  std::vector<uint64_t> flow_ids_;
};

}  // namespace gpuxray::timeline
