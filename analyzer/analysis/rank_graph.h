// One rank's dependency graph of one step as the critical path builds it (critical_path.*,
// docs/analyses.md "Critical path"): Holistic Trace Analysis's graph of one rank (host ops and runtime
// calls in call-stack order, kernels in stream order, launch and kernel-to-kernel delays, stream and
// device synchronization), with gpuxray's rules across ranks when asked; its reduction to the ports
// and chains the path across ranks needs (RankStepGraph, the per-rank phase); and the cutter that cuts
// a window into slices along a path. critical_path.cc is its one user.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "analyzer/analysis/critical_path.h"
#include "analyzer/analysis/longest_path.h"
#include "analyzer/model/run_trace.h"

namespace gpuxray::analysis::path_graph {

using model::ActivityKind;

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
inline std::string_view detailOf(const model::RankTrace& rank, const PathPart& part) {
  return part.name_id != 0 ? rank.name(part.name_id) : std::string_view(part.constant);
}
inline PathSlice sliceOfPart(const model::RankTrace& rank, const PathPart& part, int64_t start, int64_t end) {
  PathSlice s{start, end, part.cause, detailOf(rank, part), rank.rank};
  s.comm_hash = part.comm_hash;
  return s;
}

// Appended field by field in place: a record built aside and copied whole is read back by wider loads than
// the stores that built it, which stall (store forwarding fails), once for each of the step's events and edges.
inline void appendEvent(std::vector<GraphEvent>& events, PathEventSource source, uint32_t index, int64_t start,
                        int64_t end, bool host) {
  GraphEvent& e = events.emplace_back();
  e.ref.source = source;
  e.ref.index = index;
  e.start_ns = start;
  e.end_ns = end;
  e.host = host;
}
inline void appendEdge(std::vector<Edge>& edges, uint32_t from, uint32_t to, int64_t weight, EdgeKind kind) {
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
inline bool blocksOnGpu(std::string_view call) {
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
      if (rank.name(rank.nvtx[i].domain_id) == model::kCpuOpDomain)
        ranges_by_start.emplace_back(rank.nvtx[i].start_ns, i);
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
  std::vector<std::pair<int64_t, uint64_t>> comm_by_start;                  // NCCL operations' GPU start, communicator
};

// What building a rank's graph needs only while it builds (one for all of a rank's steps, so that its
// memory stays warm from one step to the next).
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
  // The kind of GPU work whose span an edge is, if it is one.
  std::optional<ActivityKind> spanActivity(const Edge& edge) const {
    if (edge.kind != EdgeKind::kSpan || edge.from % 2 != 0 || edge.to != edge.from + 1) return std::nullopt;
    const GraphEvent& e = events_[edge.from / 2];
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
  // Appends an edge; for reduce(), counts its nodes' links as planOf does (countLink) and notes where it
  // runs back in time or out of the window.
  void pushEdge(uint32_t from, uint32_t to, int64_t from_ns, int64_t to_ns, int64_t weight, EdgeKind kind) {
    auto i = static_cast<uint32_t>(own_edges_.size());
    appendEdge(own_edges_, from, to, weight, kind);
    if (!counting_) return;
    countLink(node_links_[from], from_ns, from, node_links_[to], to_ns, to);
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

// The part of `rank` over `windows`: each window's graph built and reduced.
RankPathPart pathPartOf(const model::RankTrace& rank, const RankTimeIndex& index, const std::vector<Interval>& windows);

}  // namespace gpuxray::analysis::path_graph
