// Pipeline bubbles (docs/analyses.md, "Pipeline bubbles"): the stages of each pipeline, found from
// the point-to-point traffic of pipeline communicators, and per stage and step the time its compute
// sits idle, split by cause, beside the theoretical bubble (p-1)/(m+p-1) of GPipe and 1F1B. The
// result is data; presentPipelineBubbles turns it into the report's section, metric, finding and
// timeline marks.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analyzer/analysis/analysis_input.h"
#include "analyzer/report/report.h"

namespace gpuxray::analysis {

// Idle compute time by cause, in ns.
struct BubbleSplit {
  int64_t warm_up = 0;     // before the stage's first compute, while its pipeline operations run
  int64_t cool_down = 0;   // after the stage finished its part of the step, before the pipeline drained
  int64_t upstream = 0;    // while an operation with the previous stage runs
  int64_t downstream = 0;  // while an operation with the next stage runs
  int64_t host_bound = 0;  // the kernel ending the gap was launched only after the gap (and those) began
  int64_t tail = 0;        // after the whole pipeline drained: data-parallel and optimizer work
  int64_t other = 0;
  int64_t total() const { return warm_up + cool_down + upstream + downstream + host_bound + tail + other; }
  void add(const BubbleSplit& o);
  // What most of this time was: "warm-up", "waiting on stage 1 (downstream)", ...
  std::string mainCause(size_t stage) const;
};

// A pipeline send or receive of a stage, on the run clock (GPU times).
struct PipelineOp {
  Interval span;
  bool send = false;
  bool upstream = false;  // with the previous stage, else the next
  int32_t peer_rank = -1;
  // Activations flow to the next stage (forward); gradients flow back (backward).
  bool forward() const { return send != upstream; }
};

// One micro-batch's forward or backward on a stage: its compute on the GPU (first kernel's start to
// last kernel's end). From the host ranges "forward#N" and "backward#N" (the simulator writes them
// around the launches of each micro-batch's pass) where the rank has them: the kernels launched
// inside the range. Else between operations: the compute from one boundary (a send's start, or the
// end of a receive the stage sat idle waiting for) to the next, named by the pass it ends with (the
// send's, or the last one received).
struct PipelineComputeBlock {
  Interval span;
  bool forward = true;
  int64_t micro_batch = 0;  // from 1, in the step: ranges "forward#0" is micro-batch 1
};

enum class ComputeBlockSource { kRanges, kBetweenOperations };
const char* computeBlockSourceName(ComputeBlockSource source);

// The blocks of the ranges "forward#N" and "backward#N" of a rank (its per-rank phase), by start;
// empty when it has none.
std::vector<PipelineComputeBlock> rangedComputeBlocks(const model::RankTrace& rank);

// A gap in the stage's compute within a step, with its split and main cause.
struct PipelineBubble {
  Interval span;
  BubbleSplit split;
  std::string cause;
};

struct PipelineStageStep {
  int64_t step = 0;  // the step's number
  Interval window;
  int64_t micro_batches = 0;             // forward receives from upstream (forward sends on stage 0), NCCL groups once
  bool interleaved = false;              // a forward after the first backward: 1F1B
  int64_t last_pipeline_compute_ns = 0;  // end of the compute that finishes its part of the pipeline
  int64_t drained_ns = 0;                // when the last stage of the pipeline finished its part of this step
  int64_t compute_ns = 0;
  int64_t pipeline_compute_ns = 0;  // compute before the pipeline drained
  BubbleSplit idle;
  std::vector<PipelineOp> ops;          // by start
  std::vector<PipelineBubble> bubbles;  // by start, every gap
  std::vector<PipelineComputeBlock> blocks;  // by start, up to when the pipeline drained
};

struct PipelineStage {
  size_t stage = 0;
  int32_t rank = -1;
  bool recorded = false;                 // the rank has a trace file (else its steps are empty)
  ComputeBlockSource blocks_source = ComputeBlockSource::kBetweenOperations;
  std::vector<PipelineStageStep> steps;  // steps with pipeline work, in time order
};

// One send matched with its receive: the k-th send from a stage to a neighbour in a step with the
// neighbour's k-th receive from it (NCCL delivers point-to-point operations between two ranks in order).
struct PipelineMessage {
  int64_t step = 0;
  int32_t from_rank = -1;
  int32_t to_rank = -1;
  bool forward = true;  // an activation (else a gradient)
  Interval send, receive;
};

struct Pipeline {
  std::vector<int32_t> ranks;   // by stage
  int64_t micro_batches = 0;    // median over its stages' steps
  std::string schedule;         // "1F1B" (a forward after a backward in a step) or "GPipe"
  double theoretical_pct = 0;   // (p-1)/(m+p-1)
  double worst_bubble_pct = 0;  // of its stages
  std::vector<PipelineStage> stages;
  std::vector<PipelineMessage> messages;  // by step, then stage pair, forward first
};

// One stage index summed over the pipelines of the same length and their steps (data-parallel
// replicas are averaged).
struct PipelineStageSummary {
  size_t pipeline_stages = 0;
  size_t stage = 0;
  std::vector<int32_t> ranks;
  size_t samples = 0;  // rank-steps
  int64_t step_ns = 0, compute_ns = 0, pipeline_compute_ns = 0, micro_batches = 0;
  int64_t median_micro_batches = 0;
  std::vector<int64_t> micro_batches_per_step;
  BubbleSplit idle;
  std::optional<size_t> waits_on;  // the neighbour it waits on most, when it waits at all
  double computePerMicroBatch() const;
  double bubblePct() const;
  double perStep(int64_t total) const;
  double theoreticalPct() const;
};

// The verdict on the worst stage: the finding when bubble >= 10 % or the stages' compute per
// micro-batch differs by >= 1.1x.
struct PipelineVerdict {
  size_t worst = 0;      // index into stage_summaries: the highest bubble %
  size_t slowest = 0;    // the most compute per micro-batch among the stages of that pipeline length
  double imbalance = 1;  // slowest / mean compute per micro-batch
  double bubble_pct = 0;
  double theoretical_pct = 0;
  int64_t micro_batches = 0;
  std::vector<size_t> waiting;  // stages that wait on the slowest (>= 1 % of their step time)
  std::string main_cause;       // of the worst stage's idle time ("warm-up", "waiting on stage 1", ...)
  bool flagged = false;
};

struct PipelineBubblesResult {
  std::string problem;    // why no pipeline was found ("" when there is none to find, or one was)
  int64_t origin_ns = 0;  // the run's first GPU activity (the --window origin)
  std::vector<Pipeline> pipelines;
  std::vector<PipelineStageSummary> stage_summaries;  // by pipeline length, then stage
  std::optional<PipelineVerdict> verdict;
};

PipelineBubblesResult computePipelineBubbles(const AnalysisInput& input);
// The `pipeline_bubbles` section, the bubble_pct metric, the finding, a timeline mark per bubble
// and the typed result.
void presentPipelineBubbles(const PipelineBubblesResult& result, report::Report& report);

}  // namespace gpuxray::analysis
