// What the timeline export says, independent of the file format: tracks (processes, threads, groups,
// slice and counter tracks), slices and instants on them, counter values, and flows (arrows) between
// slices. timeline_export.cc walks the run model and calls a TimelineSink; the Perfetto protobuf
// writer and the Chrome JSON writer each implement one.
//
// The walk guarantees what both formats need: a track is declared before its first event; on each
// track, events come in time order, a slice's END before a BEGIN at the same time, and slices nest
// properly; a flow's target ends after its source begins.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gpuxray::timeline {

enum class TrackKind : uint8_t {
  kProcess,  // one per rank
  kThread,   // a CPU thread of a rank
  kGroup,    // holds other tracks, no events of its own
  kSlices,   // slices and instants
  kCounter,  // counter values
};

// How a counter's values read: a unit the viewer knows, or free text ("GB/s", "%").
enum class CounterUnit : uint8_t { kNone, kBytes, kCount };

struct TrackSpec {
  uint64_t id = 0;      // unique in the trace, > 0
  uint64_t parent = 0;  // 0: top level (processes)
  TrackKind kind = TrackKind::kSlices;
  std::string name;
  std::string description;
  int32_t order = 0;               // among its siblings, >= 0
  int32_t flat_order = 0;          // among all tracks of its process (formats that have no nesting)
  int32_t pid = 0;                 // its process, for every track
  int32_t tid = 0;                 // thread tracks
  bool children_in_order = false;  // children are shown by `order` (else by the viewer's choice)
  CounterUnit unit = CounterUnit::kNone;
  std::string unit_name;
};

// A named value attached to a slice. Names are string literals: writers key their interning on the
// pointer.
struct Arg {
  enum class Type : uint8_t { kUint, kInt, kDouble, kString };
  const char* name = "";
  Type type = Type::kUint;
  uint64_t uint_value = 0;
  int64_t int_value = 0;
  double double_value = 0;
  std::string_view string_value;

  static Arg ofUint(const char* name, uint64_t v) { return {name, Type::kUint, v, 0, 0, {}}; }
  static Arg ofInt(const char* name, int64_t v) { return {name, Type::kInt, 0, v, 0, {}}; }
  static Arg ofDouble(const char* name, double v) { return {name, Type::kDouble, 0, 0, v, {}}; }
  static Arg ofString(const char* name, std::string_view v) { return {name, Type::kString, 0, 0, 0, v}; }
};

// A slice's name. `key`, when non-zero, stands for this text for the whole of the current rank, so
// writers can cache per key what they derive from the text (an interned id, an escaped copy).
struct Name {
  std::string_view text;
  uint32_t key = 0;
};

// One arrow from a source slice to a target slice.
struct Flow {
  uint64_t id = 0;     // unique per arrow
  uint64_t group = 0;  // shared by all arrows that leave one slice (< 2^53, JSON numbers stay exact)
  // The target starts after the source: JSON's flow v2 (bind_id) can carry the arrow. Otherwise the
  // JSON writer uses a flow-end event at `enter_ns`, a time inside the target after the source began.
  bool bind = true;
  int64_t enter_ns = 0;
};

struct SliceEvent {
  uint64_t track = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;  // == start_ns for an instant
  bool instant = false;
  Name name;
  std::span<const Arg> args;
  std::span<const Flow> flows_out;
  const Flow* flow_in = nullptr;
};

struct TraceInfo {
  std::string run_id;
  int64_t origin_ns = 0;  // the run's first event: where JSON's relative times start
};

class TimelineSink {
 public:
  virtual ~TimelineSink() = default;
  virtual void begin(const TraceInfo& info) = 0;
  // Everything until the next beginRank belongs to this rank (a writer may scope its interning to it).
  virtual void beginRank(int32_t rank) = 0;
  virtual void track(const TrackSpec& track) = 0;
  // A slice's BEGIN, or an instant.
  virtual void sliceBegin(const SliceEvent& slice) = 0;
  // The END of a slice begun earlier (the same event; end_ns is its time). Not called for instants.
  virtual void sliceEnd(const SliceEvent& slice) = 0;
  virtual void counter(uint64_t track, int64_t time_ns, int64_t value) = 0;
  virtual void counter(uint64_t track, int64_t time_ns, double value) = 0;
  // Writes what is buffered; the output is complete afterwards.
  virtual void finish() = 0;
};

// Sends everything to several sinks (one walk of the model writing two formats).
class TeeSink final : public TimelineSink {
 public:
  explicit TeeSink(std::vector<TimelineSink*> sinks) : sinks_(std::move(sinks)) {}
  void begin(const TraceInfo& info) override {
    for (auto* s : sinks_) s->begin(info);
  }
  void beginRank(int32_t rank) override {
    for (auto* s : sinks_) s->beginRank(rank);
  }
  void track(const TrackSpec& track) override {
    for (auto* s : sinks_) s->track(track);
  }
  void sliceBegin(const SliceEvent& slice) override {
    for (auto* s : sinks_) s->sliceBegin(slice);
  }
  void sliceEnd(const SliceEvent& slice) override {
    for (auto* s : sinks_) s->sliceEnd(slice);
  }
  void counter(uint64_t track, int64_t time_ns, int64_t value) override {
    for (auto* s : sinks_) s->counter(track, time_ns, value);
  }
  void counter(uint64_t track, int64_t time_ns, double value) override {
    for (auto* s : sinks_) s->counter(track, time_ns, value);
  }
  void finish() override {
    for (auto* s : sinks_) s->finish();
  }

 private:
  std::vector<TimelineSink*> sinks_;
};

}  // namespace gpuxray::timeline
