#include "analyzer/export/chrome_json_writer.h"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

#include "analyzer/report/json_writer.h"

namespace gpuxray::timeline {
namespace {

using report::appendJsonEscaped;

// v1 flow events are matched by (id, category, name): every one carries the same two.
constexpr std::string_view kFlowCategoryAndName = R"("cat":"flow","name":"flow")";

void appendNumber(std::string& out, double value) {
  if (!std::isfinite(value)) value = 0;  // JSON has no NaN or infinity
  fmt::format_to(std::back_inserter(out), "{}", value);
}

}  // namespace

ChromeJsonSink::ChromeJsonSink(format::ByteSink& out, size_t flush_bytes) : out_(out), flush_bytes_(flush_bytes) {}

void ChromeJsonSink::begin(const TraceInfo& info) {
  origin_ns_ = info.origin_ns;
  buffer_ += R"({"displayTimeUnit":"ns","otherData":{"generator":"gpuxray","run_id":")";
  appendJsonEscaped(buffer_, info.run_id);
  buffer_ += R"("},"traceEvents":[)";
}

void ChromeJsonSink::beginRank(int32_t) {
  escaped_by_key_.clear();
  escaped_known_.clear();
}

void ChromeJsonSink::startEvent() {
  buffer_ += first_event_ ? "\n{" : ",\n{";
  first_event_ = false;
}

// Microseconds from the origin with three decimals: exact to the nanosecond.
void ChromeJsonSink::appendTime(int64_t time_ns) {
  int64_t ns = time_ns - origin_ns_;
  if (ns < 0) {
    buffer_ += '-';
    ns = -ns;
  }
  fmt::format_to(std::back_inserter(buffer_), "{}.{:03}", ns / 1000, ns % 1000);
}

void ChromeJsonSink::appendName(const Name& name) {
  buffer_ += R"("name":")";
  if (name.key == 0) {
    appendJsonEscaped(buffer_, name.text);
  } else {
    if (name.key >= escaped_by_key_.size()) {
      escaped_by_key_.resize(name.key + 1);
      escaped_known_.resize(name.key + 1, false);
    }
    if (!escaped_known_[name.key]) {
      appendJsonEscaped(escaped_by_key_[name.key], name.text);
      escaped_known_[name.key] = true;
    }
    buffer_ += escaped_by_key_[name.key];
  }
  buffer_ += '"';
}

void ChromeJsonSink::appendPidTid(const JsonTrack& track) {
  fmt::format_to(std::back_inserter(buffer_), R"("pid":{},"tid":{})", track.pid, track.tid);
}

void ChromeJsonSink::appendArgs(const SliceEvent& slice) {
  if (slice.args.empty()) return;
  buffer_ += R"(,"args":{)";
  bool first = true;
  for (const Arg& arg : slice.args) {
    if (!first) buffer_ += ',';
    first = false;
    buffer_ += '"';
    appendJsonEscaped(buffer_, arg.name);
    buffer_ += "\":";
    switch (arg.type) {
      case Arg::Type::kUint:
        fmt::format_to(std::back_inserter(buffer_), "{}", arg.uint_value);
        break;
      case Arg::Type::kInt:
        fmt::format_to(std::back_inserter(buffer_), "{}", arg.int_value);
        break;
      case Arg::Type::kDouble:
        appendNumber(buffer_, arg.double_value);
        break;
      case Arg::Type::kString:
        buffer_ += '"';
        appendJsonEscaped(buffer_, arg.string_value);
        buffer_ += '"';
        break;
    }
  }
  buffer_ += '}';
}

ChromeJsonSink::JsonTrack& ChromeJsonSink::trackOf(uint64_t id) {
  if (id >= tracks_.size()) tracks_.resize(id + 1);
  return tracks_[id];
}

void ChromeJsonSink::track(const TrackSpec& spec) {
  JsonTrack& track = trackOf(spec.id);
  track.pid = spec.pid;
  switch (spec.kind) {
    case TrackKind::kProcess:
      startEvent();
      fmt::format_to(std::back_inserter(buffer_), R"("ph":"M","pid":{},"name":"process_name","args":{{"name":")",
                     spec.pid);
      appendJsonEscaped(buffer_, spec.name);
      buffer_ += "\"}}";
      startEvent();
      fmt::format_to(std::back_inserter(buffer_),
                     R"("ph":"M","pid":{},"name":"process_sort_index","args":{{"sort_index":{}}}}})", spec.pid,
                     spec.order);
      break;
    case TrackKind::kThread:
    case TrackKind::kSlices: {
      // tids count from 1 within each process, in the order tracks are declared.
      size_t slot = static_cast<size_t>(spec.pid);
      if (slot >= next_tid_.size()) next_tid_.resize(slot + 1, 1);
      track.tid = next_tid_[slot]++;
      startEvent();
      fmt::format_to(std::back_inserter(buffer_),
                     R"("ph":"M","pid":{},"tid":{},"name":"thread_name","args":{{"name":")", spec.pid, track.tid);
      appendJsonEscaped(buffer_, spec.name);
      buffer_ += "\"}}";
      startEvent();
      fmt::format_to(std::back_inserter(buffer_),
                     R"("ph":"M","pid":{},"tid":{},"name":"thread_sort_index","args":{{"sort_index":{}}}}})", spec.pid,
                     track.tid, spec.flat_order);
      break;
    }
    case TrackKind::kCounter:
      appendJsonEscaped(track.counter_name, spec.name);
      if (!spec.unit_name.empty()) {
        appendJsonEscaped(track.counter_key, spec.unit_name);
      } else {
        track.counter_key = spec.unit == CounterUnit::kBytes ? "bytes" : "value";
      }
      break;
    case TrackKind::kGroup:
      break;
  }
  maybeFlush();
}

void ChromeJsonSink::flowEvent(char phase, uint64_t group, const JsonTrack& track, int64_t time_ns) {
  startEvent();
  fmt::format_to(std::back_inserter(buffer_), R"("ph":"{}","id":{},{},)", phase, group, kFlowCategoryAndName);
  if (phase == 'f') buffer_ += R"("bp":"e",)";
  appendPidTid(track);
  buffer_ += R"(,"ts":)";
  appendTime(time_ns);
  buffer_ += '}';
}

void ChromeJsonSink::sliceBegin(const SliceEvent& slice) {
  const JsonTrack& track = trackOf(slice.track);
  startEvent();
  buffer_ += slice.instant ? R"("ph":"i","s":"t",)" : R"("ph":"X",)";
  appendPidTid(track);
  buffer_ += R"(,"ts":)";
  appendTime(slice.start_ns);
  if (!slice.instant) {
    buffer_ += R"(,"dur":)";
    int64_t dur = slice.end_ns - slice.start_ns;
    fmt::format_to(std::back_inserter(buffer_), "{}.{:03}", dur / 1000, dur % 1000);
  }
  buffer_ += ',';
  appendName(slice.name);
  appendArgs(slice);
  bool bind_out = false, unbound_out = false;
  uint64_t group = 0;
  for (const Flow& flow : slice.flows_out) {
    group = flow.group;
    (flow.bind ? bind_out : unbound_out) = true;
  }
  if (bind_out) {
    fmt::format_to(std::back_inserter(buffer_), R"(,"bind_id":{},"flow_out":true)", group);
  } else if (slice.flow_in != nullptr && slice.flow_in->bind) {
    fmt::format_to(std::back_inserter(buffer_), R"(,"bind_id":{},"flow_in":true)", slice.flow_in->group);
  }
  buffer_ += '}';
  if (unbound_out) flowEvent('s', group, track, slice.start_ns);
  if (slice.flow_in != nullptr && !slice.flow_in->bind)
    flowEvent('f', slice.flow_in->group, track, slice.flow_in->enter_ns);
  maybeFlush();
}

void ChromeJsonSink::counterStart(uint64_t track_id, int64_t time_ns) {
  const JsonTrack& track = trackOf(track_id);
  startEvent();
  fmt::format_to(std::back_inserter(buffer_), R"("ph":"C","pid":{},"name":"{}","ts":)", track.pid, track.counter_name);
  appendTime(time_ns);
  fmt::format_to(std::back_inserter(buffer_), R"(,"args":{{"{}":)", track.counter_key);
}

void ChromeJsonSink::counter(uint64_t track, int64_t time_ns, int64_t value) {
  counterStart(track, time_ns);
  fmt::format_to(std::back_inserter(buffer_), "{}}}}}", value);
  maybeFlush();
}

void ChromeJsonSink::counter(uint64_t track, int64_t time_ns, double value) {
  counterStart(track, time_ns);
  appendNumber(buffer_, value);
  buffer_ += "}}";
  maybeFlush();
}

void ChromeJsonSink::maybeFlush() {
  if (buffer_.size() < flush_bytes_) return;
  if (!out_.append({reinterpret_cast<const uint8_t*>(buffer_.data()), buffer_.size()}, {}))
    throw std::runtime_error(out_.error());
  written_ += buffer_.size();
  buffer_.clear();
}

void ChromeJsonSink::finish() {
  buffer_ += "\n]}\n";
  if (!out_.append({reinterpret_cast<const uint8_t*>(buffer_.data()), buffer_.size()}, {}))
    throw std::runtime_error(out_.error());
  written_ += buffer_.size();
  buffer_.clear();
}

}  // namespace gpuxray::timeline
