#include "analyzer/export/timeline_export.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <queue>
#include <set>
#include <tuple>
#include <unordered_map>

#include "analyzer/analysis/collective_matching.h"
#include "analyzer/analysis/communicators.h"
#include "analyzer/analysis/occupancy.h"
#include "analyzer/model/nccl_conventions.h"

namespace gpuxray::timeline {
namespace {

using analysis::CommunicatorInfo;
using analysis::CommunicatorRole;
using format::NcclOperationKind;
using model::ActivityKind;

// A track takes at most this many lanes for slices that overlap without nesting.
constexpr size_t kMaxLanes = 32;
// A flow's target must end at least this long after its source begins (viewers order by time).
constexpr int64_t kMinFlowNs = 2;
constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();
constexpr int32_t kThreadsPerProcess = 10'000;
// Track order within a process, by section; flat orders leave room for items and their lanes.
enum Section : int32_t { kFindings = 0, kGpu = 1, kNccl = 2, kThreads = 3, kCounters = 4 };
int32_t flatOrder(Section section, size_t item) {
  return section * 10'000'000 + static_cast<int32_t>(item % 99'999) * 100;
}

enum class FlowKind : uint64_t { kCriticalPath = 0, kLaunch = 1, kPointToPoint = 2, kCollective = 3 };

// Unique per arrow: kind, rank index and the target's index on that rank.
uint64_t arrowId(FlowKind kind, size_t rank_index, uint64_t local) {
  return (static_cast<uint64_t>(kind) << 62) | (static_cast<uint64_t>(rank_index & 0x3fffff) << 40) |
         (local & 0xff'ffff'ffffull);
}

// Shared by the arrows leaving one slice; below 2^53 so that JSON readers keep it exact.
uint64_t groupId(FlowKind kind, size_t rank_index, uint64_t local) {
  return (static_cast<uint64_t>(kind) << 51) | (static_cast<uint64_t>(rank_index & 0x3ffff) << 33) |
         (local & 0x1'ffff'ffffull);
}

struct Window {
  bool all = true;
  int64_t start = 0;
  int64_t end = 0;
  bool covers(int64_t s, int64_t e) const { return all || (s <= end && e >= start); }
};

// Names for one rank: model strings (kernels already demangled by the loaders) keyed by string id,
// and fixed names keyed above them.
class RankNames {
 public:
  enum Fixed : uint32_t { kKernel, kMemcpy, kMemset, kApiCall, kNcclOperation, kRange, kFixedCount };

  explicit RankNames(const model::RankTrace& rank) : rank_(rank) {}

  Name model(uint32_t id, Fixed fallback) const {
    if (id == 0 || id >= rank_.strings.size()) return fixed(fallback);
    return {std::string_view(rank_.strings[id]), id};
  }

  Name fixed(Fixed which) const {
    static constexpr std::string_view kTexts[kFixedCount] = {"kernel",        "Memcpy",         "Memset",
                                                             "CUDA API call", "NCCL operation", "range"};
    return {kTexts[which], static_cast<uint32_t>(rank_.strings.size()) + which + 1};
  }

 private:
  const model::RankTrace& rank_;
};

struct OpenSlice {
  int64_t start = 0;
  int64_t end = 0;
  uint64_t track = 0;
  bool has_flow_in = false;
  Flow flow_in;
};

struct Lane {
  uint64_t track = 0;
  std::vector<OpenSlice> open;  // nested, innermost last
};

// A logical track whose slices may overlap without nesting: each overlap goes to a further lane
// (a child track "NAME (overlap N)").
struct LaneSet {
  TrackSpec base;
  std::vector<Lane> lanes;
};

// A counter that writes a value only when it changes, and only the last of several at one time.
class CounterTrack {
 public:
  CounterTrack(TimelineSink& sink, ExportSummary& summary, uint64_t track, bool integer)
      : sink_(&sink), summary_(&summary), track_(track), integer_(integer) {}
  void set(int64_t time_ns, double value) {
    if (integer_) value = std::round(value);
    if (pending_ && pending_time_ == time_ns) {
      pending_value_ = value;
      return;
    }
    flush();
    pending_ = true;
    pending_time_ = time_ns;
    pending_value_ = value;
  }
  void flush() {
    if (!pending_) return;
    pending_ = false;
    if (written_ && pending_value_ == last_value_) return;
    if (integer_) {
      sink_->counter(track_, pending_time_, static_cast<int64_t>(pending_value_));
    } else {
      sink_->counter(track_, pending_time_, pending_value_);
    }
    ++summary_->counter_values;
    written_ = true;
    last_value_ = pending_value_;
  }

 private:
  TimelineSink* sink_;
  ExportSummary* summary_;
  uint64_t track_;
  bool integer_;
  bool pending_ = false;
  int64_t pending_time_ = 0;
  double pending_value_ = 0;
  bool written_ = false;
  double last_value_ = 0;
};

// Estimated SM occupancy of one device over time: the sum over running kernels of their theoretical
// occupancy times the share of the GPU's block slots their grid fills, capped at 100 %.
class OccupancyTrack {
 public:
  explicit OccupancyTrack(CounterTrack counter) : counter_(counter) {}
  void kernel(int64_t start, int64_t end, double share) {
    advance(start);
    if (share <= 0) return;
    running_.push({end, share});
    sum_ += share;
    counter_.set(start, percent());
  }
  void finish() {
    advance(std::numeric_limits<int64_t>::max());
    counter_.flush();
  }

 private:
  struct Running {
    int64_t end;
    double share;
    bool operator>(const Running& other) const { return end > other.end; }
  };
  void advance(int64_t time) {
    while (!running_.empty() && running_.top().end <= time) {
      sum_ -= running_.top().share;
      counter_.set(running_.top().end, percent());
      running_.pop();
    }
    if (running_.empty()) sum_ = 0;  // no drift from adding and removing doubles
  }
  double percent() const { return 100.0 * std::clamp(sum_, 0.0, 1.0); }

  CounterTrack counter_;
  std::priority_queue<Running, std::vector<Running>, std::greater<>> running_;
  double sum_ = 0;
};

std::string threadLabel(uint64_t id) {
  return id > 0xffffffffull ? fmt::format("CPU thread {:#x}", id) : fmt::format("CPU thread {}", id);
}

class Exporter {
 public:
  Exporter(const model::RunTrace& run, const report::Report& report, const ExportOptions& options, TimelineSink& sink)
      : run_(run), report_(report), sink_(sink), communicators_(analysis::gatherCommunicators(run)) {
    if (options.window) window_ = {false, options.window->start, options.window->end};
    for (size_t r = 0; r < run.ranks.size(); ++r) rank_index_[run.ranks[r].rank] = r;
    for (size_t m = 0; m < report.marks.size(); ++m) marks_by_rank_[report.marks[m].rank].push_back(m);
    for (auto& [rank, marks] : marks_by_rank_) {
      std::sort(marks.begin(), marks.end(), [&](size_t a, size_t b) {
        const auto &x = report.marks[a], &y = report.marks[b];
        return x.start_ns != y.start_ns ? x.start_ns < y.start_ns : x.end_ns > y.end_ns;
      });
    }
    uint64_t first = 0;
    for (size_t p = 0; p < report.critical_paths.size(); ++p) {
      const auto& stretches = report.critical_paths[p].stretches;
      for (size_t i = 0; i < stretches.size(); ++i) {
        PathStretch at{p, i, first + i};
        path_by_rank_[stretches[i].rank].push_back(at);
        if (i == 0 || stretches[i - 1].rank == stretches[i].rank || pathCrossingInto(at)) continue;
        bool written = window_.covers(stretches[i - 1].start_ns, stretches[i - 1].end_ns) &&
                       window_.covers(stretches[i].start_ns, stretches[i].end_ns) &&
                       rank_index_.count(stretches[i - 1].rank) > 0 && rank_index_.count(stretches[i].rank) > 0;
        ++(written ? summary_.flows_backwards : summary_.flows_unmatched);
      }
      first += stretches.size();
    }
  }

  ExportSummary run() {
    TraceInfo info;
    info.run_id = run_.run_id;
    info.origin_ns = runSpan(run_).start;
    sink_.begin(info);
    planCommunicationFlows();
    auto run_wide = marks_by_rank_.find(-1);
    if (run_wide != marks_by_rank_.end()) exportRunWideFindings(run_wide->second);
    for (size_t r = 0; r < run_.ranks.size(); ++r) exportRank(r);
    sink_.finish();
    summary_.ranks = run_.ranks.size();
    return summary_;
  }

 private:
  // --- tracks and lanes ----------------------------------------------------------------------------

  uint64_t declare(TrackSpec& spec) {
    spec.id = next_track_id_++;
    sink_.track(spec);
    ++summary_.tracks;
    return spec.id;
  }

  LaneSet lanesFor(TrackSpec spec) {
    spec.children_in_order = true;
    declare(spec);
    LaneSet set{spec, {}};
    set.lanes.push_back({spec.id, {}});
    return set;
  }

  void endSlice(const OpenSlice& open) {
    SliceEvent end;
    end.track = open.track;
    end.start_ns = open.start;
    end.end_ns = open.end;
    end.flow_in = open.has_flow_in ? &open.flow_in : nullptr;
    sink_.sliceEnd(end);
  }

  void closeUntil(Lane& lane, int64_t time) {
    while (!lane.open.empty() && lane.open.back().end <= time) {
      endSlice(lane.open.back());
      lane.open.pop_back();
    }
  }

  void closeAll(LaneSet& set) {
    for (auto& lane : set.lanes) closeUntil(lane, std::numeric_limits<int64_t>::max());
  }

  // Puts the slice on the first lane where it nests (slices come in start order); false if every
  // lane is taken.
  bool place(LaneSet& set, SliceEvent& slice) {
    Lane* chosen = nullptr;
    for (auto& lane : set.lanes) {
      closeUntil(lane, slice.start_ns);
      if (lane.open.empty() || lane.open.back().end >= slice.end_ns) {
        chosen = &lane;
        break;
      }
    }
    if (chosen == nullptr) {
      if (set.lanes.size() >= kMaxLanes) {
        ++summary_.too_many_overlaps;
        return false;
      }
      TrackSpec lane;
      lane.parent = set.base.id;
      lane.kind = TrackKind::kSlices;
      lane.name = fmt::format("{} (overlap {})", set.base.name, set.lanes.size());
      lane.order = static_cast<int32_t>(set.lanes.size());
      lane.flat_order = set.base.flat_order + static_cast<int32_t>(set.lanes.size());
      lane.pid = set.base.pid;
      set.lanes.push_back({declare(lane), {}});
      chosen = &set.lanes.back();
    }
    slice.track = chosen->track;
    sink_.sliceBegin(slice);
    if (slice.instant) {
      ++summary_.instants;
    } else {
      ++summary_.slices;
      OpenSlice open{slice.start_ns, slice.end_ns, chosen->track, slice.flow_in != nullptr, {}};
      if (slice.flow_in != nullptr) open.flow_in = *slice.flow_in;
      chosen->open.push_back(open);
    }
    return true;
  }

  TrackSpec childSpec(uint64_t parent, int32_t pid, TrackKind kind, std::string name, int32_t order, int32_t flat) {
    TrackSpec spec;
    spec.parent = parent;
    spec.pid = pid;
    spec.kind = kind;
    spec.name = std::move(name);
    spec.order = order;
    spec.flat_order = flat;
    return spec;
  }

  // --- flows between ranks ---------------------------------------------------------------------------

  // The run's global rank behind a communicator rank, or -1.
  int32_t globalRankOf(uint64_t comm, int32_t comm_rank) const {
    auto info = communicators_.find(comm);
    if (info == communicators_.end()) return -1;
    auto member = info->second.members.find(comm_rank);
    return member == info->second.members.end() ? -1 : member->second;
  }

  struct OpRef {
    size_t rank;
    uint32_t op;
  };

  model::NcclOp opOf(OpRef ref) const { return run_.ranks[ref.rank].nccl_ops[ref.op]; }
  bool opInWindow(OpRef ref) const {
    const auto& op = opOf(ref);
    return window_.covers(op.gpu_start_ns, op.gpu_end_ns);
  }

  void addArrow(OpRef source, OpRef target, FlowKind kind, uint64_t group) {
    const auto &from = opOf(source), &to = opOf(target);
    if (!opInWindow(source) || !opInWindow(target)) {
      ++summary_.flows_unmatched;
      return;
    }
    if (to.gpu_end_ns < from.gpu_start_ns + kMinFlowNs) {
      ++summary_.flows_backwards;
      return;
    }
    Flow flow;
    flow.id = arrowId(kind, target.rank, target.op);
    flow.group = group;
    flow.bind = to.gpu_start_ns > from.gpu_start_ns;
    int64_t entered = std::max(to.gpu_start_ns, from.gpu_start_ns + 1);
    flow.enter_ns = entered + (to.gpu_end_ns - entered) / 2;
    flows_out_[source.rank][source.op].push_back(flow);
    flows_in_[target.rank][target.op] = flow;
  }

  // Each collective's members from the last to arrive to the others, and each send to its receive,
  // as the analyses match them (collective_matching.h).
  void planCommunicationFlows() {
    flows_out_.resize(run_.ranks.size());
    flows_in_.resize(run_.ranks.size());
    uint64_t point_to_point = 0;  // sends and receives with GPU times
    for (size_t r = 0; r < run_.ranks.size(); ++r) {
      const auto& ops = run_.ranks[r].nccl_ops;
      flows_out_[r].resize(ops.size());
      flows_in_[r].resize(ops.size());
      point_to_point += static_cast<uint64_t>(std::count_if(ops.begin(), ops.end(), [](const model::NcclOp& op) {
        return op.hasGpuTimes() && (op.kind == NcclOperationKind::kSend || op.kind == NcclOperationKind::kRecv);
      }));
    }
    const analysis::CollectiveIndex index = analysis::matchOperations(run_);
    auto ref = [](analysis::MemberOp m) { return OpRef{m.rank_index, m.op_index}; };
    auto by_start = [&](analysis::MemberOp a, analysis::MemberOp b) {
      return analysis::opOf(run_, a).gpu_start_ns < analysis::opOf(run_, b).gpu_start_ns;
    };
    for (const auto& collective : index.collectives) {
      auto members = index.membersOf(collective);
      OpRef last = ref(*std::max_element(members.begin(), members.end(), by_start));
      uint64_t group = groupId(FlowKind::kCollective, last.rank, last.op);
      for (analysis::MemberOp member : members) {
        if (member.rank_index != last.rank || member.op_index != last.op)
          addArrow(last, ref(member), FlowKind::kCollective, group);
      }
    }
    for (const auto& [send, recv] : index.p2p)
      addArrow(ref(send), ref(recv), FlowKind::kPointToPoint,
               groupId(FlowKind::kPointToPoint, send.rank_index, send.op_index));
    summary_.flows_unmatched += point_to_point - 2 * index.p2p.size();
  }

  // --- a rank --------------------------------------------------------------------------------------

  std::string gpuLabel(const model::RankTrace& rank) const {
    std::set<uint32_t> devices;
    for (const auto& s : rank.streams) devices.insert(s.device);
    if (devices.empty()) {
      for (const auto& c : rank.communicators) devices.insert(c.device);
    }
    if (devices.empty() && rank.header.devices.size() == 1) devices.insert(rank.header.devices.front().device_id);
    if (devices.empty()) return {};
    std::string list;
    for (uint32_t d : devices) list += (list.empty() ? "" : ",") + std::to_string(d);
    return (devices.size() == 1 ? "GPU " : "GPUs ") + list;
  }

  // "pp stage 1 / tp 1": the rank's place in the pipeline, tensor and data groups.
  std::string parallelRoles(const model::RankTrace& rank) const {
    std::map<CommunicatorRole, std::pair<int32_t, int32_t>> chosen;  // role -> (group size, comm rank)
    for (const auto& c : rank.communicators) {
      auto info = communicators_.find(c.comm_hash);
      if (info == communicators_.end()) continue;
      CommunicatorRole role = info->second.role;
      int32_t size = std::max(info->second.nranks, c.nranks);
      if (role == CommunicatorRole::kOther) continue;
      if (role == CommunicatorRole::kData && size >= run_.world_size) continue;  // plain data parallel: rank says it
      auto it = chosen.find(role);
      if (it == chosen.end() || size > it->second.first) chosen[role] = {size, c.comm_rank};
    }
    std::string roles;
    auto add = [&](CommunicatorRole role, const char* prefix) {
      auto it = chosen.find(role);
      if (it == chosen.end()) return;
      roles += fmt::format("{}{} {}", roles.empty() ? "" : " / ", prefix, it->second.second);
    };
    add(CommunicatorRole::kPipeline, "pp stage");
    add(CommunicatorRole::kTensor, "tp");
    add(CommunicatorRole::kData, "dp");
    return roles;
  }

  std::string processName(const model::RankTrace& rank) const {
    std::string name = rank.rank >= 0 ? fmt::format("rank {}", rank.rank) : "rank ?";
    for (const std::string& part : {rank.header.hostname, gpuLabel(rank), parallelRoles(rank)}) {
      if (!part.empty()) name += " · " + part;
    }
    return name;
  }

  static const format::DeviceProperties* deviceOf(const model::RankTrace& rank, uint32_t device) {
    for (const auto& d : rank.header.devices) {
      if (d.device_id == device) return &d;
    }
    return nullptr;
  }

  void exportRunWideFindings(const std::vector<size_t>& marks) {
    sink_.beginRank(-1);
    TrackSpec process;
    process.kind = TrackKind::kProcess;
    process.name = "whole run";
    process.pid = 1;
    process.order = 0;
    declare(process);
    LaneSet findings = lanesFor(childSpec(process.id, process.pid, TrackKind::kSlices, "findings", 0, 0));
    writeFindings(findings, marks);
  }

  void writeFindings(LaneSet& lanes, const std::vector<size_t>& marks) {
    for (size_t m : marks) {
      const report::TimelineMark& mark = report_.marks[m];
      if (!window_.covers(mark.start_ns, mark.end_ns)) {
        ++summary_.outside_window;
        continue;
      }
      Arg args[] = {Arg::ofString("analysis", mark.analysis)};
      SliceEvent slice;
      slice.start_ns = mark.start_ns;
      slice.end_ns = std::max(mark.start_ns, mark.end_ns);
      slice.instant = mark.end_ns <= mark.start_ns;
      slice.name = {mark.label, 0};
      slice.args = args;
      if (place(lanes, slice)) ++summary_.findings;
    }
    closeAll(lanes);
  }

  // A stretch of a step's critical path: report.critical_paths[path].stretches[index], the
  // `serial`-th of all paths' stretches.
  struct PathStretch {
    size_t path = 0;
    size_t index = 0;
    uint64_t serial = 0;
  };

  // The arrow into a stretch from the one before it on another rank, when both are written.
  std::optional<Flow> pathCrossingInto(const PathStretch& to) const {
    if (to.index == 0) return std::nullopt;
    const auto& stretches = report_.critical_paths[to.path].stretches;
    const report::TimelineMark& source = stretches[to.index - 1];
    const report::TimelineMark& target = stretches[to.index];
    if (source.rank == target.rank || !window_.covers(source.start_ns, source.end_ns) ||
        !window_.covers(target.start_ns, target.end_ns) || rank_index_.count(source.rank) == 0 ||
        rank_index_.count(target.rank) == 0 || target.end_ns < source.start_ns + kMinFlowNs)
      return std::nullopt;
    Flow flow;
    flow.id = arrowId(FlowKind::kCriticalPath, 0, to.serial);
    flow.group = groupId(FlowKind::kCriticalPath, 0, to.serial);
    flow.bind = target.start_ns > source.start_ns;
    int64_t entered = std::max(source.start_ns, target.start_ns);
    flow.enter_ns = entered + (target.end_ns - entered) / 2;
    return flow;
  }

  // The rank's stretches of every step's critical path, with an arrow from each stretch after which
  // the path goes on on another rank to that rank's stretch.
  void writeCriticalPath(LaneSet& lanes, const std::vector<PathStretch>& stretches) {
    for (const PathStretch& at : stretches) {
      const auto& path = report_.critical_paths[at.path].stretches;
      const report::TimelineMark& stretch = path[at.index];
      if (!window_.covers(stretch.start_ns, stretch.end_ns)) {
        ++summary_.outside_window;
        continue;
      }
      std::optional<Flow> in = pathCrossingInto(at);
      std::optional<Flow> out;
      if (at.index + 1 < path.size()) out = pathCrossingInto({at.path, at.index + 1, at.serial + 1});
      int64_t step = report_.critical_paths[at.path].step;
      Arg args[] = {Arg::ofString("analysis", stretch.analysis), Arg::ofInt("step", step)};
      SliceEvent slice;
      slice.start_ns = stretch.start_ns;
      slice.end_ns = stretch.end_ns;
      slice.name = {stretch.label, 0};
      slice.args = std::span<const Arg>(args, step >= 0 ? 2 : 1);
      slice.flow_in = in ? &*in : nullptr;
      if (out) slice.flows_out = std::span<const Flow>(&*out, 1);
      if (place(lanes, slice) && in) ++summary_.flows;
    }
    closeAll(lanes);
  }

  // One rank's tracks while it is written.
  struct RankTracks {
    size_t index = 0;
    const model::RankTrace* rank = nullptr;
    int32_t pid = 0;
    uint64_t process = 0;
    int32_t next_order = 0;  // among the process's children
    std::optional<LaneSet> findings;
    std::optional<LaneSet> critical_path;
    std::vector<LaneSet> streams;                                          // by stream index
    std::vector<std::pair<LaneSet, std::vector<uint32_t>>> communicators;  // with their operations
    struct Thread {
      LaneSet lanes;
      std::vector<uint32_t> calls;   // host_calls indices, by start
      std::vector<uint32_t> ranges;  // nvtx indices, by start
    };
    std::vector<Thread> threads;
    uint64_t counters_group = 0;
    int32_t counter_items = 0;
    std::map<uint32_t, CounterTrack> memory;                              // by device
    std::map<uint32_t, OccupancyTrack> occupancy;                         // by device
    std::vector<std::pair<CounterTrack, std::vector<uint32_t>>> links;    // with their transfers
    std::vector<std::pair<CounterTrack, std::vector<uint32_t>>> metrics;  // with their samples
  };

  void exportRank(size_t r) {
    const model::RankTrace& rank = run_.ranks[r];
    sink_.beginRank(rank.rank);
    RankNames names(rank);
    RankTracks tracks;
    tracks.index = r;
    tracks.rank = &rank;
    tracks.pid = processIdOf(rank.rank, r);

    TrackSpec process;
    process.kind = TrackKind::kProcess;
    process.name = processName(rank);
    process.description = rank.path;
    process.pid = tracks.pid;
    process.order = static_cast<int32_t>(r) + 1;
    tracks.process = declare(process);
    auto marks = marks_by_rank_.find(rank.rank);
    if (rank.rank >= 0 && marks != marks_by_rank_.end()) {
      tracks.findings = lanesFor(childSpec(tracks.process, tracks.pid, TrackKind::kSlices, "findings",
                                           tracks.next_order++, flatOrder(kFindings, 0)));
    }
    auto path = path_by_rank_.find(rank.rank);
    if (path != path_by_rank_.end()) {
      tracks.critical_path = lanesFor(childSpec(tracks.process, tracks.pid, TrackKind::kSlices, "critical path",
                                                tracks.next_order++, flatOrder(kFindings, 1)));
    }
    declareStreams(tracks);
    declareCommunicators(tracks);
    declareThreads(tracks);
    declareCounters(tracks);

    if (tracks.findings) writeFindings(*tracks.findings, marks->second);
    if (tracks.critical_path) writeCriticalPath(*tracks.critical_path, path->second);
    std::vector<uint32_t> launch_first_sink(rank.host_calls.size(), kNone);
    std::unordered_map<uint32_t, std::vector<uint32_t>> launch_more_sinks;
    writeStreams(r, names, tracks.streams, tracks.occupancy, launch_first_sink, launch_more_sinks);
    for (auto& [lanes, ops] : tracks.communicators) writeCommunicator(r, names, lanes, ops);
    for (auto& thread : tracks.threads)
      writeThread(r, names, thread.lanes, thread.calls, thread.ranges, launch_first_sink, launch_more_sinks);
    writeMemory(rank, tracks.memory);
    for (auto& [counter, transfers] : tracks.links) writeLink(rank, counter, transfers);
    for (auto& [counter, samples] : tracks.metrics) writeMetric(rank, counter, samples);
  }

  // One group per device, its streams by id.
  void declareStreams(RankTracks& tracks) {
    const model::RankTrace& rank = *tracks.rank;
    std::vector<size_t> stream_order(rank.streams.size());
    for (size_t i = 0; i < stream_order.size(); ++i) stream_order[i] = i;
    std::sort(stream_order.begin(), stream_order.end(), [&](size_t a, size_t b) {
      return std::tie(rank.streams[a].device, rank.streams[a].stream) <
             std::tie(rank.streams[b].device, rank.streams[b].stream);
    });
    // Synchronizations and host ops have streams too: one count per kind (four counts overran into the next
    // stream's, and past the last one).
    std::vector<std::array<uint64_t, model::kActivityKindCount>> kinds_per_stream(rank.streams.size());
    for (const auto& a : rank.activities) {
      if (a.stream < kinds_per_stream.size()) ++kinds_per_stream[a.stream][static_cast<size_t>(a.kind)];
    }
    tracks.streams.resize(rank.streams.size());
    uint64_t group = 0;
    uint32_t group_device = 0;
    int32_t in_group = 0;
    for (size_t k = 0; k < stream_order.size(); ++k) {
      size_t s = stream_order[k];
      const model::StreamKey& key = rank.streams[s];
      if (group == 0 || key.device != group_device) {
        TrackSpec spec = childSpec(tracks.process, tracks.pid, TrackKind::kGroup, fmt::format("GPU {}", key.device),
                                   tracks.next_order++, flatOrder(kGpu, k));
        spec.children_in_order = true;
        group = declare(spec);
        group_device = key.device;
        in_group = 0;
      }
      const auto& kinds = kinds_per_stream[s];
      uint64_t copies =
          kinds[static_cast<size_t>(ActivityKind::kMemcpy)] + kinds[static_cast<size_t>(ActivityKind::kMemset)];
      uint64_t communication = kinds[static_cast<size_t>(ActivityKind::kCommunication)];
      uint64_t compute = kinds[static_cast<size_t>(ActivityKind::kCompute)];
      std::string name = fmt::format("stream {}", key.stream);
      if (communication > compute && communication >= copies) name += " · NCCL";
      if (copies > compute && copies > communication) name += " · copies";
      tracks.streams[s] =
          lanesFor(childSpec(group, tracks.pid, TrackKind::kSlices, name, in_group++, flatOrder(kGpu, k + 1)));
    }
  }

  // One track per communicator, pipeline groups first, then tensor, data and other.
  void declareCommunicators(RankTracks& tracks) {
    const model::RankTrace& rank = *tracks.rank;
    std::map<std::tuple<int, uint64_t>, std::vector<uint32_t>> ops_by_comm;
    for (uint32_t i = 0; i < rank.nccl_ops.size(); ++i) {
      uint64_t hash = rank.nccl_ops[i].comm_hash;
      auto info = communicators_.find(hash);
      CommunicatorRole role = info == communicators_.end() ? CommunicatorRole::kOther : info->second.role;
      int position = role == CommunicatorRole::kPipeline ? 0
                     : role == CommunicatorRole::kTensor ? 1
                     : role == CommunicatorRole::kData   ? 2
                                                         : 3;
      ops_by_comm[{position, hash}].push_back(i);
    }
    if (ops_by_comm.empty()) return;
    TrackSpec spec =
        childSpec(tracks.process, tracks.pid, TrackKind::kGroup, "NCCL", tracks.next_order++, flatOrder(kNccl, 0));
    spec.children_in_order = true;
    uint64_t nccl = declare(spec);
    int32_t item = 0;
    for (auto& [key, ops] : ops_by_comm) {
      uint64_t hash = std::get<1>(key);
      auto info = communicators_.find(hash);
      std::string label = info != communicators_.end() ? info->second.label() : fmt::format("{:#018x}", hash);
      tracks.communicators.emplace_back(lanesFor(childSpec(nccl, tracks.pid, TrackKind::kSlices, label, item,
                                                           flatOrder(kNccl, static_cast<size_t>(item) + 1))),
                                        std::move(ops));
      ++item;
    }
  }

  // API calls and NVTX ranges by thread, threads in order of their first event. Slots: the rank's
  // API threads, one for calls of an unknown thread, then threads with NVTX ranges only.
  void declareThreads(RankTracks& tracks) {
    const model::RankTrace& rank = *tracks.rank;
    std::vector<uint64_t> thread_ids = rank.threads;
    const size_t unknown_thread = thread_ids.size();
    std::unordered_map<uint64_t, uint32_t> thread_index;
    for (uint32_t t = 0; t < thread_ids.size(); ++t) thread_index.emplace(thread_ids[t], t);
    thread_ids.push_back(0);
    std::vector<std::vector<uint32_t>> calls_of_thread(thread_ids.size()), ranges_of_thread(thread_ids.size());
    for (uint32_t i = 0; i < rank.host_calls.size(); ++i) {
      const auto& call = rank.host_calls[i];
      if (!window_.covers(call.start_ns, call.end_ns)) {
        ++summary_.outside_window;
        continue;
      }
      calls_of_thread[std::min<size_t>(call.thread, unknown_thread)].push_back(i);
    }
    for (uint32_t i = 0; i < rank.nvtx.size(); ++i) {
      const auto& range = rank.nvtx[i];
      if (!window_.covers(range.start_ns, range.end_ns)) {
        ++summary_.outside_window;
        continue;
      }
      auto [it, inserted] = thread_index.try_emplace(range.thread_id, static_cast<uint32_t>(thread_ids.size()));
      if (inserted) {
        thread_ids.push_back(range.thread_id);
        calls_of_thread.emplace_back();
        ranges_of_thread.emplace_back();
      }
      ranges_of_thread[it->second].push_back(i);
    }
    auto starts_first = [](const auto& a, const auto& b) {
      return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.end_ns > b.end_ns;
    };
    std::vector<std::pair<int64_t, size_t>> first_event;  // (time, slot)
    for (size_t slot = 0; slot < calls_of_thread.size(); ++slot) {
      auto& calls = calls_of_thread[slot];
      auto& ranges = ranges_of_thread[slot];
      if (calls.empty() && ranges.empty()) continue;
      auto call_before = [&](uint32_t a, uint32_t b) { return starts_first(rank.host_calls[a], rank.host_calls[b]); };
      if (!std::is_sorted(calls.begin(), calls.end(), call_before)) std::sort(calls.begin(), calls.end(), call_before);
      auto range_before = [&](uint32_t a, uint32_t b) { return starts_first(rank.nvtx[a], rank.nvtx[b]); };
      if (!std::is_sorted(ranges.begin(), ranges.end(), range_before))
        std::sort(ranges.begin(), ranges.end(), range_before);
      int64_t first = std::numeric_limits<int64_t>::max();
      if (!calls.empty()) first = rank.host_calls[calls.front()].start_ns;
      if (!ranges.empty()) first = std::min(first, rank.nvtx[ranges.front()].start_ns);
      first_event.emplace_back(first, slot);
    }
    std::stable_sort(first_event.begin(), first_event.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (size_t t = 0; t < first_event.size(); ++t) {
      size_t slot = first_event[t].second;
      std::string name = slot == unknown_thread ? "CPU thread (unknown)" : threadLabel(thread_ids[slot]);
      // Viewers know a thread by (pid, tid): tids are made up, unique within the process; beyond
      // what they can number, a thread is a plain track.
      bool numbered = t + 1 < static_cast<size_t>(kThreadsPerProcess);
      TrackSpec spec = childSpec(tracks.process, tracks.pid, numbered ? TrackKind::kThread : TrackKind::kSlices, name,
                                 tracks.next_order++, flatOrder(kThreads, t));
      spec.tid = tracks.pid * kThreadsPerProcess + static_cast<int32_t>(t) + 1;
      tracks.threads.push_back({lanesFor(spec), std::move(calls_of_thread[slot]), std::move(ranges_of_thread[slot])});
    }
  }

  CounterTrack counterTrack(RankTracks& tracks, std::string name, CounterUnit unit, std::string unit_name,
                            bool integer) {
    if (tracks.counters_group == 0) {
      TrackSpec spec = childSpec(tracks.process, tracks.pid, TrackKind::kGroup, "counters", tracks.next_order++,
                                 flatOrder(kCounters, 0));
      spec.children_in_order = true;
      tracks.counters_group = declare(spec);
    }
    TrackSpec spec =
        childSpec(tracks.counters_group, tracks.pid, TrackKind::kCounter, std::move(name), tracks.counter_items,
                  flatOrder(kCounters, static_cast<size_t>(tracks.counter_items) + 1));
    ++tracks.counter_items;
    spec.unit = unit;
    spec.unit_name = std::move(unit_name);
    return CounterTrack(sink_, summary_, declare(spec), integer);
  }

  // Memory in use and estimated occupancy per device, network throughput per peer and direction
  // (NCCL's proxy transfers), sampled metrics per device.
  void declareCounters(RankTracks& tracks) {
    const model::RankTrace& rank = *tracks.rank;
    for (const auto& change : rank.memory) {
      if (!tracks.memory.contains(change.device))
        tracks.memory.emplace(change.device, counterTrack(tracks, fmt::format("GPU {} memory in use", change.device),
                                                          CounterUnit::kBytes, "", true));
    }
    for (const auto& key : rank.streams) {
      const format::DeviceProperties* device = deviceOf(rank, key.device);
      // CUDA's occupancy rules say nothing of AMD's compute units: no track rather than a made-up one.
      if (device != nullptr && device->sm_count > 0 && !analysis::isAmdDevice(*device) &&
          !tracks.occupancy.contains(key.device))
        tracks.occupancy.emplace(
            key.device, OccupancyTrack(counterTrack(tracks, fmt::format("GPU {} estimated SM occupancy", key.device),
                                                    CounterUnit::kNone, "%", true)));
    }
    std::map<std::tuple<bool, int32_t, int32_t, uint64_t>, std::vector<uint32_t>>
        links;  // (recv, peer, comm peer, comm)
    for (uint32_t i = 0; i < rank.transfers.size(); ++i) {
      const auto& t = rank.transfers[i];
      if (t.end_ns <= t.start_ns) continue;
      int32_t peer = globalRankOf(t.comm_hash, t.peer);
      links[{!t.is_send, peer, peer < 0 ? t.peer : 0, peer < 0 ? t.comm_hash : 0}].push_back(i);
    }
    for (auto& [key, transfers] : links) {
      const auto& [receive, peer, comm_peer, comm] = key;
      std::string who = peer >= 0 ? fmt::format("rank {}", peer) : fmt::format("peer {} of {:#x}", comm_peer, comm);
      tracks.links.emplace_back(
          counterTrack(tracks, fmt::format("network {} {}", receive ? "receive from" : "send to", who),
                       CounterUnit::kNone, "GB/s", false),
          std::move(transfers));
    }
    std::map<std::pair<uint32_t, uint32_t>, std::vector<uint32_t>> metrics;  // (device, name) -> samples
    for (uint32_t i = 0; i < rank.metric_samples.size(); ++i)
      metrics[{rank.metric_samples[i].device, rank.metric_samples[i].name_id}].push_back(i);
    for (auto& [key, samples] : metrics) {
      std::string_view metric = rank.name(key.second);
      tracks.metrics.emplace_back(
          counterTrack(tracks, fmt::format("GPU {} {}", key.first, metric.empty() ? "metric" : metric),
                       CounterUnit::kNone, "", false),
          std::move(samples));
    }
  }

  void writeMetric(const model::RankTrace& rank, CounterTrack& counter, const std::vector<uint32_t>& samples) {
    for (uint32_t i : samples) {
      const auto& sample = rank.metric_samples[i];
      if (!window_.covers(sample.time_ns, sample.time_ns)) {
        ++summary_.outside_window;
        continue;
      }
      counter.set(sample.time_ns, sample.value);
    }
    counter.flush();
  }

  void writeStreams(size_t r, RankNames& names, std::vector<LaneSet>& streams,
                    std::map<uint32_t, OccupancyTrack>& occupancy, std::vector<uint32_t>& launch_first_sink,
                    std::unordered_map<uint32_t, std::vector<uint32_t>>& launch_more_sinks) {
    const model::RankTrace& rank = run_.ranks[r];
    // Per device: the share of the GPU each launch configuration fills (NaN: not yet computed).
    std::map<uint32_t, std::vector<double>> shares;
    for (uint32_t i = 0; i < rank.activities.size(); ++i) {
      const model::GpuActivity& a = rank.activities[i];
      if (!window_.covers(a.start_ns, a.end_ns)) {
        ++summary_.outside_window;
        continue;
      }
      if (a.stream >= streams.size()) continue;
      bool is_kernel = a.kind == ActivityKind::kCompute || a.kind == ActivityKind::kCommunication;
      Arg args[2];
      size_t arg_count = 0;
      SliceEvent slice;
      slice.start_ns = a.start_ns;
      slice.end_ns = a.end_ns;
      if (is_kernel) {
        slice.name = names.model(a.name_id, RankNames::kKernel);
      } else {
        slice.name = names.fixed(a.kind == ActivityKind::kMemcpy ? RankNames::kMemcpy : RankNames::kMemset);
        args[arg_count++] = Arg::ofUint("bytes", a.detail);
      }
      if (a.correlation_id != 0) args[arg_count++] = Arg::ofUint("correlation", a.correlation_id);
      slice.args = {args, arg_count};

      Flow flow;
      const model::HostCall* launch = a.correlation_id != 0 ? rank.launchOf(a.correlation_id) : nullptr;
      if (launch != nullptr) {
        if (!window_.covers(launch->start_ns, launch->end_ns)) {
          ++summary_.flows_unmatched;
          launch = nullptr;
        } else if (launch->start_ns >= a.start_ns) {
          ++summary_.flows_backwards;
          launch = nullptr;
        } else {
          flow.id = arrowId(FlowKind::kLaunch, r, i);
          flow.group = groupId(FlowKind::kLaunch, r, a.correlation_id);
          flow.bind = true;
          flow.enter_ns = a.start_ns;
          slice.flow_in = &flow;
        }
      }
      if (place(streams[a.stream], slice) && launch != nullptr) {
        auto call = static_cast<uint32_t>(launch - rank.host_calls.data());
        if (launch_first_sink[call] == kNone) {
          launch_first_sink[call] = i;
        } else {
          launch_more_sinks[call].push_back(i);
        }
        ++summary_.flows;
      }

      auto track = occupancy.find(a.device);
      if (is_kernel && track != occupancy.end() && a.detail < rank.launch_configs.size() &&
          analysis::launchRecorded(rank.launch_configs[a.detail])) {
        auto& cache = shares[a.device];
        if (cache.empty()) cache.assign(rank.launch_configs.size(), std::nan(""));
        double& share = cache[a.detail];
        if (std::isnan(share)) {
          const format::DeviceProperties& device = *deviceOf(rank, a.device);
          const model::LaunchConfig& config = rank.launch_configs[a.detail];
          analysis::Occupancy o = analysis::theoreticalOccupancy(config, device);
          double slots = static_cast<double>(o.blocks_per_sm) * device.sm_count;
          share = o.blocks_per_sm == 0 ? 0 : o.occupancy * std::min(1.0, static_cast<double>(config.blocks()) / slots);
        }
        track->second.kernel(a.start_ns, a.end_ns, share);
      }
    }
    for (auto& lanes : streams) closeAll(lanes);
    for (auto& [device, track] : occupancy) track.finish();
  }

  void writeCommunicator(size_t r, RankNames& names, LaneSet& lanes, std::vector<uint32_t>& ops) {
    const model::RankTrace& rank = run_.ranks[r];
    auto start = [&](uint32_t i) {
      return rank.nccl_ops[i].hasGpuTimes() ? rank.nccl_ops[i].gpu_start_ns : rank.nccl_ops[i].enqueue_ns;
    };
    auto end = [&](uint32_t i) {
      return rank.nccl_ops[i].hasGpuTimes() ? rank.nccl_ops[i].gpu_end_ns : rank.nccl_ops[i].enqueue_ns;
    };
    std::sort(ops.begin(), ops.end(),
              [&](uint32_t a, uint32_t b) { return start(a) != start(b) ? start(a) < start(b) : end(a) > end(b); });
    for (uint32_t i : ops) {
      const model::NcclOp& op = rank.nccl_ops[i];
      if (!window_.covers(start(i), end(i))) {
        ++summary_.outside_window;
        continue;
      }
      auto info = communicators_.find(op.comm_hash);
      int32_t nranks = info != communicators_.end() ? info->second.nranks : 0;
      std::string_view func = rank.name(op.func_id);
      Arg args[12];
      size_t n = 0;
      args[n++] = Arg::ofUint("bytes", op.bytes);
      if (op.kind == NcclOperationKind::kCollective) {
        args[n++] = Arg::ofUint("seq", op.seq);
        if (func == "Broadcast" || func == "Reduce") args[n++] = Arg::ofInt("root", op.root);
      } else {
        int32_t peer = globalRankOf(op.comm_hash, op.peer);
        args[n++] = peer >= 0 ? Arg::ofInt("peer rank", peer) : Arg::ofInt("peer (communicator rank)", op.peer);
      }
      if (op.datatype_id != 0) args[n++] = Arg::ofString("datatype", rank.name(op.datatype_id));
      if (op.algorithm_id != 0) args[n++] = Arg::ofString("algorithm", rank.name(op.algorithm_id));
      if (op.protocol_id != 0) args[n++] = Arg::ofString("protocol", rank.name(op.protocol_id));
      if (op.channels != 0) args[n++] = Arg::ofUint("channels", op.channels);
      SliceEvent slice;
      slice.start_ns = start(i);
      slice.end_ns = end(i);
      slice.name = names.model(op.func_id, RankNames::kNcclOperation);
      // A send's or receive's rule does not depend on the communicator's size; a collective's does.
      auto rule = model::busBandwidthRule(func, op.bytes, op.kind == NcclOperationKind::kCollective ? nranks : 1);
      if (op.hasGpuTimes() && op.gpu_end_ns > op.gpu_start_ns) {
        if (rule) {
          int64_t ns = op.gpu_end_ns - op.gpu_start_ns;
          args[n++] = Arg::ofDouble("algbw (GB/s)", rule->algbw(ns) / 1e9);
          args[n++] = Arg::ofDouble("busbw (GB/s)", rule->busbw(ns) / 1e9);
        }
      } else if (!op.hasGpuTimes()) {
        slice.instant = true;
        args[n++] = Arg::ofString("gpu times", "not captured: drawn at enqueue");
      }
      slice.args = {args, n};
      slice.flows_out = flows_out_[r][i];
      slice.flow_in = flows_in_[r][i].id != 0 ? &flows_in_[r][i] : nullptr;
      if (place(lanes, slice) && slice.flow_in != nullptr) ++summary_.flows;
    }
    closeAll(lanes);
  }

  void writeThread(size_t r, RankNames& names, LaneSet& lanes, const std::vector<uint32_t>& calls,
                   const std::vector<uint32_t>& ranges, const std::vector<uint32_t>& launch_first_sink,
                   const std::unordered_map<uint32_t, std::vector<uint32_t>>& launch_more_sinks) {
    const model::RankTrace& rank = run_.ranks[r];
    std::vector<Flow> flows;
    size_t c = 0, n = 0;
    while (c < calls.size() || n < ranges.size()) {
      bool take_range = n < ranges.size();
      if (take_range && c < calls.size()) {
        const auto& range = rank.nvtx[ranges[n]];
        const auto& call = rank.host_calls[calls[c]];
        take_range = range.start_ns != call.start_ns ? range.start_ns < call.start_ns : range.end_ns >= call.end_ns;
      }
      SliceEvent slice;
      if (take_range) {
        const model::NvtxRange& range = rank.nvtx[ranges[n++]];
        Arg args[] = {Arg::ofString("domain", rank.name(range.domain_id))};
        slice.start_ns = range.start_ns;
        slice.end_ns = range.end_ns;
        slice.name = names.model(range.name_id, RankNames::kRange);
        if (range.domain_id != 0) slice.args = args;
        place(lanes, slice);
        continue;
      }
      uint32_t index = calls[c++];
      const model::HostCall& call = rank.host_calls[index];
      Arg args[] = {Arg::ofUint("correlation", call.correlation_id)};
      slice.start_ns = call.start_ns;
      slice.end_ns = call.end_ns;
      uint32_t function = call.function < rank.api_functions.size() ? rank.api_functions[call.function] : 0;
      slice.name = names.model(function, RankNames::kApiCall);
      slice.args = args;
      flows.clear();
      if (launch_first_sink[index] != kNone) {
        uint64_t group = groupId(FlowKind::kLaunch, r, call.correlation_id);
        flows.push_back({arrowId(FlowKind::kLaunch, r, launch_first_sink[index]), group, true, 0});
        auto more = launch_more_sinks.find(index);
        if (more != launch_more_sinks.end()) {
          for (uint32_t sink : more->second) flows.push_back({arrowId(FlowKind::kLaunch, r, sink), group, true, 0});
        }
      }
      slice.flows_out = flows;
      place(lanes, slice);
    }
    closeAll(lanes);
  }

  void writeMemory(const model::RankTrace& rank, std::map<uint32_t, CounterTrack>& tracks) {
    std::map<uint32_t, int64_t> in_use;
    std::set<uint32_t> started;
    for (const auto& change : rank.memory) {
      int64_t before = in_use[change.device];
      int64_t after = before + change.delta_bytes;
      in_use[change.device] = after;
      if (!window_.covers(change.time_ns, change.time_ns)) {
        ++summary_.outside_window;
        continue;
      }
      CounterTrack& track = tracks.at(change.device);
      // What was in use when the window opened.
      if (started.insert(change.device).second && !window_.all && before != 0 && change.time_ns > window_.start)
        track.set(window_.start, static_cast<double>(before));
      track.set(change.time_ns, static_cast<double>(after));
    }
    for (auto& [device, track] : tracks) track.flush();
  }

  void writeLink(const model::RankTrace& rank, CounterTrack& counter, const std::vector<uint32_t>& transfers) {
    struct Change {
      int64_t time;
      double rate;  // bytes per ns = GB/s
      bool starts;
    };
    std::vector<Change> changes;
    for (uint32_t i : transfers) {
      const model::NetTransfer& t = rank.transfers[i];
      if (!window_.covers(t.start_ns, t.end_ns)) {
        ++summary_.outside_window;
        continue;
      }
      double rate = static_cast<double>(t.bytes) / static_cast<double>(t.end_ns - t.start_ns);
      changes.push_back({t.start_ns, rate, true});
      changes.push_back({t.end_ns, rate, false});
    }
    std::stable_sort(changes.begin(), changes.end(), [](const auto& a, const auto& b) { return a.time < b.time; });
    double rate = 0;
    size_t open = 0;
    for (const Change& change : changes) {
      rate += change.starts ? change.rate : -change.rate;
      open = change.starts ? open + 1 : open - 1;
      if (open == 0) rate = 0;  // no drift from adding and removing doubles
      counter.set(change.time, std::max(0.0, rate));
    }
    counter.flush();
  }

  const model::RunTrace& run_;
  const report::Report& report_;
  TimelineSink& sink_;
  std::map<uint64_t, CommunicatorInfo> communicators_;
  Window window_;
  ExportSummary summary_;
  uint64_t next_track_id_ = 1;
  std::unordered_map<int32_t, size_t> rank_index_;
  std::map<int32_t, std::vector<size_t>> marks_by_rank_;
  std::map<int32_t, std::vector<PathStretch>> path_by_rank_;  // in time order (the paths' order)
  // Per rank index, per NCCL operation: the arrows leaving it and the one entering it (id 0: none).
  std::vector<std::vector<std::vector<Flow>>> flows_out_;
  std::vector<std::vector<Flow>> flows_in_;
};

}  // namespace

int32_t processIdOf(int32_t rank, size_t rank_index) {
  return rank >= 0 ? 1000 + rank : 999 - static_cast<int32_t>(rank_index % 900);
}

analysis::Interval runSpan(const model::RunTrace& run) {
  int64_t first = std::numeric_limits<int64_t>::max(), last = std::numeric_limits<int64_t>::min();
  auto see = [&](int64_t start, int64_t end) {
    first = std::min(first, start);
    last = std::max(last, end);
  };
  for (const auto& rank : run.ranks) {
    for (const auto& a : rank.activities) see(a.start_ns, a.end_ns);
    for (const auto& c : rank.host_calls) see(c.start_ns, c.end_ns);
    for (const auto& n : rank.nvtx) see(n.start_ns, n.end_ns);
    for (const auto& m : rank.memory) see(m.time_ns, m.time_ns);
    for (const auto& o : rank.nccl_ops) {
      see(o.enqueue_ns, o.enqueue_ns);
      if (o.hasGpuTimes()) see(o.gpu_start_ns, o.gpu_end_ns);
    }
    for (const auto& t : rank.transfers) see(t.start_ns, t.end_ns);
    for (const auto& s : rank.metric_samples) see(s.time_ns, s.time_ns);
  }
  if (first > last) return {};
  return {first, last};
}

ExportSummary exportTimeline(const model::RunTrace& run, const report::Report& report, const ExportOptions& options,
                             TimelineSink& sink) {
  return Exporter(run, report, options, sink).run();
}

}  // namespace gpuxray::timeline
