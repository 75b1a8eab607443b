// The critical path of each rank's steps (docs/analyses.md, "Critical path"): Holistic Trace
// Analysis's dependency graph of one rank (host ops and runtime calls in call-stack order, kernels
// in stream order, launch and kernel-to-kernel delays, stream and device synchronization), its
// longest path, and every nanosecond of the step's window attributed to exactly one cause along
// that path. Across ranks, the per-rank part (criticalPathOfRank, made with each rank's digest) reduces
// the rank's step graphs to what the joins need, and the path is found on those (computeCriticalPath).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "analyzer/analysis/analysis_input.h"
#include "analyzer/analysis/collective_matching.h"
#include "analyzer/analysis/longest_path.h"
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
  kWait,             // a rank waited in a collective for a later rank (detail: "rank N")
  kPipelineWait,     // a rank waited in a pipeline communicator's send or receive for its peer (detail: "stage K")
  kOther,            // no event on the path covers it (the CPU between top-level ops, the window's ends)
};
const char* pathCauseName(PathCause cause);

// A compute kernel's class by its name: "GEMM", "attention", "normalization", "softmax", "reduction",
// "elementwise", "copy" or "other".
const char* kernelClassOf(std::string_view kernel_name);

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
  std::string_view detail;    // into the rank's strings or a constant
  int32_t rank = -1;          // whose event it is
  uint64_t comm_hash = 0;     // communication: the NCCL operation's communicator (0: not recorded)
  int32_t waited_for = -1;    // wait: the rank waited for
  int32_t waited_stage = -1;  // pipeline wait: the peer's position in the pipeline communicator
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

// The critical path of one rank in `window`: host events that start in it, GPU work whose launch
// call starts in it (HTA's clipping).
RankCriticalPath rankCriticalPath(const model::RankTrace& rank, Interval window, PathEnd end = PathEnd::kLatest);

// What an edge of a rank's graph is spent on, told by the rank's string ids (which outlive its
// events); for a chain of edges on the path, their time summed by cause and detail.
struct PathPart {
  PathCause cause = PathCause::kOther;
  uint32_t name_id = 0;       // the detail: the rank's string of this id, or `constant` when 0
  const char* constant = "";  // a static string
  int64_t ns = 0;             // a chain's: its edges' time of this cause and detail
  uint64_t comm_hash = 0;     // communication: the NCCL operation's communicator (0: not recorded)
};

// One rank's graph of one step as the joins across ranks need it (docs/analyses.md, "Critical path",
// "Two phases"): the nodes a join, a gap tied to a collective or a what-if can reach (its ports), and
// between them the rank's own edges, each chain of edges through nodes with one edge in and one out
// summed into one link. Made in the per-rank phase, while the rank's events are in memory.
struct RankStepGraph {
  enum class Role : uint8_t { kChain, kComputeSpan, kCommunicationSpan, kLaunch, kOther };
  struct Link {
    uint32_t from = 0, to = 0;  // ports
    int64_t weight = 0;
    EdgeKind kind = EdgeKind::kSpan;  // of a single edge (a chain: kSpan)
    Role role = Role::kOther;
    int64_t compute_ns = 0, launch_ns = 0;  // a chain's compute kernels' and launch delays' weights
    uint32_t first_edge = 0;                // the rank graph's first edge of it (to give a chain back)
    uint32_t part = UINT32_MAX;             // a single edge's part (its ns unset); a chain's are not kept
  };
  struct Communication {
    int64_t start_ns = 0, end_ns = 0;
    uint32_t activity = 0;
    uint32_t start_port = 0, end_port = 0, span_link = 0;
  };
  Interval window;
  std::vector<int64_t> times;       // per port, in the rank graph's node order
  std::vector<uint32_t> port_node;  // per port, its node in the rank graph
  std::vector<Link> links;          // in the order of their last edges in the rank graph
  std::vector<PathPart> parts;      // of single edges
  std::vector<Communication> communication;  // communication kernels, by start
  std::vector<uint32_t> kernel_gaps;         // kernel-to-kernel links a collective may be tied to, in order
  int64_t compute_ns = 0;                    // its compute kernels' time
  size_t bytes() const;
};

// What the critical path keeps of one rank: its steps' graphs (per window) and, per NCCL operation,
// its kernel and when that kernel's launch call started.
struct RankPathPart {
  std::vector<RankStepGraph> steps;
  std::vector<uint32_t> kernel_of_op;        // activity index, UINT32_MAX: none
  std::vector<int64_t> kernel_start_of_op;   // INT64_MIN: no kernel
  std::vector<int64_t> kernel_launch_of_op;  // INT64_MIN: no kernel or no launch call
  void shift(int64_t offset_ns);
  size_t bytes() const;
};

// The part of rank index `r` of `input` over its windows (input.windowsOf(r)).
RankPathPart criticalPathOfRank(const AnalysisInput& input, size_t r);

struct PathAttribution {
  PathCause cause = PathCause::kOther;
  std::string detail;
  int32_t rank = -1;
  int64_t ns = 0;
};

struct StepCriticalPath {
  int32_t rank = -1;
  int64_t step = -1;
  Interval window;
  int64_t length_ns = 0;
  size_t events_on_path = 0;
  std::vector<PathAttribution> attribution;  // largest first; sums to window.length()
  std::vector<PathSlice> slices;             // in time order, covering the window
};

// One step across ranks: every rank's graph, each collective's members joined (its kernels cannot
// end before the last member started: the others' wait is "wait", the rest "communication") and each
// receive tied to its send; the longest path through all of them over the union of the ranks' windows.
struct RunStepPath {
  int64_t step = -1;
  Interval window;
  int64_t length_ns = 0;
  size_t rank_changes = 0;        // times the path crosses from one rank to another
  std::vector<PathSlice> slices;  // in time order, covering the window
};

// `windows`: per rank of the run, its window of the step.
RunStepPath runCriticalPath(const model::RunTrace& run, const CollectiveIndex& matched,
                            const std::vector<Interval>& windows);
// What one step's longest path loses with `cause` at its ideal (the what-if of a finding naming it).
int64_t stepSaving(const model::RunTrace& run, const CollectiveIndex& matched, const std::vector<Interval>& windows,
                   const report::FindingCause& cause);

// A finding's cause set to its ideal and the steps re-timed along the same graph (docs/analyses.md,
// "What-if").
struct WhatIf {
  size_t finding = 0;  // index into the report's findings
  report::FindingCause::Kind kind = report::FindingCause::Kind::kNone;
  std::string label;
  int64_t step_ns = 0;   // the mean step as traced
  int64_t saves_ns = 0;  // per step: the mean longest path as traced minus the mean with the cause removed
};
const char* findingCauseName(report::FindingCause::Kind kind);

struct CriticalPathResult {
  std::vector<StepCriticalPath> steps;  // per rank (run order), per window
  struct RunStep {
    int64_t step = -1;
    Interval window;
    int64_t length_ns = 0;
    size_t rank_changes = 0;
    std::vector<PathAttribution> attribution;  // by (cause, detail, rank), largest first
    std::vector<PathSlice> slices;             // in time order, covering the window
  };
  std::vector<RunStep> run_steps;  // across ranks, per step (runs of two or more ranks); slices only with_slices
  std::vector<WhatIf> what_if;     // per finding with a cause, largest saving first
};

// The slices summed by (cause, detail, rank), largest first; by_rank false sums over ranks.
std::vector<PathAttribution> attributionOf(const std::vector<PathSlice>& slices, bool by_rank = false);

// What a slice of the path is called on the timeline: its cause, and what the cause is of ("compute:
// GEMM", "exposed comm: data-parallel", "wait: rank 3").
std::string pathSliceLabel(const PathSlice& slice);

// `findings`: those whose cause the what-if removes (the report's so far). `jobs`: workers for the ranks'
// indexes and the steps (0: one per core); the result is the same for any number.
// `with_slices`: each step's slices in time order (the timeline's; they need the ranks' events), else
// its attribution alone, from the ranks' parts (RankDigest::critical_path when the digests hold them).
CriticalPathResult computeCriticalPath(const AnalysisInput& input, const std::vector<report::Finding>& findings = {},
                                       unsigned jobs = 1, bool with_slices = true);
// Also gives each finding of the what-if its saving, in its text and saves_ns, and puts each step's
// path in the report's timeline paths.
void presentCriticalPath(const CriticalPathResult& result, size_t top, report::Report& report);

}  // namespace gpuxray::analysis
