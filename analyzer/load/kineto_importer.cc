#include "analyzer/load/kineto_importer.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <unordered_map>

#include "analyzer/errors.h"
#include "analyzer/load/byte_input.h"
#include "analyzer/load/json_event_splitter.h"
#include "analyzer/load/kineto_collectives.h"
#include "analyzer/model/communication_kernels.h"
#include "analyzer/model/graph_capture.h"

namespace gpuxray::load {
namespace {

using model::ActivityKind;

struct TransparentHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

// The collective arguments of an NCCL kernel or of a record_param_comms op, copied out of the
// parser's buffers.
struct CollectiveArgs {
  std::string collective, dtype, group_name, group_description;
  std::vector<int32_t> group_ranks;
  int64_t in_nelems = -1, out_nelems = -1, group_size = -1, src_rank = -1, dst_rank = -1;
  int64_t host_start_ns = 0;

  bool sized() const { return in_nelems > 0 || out_nelems > 0; }

  static CollectiveArgs of(const KinetoEvent::Args& a) {
    CollectiveArgs c;
    c.collective = a.collective;
    c.dtype = a.dtype;
    c.group_name = a.group_name;
    c.group_description = a.group_description;
    c.group_ranks = parseRankList(a.group_ranks);
    c.in_nelems = a.in_nelems.value_or(-1);
    c.out_nelems = a.out_nelems.value_or(-1);
    c.group_size = a.group_size.value_or(-1);
    c.src_rank = a.src_rank.value_or(-1);
    c.dst_rank = a.dst_rank.value_or(-1);
    // Before PyTorch 2.2 record_param_comms carries no "In msg nelems": its first input, the tensor,
    // has the size (RECORD_PARAM_COMMS_DATA records {InputTensors, seq, pg, rank, ...}).
    if (!c.sized() && a.first_input_elements > 0 && dtypeSize(a.first_input_type) > 0) {
      c.in_nelems = c.out_nelems = a.first_input_elements;
      c.dtype = a.first_input_type;
    }
    return c;
  }
};

// A record_param_comms op: the kernels its call launches are the collective it describes.
struct ParamComms {
  int64_t start_ns = 0, end_ns = 0, tid = 0;
  CollectiveArgs args;
};

// A GPU-side "nccl:<collective>" annotation: the collective its kernels perform (RCCL's Generic kernel
// names none).
struct CollectiveAnnotation {
  int64_t start_ns = 0, end_ns = 0, stream = 0;
  std::string collective;
};

struct PendingCollective {
  int64_t start_ns = 0, end_ns = 0;
  uint32_t device = 0;
  uint32_t kernel_name_id = 0;
  uint32_t correlation = 0;
  uint32_t channels = 0;
  int64_t external_id = -1;
  int64_t stream = 0;
  std::optional<CollectiveArgs> args;
  size_t activity = 0;  // index in the activities while unsorted, to take a correlation found later
};

struct ProcessGroup {
  std::string name, description, backend;
  int32_t size = 0;
  std::vector<int32_t> ranks;
};

struct DistributedInfo {
  bool present = false;
  std::optional<int64_t> rank, world_size;
  std::string backend, nccl_version;
  std::vector<ProcessGroup> groups;
};

struct Flow {
  int64_t tid = 0;
  int64_t ts_ns = 0;
  uint64_t id = 0;
};

uint32_t saturated32(int64_t value) {
  return static_cast<uint32_t>(std::clamp<int64_t>(value, 0, std::numeric_limits<uint32_t>::max()));
}

// Builds one RankTrace from Kineto events, in file order.
class KinetoRankBuilder {
 public:
  KinetoRankBuilder(model::RankTrace& rank, KinetoImportStats& stats) : rank_(rank), stats_(stats) {}

  void add(const KinetoEvent& e) {
    ++stats_.events;
    ++stats_.by_category[static_cast<size_t>(e.category)];
    if (e.category == KinetoCategory::kUnknown) ++unknown_categories_[std::string(e.category_text)];
    if (e.ts && e.ts->fractional) fractional_times_ = true;
    switch (e.phase) {
      case 'X': complete(e); break;
      case 's':
      case 'f':
        if (e.category == KinetoCategory::kAc2g) {
          ++stats_.flows;
          if (e.phase == 'f' && e.id && e.ts && e.tid) flows_.push_back({*e.tid, e.ts->ns, *e.id});
        }
        break;
      case 'i':
      case 'I': instant(e); break;
      default: break;  // metadata (M), counters and the rest carry nothing the analyses read
    }
  }

  // An event left unparsed (of a category nothing reads).
  void countUnparsed(KinetoCategory category) {
    ++stats_.events;
    ++stats_.by_category[static_cast<size_t>(category)];
  }

  void setDistributedInfo(DistributedInfo info) { distributed_ = std::move(info); }
  void setBaseTime(int64_t ns) { base_time_ns_ = ns; }

  void finish(const std::string& path, std::vector<std::string>& warnings) {
    matchFlows();
    rank_.whole_microsecond_times = !fractional_times_;
    rank_.header.time_base = fractional_times_ ? model::kKinetoTimeBase : model::kKinetoWholeMicrosecondsTimeBase;
    auto by_start = [](const auto& a, const auto& b) { return a.start_ns < b.start_ns; };
    std::stable_sort(rank_.activities.begin(), rank_.activities.end(), by_start);
    rank_.activities.shrink_to_fit();
    std::sort(rank_.host_calls.begin(), rank_.host_calls.end(),
              [](const auto& a, const auto& b) { return a.correlation_id < b.correlation_id; });
    rank_.host_calls.shrink_to_fit();
    rank_.indexLaunches();
    finishRanges();
    std::stable_sort(rank_.memory.begin(), rank_.memory.end(), [](const auto& a, const auto& b) { return a.time_ns < b.time_ns; });
    std::stable_sort(rank_.host_ops.begin(), rank_.host_ops.end(),
                     [](const auto& a, const auto& b) { return a.start_ns < b.start_ns; });
    rank_.host_ops.shrink_to_fit();
    finishDistributed();
    finishCollectives();
    if (base_time_ns_ > 0 && !rank_.activities.empty()) {
      rank_.header.start_time_ns = static_cast<uint64_t>(base_time_ns_ + rank_.activities.front().start_ns);
    }
    rank_.records_read = stats_.events;
    if (!unknown_categories_.empty()) {
      std::string list;
      size_t shown = 0;
      uint64_t total = 0;
      for (const auto& [name, count] : unknown_categories_) {
        total += count;
        if (shown++ < 5) list += fmt::format("{}\"{}\" ({})", list.empty() ? "" : ", ", name, count);
      }
      if (unknown_categories_.size() > 5) list += fmt::format(" and {} more", unknown_categories_.size() - 5);
      report::warn(rank_.stats, warnings, report::Stat::kineto_events_unknown_category, total,
                   fmt::format("{}: {} events of unknown categories were ignored: {}", path, total, list));
    }
    if (stats_.missing_fields > 0) {
      report::warn(rank_.stats, warnings, report::Stat::kineto_events_missing_fields, stats_.missing_fields,
                   fmt::format("{}: {} events lack a field gpuxray needs (ts, dur or a stream); they were skipped",
                               path, stats_.missing_fields));
    }
  }

 private:
  void complete(const KinetoEvent& e) {
    switch (e.category) {
      case KinetoCategory::kKernel:
      case KinetoCategory::kGpuMemcpy:
      case KinetoCategory::kGpuMemset:
      case KinetoCategory::kCudaSync: gpuEvent(e); break;
      case KinetoCategory::kCudaRuntime:
      case KinetoCategory::kCudaDriver: {
        if (!e.ts || !e.dur) return missing();
        int64_t correlation = e.args.correlation.value_or(0);
        int64_t end = e.ts->ns + std::max<int64_t>(0, e.dur->ns);
        if (correlation > 0) {
          rank_.host_calls.push_back(
              {e.ts->ns, end, saturated32(correlation), threadIndex(e.tid.value_or(0)), apiFunction(e.name)});
        }
        graphCapture(e, end);
        noteProcess(e);
        break;
      }
      case KinetoCategory::kUserAnnotation: range(e, model::kUserAnnotationDomain); break;
      case KinetoCategory::kGpuUserAnnotation: range(e, model::kGpuUserAnnotationDomain); break;
      case KinetoCategory::kCpuOp: cpuOp(e); break;
      default: break;
    }
  }

  void missing() { ++stats_.missing_fields; }

  void noteProcess(const KinetoEvent& e) {
    if (rank_.header.pid == 0 && e.pid && *e.pid > 0) rank_.header.pid = saturated32(*e.pid);
  }

  model::GpuActivity activity(const KinetoEvent& e, int64_t stream) {
    model::GpuActivity a;
    a.start_ns = e.ts->ns;
    a.end_ns = e.ts->ns + std::max<int64_t>(0, e.dur->ns);
    int64_t device = e.args.device.value_or(e.pid.value_or(0));
    a.device = static_cast<uint8_t>(std::clamp<int64_t>(device, 0, 255));
    a.stream = streamIndex(static_cast<uint32_t>(std::max<int64_t>(0, device)), saturated32(stream));
    a.correlation_id = saturated32(e.args.correlation.value_or(0));
    return a;
  }

  void gpuEvent(const KinetoEvent& e) {
    std::optional<int64_t> stream = e.args.stream ? e.args.stream : e.tid;
    if (!e.ts || !e.dur || !stream) return missing();
    if (*stream < 0) return;  // a synchronization waiting on no stream (event or context): no stream to show it on
    model::GpuActivity a = activity(e, *stream);
    a.name_id = intern(e.name);
    switch (e.category) {
      case KinetoCategory::kKernel: {
        const model::CommunicationKernelFamily* family = communicationFamily(a.name_id);
        a.kind = family != nullptr ? ActivityKind::kCommunication : ActivityKind::kCompute;
        a.detail = launchConfig(e.args);
        if (family != nullptr && family->nccl) {
          PendingCollective c;
          c.start_ns = a.start_ns;
          c.end_ns = a.end_ns;
          c.device = a.device;
          c.kernel_name_id = a.name_id;
          c.correlation = a.correlation_id;
          c.channels = e.args.grid[0];
          c.external_id = e.args.external_id.value_or(-1);
          c.stream = *stream;
          if (!e.args.collective.empty()) c.args = CollectiveArgs::of(e.args);
          c.activity = rank_.activities.size();
          collectives_.push_back(std::move(c));
        }
        break;
      }
      case KinetoCategory::kGpuMemcpy:
        a.kind = ActivityKind::kMemcpy;
        a.detail = saturated32(e.args.bytes.value_or(0));
        break;
      case KinetoCategory::kGpuMemset:
        a.kind = ActivityKind::kMemset;
        a.detail = saturated32(e.args.bytes.value_or(0));
        break;
      default:
        a.kind = ActivityKind::kSync;
        break;
    }
    if (a.correlation_id == 0) uncorrelated_.push_back({rank_.activities.size(), e.tid.value_or(*stream)});
    rank_.activities.push_back(a);
  }

  void range(const KinetoEvent& e, std::string_view domain) {
    if (!e.ts || !e.dur) return missing();
    model::NvtxRange r;
    r.start_ns = e.ts->ns;
    r.end_ns = e.ts->ns + std::max<int64_t>(0, e.dur->ns);
    r.name_id = intern(e.name);
    r.domain_id = intern(domain);
    r.thread_id = static_cast<uint64_t>(e.tid.value_or(0));
    rank_.nvtx.push_back(r);
    if (e.category == KinetoCategory::kGpuUserAnnotation && e.name.starts_with("nccl:")) {
      annotations_.push_back({r.start_ns, r.end_ns, e.tid.value_or(0), std::string(e.name.substr(5))});
    }
  }

  void cpuOp(const KinetoEvent& e) {
    noteProcess(e);
    if (e.args.stream && *e.args.stream >= 0) {
      // A host op naming a stream (Inductor's Triton launches): kept for --compat hta, see kHostOp.
      if (!e.ts || !e.dur) return missing();
      model::GpuActivity a = activity(e, *e.args.stream);
      a.correlation_id = 0;
      a.kind = ActivityKind::kHostOp;
      a.name_id = intern(e.name);
      rank_.activities.push_back(a);
    }
    if (model::isStepCpuOp(e.name)) {
      range(e, model::kCpuOpDomain);
    } else if (e.ts && e.dur) {
      inputs_.clear();
      appendInputs(e.args, inputs_);
      rank_.host_ops.push_back({e.ts->ns, e.ts->ns + std::max<int64_t>(0, e.dur->ns), intern(e.name), intern(inputs_),
                                static_cast<uint64_t>(e.tid.value_or(0))});
    }
    if (e.name == "record_param_comms" && e.ts) {
      CollectiveArgs c = CollectiveArgs::of(e.args);
      c.host_start_ns = e.ts->ns;
      if (e.dur)
        param_comms_in_time_.push_back({e.ts->ns, e.ts->ns + std::max<int64_t>(0, e.dur->ns), e.tid.value_or(0), c});
      if (e.args.external_id) param_comms_.emplace(*e.args.external_id, std::move(c));
    }
  }

  void instant(const KinetoEvent& e) {
    // [memory]: the caching allocator's allocations (Bytes > 0) and frees (< 0) with profile_memory=True.
    if (e.category != KinetoCategory::kCpuInstantEvent || e.name != "[memory]") return;
    if (!e.ts || !e.args.alloc_bytes) return missing();
    if (e.args.device_type.value_or(-1) != 1) return;  // 1: CUDA (c10::DeviceType)
    rank_.memory.push_back(
        {e.ts->ns, *e.args.alloc_bytes, saturated32(e.args.device_id.value_or(0)), e.args.alloc_address});
  }

  uint32_t intern(std::string_view text) {
    if (text.empty()) return 0;
    auto it = ids_.find(text);
    if (it != ids_.end()) return it->second;
    auto id = static_cast<uint32_t>(rank_.strings.size());
    rank_.strings.emplace_back(text);
    ids_.emplace(std::string(text), id);
    return id;
  }

  const model::CommunicationKernelFamily* communicationFamily(uint32_t name_id) {
    if (name_id >= families_.size()) families_.resize(rank_.strings.size(), {false, nullptr});
    auto& [known, family] = families_[name_id];
    if (!known) known = true, family = model::communicationFamilyOf(rank_.strings[name_id]);
    return family;
  }

  uint16_t apiFunction(std::string_view name) {
    uint32_t name_id = intern(name);
    auto [it, inserted] = api_function_of_.try_emplace(name_id, 0);
    if (inserted && rank_.api_functions.size() <= std::numeric_limits<uint16_t>::max()) {
      it->second = static_cast<uint16_t>(rank_.api_functions.size());
      rank_.api_functions.push_back(name_id);
    }
    return it->second;
  }

  // A capture's begin and end calls on one thread become a range of kGraphCaptureDomain.
  void graphCapture(const KinetoEvent& e, int64_t end) {
    int64_t tid = e.tid.value_or(0);
    if (model::isBeginCapture(e.name)) {
      capture_begins_[tid] = e.ts->ns;
    } else if (model::isEndCapture(e.name)) {
      auto begin = capture_begins_.find(tid);
      if (begin == capture_begins_.end()) return;
      model::NvtxRange r;
      r.start_ns = begin->second;
      r.end_ns = end;
      r.name_id = intern(e.name);
      r.domain_id = intern(model::kGraphCaptureDomain);
      r.thread_id = static_cast<uint64_t>(tid);
      rank_.nvtx.push_back(r);
      capture_begins_.erase(begin);
    }
  }

  uint16_t threadIndex(int64_t tid) {
    auto id = static_cast<uint64_t>(tid);
    if (!rank_.threads.empty() && rank_.threads[last_thread_] == id) return last_thread_;
    auto it = std::find(rank_.threads.begin(), rank_.threads.end(), id);
    if (it == rank_.threads.end()) {
      if (rank_.threads.size() >= std::numeric_limits<uint16_t>::max()) return 0;
      rank_.threads.push_back(id);
      it = rank_.threads.end() - 1;
    }
    last_thread_ = static_cast<uint16_t>(it - rank_.threads.begin());
    return last_thread_;
  }

  // The record_param_comms op whose call launched the kernel of this correlation: the innermost one
  // around the launch, on its thread.
  const CollectiveArgs* paramCommsAroundLaunch(uint32_t correlation) const {
    const model::HostCall* launch = correlation != 0 ? rank_.launchOf(correlation) : nullptr;
    if (launch == nullptr || param_comms_in_time_.empty()) return nullptr;
    uint64_t tid = launch->thread < rank_.threads.size() ? rank_.threads[launch->thread] : 0;
    auto after = std::upper_bound(param_comms_in_time_.begin(), param_comms_in_time_.end(), launch->start_ns,
                                  [](int64_t t, const ParamComms& p) { return t < p.start_ns; });
    while (after != param_comms_in_time_.begin()) {
      --after;
      if (static_cast<uint64_t>(after->tid) == tid && after->end_ns >= launch->start_ns) return &after->args;
      if (launch->start_ns - after->start_ns > kLongestParamComms) break;
    }
    return nullptr;
  }

  // The collective named by the "nccl:" GPU annotation around a kernel on its stream.
  std::string_view annotatedCollective(const PendingCollective& c) const {
    std::string_view found;
    for (const auto& a : annotations_) {
      if (a.stream == c.stream && a.start_ns <= c.start_ns && c.start_ns < a.end_ns) found = a.collective;
    }
    return found;
  }

  uint32_t launchConfig(const KinetoEvent::Args& a) {
    model::LaunchConfig c{a.grid[0], a.grid[1], a.grid[2], a.block[0], a.block[1], a.block[2], a.registers,
                          a.shared_memory, 0};
    auto [it, inserted] = configs_.try_emplace(c, static_cast<uint32_t>(rank_.launch_configs.size()));
    if (inserted) rank_.launch_configs.push_back(c);
    return it->second;
  }

  uint16_t streamIndex(uint32_t device, uint32_t stream) { return rank_.streamIndex(device, stream, last_stream_); }

  // GPU events without a "correlation" argument take the id of the ac2g flow that ends on them.
  void matchFlows() {
    if (!uncorrelated_.empty() && !flows_.empty()) {
      std::unordered_map<int64_t, std::vector<const Flow*>> by_time;
      for (const Flow& f : flows_) by_time[f.ts_ns].push_back(&f);
      for (const auto& [index, tid] : uncorrelated_) {
        model::GpuActivity& a = rank_.activities[index];
        auto it = by_time.find(a.start_ns);
        if (it == by_time.end()) continue;
        for (const Flow* f : it->second) {
          if (f->tid == tid) a.correlation_id = saturated32(static_cast<int64_t>(std::min<uint64_t>(f->id, UINT32_MAX)));
        }
      }
      for (auto& c : collectives_) c.correlation = rank_.activities[c.activity].correlation_id;
    }
    flows_ = {};
    uncorrelated_ = {};
  }

  // Nesting depth per thread and domain, then everything by start time.
  void finishRanges() {
    std::vector<model::NvtxRange> ranges = rank_.nvtx.values();
    std::stable_sort(ranges.begin(), ranges.end(), [](const auto& a, const auto& b) {
      return std::tie(a.domain_id, a.thread_id, a.start_ns) < std::tie(b.domain_id, b.thread_id, b.start_ns) ||
             (std::tie(a.domain_id, a.thread_id, a.start_ns) == std::tie(b.domain_id, b.thread_id, b.start_ns) && a.end_ns > b.end_ns);
    });
    std::vector<int64_t> open_ends;
    for (size_t i = 0; i < ranges.size(); ++i) {
      if (i == 0 || ranges[i].domain_id != ranges[i - 1].domain_id || ranges[i].thread_id != ranges[i - 1].thread_id) open_ends.clear();
      while (!open_ends.empty() && open_ends.back() <= ranges[i].start_ns) open_ends.pop_back();
      ranges[i].depth = static_cast<uint32_t>(open_ends.size());
      open_ends.push_back(ranges[i].end_ns);
    }
    std::stable_sort(ranges.begin(), ranges.end(), [](const auto& a, const auto& b) { return a.start_ns < b.start_ns; });
    rank_.nvtx = model::NvtxRanges(std::move(ranges));
  }

  uint32_t mainDevice() const {
    std::map<uint32_t, uint64_t> counts;
    for (const auto& a : rank_.activities) ++counts[a.device];
    uint32_t best = 0;
    uint64_t most = 0;
    for (const auto& [device, count] : counts) {
      if (count > most) best = device, most = count;
    }
    return best;
  }

  void finishDistributed() {
    auto& h = rank_.header;
    // Without a rank (no distributedInfo: not a distributed run, or an old PyTorch) loadRun picks one.
    if (!distributed_.present) return;
    if (distributed_.rank && *distributed_.rank >= 0 && *distributed_.rank <= INT32_MAX) {
      rank_.rank = h.rank = static_cast<int32_t>(*distributed_.rank);
      h.rank_source = "distributedInfo";
    }
    if (distributed_.world_size && *distributed_.world_size > 0 && *distributed_.world_size <= INT32_MAX)
      h.world_size = static_cast<int32_t>(*distributed_.world_size);
    h.nccl_version = distributed_.nccl_version;
  }

  void addCommunicator(const std::string& group_name, const std::string& description, int32_t size,
                       const std::vector<int32_t>& ranks, uint32_t device) {
    uint64_t hash = processGroupHash(group_name);
    for (const auto& c : rank_.communicators) {
      if (c.comm_hash == hash) return;
    }
    auto member = std::find(ranks.begin(), ranks.end(), rank_.rank);
    if (!ranks.empty() && member == ranks.end()) return;  // a group this rank is not in
    model::Communicator c;
    c.comm_hash = hash;
    c.name = description.empty() || description == "undefined" ? fmt::format("pg {}", group_name)
                                                                 : fmt::format("pg {} ({})", group_name, description);
    c.comm_rank = ranks.empty() ? rank_.rank : static_cast<int32_t>(member - ranks.begin());
    c.nranks = size > 0 ? size : static_cast<int32_t>(ranks.size());
    c.global_rank = rank_.rank;
    c.device = device;
    rank_.communicators.push_back(std::move(c));
  }

  void addDefaultGroup(uint32_t device) {
    uint64_t hash = processGroupHash("0");
    for (const auto& c : rank_.communicators) {
      if (c.comm_hash == hash) return;
    }
    model::Communicator c;
    c.comm_hash = hash;
    c.name = "default group";
    c.comm_rank = rank_.rank;
    c.nranks = rank_.header.world_size;
    c.global_rank = rank_.rank;
    c.device = device;
    rank_.communicators.push_back(std::move(c));
  }

  // NCCL kernels become NCCL operations: arguments from the kernel, else from the record_param_comms
  // op of the same External id; the communicator is the process group; seq counts the operations
  // of each (group, function) in GPU start order.
  void finishCollectives() {
    uint32_t device = mainDevice();
    size_t nccl_groups = 0;
    std::string only_group;
    for (const auto& g : distributed_.groups) {
      if (!g.backend.empty() && g.backend.find("nccl") == std::string::npos) continue;  // gloo, mpi
      addCommunicator(g.name, g.description, g.size, g.ranks, device);
      ++nccl_groups, only_group = g.name;
    }
    std::stable_sort(collectives_.begin(), collectives_.end(), [](const auto& a, const auto& b) { return a.start_ns < b.start_ns; });
    std::stable_sort(param_comms_in_time_.begin(), param_comms_in_time_.end(),
                     [](const auto& a, const auto& b) { return a.start_ns < b.start_ns; });
    std::map<std::pair<uint64_t, std::string>, uint64_t> next_seq;
    for (auto& c : collectives_) {
      if (!c.args && c.external_id >= 0) {
        auto it = param_comms_.find(c.external_id);
        if (it != param_comms_.end() && !it->second.collective.empty()) c.args = it->second;
      }
      if (!c.args || !c.args->sized()) {
        const CollectiveArgs* around = paramCommsAroundLaunch(c.correlation);
        if (around != nullptr && (!c.args || around->sized())) c.args = *around;
      }
      NcclKernelName kernel = parseNcclKernelName(rank_.strings[c.kernel_name_id]);
      model::NcclOp op;
      // RCCL's Generic kernel and MSCCL's kernels name no collective: the annotation around them does.
      std::string function = kernel.function == "Generic" ? std::string() : kernel.function;
      if (std::string_view annotated = ncclFunctionOfCollective(annotatedCollective(c));
          function.empty() && !annotated.empty())
        function = annotated;
      if (c.args) {
        std::string_view from_args = ncclFunctionOfCollective(c.args->collective);
        if (!from_args.empty()) function = from_args;
        op.datatype_id = intern(c.args->dtype);
        int64_t in = c.args->in_nelems, out = c.args->out_nelems;
        // NCCL's count: per rank sent for AllGather, received for ReduceScatter, the same for the rest.
        int64_t count = in > 0 && out > 0 ? std::min(in, out) : std::max<int64_t>({in, out, 0});
        op.count = static_cast<uint64_t>(count);
        op.bytes = op.count * dtypeSize(c.args->dtype);
        if (!c.args->group_name.empty()) {
          op.comm_hash = processGroupHash(c.args->group_name);
          addCommunicator(c.args->group_name, c.args->group_description,
                          static_cast<int32_t>(std::clamp<int64_t>(c.args->group_size, 0, INT32_MAX)), c.args->group_ranks,
                          c.device);
        }
        op.peer = static_cast<int32_t>(function == "Send" ? c.args->dst_rank : function == "Recv" ? c.args->src_rank : -1);
      }
      if (op.comm_hash == 0) {
        // No process group recorded: the only NCCL group there is, else (no pg_config: PyTorch before
        // 2.2) the default group.
        if (nccl_groups == 1) {
          op.comm_hash = processGroupHash(only_group);
        } else if (nccl_groups == 0) {
          op.comm_hash = processGroupHash("0");
          addDefaultGroup(device);
        }
      }
      op.kind = function == "Send"   ? format::NcclOperationKind::kSend
                : function == "Recv" ? format::NcclOperationKind::kRecv
                                     : format::NcclOperationKind::kCollective;
      op.func_id = intern(function.empty() ? std::string_view("unknown") : std::string_view(function));
      op.algorithm_id = intern(kernel.algorithm);
      op.protocol_id = intern(kernel.protocol);
      op.seq = next_seq[{op.comm_hash, function}]++;
      op.gpu_start_ns = c.start_ns;
      op.gpu_end_ns = c.end_ns;
      const model::HostCall* launch = c.correlation != 0 ? rank_.launchOf(c.correlation) : nullptr;
      op.enqueue_ns = launch != nullptr ? launch->start_ns : c.args && c.args->host_start_ns != 0 ? c.args->host_start_ns : c.start_ns;
      op.channels = c.channels;
      op.device = c.device;
      op.operation_id = rank_.nccl_ops.size() + 1;
      rank_.nccl_ops.push_back(op);
    }
    rank_.nccl_ops.change([](std::vector<model::NcclOp>& ops) {
      std::stable_sort(ops.begin(), ops.end(),
                       [](const auto& a, const auto& b) { return a.enqueue_ns < b.enqueue_ns; });
    });
    collectives_ = {};
    param_comms_ = {};
    param_comms_in_time_ = {};
    annotations_ = {};
  }

  model::RankTrace& rank_;
  KinetoImportStats& stats_;
  std::unordered_map<std::string, uint32_t, TransparentHash, std::equal_to<>> ids_;
  std::vector<std::pair<bool, const model::CommunicationKernelFamily*>> families_;
  uint16_t last_thread_ = 0;
  std::unordered_map<uint32_t, uint16_t> api_function_of_;  // name id -> index in api_functions
  std::map<int64_t, int64_t> capture_begins_;               // thread -> start of its open capture
  std::unordered_map<model::LaunchConfig, uint32_t, model::LaunchConfigHash> configs_;
  uint16_t last_stream_ = 0;
  bool fractional_times_ = false;
  std::map<std::string, uint64_t> unknown_categories_;
  std::vector<PendingCollective> collectives_;
  std::unordered_map<int64_t, CollectiveArgs> param_comms_;
  std::vector<ParamComms> param_comms_in_time_;
  std::vector<CollectiveAnnotation> annotations_;
  // No record_param_comms call lasts longer than this: the search for the one around a launch stops.
  static constexpr int64_t kLongestParamComms = 10'000'000'000;
  std::vector<Flow> flows_;
  std::vector<std::pair<size_t, int64_t>> uncorrelated_;  // (activity index, tid)
  std::string inputs_;  // a cpu_op's inputs, formatted (reused)
  DistributedInfo distributed_;
  int64_t base_time_ns_ = 0;
};

// ---- top-level members -------------------------------------------------------------------------

namespace dom = simdjson::dom;

std::optional<int64_t> integerOf(dom::element v) {
  int64_t n = 0;
  if (v.get_int64().get(n) == simdjson::SUCCESS) return n;
  double d = 0;
  if (v.get_double().get(d) == simdjson::SUCCESS && d > -9e18 && d < 9e18) return static_cast<int64_t>(d);
  return std::nullopt;
}

std::string stringOf(dom::element v) {
  std::string_view s;
  if (v.get_string().get(s) == simdjson::SUCCESS) return std::string(s);
  return {};
}

DistributedInfo readDistributedInfo(dom::object object) {
  DistributedInfo info;
  info.present = true;
  for (dom::key_value_pair field : object) {
    std::string_view key = field.key;
    if (key == "rank") {
      info.rank = integerOf(field.value);
    } else if (key == "world_size") {
      info.world_size = integerOf(field.value);
    } else if (key == "backend") {
      info.backend = stringOf(field.value);
    } else if (key == "nccl_version") {
      info.nccl_version = stringOf(field.value);
    } else if (key == "pg_config") {
      dom::array groups;
      if (field.value.get_array().get(groups) != simdjson::SUCCESS) continue;
      for (dom::element item : groups) {
        dom::object g;
        if (item.get_object().get(g) != simdjson::SUCCESS) continue;
        ProcessGroup group;
        for (dom::key_value_pair gf : g) {
          if (gf.key == "pg_name") {
            group.name = stringOf(gf.value);
          } else if (gf.key == "pg_desc") {
            group.description = stringOf(gf.value);
          } else if (gf.key == "backend_config") {
            group.backend = stringOf(gf.value);
          } else if (gf.key == "pg_size") {
            group.size = static_cast<int32_t>(std::clamp<int64_t>(integerOf(gf.value).value_or(0), 0, INT32_MAX));
          } else if (gf.key == "ranks") {
            dom::array ranks;
            if (gf.value.get_array().get(ranks) != simdjson::SUCCESS) continue;
            for (dom::element r : ranks) {
              std::optional<int64_t> n = integerOf(r);
              if (n && *n >= 0 && *n <= INT32_MAX) group.ranks.push_back(static_cast<int32_t>(*n));
            }
          }
        }
        if (!group.name.empty()) info.groups.push_back(std::move(group));
      }
    }
  }
  return info;
}

std::vector<format::DeviceProperties> readDeviceProperties(dom::array devices) {
  std::vector<format::DeviceProperties> out;
  for (dom::element item : devices) {
    dom::object object;
    if (item.get_object().get(object) != simdjson::SUCCESS) continue;
    format::DeviceProperties d;
    uint32_t max_threads_per_sm = 0, warp_size = 0;
    for (dom::key_value_pair field : object) {
      std::string_view key = field.key;
      if (key == "name") {
        d.name = stringOf(field.value);
        continue;
      }
      std::optional<int64_t> n = integerOf(field.value);
      if (!n || *n < 0) continue;
      auto u32 = static_cast<uint32_t>(std::min<int64_t>(*n, UINT32_MAX));
      auto u64 = static_cast<uint64_t>(*n);
      if (key == "id") d.device_id = u32;
      else if (key == "totalGlobalMem") d.memory_bytes = u64;
      else if (key == "computeMajor") d.compute_major = u32;
      else if (key == "computeMinor") d.compute_minor = u32;
      else if (key == "maxThreadsPerBlock") d.max_threads_per_block = u32;
      else if (key == "maxThreadsPerMultiprocessor") max_threads_per_sm = u32;
      else if (key == "regsPerBlock") d.registers_per_block = u32;
      else if (key == "regsPerMultiprocessor") d.registers_per_sm = u32;
      else if (key == "warpSize") warp_size = u32;
      else if (key == "sharedMemPerBlock") d.shared_memory_per_block = u64;
      else if (key == "sharedMemPerBlockOptin") d.shared_memory_per_block_optin = u64;
      else if (key == "sharedMemPerMultiprocessor") d.shared_memory_per_sm = u64;
      else if (key == "numSms") d.sm_count = u32;
    }
    d.max_threads_per_sm = max_threads_per_sm;
    d.warp_size = warp_size;
    if (warp_size > 0) d.max_warps_per_sm = max_threads_per_sm / warp_size;
    out.push_back(std::move(d));
  }
  return out;
}

// ---- the file ------------------------------------------------------------------------------------

class KinetoFileReader {
 public:
  KinetoFileReader(const std::string& path, model::RankTrace& rank, KinetoImportStats& stats,
                   std::vector<std::string>& warnings)
      : path_(path), rank_(rank), stats_(stats), warnings_(warnings), builder_(rank, stats) {}

  void read() {
    ByteInput input(path_);
    stats_.file_bytes = input.fileBytes();
    JsonEventSplitter splitter(input);
    JsonEventSplitter::Piece piece;
    while (splitter.next(piece)) {
      if (piece.kind == JsonEventSplitter::Piece::Kind::kMember) {
        member(piece);
      } else {
        events(piece);
      }
    }
    stats_.json_bytes = input.bytesRead();
    std::string input_problem = input.problem();
    if (!input_problem.empty() || !splitter.problem().empty()) {
      stats_.truncated = true;
      std::string what = !input_problem.empty() ? input_problem : splitter.problem();
      if (stats_.events == 0 && !splitter.sawTraceEvents()) throw InputError(fmt::format("{}: {}", path_, what));
      report::warn(rank_.stats, warnings_, report::Stat::kineto_traces_truncated, 1,
                   fmt::format("{}: {}; the {} events before that point are used", path_, what, stats_.events));
    } else if (!splitter.sawTraceEvents()) {
      throw InputError(fmt::format("{}: no traceEvents: not a PyTorch-profiler trace", path_));
    }
    if (stats_.malformed > 0) {
      report::warn(rank_.stats, warnings_, report::Stat::kineto_events_malformed, stats_.malformed,
                   fmt::format("{}: {} events are not valid JSON objects ({}); they were skipped", path_,
                               stats_.malformed, first_malformed_));
    }
    rank_.header.devices = std::move(devices_);
    builder_.finish(path_, warnings_);
  }

 private:
  void member(JsonEventSplitter::Piece& piece) {
    static const std::vector<std::string> kRead = {"distributedInfo", "deviceProperties", "baseTimeNanoseconds",
                                                   "schemaVersion", "cuda_driver_version"};
    if (std::find(kRead.begin(), kRead.end(), piece.key) == kRead.end()) return;
    // The splitter leaves padding after every piece: parsed in place.
    dom::element doc;
    if (auto e = parser_.parse(piece.begin, static_cast<size_t>(piece.end - piece.begin), false).get(doc)) {
      report::warn(rank_.stats, warnings_, report::Stat::kineto_keys_malformed, 1,
                   fmt::format("{}: \"{}\" is malformed ({}); ignored", path_, piece.key, simdjson::error_message(e)));
      return;
    }
    dom::object object;
    dom::array array;
    if (piece.key == "distributedInfo" && doc.get_object().get(object) == simdjson::SUCCESS) {
      builder_.setDistributedInfo(readDistributedInfo(object));
    } else if (piece.key == "deviceProperties" && doc.get_array().get(array) == simdjson::SUCCESS) {
      devices_ = readDeviceProperties(array);
    } else if (std::optional<int64_t> n = integerOf(doc)) {
      if (piece.key == "baseTimeNanoseconds") builder_.setBaseTime(*n);
      else if (piece.key == "schemaVersion") rank_.header.tool_version = fmt::format("PyTorch-profiler trace, schema {}", *n);
      else if (piece.key == "cuda_driver_version") rank_.header.cuda_driver_version = static_cast<uint32_t>(std::clamp<int64_t>(*n, 0, UINT32_MAX));
    }
  }

  // Events of categories nothing reads (Python frames, profiler bookkeeping) are only counted, not
  // parsed: a third of a typical trace. Decided on the text: the "cat" value near the event's start.
  // cpu_ops are all parsed (the op tree keeps them). Anything unclear is parsed.
  bool skippable(std::string_view event) {
    size_t at = event.substr(0, 96).find("\"cat\"");
    if (at == std::string_view::npos) return false;
    size_t open = event.find('"', event.find(':', at + 5));
    size_t close = open == std::string_view::npos ? open : event.find('"', open + 1);
    if (close == std::string_view::npos) return false;
    std::string_view category = event.substr(open + 1, close - open - 1);
    KinetoCategory known = kinetoCategoryOf(category);
    if (known != KinetoCategory::kOtherKnown) return false;
    builder_.countUnparsed(known);
    return true;
  }

  // A run of events, parsed as one array (the events worth parsing, copied together). When that
  // fails, the events are parsed one by one and the broken ones skipped.
  void events(JsonEventSplitter::Piece& piece) {
    kept_.clear();
    scratch_.assign(1, '[');
    for (const auto& [from, to] : piece.events) {
      std::string_view event(piece.begin + from, to - from);
      if (skippable(event)) continue;
      if (!kept_.empty()) scratch_.push_back(',');
      scratch_.append(event);
      kept_.emplace_back(from, to);
    }
    if (kept_.empty()) return;
    scratch_.push_back(']');
    size_t length = scratch_.size();
    scratch_.append(simdjson::SIMDJSON_PADDING, ' ');
    dom::element doc;
    dom::array array;
    simdjson::error_code error = parser_.parse(scratch_.data(), length, false).get(doc);
    if (!error) error = doc.get_array().get(array);
    if (!error && array.size() != kept_.size()) error = simdjson::TAPE_ERROR;  // a separator out of place
    if (!error) {
      for (dom::element element : array) {
        dom::object object;
        if (element.get_object().get(object) != simdjson::SUCCESS) {
          malformed(piece.offset, simdjson::INCORRECT_TYPE);
          continue;
        }
        KinetoEvent event;
        readKinetoEvent(object, event);
        builder_.add(event);
      }
    }
    if (!error) return;
    for (const auto& [from, to] : kept_) parseOne(piece, from, to);
  }

  void parseOne(JsonEventSplitter::Piece& piece, uint32_t from, uint32_t to) {
    char* begin = piece.begin + from;
    char* end = piece.begin + to;
    char saved[JsonEventSplitter::kPadding];
    std::memcpy(saved, end, sizeof saved);
    std::memset(end, ' ', sizeof saved);  // nothing of the next event may be read as part of this one
    dom::element doc;
    dom::object object;
    simdjson::error_code error = parser_.parse(begin, static_cast<size_t>(end - begin), false).get(doc);
    if (!error) error = doc.get_object().get(object);
    if (!error) {
      KinetoEvent event;
      readKinetoEvent(object, event);
      builder_.add(event);
    }
    std::memcpy(end, saved, sizeof saved);
    if (error) malformed(piece.offset + from, error);
  }

  void malformed(uint64_t offset, simdjson::error_code error) {
    ++stats_.malformed;
    if (first_malformed_.empty()) first_malformed_ = fmt::format("the first at byte {}: {}", offset, simdjson::error_message(error));
  }

  const std::string& path_;
  model::RankTrace& rank_;
  KinetoImportStats& stats_;
  std::vector<std::string>& warnings_;
  KinetoRankBuilder builder_;
  dom::parser parser_;
  std::string scratch_;
  std::vector<std::pair<uint32_t, uint32_t>> kept_;
  std::vector<format::DeviceProperties> devices_;
  std::string first_malformed_;
};

}  // namespace

const char* kinetoCategoryName(KinetoCategory category) {
  switch (category) {
    case KinetoCategory::kNone: return "metadata";
    case KinetoCategory::kKernel: return "kernel";
    case KinetoCategory::kGpuMemcpy: return "gpu_memcpy";
    case KinetoCategory::kGpuMemset: return "gpu_memset";
    case KinetoCategory::kCudaRuntime: return "cuda_runtime";
    case KinetoCategory::kCudaDriver: return "cuda_driver";
    case KinetoCategory::kCudaSync: return "cuda_sync";
    case KinetoCategory::kCpuOp: return "cpu_op";
    case KinetoCategory::kUserAnnotation: return "user_annotation";
    case KinetoCategory::kGpuUserAnnotation: return "gpu_user_annotation";
    case KinetoCategory::kCpuInstantEvent: return "cpu_instant_event";
    case KinetoCategory::kAc2g: return "ac2g";
    case KinetoCategory::kOtherKnown: return "other";
    case KinetoCategory::kUnknown: return "unknown";
  }
  return "unknown";
}

bool isKinetoTraceName(const std::string& path) {
  std::string name = std::filesystem::path(path).filename().string();
  return name.ends_with(".json") || name.ends_with(".json.gz");
}

model::RankTrace importKinetoTrace(const std::string& path, std::vector<std::string>& warnings, KinetoImportStats* stats) {
  model::RankTrace rank;
  rank.path = path;
  rank.source = model::SourceFormat::kKineto;
  rank.header.tool_version = "PyTorch-profiler trace";
  // The files of one run sit in one directory; its name stands for the run, which the traces do not name.
  rank.header.run_id = std::filesystem::absolute(path).parent_path().filename().string();
  rank.header.run_id_source = "directory name";
  KinetoImportStats own_stats;
  KinetoImportStats& s = stats != nullptr ? *stats : own_stats;
  s = {};
  KinetoFileReader(path, rank, s, warnings).read();
  return rank;
}

}  // namespace gpuxray::load
