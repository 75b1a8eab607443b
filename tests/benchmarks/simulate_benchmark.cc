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
    else {
      fmt::print(stderr, "usage: simulate_benchmark [--write-ranks N] [--dir DIR] [--keep]\n");
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

  fmt::print("\n| run | source | setup | published | predicted | error |\n|---|---|---|---|---|---|\n");
  double worst = 0, total = 0;
  auto runs = gpuxray::testing::publishedRuns();
  for (const auto& run : runs) {
    CostModel cost(run.inputs);
    Layout layout(run.inputs);
    Prediction p = Timeline(cost, layout).predict();
    double predicted = run.is_tflops ? gpuxray::testing::narayananTflopsPerGpu(run.inputs, p.step_seconds) : p.step_seconds;
    double error = 100 * (predicted / run.published - 1);
    worst = std::max(worst, std::fabs(error));
    total += std::fabs(error);
    const char* unit = run.is_tflops ? " TFLOP/s" : " s";
    fmt::print("| {} | {} | {} GPUs, {} | {:g}{} | {:.2f}{} | {:+.1f} % |\n", run.label, run.source,
               run.inputs.strategy.world(), run.inputs.strategy.label(), run.published, unit, predicted, unit, error);
  }
  fmt::print("\nmean |error| {:.1f} %, worst {:.1f} %\n", total / static_cast<double>(runs.size()), worst);
  return 0;
}
