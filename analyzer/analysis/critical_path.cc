// The critical path of each rank's steps, built as Holistic Trace Analysis builds its graph of one
// rank (hta/analyzers/critical_path_analysis.py): two nodes per event (its start and its end), edges
// that carry time (an event's span, a launch delay, a kernel-to-kernel gap) or only order (between
// top-level host ops, a synchronization), and the longest path through them. Where gpuxray's rules
// differ from HTA's, docs/analyses.md says which and why.

#include "analyzer/analysis/critical_path.h"

#include <fmt/core.h>

#include <algorithm>
#include <map>
#include <queue>
#include <tuple>
#include <unordered_map>

#include "analyzer/analysis/analyses.h"
#include "analyzer/analysis/communicators.h"

namespace gpuxray::analysis {
namespace {

using model::ActivityKind;
using report::Cell;
using report::ResultValue;
using report::Unit;

// HTA's KERNEL_KERNEL_DELAY_THRESHOLD_US: a longer gap between two kernels of a stream is taken as a
// dependency the trace does not show, not as a delay.
constexpr int64_t kKernelGapLimitNs = 1'500'000;

enum class EdgeKind : uint8_t { kSpan, kDependency, kLaunch, kKernelGap, kSync };

struct GraphEvent {
  PathEvent ref;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int32_t parent = -1;  // the host event it is nested in
  bool host = false;
};

struct Edge {
  uint32_t from = 0;
  uint32_t to = 0;
  int64_t weight = 0;
  EdgeKind kind = EdgeKind::kSpan;
};

// Runtime calls during which the CPU only waits for the GPU: HTA gives their end no weight, so the
// wait is found through the GPU. cudaMemcpyAsync, which HTA also lists, keeps its weight there
// (it takes CUDA's runtime lock, whose edges HTA builds separately with the call's duration).
bool blocksOnGpu(std::string_view call) {
  return call == "cudaDeviceSynchronize" || call == "cudaStreamSynchronize" || call == "cudaEventQuery" ||
         call == "cudaEventSynchronize" || call == "cudaMemcpy";
}

// Per rank, built once for all its windows: its host calls by start, and its GPU work and stream
// synchronizations by their call's start, so that a window's events are two binary searches away.
struct RankTimeIndex {
  explicit RankTimeIndex(const model::RankTrace& rank) {
    calls_by_start.resize(rank.host_calls.size());
    for (uint32_t i = 0; i < calls_by_start.size(); ++i) calls_by_start[i] = i;
    std::sort(calls_by_start.begin(), calls_by_start.end(), [&](uint32_t a, uint32_t b) {
      return std::pair(rank.host_calls[a].start_ns, a) < std::pair(rank.host_calls[b].start_ns, b);
    });
    for (uint32_t i = 0; i < rank.activities.size(); ++i) {
      const model::GpuActivity& a = rank.activities[i];
      bool stream_sync = a.kind == ActivityKind::kSync && rank.name(a.name_id) == "Stream Sync";
      if ((!model::isGpuWork(a.kind) && !stream_sync) || a.correlation_id == 0) continue;
      const model::HostCall* call = rank.launchOf(a.correlation_id);
      if (call != nullptr) work_by_launch.push_back({call->start_ns, i, static_cast<uint32_t>(call - rank.host_calls.data())});
    }
    std::sort(work_by_launch.begin(), work_by_launch.end(),
              [](const Work& a, const Work& b) { return std::pair(a.call_start_ns, a.activity) < std::pair(b.call_start_ns, b.activity); });
  }
  struct Work {
    int64_t call_start_ns;
    uint32_t activity;
    uint32_t call;
  };
  std::vector<uint32_t> calls_by_start;
  std::vector<Work> work_by_launch;
};

class RankGraph {
 public:
  RankGraph(const model::RankTrace& rank, const RankTimeIndex& index, Interval window)
      : rank_(rank), index_(index), window_(window) {
    collectEvents();
    addCallStackEdges();
    addGpuEdges();
  }

  RankCriticalPath longestPath(PathEnd end_rule) const;

  uint32_t nodeCount() const { return static_cast<uint32_t>(2 * events_.size()); }
  const std::vector<Edge>& edges() const { return edges_; }
  uint32_t startNode(uint32_t event) const { return 2 * event; }
  uint32_t endNode(uint32_t event) const { return 2 * event + 1; }
  int64_t timeOf(uint32_t node) const {
    const GraphEvent& e = events_[node / 2];
    return node % 2 == 0 ? e.start_ns : e.end_ns;
  }
  // The events of communication kernels, by start time.
  std::vector<std::pair<int64_t, uint32_t>> communicationEvents() const;
  // The edge of an event's own span (GPU work only), or -1.
  int64_t spanEdge(uint32_t event) const {
    auto it = span_edge_.find(event);
    return it != span_edge_.end() ? static_cast<int64_t>(it->second) : -1;
  }
  PathSlice sliceOf(const Edge& edge) const;
  int32_t rank() const { return rank_.rank; }

 private:
  void addEdge(uint32_t from, uint32_t to, EdgeKind kind, bool zero_weight = false) {
    int64_t weight = 0;
    if (!zero_weight && kind != EdgeKind::kDependency && kind != EdgeKind::kSync)
      weight = std::max<int64_t>(0, timeOf(to) - timeOf(from));
    edges_.push_back({from, to, weight, kind});
  }
  bool inWindow(int64_t start, int64_t end) const {
    return start >= window_.start && start <= window_.end && end > start;
  }
  std::string_view callName(uint32_t host_call) const {
    uint16_t f = rank_.host_calls[host_call].function;
    return f < rank_.api_functions.size() ? rank_.name(rank_.api_functions[f]) : std::string_view();
  }

  void collectEvents();
  void addCallStackEdges();
  void addGpuEdges();

  const model::RankTrace& rank_;
  const RankTimeIndex& index_;
  Interval window_;
  std::vector<GraphEvent> events_;
  std::vector<uint64_t> threads_;                      // per host event: its OS thread
  std::unordered_map<uint32_t, uint32_t> call_event_;  // host call index -> event
  std::unordered_map<uint32_t, uint32_t> launch_call_;  // activity index -> its launch call's index
  std::vector<Edge> edges_;
  std::unordered_map<int64_t, uint64_t> comm_by_start_;  // NCCL operations' GPU start -> communicator
  std::unordered_map<uint32_t, uint32_t> span_edge_;     // GPU event -> its span edge
  std::vector<std::pair<uint32_t, uint32_t>> stream_syncs_;  // (Stream Sync activity, its call's event)
};

std::vector<std::pair<int64_t, uint32_t>> RankGraph::communicationEvents() const {
  std::vector<std::pair<int64_t, uint32_t>> out;
  for (uint32_t e = 0; e < events_.size(); ++e) {
    if (!events_[e].host && rank_.activities[events_[e].ref.index].kind == ActivityKind::kCommunication)
      out.emplace_back(events_[e].start_ns, e);
  }
  std::sort(out.begin(), out.end());
  return out;
}

void RankGraph::collectEvents() {
  auto addHost = [&](PathEventSource source, uint32_t index, int64_t start, int64_t end, uint64_t thread) {
    events_.push_back({{source, index}, start, end, -1, true});
    threads_.push_back(thread);
  };
  for (uint32_t i = 0; i < rank_.host_ops.size(); ++i) {
    const model::HostOp& op = rank_.host_ops[i];
    if (inWindow(op.start_ns, op.end_ns)) addHost(PathEventSource::kHostOp, i, op.start_ns, op.end_ns, op.thread_id);
  }
  for (uint32_t i = 0; i < rank_.nvtx.size(); ++i) {
    const model::NvtxRange& r = rank_.nvtx[i];
    if (rank_.name(r.domain_id) == model::kCpuOpDomain && inWindow(r.start_ns, r.end_ns))
      addHost(PathEventSource::kStepRange, i, r.start_ns, r.end_ns, r.thread_id);
  }
  // Calls in correlation order and work in start order, as the whole rank's lists have them.
  std::vector<uint32_t> calls;
  auto first_call = std::lower_bound(index_.calls_by_start.begin(), index_.calls_by_start.end(), window_.start,
                                     [&](uint32_t c, int64_t t) { return rank_.host_calls[c].start_ns < t; });
  for (auto it = first_call; it != index_.calls_by_start.end() && rank_.host_calls[*it].start_ns <= window_.end; ++it) {
    const model::HostCall& c = rank_.host_calls[*it];
    if (inWindow(c.start_ns, c.end_ns)) calls.push_back(*it);
  }
  std::sort(calls.begin(), calls.end());
  for (uint32_t i : calls) {
    const model::HostCall& c = rank_.host_calls[i];
    call_event_.emplace(i, static_cast<uint32_t>(events_.size()));
    addHost(PathEventSource::kHostCall, i, c.start_ns, c.end_ns,
            c.thread < rank_.threads.size() ? rank_.threads[c.thread] : 0);
  }
  std::vector<uint32_t> work;
  auto first_work = std::lower_bound(index_.work_by_launch.begin(), index_.work_by_launch.end(), window_.start,
                                     [](const RankTimeIndex::Work& w, int64_t t) { return w.call_start_ns < t; });
  for (auto it = first_work; it != index_.work_by_launch.end() && it->call_start_ns <= window_.end; ++it) {
    if (!call_event_.contains(it->call)) continue;
    launch_call_.emplace(it->activity, it->call);
    if (model::isGpuWork(rank_.activities[it->activity].kind)) {
      work.push_back(it->activity);
    } else {
      stream_syncs_.emplace_back(it->activity, call_event_.at(it->call));
    }
  }
  std::sort(work.begin(), work.end());
  for (uint32_t i : work) {
    const model::GpuActivity& a = rank_.activities[i];
    events_.push_back({{PathEventSource::kActivity, i}, a.start_ns, std::max(a.start_ns, a.end_ns), -1, false});
  }
  std::sort(stream_syncs_.begin(), stream_syncs_.end());
  for (const model::NcclOp& op : rank_.nccl_ops) {
    if (op.hasGpuTimes()) comm_by_start_.emplace(op.gpu_start_ns, op.comm_hash);
  }
}

// Per CPU thread, events nested as their times say; consecutive top-level events are ordered
// without weight, nested ones with the time between them.
void RankGraph::addCallStackEdges() {
  std::vector<uint32_t> host;
  for (uint32_t e = 0; e < events_.size(); ++e) {
    if (events_[e].host) host.push_back(e);
  }
  std::stable_sort(host.begin(), host.end(), [&](uint32_t a, uint32_t b) {
    return std::tuple(threads_[a], events_[a].start_ns, -events_[a].end_ns) <
           std::tuple(threads_[b], events_[b].start_ns, -events_[b].end_ns);
  });
  size_t i = 0;
  while (i < host.size()) {
    uint64_t thread = threads_[host[i]];
    std::vector<uint32_t> stack;
    int64_t last = -1;
    auto exitTop = [&] {
      uint32_t e = stack.back();
      stack.pop_back();
      const GraphEvent& ev = events_[e];
      bool zero = ev.ref.source == PathEventSource::kHostCall && blocksOnGpu(callName(ev.ref.index));
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
void RankGraph::addGpuEdges() {
  struct Item {
    int64_t sort_ns;
    uint32_t event;  // GPU work; or the host call's event for a synchronization
    int32_t stream;  // -1: the whole device
    bool sync;
  };
  std::vector<Item> items;
  for (uint32_t e = 0; e < events_.size(); ++e) {
    const GraphEvent& ev = events_[e];
    if (!ev.host) {
      items.push_back({ev.start_ns, e, rank_.activities[ev.ref.index].stream, false});
    } else if (ev.ref.source == PathEventSource::kHostCall && callName(ev.ref.index) == "cudaDeviceSynchronize") {
      items.push_back({ev.end_ns, e, -1, true});
    }
  }
  for (const auto& [activity, call_event] : stream_syncs_) {
    const model::GpuActivity& a = rank_.activities[activity];
    items.push_back({a.end_ns, call_event, a.stream, true});
  }
  std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.sort_ns < b.sort_ns; });

  // HTA's queue length per stream: +1 at each launch call, -1 as each kernel starts.
  std::map<int32_t, std::vector<std::tuple<int64_t, int, uint32_t>>> queue_changes;
  std::unordered_map<uint32_t, uint32_t> launch_event;  // GPU event -> its launch call's event
  for (const Item& item : items) {
    if (item.sync) continue;
    const model::GpuActivity& a = rank_.activities[events_[item.event].ref.index];
    uint32_t call_event = call_event_.at(launch_call_.at(events_[item.event].ref.index));
    launch_event.emplace(item.event, call_event);
    queue_changes[item.stream].emplace_back(events_[call_event].start_ns, 0, item.event);
    queue_changes[item.stream].emplace_back(a.start_ns, 1, item.event);
  }
  std::unordered_map<uint32_t, std::pair<int, int>> queue_at;  // event -> (after its launch, after its start)
  for (auto& [stream, changes] : queue_changes) {
    std::stable_sort(changes.begin(), changes.end());
    int length = 0;
    for (const auto& [ts, is_start, event] : changes) {
      length += is_start ? -1 : 1;
      (is_start ? queue_at[event].second : queue_at[event].first) = length;
    }
  }

  std::map<int32_t, uint32_t> last_on_stream;  // stream -> its last kernel's end node
  for (const Item& item : items) {
    if (item.sync) {
      for (const auto& [stream, node] : last_on_stream) {
        if (item.stream < 0 || stream == item.stream) addEdge(node, endNode(item.event), EdgeKind::kSync);
      }
      continue;
    }
    uint32_t e = item.event;
    span_edge_.emplace(e, static_cast<uint32_t>(edges_.size()));
    addEdge(startNode(e), endNode(e), EdgeKind::kSpan);
    uint32_t call = launch_event.at(e);
    auto last = last_on_stream.find(item.stream);
    auto [after_launch, after_start] = queue_at[e];
    if (after_launch == 1 && after_start == 0 &&
        (last == last_on_stream.end() || timeOf(last->second) < events_[call].start_ns)) {
      addEdge(startNode(call), startNode(e), EdgeKind::kLaunch);
    } else if (last != last_on_stream.end() && events_[e].start_ns - timeOf(last->second) < kKernelGapLimitNs) {
      addEdge(last->second, startNode(e), EdgeKind::kKernelGap);
    }
    last_on_stream[item.stream] = endNode(e);
  }
}

// What an edge on the path was spent on. A host edge belongs to the event it lies in: its source's
// when that is a start, its destination's when that is an end, else the parent of both.
PathSlice RankGraph::sliceOf(const Edge& edge) const {
  PathSlice s{timeOf(edge.from), timeOf(edge.to), PathCause::kOther, "", rank_.rank};
  switch (edge.kind) {
    case EdgeKind::kDependency: s.detail = "between top-level host ops"; return s;
    case EdgeKind::kLaunch: s.cause = PathCause::kLaunch; return s;
    case EdgeKind::kKernelGap: s.cause = PathCause::kKernelGap; return s;
    case EdgeKind::kSync: s.cause = PathCause::kSynchronization; return s;
    case EdgeKind::kSpan: break;
  }
  int64_t owner = events_[edge.from / 2].parent;
  if (edge.from % 2 == 0) {
    owner = edge.from / 2;
  } else if (edge.to % 2 == 1) {
    owner = edge.to / 2;
  }
  if (owner < 0) return s;
  const GraphEvent& ev = events_[static_cast<size_t>(owner)];
  switch (ev.ref.source) {
    case PathEventSource::kActivity: {
      const model::GpuActivity& a = rank_.activities[ev.ref.index];
      if (a.kind == ActivityKind::kCommunication) {
        s.cause = PathCause::kCommunication;
        auto it = comm_by_start_.find(a.start_ns);
        if (it != comm_by_start_.end()) s.comm_hash = it->second;
      } else if (a.kind == ActivityKind::kMemcpy || a.kind == ActivityKind::kMemset) {
        s.cause = PathCause::kMemcpy;
        s.detail = a.kind == ActivityKind::kMemcpy ? "copy" : "memset";
      } else {
        s.cause = PathCause::kCompute;
        s.detail = rank_.name(a.name_id);
      }
      return s;
    }
    case PathEventSource::kHostCall: {
      std::string_view name = callName(ev.ref.index);
      s.cause = blocksOnGpu(name) ? PathCause::kSynchronization : PathCause::kHost;
      s.detail = name;
      return s;
    }
    case PathEventSource::kHostOp:
    case PathEventSource::kStepRange: s.cause = PathCause::kHost; s.detail = "cpu op"; return s;
  }
  return s;
}

// The longest path through a graph of nodes with times: Kahn's order taking the earliest node first
// (HTA numbers its nodes by time), each node reached by its heaviest incoming edge (the first such).
struct LongestPath {
  std::vector<uint32_t> edges;  // in path order
  uint32_t first = 0;           // its first node
  int64_t length = 0;
  bool empty = true;
};

LongestPath findLongestPath(const std::vector<int64_t>& times, const std::vector<Edge>& edges, PathEnd end_rule) {
  size_t nodes = times.size();
  std::vector<uint32_t> first_in(nodes + 1, 0), first_out(nodes + 1, 0);
  for (const Edge& e : edges) ++first_in[e.to + 1], ++first_out[e.from + 1];
  for (size_t n = 0; n < nodes; ++n) first_in[n + 1] += first_in[n], first_out[n + 1] += first_out[n];
  std::vector<uint32_t> incoming(edges.size()), outgoing(edges.size());
  {
    std::vector<uint32_t> in_fill(first_in.begin(), first_in.end() - 1), out_fill(first_out.begin(), first_out.end() - 1);
    for (uint32_t i = 0; i < edges.size(); ++i) {
      incoming[in_fill[edges[i].to]++] = i;
      outgoing[out_fill[edges[i].from]++] = i;
    }
  }
  std::vector<uint32_t> pending(nodes);
  using Ready = std::tuple<int64_t, uint32_t>;
  std::priority_queue<Ready, std::vector<Ready>, std::greater<>> ready;
  for (uint32_t n = 0; n < nodes; ++n) {
    pending[n] = first_in[n + 1] - first_in[n];
    if (pending[n] == 0) ready.emplace(times[n], n);
  }
  std::vector<int64_t> distance(nodes, 0);
  std::vector<int64_t> via(nodes, -1);  // the edge the longest path arrives by
  LongestPath out;
  uint32_t end = 0;
  while (!ready.empty()) {
    uint32_t n = std::get<1>(ready.top());
    ready.pop();
    for (uint32_t k = first_in[n]; k < first_in[n + 1]; ++k) {
      const Edge& e = edges[incoming[k]];
      int64_t d = distance[e.from] + e.weight;
      if (via[n] < 0 || d > distance[n]) {
        distance[n] = d;
        via[n] = incoming[k];
      }
    }
    if (out.empty || distance[n] > distance[end] || (end_rule == PathEnd::kLatest && distance[n] == distance[end])) end = n;
    out.empty = false;
    for (uint32_t k = first_out[n]; k < first_out[n + 1]; ++k) {
      uint32_t to = edges[outgoing[k]].to;
      if (--pending[to] == 0) ready.emplace(times[to], to);
    }
  }
  if (out.empty) return out;
  out.length = distance[end];
  out.first = end;
  while (via[out.first] >= 0) {
    out.edges.push_back(static_cast<uint32_t>(via[out.first]));
    out.first = edges[static_cast<size_t>(via[out.first])].from;
  }
  std::reverse(out.edges.begin(), out.edges.end());
  return out;
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
    if (!out_.empty() && out_.back().cause == s.cause && out_.back().detail == s.detail &&
        out_.back().rank == s.rank && out_.back().comm_hash == s.comm_hash &&
        out_.back().waited_for == s.waited_for && out_.back().end_ns == s.start_ns) {
      out_.back().end_ns = s.end_ns;
    } else {
      out_.push_back(std::move(s));
    }
    cursor_ = out_.back().end_ns;
  }
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
  out.rank = rank_.rank;
  out.window = window_;
  std::vector<int64_t> times(nodeCount());
  for (uint32_t n = 0; n < times.size(); ++n) times[n] = timeOf(n);
  LongestPath path = findLongestPath(times, edges_, end_rule);
  if (path.empty) {
    out.slices.push_back({window_.start, window_.end, PathCause::kOther, "no events", rank_.rank, 0});
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
  cutter.cover({window_.start, timeOf(path.first), PathCause::kOther, "before the path", rank_.rank, 0});
  for (uint32_t i : path.edges) {
    note(edges_[i].to);
    cutter.cover(sliceOf(edges_[i]));
  }
  cutter.finish(rank_.rank);
  return out;
}

ResultValue attributionValue(const std::vector<PathAttribution>& attribution, bool with_rank) {
  ResultValue rows = ResultValue::array();
  for (const PathAttribution& a : attribution) {
    ResultValue row = ResultValue::object()
                          .set("cause", ResultValue::text(pathCauseName(a.cause)))
                          .set("detail", a.detail.empty() ? ResultValue() : ResultValue::text(a.detail));
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
  return ResultValue::object().set("steps", std::move(steps)).set("run_steps", std::move(run_steps));
}

// A member of a join: the rank's graph and the event of its communication kernel.
struct JoinMember {
  uint32_t rank = 0;
  uint32_t event = 0;
};

}  // namespace

const char* pathCauseName(PathCause cause) {
  switch (cause) {
    case PathCause::kCompute: return "compute";
    case PathCause::kCommunication: return "communication";
    case PathCause::kMemcpy: return "memory copy";
    case PathCause::kHost: return "host";
    case PathCause::kLaunch: return "launch delay";
    case PathCause::kSynchronization: return "synchronization";
    case PathCause::kKernelGap: return "kernel gap";
    case PathCause::kWait: return "wait";
    case PathCause::kOther: return "other";
  }
  return "other";
}

RankCriticalPath rankCriticalPath(const model::RankTrace& rank, Interval window, PathEnd end) {
  return RankGraph(rank, RankTimeIndex(rank), window).longestPath(end);
}

namespace {

RunStepPath runPath(const model::RunTrace& run, const std::vector<RankTimeIndex>& indexes,
                    const CollectiveIndex& matched, const std::vector<Interval>& windows) {
  RunStepPath out;
  std::vector<RankGraph> graphs;
  std::vector<uint32_t> offset, edge_base;
  std::vector<int64_t> times;
  std::vector<Edge> edges;
  std::vector<std::pair<int32_t, uint32_t>> origin;  // per edge: (rank index, its local edge); -1: a join
  out.window = windows.empty() ? Interval{} : windows.front();
  for (size_t r = 0; r < run.ranks.size() && r < windows.size(); ++r) {
    graphs.emplace_back(run.ranks[r], indexes[r], windows[r]);
    out.window.start = std::min(out.window.start, windows[r].start);
    out.window.end = std::max(out.window.end, windows[r].end);
  }
  for (uint32_t r = 0; r < graphs.size(); ++r) {
    offset.push_back(static_cast<uint32_t>(times.size()));
    edge_base.push_back(static_cast<uint32_t>(edges.size()));
    for (uint32_t n = 0; n < graphs[r].nodeCount(); ++n) times.push_back(graphs[r].timeOf(n));
    for (uint32_t i = 0; i < graphs[r].edges().size(); ++i) {
      Edge e = graphs[r].edges()[i];
      e.from += offset[r];
      e.to += offset[r];
      edges.push_back(e);
      origin.emplace_back(static_cast<int32_t>(r), i);
    }
  }
  // Each NCCL operation's kernel: the first communication kernel that starts within the operation's GPU
  // span.
  std::vector<std::vector<std::pair<int64_t, uint32_t>>> kernels;
  for (const RankGraph& g : graphs) kernels.push_back(g.communicationEvents());
  auto kernelOf = [&](MemberOp m) -> std::optional<JoinMember> {
    if (m.rank_index >= graphs.size()) return std::nullopt;
    const model::NcclOp& op = opOf(run, m);
    const auto& list = kernels[m.rank_index];
    auto it = std::lower_bound(list.begin(), list.end(), std::pair<int64_t, uint32_t>{op.gpu_start_ns, 0});
    if (it == list.end() || it->first > op.gpu_end_ns) return std::nullopt;
    return JoinMember{m.rank_index, it->second};
  };
  std::vector<std::tuple<uint32_t, uint32_t, int32_t>> waits;  // (rank, event, the rank waited for)
  // The members that started before the last one wait for it: their span carries only the time after
  // it started, and the last one's start leads to their end.
  auto join = [&](const std::vector<JoinMember>& members, const std::vector<JoinMember>& waiters) {
    if (members.empty()) return;
    const JoinMember* last = &members.front();
    for (const JoinMember& m : members) {
      if (graphs[m.rank].timeOf(graphs[m.rank].startNode(m.event)) >
          graphs[last->rank].timeOf(graphs[last->rank].startNode(last->event)))
        last = &m;
    }
    uint32_t last_start = offset[last->rank] + graphs[last->rank].startNode(last->event);
    for (const JoinMember& w : waiters) {
      if (w.rank == last->rank) continue;
      uint32_t end = offset[w.rank] + graphs[w.rank].endNode(w.event);
      int64_t span = graphs[w.rank].spanEdge(w.event);
      if (times[last_start] <= times[end - 1] || span < 0) continue;  // it started last itself
      edges[edge_base[w.rank] + static_cast<size_t>(span)].weight = std::max<int64_t>(0, times[end] - times[last_start]);
      edges.push_back({last_start, end, std::max<int64_t>(0, times[end] - times[last_start]), EdgeKind::kSpan});
      origin.emplace_back(-1, static_cast<uint32_t>(span));
      waits.emplace_back(w.rank, w.event, graphs[last->rank].rank());
    }
  };
  for (const MatchedCollective& c : matched.collectives) {
    std::vector<JoinMember> members;
    for (MemberOp m : matched.membersOf(c)) {
      if (auto k = kernelOf(m)) members.push_back(*k);
    }
    if (members.size() >= 2) join(members, members);
  }
  for (const P2pPair& p : matched.p2p) {
    auto send = kernelOf(p.send);
    auto recv = kernelOf(p.recv);
    if (send && recv) join({*send, *recv}, {*recv});
  }
  std::map<std::pair<uint32_t, uint32_t>, int32_t> waited_for;
  for (const auto& [rank, event, on] : waits) waited_for[{rank, event}] = on;

  LongestPath path = findLongestPath(times, edges, PathEnd::kLatest);
  SliceCutter cutter(out.window, out.slices);
  if (path.empty) {
    cutter.finish(-1);
    return out;
  }
  out.length_ns = path.length;
  auto rankOfNode = [&](uint32_t node) {
    return static_cast<uint32_t>(std::upper_bound(offset.begin(), offset.end(), node) - offset.begin() - 1);
  };
  uint32_t first_rank = rankOfNode(path.first);
  cutter.cover({out.window.start, times[path.first], PathCause::kOther, "before the path", graphs[first_rank].rank(), 0});
  int32_t previous_rank = graphs[first_rank].rank();
  for (uint32_t i : path.edges) {
    const Edge& e = edges[i];
    uint32_t r = rankOfNode(e.to);
    const RankGraph& g = graphs[r];
    auto [from_rank, local] = origin[i];
    PathSlice s;
    if (from_rank < 0) {  // a join: the span of the waiting kernel after the last member started
      s = g.sliceOf(g.edges()[local]);
      s.start_ns = times[e.from];
    } else {
      s = g.sliceOf(g.edges()[local]);
      auto w = waited_for.find({r, (e.from - offset[r]) / 2});
      if (e.from % 2 == 0 && e.to == e.from + 1 && w != waited_for.end()) {
        // The kernel's own start led here although it waited: its wait is the other rank's doing.
        int64_t waited_until = times[e.to] - e.weight;
        cutter.cover({times[e.from], waited_until, PathCause::kWait, "", g.rank(), 0, w->second});
      }
    }
    if (g.rank() != previous_rank) ++out.rank_changes;
    previous_rank = g.rank();
    cutter.cover(std::move(s));
  }
  cutter.finish(previous_rank);
  return out;
}

}  // namespace

RunStepPath runCriticalPath(const model::RunTrace& run, const CollectiveIndex& matched,
                            const std::vector<Interval>& windows) {
  std::vector<RankTimeIndex> indexes;
  for (const model::RankTrace& rank : run.ranks) indexes.emplace_back(rank);
  return runPath(run, indexes, matched, windows);
}

std::vector<PathAttribution> attributionOf(const std::vector<PathSlice>& slices, bool by_rank) {
  // Summed first by where the detail's text lives (the same interned name on a rank), then by text.
  struct Key {
    PathCause cause;
    const char* text;
    size_t size;
    int32_t rank, waited_for;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return std::hash<const void*>()(k.text) ^ (static_cast<size_t>(k.cause) << 1) ^
             (static_cast<size_t>(static_cast<uint32_t>(k.rank)) << 8) ^ static_cast<size_t>(static_cast<uint32_t>(k.waited_for) << 20);
    }
  };
  std::unordered_map<Key, int64_t, KeyHash> by_place;
  for (const PathSlice& s : slices)
    by_place[{s.cause, s.detail.data(), s.detail.size(), by_rank ? s.rank : -1, s.waited_for}] += s.end_ns - s.start_ns;
  std::map<std::tuple<PathCause, std::string, int32_t>, int64_t> sums;
  for (const auto& [k, ns] : by_place) {
    std::string detail = k.waited_for >= 0 ? fmt::format("rank {}", k.waited_for) : std::string(k.text, k.size);
    sums[{k.cause, std::move(detail), k.rank}] += ns;
  }
  std::vector<PathAttribution> out;
  for (const auto& [key, ns] : sums) out.push_back({std::get<0>(key), std::get<1>(key), std::get<2>(key), ns});
  std::stable_sort(out.begin(), out.end(), [](const PathAttribution& a, const PathAttribution& b) { return a.ns > b.ns; });
  return out;
}

namespace {

// Communication slices are told by their communicator's role.
void nameCommunicators(std::vector<PathSlice>& slices, const std::map<uint64_t, CommunicatorInfo>& communicators) {
  for (PathSlice& s : slices) {
    if (s.cause != PathCause::kCommunication) continue;
    auto it = communicators.find(s.comm_hash);
    s.detail = it != communicators.end() ? communicatorRoleName(it->second.role) : "not recorded";
  }
}

}  // namespace

CriticalPathResult computeCriticalPath(const AnalysisInput& input) {
  CriticalPathResult result;
  std::map<uint64_t, CommunicatorInfo> communicators = gatherCommunicators(input.run);
  size_t common_steps = SIZE_MAX;
  std::vector<RankTimeIndex> indexes;
  for (const model::RankTrace& rank : input.run.ranks) indexes.emplace_back(rank);
  // One rank's path as HTA defines it for single-rank runs; across ranks, the joined path (building
  // every rank's graph once more for its own path would double the cost).
  bool single = input.run.ranks.size() == 1;
  std::vector<std::vector<StepWindow>> rank_windows;
  for (size_t r = 0; r < input.run.ranks.size(); ++r) {
    rank_windows.push_back(input.windowsOf(r));
    common_steps = std::min(common_steps, rank_windows.back().size());
    for (const StepWindow& w : rank_windows.back()) {
      if (!single) break;
      if (w.window.length() <= 0) continue;
      RankCriticalPath path = RankGraph(input.run.ranks[r], indexes[r], w.window).longestPath(PathEnd::kLatest);
      nameCommunicators(path.slices, communicators);
      result.steps.push_back({path.rank, input.hasSteps() ? w.number : -1, w.window, path.length_ns,
                              path.events.size(), attributionOf(path.slices)});
    }
  }
  if (input.run.ranks.size() < 2 || common_steps == SIZE_MAX) return result;
  for (size_t i = 0; i < common_steps; ++i) {
    std::vector<Interval> windows;
    int64_t number = -1;
    for (size_t r = 0; r < input.run.ranks.size(); ++r) {
      const StepWindow& w = rank_windows[r][i];
      windows.push_back(w.window);
      if (input.hasSteps()) number = w.number;
    }
    RunStepPath path = runPath(input.run, indexes, input.collectives(), windows);
    if (path.window.length() <= 0) continue;
    nameCommunicators(path.slices, communicators);
    result.run_steps.push_back(
        {number, path.window, path.length_ns, path.rank_changes, attributionOf(path.slices, true)});
  }
  return result;
}

void presentCriticalPath(const CriticalPathResult& result, size_t top_rows, report::Report& report) {
  auto& section = report.addSection("critical_path", "Critical path");
  report.results.emplace_back("critical_path", resultValue(result));
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
  report::Table table{"attribution",
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
}

void analyzeCriticalPath(const AnalysisInput& input, report::Report& report) {
  presentCriticalPath(computeCriticalPath(input), input.options.top, report);
}

}  // namespace gpuxray::analysis
