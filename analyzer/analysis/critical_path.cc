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

class RankGraph {
 public:
  RankGraph(const model::RankTrace& rank, Interval window) : rank_(rank), window_(window) {
    collectEvents();
    addCallStackEdges();
    addGpuEdges();
  }

  RankCriticalPath longestPath(PathEnd end_rule) const;

 private:
  uint32_t startNode(uint32_t event) const { return 2 * event; }
  uint32_t endNode(uint32_t event) const { return 2 * event + 1; }
  int64_t timeOf(uint32_t node) const {
    const GraphEvent& e = events_[node / 2];
    return node % 2 == 0 ? e.start_ns : e.end_ns;
  }
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
  PathSlice sliceOf(const Edge& edge) const;

  const model::RankTrace& rank_;
  Interval window_;
  std::vector<GraphEvent> events_;
  std::vector<uint64_t> threads_;                      // per host event: its OS thread
  std::unordered_map<uint32_t, uint32_t> call_event_;  // host call index -> event
  std::vector<Edge> edges_;
  std::unordered_map<int64_t, uint64_t> comm_by_start_;  // NCCL operations' GPU start -> communicator
};

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
  for (uint32_t i = 0; i < rank_.host_calls.size(); ++i) {
    const model::HostCall& c = rank_.host_calls[i];
    if (!inWindow(c.start_ns, c.end_ns)) continue;
    call_event_.emplace(i, static_cast<uint32_t>(events_.size()));
    addHost(PathEventSource::kHostCall, i, c.start_ns, c.end_ns,
            c.thread < rank_.threads.size() ? rank_.threads[c.thread] : 0);
  }
  for (uint32_t i = 0; i < rank_.activities.size(); ++i) {
    const model::GpuActivity& a = rank_.activities[i];
    if (!model::isGpuWork(a.kind) || a.correlation_id == 0) continue;
    const model::HostCall* call = rank_.launchOf(a.correlation_id);
    if (call == nullptr || !call_event_.contains(static_cast<uint32_t>(call - rank_.host_calls.data()))) continue;
    events_.push_back({{PathEventSource::kActivity, i}, a.start_ns, std::max(a.start_ns, a.end_ns), -1, false});
  }
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
  for (const model::GpuActivity& a : rank_.activities) {
    if (a.kind != ActivityKind::kSync || rank_.name(a.name_id) != "Stream Sync" || a.correlation_id == 0) continue;
    const model::HostCall* call = rank_.launchOf(a.correlation_id);
    if (call == nullptr) continue;
    auto it = call_event_.find(static_cast<uint32_t>(call - rank_.host_calls.data()));
    if (it != call_event_.end()) items.push_back({a.end_ns, it->second, a.stream, true});
  }
  std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.sort_ns < b.sort_ns; });

  // HTA's queue length per stream: +1 at each launch call, -1 as each kernel starts.
  std::map<int32_t, std::vector<std::tuple<int64_t, int, uint32_t>>> queue_changes;
  std::unordered_map<uint32_t, uint32_t> launch_event;  // GPU event -> its launch call's event
  for (const Item& item : items) {
    if (item.sync) continue;
    const model::GpuActivity& a = rank_.activities[events_[item.event].ref.index];
    const model::HostCall* call = rank_.launchOf(a.correlation_id);
    uint32_t call_event = call_event_.at(static_cast<uint32_t>(call - rank_.host_calls.data()));
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
  PathSlice s{timeOf(edge.from), timeOf(edge.to), PathCause::kOther, ""};
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
        s.detail = it != comm_by_start_.end() ? fmt::format("{:#x}", it->second) : "";
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

RankCriticalPath RankGraph::longestPath(PathEnd end_rule) const {
  RankCriticalPath out;
  out.rank = rank_.rank;
  out.window = window_;
  size_t nodes = 2 * events_.size();
  std::vector<std::vector<uint32_t>> incoming(nodes), outgoing(nodes);
  for (uint32_t i = 0; i < edges_.size(); ++i) {
    incoming[edges_[i].to].push_back(i);
    outgoing[edges_[i].from].push_back(i);
  }
  // Kahn's order, taking the earliest node first (HTA numbers its nodes by time).
  std::vector<uint32_t> pending(nodes);
  using Ready = std::tuple<int64_t, uint32_t>;
  std::priority_queue<Ready, std::vector<Ready>, std::greater<>> ready;
  for (uint32_t n = 0; n < nodes; ++n) {
    pending[n] = static_cast<uint32_t>(incoming[n].size());
    if (pending[n] == 0) ready.emplace(timeOf(n), n);
  }
  std::vector<int64_t> distance(nodes, 0);
  std::vector<int64_t> via(nodes, -1);  // the edge the longest path arrives by
  std::vector<uint32_t> order;
  order.reserve(nodes);
  while (!ready.empty()) {
    uint32_t n = std::get<1>(ready.top());
    ready.pop();
    order.push_back(n);
    for (uint32_t i : incoming[n]) {
      int64_t d = distance[edges_[i].from] + edges_[i].weight;
      if (via[n] < 0 || d > distance[n]) {
        distance[n] = d;
        via[n] = i;
      }
    }
    for (uint32_t i : outgoing[n]) {
      if (--pending[edges_[i].to] == 0) ready.emplace(timeOf(edges_[i].to), edges_[i].to);
    }
  }
  if (order.empty()) {
    out.slices.push_back({window_.start, window_.end, PathCause::kOther, "no events"});
    return out;
  }
  uint32_t end = order.front();
  for (uint32_t n : order) {
    if (distance[n] > distance[end] || (end_rule == PathEnd::kLatest && distance[n] == distance[end])) end = n;
  }
  out.length_ns = distance[end];
  std::vector<uint32_t> path_edges;
  uint32_t first = end;
  while (via[first] >= 0) {
    path_edges.push_back(static_cast<uint32_t>(via[first]));
    first = edges_[static_cast<size_t>(via[first])].from;
  }
  std::reverse(path_edges.begin(), path_edges.end());
  out.nodes = path_edges.size() + 1;

  std::vector<bool> seen(events_.size(), false);
  auto note = [&](uint32_t node) {
    if (!seen[node / 2]) out.events.push_back(events_[node / 2].ref);
    seen[node / 2] = true;
  };
  note(first);
  int64_t cursor = window_.start;
  auto cover = [&](PathSlice s) {
    s.start_ns = std::max(s.start_ns, cursor);
    s.end_ns = std::min(std::max(s.end_ns, cursor), window_.end);
    if (s.end_ns <= s.start_ns) return;
    if (!out.slices.empty() && out.slices.back().cause == s.cause && out.slices.back().detail == s.detail &&
        out.slices.back().end_ns == s.start_ns) {
      out.slices.back().end_ns = s.end_ns;
    } else {
      out.slices.push_back(std::move(s));
    }
    cursor = out.slices.back().end_ns;
  };
  cover({window_.start, timeOf(first), PathCause::kOther, "before the path"});
  for (uint32_t i : path_edges) {
    note(edges_[i].to);
    cover(sliceOf(edges_[i]));
  }
  cover({cursor, window_.end, PathCause::kOther, "after the path"});
  return out;
}

ResultValue resultValue(const CriticalPathResult& result) {
  ResultValue steps = ResultValue::array();
  for (const StepCriticalPath& s : result.steps) {
    ResultValue rows = ResultValue::array();
    for (const PathAttribution& a : s.attribution) {
      rows.push(ResultValue::object()
                    .set("cause", ResultValue::text(pathCauseName(a.cause)))
                    .set("detail", a.detail.empty() ? ResultValue() : ResultValue::text(a.detail))
                    .set("ns", ResultValue::integer(a.ns)));
    }
    steps.push(ResultValue::object()
                   .set("rank", ResultValue::integer(s.rank))
                   .set("step", s.step >= 0 ? ResultValue::integer(s.step) : ResultValue())
                   .set("start_ns", ResultValue::integer(s.window.start))
                   .set("end_ns", ResultValue::integer(s.window.end))
                   .set("step_ns", ResultValue::integer(s.window.length()))
                   .set("path_weight_ns", ResultValue::integer(s.length_ns))
                   .set("events_on_path", ResultValue::integer(static_cast<int64_t>(s.events_on_path)))
                   .set("attribution", std::move(rows)));
  }
  return ResultValue::object().set("steps", std::move(steps));
}

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
    case PathCause::kOther: return "other";
  }
  return "other";
}

RankCriticalPath rankCriticalPath(const model::RankTrace& rank, Interval window, PathEnd end) {
  return RankGraph(rank, window).longestPath(end);
}

std::vector<PathAttribution> attributionOf(const std::vector<PathSlice>& slices) {
  std::map<std::pair<PathCause, std::string>, int64_t> sums;
  for (const PathSlice& s : slices) sums[{s.cause, s.detail}] += s.end_ns - s.start_ns;
  std::vector<PathAttribution> out;
  for (const auto& [key, ns] : sums) out.push_back({key.first, key.second, ns});
  std::stable_sort(out.begin(), out.end(), [](const PathAttribution& a, const PathAttribution& b) { return a.ns > b.ns; });
  return out;
}

CriticalPathResult computeCriticalPath(const AnalysisInput& input) {
  CriticalPathResult result;
  std::map<uint64_t, CommunicatorInfo> communicators = gatherCommunicators(input.run);
  for (size_t r = 0; r < input.run.ranks.size(); ++r) {
    for (const StepWindow& w : input.windowsOf(r)) {
      if (w.window.length() <= 0) continue;
      RankCriticalPath path = rankCriticalPath(input.run.ranks[r], w.window);
      for (PathSlice& s : path.slices) {
        if (s.cause != PathCause::kCommunication) continue;
        auto it = std::find_if(communicators.begin(), communicators.end(),
                               [&](const auto& c) { return fmt::format("{:#x}", c.first) == s.detail; });
        s.detail = it != communicators.end() ? communicatorRoleName(it->second.role) : "not recorded";
      }
      result.steps.push_back({path.rank, input.hasSteps() ? w.number : -1, w.window, path.length_ns,
                              path.events.size(), attributionOf(path.slices)});
    }
  }
  return result;
}

void presentCriticalPath(const CriticalPathResult& result, size_t top_rows, report::Report& report) {
  auto& section = report.addSection("critical_path", "Critical path");
  report.results.emplace_back("critical_path", resultValue(result));
  section.notes.push_back(
      "Each rank's longest path through its dependency graph (host ops, launches, kernels in stream order, "
      "synchronizations), every nanosecond of the step attributed to one cause along it.");
  if (result.steps.empty()) {
    section.notes.push_back("No steps with events: no critical path.");
    return;
  }
  // The rank whose windows are longest, summed over its steps: the one the job waits for.
  std::map<int32_t, int64_t> time_per_rank;
  for (const StepCriticalPath& s : result.steps) time_per_rank[s.rank] += s.window.length();
  int32_t slowest = time_per_rank.begin()->first;
  for (const auto& [rank, ns] : time_per_rank) {
    if (ns > time_per_rank[slowest]) slowest = rank;
  }
  std::vector<PathSlice> slices;
  for (const StepCriticalPath& s : result.steps) {
    if (s.rank != slowest) continue;
    for (const PathAttribution& a : s.attribution) slices.push_back({0, a.ns, a.cause, a.detail});
  }
  std::vector<PathAttribution> total = attributionOf(slices);
  double all = static_cast<double>(time_per_rank[slowest]);
  report::Table table{"attribution",
                      fmt::format("Rank {}, all its steps ({} rows of {})", slowest, std::min(top_rows, total.size()),
                                  total.size()),
                      {{"cause", "cause"}, {"detail", "detail"}, {"time", "time"}, {"pct", "% of steps"}},
                      {}};
  for (size_t i = 0; i < total.size() && i < top_rows; ++i) {
    table.rows.push_back({Cell::of(std::string(pathCauseName(total[i].cause))),
                          Cell::of(total[i].detail.empty() ? std::string("-") : total[i].detail),
                          Cell::of(static_cast<double>(total[i].ns), Unit::kNanoseconds),
                          Cell::of(all > 0 ? 100.0 * static_cast<double>(total[i].ns) / all : 0.0, Unit::kPercent)});
  }
  section.tables.push_back(std::move(table));
}

void analyzeCriticalPath(const AnalysisInput& input, report::Report& report) {
  presentCriticalPath(computeCriticalPath(input), input.options.top, report);
}

}  // namespace gpuxray::analysis
