// Published training runs that the simulator is checked against (docs/simulation.md): each row's
// model, cluster and strategy as the paper gives them, and what the paper measured.
//
// Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models" (2022):
// Table 5's iteration times with full recomputation and with sequence parallelism + selective
// recomputation; setups from its Table 3 (the pipeline interleaving as Calculon's validation
// files encode it). Narayanan et al., "Efficient Large-Scale Language Model Training on GPU
// Clusters Using Megatron-LM" (SC'21): Table 2's PTD-P rows, achieved TFLOP/s per GPU counted
// with the paper's Eq. 3 (96 B s l h^2 (1 + s/6h + V/16lh), full recomputation).
#pragma once

#include <string>
#include <vector>

#include "analyzer/simulate/inputs.h"
#include "analyzer/simulate/presets.h"

namespace gpuxray::testing {

struct PublishedRun {
  std::string label;
  std::string source;
  simulate::SimulationInputs inputs;
  double published = 0;   // seconds per iteration, or TFLOP/s per GPU
  bool is_tflops = false;  // what `published` is
};

// Achieved TFLOP/s per GPU the way Narayanan et al. count it (their Eq. 3).
inline double narayananTflopsPerGpu(const simulate::SimulationInputs& in, double step_seconds) {
  const auto& m = in.model;
  const double B = in.strategy.globalBatch(), s = m.sequence, l = m.layers, h = m.hidden, V = m.vocabulary;
  const double flops = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
  return flops / step_seconds / in.strategy.world() / 1e12;
}

inline std::vector<PublishedRun> publishedRuns() {
  using namespace gpuxray::simulate;
  std::vector<PublishedRun> runs;
  auto make = [](const char* model, int tp, int pp, int dp, int mbs, int m, int chunks, bool korthikanti_present) {
    SimulationInputs in;
    in.model = *modelPreset(model);
    in.cluster = *clusterPreset("dgx-a100");
    in.cluster.nodes = (tp * pp * dp + 7) / 8;
    StrategySpec& s = in.strategy;
    s.tp = tp, s.pp = pp, s.dp = dp;
    s.micro_batch_size = mbs, s.micro_batches = m;
    s.schedule = chunks > 1 ? Schedule::kInterleaved : Schedule::kOneFOneB;
    s.chunks = chunks;
    s.flash_attention = false;  // 2021-2022 Megatron-LM: attention as GEMMs, softmax and dropout
    s.overlap_grad_reduce = false;
    s.sequence_parallel = korthikanti_present;
    s.recompute = korthikanti_present ? Recompute::kSelective : Recompute::kFull;
    in.steps = 1;
    in.model_source = in.cluster_source = in.strategy_source = model;
    return in;
  };
  const char* k = "Korthikanti et al. 2022, Table 5";
  runs.push_back({"22B full recompute", k, make("megatron-22b", 8, 1, 1, 4, 1, 1, false), 1.42});
  runs.push_back({"22B sequence parallel + selective", k, make("megatron-22b", 8, 1, 1, 4, 1, 1, true), 1.10});
  runs.push_back({"175B full recompute", k, make("gpt3-175b", 8, 8, 1, 1, 64, 3, false), 18.13});
  runs.push_back({"175B sequence parallel + selective", k, make("gpt3-175b", 8, 8, 1, 1, 64, 3, true), 13.75});
  runs.push_back({"530B full recompute", k, make("megatron-530b", 8, 35, 1, 1, 280, 3, false), 49.05});
  runs.push_back({"530B sequence parallel + selective", k, make("megatron-530b", 8, 35, 1, 1, 280, 3, true), 37.83});
  runs.push_back({"1T full recompute", k, make("megatron-1t", 8, 64, 1, 1, 512, 1, false), 94.42});
  runs.push_back({"1T sequence parallel + selective", k, make("megatron-1t", 8, 64, 1, 1, 512, 1, true), 71.49});
  const char* n = "Narayanan et al. SC'21, Table 2 (PTD-P)";
  runs.push_back({"175B on 384 GPUs, batch 1536", n, make("gpt3-175b", 8, 12, 4, 1, 384, 1, false), 153, true});
  runs.push_back({"175B on 768 GPUs, batch 1536", n, make("gpt3-175b", 8, 12, 8, 1, 192, 1, false), 149, true});
  runs.push_back({"175B on 1536 GPUs, batch 1536", n, make("gpt3-175b", 8, 12, 16, 1, 96, 1, false), 141, true});
  runs.push_back({"530B on 560 GPUs, batch 2240", n, make("megatron-530b", 8, 35, 2, 1, 1120, 1, false), 171, true});
  runs.push_back({"530B on 1120 GPUs, batch 2240", n, make("megatron-530b", 8, 35, 4, 1, 560, 1, false), 167, true});
  runs.push_back({"530B on 2240 GPUs, batch 2240", n, make("megatron-530b", 8, 35, 8, 1, 280, 1, false), 159, true});
  return runs;
}

}  // namespace gpuxray::testing
