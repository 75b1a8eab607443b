// The timeline export as Chrome trace-event JSON, for tools that read only that: one "thread"
// (pid, tid) per slice track, complete events (ph X) with ts/dur in microseconds from the run's
// first event, instants (ph i), counters (ph C), process/thread names and sort indexes (ph M), and
// flows: v2 (bind_id with flow_out/flow_in on the slices) where the target starts after the source,
// v1 flow events (ph s / ph f, bound to the enclosing slice) where it does not.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analyzer/export/timeline_sink.h"
#include "proto/trace_writer.h"

namespace gpuxray::timeline {

class ChromeJsonSink final : public TimelineSink {
 public:
  explicit ChromeJsonSink(format::ByteSink& out, size_t flush_bytes = 1 << 20);
  void begin(const TraceInfo& info) override;
  void beginRank(int32_t rank) override;
  void track(const TrackSpec& track) override;
  void sliceBegin(const SliceEvent& slice) override;
  void sliceEnd(const SliceEvent&) override {}
  void counter(uint64_t track, int64_t time_ns, int64_t value) override;
  void counter(uint64_t track, int64_t time_ns, double value) override;
  void finish() override;
  uint64_t bytesWritten() const { return written_ + buffer_.size(); }

 private:
  struct JsonTrack {
    int32_t pid = 0;
    int32_t tid = 0;
    std::string counter_name;  // escaped, with the "args" key that carries the value
    std::string counter_key;
  };

  void startEvent();
  void appendTime(int64_t time_ns);
  void appendName(const Name& name);
  void appendPidTid(const JsonTrack& track);
  void appendArgs(const SliceEvent& slice);
  void flowEvent(char phase, uint64_t group, const JsonTrack& track, int64_t time_ns);
  void counterStart(uint64_t track, int64_t time_ns);
  JsonTrack& trackOf(uint64_t id);
  void maybeFlush();

  format::ByteSink& out_;
  size_t flush_bytes_;
  std::string buffer_;
  uint64_t written_ = 0;
  int64_t origin_ns_ = 0;
  bool first_event_ = true;
  std::vector<JsonTrack> tracks_;            // by track id
  std::vector<int32_t> next_tid_;            // by pid: the next tid to hand out
  std::vector<std::string> escaped_by_key_;  // names of the current rank
  std::vector<bool> escaped_known_;
};

}  // namespace gpuxray::timeline
