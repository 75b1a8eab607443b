// `gpuxray plan`: every strategy of a model on a number of GPUs that is valid and fits in memory,
// simulated (one replica, block by block) and ranked by predicted step time.
#pragma once

#include <cstddef>
#include <vector>

#include "analyzer/report/report.h"
#include "analyzer/simulate/engine.h"
#include "analyzer/simulate/inputs.h"

namespace gpuxray::simulate {

struct PlanOptions {
  int gpus = 0;
  int global_batch = 512;  // sequences per step
  std::vector<int> micro_batch_sizes{1, 2, 4, 8};
  std::vector<int> zero_stages{0, 1};
  std::vector<int> context_parallel{1, 2, 4, 8, 16};  // those that divide the GPUs and the sequence
  Precision precision = Precision::kBf16;
  TpOverlap tp_comm_overlap = TpOverlap::kNone;  // for every strategy with TP > 1
};

struct PlanCandidate {
  StrategySpec strategy;
  Prediction prediction;
  MemoryUse memory;  // the pipeline stage that needs most
};

struct PlanResult {
  std::vector<PlanCandidate> ranked;  // fastest first
  size_t considered = 0;              // strategies enumerated
  size_t invalid = 0;                 // rejected by validate()
  size_t too_big = 0;                 // rejected for memory
  std::vector<PlanCandidate> nearest_misses;  // the too-big strategies that need least memory, least first
  uint64_t device_memory_bytes = 0;           // one GPU's memory, what a strategy must fit in
};

// `cluster.nodes` is set from the GPU count. Throws InputError when the GPU count does not fill
// whole nodes or the cluster is too small.
PlanResult plan(const ModelSpec& model, const ClusterSpec& cluster, const PlanOptions& options);

// The `top` fastest strategies as a report table (id "plan").
report::Table planTable(const PlanResult& result, size_t top);
// Per GPU memory of the `top` fastest strategies, part by part (id "plan_memory"), and of the
// strategies that came closest to fitting (id "plan_too_big").
report::Table planMemoryTable(const PlanResult& result, size_t top);
report::Table tooBigTable(const PlanResult& result, size_t top, uint64_t hbm_bytes);

}  // namespace gpuxray::simulate
