// The order in which each pipeline stage runs the forward and backward passes of its micro-batches:
// GPipe (all forwards, then all backwards), 1F1B (PipeDream-Flush: p - s - 1 warm-up forwards, then
// one forward and one backward in turn) and interleaved 1F1B with v model chunks per stage
// (Narayanan et al., SC'21; Megatron-LM's order).
#pragma once

#include <vector>

#include "analyzer/simulate/inputs.h"

namespace gpuxray::simulate {

struct PipelineBlock {
  bool forward = true;
  int micro_batch = 0;
  int chunk = 0;
  // The virtual stage this block runs: chunk x pp + stage.
  int virtualStage(int stage, int pp) const { return chunk * pp + stage; }
};

// Stage `stage`'s blocks in program order for one step.
std::vector<PipelineBlock> stageOrder(const StrategySpec& strategy, int stage);

// The most micro-batches whose activations a stage holds at once, in chunk-passes (one chunk of
// one micro-batch is one).
int peakActivationsInFlight(const std::vector<PipelineBlock>& order);

}  // namespace gpuxray::simulate
