#include "analyzer/export/perfetto_writer.h"

#include <cstring>
#include <stdexcept>

namespace gpuxray::timeline {
namespace {

using format::WireEncoder;

// Varint fields whose zero value means something, so it is written rather than left out.
void varintAlways(WireEncoder& e, uint32_t field, uint64_t value) {
  e.tag(field, WireEncoder::kVarint);
  e.varint(value);
}

void fixed64Always(WireEncoder& e, uint32_t field, uint64_t value) {
  e.tag(field, WireEncoder::kFixed64);
  uint8_t bytes[8];
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<uint8_t>(value >> (8 * i));
  e.raw(bytes);
}

uint64_t doubleBits(double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

}  // namespace

PerfettoWriter::PerfettoWriter(format::ByteSink& out, size_t flush_bytes) : out_(out), flush_bytes_(flush_bytes) {}

void PerfettoWriter::afterPacket() {
  ++packets_;
  if (buffer_.size() >= flush_bytes_) flush();
}

void PerfettoWriter::rootDescriptor() {
  buffer_.message(pf::kTracePacket, [&](WireEncoder& packet) {
    packet.message(pf::kTrackDescriptor, [&](WireEncoder& track) {
      varintAlways(track, pf::kUuid, 0);
      track.uintField(pf::kProcessOrdering, pf::kOrderingExplicit);
      track.uintField(pf::kThreadOrdering, pf::kOrderingExplicit);
    });
  });
  afterPacket();
}

void PerfettoWriter::trackDescriptor(const TrackSpec& spec) {
  buffer_.message(pf::kTracePacket, [&](WireEncoder& packet) {
    packet.uintField(pf::kTrustedPacketSequenceId, 1);
    if (!descriptors_started_) packet.uintField(pf::kSequenceFlags, pf::kSeqIncrementalStateCleared);
    descriptors_started_ = true;
    packet.message(pf::kTrackDescriptor, [&](WireEncoder& track) {
      varintAlways(track, pf::kUuid, spec.id);
      track.uintField(pf::kParentUuid, spec.parent);
      switch (spec.kind) {
        case TrackKind::kProcess:
          track.message(pf::kProcess, [&](WireEncoder& process) {
            varintAlways(process, pf::kPid, static_cast<uint64_t>(spec.pid));
            process.stringField(pf::kProcessName, spec.name);
          });
          break;
        case TrackKind::kThread:
          track.message(pf::kThread, [&](WireEncoder& thread) {
            varintAlways(thread, pf::kPid, static_cast<uint64_t>(spec.pid));
            varintAlways(thread, pf::kTid, static_cast<uint64_t>(spec.tid));
            thread.stringField(pf::kThreadName, spec.name);
          });
          break;
        case TrackKind::kCounter:
          track.stringField(pf::kName, spec.name);
          track.message(pf::kCounter, [&](WireEncoder& counter) {
            if (spec.unit == CounterUnit::kBytes) counter.uintField(pf::kUnit, pf::kUnitSizeBytes);
            if (spec.unit == CounterUnit::kCount) counter.uintField(pf::kUnit, pf::kUnitCount);
            counter.stringField(pf::kUnitName, spec.unit_name);
          });
          break;
        case TrackKind::kGroup:
        case TrackKind::kSlices:
          track.stringField(pf::kName, spec.name);
          break;
      }
      track.stringField(pf::kDescription, spec.description);
      if (spec.children_in_order) track.uintField(pf::kChildOrdering, pf::kChildOrderingExplicit);
      varintAlways(track, pf::kSiblingOrderRank, static_cast<uint64_t>(spec.order));
      if (spec.kind != TrackKind::kProcess && spec.kind != TrackKind::kThread)
        track.uintField(pf::kSiblingMergeBehavior, pf::kSiblingMergeNone);
    });
  });
  afterPacket();
}

PerfettoWriter::Sequence& PerfettoWriter::sequence(uint64_t track) {
  if (last_track_ == track && last_sequence_ != nullptr) return *last_sequence_;
  auto [it, inserted] = sequences_.try_emplace(track);
  if (inserted) it->second.id = next_sequence_++;
  last_track_ = track;
  last_sequence_ = &it->second;
  return it->second;
}

void PerfettoWriter::setUp(Sequence& sequence, uint64_t track, uint64_t timestamp) {
  if (sequence.set_up) return;
  sequence.set_up = true;
  sequence.last_timestamp = timestamp;
  // New incremental state: this track is every event's default, clock 64 their clock.
  buffer_.message(pf::kTracePacket, [&](WireEncoder& packet) {
    packet.uintField(pf::kTrustedPacketSequenceId, sequence.id);
    packet.uintField(pf::kSequenceFlags, pf::kSeqIncrementalStateCleared | pf::kSeqNeedsIncrementalState);
    packet.message(pf::kTracePacketDefaults, [&](WireEncoder& defaults) {
      defaults.uintField(pf::kTimestampClockId, pf::kIncrementalClock);
      defaults.message(pf::kTrackEventDefaults,
                       [&](WireEncoder& event) { varintAlways(event, pf::kDefaultTrackUuid, track); });
    });
  });
  afterPacket();
  // Clock 64 starts where the trace's clock is at the first event; each event adds its delta.
  buffer_.message(pf::kTracePacket, [&](WireEncoder& packet) {
    packet.uintField(pf::kTrustedPacketSequenceId, sequence.id);
    packet.uintField(pf::kSequenceFlags, pf::kSeqNeedsIncrementalState);
    packet.message(pf::kClockSnapshot, [&](WireEncoder& snapshot) {
      snapshot.message(pf::kClocks, [&](WireEncoder& clock) {
        clock.uintField(pf::kClockId, pf::kBuiltinClockBoottime);
        varintAlways(clock, pf::kClockTimestamp, timestamp);
      });
      snapshot.message(pf::kClocks, [&](WireEncoder& clock) {
        clock.uintField(pf::kClockId, pf::kIncrementalClock);
        varintAlways(clock, pf::kClockTimestamp, timestamp);
        clock.uintField(pf::kClockIsIncremental, 1);
        clock.uintField(pf::kClockUnitMultiplierNs, 1);
      });
    });
  });
  afterPacket();
}

uint64_t PerfettoWriter::internEventName(uint64_t track, std::string_view name) {
  Sequence& seq = sequence(track);
  auto [it, inserted] = seq.event_names.try_emplace(std::string(name), seq.event_names.size() + 1);
  if (inserted) {
    seq.pending_interned.message(pf::kEventNames, [&, iid = it->second](WireEncoder& entry) {
      entry.uintField(pf::kIid, iid);
      entry.repeatedStringElement(pf::kEntryName, name);
    });
  }
  return it->second;
}

uint64_t PerfettoWriter::internEventName(uint64_t track, uint32_t key, std::string_view name) {
  Sequence& seq = sequence(track);
  if (key >= seq.iid_by_key.size()) seq.iid_by_key.resize(key + 1, 0);
  if (seq.iid_by_key[key] == 0) seq.iid_by_key[key] = static_cast<uint32_t>(internEventName(track, name));
  return seq.iid_by_key[key];
}

uint64_t PerfettoWriter::internAnnotationName(Sequence& seq, const char* name) {
  for (const auto& [known, iid] : seq.annotation_names) {
    if (known == name) return iid;
  }
  uint64_t iid = seq.annotation_names.size() + 1;
  seq.annotation_names.emplace_back(name, iid);
  seq.pending_interned.message(pf::kDebugAnnotationNames, [&](WireEncoder& entry) {
    entry.uintField(pf::kIid, iid);
    entry.repeatedStringElement(pf::kEntryName, name);
  });
  return iid;
}

void PerfettoWriter::eventPacketHeader(WireEncoder& packet, Sequence& seq, uint64_t timestamp) {
  if (timestamp < seq.last_timestamp) throw std::logic_error("perfetto writer: time went back on a track");
  varintAlways(packet, pf::kTimestamp, timestamp - seq.last_timestamp);
  seq.last_timestamp = timestamp;
  packet.uintField(pf::kTrustedPacketSequenceId, seq.id);
  packet.uintField(pf::kSequenceFlags, pf::kSeqNeedsIncrementalState);
  if (!seq.pending_interned.empty()) {
    packet.message(pf::kInternedData, [&](WireEncoder& interned) { interned.raw(seq.pending_interned.bytes()); });
    seq.pending_interned.clear();
  }
}

void PerfettoWriter::event(uint64_t track, uint32_t type, uint64_t timestamp, uint64_t name_iid,
                           std::span<const Arg> args, std::span<const uint64_t> flow_ids,
                           std::span<const uint64_t> terminating_flow_ids) {
  Sequence& seq = sequence(track);
  setUp(seq, track, timestamp);
  uint64_t arg_names[16];
  size_t named = std::min<size_t>(args.size(), 16);
  for (size_t i = 0; i < named; ++i) arg_names[i] = internAnnotationName(seq, args[i].name);
  buffer_.message(pf::kTracePacket, [&](WireEncoder& packet) {
    eventPacketHeader(packet, seq, timestamp);
    packet.message(pf::kTrackEvent, [&](WireEncoder& event) {
      event.uintField(pf::kType, type);
      event.uintField(pf::kNameIid, name_iid);
      for (size_t i = 0; i < named; ++i) {
        const Arg& arg = args[i];
        event.message(pf::kDebugAnnotations, [&](WireEncoder& annotation) {
          annotation.uintField(pf::kAnnotationNameIid, arg_names[i]);
          switch (arg.type) {
            case Arg::Type::kUint:
              varintAlways(annotation, pf::kUintValue, arg.uint_value);
              break;
            case Arg::Type::kInt:
              varintAlways(annotation, pf::kIntValue, static_cast<uint64_t>(arg.int_value));
              break;
            case Arg::Type::kDouble:
              fixed64Always(annotation, pf::kDoubleValue, doubleBits(arg.double_value));
              break;
            case Arg::Type::kString:
              annotation.repeatedStringElement(pf::kStringValue, arg.string_value);
              break;
          }
        });
      }
      for (uint64_t id : flow_ids) fixed64Always(event, pf::kFlowIds, id);
      for (uint64_t id : terminating_flow_ids) fixed64Always(event, pf::kTerminatingFlowIds, id);
    });
  });
  afterPacket();
}

void PerfettoWriter::counter(uint64_t track, uint64_t timestamp, int64_t value) {
  Sequence& seq = sequence(track);
  setUp(seq, track, timestamp);
  buffer_.message(pf::kTracePacket, [&](WireEncoder& packet) {
    eventPacketHeader(packet, seq, timestamp);
    packet.message(pf::kTrackEvent, [&](WireEncoder& event) {
      event.uintField(pf::kType, pf::kTypeCounter);
      varintAlways(event, pf::kCounterValue, static_cast<uint64_t>(value));
    });
  });
  afterPacket();
}

void PerfettoWriter::counter(uint64_t track, uint64_t timestamp, double value) {
  Sequence& seq = sequence(track);
  setUp(seq, track, timestamp);
  buffer_.message(pf::kTracePacket, [&](WireEncoder& packet) {
    eventPacketHeader(packet, seq, timestamp);
    packet.message(pf::kTrackEvent, [&](WireEncoder& event) {
      event.uintField(pf::kType, pf::kTypeCounter);
      fixed64Always(event, pf::kDoubleCounterValue, doubleBits(value));
    });
  });
  afterPacket();
}

void PerfettoWriter::flush() {
  if (buffer_.empty()) return;
  if (!out_.append(buffer_.bytes(), {})) throw std::runtime_error(out_.error());
  written_ += buffer_.size();
  buffer_.clear();
}

void PerfettoSink::begin(const TraceInfo& info) {
  shift_ns_ = info.origin_ns < 0 ? -info.origin_ns : 0;
  writer_.rootDescriptor();
}

// Every track of earlier ranks is complete.
void PerfettoSink::beginRank(int32_t) {
  writer_.closeSequences();
}

void PerfettoSink::sliceBegin(const SliceEvent& slice) {
  uint64_t iid = slice.name.key != 0 ? writer_.internEventName(slice.track, slice.name.key, slice.name.text)
                                     : writer_.internEventName(slice.track, slice.name.text);
  flow_ids_.clear();
  for (const Flow& flow : slice.flows_out) flow_ids_.push_back(flow.id);
  uint64_t terminating = slice.flow_in != nullptr ? slice.flow_in->id : 0;
  std::span<const uint64_t> ends = slice.instant && slice.flow_in != nullptr
                                       ? std::span<const uint64_t>(&terminating, 1)
                                       : std::span<const uint64_t>();
  writer_.event(slice.track, slice.instant ? pf::kTypeInstant : pf::kTypeSliceBegin, timestamp(slice.start_ns), iid,
                slice.args, flow_ids_, ends);
}

void PerfettoSink::sliceEnd(const SliceEvent& slice) {
  uint64_t terminating = slice.flow_in != nullptr ? slice.flow_in->id : 0;
  writer_.event(slice.track, pf::kTypeSliceEnd, timestamp(slice.end_ns), 0, {}, {},
                slice.flow_in != nullptr ? std::span<const uint64_t>(&terminating, 1) : std::span<const uint64_t>());
}

void PerfettoSink::counter(uint64_t track, int64_t time_ns, int64_t value) {
  writer_.counter(track, timestamp(time_ns), value);
}

void PerfettoSink::counter(uint64_t track, int64_t time_ns, double value) {
  writer_.counter(track, timestamp(time_ns), value);
}

}  // namespace gpuxray::timeline
