// The whole run on one timeline: walks the run model (and the report's timeline marks) and tells a
// TimelineSink what to draw. Per rank, one process with, in order: its findings, its GPU streams (one
// group per device), its NCCL communicators, its CPU threads (API calls with NVTX ranges around them)
// and its counters (device memory, estimated SM occupancy, network throughput per peer, sampled
// metrics); arrows from each launch to its kernels, from each send to its receive and from each
// collective's last arrival to its completion on the other members. Layout: docs/perfetto-export.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analyzer/analysis/intervals.h"
#include "analyzer/export/timeline_sink.h"
#include "analyzer/model/run_trace.h"
#include "analyzer/report/report.h"

namespace gpuxray::timeline {

struct ExportOptions {
  // Only what overlaps this interval of the run clock (whole slices; unset: everything).
  std::optional<analysis::Interval> window;
};

struct ExportSummary {
  size_t ranks = 0;
  uint64_t tracks = 0;
  uint64_t slices = 0;
  uint64_t instants = 0;
  uint64_t counter_values = 0;
  uint64_t flows = 0;
  uint64_t findings = 0;  // timeline marks drawn (counted in slices and instants too)
  // What was left out, and why.
  uint64_t outside_window = 0;     // records outside the window
  uint64_t flows_unmatched = 0;    // the other end is on a rank or at a time not written, or unknown
  uint64_t flows_backwards = 0;    // the target ended before its source began (clocks disagree)
  uint64_t too_many_overlaps = 0;  // slices overlapping too many others on one track

  uint64_t events() const { return slices + instants + counter_values; }
};

// The first and last time of anything in the run (GPU activity, API calls, NVTX, NCCL, memory).
analysis::Interval runSpan(const model::RunTrace& run);

// The pid a rank's process gets (Perfetto needs non-zero pids): 1000 + rank.
int32_t processIdOf(int32_t rank, size_t rank_index);

// Writes the run's timeline to `sink` (begin ... finish) and says what it wrote.
ExportSummary exportTimeline(const model::RunTrace& run, const report::Report& report, const ExportOptions& options,
                             TimelineSink& sink);

}  // namespace gpuxray::timeline
