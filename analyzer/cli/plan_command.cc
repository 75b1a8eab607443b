// `gpuxray plan --model M --cluster C --gpus N`: every valid strategy that fits in memory,
// simulated and ranked by predicted step time, as text, JSON or Markdown.

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "analyzer/cli/commands.h"
#include "analyzer/errors.h"
#include "analyzer/report/html_report.h"
#include "analyzer/report/report.h"
#include "analyzer/simulate/calibration.h"
#include "analyzer/simulate/fusion_report.h"
#include "analyzer/simulate/input_files.h"
#include "analyzer/simulate/planner.h"
#include "analyzer/simulate/presets.h"

namespace gpuxray::cli {
namespace {

using namespace gpuxray::simulate;

struct PlanCommandOptions {
  std::string model, cluster, output_format = "text", precision = "bf16", tp_comm_overlap = "none";
  int gpus = 0;
  int global_batch = 512;
  size_t top = 10;
  std::string html_path;
};

ExitCode runPlan(const PlanCommandOptions& o) {
  if (o.output_format != "text" && o.output_format != "json" && o.output_format != "markdown")
    throw UsageError(fmt::format("--format '{}': expected text, json or markdown", o.output_format));
  if (!o.html_path.empty() && !report::htmlReportAvailable()) throw UsageError(report::htmlReportUnavailableReason());
  auto begin = std::chrono::steady_clock::now();
  std::string model_source, cluster_source;
  ModelSpec model = loadModel(o.model, model_source);
  ClusterSpec cluster = loadCluster(o.cluster, cluster_source);
  PlanOptions options;
  options.gpus = o.gpus;
  options.global_batch = o.global_batch;
  auto precision = parsePrecision(o.precision);
  if (!precision) throw UsageError(fmt::format("--precision '{}': expected bf16 or fp8", o.precision));
  options.precision = *precision;
  auto overlap = parseTpOverlap(o.tp_comm_overlap);
  if (!overlap)
    throw UsageError(fmt::format("--tp-comm-overlap '{}': expected none, pipeline or ring", o.tp_comm_overlap));
  options.tp_comm_overlap = *overlap;
  if (options.precision == Precision::kFp8 && !(cluster.gpu.peak_fp8_flops > 0))
    throw InputError(fmt::format("--precision fp8: {} has no FP8 peak (cluster.gpu.peak_fp8_tflops; cluster from {})",
                                 cluster.gpu.name, cluster_source));
  PlanResult result = plan(model, cluster, options);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();

  report::Document document;
  document.schema = "gpuxray.plan";
  document.title = fmt::format("gpuxray plan: {} ({:.1f}B parameters) on {} {} GPUs, global batch {} x {} tokens",
                               model.name, static_cast<double>(model.parameters()) / 1e9, o.gpus, cluster.gpu.name,
                               o.global_batch, model.sequence);
  document.notes.push_back(fmt::format(
      "{} strategies considered: {} simulated, {} do not fit in {:.0f} GiB, {} invalid (sizes that do not divide); "
      "{:.2f} s", result.considered, result.ranked.size(), result.too_big,
      static_cast<double>(cluster.gpu.hbm_bytes) / (1ull << 30), result.invalid, seconds));
  document.notes.push_back(
      "Predicted by gpuxray's simulator (docs/simulation.md); `gpuxray simulate` with a strategy writes its timeline.");
  if (auto calibration = calibrationFor(cluster.gpu.generation)) {
    document.notes.push_back(fmt::format("Uncertainty: step times +-{:g} % ({} efficiency set: {})",
                                         calibration->uncertainty_pct, calibration->generation, calibration->basis));
  } else {
    document.notes.push_back(fmt::format(
        "Uncertainty: unknown; {} has no calibrated efficiency set (cluster.gpu.generation: {}), so these use the "
        "cluster's efficiency factors as given", cluster.gpu.name, joinNames(calibratedGenerations())));
  }
  report::Section section;
  section.id = "plan";
  section.title = "Ranking";
  section.tables.push_back(planTable(result, o.top));
  document.sections.push_back(section);
  report::Section memory;
  memory.id = "plan_memory";
  memory.title = "Memory per GPU";
  memory.tables.push_back(planMemoryTable(result, o.top));
  if (!result.nearest_misses.empty()) memory.tables.push_back(tooBigTable(result, 5, cluster.gpu.hbm_bytes));
  document.sections.push_back(memory);
  if (!result.ranked.empty()) {
    // What fusion saves on the fastest strategy: none against Megatron's usual fusions.
    SimulationInputs best;
    best.model = model;
    best.cluster = cluster;
    best.cluster.nodes = std::max(1, o.gpus / cluster.gpus_per_node);
    if (o.gpus < cluster.gpus_per_node) best.cluster.gpus_per_node = o.gpus;
    best.strategy = result.ranked.front().strategy;
    best.strategy.flash_attention = true;
    best.steps = 1;
    report::Section fusion;
    fusion.id = "fusion";
    fusion.title = "Kernel fusion of the fastest strategy";
    if (best.strategy.cp == 1) fusion.tables.push_back(fusionTable(compareFusion(best, Fusion::kNone, Fusion::kDefault)));
    else fusion.notes.push_back("context parallelism needs flash attention, so there is no unfused variant to compare");
    fusion.tables.push_back(fusionTable(compareFusion(best, Fusion::kDefault, Fusion::kAll)));
    document.sections.push_back(fusion);
  }
  if (result.ranked.empty())
    throw InputError(fmt::format("no strategy of {} fits on {} GPUs with global batch {} ({} too big, {} invalid)",
                                 model.name, o.gpus, o.global_batch, result.too_big, result.invalid));
  if (!o.html_path.empty()) report::writeHtml(o.html_path, report::renderJson(document), document.title);
  std::string rendered = o.output_format == "json"       ? report::renderJson(document)
                         : o.output_format == "markdown" ? report::renderMarkdown(document)
                                                         : report::renderText(document);
  std::fwrite(rendered.data(), 1, rendered.size(), stdout);
  return ExitCode::kOk;
}

}  // namespace

CommandAction addPlanCommand(CLI::App& app) {
  auto o = std::make_shared<PlanCommandOptions>();
  CLI::App* c = app.add_subcommand("plan", "Rank the parallel strategies of a model on N GPUs by predicted step time");
  c->add_option("--model", o->model, "Model preset (" + joinNames(modelPresetNames()) + ") or JSON/YAML file")
      ->required();
  c->add_option("--cluster", o->cluster, "Cluster preset (" + joinNames(clusterPresetNames()) + ") or JSON/YAML file")
      ->required();
  c->add_option("--gpus", o->gpus, "GPUs to use")->required();
  c->add_option("--global-batch", o->global_batch, "Sequences per step (default 512)");
  c->add_option("--top", o->top, "Rows in the table (default 10)");
  c->add_option("--format", o->output_format, "text (default), json or markdown");
  c->add_option("--precision", o->precision, "GEMM precision of every strategy: bf16 (default) or fp8");
  c->add_option("--tp-comm-overlap", o->tp_comm_overlap,
                "Transformer Engine's TP-communication overlap for every strategy with TP > 1: none (default), "
                "pipeline or ring");
  c->add_option("--html", o->html_path, "Also write the ranking drawn as one self-contained HTML page");
  return [o] { return runPlan(*o); };
}

}  // namespace gpuxray::cli
