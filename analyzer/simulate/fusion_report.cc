#include "analyzer/simulate/fusion_report.h"

#include <fmt/core.h>

#include "analyzer/simulate/cost_model.h"
#include "analyzer/simulate/engine.h"
#include "analyzer/simulate/layout.h"

namespace gpuxray::simulate {

FusionComparison compareFusion(const SimulationInputs& inputs, Fusion before, Fusion after) {
  FusionComparison result;
  result.before = before, result.after = after;
  for (Fusion fusion : {before, after}) {
    SimulationInputs in = inputs;
    in.perturbations = {};
    in.strategy.fusion = fusion;
    CostModel cost(in);
    const double per_step = static_cast<double>(cost.layersPerChunk()) * in.strategy.chunks * in.strategy.micro_batches;
    const std::vector<LayerTraffic> traffic = cost.layerTraffic();
    if (result.groups.empty())
      for (const auto& t : traffic) result.groups.push_back({t.group, 0, 0});
    for (size_t i = 0; i < traffic.size(); ++i)
      (fusion == before ? result.groups[i].before_bytes : result.groups[i].after_bytes) = traffic[i].bytes * per_step;
    Layout layout(in);
    const double seconds = Timeline(cost, layout).predict().step_seconds;
    (fusion == before ? result.before_step_seconds : result.after_step_seconds) = seconds;
  }
  return result;
}

report::Table fusionTable(const FusionComparison& c) {
  using report::Cell;
  using report::Unit;
  report::Table table;
  table.id = "fusion";
  table.title = fmt::format(
      "Kernel fusion {} -> {}: HBM bytes per step and GPU of the transformer layers, by kernel "
      "group; step {:.4g} s -> {:.4g} s ({:+.1f} %)",
      fusionName(c.before), fusionName(c.after), c.before_step_seconds, c.after_step_seconds,
      100 * (c.after_step_seconds / c.before_step_seconds - 1));
  table.columns = {{"group", "kernels"},
                   {"before_bytes", fusionName(c.before)},
                   {"after_bytes", fusionName(c.after)},
                   {"change_pct", "change"}};
  double before = 0, after = 0;
  for (const auto& g : c.groups) {
    before += g.before_bytes, after += g.after_bytes;
    table.rows.push_back(
        {Cell::of(g.name), Cell::of(g.before_bytes, Unit::kBytes), Cell::of(g.after_bytes, Unit::kBytes),
         Cell::of(g.before_bytes > 0 ? 100 * (g.after_bytes / g.before_bytes - 1) : 0, Unit::kPercent)});
  }
  table.rows.push_back({Cell::of("all"), Cell::of(before, Unit::kBytes), Cell::of(after, Unit::kBytes),
                        Cell::of(before > 0 ? 100 * (after / before - 1) : 0, Unit::kPercent)});
  return table;
}

}  // namespace gpuxray::simulate
