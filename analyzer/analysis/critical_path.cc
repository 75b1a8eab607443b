// The critical path of each rank's steps, built as Holistic Trace Analysis builds its graph of one
// rank (hta/analyzers/critical_path_analysis.py): two nodes per event (its start and its end), edges
// that carry time (an event's span, a launch delay, a kernel-to-kernel gap) or only order (between
// top-level host ops, a synchronization), and the longest path through them. Where gpuxray's rules
// differ from HTA's, docs/analyses.md says which and why.

#include "analyzer/analysis/critical_path.h"

#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstring>
#include <functional>
#include <iterator>
#include <map>
#include <numeric>
#include <optional>
#include <queue>
#include <set>
#include <span>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "analyzer/analysis/analyses.h"
#include "analyzer/analysis/communicators.h"
#include "analyzer/analysis/longest_path.h"
#include "analyzer/analysis/rank_digest.h"
#include "analyzer/workers.h"

namespace gpuxray::analysis {
namespace {

using model::ActivityKind;
using report::Cell;
using report::ResultValue;
using report::Unit;

// HTA's KERNEL_KERNEL_DELAY_THRESHOLD_US: a longer gap between two kernels of a stream is taken as a
// dependency the trace does not show, not as a delay.
constexpr int64_t kKernelGapLimitNs = 1'500'000;

// A list of indexes a step's graph builds afresh and reads back in order, written at a cursor into
// storage kept from one step to the next (std::vector::push_back stayed a call at these sites, once a
// kernel: 5 % of the per-rank part).
class IndexList {
 public:
  void clear() { size_ = 0; }
  // Room for `n` in all; push() writes only within it.
  void reserve(size_t n) {
    if (n > storage_.size()) storage_.resize(std::max(n, 2 * storage_.size()));
  }
  void push(uint32_t value) { storage_[size_++] = value; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  uint32_t operator[](size_t i) const { return storage_[i]; }
  const uint32_t* begin() const { return storage_.data(); }
  const uint32_t* end() const { return storage_.data() + size_; }

 private:
  std::vector<uint32_t> storage_;
  size_t size_ = 0;
};

struct GraphEvent {
  PathEvent ref;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int32_t parent = -1;  // the host event it is nested in
  bool host = false;
};

// A part's detail: the rank's string, or its constant.
std::string_view detailOf(const model::RankTrace& rank, const PathPart& part) {
  return part.name_id != 0 ? rank.name(part.name_id) : std::string_view(part.constant);
}
PathSlice sliceOfPart(const model::RankTrace& rank, const PathPart& part, int64_t start, int64_t end) {
  PathSlice s{start, end, part.cause, detailOf(rank, part), rank.rank};
  s.comm_hash = part.comm_hash;
  return s;
}

// Appended field by field in place: a record built aside and copied whole is read back by wider loads than
// the stores that built it, which stall (store forwarding fails), once for each of the step's events and edges.
void appendEvent(std::vector<GraphEvent>& events, PathEventSource source, uint32_t index, int64_t start, int64_t end,
                 bool host) {
  GraphEvent& e = events.emplace_back();
  e.ref.source = source;
  e.ref.index = index;
  e.start_ns = start;
  e.end_ns = end;
  e.host = host;
}
void appendEdge(std::vector<Edge>& edges, uint32_t from, uint32_t to, int64_t weight, EdgeKind kind) {
  Edge& e = edges.emplace_back();
  e.from = from;
  e.to = to;
  e.weight = weight;
  e.kind = kind;
}

// A rank's lists mostly come in order already: sorted only when not. With `std::sort`, for lists whose
// elements are all distinct (so that a sorted list is the only sorted order).
template <typename List, typename Less = std::less<>>
void sortIfNeeded(List& list, Less less = {}) {
  if (!std::is_sorted(list.begin(), list.end(), less)) std::sort(list.begin(), list.end(), less);
}
template <typename List, typename Less>
void stableSortIfNeeded(List& list, Less less) {
  if (!std::is_sorted(list.begin(), list.end(), less)) std::stable_sort(list.begin(), list.end(), less);
}

// Runtime calls during which the CPU only waits for the GPU: HTA gives their end no weight, so the
// wait is found through the GPU. cudaMemcpyAsync, which HTA also lists, keeps its weight there
// (it takes CUDA's runtime lock, whose edges HTA builds separately with the call's duration).
bool blocksOnGpu(std::string_view call) {
  return call == "cudaDeviceSynchronize" || call == "cudaStreamSynchronize" || call == "cudaEventQuery" ||
         call == "cudaEventSynchronize" || call == "cudaMemcpy";
}

// Per rank, built once for all its windows: its host calls by start, and its GPU work and stream
// synchronizations by their call's start, so that a window's events are two binary searches away.
// Every rank's index is held at once, beside its events: the calls' start order is held only where it
// is not theirs already, and work's call start is read from its call.
struct RankTimeIndex {
  RankTimeIndex() = default;
  explicit RankTimeIndex(const model::RankTrace& rank) {
    // Both come mostly in order already (calls by correlation, work by its launch): sorted only if not.
    calls_in_start_order = std::is_sorted(rank.host_calls.begin(), rank.host_calls.end(),
                                          [](const auto& a, const auto& b) { return a.start_ns < b.start_ns; });
    if (!calls_in_start_order) {
      calls_by_start.resize(rank.host_calls.size());
      for (uint32_t i = 0; i < calls_by_start.size(); ++i) calls_by_start[i] = i;
      std::sort(calls_by_start.begin(), calls_by_start.end(), [&](uint32_t a, uint32_t b) {
        return std::pair(rank.host_calls[a].start_ns, a) < std::pair(rank.host_calls[b].start_ns, b);
      });
    }
    std::vector<std::pair<int64_t, uint32_t>> communication;  // (start, activity)
    work_by_launch.reserve(rank.activities.size());           // nearly all of them, in a run's traces
    // In order already, mostly: checked as they are listed, with the look at each call that lists it.
    bool in_order = true;
    std::pair<int64_t, uint32_t> previous{INT64_MIN, 0};
    for (uint32_t i = 0; i < rank.activities.size(); ++i) {
      const model::GpuActivity& a = rank.activities[i];
      if (a.kind == ActivityKind::kCommunication) communication.emplace_back(a.start_ns, i);
      bool stream_sync = a.kind == ActivityKind::kSync && rank.name(a.name_id) == "Stream Sync";
      if ((!model::isGpuWork(a.kind) && !stream_sync) || a.correlation_id == 0) continue;
      const model::HostCall* call = rank.launchOf(a.correlation_id);
      if (call == nullptr) continue;
      Work work{call->start_ns, i, static_cast<uint32_t>(call - rank.host_calls.data())};
      if (stream_sync) {
        syncs_by_launch.push_back(work);
        continue;
      }
      work_by_launch.push_back(work);
      std::pair<int64_t, uint32_t> key{call->start_ns, i};
      in_order = in_order && !(key < previous);
      previous = key;
    }
    auto byLaunch = [](const Work& a, const Work& b) {
      return std::pair(a.call_start, a.activity) < std::pair(b.call_start, b.activity);
    };
    if (!in_order) std::sort(work_by_launch.begin(), work_by_launch.end(), byLaunch);
    sortIfNeeded(syncs_by_launch, byLaunch);
    for (const model::NcclOp& op : rank.nccl_ops) {
      if (op.hasGpuTimes()) comm_by_start.emplace_back(op.gpu_start_ns, op.comm_hash);
    }
    std::stable_sort(comm_by_start.begin(), comm_by_start.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    matchKernelsToOperations(rank, std::move(communication));
    for (uint32_t name_id : rank.api_functions) {
      std::string_view name = rank.name(name_id);
      function_waits.push_back(static_cast<uint8_t>((blocksOnGpu(name) ? kBlocksOnGpu : 0) |
                                                    (name == "cudaDeviceSynchronize" ? kDeviceSync : 0)));
    }
    // Host ops and the cpu_op domain's ranges by start (most come in that order already).
    for (uint32_t i = 0; i < rank.host_ops.size(); ++i) ops_by_start.emplace_back(rank.host_ops[i].start_ns, i);
    sortIfNeeded(ops_by_start);
    for (uint32_t i = 0; i < rank.nvtx.size(); ++i) {
      if (rank.name(rank.nvtx[i].domain_id) == model::kCpuOpDomain) ranges_by_start.emplace_back(rank.nvtx[i].start_ns, i);
    }
    sortIfNeeded(ranges_by_start);
  }
  // The indexes of `by_start`'s entries that start in [start, end], in index order.
  static void startingIn(const std::vector<std::pair<int64_t, uint32_t>>& by_start, int64_t start, int64_t end,
                         std::vector<uint32_t>& out) {
    out.clear();
    for (auto it = std::lower_bound(by_start.begin(), by_start.end(), std::pair<int64_t, uint32_t>{start, 0});
         it != by_start.end() && it->first <= end; ++it)
      out.push_back(it->second);
    sortIfNeeded(out);
  }
  // Each NCCL operation's kernel: the first communication kernel that starts within its GPU span; of
  // several that start together (a send and a receive posted at once), the one that ends with it and
  // that no operation before it has, so that operations indistinguishable by their times take their
  // kernels in the order both were issued.
  // `kernels`: the rank's communication kernels, (start, activity).
  void matchKernelsToOperations(const model::RankTrace& rank, std::vector<std::pair<int64_t, uint32_t>> kernels) {
    sortIfNeeded(kernels);
    std::vector<bool> taken(kernels.size(), false);
    kernel_of_op.assign(rank.nccl_ops.size(), UINT32_MAX);
    for (size_t o = 0; o < rank.nccl_ops.size(); ++o) {
      const model::NcclOp& op = rank.nccl_ops[o];
      if (!op.hasGpuTimes()) continue;
      auto it = std::lower_bound(kernels.begin(), kernels.end(), std::pair<int64_t, uint32_t>{op.gpu_start_ns, 0});
      if (it == kernels.end() || it->first > op.gpu_end_ns) continue;
      auto offBy = [&](auto k) {
        return std::pair(std::abs(rank.activities[k->second].end_ns - op.gpu_end_ns),
                         static_cast<bool>(taken[static_cast<size_t>(k - kernels.begin())]));
      };
      auto best = it;
      for (auto k = std::next(it); k != kernels.end() && k->first == it->first && k - it < 8; ++k) {
        if (offBy(k) < offBy(best)) best = k;
      }
      taken[static_cast<size_t>(best - kernels.begin())] = true;
      kernel_of_op[o] = best->second;
    }
  }
  // The communicator of the first NCCL operation whose GPU span starts at `start_ns`, if any.
  std::optional<uint64_t> communicatorAt(int64_t start_ns) const {
    auto it = std::lower_bound(comm_by_start.begin(), comm_by_start.end(), start_ns,
                               [](const auto& c, int64_t t) { return c.first < t; });
    if (it == comm_by_start.end() || it->first != start_ns) return std::nullopt;
    return it->second;
  }
  // The host calls that start in [start, end], in start order, each to `visit`.
  template <typename Visit>
  void forCallsStartingIn(const model::RankTrace& rank, int64_t start, int64_t end, Visit visit) const {
    const std::vector<model::HostCall>& calls = rank.host_calls;
    if (calls_in_start_order) {
      auto it = std::lower_bound(calls.begin(), calls.end(), start,
                                 [](const model::HostCall& c, int64_t t) { return c.start_ns < t; });
      for (; it != calls.end() && it->start_ns <= end; ++it) visit(static_cast<uint32_t>(it - calls.begin()));
      return;
    }
    auto it = std::lower_bound(calls_by_start.begin(), calls_by_start.end(), start,
                               [&](uint32_t c, int64_t t) { return calls[c].start_ns < t; });
    for (; it != calls_by_start.end() && calls[*it].start_ns <= end; ++it) visit(*it);
  }
  // Per runtime function (RankTrace::api_functions), what its calls wait for, as kBlocksOnGpu and kDeviceSync
  // bits (asked of every call of every step: by name, it was a string comparison each time).
  static constexpr uint8_t kBlocksOnGpu = 1, kDeviceSync = 2;
  std::vector<uint8_t> function_waits;
  uint8_t waitsOf(const model::HostCall& call) const {
    return call.function < function_waits.size() ? function_waits[call.function] : 0;
  }
  bool calls_in_start_order = true;
  std::vector<uint32_t> calls_by_start;  // empty when calls_in_start_order
  // GPU work, and stream synchronizations, with a launch call, by the call's start (one rank's index is held
  // at a time, while the rank is read).
  struct Work {
    int64_t call_start;
    uint32_t activity;
    uint32_t call;  // into host_calls
  };
  std::vector<Work> work_by_launch, syncs_by_launch;
  std::vector<uint32_t> kernel_of_op;  // per NCCL operation: its kernel's activity (UINT32_MAX: none)
  std::vector<std::pair<int64_t, uint32_t>> ops_by_start, ranges_by_start;  // (start, index into host_ops / nvtx)
  std::vector<std::pair<int64_t, uint64_t>> comm_by_start;  // NCCL operations' GPU start, communicator
};

// Every rank's index, the ranks on `jobs` workers.
std::vector<RankTimeIndex> indexRanks(const model::RunTrace& run, unsigned jobs = 1) {
  std::vector<RankTimeIndex> indexes(run.ranks.size());
  onWorkers(indexes.size(), jobs, [&](size_t r) { indexes[r] = RankTimeIndex(run.ranks[r]); });
  return indexes;
}

// What building a rank's graph needs only while it builds (one for all of a step's ranks, so that its
// memory stays warm from one rank and step to the next).
struct RankGraphScratch {
  struct Item {
    int64_t sort_ns;
    uint32_t event;  // GPU work; or the host call's event for a synchronization
    int32_t stream;  // -1: the whole device
    bool sync;
  };
  std::vector<uint32_t> starting, host, stack, stream_begin, next;
  std::vector<std::pair<uint32_t, uint32_t>> work;  // (GPU work's activity, its launch call's event)
  std::vector<Item> items;
  std::vector<std::pair<int64_t, uint32_t>> launches, starts, ends;
  std::vector<std::pair<int, int>> queue_at;
  std::vector<int64_t> last_on_stream;
  // Per stream, the end nodes of its last 16 kernels (what a kernel that started before its stream's
  // previous one ended looks back over), newest at count - 1.
  struct RecentEnds {
    std::array<uint32_t, 16> node;
    uint64_t count = 0;
    void push(uint32_t n) { node[count++ % node.size()] = n; }
  };
  std::vector<RecentEnds> ends_on_stream;
  // Reducing a graph (RankGraph::reduce): per node, whether it is a port and its number, the open chain
  // into it; the ports, the edges kept as links of their own, communication kernels' ends, the gaps a
  // join may tie; per edge, whether it is a compute kernel's span, its link; the chains being summed.
  std::vector<uint8_t> compute_span;
  std::vector<uint32_t> ports, port_number, singles, communication_ends, tie_candidates, link_of_edge;
  std::vector<uint64_t> chain_into;
  uint64_t reductions = 0;
  std::vector<RankStepGraph::Link> open_chains;
  std::vector<Interval> behind_cursor;
  std::vector<std::pair<uint32_t, RankStepGraph::Link>> links;  // (last edge, link)
};

void appendItem(std::vector<RankGraphScratch::Item>& items, int64_t sort_ns, uint32_t event, int32_t stream,
                bool sync) {
  RankGraphScratch::Item& item = items.emplace_back();
  item.sort_ns = sort_ns;
  item.event = event;
  item.stream = stream;
  item.sync = sync;
}

class RankGraph {
 public:
  RankGraph() = default;
  RankGraph(const model::RankTrace& rank, const RankTimeIndex& index, Interval window) {
    RankGraphScratch scratch;
    build(rank, index, window, scratch);
  }
  // `stream_waits`: a kernel that starts after another stream's kernel ended in its stream's gap
  // depends on that kernel (gpuxray's rule across ranks; HTA's graph of one rank has no such edge), and
  // the graph is made ready for reduce(). Its buffers keep their memory from the last build.
  void build(const model::RankTrace& rank, const RankTimeIndex& index, Interval window, RankGraphScratch& scratch,
             bool stream_waits = false) {
    rank_ = &rank;
    index_ = &index;
    window_ = window;
    stream_waits_ = stream_waits;
    events_.clear();
    threads_.clear();
    stream_syncs_.clear();
    communication_.clear();
    kernel_gaps_.clear();
    compute_spans_.clear();
    own_edges_.clear();
    compute_ns_ = 0;
    collectEvents(scratch);
    // A host event's two edges, a kernel's span and its edge in.
    own_edges_.reserve(3 * events_.size());
    counting_ = stream_waits;
    if (counting_) {
      node_links_.assign(nodeCount(), 0);
      next_out_.resize(nodeCount());
      backward_.clear();
      outside_.clear();
    }
    addCallStackEdges(scratch);
    addGpuEdges(scratch);
  }

  RankCriticalPath longestPath(PathEnd end_rule) const;

  uint32_t nodeCount() const { return static_cast<uint32_t>(2 * events_.size()); }
  uint32_t startNode(uint32_t event) const { return 2 * event; }
  uint32_t endNode(uint32_t event) const { return 2 * event + 1; }
  int64_t timeOf(uint32_t node) const {
    const GraphEvent& e = events_[node / 2];
    return node % 2 == 0 ? e.start_ns : e.end_ns;
  }
  // Its nodes' times, in node order.
  void appendTimes(std::vector<int64_t>& times) const {
    for (const GraphEvent& e : events_) times.insert(times.end(), {e.start_ns, e.end_ns});
  }
  // Its kernel-to-kernel edges, in order.
  const IndexList& kernelGaps() const { return kernel_gaps_; }
  // The events of communication kernels, by start time.
  const std::vector<std::pair<int64_t, uint32_t>>& communicationEvents() const { return communication_; }
  // The edge of an event's own span (GPU work only), or -1.
  int64_t spanEdge(uint32_t event) const { return event < work_base_ ? -1 : span_edge_[event - work_base_]; }
  PathSlice sliceOf(const Edge& edge) const;
  PathPart partOf(const Edge& edge) const;
  // Into `out`, this graph (built with stream_waits) reduced to its ports and chains.
  void reduce(RankStepGraph& out, RankGraphScratch& scratch);
  // The chain of its edges from `first_edge` to node `end` (built with stream_waits, as reduce() found
  // it), edge by edge, to `visit`.
  template <typename Visit>
  void forChain(uint32_t first_edge, uint32_t end, Visit visit) const {
    for (uint32_t e = first_edge;; e = next_out_[own_edges_[e].to]) {
      visit(own_edges_[e]);
      if (own_edges_[e].to == end) break;
    }
  }
  // The chain's parts, summed by cause and detail, into `parts`.
  void addChainParts(uint32_t first_edge, uint32_t end, std::vector<PathPart>& parts) const {
    size_t first_part = parts.size();
    forChain(first_edge, end, [&](const Edge& edge) {
      if (int64_t ns = timeOf(edge.to) - timeOf(edge.from); ns > 0) {
        PathPart part = partOf(edge);
        auto same =
            std::find_if(parts.begin() + static_cast<ptrdiff_t>(first_part), parts.end(), [&](const PathPart& p) {
              return p.cause == part.cause && p.name_id == part.name_id && p.constant == part.constant &&
                     p.comm_hash == part.comm_hash;
            });
        if (same != parts.end()) {
          same->ns += ns;
        } else {
          parts.push_back(part);
          parts.back().ns = ns;
        }
      }
    });
  }
  int32_t rank() const { return rank_->rank; }
  uint32_t activityOf(uint32_t event) const { return events_[event].ref.index; }
  // Its compute kernels' time (their span edges' weights).
  int64_t computeNs() const { return compute_ns_; }
  // The kind of GPU work whose span an edge is, if it is one.
  std::optional<ActivityKind> spanActivity(const Edge& edge) const {
    uint32_t from = edge.from;
    if (edge.kind != EdgeKind::kSpan || from % 2 != 0 || edge.to != edge.from + 1) return std::nullopt;
    const GraphEvent& e = events_[from / 2];
    if (e.host) return std::nullopt;
    return rank_->activities[e.ref.index].kind;
  }

 private:
  void addEdge(uint32_t from, uint32_t to, EdgeKind kind, bool zero_weight = false) {
    int64_t from_ns = timeOf(from), to_ns = timeOf(to);
    int64_t weight = 0;
    if (!zero_weight && kind != EdgeKind::kDependency && kind != EdgeKind::kSync)
      weight = std::max<int64_t>(0, to_ns - from_ns);
    pushEdge(from, to, from_ns, to_ns, weight, kind);
  }
  // Appends an edge; for reduce(), counts its nodes' links as planOf does (per node, its edges in, the
  // low two bits, and out, the next two: 1 for one forward edge, 2 for anything more) and notes where
  // it runs back in time or out of the window.
  void pushEdge(uint32_t from, uint32_t to, int64_t from_ns, int64_t to_ns, int64_t weight, EdgeKind kind) {
    auto i = static_cast<uint32_t>(own_edges_.size());
    appendEdge(own_edges_, from, to, weight, kind);
    if (!counting_) return;
    uint8_t one = std::pair(from_ns, from) < std::pair(to_ns, to) ? 1 : 2;
    uint8_t& in = node_links_[to];
    in = static_cast<uint8_t>((in & 3) == 0 ? in | one : (in & 0xfc) | 2);
    uint8_t& out = node_links_[from];
    out = static_cast<uint8_t>((out & 12) == 0 ? out | one << 2 : (out & 0xf3) | 8);
    next_out_[from] = i;
    if (to_ns < from_ns) backward_.push_back({to_ns, from_ns});
    if (to_ns > window_.end || from_ns < window_.start) outside_.push_back(i);
  }
  void noteKernelGap() { kernel_gaps_.push(static_cast<uint32_t>(own_edges_.size()) - 1); }
  bool inWindow(int64_t start, int64_t end) const {
    return start >= window_.start && start <= window_.end && end > start;
  }

  void collectEvents(RankGraphScratch& scratch);
  void addCallStackEdges(RankGraphScratch& scratch);
  void addGpuEdges(RankGraphScratch& scratch);

  const model::RankTrace* rank_ = nullptr;
  const RankTimeIndex* index_ = nullptr;
  Interval window_;
  bool stream_waits_ = false;
  std::vector<GraphEvent> events_;
  std::vector<uint64_t> threads_;  // per host event: its OS thread
  std::vector<uint32_t> calls_;    // the window's host calls, by index; their events follow call_base_
  uint32_t call_base_ = 0;
  uint32_t work_base_ = 0;               // GPU work's first event (its events follow the host's)
  std::vector<uint32_t> launch_event_;   // per GPU work (from work_base_): its launch call's event
  std::vector<ActivityKind> work_kind_;  // per GPU work: its activity's kind and stream
  std::vector<uint16_t> work_stream_;
  std::vector<Edge> own_edges_;
  // For reduce(), counted as the edges are added (build with stream_waits): per node, its links and
  // its (last) edge out; the stretches edges run back in time over ([to, from)); edges out of the window.
  bool counting_ = false;
  std::vector<uint8_t> node_links_;
  std::vector<uint32_t> next_out_;
  std::vector<Interval> backward_;
  std::vector<uint32_t> outside_;
  std::vector<int64_t> span_edge_;                           // per GPU work (from work_base_): its span edge, or -1
  std::vector<std::pair<uint32_t, uint32_t>> stream_syncs_;  // (Stream Sync activity, its call's event)
  std::vector<std::pair<int64_t, uint32_t>> communication_;  // (start, event) of communication kernels, in order
  IndexList kernel_gaps_;                                    // its kernel-to-kernel edges
  IndexList compute_spans_;                                  // its compute kernels' span edges
  int64_t compute_ns_ = 0;
};

void RankGraph::collectEvents(RankGraphScratch& scratch) {
  auto addHost = [&](PathEventSource source, uint32_t index, int64_t start, int64_t end, uint64_t thread) {
    appendEvent(events_, source, index, start, end, true);
    threads_.push_back(thread);
  };
  // Those that start in the window, in the rank's order (by index).
  std::vector<uint32_t>& starting = scratch.starting;
  RankTimeIndex::startingIn(index_->ops_by_start, window_.start, window_.end, starting);
  for (uint32_t i : starting) {
    const model::HostOp& op = rank_->host_ops[i];
    if (inWindow(op.start_ns, op.end_ns)) addHost(PathEventSource::kHostOp, i, op.start_ns, op.end_ns, op.thread_id);
  }
  RankTimeIndex::startingIn(index_->ranges_by_start, window_.start, window_.end, starting);
  for (uint32_t i : starting) {
    const model::NvtxRange& r = rank_->nvtx[i];
    if (inWindow(r.start_ns, r.end_ns)) addHost(PathEventSource::kStepRange, i, r.start_ns, r.end_ns, r.thread_id);
  }
  // Calls in correlation order and work in start order, as the whole rank's lists have them.
  std::vector<uint32_t>& calls = calls_;
  calls.clear();
  index_->forCallsStartingIn(*rank_, window_.start, window_.end, [&](uint32_t i) {
    const model::HostCall& c = rank_->host_calls[i];
    if (inWindow(c.start_ns, c.end_ns)) calls.push_back(i);
  });
  sortIfNeeded(calls);
  call_base_ = static_cast<uint32_t>(events_.size());
  for (uint32_t i : calls) {
    const model::HostCall& c = rank_->host_calls[i];
    addHost(PathEventSource::kHostCall, i, c.start_ns, c.end_ns,
            c.thread < rank_->threads.size() ? rank_->threads[c.thread] : 0);
  }
  // Work comes by its call's start, which mostly follows the calls' order: the call after the last one
  // found is tried first.
  size_t next_call = 0;
  auto eventOfCall = [&](uint32_t call) -> std::optional<uint32_t> {
    size_t at = next_call < calls_.size() && calls_[next_call] == call
                    ? next_call
                    : static_cast<size_t>(std::lower_bound(calls_.begin(), calls_.end(), call) - calls_.begin());
    if (at == calls_.size() || calls_[at] != call) return std::nullopt;
    next_call = at + 1;
    return call_base_ + static_cast<uint32_t>(at);
  };
  std::vector<std::pair<uint32_t, uint32_t>>& work = scratch.work;
  work.clear();
  auto launchedIn = [&](const std::vector<RankTimeIndex::Work>& list, std::vector<std::pair<uint32_t, uint32_t>>& out) {
    auto first = std::lower_bound(list.begin(), list.end(), window_.start,
                                  [](const RankTimeIndex::Work& w, int64_t t) { return w.call_start < t; });
    next_call = 0;
    for (auto it = first; it != list.end() && it->call_start <= window_.end; ++it) {
      if (std::optional<uint32_t> call_event = eventOfCall(it->call)) out.emplace_back(it->activity, *call_event);
    }
  };
  launchedIn(index_->work_by_launch, work);
  launchedIn(index_->syncs_by_launch, stream_syncs_);
  sortIfNeeded(work);
  // GPU work's events come last: what only they have is kept for them alone (each step wrote it for all).
  work_base_ = static_cast<uint32_t>(events_.size());
  launch_event_.resize(work.size());
  work_kind_.resize(work.size());
  work_stream_.resize(work.size());
  for (size_t w = 0; w < work.size(); ++w) {
    const auto& [i, call_event] = work[w];
    const model::GpuActivity& a = rank_->activities[i];
    launch_event_[w] = call_event;
    work_kind_[w] = a.kind;
    work_stream_[w] = a.stream;
    appendEvent(events_, PathEventSource::kActivity, i, a.start_ns, std::max(a.start_ns, a.end_ns), false);
  }
  sortIfNeeded(stream_syncs_);
  span_edge_.assign(work.size(), -1);
}

// Per CPU thread, events nested as their times say; consecutive top-level events are ordered
// without weight, nested ones with the time between them.
void RankGraph::addCallStackEdges(RankGraphScratch& scratch) {
  std::vector<uint32_t>& host = scratch.host;  // the host's events come before GPU work's
  host.resize(work_base_);
  std::iota(host.begin(), host.end(), 0u);
  stableSortIfNeeded(host, [&](uint32_t a, uint32_t b) {
    return std::tuple(threads_[a], events_[a].start_ns, -events_[a].end_ns) <
           std::tuple(threads_[b], events_[b].start_ns, -events_[b].end_ns);
  });
  size_t i = 0;
  while (i < host.size()) {
    uint64_t thread = threads_[host[i]];
    std::vector<uint32_t>& stack = scratch.stack;
    stack.clear();
    int64_t last = -1;
    auto exitTop = [&] {
      uint32_t e = stack.back();
      stack.pop_back();
      const GraphEvent& ev = events_[e];
      bool zero = ev.ref.source == PathEventSource::kHostCall &&
                  (index_->waitsOf(rank_->host_calls[ev.ref.index]) & RankTimeIndex::kBlocksOnGpu) != 0;
      if (last >= 0) addEdge(static_cast<uint32_t>(last), endNode(e), EdgeKind::kSpan, zero);
      last = endNode(e);
    };
    for (; i < host.size() && threads_[host[i]] == thread; ++i) {
      uint32_t e = host[i];
      while (!stack.empty() &&
             (events_[stack.back()].end_ns <= events_[e].start_ns || events_[stack.back()].end_ns < events_[e].end_ns))
        exitTop();
      events_[e].parent = stack.empty() ? -1 : static_cast<int32_t>(stack.back());
      if (last >= 0)
        addEdge(static_cast<uint32_t>(last), startNode(e), stack.empty() ? EdgeKind::kDependency : EdgeKind::kSpan);
      last = startNode(e);
      stack.push_back(e);
    }
    while (!stack.empty()) exitTop();
  }
}

// Per stream, in start order: each kernel's span, and either its launch delay (nothing was queued on
// its stream when it was launched, nor launched behind it before it started) or its gap to the
// stream's previous kernel. Stream and device synchronizations tie the stream's last kernel to the
// end of the call that waited for it.
void RankGraph::addGpuEdges(RankGraphScratch& scratch) {
  using Item = RankGraphScratch::Item;
  // A kernel adds at most five kernel-to-kernel edges: after up to four kernels that ended together on
  // other streams, and after its own stream's last.
  kernel_gaps_.reserve(5 * (events_.size() - work_base_));
  compute_spans_.reserve(events_.size() - work_base_);
  std::vector<Item>& items = scratch.items;
  items.clear();
  items.reserve(events_.size() - call_base_ - calls_.size() + stream_syncs_.size());
  for (uint32_t e = 0; e < events_.size(); ++e) {
    const GraphEvent& ev = events_[e];
    if (!ev.host) {
      appendItem(items, ev.start_ns, e, work_stream_[e - work_base_], false);
    } else if (ev.ref.source == PathEventSource::kHostCall &&
               (index_->waitsOf(rank_->host_calls[ev.ref.index]) & RankTimeIndex::kDeviceSync) != 0) {
      appendItem(items, ev.end_ns, e, -1, true);
    }
  }
  for (const auto& [activity, call_event] : stream_syncs_) {
    const model::GpuActivity& a = rank_->activities[activity];
    appendItem(items, a.end_ns, call_event, a.stream, true);
  }
  stableSortIfNeeded(items, [](const Item& a, const Item& b) { return a.sort_ns < b.sort_ns; });

  // HTA's queue length per stream: +1 at each launch call, -1 as each kernel starts; per stream, in
  // (time, launch before start, event) order. The launches and the starts are each in that order
  // already (mostly, for the launches): one merge per stream, not a sort of both.
  int32_t streams = 0;
  for (const Item& item : items) streams = std::max(streams, item.stream + 1);
  std::vector<uint32_t>& stream_begin = scratch.stream_begin;
  stream_begin.assign(static_cast<size_t>(streams) + 1, 0);
  for (const Item& item : items) {
    if (!item.sync) ++stream_begin[static_cast<size_t>(item.stream) + 1];
  }
  for (size_t s = 1; s < stream_begin.size(); ++s) stream_begin[s] += stream_begin[s - 1];
  std::vector<std::pair<int64_t, uint32_t>>& launches = scratch.launches;
  std::vector<std::pair<int64_t, uint32_t>>& starts = scratch.starts;
  launches.resize(stream_begin.back());
  starts.resize(stream_begin.back());
  {
    std::vector<uint32_t>& next = scratch.next;
    next.assign(stream_begin.begin(), stream_begin.end() - 1);
    for (const Item& item : items) {
      if (item.sync) continue;
      uint32_t k = next[static_cast<size_t>(item.stream)]++;
      launches[k] = {events_[launch_event_[item.event - work_base_]].start_ns, item.event};
      starts[k] = {events_[item.event].start_ns, item.event};
    }
  }
  // Per GPU work (from work_base_): (after its launch, after its start).
  std::vector<std::pair<int, int>>& queue_at = scratch.queue_at;
  queue_at.assign(events_.size() - work_base_, {0, 0});
  for (size_t s = 0; s + 1 < stream_begin.size(); ++s) {
    auto begin = static_cast<ptrdiff_t>(stream_begin[s]), end = static_cast<ptrdiff_t>(stream_begin[s + 1]);
    std::span<std::pair<int64_t, uint32_t>> launched(launches.begin() + begin, launches.begin() + end);
    std::span<std::pair<int64_t, uint32_t>> started(starts.begin() + begin, starts.begin() + end);
    sortIfNeeded(launched);
    sortIfNeeded(started);
    int length = 0;
    for (size_t l = 0, k = 0; l < launched.size() || k < started.size();) {
      if (k == started.size() || (l < launched.size() && launched[l].first <= started[k].first)) {
        queue_at[launched[l++].second - work_base_].first = ++length;
      } else {
        queue_at[started[k++].second - work_base_].second = --length;
      }
    }
  }

  // GPU work by end, for the latest end on another stream inside a kernel's gap.
  std::vector<std::pair<int64_t, uint32_t>>& ends = scratch.ends;
  ends.clear();
  if (stream_waits_) {
    for (const Item& item : items) {
      if (!item.sync) ends.emplace_back(events_[item.event].end_ns, item.event);
    }
    sortIfNeeded(ends);
  }
  // The kernels that ended last in (previous_end, start]: [first, last) of `ends`, those that ended
  // together (a send and a receive posted at once), up to four.
  // Kernels come by start: the first end after `start` is looked for from the last one found.
  size_t ended_by = 0;
  int64_t ended_by_start = INT64_MIN;
  auto waitedOn = [&](int64_t previous_end, int64_t start) -> std::pair<size_t, size_t> {
    if (start < ended_by_start) ended_by = 0;
    ended_by_start = start;
    while (ended_by < ends.size() && ends[ended_by].first <= start) ++ended_by;
    auto it = ends.begin() + static_cast<ptrdiff_t>(ended_by);
    if (it == ends.begin() || std::prev(it)->first <= previous_end) return {0, 0};
    auto first = std::prev(it);
    while (first != ends.begin() && std::prev(first)->first == first->first && it - first < 4) --first;
    return {static_cast<size_t>(first - ends.begin()), static_cast<size_t>(it - ends.begin())};
  };
  std::vector<int64_t>& last_on_stream = scratch.last_on_stream;  // per stream: its last kernel's end node
  last_on_stream.assign(static_cast<size_t>(streams), -1);
  // Across ranks, a kernel that started before its stream's previous one ended ran beside it (the
  // kernels of one NCCL group, or a trace's overlap): it follows the latest of the stream's kernels
  // that ended before it started, if any.
  std::vector<RankGraphScratch::RecentEnds>& ends_on_stream = scratch.ends_on_stream;
  ends_on_stream.assign(static_cast<size_t>(streams), {});
  auto endedBefore = [&](int32_t stream, int64_t start) -> std::optional<uint32_t> {
    const RankGraphScratch::RecentEnds& recent = ends_on_stream[static_cast<size_t>(stream)];
    std::optional<uint32_t> best;
    for (uint64_t k = recent.count; k > 0 && recent.count - k < recent.node.size(); --k) {
      uint32_t node = recent.node[(k - 1) % recent.node.size()];
      int64_t t = timeOf(node);
      if (t <= start && (!best || t > timeOf(*best))) best = node;
    }
    return best;
  };
  for (const Item& item : items) {
    if (item.sync) {
      for (int32_t stream = 0; stream < streams; ++stream) {
        int64_t node = last_on_stream[static_cast<size_t>(stream)];
        if (node >= 0 && (item.stream < 0 || stream == item.stream))
          addEdge(static_cast<uint32_t>(node), endNode(item.event), EdgeKind::kSync);
      }
      continue;
    }
    uint32_t e = item.event;
    uint32_t call = launch_event_[e - work_base_];
    std::optional<uint32_t> last;
    int64_t& stream_last = last_on_stream[static_cast<size_t>(item.stream)];
    if (stream_last >= 0) {
      last = static_cast<uint32_t>(stream_last);
      if (stream_waits_ && timeOf(*last) > events_[e].start_ns) last = endedBefore(item.stream, events_[e].start_ns);
    }
    auto [after_launch, after_start] = queue_at[e - work_base_];
    bool launch_delay = after_launch == 1 && after_start == 0 && (!last || timeOf(*last) < events_[call].start_ns);
    // Across ranks, a kernel that starts after another stream's kernel ended in its stream's gap (or,
    // alone on its stream, after its launch call) waited for that kernel rather than for its launch.
    std::pair<size_t, size_t> others{0, 0};
    if (stream_waits_) {
      others = waitedOn(launch_delay ? events_[call].end_ns
                        : last       ? timeOf(*last)
                                     : events_[call].start_ns,
                        events_[e].start_ns);
    }
    bool other = others.second > others.first;
    if (launch_delay && !other) {
      addEdge(startNode(call), startNode(e), EdgeKind::kLaunch);
    } else if (other) {
      // Its stream waited for those kernels: the gap before their end is the other streams'.
      for (size_t k = others.first; k < others.second; ++k) {
        addEdge(endNode(ends[k].second), startNode(e), EdgeKind::kKernelGap);
        noteKernelGap();
      }
      if (last) {
        int64_t weight = own_edges_.back().weight;
        pushEdge(*last, startNode(e), timeOf(*last), timeOf(startNode(e)), weight, EdgeKind::kKernelGap);
        noteKernelGap();
      }
    } else if (last && events_[e].start_ns - timeOf(*last) < kKernelGapLimitNs) {
      addEdge(*last, startNode(e), EdgeKind::kKernelGap);
      noteKernelGap();
    }
    // Its span after the edges into its start, so that a stream's chain runs forward in the edges' order
    // (planOf sums chains in one pass then).
    span_edge_[e - work_base_] = static_cast<int64_t>(own_edges_.size());
    addEdge(startNode(e), endNode(e), EdgeKind::kSpan);
    ActivityKind kind = work_kind_[e - work_base_];
    if (kind == ActivityKind::kCompute) {
      compute_ns_ += own_edges_.back().weight;
      compute_spans_.push(static_cast<uint32_t>(own_edges_.size()) - 1);
    }
    if (kind == ActivityKind::kCommunication) communication_.emplace_back(events_[e].start_ns, e);
    if (stream_last < 0 || !stream_waits_ || timeOf(endNode(e)) >= timeOf(static_cast<uint32_t>(stream_last)))
      stream_last = endNode(e);
    if (stream_waits_) ends_on_stream[static_cast<size_t>(item.stream)].push(endNode(e));
  }
  sortIfNeeded(communication_);
}

// A node with one edge in and one out, both forward in (time, node), as planOf merges them: per node,
// its edges in (low two bits) and out (next two), 1 for one forward edge and 2 for anything more.
constexpr uint8_t kOneInOneOut = 1 | 1 << 2;
constexpr uint8_t kMadePort = 0xff;  // a node reduce() keeps although it has one edge in and one out

// Ports: the nodes planOf would keep (not one forward edge in and one out), communication kernels'
// starts and ends (joins reach them), and the ends of the edges kept as links of their own: the
// kernel-to-kernel edges a collective's join may be tied to (tieGapsToCollectives: every such edge
// into a kernel, when one of them follows a communication kernel's end or has one run through it),
// communication kernels' spans, and the edges whose slices the cutter may clip, so that a chain's
// parts are summed whole: those reaching out of the window, and those starting where the path can be
// behind the cutter's cursor (after an edge that runs back in time, from its end to its start; after
// a gap tied to a collective that ran through it, from the gap's end to the collective's, which the
// tie's slice reaches). The rest of the edges form chains between ports.
void RankGraph::reduce(RankStepGraph& out, RankGraphScratch& scratch) {
  const std::vector<Edge>& edges = own_edges_;
  const uint32_t nodes = nodeCount();
  out.window = window_;
  out.compute_ns = compute_ns_;
  out.times.clear();
  out.port_node.clear();
  out.links.clear();
  out.parts.clear();
  out.communication.clear();
  out.kernel_gaps.clear();
  const std::vector<uint32_t>& next_out = next_out_;
  std::vector<uint32_t>& singles = scratch.singles;  // the edges kept as links of their own, sorted once all found
  singles.clear();
  std::vector<Interval>& behind_cursor = scratch.behind_cursor;  // [path's time, cursor)
  behind_cursor = backward_;
  // A node is a port where its links are not one forward edge in and one out; the others made ports
  // below get links that say so. Found eight nodes at a time: few are ports.
  std::vector<uint8_t>& links = node_links_;
  auto port = [&](uint32_t n) { return links[n] != kOneInOneOut; };
  std::vector<uint32_t>& ports = scratch.ports;  // in node order once sorted
  ports.clear();
  constexpr uint64_t kAllOneInOneOut = 0x0101010101010101ull * kOneInOneOut;
  uint32_t at = 0;
  for (; at + 8 <= nodes; at += 8) {
    uint64_t eight;
    std::memcpy(&eight, links.data() + at, 8);
    if (eight == kAllOneInOneOut) continue;
    for (uint32_t k = at; k < at + 8; ++k) {
      if (port(k)) ports.push_back(k);
    }
  }
  for (; at < nodes; ++at) {
    if (port(at)) ports.push_back(at);
  }
  auto makePort = [&](uint32_t node) {
    if (!port(node)) links[node] = kMadePort, ports.push_back(node);
  };
  auto keepSingle = [&](uint32_t i) {
    singles.push_back(i);
    makePort(edges[i].from);
    makePort(edges[i].to);
  };
  for (uint32_t i : outside_) keepSingle(i);
  std::vector<uint32_t>& communication_ends = scratch.communication_ends;
  communication_ends.clear();
  for (const auto& [start, event] : communication_) {
    communication_ends.push_back(endNode(event));
    keepSingle(static_cast<uint32_t>(span_edge_[event - work_base_]));
  }
  sortIfNeeded(communication_ends);
  // The kernel gaps a join may tie: the edges before one into the same kernel are those its stream
  // waited for on other streams (addGpuEdges adds them first).
  std::vector<uint32_t>& tie_candidates = scratch.tie_candidates;
  tie_candidates.clear();
  for (uint32_t i : kernel_gaps_) {
    const Edge& gap = edges[i];
    uint32_t waited = i;
    while (waited > 0 && i - waited < 4 && edges[waited - 1].kind == EdgeKind::kKernelGap &&
           edges[waited - 1].to == gap.to)
      --waited;
    bool candidate = false;
    for (uint32_t k = waited; k < i && !candidate; ++k)
      candidate = std::binary_search(communication_ends.begin(), communication_ends.end(), edges[k].from);
    if (!candidate && waited == i) {
      int64_t gap_start = timeOf(gap.from), gap_end = timeOf(gap.to);
      auto it =
          std::lower_bound(communication_.begin(), communication_.end(), std::pair<int64_t, uint32_t>{gap_start, 0});
      for (; it != communication_.end() && it->first < gap_end; ++it) {
        if (int64_t end = events_[it->second].end_ns; end > gap_end) {
          candidate = true;
          behind_cursor.push_back({gap_end, end});
        }
      }
    }
    if (!candidate) continue;
    tie_candidates.push_back(i);
    // Every kernel-to-kernel edge into the same kernel, as the join's look back finds them.
    uint32_t first = i;
    while (first > 0 && edges[first - 1].kind == EdgeKind::kKernelGap && edges[first - 1].to == gap.to) --first;
    for (uint32_t k = first; k <= i; ++k) keepSingle(k);
  }
  if (!behind_cursor.empty()) {
    std::sort(behind_cursor.begin(), behind_cursor.end(),
              [](const Interval& a, const Interval& b) { return a.start < b.start; });
    IntervalSet merged = unionOf(std::move(behind_cursor));
    for (uint32_t i = 0; i < edges.size(); ++i) {
      int64_t from = timeOf(edges[i].from);
      auto after = std::upper_bound(merged.begin(), merged.end(), from,
                                    [](int64_t t, const Interval& r) { return t < r.start; });
      if (after != merged.begin() && from < std::prev(after)->end) keepSingle(i);
    }
    behind_cursor = std::move(merged);
  }
  sortIfNeeded(ports);
  std::sort(singles.begin(), singles.end());
  auto single = [&](uint32_t i) { return std::binary_search(singles.begin(), singles.end(), i); };
  std::vector<uint32_t>& number = scratch.port_number;
  number.resize(nodes);
  for (uint32_t n : ports) {
    number[n] = static_cast<uint32_t>(out.times.size());
    out.times.push_back(timeOf(n));
  }
  out.port_node = ports;
  // Each edge out of a port begins a link: itself, or the chain through the nodes after it. Edges come
  // mostly in their chains' order (addGpuEdges and addCallStackEdges add them forward), so the chains are
  // summed in one pass over them; when an edge comes before the one into its source, by walking each
  // chain from its port instead.
  auto& pending = scratch.links;  // (last edge, link)
  pending.clear();
  using Role = RankStepGraph::Role;
  auto roleOf = [&](const Edge& e) {
    if (e.kind == EdgeKind::kLaunch) return Role::kLaunch;
    std::optional<ActivityKind> kind = spanActivity(e);
    if (kind == ActivityKind::kCompute) return Role::kComputeSpan;
    if (kind == ActivityKind::kCommunication) return Role::kCommunicationSpan;
    return Role::kOther;
  };
  auto singleLink = [&](uint32_t i) {
    const Edge& edge = edges[i];
    RankStepGraph::Link link;
    link.from = number[edge.from];
    link.to = number[edge.to];
    link.first_edge = i;
    link.weight = edge.weight;
    link.kind = edge.kind;
    link.role = roleOf(edge);
    link.part = static_cast<uint32_t>(out.parts.size());
    out.parts.push_back(partOf(edge));
    pending.emplace_back(i, link);
  };
  auto chainFrom = [&](uint32_t i) {
    RankStepGraph::Link link;
    link.from = number[edges[i].from];
    link.first_edge = i;
    link.role = Role::kChain;
    return link;
  };
  std::vector<RankStepGraph::Link>& open = scratch.open_chains;
  // Per node inside a chain: its open chain, stamped with this reduction's number (what an earlier one
  // left there is not this one's).
  std::vector<uint64_t>& chain_into = scratch.chain_into;
  open.clear();
  if (chain_into.size() < nodes) chain_into.resize(nodes, 0);
  const uint64_t stamp = ++scratch.reductions << 32;
  bool in_order = true;
  size_t next_compute = 0;  // compute_spans_ come in edge order
  for (uint32_t i = 0; i < edges.size() && in_order; ++i) {
    const Edge& edge = edges[i];
    bool compute = next_compute < compute_spans_.size() && compute_spans_[next_compute] == i;
    next_compute += compute;
    uint32_t chain;
    if (port(edge.from)) {
      if (port(edge.to) || single(i)) {
        singleLink(i);
        continue;
      }
      chain = static_cast<uint32_t>(open.size());
      open.push_back(chainFrom(i));
    } else {
      uint64_t into = chain_into[edge.from];
      in_order = (into & ~uint64_t{UINT32_MAX}) == stamp;
      if (!in_order) break;
      chain = static_cast<uint32_t>(into);
    }
    RankStepGraph::Link& link = open[chain];
    link.weight += edge.weight;
    if (edge.kind == EdgeKind::kLaunch) link.launch_ns += edge.weight;
    if (compute) link.compute_ns += edge.weight;
    if (port(edge.to)) {
      link.to = number[edge.to];
      pending.emplace_back(i, link);
    } else {
      chain_into[edge.to] = stamp | chain;
    }
  }
  if (!in_order) {
    pending.clear();
    out.parts.clear();
    std::vector<uint8_t>& compute_span = scratch.compute_span;
    compute_span.assign(edges.size(), 0);
    for (uint32_t e : compute_spans_) compute_span[e] = 1;
    for (uint32_t i = 0; i < edges.size(); ++i) {
      const Edge& first = edges[i];
      if (!port(first.from)) continue;
      if (port(first.to) || single(i)) {
        singleLink(i);
        continue;
      }
      RankStepGraph::Link link = chainFrom(i);
      uint32_t last = i;
      for (uint32_t e = i;; e = next_out[edges[e].to]) {
        const Edge& edge = edges[e];
        link.weight += edge.weight;
        if (edge.kind == EdgeKind::kLaunch) link.launch_ns += edge.weight;
        if (compute_span[e]) link.compute_ns += edge.weight;
        last = e;
        if (port(edge.to)) break;
      }
      link.to = number[edges[last].to];
      pending.emplace_back(last, link);
    }
    std::sort(pending.begin(), pending.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  }
  std::vector<uint32_t>& link_of_edge = scratch.link_of_edge;
  link_of_edge.resize(edges.size());
  for (const auto& [last, link] : pending) {
    link_of_edge[last] = static_cast<uint32_t>(out.links.size());
    out.links.push_back(link);
  }
  for (const auto& [start, event] : communication_) {
    out.communication.push_back({start, events_[event].end_ns, events_[event].ref.index, number[startNode(event)],
                                 number[endNode(event)],
                                 link_of_edge[static_cast<uint32_t>(span_edge_[event - work_base_])]});
  }
  for (uint32_t i : tie_candidates) out.kernel_gaps.push_back(link_of_edge[i]);
}

// What an edge on the path was spent on. A host edge belongs to the event it lies in: its source's
// when that is a start, its destination's when that is an end, else the parent of both.
PathPart RankGraph::partOf(const Edge& edge) const {
  uint32_t from = edge.from, to = edge.to;
  PathPart p;
  switch (edge.kind) {
    case EdgeKind::kDependency:
      p.constant = "between top-level host ops";
      return p;
    case EdgeKind::kLaunch:
      p.cause = PathCause::kLaunch;
      return p;
    case EdgeKind::kKernelGap:
      p.cause = PathCause::kKernelGap;
      return p;
    case EdgeKind::kSync:
      p.cause = PathCause::kSynchronization;
      return p;
    case EdgeKind::kSpan:
      break;
  }
  int64_t owner = events_[from / 2].parent;
  if (from % 2 == 0) {
    owner = from / 2;
  } else if (to % 2 == 1) {
    owner = to / 2;
  }
  if (owner < 0) return p;
  const GraphEvent& ev = events_[static_cast<size_t>(owner)];
  switch (ev.ref.source) {
    case PathEventSource::kActivity: {
      const model::GpuActivity& a = rank_->activities[ev.ref.index];
      if (a.kind == ActivityKind::kCommunication) {
        p.cause = PathCause::kCommunication;
        if (std::optional<uint64_t> comm = index_->communicatorAt(a.start_ns)) p.comm_hash = *comm;
      } else if (a.kind == ActivityKind::kMemcpy || a.kind == ActivityKind::kMemset) {
        p.cause = PathCause::kMemcpy;
        p.constant = a.kind == ActivityKind::kMemcpy ? "copy" : "memset";
      } else {
        p.cause = PathCause::kCompute;
        p.name_id = a.name_id;
      }
      return p;
    }
    case PathEventSource::kHostCall: {
      const model::HostCall& call = rank_->host_calls[ev.ref.index];
      bool waits = (index_->waitsOf(call) & RankTimeIndex::kBlocksOnGpu) != 0;
      p.cause = waits ? PathCause::kSynchronization : PathCause::kHost;
      if (call.function < rank_->api_functions.size()) p.name_id = rank_->api_functions[call.function];
      return p;
    }
    case PathEventSource::kHostOp:
    case PathEventSource::kStepRange:
      p.cause = PathCause::kHost;
      p.constant = "cpu op";
      return p;
  }
  return p;
}

PathSlice RankGraph::sliceOf(const Edge& edge) const {
  return sliceOfPart(*rank_, partOf(edge), timeOf(edge.from), timeOf(edge.to));
}

LongestPath findLongestPath(const std::vector<int64_t>& times, const std::vector<Edge>& edges, PathEnd end_rule) {
  PathPlan plan;
  planOf(times, edges, plan);
  return longestPathOf(plan, end_rule);
}

// Cuts [window) into slices along a path: each edge's stretch goes to its cause, time before the path's
// first node and after its last to "other"; clipped to the window, so the slices sum to it.
class SliceCutter {
 public:
  SliceCutter(Interval window, std::vector<PathSlice>& out) : window_(window), cursor_(window.start), out_(out) {}
  void cover(PathSlice s) {
    s.start_ns = std::max(s.start_ns, cursor_);
    s.end_ns = std::min(std::max(s.end_ns, cursor_), window_.end);
    if (s.end_ns <= s.start_ns) return;
    if (!out_.empty() && out_.back().cause == s.cause && out_.back().detail == s.detail && out_.back().rank == s.rank &&
        out_.back().comm_hash == s.comm_hash && out_.back().waited_for == s.waited_for &&
        out_.back().waited_stage == s.waited_stage && out_.back().end_ns == s.start_ns) {
      out_.back().end_ns = s.end_ns;
    } else {
      out_.push_back(std::move(s));
    }
    cursor_ = out_.back().end_ns;
  }
  // Past a stretch summed ahead (a chain's parts), which no clipping reaches.
  void skipTo(int64_t t) { cursor_ = std::max(cursor_, std::min(t, window_.end)); }
  void finish(int32_t rank) {
    PathSlice s{cursor_, window_.end, PathCause::kOther, "after the path", rank, 0};
    cover(std::move(s));
  }

 private:
  Interval window_;
  int64_t cursor_;
  std::vector<PathSlice>& out_;
};

RankCriticalPath RankGraph::longestPath(PathEnd end_rule) const {
  RankCriticalPath out;
  out.rank = rank_->rank;
  out.window = window_;
  std::vector<int64_t> times(nodeCount());
  for (uint32_t n = 0; n < times.size(); ++n) times[n] = timeOf(n);
  LongestPath path = findLongestPath(times, own_edges_, end_rule);
  if (path.empty) {
    out.slices.push_back({window_.start, window_.end, PathCause::kOther, "no events", rank_->rank, 0});
    return out;
  }
  out.length_ns = path.length;
  out.nodes = path.edges.size() + 1;
  std::vector<bool> seen(events_.size(), false);
  auto note = [&](uint32_t node) {
    if (!seen[node / 2]) out.events.push_back(events_[node / 2].ref);
    seen[node / 2] = true;
  };
  note(path.first);
  SliceCutter cutter(window_, out.slices);
  cutter.cover({window_.start, timeOf(path.first), PathCause::kOther, "before the path", rank_->rank, 0});
  for (uint32_t i : path.edges) {
    note(own_edges_[i].to);
    cutter.cover(sliceOf(own_edges_[i]));
  }
  cutter.finish(rank_->rank);
  return out;
}

ResultValue attributionValue(const std::vector<PathAttribution>& attribution, bool with_rank) {
  ResultValue rows = ResultValue::array();
  for (const PathAttribution& a : attribution) {
    ResultValue row = ResultValue::object()
                          .set("cause", ResultValue::text(pathCauseName(a.cause)))
                          .set("detail", a.detail.empty() ? ResultValue() : ResultValue::text(a.detail));
    if (a.cause == PathCause::kCompute) row.set("kernel_class", ResultValue::text(kernelClassOf(a.detail)));
    if (with_rank) row.set("rank", a.rank >= 0 ? ResultValue::integer(a.rank) : ResultValue());
    rows.push(row.set("ns", ResultValue::integer(a.ns)));
  }
  return rows;
}

ResultValue resultValue(const CriticalPathResult& result) {
  ResultValue steps = ResultValue::array();
  for (const StepCriticalPath& s : result.steps) {
    steps.push(ResultValue::object()
                   .set("rank", ResultValue::integer(s.rank))
                   .set("step", s.step >= 0 ? ResultValue::integer(s.step) : ResultValue())
                   .set("start_ns", ResultValue::integer(s.window.start))
                   .set("end_ns", ResultValue::integer(s.window.end))
                   .set("step_ns", ResultValue::integer(s.window.length()))
                   .set("path_weight_ns", ResultValue::integer(s.length_ns))
                   .set("events_on_path", ResultValue::integer(static_cast<int64_t>(s.events_on_path)))
                   .set("attribution", attributionValue(s.attribution, false)));
  }
  ResultValue run_steps = ResultValue::array();
  for (const CriticalPathResult::RunStep& s : result.run_steps) {
    run_steps.push(ResultValue::object()
                       .set("step", s.step >= 0 ? ResultValue::integer(s.step) : ResultValue())
                       .set("start_ns", ResultValue::integer(s.window.start))
                       .set("end_ns", ResultValue::integer(s.window.end))
                       .set("step_ns", ResultValue::integer(s.window.length()))
                       .set("path_weight_ns", ResultValue::integer(s.length_ns))
                       .set("rank_changes", ResultValue::integer(static_cast<int64_t>(s.rank_changes)))
                       .set("attribution", attributionValue(s.attribution, true)));
  }
  ResultValue what_if = ResultValue::array();
  for (const WhatIf& w : result.what_if) {
    what_if.push(ResultValue::object()
                     .set("cause", ResultValue::text(findingCauseName(w.kind)))
                     .set("label", ResultValue::text(w.label))
                     .set("step_ns", ResultValue::integer(w.step_ns))
                     .set("predicted_step_ns", ResultValue::integer(w.step_ns - w.saves_ns))
                     .set("saves_ns", ResultValue::integer(w.saves_ns)));
  }
  return ResultValue::object()
      .set("steps", std::move(steps))
      .set("run_steps", std::move(run_steps))
      .set("what_if", std::move(what_if));
}

}  // namespace

const char* kernelClassOf(std::string_view kernel_name) {
  std::string name(kernel_name);
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  auto has = [&](std::string_view part) { return name.find(part) != std::string::npos; };
  if (has("flash") || has("fmha") || has("attention") || has("attn")) return "attention";
  if (has("gemm") || has("xmma") || has("cutlass") || has("cublas") || has("matmul") || has("wgmma")) return "GEMM";
  if (has("norm")) return "normalization";
  if (has("softmax")) return "softmax";
  if (has("reduce") || has("reduction")) return "reduction";
  if (has("elementwise") || has("vectorized") || has("unrolled")) return "elementwise";
  if (has("copy") || has("cat_")) return "copy";
  return "other";
}

const char* findingCauseName(report::FindingCause::Kind kind) {
  using Kind = report::FindingCause::Kind;
  switch (kind) {
    case Kind::kNone:
      return "none";
    case Kind::kStraggler:
      return "straggler";
    case Kind::kSlowNic:
      return "slow NIC";
    case Kind::kExposedCommunication:
      return "exposed communication";
    case Kind::kSlowStage:
      return "slow stage";
    case Kind::kHostGaps:
      return "host gaps";
  }
  return "none";
}

const char* pathCauseName(PathCause cause) {
  switch (cause) {
    case PathCause::kCompute:
      return "compute";
    case PathCause::kCommunication:
      return "communication";
    case PathCause::kMemcpy:
      return "memory copy";
    case PathCause::kHost:
      return "host";
    case PathCause::kLaunch:
      return "launch delay";
    case PathCause::kSynchronization:
      return "synchronization";
    case PathCause::kKernelGap:
      return "kernel gap";
    case PathCause::kWait:
      return "wait";
    case PathCause::kPipelineWait:
      return "pipeline wait";
    case PathCause::kOther:
      return "other";
  }
  return "other";
}

RankCriticalPath rankCriticalPath(const model::RankTrace& rank, Interval window, PathEnd end) {
  return RankGraph(rank, RankTimeIndex(rank), window).longestPath(end);
}

namespace {

// One rank's part from its events, over `windows`: each window's graph built and reduced.
RankPathPart pathPartOf(const model::RankTrace& rank, const RankTimeIndex& index,
                        const std::vector<Interval>& windows) {
  RankPathPart part;
  part.kernel_of_op = index.kernel_of_op;
  part.kernel_start_of_op.assign(index.kernel_of_op.size(), kNoLaunch);
  part.kernel_launch_of_op.assign(index.kernel_of_op.size(), kNoLaunch);
  for (size_t o = 0; o < index.kernel_of_op.size(); ++o) {
    uint32_t activity = index.kernel_of_op[o];
    if (activity == UINT32_MAX) continue;
    const model::GpuActivity& a = rank.activities[activity];
    part.kernel_start_of_op[o] = a.start_ns;
    const model::HostCall* call = a.correlation_id != 0 ? rank.launchOf(a.correlation_id) : nullptr;
    if (call != nullptr) part.kernel_launch_of_op[o] = call->start_ns;
  }
  RankGraph graph;
  RankGraphScratch scratch;
  part.steps.resize(windows.size());
  for (size_t w = 0; w < windows.size(); ++w) {
    graph.build(rank, index, windows[w], scratch, true);
    graph.reduce(part.steps[w], scratch);
  }
  return part;
}

std::vector<Interval> intervalsOf(const std::vector<StepWindow>& windows) {
  std::vector<Interval> out;
  out.reserve(windows.size());
  for (const StepWindow& w : windows) out.push_back(w.window);
  return out;
}

// A member of a join: its rank index and its kernel among the rank's step graph's communication.
struct JoinMember {
  uint32_t rank = 0;
  uint32_t kernel = 0;
};

// One step's graph across ranks (or of one rank): every rank's reduced graph in one numbering of
// nodes, each collective's members joined and each receive tied to its send.
struct RunGraph {
  std::vector<const RankStepGraph*> steps;  // per rank index, its graph of the step
  std::vector<int32_t> rank_numbers;        // per rank index
  std::vector<uint32_t> offset, edge_base;  // per rank index: its first node and first edge
  std::vector<int64_t> times;
  std::vector<Edge> edges;
  // Edges [0, rank_edges) are the ranks' links, each rank's from its edge_base. Per edge after them:
  // (-1, the member's span link): a join's edge to a member's end; (-2, operation): a member's start to
  // its operation's join node.
  uint32_t rank_edges = 0;
  std::vector<std::pair<int32_t, uint32_t>> join_origin;
  // (rank index, its kernel's start port) -> the rank waited for, and the communicator of the send or
  // receive it waited in (0: a collective).
  std::map<std::pair<uint32_t, uint32_t>, std::pair<int32_t, uint64_t>> waited_for;
  // Per joined NCCL operation: its members' rank indexes and the edges that carry its communication.
  struct Operation {
    std::vector<uint32_t> ranks;
    std::vector<uint32_t> edges;
    bool collective = true;  // else a send and its receive
    int32_t last_rank = -1;  // the rank whose member started last, as traced
    uint64_t wait_comm = 0;  // the communicator a wait for it is in (0: a collective)
  };
  std::vector<Operation> operations;
  Interval window;
  PathPlan plan;                      // of times and edges, once they are final
  std::vector<uint8_t> in_operation;  // per edge: one of an operation's edges
  PathScratch scratch;                // the step's longest path's distances, for its re-timings

  // Nodes past the ranks' are the operations' join nodes (no rank's).
  uint32_t rankOfNode(uint32_t node) const {
    return static_cast<uint32_t>(std::upper_bound(offset.begin(), offset.end(), node) - offset.begin() - 1);
  }
  // (rank index, its link), or a join's edge as join_origin has it.
  std::pair<int32_t, uint32_t> originOf(uint32_t edge) const {
    if (edge >= rank_edges) return join_origin[edge - rank_edges];
    auto r = static_cast<uint32_t>(std::upper_bound(edge_base.begin(), edge_base.end(), edge) - edge_base.begin() - 1);
    return {static_cast<int32_t>(r), edge - edge_base[r]};
  }
  const RankStepGraph::Communication& kernelOf(const JoinMember& m) const {
    return steps[m.rank]->communication[m.kernel];
  }
  uint32_t startOf(const JoinMember& m) const { return offset[m.rank] + kernelOf(m).start_port; }
  uint32_t endOf(const JoinMember& m) const { return offset[m.rank] + kernelOf(m).end_port; }
  uint32_t spanOf(const JoinMember& m) const { return edge_base[m.rank] + kernelOf(m).span_link; }
};

// A stream's gap that one of the rank's NCCL operations on another stream ended (its kernel among the
// last to end in the gap, so that the kernel after the gap waited for it) or ran through (it started
// in a gap no other stream's kernel ended, and ran past it: an overlapped collective, whose stream goes
// on once its exposed part is done) is that operation's (exposed communication, or a wait for a later
// member): the kernel after the gap depends on the operation's join, by the time from there, and the
// gap itself carries none. A gap in which other kernels ended after the operation did waited for them:
// tied to the operation, its fixed weight would hold the compute that ran in it. A rank's step graph
// lists the gaps this can reach (RankGraph::reduce).
// `joined`: (member, the operation's join node, operation) for every member.
template <typename Joined>
void tieGapsToCollectives(RunGraph& g, const std::vector<Joined>& joined) {
  // start, end, the join node, operation, span link (the rank's), end node (the run's)
  using Running = std::tuple<int64_t, int64_t, uint32_t, size_t, uint32_t, uint32_t>;
  std::vector<std::vector<Running>> waits(g.steps.size());
  for (const Joined& j : joined) {
    const RankStepGraph::Communication& kernel = g.kernelOf(j.member);
    waits[j.member.rank].emplace_back(g.times[g.startOf(j.member)], g.times[g.endOf(j.member)], j.last_start,
                                      j.operation, kernel.span_link, g.endOf(j.member));
  }
  for (auto& w : waits) std::sort(w.begin(), w.end());
  // Rank by rank, only the ranks with operations.
  for (uint32_t rank_index = 0; rank_index < g.steps.size(); ++rank_index) {
    const auto& list = waits[rank_index];
    if (list.empty()) continue;
    for (uint32_t local : g.steps[rank_index]->kernel_gaps) {
      size_t i = g.edge_base[rank_index] + local;
      int64_t gap_start = g.times[g.edges[i].from];
      int64_t gap_end = g.times[g.edges[i].to];
      // The kernels the gap waited for on other streams: the edges before it into the same kernel
      // (RankGraph::addGpuEdges adds those first).
      size_t waited = i;
      while (waited > g.edge_base[rank_index] && i - waited < 4 && g.edges[waited - 1].kind == EdgeKind::kKernelGap &&
             g.edges[waited - 1].to == g.edges[i].to)
        --waited;
      auto waitedFor = [&](uint32_t node) {
        for (size_t k = waited; k < i; ++k) {
          if (g.edges[k].from == node) return true;
        }
        return false;
      };
      // The latest-starting operations that began before the gap's end.
      auto it = std::lower_bound(list.begin(), list.end(), Running{gap_end, 0, 0, 0, 0, 0});
      for (int scanned = 0; it != list.begin() && scanned < 4; ++scanned) {
        --it;
        const auto& [start, end, last_start, operation, span, end_node] = *it;
        // It ended the gap, or started in a gap that no other stream's kernel ended and ran past it (an
        // overlapped collective: its stream goes on once the collective's exposed part is done).
        bool ended_it = waitedFor(end_node);
        bool ran_through = waited == i && start >= gap_start && end > gap_end;
        if (g.times[last_start] > gap_end || !(ended_it || ran_through)) continue;
        int64_t from_last = std::max<int64_t>(0, gap_end - g.times[last_start]);
        g.edges[i].weight = 0;
        g.operations[operation].edges.push_back(static_cast<uint32_t>(g.edges.size()));
        appendEdge(g.edges, last_start, g.edges[i].to, from_last, EdgeKind::kSpan);
        g.join_origin.emplace_back(-1, span);  // told as the operation's communication, as a join's edge is
        break;
      }
    }
  }
}

// Per matched collective and point-to-point pair, when its members' launch calls started (of those a
// step's graph can hold: a kernel is there only when its call starts in the rank's window), so that a
// step skips the operations none of its windows reach. Empty (start > end) with fewer than two.
struct OperationSpans {
  std::vector<Interval> collectives, p2p;

  OperationSpans(const std::vector<const RankPathPart*>& parts, const CollectiveIndex& matched) {
    for (const MatchedCollective& c : matched.collectives) collectives.push_back(spanOf(parts, matched.membersOf(c)));
    for (const P2pPair& p : matched.p2p) p2p.push_back(spanOf(parts, std::array{p.send, p.recv}));
  }
  static Interval spanOf(const std::vector<const RankPathPart*>& parts, std::span<const MemberOp> members) {
    Interval span{INT64_MAX, INT64_MIN};
    int calls = 0;
    for (MemberOp m : members) {
      if (m.rank_index >= parts.size()) continue;
      int64_t launch = parts[m.rank_index]->kernel_launch_of_op[m.op_index];
      if (launch == kNoLaunch) continue;
      span.start = std::min(span.start, launch), span.end = std::max(span.end, launch);
      ++calls;
    }
    return calls >= 2 ? span : Interval{INT64_MAX, INT64_MIN};
  }
  static bool reaches(const Interval& span, const Interval& window) {
    return span.start <= window.end && span.end >= window.start;
  }
};

// Step `step` of the ranks' parts into `g`, whose buffers keep their memory from the step before.
// `spans` (optional): the operations' spans, to skip those the step's windows do not reach.
void buildRunGraph(const model::RunTrace& run, const std::vector<const RankPathPart*>& parts, size_t step,
                   const CollectiveIndex& matched, RunGraph& g, const OperationSpans* spans = nullptr) {
  g.offset.clear();
  g.edge_base.clear();
  g.times.clear();
  g.edges.clear();
  g.join_origin.clear();
  g.waited_for.clear();
  g.operations.clear();
  g.steps.resize(parts.size());
  g.rank_numbers.resize(parts.size());
  auto& times = g.times;
  auto& edges = g.edges;
  auto& origin = g.join_origin;
  for (size_t r = 0; r < parts.size(); ++r) {
    const RankStepGraph& s = parts[r]->steps[step];
    g.steps[r] = &s;
    g.rank_numbers[r] = run.ranks[r].rank;
    g.window =
        r == 0 ? s.window : Interval{std::min(g.window.start, s.window.start), std::max(g.window.end, s.window.end)};
    auto first = static_cast<uint32_t>(times.size());
    g.offset.push_back(first);
    g.edge_base.push_back(static_cast<uint32_t>(edges.size()));
    times.insert(times.end(), s.times.begin(), s.times.end());
    for (const RankStepGraph::Link& link : s.links)
      appendEdge(edges, first + link.from, first + link.to, link.weight, link.kind);
  }
  g.rank_edges = static_cast<uint32_t>(edges.size());
  struct Joined {
    JoinMember member;
    uint32_t last_start;
    size_t operation;
  };
  std::vector<Joined> joined_at;  // every member, and where the operation's last member started
  // The operation's kernel (RankTimeIndex::kernel_of_op), if the step's graph holds it.
  auto kernelOf = [&](MemberOp m) -> std::optional<JoinMember> {
    if (m.rank_index >= parts.size()) return std::nullopt;
    const RankPathPart& part = *parts[m.rank_index];
    uint32_t activity = part.kernel_of_op[m.op_index];
    if (activity == UINT32_MAX) return std::nullopt;
    const auto& list = g.steps[m.rank_index]->communication;  // by start
    int64_t start = part.kernel_start_of_op[m.op_index];
    auto it = std::lower_bound(list.begin(), list.end(), start,
                               [](const RankStepGraph::Communication& c, int64_t t) { return c.start_ns < t; });
    for (; it != list.end() && it->start_ns == start; ++it) {
      if (it->activity == activity) return JoinMember{m.rank_index, static_cast<uint32_t>(it - list.begin())};
    }
    return std::nullopt;
  };
  // The members that started before the last one wait for it: their span carries only the time after
  // it started, and the last one's start leads to their end.
  auto join = [&](const std::vector<JoinMember>& members, bool collective, uint64_t comm_hash) {
    if (members.empty()) return;
    RunGraph::Operation operation;
    operation.collective = collective;
    for (const JoinMember& m : members) {
      operation.ranks.push_back(m.rank);
      operation.edges.push_back(g.spanOf(m));
    }
    const JoinMember* last = &members.front();
    for (const JoinMember& m : members) {
      if (times[g.startOf(m)] > times[g.startOf(*last)]) last = &m;
    }
    uint32_t last_start = g.startOf(*last);
    operation.last_rank = g.rank_numbers[last->rank];
    operation.wait_comm = collective ? 0 : comm_hash;
    // The join node, at the last member's start as traced: every member's start leads to it and it to
    // every member's end, by the time each member ran after the last one started. A re-timing that
    // changes which member starts last keeps the dependency (the edges below from the traced last
    // member's start hold only as traced).
    auto join_node = static_cast<uint32_t>(times.size());
    times.push_back(times[last_start]);
    for (const JoinMember& m : members) {
      appendEdge(edges, g.startOf(m), join_node, 0, EdgeKind::kDependency);
      origin.emplace_back(-2, static_cast<uint32_t>(g.operations.size()));
    }
    for (const JoinMember& m : members) {
      uint32_t end = g.endOf(m);
      if (times[end] < times[join_node]) continue;  // it did not wait for the last member
      operation.edges.push_back(static_cast<uint32_t>(edges.size()));
      appendEdge(edges, join_node, end, std::max<int64_t>(0, times[end] - times[join_node]), EdgeKind::kSpan);
      origin.emplace_back(-1, g.kernelOf(m).span_link);
    }
    for (const JoinMember& m : members) joined_at.push_back({m, join_node, g.operations.size()});
    for (const JoinMember& w : members) {
      if (w.rank == last->rank) continue;
      uint32_t start = g.startOf(w), end = g.endOf(w);
      // It started last itself, or ended before the last one started (an eager send, which did not
      // wait for its receive).
      if (times[last_start] <= times[start] || times[end] < times[last_start]) continue;
      edges[g.spanOf(w)].weight = std::max<int64_t>(0, times[end] - times[last_start]);
      operation.edges.push_back(static_cast<uint32_t>(edges.size()));
      appendEdge(edges, last_start, end, std::max<int64_t>(0, times[end] - times[last_start]), EdgeKind::kSpan);
      origin.emplace_back(-1, g.kernelOf(w).span_link);
      g.waited_for[{w.rank, g.kernelOf(w).start_port}] = {g.rank_numbers[last->rank], collective ? 0 : comm_hash};
    }
    g.operations.push_back(std::move(operation));
  };
  for (size_t o = 0; o < matched.collectives.size(); ++o) {
    if (spans != nullptr && !OperationSpans::reaches(spans->collectives[o], g.window)) continue;
    const MatchedCollective& c = matched.collectives[o];
    std::vector<JoinMember> members;
    for (MemberOp m : matched.membersOf(c)) {
      if (auto k = kernelOf(m)) members.push_back(*k);
    }
    if (members.size() >= 2) join(members, true, c.comm_hash);
  }
  for (size_t o = 0; o < matched.p2p.size(); ++o) {
    if (spans != nullptr && !OperationSpans::reaches(spans->p2p[o], g.window)) continue;
    const P2pPair& p = matched.p2p[o];
    auto send = kernelOf(p.send);
    auto recv = kernelOf(p.recv);
    if (send && recv) join({*send, *recv}, false, opOf(run, p.send).comm_hash);
  }
  tieGapsToCollectives(g, joined_at);
  planOf(g.times, g.edges, g.plan, Chains::kMerged);
  g.in_operation.assign(g.edges.size(), 0);
  for (const RunGraph::Operation& op : g.operations) {
    for (uint32_t e : op.edges) g.in_operation[e] = 1;
  }
}

// Gives back the slices of a rank's chain on the path, from its events (the timeline's): the rank's
// graph of the step built again, once a step and rank.
class ChainSlices {
 public:
  explicit ChainSlices(const model::RunTrace& run) : run_(run) {}
  void cover(const RunGraph& g, uint32_t rank_index, const RankStepGraph::Link& link, SliceCutter& cutter) {
    const RankStepGraph& step = *g.steps[rank_index];
    Built& built = built_[rank_index];
    if (!built.index) built.index.emplace(run_.ranks[rank_index]);  // only the ranks the paths cross
    if (built.step != &step) {
      built.graph.build(run_.ranks[rank_index], *built.index, step.window, scratch_, true);
      built.step = &step;
    }
    built.graph.forChain(link.first_edge, step.port_node[link.to],
                         [&](const Edge& edge) { cutter.cover(built.graph.sliceOf(edge)); });
  }

 private:
  struct Built {
    std::optional<RankTimeIndex> index;
    const RankStepGraph* step = nullptr;
    RankGraph graph;
  };
  const model::RunTrace& run_;
  std::map<uint32_t, Built> built_;
  RankGraphScratch scratch_;
};

// The step's path: its slices in time order when `chains` gives the chains' back, else the slices of
// the edges that are links of their own and, in `chains_on_path`, the chains on the path, whose slices
// no clipping reaches (RankGraph::reduce), to be summed from the rank's events.
struct ChainOnPath {
  uint32_t rank = 0;  // rank index
  uint32_t link = 0;  // its link in the rank's step graph
};
RunStepPath runPath(const model::RunTrace& run, RunGraph& g, ChainSlices* chains,
                    std::vector<ChainOnPath>* chains_on_path) {
  RunStepPath out;
  out.window = g.window;
  const auto& times = g.times;
  const auto& edges = g.edges;
  LongestPath path = longestPathOf(g.plan, PathEnd::kLatest, &g.scratch);
  SliceCutter cutter(out.window, out.slices);
  if (path.empty) {
    cutter.finish(-1);
    return out;
  }
  out.length_ns = path.length;
  uint32_t first_rank = g.rankOfNode(path.first);
  cutter.cover(
      {out.window.start, times[path.first], PathCause::kOther, "before the path", g.rank_numbers[first_rank], 0});
  int32_t previous_rank = g.rank_numbers[first_rank];
  for (uint32_t i : path.edges) {
    const Edge& e = edges[i];
    uint32_t r = g.rankOfNode(e.to);
    const model::RankTrace& rank = run.ranks[r];
    const RankStepGraph& step = *g.steps[r];
    auto [from_rank, local] = g.originOf(i);
    if (from_rank == -2) {  // a member's start to its operation's join: it waited for the last member
      const RunGraph::Operation& op = g.operations[local];
      int32_t member = g.rank_numbers[g.rankOfNode(e.from)];
      if (member != previous_rank) ++out.rank_changes;
      previous_rank = member;
      if (member != op.last_rank)
        cutter.cover({times[e.from], times[e.to], PathCause::kWait, "", member, op.wait_comm, op.last_rank});
      continue;
    }
    if (rank.rank != previous_rank) ++out.rank_changes;
    previous_rank = rank.rank;
    const RankStepGraph::Link& link = step.links[local];
    if (from_rank < 0) {  // a join: the span of the waiting kernel after the last member started
      cutter.cover(sliceOfPart(rank, step.parts[link.part], times[e.from], times[g.offset[r] + link.to]));
      continue;
    }
    if (link.role == RankStepGraph::Role::kChain) {
      if (chains != nullptr) {
        chains->cover(g, r, link, cutter);
      } else {
        chains_on_path->push_back({r, local});
        cutter.skipTo(times[e.to]);
      }
      continue;
    }
    if (link.role == RankStepGraph::Role::kCommunicationSpan) {
      auto w = g.waited_for.find({r, link.from});
      if (w != g.waited_for.end()) {
        // The kernel's own start led here although it waited: its wait is the other rank's doing.
        int64_t waited_until = times[e.to] - e.weight;
        cutter.cover({times[e.from], waited_until, PathCause::kWait, "", rank.rank, w->second.second, w->second.first});
      }
    }
    cutter.cover(sliceOfPart(rank, step.parts[link.part], times[e.from], times[e.to]));
  }
  cutter.finish(previous_rank);
  return out;
}

// A cause at its ideal in one step's graph: compute scaled per rank, communication per joined operation
// and per rank for kernels no join holds (0: fully overlapped), launch delays closed per rank.
struct IdealStep {
  std::vector<double> compute_scale;
  std::vector<double> communication_scale;
  std::vector<double> operation_scale;
  std::vector<bool> close_launches;
};

int64_t medianOf(std::vector<int64_t> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

IdealStep idealOf(const RunGraph& g, const model::RunTrace& run, const report::FindingCause& cause) {
  using Kind = report::FindingCause::Kind;
  size_t ranks = g.steps.size();
  IdealStep ideal{std::vector<double>(ranks, 1.0), std::vector<double>(ranks, 1.0),
                  std::vector<double>(g.operations.size(), 1.0), std::vector<bool>(ranks, false)};
  std::vector<bool> named(ranks, false);
  for (int32_t rank : cause.ranks) {
    for (size_t r = 0; r < ranks; ++r) named[r] = named[r] || g.rank_numbers[r] == rank;
  }
  auto involves = [&](const RunGraph::Operation& op) {
    return std::any_of(op.ranks.begin(), op.ranks.end(), [&](uint32_t r) { return named[r]; });
  };
  switch (cause.kind) {
    case Kind::kNone:
      break;
    case Kind::kStraggler: {
      // Its compute at the median of the ranks it meets in collectives (they run the same work), else of
      // all the others.
      std::vector<bool> peer(ranks, false);
      for (const RunGraph::Operation& op : g.operations) {
        if (!op.collective || !involves(op)) continue;
        for (uint32_t r : op.ranks) peer[r] = !named[r];
      }
      if (std::none_of(peer.begin(), peer.end(), [](bool p) { return p; })) {
        for (size_t r = 0; r < ranks; ++r) peer[r] = !named[r];
      }
      std::vector<int64_t> reference;
      for (size_t r = 0; r < ranks; ++r) {
        if (peer[r]) reference.push_back(g.steps[r]->compute_ns);
      }
      int64_t median = medianOf(reference);
      for (size_t r = 0; r < ranks; ++r) {
        int64_t compute = g.steps[r]->compute_ns;
        if (named[r] && compute > median && median > 0)
          ideal.compute_scale[r] = static_cast<double>(median) / static_cast<double>(compute);
      }
      break;
    }
    case Kind::kSlowStage:
      for (size_t r = 0; r < ranks; ++r) {
        if (named[r] && cause.factor > 1) ideal.compute_scale[r] = 1 / cause.factor;
      }
      break;
    case Kind::kSlowNic:
      // Every member of an operation that crosses hosts through it moves at the others' median speed.
      for (size_t o = 0; o < g.operations.size(); ++o) {
        const RunGraph::Operation& op = g.operations[o];
        if (!involves(op) || cause.factor <= 1) continue;
        std::set<std::string_view> hosts;
        for (uint32_t r : op.ranks) hosts.insert(run.ranks[r].header.hostname);
        if (hosts.size() > 1) ideal.operation_scale[o] = 1 / cause.factor;
      }
      break;
    case Kind::kExposedCommunication:
      for (size_t o = 0; o < g.operations.size(); ++o) {
        if (involves(g.operations[o])) ideal.operation_scale[o] = 0;
      }
      for (size_t r = 0; r < ranks; ++r) {
        if (named[r]) ideal.communication_scale[r] = 0;
      }
      break;
    case Kind::kHostGaps:
      for (size_t r = 0; r < ranks; ++r) ideal.close_launches[r] = named[r];
      break;
  }
  return ideal;
}

// The step's longest path with the cause at its ideal: the edges it changes re-timed. A chain's compute
// is scaled as one sum (each kernel's, rounded, summed before: docs/analyses.md, "What-if").
int64_t idealLength(RunGraph& g, const IdealStep& ideal) {
  PathPlan& plan = g.plan;
  auto scaled = [](int64_t w, double f) { return static_cast<int64_t>(std::llround(static_cast<double>(w) * f)); };
  for (size_t o = 0; o < g.operations.size(); ++o) {
    if (ideal.operation_scale[o] == 1.0) continue;
    for (uint32_t e : g.operations[o].edges)
      retime(plan, g.scratch, e, scaled(weightOf(plan, e), ideal.operation_scale[o]));
  }
  using Role = RankStepGraph::Role;
  for (size_t r = 0; r < g.steps.size(); ++r) {
    double compute_scale = ideal.compute_scale[r];
    bool close = ideal.close_launches[r];
    if (compute_scale == 1.0 && ideal.communication_scale[r] == 1.0 && !close) continue;
    const std::vector<RankStepGraph::Link>& links = g.steps[r]->links;
    for (uint32_t local = 0; local < links.size(); ++local) {
      const RankStepGraph::Link& link = links[local];
      uint32_t i = g.edge_base[r] + local;
      int64_t w = weightOf(plan, i);
      switch (link.role) {
        case Role::kLaunch:
          if (close) w = 0;
          break;
        case Role::kComputeSpan:
          w = scaled(w, compute_scale);
          break;
        case Role::kCommunicationSpan:
          if (!g.in_operation[i]) w = scaled(w, ideal.communication_scale[r]);
          break;
        case Role::kChain:
          if (close) w -= link.launch_ns;
          if (compute_scale != 1.0) w += scaled(link.compute_ns, compute_scale) - link.compute_ns;
          break;
        case Role::kOther:
          break;
      }
      retime(plan, g.scratch, i, w);
    }
  }
  return retimedLength(plan, g.scratch);
}

// Per step, each finding's saving summed.
struct WhatIfSums {
  std::vector<size_t> findings;  // with a cause
  std::vector<int64_t> saved;
  int64_t steps = 0;
  int64_t step_ns = 0;

  // `step_ns`: the step's time, as step_times counts it (its longest rank's window; the union of the
  // ranks' windows also holds the offsets between the ranks' step boundaries).
  void add(RunGraph& g, const model::RunTrace& run, const std::vector<report::Finding>& all, int64_t length,
           int64_t step) {
    ++steps;
    step_ns += step;
    for (size_t i = 0; i < findings.size(); ++i) {
      int64_t ideal = idealLength(g, idealOf(g, run, all[findings[i]].cause));
      saved[i] += std::max<int64_t>(0, length - ideal);
    }
  }
  void join(const WhatIfSums& other) {
    steps += other.steps;
    step_ns += other.step_ns;
    for (size_t i = 0; i < saved.size(); ++i) saved[i] += other.saved[i];
  }
};

// Communication slices are told by their communicator's role, waits in a pipeline by the stage.
void nameCommunicators(std::vector<PathSlice>& slices, const std::map<uint64_t, CommunicatorInfo>& communicators) {
  for (PathSlice& s : slices) {
    if (s.cause == PathCause::kWait && s.comm_hash != 0) {
      // A wait in a pipeline communicator's send or receive is for the peer's stage: its place there.
      auto it = communicators.find(s.comm_hash);
      if (it == communicators.end() || it->second.role != CommunicatorRole::kPipeline) continue;
      for (const auto& [comm_rank, rank] : it->second.members) {
        if (rank == s.waited_for) s.waited_stage = comm_rank;
      }
      if (s.waited_stage >= 0) s.cause = PathCause::kPipelineWait;
      continue;
    }
    if (s.cause != PathCause::kCommunication) continue;
    auto it = communicators.find(s.comm_hash);
    s.detail = it != communicators.end() ? communicatorRoleName(it->second.role) : "not recorded";
  }
}

// Every rank's part over `windows` (one window a rank), from its events.
std::vector<RankPathPart> partsOver(const model::RunTrace& run, const std::vector<RankTimeIndex>& indexes,
                                    const std::vector<Interval>& windows) {
  std::vector<RankPathPart> parts;
  for (size_t r = 0; r < std::min(run.ranks.size(), windows.size()); ++r)
    parts.push_back(pathPartOf(run.ranks[r], indexes[r], {windows[r]}));
  return parts;
}

std::vector<const RankPathPart*> pointersTo(const std::vector<RankPathPart>& parts) {
  std::vector<const RankPathPart*> out;
  for (const RankPathPart& p : parts) out.push_back(&p);
  return out;
}

}  // namespace

size_t RankStepGraph::bytes() const {
  return sizeof(*this) + times.capacity() * sizeof(times[0]) + port_node.capacity() * sizeof(port_node[0]) +
         links.capacity() * sizeof(links[0]) + parts.capacity() * sizeof(parts[0]) +
         communication.capacity() * sizeof(communication[0]) + kernel_gaps.capacity() * sizeof(kernel_gaps[0]);
}

void RankPathPart::shift(int64_t offset_ns) {
  auto move = [&](int64_t& t) {
    if (t != kNoLaunch) t += offset_ns;
  };
  for (int64_t& t : kernel_start_of_op) move(t);
  for (int64_t& t : kernel_launch_of_op) move(t);
  for (RankStepGraph& step : steps) {
    step.window.start += offset_ns, step.window.end += offset_ns;
    for (int64_t& t : step.times) t += offset_ns;
    for (RankStepGraph::Communication& c : step.communication) c.start_ns += offset_ns, c.end_ns += offset_ns;
  }
}

size_t RankPathPart::bytes() const {
  size_t n = sizeof(*this) + kernel_of_op.capacity() * sizeof(uint32_t) +
             (kernel_start_of_op.capacity() + kernel_launch_of_op.capacity()) * sizeof(int64_t);
  for (const RankStepGraph& step : steps) n += step.bytes();
  return n;
}

RankPathPart criticalPathOfRank(const AnalysisInput& input, size_t r) {
  return pathPartOf(input.run.ranks[r], RankTimeIndex(input.run.ranks[r]), intervalsOf(input.windowsOf(r)));
}

RunStepPath runCriticalPath(const model::RunTrace& run, const CollectiveIndex& matched,
                            const std::vector<Interval>& windows) {
  std::vector<RankTimeIndex> indexes = indexRanks(run);
  std::vector<RankPathPart> parts = partsOver(run, indexes, windows);
  RunGraph graph;
  buildRunGraph(run, pointersTo(parts), 0, matched, graph);
  ChainSlices chains(run);
  RunStepPath path = runPath(run, graph, &chains, nullptr);
  nameCommunicators(path.slices, gatherCommunicators(run));
  return path;
}

int64_t stepSaving(const model::RunTrace& run, const CollectiveIndex& matched, const std::vector<Interval>& windows,
                   const report::FindingCause& cause) {
  std::vector<RankTimeIndex> indexes = indexRanks(run);
  std::vector<RankPathPart> parts = partsOver(run, indexes, windows);
  RunGraph graph;
  buildRunGraph(run, pointersTo(parts), 0, matched, graph);
  int64_t length = longestPathOf(graph.plan, PathEnd::kLatest, &graph.scratch).length;
  return std::max<int64_t>(0, length - idealLength(graph, idealOf(graph, run, cause)));
}

std::vector<PathAttribution> attributionOf(const std::vector<PathSlice>& slices, bool by_rank) {
  // Summed first by where the detail's text lives (the same interned name on a rank), then by text.
  struct Key {
    PathCause cause;
    const char* text;
    size_t size;
    int32_t rank, waited_for, waited_stage;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return std::hash<const void*>()(k.text) ^ (static_cast<size_t>(k.cause) << 1) ^
             (static_cast<size_t>(static_cast<uint32_t>(k.rank)) << 8) ^
             static_cast<size_t>(static_cast<uint32_t>(k.waited_for) << 20) ^
             static_cast<size_t>(static_cast<uint32_t>(k.waited_stage) << 12);
    }
  };
  std::unordered_map<Key, int64_t, KeyHash> by_place;
  for (const PathSlice& s : slices)
    by_place[{s.cause, s.detail.data(), s.detail.size(), by_rank ? s.rank : -1, s.waited_for, s.waited_stage}] +=
        s.end_ns - s.start_ns;
  std::map<std::tuple<PathCause, std::string, int32_t>, int64_t> sums;
  for (const auto& [k, ns] : by_place) {
    std::string detail = k.waited_stage >= 0 ? fmt::format("stage {}", k.waited_stage)
                         : k.waited_for >= 0 ? fmt::format("rank {}", k.waited_for)
                                             : std::string(k.text, k.size);
    sums[{k.cause, std::move(detail), k.rank}] += ns;
  }
  std::vector<PathAttribution> out;
  for (const auto& [key, ns] : sums) out.push_back({std::get<0>(key), std::get<1>(key), std::get<2>(key), ns});
  std::stable_sort(out.begin(), out.end(),
                   [](const PathAttribution& a, const PathAttribution& b) { return a.ns > b.ns; });
  return out;
}

CriticalPathResult computeCriticalPath(const AnalysisInput& input, const std::vector<report::Finding>& findings,
                                       unsigned jobs, bool with_slices) {
  CriticalPathResult result;
  WhatIfSums what_if;
  for (size_t i = 0; i < findings.size(); ++i) {
    if (findings[i].cause.kind != report::FindingCause::Kind::kNone) what_if.findings.push_back(i);
  }
  what_if.saved.assign(what_if.findings.size(), 0);
  const model::RunTrace& run = input.run;
  std::map<uint64_t, CommunicatorInfo> communicators = gatherCommunicators(run);
  // Each rank's part: its digest's (the per-rank phase made it), else made here from its events.
  std::vector<const RankPathPart*> parts(run.ranks.size());
  std::vector<RankPathPart> made;
  bool digested =
      input.digests != nullptr && std::all_of(input.digests->begin(), input.digests->end(),
                                              [](const RankDigest& d) { return d.critical_path.has_value(); });
  if (digested) {
    for (size_t r = 0; r < parts.size(); ++r) parts[r] = &*input.digest(r).critical_path;
  } else {
    made.resize(run.ranks.size());
    onWorkers(made.size(), jobs, [&](size_t r) { made[r] = criticalPathOfRank(input, r); });
    parts = pointersTo(made);
  }
  auto finish = [&]() -> CriticalPathResult {
    for (size_t i = 0; i < what_if.findings.size() && what_if.steps > 0; ++i) {
      const report::Finding& f = findings[what_if.findings[i]];
      result.what_if.push_back({what_if.findings[i], f.cause.kind, f.cause.label, what_if.step_ns / what_if.steps,
                                what_if.saved[i] / what_if.steps});
    }
    std::stable_sort(result.what_if.begin(), result.what_if.end(),
                     [](const WhatIf& a, const WhatIf& b) { return a.saves_ns > b.saves_ns; });
    return std::move(result);
  };
  if (run.ranks.size() == 1) {
    // One rank's path as HTA defines it (its events: a run of one rank keeps them), the what-if on its
    // step graphs.
    const model::RankTrace& rank = run.ranks[0];
    RankTimeIndex index(rank);
    RunGraph graph;  // each window's, in the same buffers
    std::vector<StepWindow> windows = input.windowsOf(0);
    for (size_t k = 0; k < windows.size(); ++k) {
      const StepWindow& w = windows[k];
      if (w.window.length() <= 0) continue;
      RankCriticalPath path = RankGraph(rank, index, w.window).longestPath(PathEnd::kLatest);
      nameCommunicators(path.slices, communicators);
      result.steps.push_back({path.rank, input.hasSteps() ? w.number : -1, w.window, path.length_ns, path.events.size(),
                              attributionOf(path.slices), std::move(path.slices)});
      if (!what_if.findings.empty() && k < parts[0]->steps.size()) {
        buildRunGraph(run, parts, k, input.collectives(), graph);
        what_if.add(graph, run, findings, longestPathOf(graph.plan, PathEnd::kLatest, &graph.scratch).length,
                    w.window.length());
      }
    }
    return finish();
  }
  size_t common_steps = SIZE_MAX;
  for (const RankPathPart* part : parts) common_steps = std::min(common_steps, part->steps.size());
  if (run.ranks.size() < 2 || common_steps == SIZE_MAX) return finish();
  OperationSpans spans(parts, input.collectives());
  // The steps are independent: in runs of consecutive steps on the workers, each run with its own graph's
  // buffers and sums; the runs join in step order, so the result is the same for any number of workers.
  struct StepRun {
    std::vector<CriticalPathResult::RunStep> steps;
    std::vector<std::vector<ChainOnPath>> chains;  // per step, without slices
    std::vector<size_t> step_index;                // per step, its index among the ranks' steps
    WhatIfSums what_if;
  };
  unsigned workers = workerCount(jobs);
  size_t run_count = std::min(common_steps, workers > 1 ? 4 * size_t{workers} : 1);
  std::vector<StepRun> runs(run_count);
  onWorkers(run_count, jobs, [&](size_t k) {
    StepRun& out = runs[k];
    out.what_if.findings = what_if.findings;
    out.what_if.saved.assign(what_if.findings.size(), 0);
    RunGraph step_graph;  // each step's, in the same buffers
    std::optional<ChainSlices> chains;
    if (with_slices) chains.emplace(run);  // the timeline's: each chain on the path from the rank's events
    for (size_t i = common_steps * k / run_count; i < common_steps * (k + 1) / run_count; ++i) {
      int64_t number = -1, longest = 0;
      for (size_t r = 0; r < run.ranks.size(); ++r) {
        longest = std::max(longest, parts[r]->steps[i].window.length());
        if (input.hasSteps() && i < input.steps[r].size()) number = input.steps[r][i].number;
      }
      buildRunGraph(run, parts, i, input.collectives(), step_graph, &spans);
      std::vector<ChainOnPath> on_path;
      RunStepPath path = runPath(run, step_graph, chains ? &*chains : nullptr, &on_path);
      if (path.window.length() <= 0) continue;
      out.what_if.add(step_graph, run, findings, path.length_ns, longest);
      nameCommunicators(path.slices, communicators);
      out.steps.push_back({number, path.window, path.length_ns, path.rank_changes, {}, std::move(path.slices)});
      out.chains.push_back(std::move(on_path));
      out.step_index.push_back(i);
    }
  });
  std::vector<std::vector<ChainOnPath>> chains_of_step;
  std::vector<size_t> step_index;
  for (StepRun& step_run : runs) {
    std::move(step_run.steps.begin(), step_run.steps.end(), std::back_inserter(result.run_steps));
    std::move(step_run.chains.begin(), step_run.chains.end(), std::back_inserter(chains_of_step));
    step_index.insert(step_index.end(), step_run.step_index.begin(), step_run.step_index.end());
    what_if.join(step_run.what_if);
  }
  if (!with_slices) {
    // The chains on the paths, summed from their ranks' events: rank by rank, each read once (again,
    // when the ranks are skeletons), its graph of each step it holds a chain of built once more.
    std::vector<std::vector<std::pair<size_t, ChainOnPath>>> on_rank(run.ranks.size());  // (run step, chain)
    for (size_t s = 0; s < chains_of_step.size(); ++s) {
      for (const ChainOnPath& c : chains_of_step[s]) on_rank[c.rank].emplace_back(s, c);
    }
    std::vector<std::vector<std::pair<size_t, PathPart>>> summed(run.ranks.size());  // (run step, part)
    onWorkers(run.ranks.size(), jobs, [&](size_t r) {
      if (on_rank[r].empty()) return;
      std::optional<model::RankTrace> read;
      if (input.read_events) read = input.read_events(r);
      const model::RankTrace& rank = read ? *read : run.ranks[r];
      RankTimeIndex index(rank);
      RankGraph graph;
      RankGraphScratch scratch;
      std::vector<PathPart> step_parts;
      size_t built = SIZE_MAX;
      for (size_t c = 0; c < on_rank[r].size(); ++c) {
        auto [run_step, chain] = on_rank[r][c];
        const RankStepGraph& step = parts[r]->steps[step_index[run_step]];
        if (built != run_step) {
          graph.build(rank, index, step.window, scratch, true);
          built = run_step;
        }
        const RankStepGraph::Link& link = step.links[chain.link];
        step_parts.clear();
        graph.addChainParts(link.first_edge, step.port_node[link.to], step_parts);
        for (const PathPart& part : step_parts) summed[r].emplace_back(run_step, part);
      }
    });
    std::vector<std::vector<PathSlice>> chain_slices(result.run_steps.size());
    for (size_t r = 0; r < summed.size(); ++r) {
      for (const auto& [run_step, part] : summed[r])
        chain_slices[run_step].push_back(sliceOfPart(run.ranks[r], part, 0, part.ns));
    }
    for (size_t s = 0; s < result.run_steps.size(); ++s) {
      CriticalPathResult::RunStep& step = result.run_steps[s];
      // Without the chains' slices the step's would not cover it: only its attribution is kept.
      chain_slices[s].insert(chain_slices[s].end(), step.slices.begin(), step.slices.end());
      step.attribution = attributionOf(chain_slices[s], true);
      std::vector<PathSlice>().swap(step.slices);
    }
  } else {
    for (CriticalPathResult::RunStep& step : result.run_steps) step.attribution = attributionOf(step.slices, true);
  }
  return finish();
}

namespace {

// Per step, how long the joined path runs on each rank (rank -1 for the time before, between and after
// its events), by cause.
using PathTimeByRank = std::map<int32_t, std::map<PathCause, int64_t>>;
PathTimeByRank pathTimeByRank(const CriticalPathResult& result) {
  PathTimeByRank by_rank;
  for (const CriticalPathResult::RunStep& s : result.run_steps)
    for (const PathAttribution& a : s.attribution) by_rank[a.rank][a.cause] += a.ns;
  for (auto& [rank, by_cause] : by_rank)
    for (auto& [cause, ns] : by_cause) ns /= static_cast<int64_t>(result.run_steps.size());
  return by_rank;
}

// A finding whose fix saves under a tenth of what it costs: where the critical path runs instead, so
// that its cost and its saving do not read as a contradiction. Either the path runs mostly on other
// ranks, or on the finding's own but through other causes than the one its cost measures.
std::optional<std::string> offPathEvidence(const report::Finding& finding, int64_t saves_ns,
                                           const PathTimeByRank& path) {
  if (finding.cost_ns <= 0 || static_cast<double>(saves_ns) >= 0.1 * finding.cost_ns || finding.cause.ranks.empty())
    return std::nullopt;
  auto total = [](const std::map<PathCause, int64_t>& by_cause) {
    int64_t ns = 0;
    for (const auto& [cause, t] : by_cause) ns += t;
    return ns;
  };
  auto isItsRank = [&](int32_t rank) {
    return std::find(finding.cause.ranks.begin(), finding.cause.ranks.end(), rank) != finding.cause.ranks.end();
  };
  int64_t path_ns = 0, busiest_ns = 0, on_its_ranks = 0;
  int32_t busiest = -1;
  std::map<PathCause, int64_t> its_causes;
  for (const auto& [rank, by_cause] : path) {
    int64_t ns = total(by_cause);
    path_ns += ns;
    if (rank >= 0 && ns > busiest_ns) busiest = rank, busiest_ns = ns;
    if (!isItsRank(rank)) continue;
    on_its_ranks += ns;
    for (const auto& [cause, t] : by_cause) its_causes[cause] += t;
  }
  if (busiest < 0 || path_ns <= 0) return std::nullopt;
  auto time = [](int64_t ns) { return report::formatValue(static_cast<double>(ns), Unit::kNanoseconds); };
  std::string whose = finding.cause.ranks.size() == 1 ? fmt::format("rank {}", finding.cause.ranks.front())
                                                       : fmt::format("its {} ranks", finding.cause.ranks.size());
  auto pct = [&](int64_t ns) { return 100.0 * static_cast<double>(ns) / static_cast<double>(path_ns); };
  if (!isItsRank(busiest)) {
    return fmt::format("its {} per step lie mostly off the critical path: of the path's {} per step, {} are on {} "
                       "and {} ({:.0f} %) on rank {}",
                       time(static_cast<int64_t>(finding.cost_ns)), time(path_ns), time(on_its_ranks), whose,
                       time(busiest_ns), pct(busiest_ns), busiest);
  }
  std::vector<std::pair<int64_t, PathCause>> causes;
  for (const auto& [cause, ns] : its_causes) causes.emplace_back(ns, cause);
  std::sort(causes.begin(), causes.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::string mostly;
  for (size_t i = 0; i < std::min<size_t>(2, causes.size()); ++i)
    mostly += fmt::format("{}{} ({})", i == 0 ? "" : " and ", pathCauseName(causes[i].second), time(causes[i].first));
  return fmt::format("the critical path runs on {} ({:.0f} % of its {} per step), mostly in {}", whose,
                     pct(on_its_ranks), time(path_ns), mostly);
}

void presentWhatIf(const CriticalPathResult& result, report::Report& report, report::Section& section) {
  if (result.what_if.empty()) return;
  const PathTimeByRank path_by_rank = pathTimeByRank(result);
  report::Table table{"what_if",
                      "What-if: each finding's cause at its ideal, the steps re-timed",
                      {{"cause", "cause"},
                       {"label", "of"},
                       {"step", "step"},
                       {"predicted", "predicted step"},
                       {"saves", "saves/step"},
                       {"pct", "% of step"}},
                      {}};
  for (const WhatIf& w : result.what_if) {
    double pct = w.step_ns > 0 ? 100.0 * static_cast<double>(w.saves_ns) / static_cast<double>(w.step_ns) : 0.0;
    table.rows.push_back({Cell::of(std::string(findingCauseName(w.kind))), Cell::of(w.label),
                          Cell::of(static_cast<double>(w.step_ns), Unit::kNanoseconds),
                          Cell::of(static_cast<double>(w.step_ns - w.saves_ns), Unit::kNanoseconds),
                          Cell::of(static_cast<double>(w.saves_ns), Unit::kNanoseconds),
                          Cell::of(pct, Unit::kPercent)});
    if (w.finding >= report.findings.size()) continue;
    report::Finding& finding = report.findings[w.finding];
    // A slow stage's neighbours wait in gaps the graph cannot re-time yet (docs/analyses.md,
    // "What-if"): a saving of nothing there is not a finding.
    if (w.kind == report::FindingCause::Kind::kSlowStage && w.saves_ns <= 0) {
      finding.summary += "; what fixing it would save is not known (its neighbours' waits are not re-timed)";
      continue;
    }
    finding.saves_ns = static_cast<double>(w.saves_ns);
    finding.summary += fmt::format("; fixing {} would save about {} per step ({:.0f} %)", w.label,
                                   report::formatValue(static_cast<double>(w.saves_ns), Unit::kNanoseconds), pct);
    if (auto off_path = offPathEvidence(finding, w.saves_ns, path_by_rank)) finding.evidence.push_back(*off_path);
  }
  section.tables.push_back(std::move(table));
}

}  // namespace

std::string pathSliceLabel(const PathSlice& slice) {
  switch (slice.cause) {
    case PathCause::kCompute:
      return fmt::format("compute: {}", kernelClassOf(slice.detail));
    case PathCause::kCommunication:
      return slice.detail == "not recorded" ? std::string("exposed comm: communicator not recorded")
                                            : fmt::format("exposed comm: {}-parallel", slice.detail);
    case PathCause::kWait:
      return slice.waited_for >= 0 ? fmt::format("wait: rank {}", slice.waited_for) : std::string("wait");
    case PathCause::kPipelineWait:
      return fmt::format("pipeline wait: stage {}", slice.waited_stage);
    case PathCause::kLaunch:
      return "host-bound launch";
    default:
      return slice.detail.empty() ? std::string(pathCauseName(slice.cause))
                                  : fmt::format("{}: {}", pathCauseName(slice.cause), slice.detail);
  }
}

namespace {

report::TimelinePath timelinePathOf(int64_t step, const std::vector<PathSlice>& slices) {
  report::TimelinePath path{step, {}};
  path.stretches.reserve(slices.size());
  for (const PathSlice& s : slices)
    path.stretches.push_back({"critical_path", s.rank, s.start_ns, s.end_ns, pathSliceLabel(s)});
  return path;
}

}  // namespace

void presentCriticalPath(const CriticalPathResult& result, size_t top_rows, report::Report& report) {
  for (const CriticalPathResult::RunStep& s : result.run_steps) {
    if (!s.slices.empty()) report.critical_paths.push_back(timelinePathOf(s.step, s.slices));
  }
  if (result.run_steps.empty()) {
    for (const StepCriticalPath& s : result.steps) report.critical_paths.push_back(timelinePathOf(s.step, s.slices));
  }
  auto& section = report.addSection("critical_path", "Critical path");
  report.addResult("critical_path", [&] { return resultValue(result); });
  section.notes.push_back(
      "The longest path through the step's dependency graph (host ops, launches, kernels in stream order, "
      "synchronizations; across ranks, collectives joined and receives tied to their sends), every nanosecond of "
      "the step attributed to one cause along it.");
  if (result.steps.empty() && result.run_steps.empty()) {
    section.notes.push_back("No steps with events: no critical path.");
    return;
  }
  std::vector<PathSlice> slices;
  int64_t all = 0;
  std::string title;
  if (!result.run_steps.empty()) {
    for (const CriticalPathResult::RunStep& s : result.run_steps) {
      all += s.window.length();
      for (const PathAttribution& a : s.attribution) slices.push_back({0, a.ns, a.cause, a.detail, a.rank, 0});
    }
    title = fmt::format("Across ranks, {} step(s)", result.run_steps.size());
  } else {
    int32_t rank = result.steps.front().rank;
    for (const StepCriticalPath& s : result.steps) {
      if (s.rank != rank) continue;
      all += s.window.length();
      for (const PathAttribution& a : s.attribution) slices.push_back({0, a.ns, a.cause, a.detail, rank, 0});
    }
    title = fmt::format("Rank {}, all its steps", rank);
  }
  std::vector<PathAttribution> total = attributionOf(slices, true);
  report::Table table{
      "attribution",
      fmt::format("{} ({} rows of {})", title, std::min(top_rows, total.size()), total.size()),
      {{"cause", "cause"}, {"detail", "detail"}, {"rank", "rank"}, {"time", "time"}, {"pct", "% of steps"}},
      {}};
  for (size_t i = 0; i < total.size() && i < top_rows; ++i) {
    table.rows.push_back({Cell::of(std::string(pathCauseName(total[i].cause))),
                          Cell::of(total[i].detail.empty() ? std::string("-") : total[i].detail),
                          Cell::of(static_cast<double>(total[i].rank), Unit::kNone),
                          Cell::of(static_cast<double>(total[i].ns), Unit::kNanoseconds),
                          Cell::of(all > 0 ? 100.0 * static_cast<double>(total[i].ns) / static_cast<double>(all) : 0.0,
                                   Unit::kPercent)});
  }
  section.tables.push_back(std::move(table));
  // The same time by cause alone: compute by kernel class, communication by role, waits by the rank
  // waited for, the rest by cause.
  std::map<std::pair<std::string, std::string>, int64_t> by_cause;
  for (const PathAttribution& a : total) {
    std::string detail =
        a.cause == PathCause::kCompute ? kernelClassOf(a.detail)
        : a.cause == PathCause::kCommunication || a.cause == PathCause::kWait || a.cause == PathCause::kPipelineWait
            ? a.detail
            : std::string();
    by_cause[{pathCauseName(a.cause), detail}] += a.ns;
  }
  std::vector<std::pair<std::pair<std::string, std::string>, int64_t>> causes(by_cause.begin(), by_cause.end());
  std::stable_sort(causes.begin(), causes.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  report::Table by_cause_table{"by_cause",
                               fmt::format("{}, by cause (compute by kernel class)", title),
                               {{"cause", "cause"}, {"detail", "of"}, {"time", "time"}, {"pct", "% of steps"}},
                               {}};
  for (const auto& [key, ns] : causes) {
    by_cause_table.rows.push_back(
        {Cell::of(key.first), Cell::of(key.second.empty() ? std::string("-") : key.second),
         Cell::of(static_cast<double>(ns), Unit::kNanoseconds),
         Cell::of(all > 0 ? 100.0 * static_cast<double>(ns) / static_cast<double>(all) : 0.0, Unit::kPercent)});
  }
  section.tables.push_back(std::move(by_cause_table));
  presentWhatIf(result, report, section);
}

void analyzeCriticalPath(const AnalysisInput& input, report::Report& report, unsigned jobs) {
  // The slices are drawn on the timeline only.
  presentCriticalPath(computeCriticalPath(input, report.findings, jobs, report.keep_marks), input.options.top, report);
}

}  // namespace gpuxray::analysis
