// Pipeline bubbles: the stages of each pipeline, found from the point-to-point traffic of pipeline
// communicators, and per stage and step the time its compute sits idle, split by cause (warm-up,
// cool-down, waiting on the upstream or downstream stage, host-bound launches, the data-parallel
// and optimizer tail), beside the theoretical bubble (p-1)/(m+p-1) of GPipe and 1F1B
// (definitions: docs/analyses.md).

#include "analyzer/analysis/pipeline_bubbles.h"

#include <fmt/core.h>

#include <algorithm>
#include <map>
#include <set>
#include <string_view>

#include "analyzer/analysis/analyses.h"
#include "analyzer/analysis/communicators.h"
#include "analyzer/analysis/rank_digest.h"
#include "analyzer/analysis/statistics.h"
#include "analyzer/report/units.h"

namespace gpuxray::analysis {
namespace {

using report::Cell;
using report::Unit;

// A pipeline send or receive of one rank, with the global rank of its peer.
struct PeerOp {
  Interval span;  // GPU times, or [enqueue, enqueue] without them
  bool has_gpu_times = false;
  bool send = false;
  int32_t peer = -1;
};

// One stage's view of one step.
struct StageStep {
  int64_t number = 0;
  Interval window;
  size_t first_op = 0, end_op = 0;  // its operations in the stage's op list
  int64_t micro_batches = 0;
  bool interleaved = false;           // a forward after the first backward: 1F1B
  int64_t last_pipeline_compute = 0;  // end of the compute that finishes its part of the pipeline
};

struct Stage {
  size_t rank_index = 0;
  std::vector<PipelineOp> ops;  // by GPU start
  int64_t longest_op = 0;
  std::vector<StageStep> steps;
};

double theoreticalPct(size_t p, int64_t m) {
  if (p < 2 || m < 1) return 0.0;
  return 100.0 * static_cast<double>(p - 1) / static_cast<double>(static_cast<int64_t>(p) - 1 + m);
}

// Numbers in the order given (a pipeline's chain, stages): a rank set is report::formatRanks.
std::string joinInOrder(const std::vector<int32_t>& ranks, const char* separator) {
  std::string text;
  for (size_t i = 0; i < ranks.size(); ++i) text += (i > 0 ? separator : "") + std::to_string(ranks[i]);
  return text;
}

// The pipeline sends and receives of each rank, with peers as global ranks.
std::vector<std::vector<PeerOp>> pipelineOps(const model::RunTrace& run,
                                             const std::map<uint64_t, CommunicatorInfo>& communicators) {
  // A communicator on which a rank talks to more than two peers carries all-to-all traffic
  // (expert parallelism), not a pipeline.
  std::set<uint64_t> all_to_all;
  for (const model::RankTrace& rank : run.ranks) {
    std::map<uint64_t, std::set<int32_t>> peers;
    for (const model::NcclOp& op : rank.nccl_ops) {
      if (op.kind == format::NcclOperationKind::kSend || op.kind == format::NcclOperationKind::kRecv) {
        auto& set = peers[op.comm_hash];
        if (set.size() <= 2) set.insert(op.peer);
      }
    }
    for (const auto& [hash, set] : peers) {
      if (set.size() > 2) all_to_all.insert(hash);
    }
  }
  std::vector<std::vector<PeerOp>> per_rank(run.ranks.size());
  for (size_t r = 0; r < run.ranks.size(); ++r) {
    const model::RankTrace& rank = run.ranks[r];
    const CommunicatorInfo* comm = nullptr;
    for (const model::NcclOp& op : rank.nccl_ops) {
      if (op.kind != format::NcclOperationKind::kSend && op.kind != format::NcclOperationKind::kRecv) continue;
      if (comm == nullptr || comm->comm_hash != op.comm_hash) {
        auto it = communicators.find(op.comm_hash);
        comm = it == communicators.end() ? nullptr : &it->second;
      }
      if (comm == nullptr || comm->role != CommunicatorRole::kPipeline || all_to_all.contains(op.comm_hash)) continue;
      auto peer = comm->members.find(op.peer);
      if (peer == comm->members.end() || peer->second == rank.rank) continue;
      PeerOp p;
      p.has_gpu_times = op.hasGpuTimes();
      p.span = p.has_gpu_times ? Interval{op.gpu_start_ns, op.gpu_end_ns} : Interval{op.enqueue_ns, op.enqueue_ns};
      p.send = op.kind == format::NcclOperationKind::kSend;
      p.peer = peer->second;
      per_rank[r].push_back(p);
    }
  }
  return per_rank;
}

// Which way activations flow between each pair of neighbours: the first operation between two
// ranks in a step carries a forward activation (no gradient can come back before one went out).
// Each rank votes once per step and peer; the result maps a sender to the ranks it feeds forward.
std::map<int32_t, std::set<int32_t>> forwardEdges(const AnalysisInput& input,
                                                  const std::vector<std::vector<PeerOp>>& ops) {
  std::map<std::pair<int32_t, int32_t>, int64_t> votes;  // (low, high): > 0 when low feeds high
  for (size_t r = 0; r < ops.size(); ++r) {
    int32_t self = input.run.ranks[r].rank;
    std::vector<StepWindow> windows = input.windowsOf(r);
    std::set<std::pair<size_t, int32_t>> voted;
    for (const PeerOp& op : ops[r]) {
      auto w = std::upper_bound(windows.begin(), windows.end(), op.span.start,
                                [](int64_t t, const StepWindow& s) { return t < s.window.start; });
      if (w == windows.begin() || op.span.start >= std::prev(w)->window.end) continue;
      if (!voted.insert({static_cast<size_t>(w - windows.begin()), op.peer}).second) continue;
      int32_t from = op.send ? self : op.peer, to = op.send ? op.peer : self;
      votes[{std::min(from, to), std::max(from, to)}] += from < to ? 1 : -1;
    }
  }
  std::map<int32_t, std::set<int32_t>> edges;
  for (const auto& [pair, vote] : votes) {
    if (vote > 0) edges[pair.first].insert(pair.second);
    if (vote < 0) edges[pair.second].insert(pair.first);
  }
  return edges;
}

// Orders the ranks into chains, stage 0 first. A rank feeding several ranks, or fed by several,
// or a cycle (interleaved schedules send from the last stage back to the first) is not a plain
// pipeline: `problem` says which.
std::vector<std::vector<int32_t>> chainsOf(const std::map<int32_t, std::set<int32_t>>& edges, std::string& problem) {
  std::map<int32_t, int32_t> next, previous;
  for (const auto& [from, targets] : edges) {
    if (targets.size() > 1) {
      problem = fmt::format("rank {} sends activations to several ranks ({})", from,
                            report::formatRanks(std::vector<int32_t>(targets.begin(), targets.end())));
      return {};
    }
    int32_t to = *targets.begin();
    if (previous.contains(to)) {
      problem = fmt::format("rank {} receives activations from ranks {} and {}", to, previous[to], from);
      return {};
    }
    next[from] = to;
    previous[to] = from;
  }
  std::vector<std::vector<int32_t>> chains;
  size_t placed = 0;
  for (const auto& [from, to] : next) {
    if (previous.contains(from)) continue;
    std::vector<int32_t> chain{from};
    for (auto it = next.find(from); it != next.end(); it = next.find(it->second)) chain.push_back(it->second);
    placed += chain.size() - 1;
    chains.push_back(std::move(chain));
  }
  if (placed < next.size()) {
    problem = "the point-to-point traffic forms a cycle (an interleaved schedule?), which is not analysed";
    return {};
  }
  return chains;
}

// The compute interval that ends the stage's part of the pipeline in a step: after its last
// operation when that is a receive (stage 0's last backward follows the last gradient), before it
// when that is a send (a later stage sends its last gradient right after computing it).
int64_t lastPipelineCompute(const IntervalSet& compute, const PipelineOp& last, Interval window) {
  if (!last.send) {
    auto it = std::lower_bound(compute.begin(), compute.end(), last.span.end,
                               [](const Interval& i, int64_t t) { return i.end <= t; });
    if (it != compute.end() && it->start < window.end) return std::min(it->end, window.end);
  } else {
    auto it = std::lower_bound(compute.begin(), compute.end(), last.span.start,
                               [](const Interval& i, int64_t t) { return i.start < t; });
    if (it != compute.begin() && std::prev(it)->end > window.start) return std::min(std::prev(it)->end, window.end);
  }
  return std::min(last.span.end, window.end);
}

// Micro-batches a stage saw in a step: forward receives from upstream (forward sends on stage 0);
// operations of one direction that start together are one NCCL group and count once.
void describeStep(const Stage& stage, StageStep& step, bool first_stage) {
  int64_t last_counted = INT64_MIN;
  int64_t first_backward = INT64_MAX;
  for (size_t i = step.first_op; i < step.end_op; ++i) {
    const PipelineOp& op = stage.ops[i];
    if (!op.forward()) {
      first_backward = std::min(first_backward, op.span.start);
      continue;
    }
    if (op.span.start > first_backward) step.interleaved = true;
    bool defines_micro_batch = first_stage ? op.send : !op.send;
    if (defines_micro_batch && op.span.start != last_counted) {
      ++step.micro_batches;
      last_counted = op.span.start;
    }
  }
}

// "forward#3" -> (forward, micro-batch 4); nothing for other names.
std::optional<std::pair<bool, int64_t>> passOfRange(std::string_view name) {
  for (auto [prefix, forward] :
       {std::pair{std::string_view("forward#"), true}, {std::string_view("backward#"), false}}) {
    if (!name.starts_with(prefix) || name.size() == prefix.size() || name.size() > prefix.size() + 9) continue;
    int64_t number = 0;
    for (char c : name.substr(prefix.size())) {
      if (c < '0' || c > '9') return std::nullopt;
      number = number * 10 + (c - '0');
    }
    return std::pair{forward, number + 1};
  }
  return std::nullopt;
}

// The GPU span of the compute in `within`: its first compute's start to its last's end (clipped).
std::optional<Interval> computeSpanWithin(const IntervalSet& compute, Interval within) {
  auto first = std::lower_bound(compute.begin(), compute.end(), within.start,
                                [](const Interval& i, int64_t t) { return i.end <= t; });
  if (first == compute.end() || first->start >= within.end) return std::nullopt;
  auto last =
      std::lower_bound(first, compute.end(), within.end, [](const Interval& i, int64_t t) { return i.start < t; });
  return Interval{std::max(first->start, within.start), std::min(std::prev(last)->end, within.end)};
}

bool insideCompute(const IntervalSet& compute, int64_t t) {
  auto it =
      std::lower_bound(compute.begin(), compute.end(), t, [](const Interval& i, int64_t v) { return i.end <= v; });
  return it != compute.end() && it->start < t;
}

// Without ranges: the compute between boundaries (a send's start; a receive's end that found the
// stage idle, waiting for it), each box named by the pass it ends with: the send's, else the last
// one received. The k-th forward (backward) operation of a kind carries micro-batch k.
std::vector<PipelineComputeBlock> blocksBetweenOperations(const std::vector<PipelineOp>& ops,
                                                          const IntervalSet& compute, Interval window, int64_t end) {
  struct Boundary {
    int64_t time;
    bool send, forward, splits;
    int64_t micro_batch;
  };
  std::vector<Boundary> boundaries;
  int64_t counts[2][2] = {{0, 0}, {0, 0}};  // [send][forward]
  for (const PipelineOp& op : ops) {
    int64_t k = ++counts[op.send][op.forward()];
    int64_t t = op.send ? op.span.start : op.span.end;
    boundaries.push_back({t, op.send, op.forward(), op.send || !insideCompute(compute, t), k});
  }
  std::stable_sort(boundaries.begin(), boundaries.end(),
                   [](const Boundary& a, const Boundary& b) { return a.time < b.time; });
  std::vector<PipelineComputeBlock> blocks;
  int64_t cursor = window.start;
  std::optional<std::pair<bool, int64_t>> received;
  auto close = [&](int64_t until, std::optional<std::pair<bool, int64_t>> pass) {
    until = std::min(until, end);
    if (until <= cursor) return;
    auto span = computeSpanWithin(compute, {cursor, until});
    if (span && pass) blocks.push_back({*span, pass->first, pass->second});
    cursor = until;
  };
  for (const Boundary& b : boundaries) {
    if (b.send) {
      close(b.time, std::pair{b.forward, b.micro_batch});
    } else {
      if (b.splits) close(b.time, received);
      received = std::pair{b.forward, b.micro_batch};
    }
  }
  close(end, received);
  return blocks;
}

class Attributor {
 public:
  Attributor(const RankDigest& digest, const Stage& stage, size_t stage_index)
      : digest_(digest), compute_(digest.compute), stage_(stage), stage_index_(stage_index) {}

  // Each idle gap goes into `bubbles` with its main cause. Steps must come in time order: the
  // lookups below move forward from where the last one ended.
  BubbleSplit split(const StageStep& step, int64_t drained, std::vector<PipelineBubble>& bubbles) {
    BubbleSplit idle;
    Interval w = step.window;
    int64_t first_compute = w.end;
    auto first = std::lower_bound(compute_.begin(), compute_.end(), w.start,
                                  [](const Interval& i, int64_t t) { return i.end <= t; });
    if (first != compute_.end() && first->start < w.end) first_compute = std::max(first->start, w.start);
    for (const Interval& gap : gapsWithin(compute_, w)) {
      BubbleSplit this_gap;
      Interval before{gap.start, std::min(gap.end, drained)};
      if (gap.end > drained) this_gap.tail += gap.end - std::max(gap.start, drained);
      if (before.length() > 0) {
        if (before.start >= step.last_pipeline_compute) {
          this_gap.cool_down += before.length();
        } else {
          classify(before, gap.end, before.end <= first_compute, this_gap);
        }
      }
      idle.add(this_gap);
      bubbles.push_back({gap, this_gap, this_gap.mainCause(stage_index_)});
    }
    return idle;
  }

 private:
  // Splits a gap by the pipeline operations running across it; what they do not cover is
  // host-bound when the kernel that ends the gap was launched only after the gap began and after
  // those operations had finished, else other.
  void classify(Interval gap, int64_t gap_end, bool leading, BubbleSplit& idle) {
    const auto& ops = stage_.ops;
    auto it = std::lower_bound(ops.begin(), ops.end(), gap.start - stage_.longest_op,
                               [](const PipelineOp& op, int64_t t) { return op.span.start < t; });
    int64_t cursor = gap.start, covered = 0, last_cover_end = gap.start;
    for (; it != ops.end() && it->span.start < gap.end; ++it) {
      int64_t start = std::max(cursor, it->span.start), end = std::min(it->span.end, gap.end);
      if (end <= start) continue;
      int64_t& bucket = leading ? idle.warm_up : it->upstream ? idle.upstream : idle.downstream;
      bucket += end - start;
      covered += end - start;
      cursor = end;
      last_cover_end = end;
    }
    int64_t rest = gap.length() - covered;
    if (rest <= 0) return;
    int64_t launch = digest_.computeLaunchAt(gap_end);
    bool host_bound = launch != TimePoint::kNoLaunch && launch >= std::max(gap.start, last_cover_end);
    (host_bound ? idle.host_bound : idle.other) += rest;
  }

  const RankDigest& digest_;
  const IntervalSet& compute_;
  const Stage& stage_;
  size_t stage_index_;
};

Stage stageOf(const AnalysisInput& input, size_t r, const std::vector<PeerOp>& ops, int32_t previous, int32_t next,
              bool first_stage) {
  Stage stage;
  stage.rank_index = r;
  for (const PeerOp& op : ops) {
    if (!op.has_gpu_times || (op.peer != previous && op.peer != next)) continue;
    stage.ops.push_back({op.span, op.send, op.peer == previous, op.peer});
    stage.longest_op = std::max(stage.longest_op, op.span.length());
  }
  std::sort(stage.ops.begin(), stage.ops.end(),
            [](const PipelineOp& a, const PipelineOp& b) { return a.span.start < b.span.start; });
  const IntervalSet& compute = input.digest(r).compute;
  for (const StepWindow& window : input.windowsOf(r)) {
    StageStep step;
    step.number = window.number;
    step.window = window.window;
    auto by_start = [](const PipelineOp& op, int64_t t) { return op.span.start < t; };
    step.first_op = static_cast<size_t>(
        std::lower_bound(stage.ops.begin(), stage.ops.end(), window.window.start, by_start) - stage.ops.begin());
    step.end_op = static_cast<size_t>(
        std::lower_bound(stage.ops.begin(), stage.ops.end(), window.window.end, by_start) - stage.ops.begin());
    if (step.first_op == step.end_op) continue;  // no pipeline work in this step
    describeStep(stage, step, first_stage);
    step.last_pipeline_compute = lastPipelineCompute(compute, stage.ops[step.end_op - 1], window.window);
    stage.steps.push_back(step);
  }
  return stage;
}

// Pairs the k-th send from `from` to `to` in a step with `to`'s k-th receive from `from`.
void matchMessages(const PipelineStage& from, const PipelineStage& to, bool forward,
                   std::vector<PipelineMessage>& out) {
  auto sent = [&](const PipelineOp& op) { return op.send && op.forward() == forward && op.peer_rank == to.rank; };
  auto received = [&](const PipelineOp& op) {
    return !op.send && op.forward() == forward && op.peer_rank == from.rank;
  };
  for (const PipelineStageStep& send_step : from.steps) {
    auto receive_step = std::find_if(to.steps.begin(), to.steps.end(),
                                     [&](const PipelineStageStep& s) { return s.step == send_step.step; });
    if (receive_step == to.steps.end()) continue;
    auto receive = receive_step->ops.begin();
    for (const PipelineOp& op : send_step.ops) {
      if (!sent(op)) continue;
      receive = std::find_if(receive, receive_step->ops.end(), received);
      if (receive == receive_step->ops.end()) break;
      out.push_back({send_step.step, from.rank, to.rank, forward, op.span, receive->span});
      ++receive;
    }
  }
}

report::ResultValue intervalValue(Interval span, int64_t origin) {
  return report::ResultValue::array()
      .push(report::ResultValue::integer(span.start - origin))
      .push(report::ResultValue::integer(span.end - origin));
}

report::ResultValue splitValue(const BubbleSplit& split) {
  using report::ResultValue;
  return ResultValue::object()
      .set("warm_up_ns", ResultValue::integer(split.warm_up))
      .set("cool_down_ns", ResultValue::integer(split.cool_down))
      .set("upstream_ns", ResultValue::integer(split.upstream))
      .set("downstream_ns", ResultValue::integer(split.downstream))
      .set("host_bound_ns", ResultValue::integer(split.host_bound))
      .set("tail_ns", ResultValue::integer(split.tail))
      .set("other_ns", ResultValue::integer(split.other));
}

// Most gaps between kernels are slivers: the JSON keeps the longest of each stage and step.
constexpr size_t kMaxBubblesPerStageStep = 32;

report::ResultValue resultValue(const PipelineBubblesResult& result) {
  using report::ResultValue;
  const int64_t origin = result.origin_ns;
  ResultValue pipelines = ResultValue::array();
  for (const Pipeline& pipeline : result.pipelines) {
    ResultValue ranks = ResultValue::array();
    for (int32_t rank : pipeline.ranks) ranks.push(ResultValue::integer(rank));
    ResultValue stages = ResultValue::array();
    for (const PipelineStage& stage : pipeline.stages) {
      ResultValue steps = ResultValue::array();
      for (const PipelineStageStep& step : stage.steps) {
        ResultValue ops = ResultValue::array();
        for (const PipelineOp& op : step.ops) {
          ops.push(ResultValue::object()
                       .set("span_ns", intervalValue(op.span, origin))
                       .set("send", ResultValue::flag(op.send))
                       .set("peer_rank", ResultValue::integer(op.peer_rank))
                       .set("direction", ResultValue::text(op.forward() ? "forward" : "backward")));
        }
        // The longest gaps when there are more than the cap, in time order.
        std::vector<size_t> kept(step.bubbles.size());
        for (size_t i = 0; i < kept.size(); ++i) kept[i] = i;
        if (kept.size() > kMaxBubblesPerStageStep) {
          std::stable_sort(kept.begin(), kept.end(), [&](size_t a, size_t b) {
            return step.bubbles[a].span.length() > step.bubbles[b].span.length();
          });
          kept.resize(kMaxBubblesPerStageStep);
          std::sort(kept.begin(), kept.end());
        }
        ResultValue bubbles = ResultValue::array();
        int64_t left_out_ns = step.idle.total();
        for (size_t i : kept) {
          const PipelineBubble& bubble = step.bubbles[i];
          left_out_ns -= bubble.span.length();
          bubbles.push(ResultValue::object()
                           .set("span_ns", intervalValue(bubble.span, origin))
                           .set("cause", ResultValue::text(bubble.cause)));
        }
        ResultValue blocks = ResultValue::array();
        for (const PipelineComputeBlock& block : step.blocks) {
          blocks.push(ResultValue::object()
                          .set("span_ns", intervalValue(block.span, origin))
                          .set("direction", ResultValue::text(block.forward ? "forward" : "backward"))
                          .set("micro_batch", ResultValue::integer(block.micro_batch)));
        }
        steps.push(
            ResultValue::object()
                .set("step", ResultValue::integer(step.step))
                .set("window_ns", intervalValue(step.window, origin))
                .set("micro_batches", ResultValue::integer(step.micro_batches))
                .set("interleaved", ResultValue::flag(step.interleaved))
                .set("last_pipeline_compute_ns", ResultValue::integer(step.last_pipeline_compute_ns - origin))
                .set("drained_ns", ResultValue::integer(step.drained_ns - origin))
                .set("compute_ns", ResultValue::integer(step.compute_ns))
                .set("pipeline_compute_ns", ResultValue::integer(step.pipeline_compute_ns))
                .set("bubble_ns", ResultValue::integer(step.idle.total()))
                .set("idle", splitValue(step.idle))
                .set("ops", std::move(ops))
                .set("blocks", std::move(blocks))
                .set("bubbles", std::move(bubbles))
                .set("bubbles_left_out", ResultValue::integer(static_cast<int64_t>(step.bubbles.size() - kept.size())))
                .set("bubbles_left_out_ns", ResultValue::integer(left_out_ns)));
      }
      stages.push(ResultValue::object()
                      .set("stage", ResultValue::integer(static_cast<int64_t>(stage.stage)))
                      .set("rank", ResultValue::integer(stage.rank))
                      .set("recorded", ResultValue::flag(stage.recorded))
                      .set("blocks_source", ResultValue::text(computeBlockSourceName(stage.blocks_source)))
                      .set("steps", std::move(steps)));
    }
    ResultValue messages = ResultValue::array();
    for (const PipelineMessage& m : pipeline.messages) {
      messages.push(ResultValue::object()
                        .set("step", ResultValue::integer(m.step))
                        .set("from_rank", ResultValue::integer(m.from_rank))
                        .set("to_rank", ResultValue::integer(m.to_rank))
                        .set("direction", ResultValue::text(m.forward ? "forward" : "backward"))
                        .set("send_ns", intervalValue(m.send, origin))
                        .set("receive_ns", intervalValue(m.receive, origin)));
    }
    pipelines.push(ResultValue::object()
                       .set("ranks", std::move(ranks))
                       .set("stages_count", ResultValue::integer(static_cast<int64_t>(pipeline.ranks.size())))
                       .set("micro_batches", ResultValue::integer(pipeline.micro_batches))
                       .set("schedule", ResultValue::text(pipeline.schedule))
                       .set("theoretical_bubble_pct", ResultValue::number(pipeline.theoretical_pct))
                       .set("worst_bubble_pct", ResultValue::number(pipeline.worst_bubble_pct))
                       .set("stages", std::move(stages))
                       .set("messages", std::move(messages)));
  }
  ResultValue summaries = ResultValue::array();
  for (const PipelineStageSummary& row : result.stage_summaries) {
    ResultValue ranks = ResultValue::array();
    for (int32_t rank : row.ranks) ranks.push(ResultValue::integer(rank));
    auto per_step = [&row = row](int64_t total) { return ResultValue::number(row.perStep(total)); };
    summaries.push(ResultValue::object()
                       .set("pipeline_stages", ResultValue::integer(static_cast<int64_t>(row.pipeline_stages)))
                       .set("stage", ResultValue::integer(static_cast<int64_t>(row.stage)))
                       .set("ranks", std::move(ranks))
                       .set("samples", ResultValue::integer(static_cast<int64_t>(row.samples)))
                       .set("micro_batches", ResultValue::integer(row.median_micro_batches))
                       .set("step_ns", per_step(row.step_ns))
                       .set("compute_ns", per_step(row.compute_ns))
                       .set("compute_per_micro_batch_ns", ResultValue::number(row.computePerMicroBatch()))
                       .set("bubble_ns", per_step(row.idle.total()))
                       .set("bubble_pct", ResultValue::number(row.bubblePct()))
                       .set("theoretical_bubble_pct", ResultValue::number(row.theoreticalPct()))
                       .set("idle_per_step", ResultValue::object()
                                                 .set("warm_up_ns", per_step(row.idle.warm_up))
                                                 .set("cool_down_ns", per_step(row.idle.cool_down))
                                                 .set("upstream_ns", per_step(row.idle.upstream))
                                                 .set("downstream_ns", per_step(row.idle.downstream))
                                                 .set("host_bound_ns", per_step(row.idle.host_bound))
                                                 .set("tail_ns", per_step(row.idle.tail))
                                                 .set("other_ns", per_step(row.idle.other)))
                       .set("waits_on_stage",
                            row.waits_on ? ResultValue::integer(static_cast<int64_t>(*row.waits_on)) : ResultValue()));
  }
  ResultValue verdict;
  if (result.verdict) {
    const PipelineVerdict& v = *result.verdict;
    ResultValue waiting = ResultValue::array();
    for (size_t stage : v.waiting) waiting.push(ResultValue::integer(static_cast<int64_t>(stage)));
    verdict = ResultValue::object()
                  .set("worst", ResultValue::integer(static_cast<int64_t>(v.worst)))
                  .set("slowest", ResultValue::integer(static_cast<int64_t>(v.slowest)))
                  .set("bubble_pct", ResultValue::number(v.bubble_pct))
                  .set("theoretical_bubble_pct", ResultValue::number(v.theoretical_pct))
                  .set("micro_batches", ResultValue::integer(v.micro_batches))
                  .set("imbalance", ResultValue::number(v.imbalance))
                  .set("waiting_stages", std::move(waiting))
                  .set("main_cause", ResultValue::text(v.main_cause))
                  .set("flagged", ResultValue::flag(v.flagged));
  }
  return ResultValue::object()
      .set("origin_ns", ResultValue::integer(origin))
      .set("problem", result.problem.empty() ? ResultValue() : ResultValue::text(result.problem))
      .set("pipelines", std::move(pipelines))
      .set("stage_summaries", std::move(summaries))
      .set("verdict", std::move(verdict));
}

std::string stageName(const PipelineStageSummary& row) {
  return fmt::format("stage {} (rank{} {})", row.stage, row.ranks.size() == 1 ? "" : "s",
                     report::formatRanks(row.ranks));
}

}  // namespace

const char* computeBlockSourceName(ComputeBlockSource source) {
  return source == ComputeBlockSource::kRanges ? "ranges" : "between operations";
}

std::vector<PipelineComputeBlock> rangedComputeBlocks(const model::RankTrace& rank) {
  struct Pass {
    model::NvtxRange range;
    PipelineComputeBlock block;
    bool launched = false;
  };
  std::vector<Pass> passes;  // by start, as rank.nvtx
  for (const model::NvtxRange& range : rank.nvtx) {
    if (auto pass = passOfRange(rank.name(range.name_id))) passes.push_back({range, {{}, pass->first, pass->second}});
  }
  if (passes.empty()) return {};
  for (const model::GpuActivity& a : rank.activities) {
    if (a.kind != model::ActivityKind::kCompute || a.correlation_id == 0) continue;
    const model::HostCall* call = rank.launchOf(a.correlation_id);
    if (call == nullptr) continue;
    uint64_t thread = call->thread < rank.threads.size() ? rank.threads[call->thread] : 0;
    // The innermost pass open on the call's thread when it began: passes of one thread do not nest.
    auto it = std::upper_bound(passes.begin(), passes.end(), call->start_ns,
                               [](int64_t t, const Pass& p) { return t < p.range.start_ns; });
    while (it != passes.begin()) {
      --it;
      if (it->range.thread_id != thread) continue;
      if (call->start_ns < it->range.end_ns) {
        Interval& span = it->block.span;
        span = it->launched ? Interval{std::min(span.start, a.start_ns), std::max(span.end, a.end_ns)}
                            : Interval{a.start_ns, a.end_ns};
        it->launched = true;
      }
      break;
    }
  }
  std::vector<PipelineComputeBlock> blocks;
  for (const Pass& p : passes) {
    if (p.launched) blocks.push_back(p.block);
  }
  std::sort(blocks.begin(), blocks.end(),
            [](const PipelineComputeBlock& a, const PipelineComputeBlock& b) { return a.span.start < b.span.start; });
  return blocks;
}

void BubbleSplit::add(const BubbleSplit& o) {
  warm_up += o.warm_up, cool_down += o.cool_down, upstream += o.upstream, downstream += o.downstream;
  host_bound += o.host_bound, tail += o.tail, other += o.other;
}

std::string BubbleSplit::mainCause(size_t stage) const {
  std::pair<int64_t, std::string> causes[] = {
      {warm_up, "warm-up"},
      {cool_down, "cool-down"},
      {upstream, "waiting on stage " + std::to_string(stage == 0 ? 0 : stage - 1) + " (upstream)"},
      {downstream, "waiting on stage " + std::to_string(stage + 1) + " (downstream)"},
      {host_bound, "host-bound launch"},
      {tail, "data-parallel/optimizer tail"},
      {other, "other"}};
  return std::max_element(std::begin(causes), std::end(causes),
                          [](const auto& a, const auto& b) { return a.first < b.first; })
      ->second;
}

double PipelineStageSummary::computePerMicroBatch() const {
  return micro_batches > 0 ? static_cast<double>(pipeline_compute_ns) / static_cast<double>(micro_batches) : 0.0;
}
double PipelineStageSummary::bubblePct() const {
  return step_ns > 0 ? 100.0 * static_cast<double>(idle.total()) / static_cast<double>(step_ns) : 0.0;
}
double PipelineStageSummary::perStep(int64_t total) const {
  return samples > 0 ? static_cast<double>(total) / static_cast<double>(samples) : 0.0;
}
double PipelineStageSummary::theoreticalPct() const {
  return analysis::theoreticalPct(pipeline_stages, median_micro_batches);
}

PipelineBubblesResult computePipelineBubbles(const AnalysisInput& input) {
  const auto& run = input.run;
  PipelineBubblesResult result;
  result.origin_ns = run.firstActivityNs();
  auto communicators = gatherCommunicators(run);
  auto ops = pipelineOps(run, communicators);
  auto chains = chainsOf(forwardEdges(input, ops), result.problem);
  if (chains.empty()) return result;
  std::map<int32_t, size_t> index_of;
  for (size_t r = 0; r < run.ranks.size(); ++r) index_of[run.ranks[r].rank] = r;

  std::map<std::pair<size_t, size_t>, PipelineStageSummary> rows;  // (stages in the pipeline, stage)
  for (const auto& chain : chains) {
    size_t p = chain.size();
    Pipeline pipeline;
    pipeline.ranks = chain;
    std::vector<Stage> stages(p);
    std::vector<bool> loaded(p, false);
    for (size_t s = 0; s < p; ++s) {
      auto it = index_of.find(chain[s]);
      if (it == index_of.end()) continue;
      stages[s] =
          stageOf(input, it->second, ops[it->second], s > 0 ? chain[s - 1] : -1, s + 1 < p ? chain[s + 1] : -1, s == 0);
      loaded[s] = true;
    }
    // The pipeline has drained in a step when the last stage to finish its part has done so.
    std::map<int64_t, int64_t> drained;
    for (size_t s = 0; s < p; ++s) {
      for (const StageStep& step : stages[s].steps) {
        auto [it, added] = drained.try_emplace(step.number, step.last_pipeline_compute);
        if (!added) it->second = std::max(it->second, step.last_pipeline_compute);
      }
    }
    std::vector<int64_t> micro_batches;
    bool interleaved = false;
    double worst = 0;
    for (size_t s = 0; s < p; ++s) {
      PipelineStage out;
      out.stage = s;
      out.rank = chain[s];
      out.recorded = loaded[s];
      if (!loaded[s]) {
        pipeline.stages.push_back(std::move(out));
        continue;
      }
      const Stage& stage = stages[s];
      const IntervalSet& compute = input.digest(stage.rank_index).compute;
      const std::vector<PipelineComputeBlock>& ranged = input.digest(stage.rank_index).pipeline_blocks;
      out.blocks_source = ranged.empty() ? ComputeBlockSource::kBetweenOperations : ComputeBlockSource::kRanges;
      Attributor attributor(input.digest(stage.rank_index), stage, s);
      PipelineStageSummary& row = rows[{p, s}];
      row.pipeline_stages = p;
      row.stage = s;
      row.ranks.push_back(chain[s]);
      PipelineStageSummary own;
      for (const StageStep& step : stage.steps) {
        PipelineStageStep data;
        data.step = step.number;
        data.window = step.window;
        data.micro_batches = step.micro_batches;
        data.interleaved = step.interleaved;
        data.last_pipeline_compute_ns = step.last_pipeline_compute;
        data.drained_ns = drained[step.number];
        data.compute_ns = lengthWithin(compute, step.window);
        data.pipeline_compute_ns =
            lengthWithin(compute, {step.window.start, std::min(data.drained_ns, step.window.end)});
        data.idle = attributor.split(step, data.drained_ns, data.bubbles);
        data.ops.assign(stage.ops.begin() + static_cast<std::ptrdiff_t>(step.first_op),
                        stage.ops.begin() + static_cast<std::ptrdiff_t>(step.end_op));
        if (ranged.empty()) {
          data.blocks = blocksBetweenOperations(data.ops, compute, step.window, step.last_pipeline_compute);
        } else {
          auto by_start = [](const PipelineComputeBlock& b, int64_t t) { return b.span.start < t; };
          data.blocks.assign(std::lower_bound(ranged.begin(), ranged.end(), step.window.start, by_start),
                             std::lower_bound(ranged.begin(), ranged.end(), step.window.end, by_start));
        }
        own.step_ns += step.window.length();
        own.compute_ns += data.compute_ns;
        own.pipeline_compute_ns += data.pipeline_compute_ns;
        own.micro_batches += step.micro_batches;
        own.idle.add(data.idle);
        ++own.samples;
        row.micro_batches_per_step.push_back(step.micro_batches);
        micro_batches.push_back(step.micro_batches);
        interleaved = interleaved || step.interleaved;
        out.steps.push_back(std::move(data));
      }
      row.samples += own.samples;
      row.step_ns += own.step_ns;
      row.compute_ns += own.compute_ns;
      row.pipeline_compute_ns += own.pipeline_compute_ns;
      row.micro_batches += own.micro_batches;
      row.idle.add(own.idle);
      worst = std::max(worst, own.bubblePct());
      pipeline.stages.push_back(std::move(out));
    }
    pipeline.micro_batches = median(micro_batches);
    pipeline.schedule = interleaved ? "1F1B" : "GPipe";
    pipeline.theoretical_pct = theoreticalPct(p, pipeline.micro_batches);
    pipeline.worst_bubble_pct = worst;
    for (size_t s = 0; s + 1 < p; ++s) {
      if (!pipeline.stages[s].recorded || !pipeline.stages[s + 1].recorded) continue;
      matchMessages(pipeline.stages[s], pipeline.stages[s + 1], true, pipeline.messages);
      matchMessages(pipeline.stages[s + 1], pipeline.stages[s], false, pipeline.messages);
    }
    std::stable_sort(pipeline.messages.begin(), pipeline.messages.end(),
                     [](const PipelineMessage& a, const PipelineMessage& b) { return a.step < b.step; });
    result.pipelines.push_back(std::move(pipeline));
  }

  const PipelineStageSummary* worst_row = nullptr;
  for (auto& [key, row] : rows) {
    row.median_micro_batches = median(row.micro_batches_per_step);
    if (std::max(row.idle.upstream, row.idle.downstream) > 0) {
      row.waits_on = row.idle.upstream >= row.idle.downstream ? row.stage - 1 : row.stage + 1;
    }
  }
  for (const auto& [key, row] : rows) {
    result.stage_summaries.push_back(row);
    if (row.samples == 0) continue;
    if (worst_row == nullptr || row.bubblePct() > worst_row->bubblePct()) worst_row = &row;
  }
  if (worst_row == nullptr) return result;
  auto indexOf = [&](const PipelineStageSummary* row) {
    return static_cast<size_t>(std::distance(rows.begin(), rows.find({row->pipeline_stages, row->stage})));
  };

  // Imbalance among the stages of the worst stage's pipelines: the slowest stage sets the period.
  PipelineVerdict verdict;
  const PipelineStageSummary* slowest = nullptr;
  double sum = 0;
  size_t count = 0;
  for (const auto& [key, row] : rows) {
    if (key.first != worst_row->pipeline_stages || row.samples == 0) continue;
    sum += row.computePerMicroBatch();
    ++count;
    if (slowest == nullptr || row.computePerMicroBatch() > slowest->computePerMicroBatch()) slowest = &row;
  }
  double mean = count > 0 ? sum / static_cast<double>(count) : 0.0;
  verdict.worst = indexOf(worst_row);
  verdict.slowest = indexOf(slowest);
  verdict.imbalance = mean > 0 ? slowest->computePerMicroBatch() / mean : 1.0;
  verdict.micro_batches = worst_row->median_micro_batches;
  verdict.theoretical_pct = theoreticalPct(worst_row->pipeline_stages, verdict.micro_batches);
  verdict.bubble_pct = worst_row->bubblePct();
  verdict.flagged = verdict.bubble_pct >= 10 || verdict.imbalance >= 1.1;
  for (const auto& [key, row] : rows) {
    if (key.first != slowest->pipeline_stages || row.samples == 0) continue;
    double threshold = 0.01 * static_cast<double>(row.step_ns);
    if ((row.stage + 1 == slowest->stage && static_cast<double>(row.idle.downstream) >= threshold) ||
        (row.stage == slowest->stage + 1 && static_cast<double>(row.idle.upstream) >= threshold)) {
      verdict.waiting.push_back(row.stage);
    }
  }
  const BubbleSplit& idle = worst_row->idle;
  std::pair<int64_t, std::string> top{idle.warm_up, "warm-up"};
  auto consider = [&](int64_t time, auto describe) {
    if (time > top.first) top = {time, describe()};
  };
  consider(idle.cool_down, [] { return std::string("cool-down"); });
  consider(idle.upstream, [&] { return fmt::format("waiting on stage {}", worst_row->stage - 1); });
  consider(idle.downstream, [&] { return fmt::format("waiting on stage {}", worst_row->stage + 1); });
  consider(idle.host_bound, [] { return std::string("host-bound launches"); });
  consider(idle.tail, [] { return std::string("the data-parallel/optimizer tail"); });
  consider(idle.other, [] { return std::string("other dependencies"); });
  verdict.main_cause = top.second;
  result.verdict = std::move(verdict);
  return result;
}

void presentPipelineBubbles(const PipelineBubblesResult& result, report::Report& report) {
  auto& section = report.addSection("pipeline_bubbles", "Pipeline bubbles");
  report.addResult("pipeline_bubbles", [&] { return resultValue(result); });
  if (result.pipelines.empty()) {
    section.notes.push_back(result.problem.empty()
                                ? "No pipeline stages: no communicator carries point-to-point traffic between ranks."
                                : "No pipeline stages: " + result.problem + ".");
    return;
  }
  report::Table pipelines{"pipelines",
                          "",
                          {{"pipeline", "pipeline"},
                           {"ranks", "ranks by stage"},
                           {"stages", "stages"},
                           {"micro_batches", "micro-batches"},
                           {"schedule", "schedule"},
                           {"theoretical_pct", "theoretical bubble"},
                           {"worst_bubble_pct", "worst stage bubble"}},
                          {}};
  for (size_t c = 0; c < result.pipelines.size(); ++c) {
    const Pipeline& pipeline = result.pipelines[c];
    if (report.keep_marks) {
      for (const PipelineStage& stage : pipeline.stages) {
        for (const PipelineStageStep& step : stage.steps) {
          for (const PipelineBubble& bubble : step.bubbles) {
            report.marks.push_back({"pipeline_bubbles", stage.rank, bubble.span.start, bubble.span.end,
                                    "bubble (stage " + std::to_string(stage.stage) + "): " + bubble.cause});
          }
        }
      }
    }
    pipelines.rows.push_back(
        {Cell::of(static_cast<double>(c), Unit::kNone), Cell::of(joinInOrder(pipeline.ranks, " → ")),
         Cell::of(static_cast<double>(pipeline.ranks.size()), Unit::kCount),
         Cell::of(static_cast<double>(pipeline.micro_batches), Unit::kCount), Cell::of(pipeline.schedule),
         Cell::of(pipeline.theoretical_pct, Unit::kPercent), Cell::of(pipeline.worst_bubble_pct, Unit::kPercent)});
  }

  section.notes.push_back(fmt::format(
      "{} pipeline{} found from point-to-point traffic; stage figures are per rank and step, averaged over the "
      "ranks of the stage. bubble = compute idle in the step; theoretical = (p-1)/(m+p-1) of the step (GPipe and "
      "1F1B).",
      result.pipelines.size(), result.pipelines.size() == 1 ? "" : "s (data-parallel replicas)"));
  report::Table table{"stages",
                      "Per stage (per step)",
                      {{"stage", "stage"},
                       {"ranks", "ranks"},
                       {"micro_batches", "m"},
                       {"compute", "compute"},
                       {"compute_per_micro_batch", "compute/micro-batch"},
                       {"bubble", "bubble"},
                       {"bubble_pct", "bubble %"},
                       {"theoretical_pct", "theoretical %"},
                       {"warm_up", "warm-up"},
                       {"cool_down", "cool-down"},
                       {"wait_upstream", "wait upstream"},
                       {"wait_downstream", "wait downstream"},
                       {"waits_on", "waits on"},
                       {"host_bound", "host-bound"},
                       {"tail", "DP/optimizer tail"},
                       {"other", "other"}},
                      {}};
  for (const PipelineStageSummary& row : result.stage_summaries) {
    if (row.samples == 0) continue;
    auto per_step = [&row = row](int64_t total) { return Cell::of(row.perStep(total), Unit::kNanoseconds); };
    std::string waits_on = row.waits_on ? fmt::format("stage {}", *row.waits_on) : std::string();
    table.rows.push_back(
        {Cell::of(static_cast<double>(row.stage), Unit::kNone), Cell::of(report::formatRanks(row.ranks)),
         Cell::of(static_cast<double>(row.median_micro_batches), Unit::kCount), per_step(row.compute_ns),
         Cell::of(row.computePerMicroBatch(), Unit::kNanoseconds), per_step(row.idle.total()),
         Cell::of(row.bubblePct(), Unit::kPercent), Cell::of(row.theoreticalPct(), Unit::kPercent),
         per_step(row.idle.warm_up), per_step(row.idle.cool_down), per_step(row.idle.upstream),
         per_step(row.idle.downstream), Cell::of(waits_on), per_step(row.idle.host_bound), per_step(row.idle.tail),
         per_step(row.idle.other)});
  }
  section.tables.push_back(std::move(pipelines));
  section.tables.push_back(std::move(table));
  if (!result.verdict) return;
  const PipelineVerdict& verdict = *result.verdict;
  const PipelineStageSummary& worst_row = result.stage_summaries[verdict.worst];
  const PipelineStageSummary& slowest = result.stage_summaries[verdict.slowest];

  report.addMetric("bubble_pct", verdict.bubble_pct, Unit::kPercent,
                   "pipeline bubble (compute idle), % of step time, worst stage");
  if (!verdict.flagged) return;

  report::Finding finding;
  finding.analysis = "pipeline_bubbles";
  finding.severity = verdict.bubble_pct >= 25 ? report::Severity::kCritical : report::Severity::kWarning;
  double step_time = static_cast<double>(worst_row.step_ns) / static_cast<double>(worst_row.samples);
  finding.cost_ns =
      std::max(0.0, worst_row.perStep(worst_row.idle.total()) - verdict.theoretical_pct / 100.0 * step_time);
  if (verdict.imbalance >= 1.1) {
    finding.cause = {report::FindingCause::Kind::kSlowStage, slowest.ranks, verdict.imbalance, stageName(slowest)};
    finding.summary = fmt::format("pipeline {} is the slowest: {:.2f}x the mean compute per micro-batch",
                                  stageName(slowest), verdict.imbalance);
    if (!verdict.waiting.empty()) {
      std::vector<int32_t> waiting(verdict.waiting.begin(), verdict.waiting.end());
      finding.summary += fmt::format("; stage{} {} wait{} on it", waiting.size() == 1 ? "" : "s",
                                     joinInOrder(waiting, " and "), waiting.size() == 1 ? "s" : "");
    }
  } else {
    finding.summary = fmt::format("pipeline {} is idle {:.1f} % of the step in bubbles, mostly {}",
                                  stageName(worst_row), verdict.bubble_pct, verdict.main_cause);
  }
  finding.evidence.push_back(
      fmt::format("worst bubble: stage {}, {:.1f} % of the step; theoretical for p={}, m={}: {:.1f} %", worst_row.stage,
                  verdict.bubble_pct, worst_row.pipeline_stages, verdict.micro_batches, verdict.theoretical_pct));
  std::string per_stage = "compute per micro-batch:";
  for (const PipelineStageSummary& row : result.stage_summaries) {
    if (row.pipeline_stages != worst_row.pipeline_stages || row.samples == 0) continue;
    per_stage +=
        fmt::format(" stage {} {};", row.stage, report::formatValue(row.computePerMicroBatch(), Unit::kNanoseconds));
  }
  per_stage.pop_back();
  finding.evidence.push_back(fmt::format("{} (max/mean {:.2f}x)", per_stage, verdict.imbalance));
  report.findings.push_back(std::move(finding));
}

void analyzePipelineBubbles(const AnalysisInput& input, report::Report& report) {
  presentPipelineBubbles(computePipelineBubbles(input), report);
}

}  // namespace gpuxray::analysis
