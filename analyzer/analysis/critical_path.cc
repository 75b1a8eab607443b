// The critical path of each rank's steps on the graph Holistic Trace Analysis builds of one rank
// (hta/analyzers/critical_path_analysis.py; rank_graph.* builds it), and across ranks on the ranks'
// step graphs reduced in the per-rank phase, joined where NCCL says one rank waits for another: the
// longest path, the window cut into slices along it, the attribution and the what-if. Where gpuxray's
// rules differ from HTA's, docs/analyses.md says which and why.

#include "analyzer/analysis/critical_path.h"

#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "analyzer/analysis/analyses.h"
#include "analyzer/analysis/communicators.h"
#include "analyzer/analysis/longest_path.h"
#include "analyzer/analysis/rank_digest.h"
#include "analyzer/analysis/rank_graph.h"
#include "analyzer/workers.h"

namespace gpuxray::analysis {
namespace {

using model::ActivityKind;
using path_graph::appendEdge;
using path_graph::RankGraph;
using path_graph::RankGraphScratch;
using path_graph::RankTimeIndex;
using path_graph::SliceCutter;
using path_graph::sliceOfPart;
using report::Cell;
using report::ResultValue;
using report::Unit;

// Every rank's index, the ranks on `jobs` workers.
std::vector<RankTimeIndex> indexRanks(const model::RunTrace& run, unsigned jobs = 1) {
  std::vector<RankTimeIndex> indexes(run.ranks.size());
  onWorkers(indexes.size(), jobs, [&](size_t r) { indexes[r] = RankTimeIndex(run.ranks[r]); });
  return indexes;
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

// A rank's graph of one step built once more from its events, to give back the chains on the path:
// its index made on first use, the graph kept while the step stays the same.
class RebuiltGraph {
 public:
  const RankGraph& of(const model::RankTrace& rank, const RankStepGraph& step) {
    if (!index_) index_.emplace(rank);
    if (step_ != &step) {
      graph_.build(rank, *index_, step.window, scratch_, true);
      step_ = &step;
    }
    return graph_;
  }

 private:
  std::optional<RankTimeIndex> index_;
  const RankStepGraph* step_ = nullptr;
  RankGraph graph_;
  RankGraphScratch scratch_;
};

// Gives back the slices of a rank's chain on the path from its events (the timeline's): only the ranks
// the paths cross are indexed.
class ChainSlices {
 public:
  explicit ChainSlices(const model::RunTrace& run) : run_(run) {}
  void cover(const RunGraph& g, uint32_t rank_index, const RankStepGraph::Link& link, SliceCutter& cutter) {
    const RankStepGraph& step = *g.steps[rank_index];
    const RankGraph& graph = rebuilt_[rank_index].of(run_.ranks[rank_index], step);
    graph.forChain(link.first_edge, step.port_node[link.to],
                   [&](const Edge& edge) { cutter.cover(graph.sliceOf(edge)); });
  }

 private:
  const model::RunTrace& run_;
  std::map<uint32_t, RebuiltGraph> rebuilt_;
};

// A chain of a rank's step graph on the path.
struct ChainOnPath {
  uint32_t rank = 0;  // rank index
  uint32_t link = 0;  // its link in the rank's step graph
};

// The step's path: its slices in time order when `chains` gives the chains' back, else the slices of
// the edges that are links of their own and, in `chains_on_path`, the chains on the path, whose slices
// no clipping reaches (RankGraph::reduce), to be summed from the rank's events.
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
      RebuiltGraph rebuilt;
      std::vector<PathPart> step_parts;
      for (const auto& [run_step, chain] : on_rank[r]) {
        const RankStepGraph& step = parts[r]->steps[step_index[run_step]];
        const RankStepGraph::Link& link = step.links[chain.link];
        step_parts.clear();
        rebuilt.of(rank, step).addChainParts(link.first_edge, step.port_node[link.to], step_parts);
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
