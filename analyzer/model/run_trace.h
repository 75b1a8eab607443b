// The analyzer's in-memory view of a run: one RankTrace per trace file, with every time on one
// clock (signed nanoseconds, the same epoch on all ranks once aligned). Records are kept compact,
// because a run of 64 ranks easily holds 10^8 of them: names are rank-local string ids, a kernel's
// launch configuration is interned, and only what the analyses read is kept.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "analyzer/model/nccl_ops.h"
#include "analyzer/model/nvtx_ranges.h"
#include "analyzer/model/rank_strings.h"
#include "analyzer/report/stats.h"
#include "proto/records.h"

namespace gpuxray::model {

// What a GPU activity does, decided once at load time from its record type and name. kSync (a
// host thread blocked in cudaStreamSynchronize & co. until a stream drained) and kHostOp (a
// PyTorch-profiler cpu_op that names a stream, such as Inductor's Triton launches) are not GPU
// work: they are kept on their stream because Holistic Trace Analysis counts them as GPU busy time
// and `--compat hta` reproduces that. gpuxray's own analyses skip them (isGpuWork).
enum class ActivityKind : uint8_t { kCompute, kCommunication, kMemcpy, kMemset, kSync, kHostOp };
inline constexpr size_t kActivityKindCount = 6;

std::string_view activityKindName(ActivityKind kind);
inline bool isGpuWork(ActivityKind kind) { return kind != ActivityKind::kSync && kind != ActivityKind::kHostOp; }

// Whether a kernel of this name is communication: NCCL's and RCCL's kernels, old names
// (ncclKernel_*) and new (ncclDevKernel_*).
bool isCommunicationKernel(std::string_view name);

struct LaunchConfig {
  uint32_t grid_x = 0, grid_y = 0, grid_z = 0;
  uint32_t block_x = 0, block_y = 0, block_z = 0;
  uint32_t registers_per_thread = 0;
  uint32_t shared_memory_bytes = 0;  // static + dynamic
  uint32_t local_memory_per_thread = 0;
  bool operator==(const LaunchConfig&) const = default;
  uint64_t blocks() const { return uint64_t{grid_x} * grid_y * grid_z; }
  uint32_t threadsPerBlock() const { return block_x * block_y * block_z; }
};

// Interns launch configurations (FNV-1a over the fields) for the native loader and the importer.
struct LaunchConfigHash {
  size_t operator()(const LaunchConfig& c) const {
    uint64_t h = 1469598103934665603ull;
    for (uint32_t v : {c.grid_x, c.grid_y, c.grid_z, c.block_x, c.block_y, c.block_z, c.registers_per_thread,
                       c.shared_memory_bytes, c.local_memory_per_thread}) {
      h = (h ^ v) * 1099511628211ull;
    }
    return static_cast<size_t>(h);
  }
};

// A kernel, copy, memset (or synchronization, host op: see ActivityKind) on a GPU stream (32 bytes).
struct GpuActivity {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint32_t name_id = 0;
  // Kernels: index into RankTrace::launch_configs. Copies and memsets: bytes (saturated at 4 GiB - 1).
  uint32_t detail = 0;
  uint32_t correlation_id = 0;
  uint16_t stream = 0;  // index into RankTrace::streams
  uint8_t device = 0;
  ActivityKind kind = ActivityKind::kCompute;

  int64_t duration() const { return end_ns - start_ns; }
};

// The stream an activity ran on (CUDA's stream id and its device).
struct StreamKey {
  uint32_t device = 0;
  uint32_t stream = 0;
  bool operator==(const StreamKey&) const = default;
};

// A runtime or driver call on the host, as far as the analyses need it: when the CPU issued the
// work with this correlation id, on which thread, and which function it was (24 bytes).
struct HostCall {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint32_t correlation_id = 0;
  uint16_t thread = 0;    // index into RankTrace::threads
  uint16_t function = 0;  // index into RankTrace::api_functions
};

// Domains of the ranges imported from PyTorch-profiler traces: record_function ranges and
// ProfilerStep#N on the host and their GPU-side copies, and the few cpu_ops kept (ProfilerStep#N of
// older PyTorch; ops that name a stream travel as kHostOp activities, and as ranges of this domain
// with a "stream" payload field in converted files).
inline constexpr std::string_view kUserAnnotationDomain = "user_annotation";
inline constexpr std::string_view kGpuUserAnnotationDomain = "gpu_user_annotation";
inline constexpr std::string_view kCpuOpDomain = "cpu_op";

// FileHeader::time_base of ranks from PyTorch-profiler traces (and of their converted files): the
// second says that every timestamp was a whole number of microseconds (whole_microsecond_times).
inline constexpr std::string_view kKinetoTimeBase = "PyTorch profiler (microseconds)";
inline constexpr std::string_view kKinetoWholeMicrosecondsTimeBase = "PyTorch profiler (whole microseconds)";

// cpu_ops named ProfilerStep#N (older PyTorch) are steps and stay ranges; every other cpu_op is a
// HostOp.
inline bool isStepCpuOp(std::string_view name) { return name.find("ProfilerStep") != std::string_view::npos; }

// A PyTorch-profiler cpu_op (an aten op, an autograd node, a module's record_function of older
// PyTorch): the op tree's nodes in traces that have no NVTX ranges for them (32 bytes).
struct HostOp {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint32_t name_id = 0;
  uint32_t inputs_id = 0;  // "float[512, 1024], Scalar" (its "Input type" and "Input Dims"); 0: not recorded
  uint64_t thread_id = 0;
};

// Device memory in use changed by `delta_bytes` at `time_ns`: an allocation (> 0) or a release of the
// block at `address` (0: not recorded), which pairs a release with its allocation.
struct MemoryChange {
  int64_t time_ns = 0;
  int64_t delta_bytes = 0;
  uint32_t device = 0;
  uint64_t address = 0;
};

// A GPU metric sampled during the run (CUPTI PM sampling), e.g. SM throughput in %.
struct MetricSample {
  int64_t time_ns = 0;
  double value = 0;
  uint32_t name_id = 0;
  uint32_t device = 0;
};

struct Communicator {
  uint64_t comm_hash = 0;
  std::string name;
  int32_t comm_rank = 0;
  int32_t nranks = 0;
  int32_t nnodes = 0;
  int32_t global_rank = 0;
  uint32_t device = 0;
};

struct NetTransfer {
  uint64_t operation_id = 0;
  uint64_t comm_hash = 0;
  int32_t peer = 0;
  uint32_t channel = 0;
  bool is_send = false;
  uint64_t bytes = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint64_t wait_gpu_ns = 0;
  uint64_t wait_peer_ns = 0;
  uint64_t wait_network_ns = 0;
};

// A launch measured by the range profiler (`gpuxray run --kernel-metrics`). CUPTI replayed it once
// per pass, so its duration is not the kernel's: the loader keeps it out of RankTrace::activities,
// and with that out of every time analysis, and here with its counters. `launch` has no times
// (start = end = 0) when the file holds the counters but not the kernel record.
struct ProfiledKernel {
  GpuActivity launch;
  bool launch_found = false;
  format::KernelMetricsRecord metrics;
};

// Where a rank's records came from.
enum class SourceFormat : uint8_t { kNative, kKineto };

struct RankTrace {
  int32_t rank = -1;
  std::string path;
  SourceFormat source = SourceFormat::kNative;
  // Every timestamp in the source was a whole number of microseconds (older PyTorch-profiler traces;
  // HTA then leaves them unrounded).
  bool whole_microsecond_times = false;
  // The file's header, with the links, devices and clock anchors its later batches added appended.
  format::FileHeader header;
  RankStrings strings;  // id 0 is ""
  std::vector<LaunchConfig> launch_configs;
  std::vector<StreamKey> streams;
  std::vector<GpuActivity> activities;  // by start time
  std::vector<HostCall> host_calls;     // by correlation id
  std::vector<uint64_t> threads;        // the OS thread ids HostCall::thread indexes
  std::vector<uint32_t> api_functions{0};  // HostCall::function -> string id of its name; 0: unknown
  NvtxRanges nvtx;                         // by start time; packed in a skeleton
  std::vector<HostOp> host_ops;         // by start time
  std::vector<MemoryChange> memory;     // by time
  std::vector<Communicator> communicators;
  NcclOps nccl_ops;  // by enqueue time; packed in a skeleton
  std::vector<NetTransfer> transfers;
  // The header's links and those written during capture (CUPTI reports NVLink and PCIe links as
  // activity records), each once.
  std::vector<format::Link> links;
  std::vector<MetricSample> metric_samples;  // by time
  std::vector<ProfiledKernel> profiled_kernels;  // by start time, launches not found last
  uint64_t records_read = 0;
  // What loading this file dropped, skipped or found suspicious (moved into RunTrace::stats by loadRun).
  report::Stats stats;
  // Added to every time of this rank to put it on the run's clock (0 until aligned).
  int64_t clock_offset_ns = 0;

  std::string_view name(uint32_t id) const { return id < strings.size() ? std::string_view(strings[id]) : std::string_view(); }
  // The index of (device, stream) in `streams`, added if new; `hint` (the last index returned)
  // makes runs of one stream cheap. Past 65535 streams, 0.
  uint16_t streamIndex(uint32_t device, uint32_t stream, uint16_t& hint);
  // The host call that launched the work with this correlation id, or nullptr. Direct through the
  // index when indexLaunches() made one for the current host_calls, else searched.
  const HostCall* launchOf(uint32_t correlation_id) const {
    // Several analyses ask once per activity or gap: the indexed case stays inline.
    if (launch_index_calls_ == host_calls.size() && !host_calls.empty() &&
        host_calls.front().correlation_id == launch_index_first_) {
      uint32_t offset = correlation_id - launch_index_first_;
      if (correlation_id < launch_index_first_ || offset >= launch_index_.size()) return nullptr;
      uint32_t slot = launch_index_[offset];
      if (slot == 0) return nullptr;
      const HostCall& call = host_calls[slot - 1];
      if (call.correlation_id == correlation_id) return &call;
      // The calls changed since they were indexed: search.
    }
    return searchLaunch(correlation_id);
  }
  // Indexes host_calls (sorted by correlation id) by correlation id, when the ids are dense enough
  // (4 bytes an id: at most 4 ids a call); the loaders call it once host_calls are final. Changing
  // host_calls' ids or order afterwards needs it called again (or clearLaunchIndex()).
  void indexLaunches();
  void clearLaunchIndex();
  // The bytes its records and strings hold (their lists' capacities), roughly what keeping it costs.
  size_t heldBytes() const;

 private:
  const HostCall* searchLaunch(uint32_t correlation_id) const;

  // launch_index_[id - launch_index_first_]: index into host_calls + 1; 0: no call of that id.
  std::vector<uint32_t> launch_index_;
  uint32_t launch_index_first_ = 0;
  size_t launch_index_calls_ = 0;  // host_calls.size() when indexed
};

struct RunTrace {
  std::string run_id;
  int32_t world_size = 0;
  std::vector<RankTrace> ranks;  // by rank
  // Problems met while loading (torn files, missing ranks, ...), each on one line; every line is also
  // one of `stats`' lines, under the stat it counts toward.
  std::vector<std::string> warnings;
  report::Stats stats;
  uint64_t records() const;
  // The first start of any GPU activity, on the run's clock (0 for a run without any).
  int64_t firstActivityNs() const;
  // Drops every record that lies wholly outside [start_ns, end_ns), and says how many it dropped.
  uint64_t keepWindow(int64_t start_ns, int64_t end_ns);
};

}  // namespace gpuxray::model
