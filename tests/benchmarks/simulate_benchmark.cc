// How fast the simulator is, and how close it comes to published runs.
//
//   simulate_benchmark [--write-ranks N] [--dir DIR] [--keep]
//
// 1. Simulation speed on the 1024-GPU preset gpt3-175b-1024 (GPT-3 175B, TP8 x PP8 x DP16, 96
//    micro-batches, 2 steps): the timeline of all ranks as `simulate` computes it (uniform: no
//    perturbations), again with 1 % jitter (every rank simulated kernel by kernel), and the trace
//    files of the first N ranks written (default 32), as ranks x steps per second.
// 2. `plan` for the same model on 1024 A100s (global batch 1536): strategies and seconds. Target < 10 s.
// 3. Predicted against published iteration times and TFLOP/s (tests/support/published_runs.h),
//    the table of docs/simulation.md.
#include <fmt/format.h>

#include <chrono>
#include <ctime>
#include <map>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "analyzer/simulate/cost_model.h"
#include "analyzer/simulate/engine.h"
#include "analyzer/simulate/layout.h"
#include "analyzer/simulate/planner.h"
#include "analyzer/simulate/presets.h"
#include "analyzer/simulate/trace_generation.h"
#include "tests/support/published_runs.h"

namespace {

using namespace gpuxray::simulate;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

double errorPct(const gpuxray::testing::PublishedRun& run, const Efficiency* efficiency) {
  SimulationInputs in = run.inputs;
  if (efficiency) in.cluster.efficiency = *efficiency;
  const double predicted = gpuxray::testing::predictedMeasure(run, gpuxray::testing::predictRun(in));
  return 100 * (predicted / run.published - 1);
}

// The fit and held-out rows of every generation with the efficiency sets of efficiency_data.json.
void printValidation() {
  const auto runs = gpuxray::testing::publishedRuns();
  fmt::print("\n| GPU | rows | run | source | setup | published | predicted | error |\n|---|---|---|---|---|---|---|---|\n");
  struct Sum {
    double total = 0, worst = 0;
    int count = 0;
  };
  std::map<std::string, Sum> sums;
  for (const auto& run : runs) {
    const auto p = gpuxray::testing::predictRun(run.inputs);
    const double predicted = gpuxray::testing::predictedMeasure(run, p);
    const double error = 100 * (predicted / run.published - 1);
    Sum& sum = sums[run.generation + (run.held_out ? " held out" : " fit")];
    sum.total += std::fabs(error), sum.worst = std::max(sum.worst, std::fabs(error)), ++sum.count;
    const char* unit = gpuxray::testing::measureUnit(run.measure);
    fmt::print("| {} | {} | {} | {} | {} GPUs, {} | {:g} {} | {:.4g} {} | {:+.1f} % |\n", run.generation,
               run.held_out ? "held out" : "fit", run.label, run.source, run.inputs.strategy.world(),
               run.inputs.strategy.label(), run.published, unit, predicted, unit, error);
  }
  fmt::print("\n");
  for (const auto& [name, sum] : sums)
    fmt::print("{}: {} rows, mean |error| {:.1f} %, worst {:.1f} %\n", name, sum.count, sum.total / sum.count, sum.worst);
}

// Coordinate descent on the fit rows of one generation: each factor in turn moves by 0.01 while
// the mean |error| falls, until no move helps. Prints the set for efficiency_data.json.
int calibrate(const std::string& generation) {
  std::vector<gpuxray::testing::PublishedRun> fit;
  for (const auto& run : gpuxray::testing::publishedRuns())
    if (run.generation == generation && !run.held_out) fit.push_back(run);
  if (fit.empty()) {
    fmt::print(stderr, "no fit rows for '{}'\n", generation);
    return 1;
  }
  Efficiency e = fit.front().inputs.cluster.efficiency;
  auto cost = [&](const Efficiency& trial) {
    double total = 0;
    for (const auto& run : fit) total += std::fabs(errorPct(run, &trial));
    return total / static_cast<double>(fit.size());
  };
  std::vector<double Efficiency::*> factors{&Efficiency::gemm, &Efficiency::attention, &Efficiency::elementwise};
  bool any_fp8 = false;
  for (const auto& run : fit) any_fp8 |= run.inputs.strategy.precision == Precision::kFp8;
  if (any_fp8) factors.push_back(&Efficiency::gemm_fp8);
  double best = cost(e);
  for (bool moved = true; moved;) {
    moved = false;
    for (auto factor : factors) {
      for (double step : {0.01, -0.01}) {
        while (true) {
          Efficiency trial = e;
          trial.*factor = std::round((trial.*factor + step) * 100) / 100;
          if (trial.*factor <= 0.05 || trial.*factor > 1) break;
          const double c = cost(trial);
          if (c >= best - 1e-9) break;
          best = c, e = trial, moved = true;
        }
      }
    }
  }
  fmt::print("{}: fit rows {}, mean |error| {:.2f} %\n\"efficiency\": {{\"gemm\": {:.2f}, \"gemm_fp8\": {:.2f}, "
             "\"attention\": {:.2f}, \"elementwise\": {:.2f}, \"nvlink\": {:.2f}, \"network\": {:.2f}}}\n",
             generation, fit.size(), best, e.gemm, e.gemm_fp8, e.attention, e.elementwise, e.nvlink, e.network);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int write_ranks = 32;
  std::filesystem::path dir = std::filesystem::temp_directory_path() / "gpuxray-simulate-benchmark";
  bool keep = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--write-ranks" && i + 1 < argc) write_ranks = std::stoi(argv[++i]);
    else if (arg == "--dir" && i + 1 < argc) dir = argv[++i];
    else if (arg == "--keep") keep = true;
    else if (arg == "--calibrate" && i + 1 < argc) return calibrate(argv[++i]);
    else if (arg == "--validation") {
      printValidation();
      return 0;
    } else {
      fmt::print(stderr, "usage: simulate_benchmark [--write-ranks N] [--dir DIR] [--keep] [--validation] "
                         "[--calibrate a100|h100]\n");
      return 1;
    }
  }

  SimulationInputs in = runPreset("gpt3-175b-1024")->inputs;
  const int world = in.strategy.world();
  fmt::print("preset gpt3-175b-1024: {} ranks, {}, {} steps\n", world, in.strategy.label(), in.steps);
  for (double jitter : {0.0, 1.0}) {
    in.perturbations.jitter_pct = jitter;
    auto start = Clock::now();
    CostModel cost(in);
    Layout layout(in);
    Timeline timeline(cost, layout);
    double seconds = since(start);
    Prediction p = timeline.predict();
    fmt::print("timeline, jitter {:.0f} % ({}): {:.3f} s = {:.0f} ranks x steps/s; predicted step {:.2f} s, "
               "{:.0f} TFLOP/s per GPU\n", jitter, timeline.uniform() ? "uniform" : "every rank", seconds,
               world * in.steps / seconds, p.step_seconds, p.model_tflops_per_gpu);
    if (jitter > 0) continue;
    GenerationOptions options;
    options.directory = dir.string();
    for (int r = 0; r < std::min(write_ranks, world); ++r) options.ranks.push_back(r);
    start = Clock::now();
    GenerationResult written = writeTraces(cost, layout, timeline, options);
    seconds = since(start);
    fmt::print("trace files: {} ranks x {} steps, {:.1f} M records, {:.1f} MB, in {:.2f} s = {:.1f} ranks x steps/s "
               "({:.1f} M records/s)\n", written.files, in.steps, static_cast<double>(written.records) / 1e6,
               static_cast<double>(written.bytes) / 1e6, seconds, static_cast<double>(written.files) * in.steps / seconds,
               static_cast<double>(written.records) / 1e6 / seconds);
  }
  if (!keep) std::filesystem::remove_all(dir);

  PlanOptions options;
  options.gpus = 1024;
  options.global_batch = 1536;
  auto start = Clock::now();
  PlanResult result = plan(*modelPreset("gpt3-175b"), *clusterPreset("dgx-a100"), options);
  double seconds = since(start);
  fmt::print("plan gpt3-175b on 1024 A100 (batch 1536): {} strategies, {} simulated, {} too big, {} invalid, in {:.2f} s "
             "(target < 10 s); best {} at {:.2f} s per step\n", result.considered, result.ranked.size(), result.too_big,
             result.invalid, seconds, result.ranked.front().strategy.label(), result.ranked.front().prediction.step_seconds);

  {
    PlanOptions big;
    big.gpus = 8192;
    big.global_batch = 2048;
    const auto wall = Clock::now();
    const std::clock_t cpu = std::clock();
    PlanResult llama = plan(*modelPreset("llama3-405b"), *clusterPreset("dgx-h100"), big);
    fmt::print("plan llama3-405b on 8192 H100 (batch 2048 x 8192): {} strategies, {} simulated, {} too big, in {:.2f} s "
               "({:.2f} s of CPU; target < 10 s); best {} at {:.2f} s per step\n", llama.considered, llama.ranked.size(),
               llama.too_big, since(wall), static_cast<double>(std::clock() - cpu) / CLOCKS_PER_SEC,
               llama.ranked.front().strategy.label(), llama.ranked.front().prediction.step_seconds);
  }
  printValidation();
  return 0;
}
