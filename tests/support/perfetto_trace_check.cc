#include "tests/support/perfetto_trace_check.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <google/protobuf/unknown_field_set.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "perfetto/perfetto_trace_subset.pb.h"

namespace gpuxray::testing {
namespace {

namespace pp = perfetto::protos;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

// Every unknown field anywhere in the message, as "path: field N".
void findUnknownFields(const Message& message, const std::string& path, std::vector<std::string>& errors) {
  const auto* reflection = message.GetReflection();
  const auto& unknown = reflection->GetUnknownFields(message);
  for (int i = 0; i < unknown.field_count(); ++i)
    errors.push_back(path + ": unknown field " + std::to_string(unknown.field(i).number()));
  std::vector<const FieldDescriptor*> fields;
  reflection->ListFields(message, &fields);
  for (const FieldDescriptor* field : fields) {
    if (field->type() != FieldDescriptor::TYPE_MESSAGE) continue;
    if (field->is_repeated()) {
      for (int i = 0; i < reflection->FieldSize(message, field); ++i)
        findUnknownFields(reflection->GetRepeatedMessage(message, field, i), path + "." + field->name(), errors);
    } else {
      findUnknownFields(reflection->GetMessage(message, field), path + "." + field->name(), errors);
    }
  }
}

std::string argText(const pp::DebugAnnotation& a) {
  std::ostringstream text;
  if (a.has_uint_value()) text << a.uint_value();
  if (a.has_int_value()) text << a.int_value();
  if (a.has_double_value()) text << a.double_value();
  if (a.has_string_value()) text << a.string_value();
  if (a.has_bool_value()) text << (a.bool_value() ? "true" : "false");
  return text.str();
}

struct Event {
  int64_t ts = 0;
  size_t position = 0;
  pp::TrackEvent::Type type = pp::TrackEvent::TYPE_UNSPECIFIED;
  uint64_t track = 0;
  std::string name;
  std::map<std::string, std::string> args;
  std::vector<uint64_t> flow_ids;
  std::vector<uint64_t> terminating;
  double counter = 0;
};

constexpr uint32_t kBoottime = 6;

struct SequenceClock {
  bool incremental = false;
  uint64_t unit_ns = 1;
  int64_t at_snapshot = 0;  // this clock's reading at its snapshot, in ns
  int64_t trace_time_at_snapshot = 0;
  int64_t last = 0;  // in ns, for incremental clocks
};

struct SequenceState {
  bool seen = false;
  bool cleared = false;
  std::map<uint64_t, std::string> event_names;
  std::map<uint64_t, std::string> annotation_names;
  std::optional<pp::TracePacketDefaults> defaults;
  std::map<uint32_t, SequenceClock> clocks;  // sequence-scoped clocks (64-127)
};

void intern(std::map<uint64_t, std::string>& table, uint64_t iid, const std::string& name, const std::string& what,
            std::vector<std::string>& errors) {
  if (iid == 0) errors.push_back(what + ": interned id 0");
  auto [it, inserted] = table.emplace(iid, name);
  if (!inserted && it->second != name)
    errors.push_back(what + " " + std::to_string(iid) + " redefined from '" + it->second + "' to '" + name + "'");
}

}  // namespace

const DecodedTrack* DecodedTrace::track(uint64_t uuid) const {
  for (const auto& t : tracks) {
    if (t.uuid == uuid) return &t;
  }
  return nullptr;
}

std::vector<const DecodedTrack*> DecodedTrace::children(uint64_t parent) const {
  std::vector<const DecodedTrack*> result;
  for (const auto& t : tracks) {
    if (t.parent == parent && t.uuid != 0) result.push_back(&t);
  }
  std::stable_sort(result.begin(), result.end(), [](const auto* a, const auto* b) { return a->order < b->order; });
  return result;
}

const DecodedTrack* DecodedTrace::child(uint64_t parent, const std::string& name) const {
  for (const auto* t : children(parent)) {
    if (t->name == name) return t;
  }
  return nullptr;
}

std::vector<const DecodedTrack*> DecodedTrace::processes() const {
  std::vector<const DecodedTrack*> result;
  for (const auto& t : tracks) {
    if (t.kind == DecodedTrack::Kind::kProcess) result.push_back(&t);
  }
  std::stable_sort(result.begin(), result.end(), [](const auto* a, const auto* b) { return a->order < b->order; });
  return result;
}

const DecodedTrack* DecodedTrace::processOf(uint64_t uuid) const {
  const DecodedTrack* t = track(uuid);
  while (t != nullptr && t->kind != DecodedTrack::Kind::kProcess) t = t->parent == 0 ? nullptr : track(t->parent);
  return t;
}

std::vector<const DecodedSlice*> DecodedTrace::slicesOn(uint64_t track_uuid) const {
  std::vector<const DecodedSlice*> result;
  for (const auto& s : slices) {
    if (s.track == track_uuid) result.push_back(&s);
  }
  return result;
}

std::vector<const DecodedSlice*> DecodedTrace::slicesOnLanes(uint64_t track_uuid) const {
  std::set<uint64_t> lanes{track_uuid};
  const DecodedTrack* base = track(track_uuid);
  for (const auto* c : children(track_uuid)) {
    if (base != nullptr && c->name.starts_with(base->name + " (overlap ")) lanes.insert(c->uuid);
  }
  std::vector<const DecodedSlice*> result;
  for (const auto& s : slices) {
    if (lanes.contains(s.track)) result.push_back(&s);
  }
  return result;
}

DecodedTrace decodePerfettoTrace(const std::string& bytes) {
  DecodedTrace out;
  pp::Trace trace;
  if (!trace.ParseFromString(bytes)) {
    out.errors.push_back("the trace does not parse as perfetto.protos.Trace");
    return out;
  }
  findUnknownFields(trace, "Trace", out.errors);
  out.packets = static_cast<uint64_t>(trace.packet_size());

  std::map<uint32_t, SequenceState> sequences;
  std::map<uint64_t, int64_t> last_time;  // per track, in file order
  std::set<int32_t> pids;
  std::vector<Event> events;
  for (int p = 0; p < trace.packet_size(); ++p) {
    const pp::TracePacket& packet = trace.packet(p);
    std::string where = "packet " + std::to_string(p);
    const uint32_t sequence = packet.trusted_packet_sequence_id();
    if (sequence != 0) {
      SequenceState& state = sequences[sequence];
      if (!state.seen && (packet.sequence_flags() & pp::TracePacket::SEQ_INCREMENTAL_STATE_CLEARED) == 0)
        out.errors.push_back(where + ": first packet of sequence " + std::to_string(sequence) +
                             " does not clear incremental state");
      state.seen = true;
      if ((packet.sequence_flags() & pp::TracePacket::SEQ_INCREMENTAL_STATE_CLEARED) != 0) {
        state.cleared = true;
        state.event_names.clear();
        state.annotation_names.clear();
        state.defaults.reset();
      }
      if (packet.has_trace_packet_defaults()) {
        if (!state.cleared) out.errors.push_back(where + ": packet defaults before the sequence's state was cleared");
        state.defaults = packet.trace_packet_defaults();
      }
      if (packet.has_clock_snapshot()) {
        std::optional<int64_t> trace_time;
        for (const auto& clock : packet.clock_snapshot().clocks()) {
          if (clock.clock_id() == kBoottime) trace_time = static_cast<int64_t>(clock.timestamp());
        }
        for (const auto& clock : packet.clock_snapshot().clocks()) {
          if (clock.clock_id() == kBoottime) continue;
          if (clock.clock_id() < 64 || clock.clock_id() > 127) {
            out.errors.push_back(where + ": snapshot of clock " + std::to_string(clock.clock_id()) + ", not checked");
            continue;
          }
          if (!trace_time) out.errors.push_back(where + ": clock snapshot without the trace clock (BOOTTIME)");
          if (state.clocks.contains(clock.clock_id()))
            out.errors.push_back(where + ": a second snapshot of sequence clock " + std::to_string(clock.clock_id()));
          SequenceClock c;
          c.incremental = clock.is_incremental();
          c.unit_ns = clock.has_unit_multiplier_ns() ? clock.unit_multiplier_ns() : 1;
          c.at_snapshot = static_cast<int64_t>(clock.timestamp() * c.unit_ns);
          c.trace_time_at_snapshot = trace_time.value_or(0);
          c.last = c.at_snapshot;
          state.clocks[clock.clock_id()] = c;
        }
      }
    } else if ((packet.sequence_flags() & pp::TracePacket::SEQ_NEEDS_INCREMENTAL_STATE) != 0) {
      out.errors.push_back(where + ": needs incremental state on sequence 0");
    } else if (packet.has_clock_snapshot() || packet.has_trace_packet_defaults()) {
      out.errors.push_back(where + ": clock snapshot or packet defaults without a sequence");
    }

    if (packet.has_track_descriptor()) {
      const pp::TrackDescriptor& d = packet.track_descriptor();
      if (!d.has_uuid()) out.errors.push_back(where + ": track descriptor without uuid");
      if (d.uuid() == 0) {
        out.root_orders_explicitly = d.process_ordering() == pp::TrackDescriptor::PROCESS_ORDERING_EXPLICIT;
        continue;
      }
      if (out.track(d.uuid()) != nullptr)
        out.errors.push_back(where + ": track " + std::to_string(d.uuid()) + " declared twice");
      if (d.parent_uuid() != 0 && out.track(d.parent_uuid()) == nullptr)
        out.errors.push_back(where + ": track " + std::to_string(d.uuid()) + " has an undeclared parent");
      if (d.sibling_order_rank() < 0) out.errors.push_back(where + ": negative sibling order");
      DecodedTrack t;
      t.uuid = d.uuid();
      t.parent = d.parent_uuid();
      t.order = d.sibling_order_rank();
      t.explicit_children = d.child_ordering() == pp::TrackDescriptor::EXPLICIT;
      t.name = d.name();
      if (d.has_process()) {
        t.kind = DecodedTrack::Kind::kProcess;
        t.pid = d.process().pid();
        t.name = d.process().process_name();
        if (t.pid == 0) out.errors.push_back(where + ": process with pid 0");
        if (!pids.insert(t.pid).second) out.errors.push_back(where + ": pid " + std::to_string(t.pid) + " used twice");
      } else if (d.has_thread()) {
        t.kind = DecodedTrack::Kind::kThread;
        t.pid = d.thread().pid();
        t.tid = d.thread().tid();
        t.name = d.thread().thread_name();
      } else if (d.has_counter()) {
        t.kind = DecodedTrack::Kind::kCounter;
        t.unit = d.counter().unit();
        t.unit_name = d.counter().unit_name();
      }
      out.tracks.push_back(t);
    }

    if (!packet.has_track_event()) continue;
    const pp::TrackEvent& e = packet.track_event();
    if (sequence == 0) {
      out.errors.push_back(where + ": track event without a sequence");
      continue;
    }
    SequenceState& state = sequences[sequence];
    if (!state.cleared) out.errors.push_back(where + ": track event before its sequence's state was cleared");
    if (packet.has_interned_data()) {
      for (const auto& n : packet.interned_data().event_names())
        intern(state.event_names, n.iid(), n.name(), where + ": event name", out.errors);
      for (const auto& n : packet.interned_data().debug_annotation_names())
        intern(state.annotation_names, n.iid(), n.name(), where + ": annotation name", out.errors);
    }
    bool uses_interning = e.has_name_iid();
    Event event;
    event.position = static_cast<size_t>(p);
    event.type = e.type();
    // The track and the clock: the event's own, else the sequence's defaults.
    if (e.has_track_uuid()) {
      event.track = e.track_uuid();
    } else if (state.defaults && state.defaults->track_event_defaults().has_track_uuid()) {
      event.track = state.defaults->track_event_defaults().track_uuid();
    } else {
      out.errors.push_back(where + ": track event without a track");
    }
    if (!packet.has_timestamp()) out.errors.push_back(where + ": track event without timestamp");
    uint32_t clock_id = packet.has_timestamp_clock_id() ? packet.timestamp_clock_id()
                        : state.defaults && state.defaults->has_timestamp_clock_id()
                            ? state.defaults->timestamp_clock_id()
                            : kBoottime;
    if (clock_id == kBoottime) {
      event.ts = static_cast<int64_t>(packet.timestamp());
    } else if (auto clock = state.clocks.find(clock_id); clock != state.clocks.end()) {
      SequenceClock& c = clock->second;
      int64_t reading = static_cast<int64_t>(packet.timestamp() * c.unit_ns);
      if (c.incremental) reading = c.last += reading;
      event.ts = reading - c.at_snapshot + c.trace_time_at_snapshot;
    } else {
      out.errors.push_back(where + ": timestamp on clock " + std::to_string(clock_id) + " before its snapshot");
    }
    if (e.has_name_iid()) {
      auto it = state.event_names.find(e.name_iid());
      if (it == state.event_names.end()) {
        out.errors.push_back(where + ": event name iid " + std::to_string(e.name_iid()) +
                             " used before it was defined");
      } else {
        event.name = it->second;
      }
    } else {
      event.name = e.name();
    }
    for (const auto& a : e.debug_annotations()) {
      std::string name = a.name();
      if (a.has_name_iid()) {
        uses_interning = true;
        auto it = state.annotation_names.find(a.name_iid());
        if (it == state.annotation_names.end()) {
          out.errors.push_back(where + ": annotation name iid " + std::to_string(a.name_iid()) +
                               " used before it was defined");
        } else {
          name = it->second;
        }
      }
      event.args[name] = argText(a);
    }
    if (uses_interning && (packet.sequence_flags() & pp::TracePacket::SEQ_NEEDS_INCREMENTAL_STATE) == 0)
      out.errors.push_back(where + ": uses interned data without SEQ_NEEDS_INCREMENTAL_STATE");
    event.flow_ids.assign(e.flow_ids().begin(), e.flow_ids().end());
    event.terminating.assign(e.terminating_flow_ids().begin(), e.terminating_flow_ids().end());
    event.counter = e.has_double_counter_value() ? e.double_counter_value() : static_cast<double>(e.counter_value());

    const DecodedTrack* track = out.track(event.track);
    if (track == nullptr) {
      out.errors.push_back(where + ": event on undeclared track " + std::to_string(event.track));
      continue;
    }
    bool counter = event.type == pp::TrackEvent::TYPE_COUNTER;
    if (counter != (track->kind == DecodedTrack::Kind::kCounter))
      out.errors.push_back(where + ": " +
                           (counter ? "counter value on a non-counter track" : "slice on a counter track") + " '" +
                           track->name + "'");
    if (counter && !e.has_counter_value() && !e.has_double_counter_value())
      out.errors.push_back(where + ": counter event without a value");
    auto [last, first] = last_time.try_emplace(event.track, event.ts);
    if (!first && event.ts < last->second)
      out.errors.push_back(where + ": time goes back on track '" + track->name + "'");
    last->second = std::max(last->second, event.ts);
    events.push_back(std::move(event));
  }

  // trace_processor's view: events by (timestamp, file position).
  std::stable_sort(events.begin(), events.end(), [](const Event& a, const Event& b) { return a.ts < b.ts; });
  std::map<uint64_t, std::vector<size_t>> open;  // per track: open slices, innermost last
  std::map<uint64_t, size_t> active_flows;       // flow id -> source slice
  auto startFlows = [&](const Event& e, size_t slice) {
    for (uint64_t id : e.flow_ids) {
      if (!active_flows.emplace(id, slice).second)
        out.errors.push_back("flow " + std::to_string(id) + " started twice (packet " + std::to_string(e.position) +
                             ")");
    }
  };
  auto endFlows = [&](const Event& e, size_t slice) {
    for (uint64_t id : e.terminating) {
      auto it = active_flows.find(id);
      if (it == active_flows.end()) {
        out.errors.push_back("flow " + std::to_string(id) + " terminates without having started (packet " +
                             std::to_string(e.position) + ")");
        continue;
      }
      out.flows.push_back({id, it->second, slice});
      active_flows.erase(it);
    }
  };
  for (const Event& e : events) {
    switch (e.type) {
      case pp::TrackEvent::TYPE_SLICE_BEGIN:
        out.slices.push_back({e.track, e.name, e.ts, -1, false, e.args});
        open[e.track].push_back(out.slices.size() - 1);
        startFlows(e, out.slices.size() - 1);
        break;
      case pp::TrackEvent::TYPE_SLICE_END: {
        auto& stack = open[e.track];
        if (stack.empty()) {
          out.errors.push_back("END without an open slice on track " + std::to_string(e.track) + " (packet " +
                               std::to_string(e.position) + ")");
          break;
        }
        size_t slice = stack.back();
        stack.pop_back();
        out.slices[slice].end = e.ts;
        endFlows(e, slice);
        break;
      }
      case pp::TrackEvent::TYPE_INSTANT:
        out.slices.push_back({e.track, e.name, e.ts, e.ts, true, e.args});
        startFlows(e, out.slices.size() - 1);
        endFlows(e, out.slices.size() - 1);
        break;
      case pp::TrackEvent::TYPE_COUNTER:
        out.counters.push_back({e.track, e.ts, e.counter});
        break;
      default:
        out.errors.push_back("track event of unknown type (packet " + std::to_string(e.position) + ")");
    }
  }
  for (const auto& [track, stack] : open) {
    if (!stack.empty())
      out.errors.push_back(std::to_string(stack.size()) + " slices never end on track " + std::to_string(track));
  }
  for (const auto& [id, slice] : active_flows) out.errors.push_back("flow " + std::to_string(id) + " never terminates");
  return out;
}

JsonTraceSummary checkChromeJson(const std::string& text) {
  JsonTraceSummary summary;
  nlohmann::json document;
  try {
    document = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    summary.errors.push_back(std::string("does not parse: ") + e.what());
    return summary;
  }
  if (!document.contains("traceEvents") || !document["traceEvents"].is_array()) {
    summary.errors.push_back("no traceEvents array");
    return summary;
  }
  struct Span {
    double start, end;
  };
  std::map<std::pair<int64_t, int64_t>, std::vector<Span>> slices_of_thread;
  std::map<uint64_t, double> flow_out;  // bind_id -> ts
  std::vector<std::pair<uint64_t, double>> flow_in;
  std::map<uint64_t, std::vector<std::tuple<double, int64_t, int64_t>>> flow_starts;  // v1 id -> (ts, pid, tid)
  std::vector<std::tuple<uint64_t, double, int64_t, int64_t>> flow_ends;
  bool any = false;
  for (const auto& event : document["traceEvents"]) {
    std::string ph = event.value("ph", "");
    int64_t pid = event.value("pid", int64_t{0}), tid = event.value("tid", int64_t{0});
    double ts = event.value("ts", 0.0);
    if (ph == "M") {
      std::string name = event.value("name", "");
      if (name == "process_name") summary.process_names[pid] = event["args"]["name"];
      if (name == "thread_name") summary.thread_names[{pid, tid}] = event["args"]["name"];
      if (name == "process_sort_index") summary.process_sort_index[pid] = event["args"]["sort_index"];
      if (name == "thread_sort_index") summary.thread_sort_index[{pid, tid}] = event["args"]["sort_index"];
      continue;
    }
    if (ph == "X" || ph == "i" || ph == "C") {
      summary.first_ts = any ? std::min(summary.first_ts, ts) : ts;
      any = true;
    }
    if (ph == "X") {
      ++summary.slices;
      if (!event.contains("dur")) summary.errors.push_back("X event without dur");
      double dur = event.value("dur", 0.0);
      slices_of_thread[{pid, tid}].push_back({ts, ts + dur});
      if (event.contains("bind_id")) {
        uint64_t id = event["bind_id"];
        if (event.value("flow_out", false)) flow_out.emplace(id, ts);
        if (event.value("flow_in", false)) flow_in.emplace_back(id, ts);
      }
    } else if (ph == "i") {
      ++summary.slices;
    } else if (ph == "C") {
      ++summary.counter_values;
      if (!event.contains("args") || event["args"].empty()) summary.errors.push_back("C event without a value");
    } else if (ph == "s") {
      flow_starts[event["id"].get<uint64_t>()].emplace_back(ts, pid, tid);
    } else if (ph == "f") {
      if (event.value("bp", "") != "e") summary.errors.push_back("flow end not bound to its enclosing slice");
      flow_ends.emplace_back(event["id"].get<uint64_t>(), ts, pid, tid);
    } else {
      summary.errors.push_back("unexpected phase '" + ph + "'");
    }
  }
  auto starts_slice = [&](int64_t pid, int64_t tid, double ts) {
    for (const Span& s : slices_of_thread[{pid, tid}]) {
      if (s.start == ts) return true;
    }
    return false;
  };
  auto inside_slice = [&](int64_t pid, int64_t tid, double ts) {
    for (const Span& s : slices_of_thread[{pid, tid}]) {
      if (s.start <= ts && ts <= s.end) return true;
    }
    return false;
  };
  for (const auto& [id, ts] : flow_in) {
    auto source = flow_out.find(id);
    if (source == flow_out.end() || source->second >= ts) {
      summary.errors.push_back("flow_in " + std::to_string(id) + " has no flow_out before it");
    } else {
      ++summary.flows;
    }
  }
  for (const auto& [id, starts] : flow_starts) {
    for (const auto& [ts, pid, tid] : starts) {
      if (!starts_slice(pid, tid, ts))
        summary.errors.push_back("flow start " + std::to_string(id) + " is not at a slice");
    }
  }
  for (const auto& [id, ts, pid, tid] : flow_ends) {
    auto starts = flow_starts.find(id);
    bool started = starts != flow_starts.end() && std::any_of(starts->second.begin(), starts->second.end(),
                                                              [&](const auto& s) { return std::get<0>(s) < ts; });
    if (!started) {
      summary.errors.push_back("flow end " + std::to_string(id) + " has no start before it");
    } else if (!inside_slice(pid, tid, ts)) {
      summary.errors.push_back("flow end " + std::to_string(id) + " is not inside a slice");
    } else {
      ++summary.flows;
    }
  }
  return summary;
}

}  // namespace gpuxray::testing
