// Published training runs that the simulator is calibrated and checked against (docs/simulation.md,
// "Validation"): each row's model, cluster and strategy as its source gives them, what the source
// measured, and whether the row was used to fit the efficiency set of its GPU generation or held
// out to test it. The split was chosen before fitting: the whole of one source (or of one table) is
// fitted, the other held out.
//
// A100 (dgx-a100). Fit: Korthikanti et al., "Reducing Activation Recomputation in Large Transformer
// Models" (2022), Table 5's iteration times with full recomputation and with sequence parallelism +
// selective recomputation; setups from its Table 3 (the pipeline interleaving as Calculon's
// validation files encode it). Held out: Narayanan et al., "Efficient Large-Scale Language Model
// Training on GPU Clusters Using Megatron-LM" (SC'21), Table 2's PTD-P rows, achieved TFLOP/s per GPU
// counted with the paper's Eq. 3 (96 B s l h^2 (1 + s/6h + V/16lh), full recomputation).
//
// H100 (dgx-h100). FP8 rows: tokens/s per GPU from NVIDIA's NeMo performance summary, container 24.07
// (NVIDIA/NeMo, docs/source/performance/performance_summary.md, "Pretraining", DGX-H100, FP8, as last
// revised on 9 September 2024, commit 8e3d65dcfe): the
// GPT3-175B on 128 GPUs, LLAMA2-7B, LLAMA2-70B and LLAMA3-8B rows are fitted; GPT3-175B on 512
// GPUs, LLAMA2-13B and LLAMA3-70B are held out, with the Megatron-Bridge performance summary's
// DGX-H100 FP8-CS rows of container 25.09 (NVIDIA-NeMo/Megatron-Bridge, docs/performance-summary.md:
// LLAMA3_70B on 64 GPUs and LLAMA3.1_405B on 1024 GPUs). BF16 rows: the Llama 3 paper (Grattafiori
// et al. 2024, Table 4; also Balaji, SC'24): 405B on 8192 GPUs (TP8 CP1 PP16, 16M tokens per batch)
// at 430 TFLOP/s per GPU, fitted; on 16384 GPUs at 400, held out.
#pragma once

#include <string>
#include <vector>

#include "analyzer/simulate/cost_model.h"
#include "analyzer/simulate/engine.h"
#include "analyzer/simulate/inputs.h"
#include "analyzer/simulate/layout.h"
#include "analyzer/simulate/presets.h"

namespace gpuxray::testing {

enum class Measure {
  kStepSeconds,         // seconds per iteration
  kNarayananTflops,     // TFLOP/s per GPU, Narayanan et al.'s Eq. 3
  kTokensPerSecondGpu,  // tokens/s per GPU
  kModelTflops,         // TFLOP/s per GPU, the model FLOPs of CostModel::modelFlopsPerStep
};

struct PublishedRun {
  std::string label;
  std::string source;
  std::string generation;  // "a100", "h100"
  bool held_out = false;
  simulate::SimulationInputs inputs;
  double published = 0;
  Measure measure = Measure::kStepSeconds;
};

inline const char* measureUnit(Measure measure) {
  switch (measure) {
    case Measure::kStepSeconds: return "s";
    case Measure::kNarayananTflops:
    case Measure::kModelTflops: return "TFLOP/s";
    case Measure::kTokensPerSecondGpu: return "tokens/s/GPU";
  }
  return "";
}

// What the run's measure would read if the simulator's prediction were the measurement.
inline double predictedMeasure(const PublishedRun& run, const simulate::Prediction& p) {
  const auto& in = run.inputs;
  const double gpus = in.strategy.world();
  switch (run.measure) {
    case Measure::kStepSeconds: return p.step_seconds;
    case Measure::kNarayananTflops: {
      const auto& m = in.model;
      const double B = in.strategy.globalBatch(), s = m.sequence, l = m.layers, h = m.hidden, V = m.vocabulary;
      const double flops = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
      return flops / p.step_seconds / gpus / 1e12;
    }
    case Measure::kTokensPerSecondGpu: return p.tokens_per_second / gpus;
    case Measure::kModelTflops: return p.model_tflops_per_gpu;
  }
  return 0;
}

inline simulate::Prediction predictRun(const simulate::SimulationInputs& in) {
  simulate::CostModel cost(in);
  simulate::Layout layout(in);
  return simulate::Timeline(cost, layout).predict();
}

inline std::vector<PublishedRun> publishedRuns() {
  using namespace gpuxray::simulate;
  std::vector<PublishedRun> runs;
  auto megatron2022 = [](const char* model, int tp, int pp, int dp, int mbs, int m, int chunks, bool korthikanti_present) {
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
  auto fitA100 = [&](const char* label, SimulationInputs in, double seconds) {
    runs.push_back({label, k, "a100", false, in, seconds, Measure::kStepSeconds});
  };
  fitA100("22B full recompute", megatron2022("megatron-22b", 8, 1, 1, 4, 1, 1, false), 1.42);
  fitA100("22B sequence parallel + selective", megatron2022("megatron-22b", 8, 1, 1, 4, 1, 1, true), 1.10);
  fitA100("175B full recompute", megatron2022("gpt3-175b", 8, 8, 1, 1, 64, 3, false), 18.13);
  fitA100("175B sequence parallel + selective", megatron2022("gpt3-175b", 8, 8, 1, 1, 64, 3, true), 13.75);
  fitA100("530B full recompute", megatron2022("megatron-530b", 8, 35, 1, 1, 280, 3, false), 49.05);
  fitA100("530B sequence parallel + selective", megatron2022("megatron-530b", 8, 35, 1, 1, 280, 3, true), 37.83);
  fitA100("1T full recompute", megatron2022("megatron-1t", 8, 64, 1, 1, 512, 1, false), 94.42);
  fitA100("1T sequence parallel + selective", megatron2022("megatron-1t", 8, 64, 1, 1, 512, 1, true), 71.49);
  const char* n = "Narayanan et al. SC'21, Table 2 (PTD-P)";
  auto heldA100 = [&](const char* label, SimulationInputs in, double tflops) {
    runs.push_back({label, n, "a100", true, in, tflops, Measure::kNarayananTflops});
  };
  heldA100("175B on 384 GPUs, batch 1536", megatron2022("gpt3-175b", 8, 12, 4, 1, 384, 1, false), 153);
  heldA100("175B on 768 GPUs, batch 1536", megatron2022("gpt3-175b", 8, 12, 8, 1, 192, 1, false), 149);
  heldA100("175B on 1536 GPUs, batch 1536", megatron2022("gpt3-175b", 8, 12, 16, 1, 96, 1, false), 141);
  heldA100("530B on 560 GPUs, batch 2240", megatron2022("megatron-530b", 8, 35, 2, 1, 1120, 1, false), 171);
  heldA100("530B on 1120 GPUs, batch 2240", megatron2022("megatron-530b", 8, 35, 4, 1, 560, 1, false), 167);
  heldA100("530B on 2240 GPUs, batch 2240", megatron2022("megatron-530b", 8, 35, 8, 1, 280, 1, false), 159);

  // Megatron-Core on H100 as NeMo runs it: flash attention (cuDNN), sequence parallelism with TP,
  // the distributed optimizer, gradient reduction overlapped with the backward, no recomputation.
  auto h100 = [](const char* model, int gpus, int global_batch, int mbs, int tp, int pp, int cp, int vp,
                 Precision precision, TpOverlap tp_comm_overlap) {
    SimulationInputs in;
    in.model = *modelPreset(model);
    in.cluster = *clusterPreset("dgx-h100");
    in.cluster.nodes = (gpus + 7) / 8;
    StrategySpec& s = in.strategy;
    s.tp = tp, s.pp = pp, s.cp = cp;
    s.dp = gpus / (tp * pp * cp);
    s.micro_batch_size = mbs;
    s.micro_batches = global_batch / (mbs * s.dp);
    s.schedule = vp > 1 ? Schedule::kInterleaved : Schedule::kOneFOneB;
    s.chunks = vp;
    s.sequence_parallel = tp > 1;
    s.zero_stage = s.dataGroup() > 1 ? 1 : 0;
    s.precision = precision;
    s.tp_comm_overlap = tp_comm_overlap;
    in.steps = 1;
    in.model_source = in.cluster_source = in.strategy_source = model;
    return in;
  };
  const char* nemo = "NeMo 24.07 performance summary, DGX-H100 FP8";
  const char* bridge = "Megatron-Bridge 25.09 performance summary, DGX-H100 FP8-CS";
  const char* llama3 = "Llama 3 paper, Table 4 (BF16)";
  const Precision fp8 = Precision::kFp8, bf16 = Precision::kBf16;
  auto row = [&](const char* label, const char* source, bool held_out, SimulationInputs in, double value, Measure m) {
    runs.push_back({label, source, "h100", held_out, in, value, m});
  };
  const Measure tokens = Measure::kTokensPerSecondGpu;
  // Transformer Engine's TP-communication overlap as each source's configuration sets it: NeMo's
  // 24.07 launcher configurations for Llama 2 70B and Llama 3 70B (ub_tp_comm_overlap: true,
  // reduce-scatters by "pipeline"), NeMo's GPT3-175B performance recipe (tp_comm_overlap=True; the
  // 24.07 table does not record it), Megatron-Bridge's FP8 H100 configurations (reduce-scatters by
  // ring exchange); none where TP is 1, and none for Meta's own framework (not stated).
  const TpOverlap none = TpOverlap::kNone, pipeline = TpOverlap::kPipeline, ring = TpOverlap::kRing;
  row("GPT3-175B on 128 GPUs", nemo, false, h100("gpt3-175b", 128, 256, 1, 4, 8, 1, 6, fp8, pipeline), 716, tokens);
  row("Llama 2 7B on 8 GPUs", nemo, false, h100("llama2-7b", 8, 128, 1, 1, 1, 1, 1, fp8, none), 16934, tokens);
  row("Llama 2 70B on 64 GPUs", nemo, false, h100("llama2-70b", 64, 128, 1, 4, 4, 1, 20, fp8, pipeline), 1728, tokens);
  row("Llama 3 8B on 8 GPUs, CP2", nemo, false, h100("llama3-8b", 8, 128, 1, 1, 1, 2, 1, fp8, none), 12273, tokens);
  // Meta gives neither the micro-batch size nor the interleaving: micro-batch 1 and 4 chunks per
  // stage (2 layers per model chunk, as Megatron-Bridge's 405B recipes have) are assumptions.
  row("Llama 3 405B on 8192 GPUs", llama3, false, h100("llama3-405b", 8192, 2048, 1, 8, 16, 1, 4, bf16, none), 430,
      Measure::kModelTflops);
  row("GPT3-175B on 512 GPUs", nemo, true, h100("gpt3-175b", 512, 2048, 2, 4, 8, 1, 6, fp8, pipeline), 825, tokens);
  row("Llama 2 13B on 16 GPUs", nemo, true, h100("llama2-13b", 16, 128, 1, 1, 4, 1, 10, fp8, none), 8715, tokens);
  row("Llama 3 70B on 64 GPUs, CP2", nemo, true, h100("llama3-70b", 64, 128, 1, 4, 4, 2, 5, fp8, pipeline), 1524,
      tokens);
  row("Llama 3 70B on 64 GPUs", bridge, true, h100("llama3-70b", 64, 128, 1, 4, 8, 1, 5, fp8, ring), 1619, tokens);
  row("Llama 3.1 405B on 1024 GPUs, CP2", bridge, true, h100("llama3-405b", 1024, 512, 1, 8, 8, 2, 8, fp8, ring), 302,
      tokens);
  row("Llama 3 405B on 16384 GPUs", llama3, true, h100("llama3-405b", 16384, 2048, 1, 8, 16, 1, 4, bf16, none), 400,
      Measure::kModelTflops);
  return runs;
}

}  // namespace gpuxray::testing
