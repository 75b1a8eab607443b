// NCCL operations grouped by what they are (communicator, function, bytes): how many, how long on
// the GPU, and the bandwidth they reached as nccl-tests reports it (docs/analyses.md): algorithm
// bandwidth = data size / time, bus bandwidth = that x the collective's factor, comparable with the
// links' speed whatever the collective and the number of ranks.

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "analyzer/analysis/analyses.h"
#include "analyzer/analysis/collectives.h"
#include "analyzer/analysis/communicators.h"
#include "analyzer/analysis/statistics.h"
#include "analyzer/model/nccl_conventions.h"

namespace gpuxray::analysis {
namespace {

using report::Cell;
using report::Unit;

struct Group {
  std::vector<int64_t> durations;
  std::set<int32_t> ranks;
  int64_t total = 0;
};

report::ResultValue resultValue(const CollectiveBandwidthResult& result) {
  using report::ResultValue;
  ResultValue groups = ResultValue::array();
  for (const RankOperationGroup& g : result.groups) {
    ResultValue ranks = ResultValue::array();
    for (int32_t rank : g.ranks) ranks.push(ResultValue::integer(rank));
    auto it = result.communicators.find(g.comm_hash);
    groups.push(ResultValue::object()
                    .set("communicator",
                         communicatorValue(g.comm_hash, it != result.communicators.end() ? &it->second : nullptr))
                    .set("operation", ResultValue::text(g.operation))
                    .set("bytes", g.bytes > 0 ? ResultValue::integer(static_cast<int64_t>(g.bytes)) : ResultValue())
                    .set("count", ResultValue::integer(static_cast<int64_t>(g.count)))
                    .set("ranks", std::move(ranks))
                    .set("time_ns", ResultValue::integer(g.time_ns))
                    .set("median_ns", ResultValue::integer(g.median_ns))
                    .set("fastest_ns", ResultValue::integer(g.fastest_ns))
                    .set("algbw_median_bytes_per_s", ResultValue::number(g.algbw_median))
                    .set("busbw_median_bytes_per_s", ResultValue::number(g.busbw_median))
                    .set("busbw_fastest_bytes_per_s", ResultValue::number(g.busbw_fastest)));
  }
  ResultValue ranks = ResultValue::array();
  for (const RankCollectiveSummary& r : result.ranks) {
    ranks.push(ResultValue::object()
                   .set("rank", ResultValue::integer(r.rank))
                   .set("operations", ResultValue::integer(static_cast<int64_t>(r.operations)))
                   .set("unsized", ResultValue::integer(static_cast<int64_t>(r.unsized)))
                   .set("time_ns", ResultValue::integer(r.time_ns))
                   .set("bytes", ResultValue::integer(static_cast<int64_t>(r.bytes))));
  }
  return ResultValue::object()
      .set("operations", ResultValue::integer(static_cast<int64_t>(result.operations)))
      .set("unsized", ResultValue::integer(static_cast<int64_t>(result.unsized)))
      .set("groups", std::move(groups))
      .set("ranks", std::move(ranks));
}

}  // namespace

CollectiveBandwidthResult computeCollectiveBandwidth(const AnalysisInput& input) {
  const auto& run = input.run;
  CollectiveBandwidthResult result;
  result.communicators = gatherCommunicators(run);
  using Signature = std::tuple<uint64_t, std::string, uint64_t>;
  std::map<Signature, Group> groups;
  for (size_t r = 0; r < run.ranks.size(); ++r) {
    const auto& rank = run.ranks[r];
    std::vector<StepWindow> windows = input.windowsOf(r);
    RankCollectiveSummary summary;
    summary.rank = rank.rank;
    for (const auto& op : rank.nccl_ops) {
      if (!op.hasGpuTimes()) continue;
      bool in_steps = std::any_of(windows.begin(), windows.end(), [&](const StepWindow& w) {
        return op.gpu_start_ns < w.window.end && op.gpu_end_ns > w.window.start;
      });
      if (!in_steps) continue;
      ++summary.operations;
      if (op.bytes == 0) ++summary.unsized;
      summary.time_ns += op.gpu_end_ns - op.gpu_start_ns;
      summary.bytes += op.bytes;
      Group& g = groups[{op.comm_hash, std::string(rank.name(op.func_id)), op.bytes}];
      g.durations.push_back(op.gpu_end_ns - op.gpu_start_ns);
      g.ranks.insert(rank.rank);
      g.total += op.gpu_end_ns - op.gpu_start_ns;
    }
    result.operations += summary.operations;
    result.unsized += summary.unsized;
    result.ranks.push_back(summary);
  }
  std::vector<std::pair<Signature, Group>> ranked(groups.begin(), groups.end());
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.second.total > b.second.total; });
  for (auto& [signature, g] : ranked) {
    const auto& [hash, function, bytes] = signature;
    RankOperationGroup out;
    out.comm_hash = hash;
    out.operation = function;
    out.bytes = bytes;
    out.count = g.durations.size();
    out.ranks.assign(g.ranks.begin(), g.ranks.end());
    out.time_ns = g.total;
    out.median_ns = median(g.durations);
    out.fastest_ns = *std::min_element(g.durations.begin(), g.durations.end());
    auto found = result.communicators.find(hash);
    int32_t n = found != result.communicators.end() ? found->second.nranks : 0;
    // Unknown without the communicator's size.
    if (auto rule = model::busBandwidthRule(function, bytes, n); rule && bytes > 0) {
      if (out.median_ns > 0) out.algbw_median = rule->algbw(out.median_ns);
      if (out.median_ns > 0) out.busbw_median = rule->busbw(out.median_ns);
      if (out.fastest_ns > 0) out.busbw_fastest = rule->busbw(out.fastest_ns);
    }
    result.groups.push_back(std::move(out));
  }
  return result;
}

void presentCollectiveBandwidth(const CollectiveBandwidthResult& result, size_t top, report::Report& report) {
  auto& section = report.addSection("collective_bandwidth", "Collectives per rank: sizes and bandwidth");
  report.addResult("collective_bandwidth", [&] { return resultValue(result); });
  if (result.operations == 0) {
    section.notes.push_back("No NCCL operations with GPU times in the trace: nothing to measure.");
    return;
  }
  section.notes.push_back(
      "Per communicator, operation and size, all ranks: GPU time per operation (median and fastest), and the bandwidth "
      "as nccl-tests reports it: algbw = data size / time, busbw = algbw x the collective's factor (2(n-1)/n for "
      "all-reduce, (n-1)/n for all-gather, reduce-scatter and all-to-all, 1 otherwise).");
  if (result.unsized > 0) {
    section.notes.push_back(
        fmt::format("{} of {} operations carry no size (the trace records no collective arguments "
                    "for them): no bandwidth for those.",
                    result.unsized, result.operations));
  }
  report::Table table{"operations",
                      "Operations by GPU time (summed over ranks)",
                      {{"operation", "operation"},
                       {"communicator", "communicator"},
                       {"bytes", "bytes"},
                       {"count", "count"},
                       {"ranks", "ranks"},
                       {"time", "time"},
                       {"median", "median"},
                       {"fastest", "fastest"},
                       {"algbw", "algbw (median)"},
                       {"busbw", "busbw (median)"},
                       {"busbw_best", "busbw (fastest)"}},
                      {}};
  for (size_t i = 0; i < result.groups.size() && i < top; ++i) {
    const RankOperationGroup& g = result.groups[i];
    auto found = result.communicators.find(g.comm_hash);
    std::string label = g.comm_hash == 0                      ? "unknown"
                        : found != result.communicators.end() ? found->second.label()
                                                              : fmt::format("{:#x}", g.comm_hash);
    auto bandwidth = [](double value) {
      return std::isnan(value) ? Cell::of("n/a") : Cell::of(value, Unit::kBytesPerSecond);
    };
    table.rows.push_back({Cell::of(g.operation), Cell::of(label),
                          g.bytes > 0 ? Cell::of(static_cast<double>(g.bytes), Unit::kBytes) : Cell::of("unknown"),
                          Cell::of(static_cast<double>(g.count), Unit::kCount),
                          Cell::of(static_cast<double>(g.ranks.size()), Unit::kCount),
                          Cell::of(static_cast<double>(g.time_ns), Unit::kNanoseconds),
                          Cell::of(static_cast<double>(g.median_ns), Unit::kNanoseconds),
                          Cell::of(static_cast<double>(g.fastest_ns), Unit::kNanoseconds), bandwidth(g.algbw_median),
                          bandwidth(g.busbw_median), bandwidth(g.busbw_fastest)});
  }
  section.tables.push_back(std::move(table));
}

void analyzeCollectiveBandwidth(const AnalysisInput& input, report::Report& report) {
  presentCollectiveBandwidth(computeCollectiveBandwidth(input), input.options.top, report);
}

}  // namespace gpuxray::analysis
