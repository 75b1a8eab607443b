#include "analyzer/simulate/planner.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>

#include "analyzer/errors.h"
#include "analyzer/simulate/cost_model.h"
#include "analyzer/simulate/layout.h"

namespace gpuxray::simulate {
namespace {

// Context parallelism pays off for long sequences: each rank keeps at least this many tokens
// (NeMo's recipes start at CP2 for sequence 8192).
constexpr int kMinimumContextShare = 2048;

std::vector<int> divisors(int n) {
  std::vector<int> found;
  for (int d = 1; d <= n; ++d)
    if (n % d == 0) found.push_back(d);
  return found;
}

std::vector<StrategySpec> enumerate(const ModelSpec& model, const ClusterSpec& cluster, const PlanOptions& options) {
  std::vector<StrategySpec> all;
  // Stages of equal size, or one layer less on the first and last (validate()'s rule).
  auto splits = [&](int vstages) {
    const int missing = (model.layers + vstages - 1) / vstages * vstages - model.layers;
    return vstages <= model.layers && (missing == 0 || (missing <= 2 && vstages >= 2));
  };
  for (int tp : divisors(cluster.gpus_per_node)) {
    if (model.heads % tp != 0 || options.gpus % tp != 0) continue;
    for (int pp : divisors(options.gpus / tp)) {
      if (!splits(pp)) continue;
      for (int cp : options.context_parallel) {
        if (options.gpus % (tp * pp * cp) != 0 || (cp > 1 && model.sequence % (2 * cp) != 0)) continue;
        if (cp > 1 && model.sequence / cp < kMinimumContextShare) continue;
      const int dp = options.gpus / (tp * pp * cp);
      for (int mbs : options.micro_batch_sizes) {
        if (options.global_batch % (mbs * dp) != 0) continue;
        const int m = options.global_batch / (mbs * dp);
        std::vector<std::pair<Schedule, int>> schedules{{Schedule::kOneFOneB, 1}};
        if (pp > 1) {
          for (int v : {2, 3, 4})
            if (splits(pp * v) && m % pp == 0) schedules.push_back({Schedule::kInterleaved, v});
        }
        for (auto [schedule, chunks] : schedules) {
          for (Recompute recompute : {Recompute::kNone, Recompute::kFull}) {
            for (int zero : options.zero_stages) {
              if (zero > 0 && dp * cp == 1) continue;
              StrategySpec s;
              s.tp = tp, s.pp = pp, s.dp = dp, s.cp = cp;
              s.precision = options.precision;
              s.micro_batch_size = mbs, s.micro_batches = m;
              s.schedule = schedule, s.chunks = chunks;
              s.sequence_parallel = tp > 1;
              s.tp_comm_overlap = tp > 1 ? options.tp_comm_overlap : TpOverlap::kNone;
              s.recompute = recompute;
              s.zero_stage = zero;
              all.push_back(s);
            }
          }
        }
      }
      }
    }
  }
  return all;
}

}  // namespace

PlanResult plan(const ModelSpec& model, const ClusterSpec& cluster_in, const PlanOptions& options) {
  if (options.gpus <= 0) throw UsageError("--gpus: expected a positive number of GPUs");
  if (options.gpus % cluster_in.gpus_per_node != 0 && options.gpus > cluster_in.gpus_per_node)
    throw InputError(fmt::format("--gpus {} does not fill whole nodes of {} GPUs ({})", options.gpus,
                                 cluster_in.gpus_per_node, cluster_in.name));
  ClusterSpec cluster = cluster_in;
  cluster.nodes = std::max(1, options.gpus / cluster.gpus_per_node);
  if (options.gpus < cluster.gpus_per_node) cluster.gpus_per_node = options.gpus;

  PlanResult result;
  result.device_memory_bytes = cluster.gpu.hbm_bytes;
  for (const StrategySpec& strategy : enumerate(model, cluster, options)) {
    ++result.considered;
    SimulationInputs in;
    in.model = model;
    in.cluster = cluster;
    in.strategy = strategy;
    in.steps = 1;
    in.model_source = in.cluster_source = in.strategy_source = "plan";
    try {
      validate(in);
    } catch (const InputError&) {
      ++result.invalid;
      continue;
    }
    CostModel cost(in);
    MemoryUse worst;
    for (int stage = 0; stage < strategy.pp; ++stage) {
      MemoryUse use = cost.memory(stage);
      if (use.total() > worst.total()) worst = use;
    }
    if (worst.total() > cluster.gpu.hbm_bytes) {
      ++result.too_big;
      result.nearest_misses.push_back({strategy, {}, worst});
      continue;
    }
    Layout layout(in);
    Timeline timeline(cost, layout);
    result.ranked.push_back({strategy, timeline.predict(), worst});
  }
  std::stable_sort(result.ranked.begin(), result.ranked.end(), [](const auto& a, const auto& b) {
    return a.prediction.step_seconds < b.prediction.step_seconds;
  });
  std::stable_sort(result.nearest_misses.begin(), result.nearest_misses.end(),
                   [](const auto& a, const auto& b) { return a.memory.total() < b.memory.total(); });
  return result;
}

report::Table planTable(const PlanResult& result, size_t top) {
  using report::Cell;
  using report::Unit;
  report::Table table;
  table.id = "plan";
  table.title = "Strategies by predicted step time";
  table.columns = {{"rank", "#"},
                   {"strategy", "strategy"},
                   {"step_time_ns", "step time"},
                   {"tokens_per_s", "tokens/s"},
                   {"mfu_pct", "MFU"},
                   {"bubble_pct", "bubble"},
                   {"exposed_comm_pct", "exposed comm"},
                   {"exposed_tp_pct", "of which TP"},
                   {"exposed_dp_pct", "DP"},
                   {"memory_per_gpu_bytes", "memory/GPU"},
                   {"hottest_link_pct", "hottest link"},
                   {"hottest_link", "link"}};
  for (size_t i = 0; i < result.ranked.size() && i < top; ++i) {
    const auto& c = result.ranked[i];
    const auto& p = c.prediction;
    table.rows.push_back({Cell::of(static_cast<double>(i + 1), Unit::kCount), Cell::of(c.strategy.label()),
                          Cell::of(p.step_seconds * 1e9, Unit::kNanoseconds), Cell::of(std::round(p.tokens_per_second), Unit::kCount),
                          Cell::of(p.mfu_pct, Unit::kPercent), Cell::of(p.bubble_pct, Unit::kPercent),
                          Cell::of(p.exposed_comm_pct, Unit::kPercent), Cell::of(p.exposed_tp_pct, Unit::kPercent),
                          Cell::of(p.exposed_dp_pct, Unit::kPercent),
                          Cell::of(static_cast<double>(p.memory_per_gpu), Unit::kBytes),
                          Cell::of(p.hottest_link_pct, Unit::kPercent), Cell::of(p.hottest_link)});
  }
  return table;
}

namespace {

void addMemoryColumns(report::Table& table) {
  table.columns.insert(table.columns.end(), {{"weights_bytes", "weights"},
                                             {"gradients_bytes", "gradients"},
                                             {"optimizer_bytes", "optimizer"},
                                             {"activations_bytes", "activations"},
                                             {"workspace_bytes", "workspace"},
                                             {"total_bytes", "total"}});
}

void addMemoryCells(std::vector<report::Cell>& row, const MemoryUse& m) {
  using report::Cell;
  using report::Unit;
  for (uint64_t bytes : {m.weights, m.gradients, m.optimizer, m.activations, m.workspace, m.total()})
    row.push_back(Cell::of(static_cast<double>(bytes), Unit::kBytes));
}

}  // namespace

report::Table planMemoryTable(const PlanResult& result, size_t top) {
  using report::Cell;
  report::Table table;
  table.id = "plan_memory";
  table.title = "Memory per GPU of the fastest strategies (the pipeline stage that needs most)";
  table.columns = {{"strategy", "strategy"}};
  addMemoryColumns(table);
  table.columns.push_back({"device_bytes", "GPU memory"});
  for (size_t i = 0; i < result.ranked.size() && i < top; ++i) {
    std::vector<Cell> row{Cell::of(result.ranked[i].strategy.label())};
    addMemoryCells(row, result.ranked[i].memory);
    row.push_back(Cell::of(static_cast<double>(result.device_memory_bytes), report::Unit::kBytes));
    table.rows.push_back(row);
  }
  return table;
}

report::Table tooBigTable(const PlanResult& result, size_t top, uint64_t hbm_bytes) {
  using report::Cell;
  report::Table table;
  table.id = "plan_too_big";
  table.title = fmt::format("Closest strategies that do not fit in {:.0f} GiB", static_cast<double>(hbm_bytes) / (1ull << 30));
  table.columns = {{"strategy", "strategy"}};
  addMemoryColumns(table);
  for (size_t i = 0; i < result.nearest_misses.size() && i < top; ++i) {
    std::vector<Cell> row{Cell::of(result.nearest_misses[i].strategy.label())};
    addMemoryCells(row, result.nearest_misses[i].memory);
    table.rows.push_back(row);
  }
  return table;
}

}  // namespace gpuxray::simulate
