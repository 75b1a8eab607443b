// The critical path of each rank's steps (docs/analyses.md, "Critical path"): Holistic Trace
// Analysis's dependency graph of one rank (host ops and runtime calls in call-stack order, kernels
// in stream order, launch and kernel-to-kernel delays, stream and device synchronization), its
// longest path, and every nanosecond of the step's window attributed to exactly one cause along
// that path. The per-rank part (rankCriticalPath) reads one rank's events only and reduces them to
// slices, the digest a cross-rank join needs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analyzer/analysis/analysis_input.h"
#include "analyzer/report/report.h"

namespace gpuxray::analysis {

// What a stretch of the critical path was spent on.
enum class PathCause : uint8_t {
  kCompute,          // a compute kernel ran (detail: its name)
  kCommunication,    // a communication kernel ran (detail: the communicator's role)
  kMemcpy,           // a copy or memset ran
  kHost,             // the CPU ran an op or a runtime call (detail: "cpu op" or the call's name)
  kLaunch,           // a kernel waited for its launch with nothing queued on its stream (host-bound)
  kSynchronization,  // the CPU waited in a synchronizing call, or on the GPU through it
  kKernelGap,        // the gap between two kernels of one stream
  kOther,            // no event on the path covers it (the CPU between top-level ops, the window's ends)
};
const char* pathCauseName(PathCause cause);

// Which of a rank's records an event on the path is.
enum class PathEventSource : uint8_t { kHostOp, kHostCall, kStepRange, kActivity };
struct PathEvent {
  PathEventSource source = PathEventSource::kHostOp;
  uint32_t index = 0;  // into host_ops, host_calls, nvtx or activities
  bool operator==(const PathEvent&) const = default;
};

// A stretch of the window and what the path spent it on; a rank's slices cover its window exactly.
struct PathSlice {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  PathCause cause = PathCause::kOther;
  std::string detail;
};

struct RankCriticalPath {
  int32_t rank = -1;
  int64_t step = -1;  // -1: the rank's whole span
  Interval window;
  int64_t length_ns = 0;          // the longest path's summed edge weights (HTA's measure)
  size_t nodes = 0;               // the path's nodes (an event's start and end are two)
  std::vector<PathEvent> events;  // the events on the path, each once, in path order
  std::vector<PathSlice> slices;  // in time order, covering the window
};

// Where the path ends when several nodes end a longest path: the latest (gpuxray's: a wait that ends
// the step is then on the path, not after it) or the earliest (networkx's, so HTA's).
enum class PathEnd : uint8_t { kLatest, kEarliest };

// The critical path of one rank in `window`: host events that start in it, GPU work whose launch
// call starts in it (HTA's clipping).
RankCriticalPath rankCriticalPath(const model::RankTrace& rank, Interval window, PathEnd end = PathEnd::kLatest);

struct PathAttribution {
  PathCause cause = PathCause::kOther;
  std::string detail;
  int64_t ns = 0;
};

struct StepCriticalPath {
  int32_t rank = -1;
  int64_t step = -1;
  Interval window;
  int64_t length_ns = 0;
  size_t events_on_path = 0;
  std::vector<PathAttribution> attribution;  // largest first; sums to window.length()
};

struct CriticalPathResult {
  std::vector<StepCriticalPath> steps;  // per rank (run order), per window
};

// The slices summed by (cause, detail), largest first.
std::vector<PathAttribution> attributionOf(const std::vector<PathSlice>& slices);

CriticalPathResult computeCriticalPath(const AnalysisInput& input);
void presentCriticalPath(const CriticalPathResult& result, size_t top, report::Report& report);

}  // namespace gpuxray::analysis
