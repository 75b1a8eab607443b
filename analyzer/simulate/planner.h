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
};

struct PlanCandidate {
  StrategySpec strategy;
  Prediction prediction;
};

struct PlanResult {
  std::vector<PlanCandidate> ranked;  // fastest first
  size_t considered = 0;              // strategies enumerated
  size_t invalid = 0;                 // rejected by validate()
  size_t too_big = 0;                 // rejected for memory
};

// `cluster.nodes` is set from the GPU count. Throws InputError when the GPU count does not fill
// whole nodes or the cluster is too small.
PlanResult plan(const ModelSpec& model, const ClusterSpec& cluster, const PlanOptions& options);

// The `top` fastest strategies as a report table (id "plan").
report::Table planTable(const PlanResult& result, size_t top);

}  // namespace gpuxray::simulate
