// Decodes a Perfetto trace with the classes generated from tests/perfetto/perfetto_trace_subset.proto
// and checks it the way trace_processor would read it: nothing unknown, tracks declared before use
// with unique ids and existing parents, every sequence's incremental state cleared first and interned
// ids defined before use, timestamps non-decreasing per track, BEGIN/END balanced per track, and
// every terminating flow started earlier (in trace_processor's order: by timestamp, then file
// position). Violations are collected in `errors`; the decoded tracks, slices, counters and flows are
// kept for the tests to look at.
//
// Also: a Chrome trace-event JSON document read the way Perfetto's JSON importer reads flows.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace gpuxray::testing {

struct DecodedTrack {
  enum class Kind { kProcess, kThread, kCounter, kPlain } kind = Kind::kPlain;
  uint64_t uuid = 0;
  uint64_t parent = 0;
  std::string name;  // process or thread name for those tracks
  int32_t order = 0;
  bool explicit_children = false;
  int32_t pid = 0;
  int32_t tid = 0;
  std::string unit_name;
  int unit = 0;
};

struct DecodedSlice {
  uint64_t track = 0;
  std::string name;
  int64_t start = 0;
  int64_t end = -1;  // -1 while open
  bool instant = false;
  std::map<std::string, std::string> args;  // values as text
};

struct DecodedCounter {
  uint64_t track = 0;
  int64_t time = 0;
  double value = 0;
};

struct DecodedFlow {
  uint64_t id = 0;
  size_t from = 0;  // index into slices
  size_t to = 0;
};

struct DecodedTrace {
  std::vector<DecodedTrack> tracks;  // in declaration order
  std::vector<DecodedSlice> slices;  // in trace_processor's order of their BEGIN
  std::vector<DecodedCounter> counters;
  std::vector<DecodedFlow> flows;
  std::vector<std::string> errors;
  uint64_t packets = 0;
  bool root_orders_explicitly = false;

  const DecodedTrack* track(uint64_t uuid) const;
  // Tracks with this parent, by sibling order.
  std::vector<const DecodedTrack*> children(uint64_t parent) const;
  const DecodedTrack* child(uint64_t parent, const std::string& name) const;
  std::vector<const DecodedTrack*> processes() const;  // by order
  // The process track a track belongs to (itself for a process), or nullptr.
  const DecodedTrack* processOf(uint64_t uuid) const;
  std::vector<const DecodedSlice*> slicesOn(uint64_t track) const;
  // Slices on a track and on its lane children ("NAME (overlap N)").
  std::vector<const DecodedSlice*> slicesOnLanes(uint64_t track) const;
  size_t sliceCount() const { return slices.size(); }
};

DecodedTrace decodePerfettoTrace(const std::string& bytes);

struct JsonTraceSummary {
  size_t slices = 0;                                                // ph X and ph i
  size_t counter_values = 0;                                        // ph C
  size_t flows = 0;                                                 // arrows that Perfetto's JSON importer would draw
  std::map<int64_t, std::string> process_names;                     // pid -> name
  std::map<std::pair<int64_t, int64_t>, std::string> thread_names;  // (pid, tid) -> name
  std::map<int64_t, int64_t> process_sort_index;
  std::map<std::pair<int64_t, int64_t>, int64_t> thread_sort_index;
  double first_ts = 0;
  std::vector<std::string> errors;
};

// Parses the document (errors if it does not parse) and checks its flows: a v2 flow_in needs a
// flow_out with its bind_id at an earlier time; a v1 flow end needs its start earlier and must lie
// inside a slice of its thread.
JsonTraceSummary checkChromeJson(const std::string& text);

}  // namespace gpuxray::testing
