// Every count of something dropped, skipped, estimated or suspicious, as Perfetto's trace_processor
// keeps its `stats` table: each has one name, a severity and a description, listed once below, and
// every part of the analyzer (the loaders, the importer, the analyses, the timeline export) counts
// into a `Stats` by that name. The report shows the counts that are not zero the same way in text,
// JSON and Markdown (docs/report-schema.md lists them all).
//
// A warning line (which names the file or option it is about) always belongs to one stat: it is
// added with `warn`, which counts it too.
#pragma once

#include <array>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpuxray::report {

// kInfo: worth knowing, nothing lost; kDataLoss: records the figures could not use; kError: input
// that breaks the format's rules (the figures around it may be wrong).
enum class StatSeverity { kInfo, kDataLoss, kError };
const char* statSeverityName(StatSeverity severity);

// X(name, severity, description)
#define GPUXRAY_STATS(X)                                                                                              \
  X(capture_records_dropped, kDataLoss,                                                                               \
    "records the capture dropped (CUPTI buffers full, NCCL pools at their bound), as its trailers count them")        \
  X(capture_not_finished, kDataLoss,                                                                                  \
    "files with no trailer: the capture did not finish cleanly, so what it dropped is unknown")                       \
  X(capture_warnings, kInfo, "warnings the capture wrote into a file's trailer")                                      \
  X(trace_chunks_damaged, kDataLoss, "chunks of a trace file skipped: damaged, undecodable or out of place")          \
  X(trace_tail_torn, kDataLoss, "trace files cut off inside their last chunk")                                        \
  X(trace_bytes_skipped, kDataLoss, "bytes of trace files skipped around damage")                                     \
  X(trace_references_unresolved, kDataLoss,                                                                           \
    "kernels whose launch configuration was lost with a damaged chunk (their names and sizes are unknown)")           \
  X(times_clamped, kError, "times beyond 2^63 ns, clamped to that limit")                                             \
  X(allocations_implausible, kError, "memory allocations or releases of more than 16 TiB, ignored")                   \
  X(kernels_profiled, kInfo,                                                                                          \
    "launches replayed by --kernel-metrics: their counters kept, their durations out of time figures")                \
  X(kernel_metrics_without_launch, kDataLoss, "kernel counters whose launch (kernel record) is not in the file")      \
  X(files_skipped, kDataLoss, "files of the run that could not be read or were left out")                             \
  X(ranks_missing, kDataLoss, "ranks of the run's world size that have no file")                                      \
  X(ranks_unknown, kInfo, "files whose rank the launcher did not say")                                                \
  X(kineto_ranks_guessed, kInfo,                                                                                      \
    "PyTorch-profiler traces with no rank (no distributedInfo), given one from the file name or the first free")      \
  X(kineto_events_unknown_category, kInfo, "PyTorch-profiler events of categories gpuxray does not use, ignored")     \
  X(kineto_events_missing_fields, kDataLoss,                                                                          \
    "PyTorch-profiler events lacking a field gpuxray needs (ts, dur or a stream), skipped")                           \
  X(kineto_events_malformed, kDataLoss, "PyTorch-profiler events that are not valid JSON objects, skipped")           \
  X(kineto_traces_truncated, kDataLoss, "PyTorch-profiler traces whose JSON ends early; the events before are used")  \
  X(kineto_keys_malformed, kDataLoss, "top-level keys of PyTorch-profiler traces that are malformed, ignored")        \
  X(digests_used, kInfo, "ranks analyzed from their digest files (gpuxray digest), their traces not read")            \
  X(window_records_left_out, kInfo, "records outside --window, left out of the analysis")                             \
  X(clock_alignment_problems, kInfo, "hosts' clock offsets that could not be estimated as asked")                     \
  X(fail_on_metrics_missing, kInfo, "--fail-on thresholds on a metric this run does not have")                        \
  X(export_outside_window, kInfo, "records outside the window, left out of the timeline")                             \
  X(export_flows_unmatched, kInfo,                                                                                    \
    "flow arrows left out of the timeline: the other end was not written or is unknown")                              \
  X(export_flows_backwards, kError, "flow arrows left out of the timeline: the target ended before its source began") \
  X(export_overlaps_dropped, kDataLoss, "slices left out of the timeline: they overlap too many others on one track")

enum class Stat : uint16_t {
#define GPUXRAY_STAT_ENUM(name, severity, description) name,
  GPUXRAY_STATS(GPUXRAY_STAT_ENUM)
#undef GPUXRAY_STAT_ENUM
};

struct StatInfo {
  std::string_view name;
  StatSeverity severity;
  std::string_view description;
};

inline constexpr StatInfo kStatInfo[] = {
#define GPUXRAY_STAT_INFO(name, severity, description) {#name, StatSeverity::severity, description},
    GPUXRAY_STATS(GPUXRAY_STAT_INFO)
#undef GPUXRAY_STAT_INFO
};
inline constexpr size_t kStatCount = std::size(kStatInfo);

const StatInfo& statInfo(Stat stat);
std::optional<Stat> statNamed(std::string_view name);

struct StatLine {
  Stat stat;
  std::string text;
};

class Stats {
 public:
  void add(Stat stat, uint64_t count = 1) { values_[static_cast<size_t>(stat)] += count; }
  // Counts `count` under `stat` and keeps `line` as one of its warnings.
  void warn(Stat stat, uint64_t count, std::string line);
  void merge(const Stats& other);

  uint64_t value(Stat stat) const { return values_[static_cast<size_t>(stat)]; }
  bool empty() const;
  // The stats that are not zero, in the registry's order.
  std::vector<Stat> nonZero() const;
  const std::vector<StatLine>& lines() const { return lines_; }
  // The warning lines of one stat, in the order they were added.
  std::vector<std::string> linesOf(Stat stat) const;

 private:
  std::array<uint64_t, kStatCount> values_{};
  std::vector<StatLine> lines_;
};

// Adds `line` to `stats` (under `stat`, counting `count`) and to the plain list of warning lines
// that `warnings` is, in one step, so that no warning line is without its stat.
void warn(Stats& stats, std::vector<std::string>& warnings, Stat stat, uint64_t count, std::string line);

}  // namespace gpuxray::report
