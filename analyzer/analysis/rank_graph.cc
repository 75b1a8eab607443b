#include "analyzer/analysis/rank_graph.h"

#include <cstring>
#include <numeric>
#include <span>
#include <tuple>

namespace gpuxray::analysis::path_graph {
namespace {

// HTA's KERNEL_KERNEL_DELAY_THRESHOLD_US: a longer gap between two kernels of a stream is taken as a
// dependency the trace does not show, not as a delay.
constexpr int64_t kKernelGapLimitNs = 1'500'000;

void appendItem(std::vector<RankGraphScratch::Item>& items, int64_t sort_ns, uint32_t event, int32_t stream,
                bool sync) {
  RankGraphScratch::Item& item = items.emplace_back();
  item.sort_ns = sort_ns;
  item.event = event;
  item.stream = stream;
  item.sync = sync;
}

LongestPath findLongestPath(const std::vector<int64_t>& times, const std::vector<Edge>& edges, PathEnd end_rule) {
  PathPlan plan;
  planOf(times, edges, plan);
  return longestPathOf(plan, end_rule);
}

}  // namespace

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
  // A chain's link takes one of its edges: the weight, and apart what a what-if changes.
  auto extend = [](RankStepGraph::Link& link, const Edge& edge, bool compute) {
    link.weight += edge.weight;
    if (edge.kind == EdgeKind::kLaunch) link.launch_ns += edge.weight;
    if (compute) link.compute_ns += edge.weight;
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
    extend(link, edge, compute);
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
        extend(link, edge, compute_span[e] != 0);
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

}  // namespace gpuxray::analysis::path_graph
