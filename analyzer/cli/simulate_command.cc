// `gpuxray simulate ... -o DIR`: predicts a parallel strategy's timeline and writes it as the
// per-rank trace files a real run would leave, for `analyze`, `info` and the Perfetto view.

#include <fmt/core.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "analyzer/cli/commands.h"
#include "analyzer/errors.h"
#include "analyzer/simulate/cost_model.h"
#include "analyzer/report/report.h"
#include "analyzer/simulate/engine.h"
#include "analyzer/simulate/fusion_report.h"
#include "analyzer/simulate/input_files.h"
#include "analyzer/simulate/layout.h"
#include "analyzer/simulate/presets.h"
#include "analyzer/simulate/trace_generation.h"

namespace gpuxray::cli {
namespace {

using namespace gpuxray::simulate;

struct SimulateOptions {
  std::string preset, config, model, cluster, strategy_file, output, run_id, schedule, recompute, precision, fusion,
      tp_comm_overlap;
  std::optional<int> nodes, tp, pp, dp, cp, micro_batch_size, micro_batches, global_batch, chunks, zero, steps;
  std::optional<uint64_t> seed;
  std::optional<double> jitter;
  bool sequence_parallel = false, no_sequence_parallel = false, no_overlap = false, no_flash = false;
  std::vector<std::string> slow_links, stragglers;
  unsigned jobs = 0;
  std::vector<std::string> command_line;
};

// The inputs the options describe: a preset or config file, then --model/--cluster/--strategy,
// then single strategy flags and perturbations on top.
SimulationInputs simulationInputsFrom(const SimulateOptions& o) {
  SimulationInputs in;
  if (!o.preset.empty() && !o.config.empty()) throw UsageError("give either --preset or --config, not both");
  if (!o.preset.empty()) {
    auto preset = runPreset(o.preset);
    if (!preset) throw UsageError(fmt::format("--preset '{}': no such preset (presets: {})", o.preset,
                                              joinNames(runPresetNames())));
    in = preset->inputs;
  } else if (!o.config.empty()) {
    in = loadConfig(o.config);
  } else if (o.model.empty() || o.cluster.empty()) {
    throw UsageError(fmt::format("give --preset ({}), --config FILE, or --model and --cluster",
                                 joinNames(runPresetNames())));
  }
  if (!o.model.empty()) in.model = loadModel(o.model, in.model_source);
  if (!o.cluster.empty()) in.cluster = loadCluster(o.cluster, in.cluster_source);
  if (!o.strategy_file.empty()) {
    in.strategy = loadStrategy(o.strategy_file);
    in.strategy_source = o.strategy_file;
  }
  auto& s = in.strategy;
  bool flags = false;
  auto set = [&](const std::optional<int>& value, int& target) {
    if (value) target = *value, flags = true;
  };
  set(o.tp, s.tp);
  set(o.pp, s.pp);
  set(o.dp, s.dp);
  set(o.cp, s.cp);
  set(o.micro_batch_size, s.micro_batch_size);
  set(o.micro_batches, s.micro_batches);
  set(o.chunks, s.chunks);
  set(o.zero, s.zero_stage);
  if (o.global_batch) {
    if (o.micro_batches) throw UsageError("give either --micro-batches or --global-batch, not both");
    if (*o.global_batch % (s.micro_batch_size * s.dp) != 0)
      throw UsageError(fmt::format("--global-batch {} is not a multiple of micro-batch size x DP = {}", *o.global_batch,
                                   s.micro_batch_size * s.dp));
    s.micro_batches = *o.global_batch / (s.micro_batch_size * s.dp);
    flags = true;
  }
  if (!o.schedule.empty()) {
    auto schedule = parseSchedule(o.schedule);
    if (!schedule) throw UsageError(fmt::format("--schedule '{}': expected gpipe, 1f1b or interleaved", o.schedule));
    s.schedule = *schedule;
    if (s.schedule != Schedule::kInterleaved && !o.chunks) s.chunks = 1;
    flags = true;
  }
  if (!o.recompute.empty()) {
    auto recompute = parseRecompute(o.recompute);
    if (!recompute) throw UsageError(fmt::format("--recompute '{}': expected none, selective or full", o.recompute));
    s.recompute = *recompute;
    flags = true;
  }
  if (!o.precision.empty()) {
    auto precision = parsePrecision(o.precision);
    if (!precision) throw UsageError(fmt::format("--precision '{}': expected bf16 or fp8", o.precision));
    s.precision = *precision;
    flags = true;
  }
  if (!o.fusion.empty()) {
    auto fusion = parseFusion(o.fusion);
    if (!fusion) throw UsageError(fmt::format("--fusion '{}': expected none, default or all", o.fusion));
    s.fusion = *fusion;
    flags = true;
  }
  if (!o.tp_comm_overlap.empty()) {
    auto overlap = parseTpOverlap(o.tp_comm_overlap);
    if (!overlap)
      throw UsageError(fmt::format("--tp-comm-overlap '{}': expected none, pipeline or ring", o.tp_comm_overlap));
    s.tp_comm_overlap = *overlap;
    flags = true;
  }
  if (o.sequence_parallel) s.sequence_parallel = true, flags = true;
  if (o.no_sequence_parallel) s.sequence_parallel = false, flags = true;
  if (o.no_overlap) s.overlap_grad_reduce = false, flags = true;
  if (o.no_flash) s.flash_attention = false, flags = true;
  if (flags) in.strategy_source = in.strategy_source == "defaults" ? "command line" : in.strategy_source + " and command line";
  if (o.nodes) in.cluster.nodes = *o.nodes;
  if (in.cluster.nodes == 0) in.cluster.nodes = (s.world() + in.cluster.gpus_per_node - 1) / in.cluster.gpus_per_node;
  for (const auto& text : o.slow_links) in.perturbations.slow_links.push_back(parseSlowLink(text));
  for (const auto& text : o.stragglers) in.perturbations.stragglers.push_back(parseStraggler(text));
  if (o.jitter) in.perturbations.jitter_pct = *o.jitter;
  if (o.steps) in.steps = *o.steps;
  if (o.seed) in.seed = *o.seed;
  if (!o.run_id.empty()) in.run_id = o.run_id;
  if (in.run_id.empty()) in.run_id = fmt::format("sim-{}-{}gpu", in.model.name, s.world());
  return in;
}

ExitCode runSimulate(const SimulateOptions& options) {
  auto begin = std::chrono::steady_clock::now();
  SimulationInputs in = simulationInputsFrom(options);
  validate(in);
  CostModel cost(in);
  cost.checkMemoryFits();
  Layout layout(in);
  Timeline timeline(cost, layout);
  Prediction p = timeline.predict();
  GenerationOptions generation;
  generation.directory = options.output;
  generation.threads = options.jobs;
  generation.command_line = options.command_line;
  if (isatty(STDERR_FILENO)) {
    generation.progress = [](size_t done, size_t total) {
      if (total >= 8) fmt::print(stderr, "\rwriting trace files: {}/{}{}", done, total, done == total ? "\n" : "");
    };
  }
  GenerationResult written = writeTraces(cost, layout, timeline, generation);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  fmt::print("simulated {} ({:.1f}B parameters) on {} x {} {} GPUs: {}\n", in.model.name,
             static_cast<double>(in.model.parameters()) / 1e9, in.cluster.nodes, in.cluster.gpus_per_node,
             in.cluster.gpu.name, in.strategy.label());
  fmt::print("predicted step {:.3f} s, {:.0f} tokens/s, {:.1f} TFLOP/s per GPU (MFU {:.1f} %), pipeline bubble "
             "{:.1f} %, exposed communication {:.1f} %, {:.1f} GiB per GPU\n",
             p.step_seconds, p.tokens_per_second, p.model_tflops_per_gpu, p.mfu_pct, p.bubble_pct, p.exposed_comm_pct,
             static_cast<double>(p.memory_per_gpu) / (1ull << 30));
  if (!options.fusion.empty()) {
    // The what-if against no fusion (or, asked for none, against the default).
    const Fusion before = in.strategy.fusion == Fusion::kNone ? Fusion::kDefault : Fusion::kNone;
    report::Document document;
    document.schema = "gpuxray.fusion";
    document.title = "kernel fusion (docs/simulation.md)";
    report::Section section;
    section.id = "fusion";
    section.title = "HBM traffic";
    section.tables.push_back(fusionTable(compareFusion(in, before, in.strategy.fusion)));
    document.sections.push_back(section);
    const std::string text = report::renderText(document);
    std::fwrite(text.data(), 1, text.size(), stdout);
  }
  for (const auto& link : in.perturbations.slow_links)
    fmt::print("planted: {} NIC {} at {:.0f} % bandwidth\n", link.host, link.nic, link.factor * 100);
  for (const auto& s : in.perturbations.stragglers)
    fmt::print("planted: rank {} kernels x{:.2f}\n", s.rank, s.factor);
  fmt::print("wrote {} trace files ({} records, {:.1f} MiB, {} steps, run {}) to {} in {:.1f} s\n", written.files,
             written.records, static_cast<double>(written.bytes) / (1 << 20), in.steps, in.run_id, options.output,
             seconds);
  return ExitCode::kOk;
}

}  // namespace

CommandAction addSimulateCommand(CLI::App& app) {
  auto o = std::make_shared<SimulateOptions>();
  CLI::App* c = app.add_subcommand("simulate", "Predict a parallel strategy's timeline and write it as trace files");
  c->add_option("--preset", o->preset, "A whole run: " + joinNames(runPresetNames()));
  c->add_option("--config", o->config, "A JSON or YAML file with model, cluster, strategy and perturbations");
  c->add_option("--model", o->model, "Model preset (" + joinNames(modelPresetNames()) + ") or JSON/YAML file");
  c->add_option("--cluster", o->cluster, "Cluster preset (" + joinNames(clusterPresetNames()) + ") or JSON/YAML file");
  c->add_option("--nodes", o->nodes, "Nodes in the cluster (default: as many as the strategy needs)");
  c->add_option("--strategy", o->strategy_file, "A JSON or YAML file with the parallel strategy");
  c->add_option("--tp", o->tp, "Tensor-parallel size");
  c->add_option("--pp", o->pp, "Pipeline-parallel size");
  c->add_option("--dp", o->dp, "Data-parallel size");
  c->add_option("--cp", o->cp, "Context-parallel size (each sequence split over CP ranks, ring attention)");
  c->add_option("--precision", o->precision, "GEMM precision: bf16 (default) or fp8");
  c->add_option("--tp-comm-overlap", o->tp_comm_overlap,
                "Transformer Engine's overlap of the TP all-gathers and reduce-scatters with the GEMMs: none "
                "(default), pipeline or ring (needs --sequence-parallel)");
  c->add_option("--fusion", o->fusion, "Kernel fusion: none, default or all (prints HBM bytes and step time against none)");
  c->add_option("--micro-batch-size", o->micro_batch_size, "Sequences per micro-batch");
  c->add_option("--micro-batches", o->micro_batches, "Micro-batches per step and data-parallel replica");
  c->add_option("--global-batch", o->global_batch, "Sequences per step (sets --micro-batches)");
  c->add_option("--schedule", o->schedule, "gpipe, 1f1b or interleaved");
  c->add_option("--chunks", o->chunks, "Model chunks per stage (interleaved)");
  c->add_flag("--sequence-parallel", o->sequence_parallel, "Sequence parallelism");
  c->add_flag("--no-sequence-parallel", o->no_sequence_parallel, "No sequence parallelism");
  c->add_option("--recompute", o->recompute, "Activation recomputation: none, selective or full");
  c->add_option("--zero", o->zero, "ZeRO stage 0-2 (1 = distributed optimizer)");
  c->add_flag("--no-overlap-grad-reduce", o->no_overlap, "Reduce gradients after the backward, not during it");
  c->add_flag("--no-flash-attention", o->no_flash, "Attention as separate GEMMs, softmax and dropout");
  c->add_option("--slow-link", o->slow_links, "HOST:NIC=FACTOR, a NIC at FACTOR of its bandwidth (repeatable)");
  c->add_option("--straggler", o->stragglers, "RANK=FACTOR, a rank whose kernels take FACTOR times longer (repeatable)");
  c->add_option("--jitter", o->jitter, "Each kernel's time varies within +-PCT %");
  c->add_option("--steps", o->steps, "Training steps to simulate (default 3)");
  c->add_option("--seed", o->seed, "Seed of the jitter (default 1)");
  c->add_option("--run-id", o->run_id, "Run id in the trace headers");
  c->add_option("-o,--output", o->output, "Directory for the trace files")->required();
  c->add_option("-j,--jobs", o->jobs, "Files written at once (default: one per core)");
  return [o] {
    o->command_line = {"gpuxray", "simulate"};
    return runSimulate(*o);
  };
}

}  // namespace gpuxray::cli
