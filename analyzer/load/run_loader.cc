#include "analyzer/load/run_loader.h"

#include <fmt/core.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <limits>
#include <map>
#include <mutex>
#include <new>
#include <optional>
#include <set>
#include <unordered_map>
#include <utility>

#include "analyzer/errors.h"
#include "analyzer/load/kineto_importer.h"
#include "analyzer/load/kineto_run.h"
#include "analyzer/load/run_files.h"
#include "analyzer/model/kernel_names.h"
#include "analyzer/workers.h"
#include "proto/id_map.h"
#include "proto/trace_reader.h"

namespace gpuxray::load {
namespace {

using model::ActivityKind;

// No allocation or release is larger (2^44 bytes, 16 TiB): a larger one is dropped, not summed.
constexpr uint64_t kMaxPlausibleAllocation = uint64_t{1} << 44;

uint32_t saturated32(uint64_t value) {
  return static_cast<uint32_t>(std::min<uint64_t>(value, std::numeric_limits<uint32_t>::max()));
}

// Makes room for `more` records: for as many as the whole file will hold, going by the share of it
// read so far, so that the records are not copied again and again as they grow (and their memory
// touched anew each time). A wrong guess costs one more growth.
template <typename T>
void reserveFor(std::vector<T>& records, size_t more, double share_read) {
  size_t needed = records.size() + more;
  if (needed <= records.capacity()) return;
  size_t estimate = share_read > 0 ? static_cast<size_t>(static_cast<double>(needed) / share_read * 1.05) : needed;
  records.reserve(std::max({needed, std::min(estimate, 16 * needed), records.capacity() + records.capacity() / 2}));
}

// Gives back a vector's unused memory when it is more than a quarter of what it holds.
template <typename T>
void trimExcess(std::vector<T>& records) {
  if (records.capacity() - records.size() > records.size() / 4) records.shrink_to_fit();
}

template <typename T, typename Less>
void sortIfNeeded(std::vector<T>& values, Less less) {
  if (!std::is_sorted(values.begin(), values.end(), less)) std::sort(values.begin(), values.end(), less);
}

// Merges the sorted `few` into the sorted `values`, stably (of equal ones, `values`' first), filling
// from the end: each element moves once, and those before the first of `few` not at all (a merge
// in place with a buffer copies every element twice).
template <typename T, typename Less>
void mergeFromTheEnd(std::vector<T>& values, const std::vector<T>& few, Less less) {
  size_t i = values.size(), j = few.size();
  values.resize(values.size() + few.size());
  for (size_t to = values.size(); j > 0;) {
    if (i > 0 && less(few[j - 1], values[i - 1])) {
      values[--to] = values[--i];
    } else {
      values[--to] = few[--j];
    }
  }
}

bool isDeviceMemory(format::MemoryKind kind) {
  using format::MemoryKind;
  return kind == MemoryKind::kDevice || kind == MemoryKind::kManaged || kind == MemoryKind::kDeviceStatic ||
         kind == MemoryKind::kManagedStatic || kind == MemoryKind::kUnknown;
}

// Builds one RankTrace from a reader's batches: rank-local string ids, interned launch
// configurations and stream indices.
class RankBuilder {
 public:
  RankBuilder(model::RankTrace& rank, const format::StringTable& strings) : rank_(rank), file_strings_(strings) {}

  // `share_read`: how much of the file has been read with this batch (0 to 1).
  void add(const format::EventBatch& batch, double share_read) {
    // Copies, memsets and synchronizations join the kernels in finish().
    reserveFor(rank_.activities,
               copies_.size() + batch.kernels.size() + batch.memcpys.size() + batch.memsets.size() +
                   batch.synchronizations.size(),
               share_read);
    reserveFor(rank_.host_calls, batch.api_calls.size(), share_read);
    // Written in place (a push_back per record, not inlined, was a tenth of loading).
    int64_t last_start =
        rank_.activities.empty() ? std::numeric_limits<int64_t>::min() : rank_.activities.back().start_ns;
    rank_.activities.resize(rank_.activities.size() + batch.kernels.size());
    model::GpuActivity* kernel = rank_.activities.data() + rank_.activities.size() - batch.kernels.size();
    for (const auto& k : batch.kernels) {
      model::GpuActivity a = activity(k.start_ns, k.end_ns, k.device, k.stream, k.correlation_id);
      KernelLaunch launch = launchOf(k);
      a.name_id = launch.name_id;
      a.kind = launch.kind;
      a.detail = launch.config;
      kernels_by_start_ = kernels_by_start_ && last_start <= a.start_ns;
      last_start = a.start_ns;
      *kernel++ = a;
    }
    for (const auto& m : batch.memcpys) {
      model::GpuActivity a = activity(m.start_ns, m.end_ns, m.device, m.stream, m.correlation_id);
      a.kind = ActivityKind::kMemcpy;
      a.detail = saturated32(m.bytes);
      copies_.push_back(a);
    }
    for (const auto& m : batch.memsets) {
      model::GpuActivity a = activity(m.start_ns, m.end_ns, m.device, m.stream, m.correlation_id);
      a.kind = ActivityKind::kMemset;
      a.detail = saturated32(m.bytes);
      copies_.push_back(a);
    }
    for (const auto& f : batch.api_functions) {
      uint64_t key = (uint64_t{static_cast<uint32_t>(f.domain)} << 32) | f.cbid;
      auto [it, inserted] = functions_.try_emplace(key, 0);
      if (inserted && rank_.api_functions.size() <= std::numeric_limits<uint16_t>::max()) {
        it->second = static_cast<uint16_t>(rank_.api_functions.size());
        rank_.api_functions.push_back(local(f.name_id));
      }
    }
    uint32_t last_correlation = rank_.host_calls.empty() ? 0 : rank_.host_calls.back().correlation_id;
    rank_.host_calls.resize(rank_.host_calls.size() + batch.api_calls.size());
    model::HostCall* call = rank_.host_calls.data() + rank_.host_calls.size() - batch.api_calls.size();
    for (const auto& c : batch.api_calls) {
      int64_t start = ns(c.start_ns);
      calls_by_correlation_ = calls_by_correlation_ && last_correlation <= c.correlation_id;
      last_correlation = c.correlation_id;
      *call++ = {start, std::max(start, ns(c.end_ns)), c.correlation_id, threadIndex(c.thread_id),
                 functionIndex(c.domain, c.cbid)};
    }
    for (const auto& s : batch.synchronizations) {
      if (s.stream == kNoSynchronizationStream) continue;
      model::GpuActivity a = activity(s.start_ns, s.end_ns, s.device, s.stream, s.correlation_id);
      a.kind = ActivityKind::kSync;
      a.name_id = localText(synchronizationName(s.kind));
      copies_.push_back(a);
    }
    for (const auto& n : batch.nvtx_events) {
      if (n.kind != format::NvtxEventKind::kRange) continue;
      if (const format::PayloadField* stream = streamOfHostOp(n)) {
        model::GpuActivity a = activity(n.start_ns, n.end_ns, n.device, static_cast<uint32_t>(stream->uint_value), 0);
        a.kind = ActivityKind::kHostOp;
        a.name_id = local(n.name_id);
        copies_.push_back(a);
        continue;
      }
      int64_t start = ns(n.start_ns);
      if (file_strings_.get(n.domain_id) == model::kCpuOpDomain && !model::isStepCpuOp(file_strings_.get(n.name_id))) {
        rank_.host_ops.push_back({start, std::max(start, ns(n.end_ns)), local(n.name_id), local(inputsOf(n)), n.thread_id});
        continue;
      }
      rank_.nvtx.push_back(
          {start, std::max(start, ns(n.end_ns)), local(n.name_id), local(n.domain_id), n.thread_id, n.depth});
    }
    for (const auto& m : batch.memory_events) {
      if (!isDeviceMemory(m.memory_kind) || m.operation == format::MemoryOperation::kUnknown) continue;
      if (m.bytes > kMaxPlausibleAllocation) {
        ++implausible_allocations_;
        continue;
      }
      auto bytes = static_cast<int64_t>(m.bytes);
      rank_.memory.push_back({ns(m.timestamp_ns),
                              m.operation == format::MemoryOperation::kAllocate ? bytes : -bytes, m.device,
                              m.address});
    }
    for (const auto& c : batch.nccl_communicators) {
      rank_.communicators.push_back({c.comm_hash, c.name, c.comm_rank, c.nranks, c.nnodes, c.global_rank, c.device});
    }
    for (const auto& o : batch.nccl_operations) {
      model::NcclOp op;
      op.kind = o.kind;
      op.comm_hash = o.comm_hash;
      op.seq = o.seq;
      op.func_id = local(o.func_id);
      op.algorithm_id = local(o.algorithm_id);
      op.protocol_id = local(o.protocol_id);
      op.datatype_id = local(o.datatype_id);
      op.enqueue_ns = ns(o.enqueue_ns);
      // GPU times still on the GPU's own timer cannot be placed among the other records.
      op.gpu_start_ns = o.gpu_clock_unmapped ? 0 : ns(o.gpu_start_ns);
      op.gpu_end_ns = o.gpu_clock_unmapped ? 0 : ns(o.gpu_end_ns);
      op.bytes = o.bytes;
      op.count = o.count;
      op.root = o.root;
      op.peer = o.peer;
      op.channels = o.channels;
      op.device = o.device;
      op.operation_id = o.operation_id;
      op.gpu_clock_error_ns = o.gpu_clock_error_ns;
      rank_.nccl_ops.push_back(op);
    }
    auto& header = rank_.header;
    header.clock_anchors.insert(header.clock_anchors.end(), batch.clock_anchors.begin(), batch.clock_anchors.end());
    header.devices.insert(header.devices.end(), batch.devices.begin(), batch.devices.end());
    header.links.insert(header.links.end(), batch.links.begin(), batch.links.end());
    header.capture_windows.insert(header.capture_windows.end(), batch.capture_windows.begin(),
                                  batch.capture_windows.end());
    for (const auto& m : batch.metric_samples) {
      rank_.metric_samples.push_back({ns(m.timestamp_ns), m.value, local(m.metric_id), m.device});
    }
    for (const auto& t : batch.net_transfers) {
      rank_.transfers.push_back({t.operation_id, t.comm_hash, t.peer, t.channel, t.is_send, t.bytes,
                                 ns(t.start_ns), ns(t.end_ns), t.wait_gpu_ns,
                                 t.wait_peer_ns, t.wait_network_ns});
    }
    for (const auto& l : batch.links) addLink(l);
    kernel_metrics_.insert(kernel_metrics_.end(), batch.kernel_metrics.begin(), batch.kernel_metrics.end());
  }

  uint64_t implausibleAllocations() const { return implausible_allocations_; }
  uint64_t metricsWithoutLaunch() const { return metrics_without_launch_; }
  uint64_t clampedTimes() const { return clamped_times_; }

  void addLink(const format::Link& link) {
    if (std::find(rank_.links.begin(), rank_.links.end(), link) == rank_.links.end()) rank_.links.push_back(link);
  }

  // Kernels and the rest (copies, memsets, synchronizations) each arrive nearly in order; each is
  // sorted (when it is not already) and the few others are merged into the kernels.
  void finish() {
    auto by_start = [](const auto& a, const auto& b) { return a.start_ns < b.start_ns; };
    setProfiledKernelsApart();
    // The kernels' and calls' order was checked as they came (a pass over each fewer).
    if (!kernels_by_start_) sortIfNeeded(rank_.activities, by_start);
    sortIfNeeded(copies_, by_start);
    mergeFromTheEnd(rank_.activities, copies_, by_start);
    std::vector<model::GpuActivity>().swap(copies_);
    trimExcess(rank_.activities);
    rank_.nvtx.change([&](std::vector<model::NvtxRange>& nvtx) { sortIfNeeded(nvtx, by_start); });
    sortIfNeeded(rank_.host_ops, by_start);
    sortIfNeeded(rank_.memory, [](const auto& a, const auto& b) { return a.time_ns < b.time_ns; });
    if (!calls_by_correlation_)
      sortIfNeeded(rank_.host_calls, [](const auto& a, const auto& b) { return a.correlation_id < b.correlation_id; });
    trimExcess(rank_.host_calls);
    rank_.indexLaunches();
    rank_.nccl_ops.change([](std::vector<model::NcclOp>& ops) {
      sortIfNeeded(ops, [](const auto& a, const auto& b) { return a.enqueue_ns < b.enqueue_ns; });
    });
    sortIfNeeded(rank_.metric_samples, [](const auto& a, const auto& b) { return a.time_ns < b.time_ns; });
  }

 private:
  // Moves each kernel that has counters (same device and correlation id) into profiled_kernels.
  void setProfiledKernelsApart() {
    if (kernel_metrics_.empty()) return;
    std::unordered_map<uint64_t, size_t> by_launch;
    auto key = [](uint32_t device, uint32_t correlation) { return (uint64_t{device} << 32) | correlation; };
    for (size_t i = 0; i < kernel_metrics_.size(); ++i) {
      by_launch.emplace(key(std::min<uint32_t>(kernel_metrics_[i].device, 255), kernel_metrics_[i].correlation_id), i);
    }
    std::vector<bool> found(kernel_metrics_.size(), false);
    auto kept = std::remove_if(rank_.activities.begin(), rank_.activities.end(), [&](const model::GpuActivity& a) {
      if (a.kind != ActivityKind::kCompute && a.kind != ActivityKind::kCommunication) return false;
      auto it = by_launch.find(key(a.device, a.correlation_id));
      if (it == by_launch.end() || found[it->second]) return false;
      found[it->second] = true;
      rank_.profiled_kernels.push_back(model::ProfiledKernel{a, true, kernel_metrics_[it->second]});
      return true;
    });
    rank_.activities.erase(kept, rank_.activities.end());
    std::sort(rank_.profiled_kernels.begin(), rank_.profiled_kernels.end(),
              [](const auto& a, const auto& b) { return a.launch.start_ns < b.launch.start_ns; });
    for (size_t i = 0; i < kernel_metrics_.size(); ++i) {
      if (found[i]) continue;
      ++metrics_without_launch_;
      model::ProfiledKernel orphan;
      orphan.metrics = kernel_metrics_[i];
      rank_.profiled_kernels.push_back(orphan);
    }
    kernel_metrics_ = {};
  }

  model::GpuActivity activity(uint64_t start, uint64_t end, uint32_t device, uint32_t stream, uint32_t correlation) {
    model::GpuActivity a;
    a.start_ns = ns(start);
    a.end_ns = std::max(a.start_ns, ns(end));
    a.device = static_cast<uint8_t>(std::min<uint32_t>(device, 255));
    a.stream = streamIndex(device, stream);
    a.correlation_id = correlation;
    return a;
  }

  uint32_t local(format::StringId id) {
    if (id == 0) return 0;
    auto [mapped, inserted] = to_local_.emplace(id);
    if (inserted) {
      *mapped = static_cast<uint32_t>(rank_.strings.size());
      rank_.strings.emplace_back(file_strings_.get(id));
      kinds_.push_back(-1);
    }
    return *mapped;
  }

  // A kernel's name, demangled (model/kernel_names.h); each file string once.
  uint32_t kernelName(format::StringId id) {
    if (id == 0) return 0;
    auto [mapped, inserted] = kernel_names_.emplace(id);
    if (inserted) {
      std::string readable = model::demangledKernelName(file_strings_.get(id));
      *mapped = readable.empty() ? local(id) : localText(readable);
    }
    return *mapped;
  }

  // The model's times are signed: a later one is clamped to the largest, and counted.
  int64_t ns(uint64_t time) {
    if (time <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return static_cast<int64_t>(time);
    ++clamped_times_;
    return std::numeric_limits<int64_t>::max();
  }

  // A string of our own (not from the file's table), interned once per rank.
  uint32_t localText(std::string_view text) {
    auto [it, inserted] = own_strings_.try_emplace(std::string(text), 0);
    if (inserted) {
      it->second = static_cast<uint32_t>(rank_.strings.size());
      rank_.strings.emplace_back(text);
      kinds_.push_back(-1);
    }
    return it->second;
  }

  // A cpu_op range that names a stream (see model::kCpuOpDomain): its "stream" payload field.
  // A host op's "inputs" payload field (a string id of the file), or 0.
  uint32_t inputsOf(const format::NvtxEventRecord& n) {
    for (const auto& field : n.payload) {
      if (field.type == format::PayloadField::Type::kString && file_strings_.get(field.name_id) == "inputs") return field.string_id;
    }
    return 0;
  }

  const format::PayloadField* streamOfHostOp(const format::NvtxEventRecord& n) {
    if (n.payload.empty() || file_strings_.get(n.domain_id) != model::kCpuOpDomain) return nullptr;
    for (const auto& field : n.payload) {
      if (field.type == format::PayloadField::Type::kUint && file_strings_.get(field.name_id) == "stream") return &field;
    }
    return nullptr;
  }

  ActivityKind kernelKind(uint32_t name_id) {
    if (name_id == 0) return ActivityKind::kCompute;
    if (kinds_.size() < rank_.strings.size()) kinds_.resize(rank_.strings.size(), -1);
    int8_t& kind = kinds_[name_id];
    if (kind < 0) kind = static_cast<int8_t>(model::isCommunicationKernel(rank_.strings[name_id]) ? ActivityKind::kCommunication
                                                                                          : ActivityKind::kCompute);
    return static_cast<ActivityKind>(kind);
  }

  // What a kernel's launch configuration makes of it: its name, kind and configuration in the rank.
  struct KernelLaunch {
    uint32_t name_id = 0;
    ActivityKind kind = ActivityKind::kCompute;
    uint32_t config = 0;
    bool known = false;
  };
  // Worked out once per configuration of the file (most kernels of a file share a few hundred), not
  // per kernel from its name and fields.
  KernelLaunch launchOf(const format::KernelRecord& k) {
    uint32_t id = k.config_id.value;
    bool cached = id != 0 && id < kMaxCachedConfigs;
    if (cached && id < launches_by_config_.size() && launches_by_config_[id].known) return launches_by_config_[id];
    KernelLaunch launch;
    launch.name_id = kernelName(k.name_id);
    launch.kind = kernelKind(launch.name_id);
    launch.config = launchConfig(k);
    launch.known = true;
    if (cached) {
      if (id >= launches_by_config_.size()) launches_by_config_.resize(id + 1);
      launches_by_config_[id] = launch;
    }
    return launch;
  }

  uint32_t launchConfig(const format::KernelRecord& k) {
    model::LaunchConfig c{k.grid_x, k.grid_y, k.grid_z, k.block_x, k.block_y, k.block_z, k.registers_per_thread,
                          k.static_shared_memory + k.dynamic_shared_memory, k.local_memory_per_thread};
    auto [it, inserted] = configs_.try_emplace(c, static_cast<uint32_t>(rank_.launch_configs.size()));
    if (inserted) rank_.launch_configs.push_back(c);
    return it->second;
  }

  uint16_t functionIndex(format::ApiDomain domain, uint32_t cbid) {
    uint64_t key = (uint64_t{static_cast<uint32_t>(domain)} << 32) | cbid;
    if (key == last_function_key_) return last_function_;
    auto it = functions_.find(key);
    if (it == functions_.end()) return 0;
    last_function_key_ = key;
    last_function_ = it->second;
    return last_function_;
  }

  // Threads beyond 2^16 share the last index.
  uint16_t threadIndex(uint64_t thread_id) {
    if (last_thread_ < rank_.threads.size() && rank_.threads[last_thread_] == thread_id) return last_thread_;
    auto [it, inserted] = threads_.try_emplace(thread_id, 0);
    if (inserted) {
      if (rank_.threads.size() <= std::numeric_limits<uint16_t>::max()) {
        it->second = static_cast<uint16_t>(rank_.threads.size());
        rank_.threads.push_back(thread_id);
      } else {
        it->second = std::numeric_limits<uint16_t>::max();
      }
    }
    last_thread_ = it->second;
    return last_thread_;
  }

  uint16_t streamIndex(uint32_t device, uint32_t stream) { return rank_.streamIndex(device, stream, last_stream_); }

  model::RankTrace& rank_;
  const format::StringTable& file_strings_;
  std::vector<model::GpuActivity> copies_;
  format::IdMap<uint32_t> to_local_;
  format::IdMap<uint32_t> kernel_names_;
  std::vector<int8_t> kinds_{-1};
  std::unordered_map<model::LaunchConfig, uint32_t, model::LaunchConfigHash> configs_;
  static constexpr uint32_t kMaxCachedConfigs = 1 << 20;
  std::vector<KernelLaunch> launches_by_config_;  // by the file's configuration id
  std::unordered_map<std::string, uint32_t> own_strings_;
  std::unordered_map<uint64_t, uint16_t> functions_;  // (domain, cbid) -> index into api_functions
  std::unordered_map<uint64_t, uint16_t> threads_;    // OS thread id -> index into threads
  uint16_t last_stream_ = 0;
  uint16_t last_thread_ = 0;
  uint64_t last_function_key_ = ~uint64_t{0};
  uint16_t last_function_ = 0;
  uint64_t implausible_allocations_ = 0;
  uint64_t clamped_times_ = 0;
  std::vector<format::KernelMetricsRecord> kernel_metrics_;
  uint64_t metrics_without_launch_ = 0;
  bool kernels_by_start_ = true;      // rank_.activities (the kernels alone until finish()) came by start
  bool calls_by_correlation_ = true;  // rank_.host_calls came by correlation id
};

}  // namespace

std::string_view synchronizationName(format::SynchronizationKind kind) {
  switch (kind) {
    case format::SynchronizationKind::kEventSynchronize: return "Event Sync";
    case format::SynchronizationKind::kStreamWaitEvent: return "Stream Wait Event";
    case format::SynchronizationKind::kStreamSynchronize: return "Stream Sync";
    case format::SynchronizationKind::kContextSynchronize: return "Context Sync";
    case format::SynchronizationKind::kUnknown: break;
  }
  return "Unknown Sync";
}

format::SynchronizationKind synchronizationKindNamed(std::string_view name) {
  for (auto kind : {format::SynchronizationKind::kEventSynchronize, format::SynchronizationKind::kStreamWaitEvent,
                    format::SynchronizationKind::kStreamSynchronize, format::SynchronizationKind::kContextSynchronize}) {
    if (name == synchronizationName(kind)) return kind;
  }
  return format::SynchronizationKind::kUnknown;
}

model::RankTrace loadRankTrace(const std::string& path, std::vector<std::string>& warnings) {
  format::TraceReader reader(path);
  model::RankTrace rank;
  rank.path = path;
  rank.header = reader.header();
  rank.rank = rank.header.rank;
  rank.whole_microsecond_times = rank.header.time_base == model::kKinetoWholeMicrosecondsTimeBase;
  RankBuilder builder(rank, reader.strings());
  for (const auto& link : rank.header.links) builder.addLink(link);
  format::EventBatch batch;
  format::CategoryCounts counts{};
  while (reader.next(batch)) {
    format::countRecords(batch, counts);
    builder.add(batch, static_cast<double>(reader.position()) / static_cast<double>(reader.stats().file_bytes));
  }
  builder.finish();
  for (uint64_t n : counts) rank.records_read += n;
  using report::Stat;
  report::Stats& stats = rank.stats;
  const format::ReadStats& read = reader.stats();
  uint64_t skipped_chunk_lines = 0;
  for (const auto& warning : reader.warnings()) {
    bool torn = warning.find(": torn tail at ") != std::string::npos;
    if (!torn) ++skipped_chunk_lines;
    report::warn(stats, warnings, torn ? Stat::trace_tail_torn : Stat::trace_chunks_damaged, 0, warning);
  }
  // A line the reader did not count as damage (a second header, records after the trailer) counts as one chunk.
  stats.add(Stat::trace_chunks_damaged, std::max(read.damaged_chunks, skipped_chunk_lines));
  stats.add(Stat::trace_tail_torn, read.torn_at ? 1 : 0);
  stats.add(Stat::trace_bytes_skipped, read.bytes_skipped);
  if (read.unresolved_references > 0) {
    report::warn(stats, warnings, Stat::trace_references_unresolved, read.unresolved_references,
                 fmt::format("{}: {} kernels refer to a launch configuration lost with a damaged chunk", path,
                             read.unresolved_references));
  }
  if (builder.clampedTimes() > 0) {
    report::warn(stats, warnings, Stat::times_clamped, builder.clampedTimes(),
                 fmt::format("{}: {} times beyond 2^63 ns (or ending there) were clamped to that limit", path,
                             builder.clampedTimes()));
  }
  if (size_t profiled = rank.profiled_kernels.size() - builder.metricsWithoutLaunch(); profiled > 0) {
    stats.add(Stat::kernels_profiled, profiled);
  }
  if (builder.metricsWithoutLaunch() > 0) {
    report::warn(stats, warnings, Stat::kernel_metrics_without_launch, builder.metricsWithoutLaunch(),
                 fmt::format("{}: {} kernel counter records name a launch that is not in the file", path,
                             builder.metricsWithoutLaunch()));
  }
  if (builder.implausibleAllocations() > 0) {
    report::warn(stats, warnings, Stat::allocations_implausible, builder.implausibleAllocations(),
                 fmt::format("{}: {} memory allocations or releases of more than 16 TiB ignored", path,
                             builder.implausibleAllocations()));
  }
  if (!reader.trailer()) {
    report::warn(stats, warnings, Stat::capture_not_finished, 1,
                 path + ": no trailer: the capture did not finish cleanly; what was written is used");
  } else {
    for (const auto& count : reader.trailer()->counts) {
      if (count.dropped > 0) {
        report::warn(stats, warnings, Stat::capture_records_dropped, count.dropped,
                     fmt::format("{}: {} {} records were dropped during capture", path, count.dropped,
                                 format::categoryName(count.category)));
      }
    }
    for (const auto& warning : reader.trailer()->warnings) {
      if (!warning.empty())
        report::warn(stats, warnings, Stat::capture_warnings, 1,
                     fmt::format("{}: the capture warned: {}", path, warning));
    }
  }
  return rank;
}

model::RankTrace loadTraceFile(const std::string& path, std::vector<std::string>& warnings) {
  return traceFileFormat(path) == model::SourceFormat::kKineto ? importKinetoTrace(path, warnings)
                                                               : loadRankTrace(path, warnings);
}

model::RunTrace loadRun(const std::vector<std::string>& paths, const LoadOptions& options) {
  TraceFileSet set = discoverTraceFiles(paths);

  struct Loaded {
    std::optional<model::RankTrace> rank;
    std::vector<std::string> warnings;
    report::Stats stats;
    std::string error;
    bool digest = false;
  };
  std::vector<Loaded> loaded(set.files.size());
  std::set<int32_t> wanted(options.ranks.begin(), options.ranks.end());
  std::atomic<size_t> done{0};
  std::atomic<bool> out_of_memory{false};
  std::exception_ptr memory_error;  // the first, kept to be thrown again as it was
  std::mutex memory_error_mutex;
  onWorkers(set.files.size(), options.threads, [&](size_t i) {
    try {
      // Out of memory: the files left are not read (the run fails whatever they hold).
      if (out_of_memory) throw std::bad_alloc();
      const std::string& path = set.files[i];
      loaded[i].digest = path.ends_with(kDigestFileExtension);
      if (loaded[i].digest && !options.read_digest)
        throw InputError(fmt::format("{}: a digest (gpuxray digest), which this command cannot read", path));
      model::RankTrace rank =
          loaded[i].digest ? options.read_digest(path, loaded[i].warnings) : loadTraceFile(path, loaded[i].warnings);
      // A PyTorch-profiler trace without a rank gets one below, once all are read.
      bool kept = wanted.empty() || wanted.contains(rank.rank) || rank.rank < 0;
      if (kept && options.reduce && !loaded[i].digest) options.reduce(rank, i);
      loaded[i].stats = std::exchange(rank.stats, {});
      if (kept) loaded[i].rank = std::move(rank);
    } catch (const std::bad_alloc&) {
      // Not the file's fault: the whole run is over the memory it may use.
      std::lock_guard lock(memory_error_mutex);
      if (!out_of_memory.exchange(true)) memory_error = std::current_exception();
    } catch (const std::exception& e) {
      loaded[i].error = e.what();
    }
    if (options.file_done) options.file_done(i);
    if (options.progress) options.progress(++done, set.files.size());
  });
  if (out_of_memory) std::rethrow_exception(memory_error);

  model::RunTrace run;
  run.warnings = std::move(set.warnings);
  run.stats = std::move(set.stats);
  std::string first_error;
  std::map<std::string, std::string> digest_of;  // a rank's trace -> the digest it was read from
  for (auto& file : loaded) {
    if (!file.error.empty()) {
      report::warn(run.stats, run.warnings, report::Stat::files_skipped, 1, file.error + "; file skipped");
      if (first_error.empty()) first_error = file.error;
    }
    run.warnings.insert(run.warnings.end(), file.warnings.begin(), file.warnings.end());
    run.stats.merge(file.stats);
    if (file.rank && file.digest) digest_of[file.rank->path] = set.files[static_cast<size_t>(&file - loaded.data())];
    if (file.rank) run.ranks.push_back(std::move(*file.rank));
  }
  if (run.ranks.empty() && !first_error.empty()) throw InputError(first_error);
  settleKinetoRanks(run.ranks, run.warnings, run.stats);
  if (!wanted.empty()) std::erase_if(run.ranks, [&](const auto& rank) { return !wanted.contains(rank.rank); });
  std::vector<RankedFile> ranked;
  for (const auto& rank : run.ranks) {
    auto digest = digest_of.find(rank.path);
    ranked.push_back({digest != digest_of.end() ? digest->second : rank.path, &rank.header});
  }
  RunProblems problems = checkRunMembership(ranked, options.allow_mixed_runs, set.from_directory && wanted.empty());
  if (!problems.errors.empty()) {
    std::string message = problems.errors.front();
    for (size_t i = 1; i < problems.errors.size(); ++i) message += "\n" + problems.errors[i];
    throw InputError(message);
  }
  run.warnings.insert(run.warnings.end(), problems.warnings.begin(), problems.warnings.end());
  run.stats.merge(problems.stats);
  if (run.ranks.empty()) throw InputError("no trace file holds the ranks asked for");
  std::sort(run.ranks.begin(), run.ranks.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
  run.run_id = run.ranks.front().header.run_id;
  for (const auto& rank : run.ranks) run.world_size = std::max(run.world_size, rank.header.world_size);
  return run;
}

}  // namespace gpuxray::load
