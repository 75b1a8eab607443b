// NCCL operations grouped by what they are (communicator, function, bytes): how many, how long on
// the GPU, and the bandwidth they reached as nccl-tests reports it (docs/analyses.md): algorithm
// bandwidth = data size / time, bus bandwidth = that x the collective's factor, comparable with the
// links' speed whatever the collective and the number of ranks.

#include <fmt/core.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "analyzer/analysis/analyses.h"
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

}  // namespace

void analyzeCollectiveBandwidth(const AnalysisInput& input, report::Report& report) {
  const auto& run = input.run;
  auto& section = report.addSection("collective_bandwidth", "Collectives per rank: sizes and bandwidth");
  auto communicators = gatherCommunicators(run);
  using Signature = std::tuple<uint64_t, std::string, uint64_t>;
  std::map<Signature, Group> groups;
  uint64_t operations = 0, unsized = 0;
  for (size_t r = 0; r < run.ranks.size(); ++r) {
    const auto& rank = run.ranks[r];
    std::vector<StepWindow> windows = input.windowsOf(r);
    for (const auto& op : rank.nccl_ops) {
      if (!op.hasGpuTimes()) continue;
      bool in_steps = std::any_of(windows.begin(), windows.end(), [&](const StepWindow& w) {
        return op.gpu_start_ns < w.window.end && op.gpu_end_ns > w.window.start;
      });
      if (!in_steps) continue;
      ++operations;
      if (op.bytes == 0) ++unsized;
      Group& g = groups[{op.comm_hash, std::string(rank.name(op.func_id)), op.bytes}];
      g.durations.push_back(op.gpu_end_ns - op.gpu_start_ns);
      g.ranks.insert(rank.rank);
      g.total += op.gpu_end_ns - op.gpu_start_ns;
    }
  }
  if (operations == 0) {
    section.notes.push_back("No NCCL operations with GPU times in the trace: nothing to measure.");
    return;
  }
  section.notes.push_back(
      "Per communicator, operation and size, all ranks: GPU time per operation (median and fastest), and the bandwidth "
      "as nccl-tests reports it: algbw = data size / time, busbw = algbw x the collective's factor (2(n-1)/n for "
      "all-reduce, (n-1)/n for all-gather, reduce-scatter and all-to-all, 1 otherwise).");
  if (unsized > 0) {
    section.notes.push_back(fmt::format("{} of {} operations carry no size (the trace records no collective arguments "
                                        "for them): no bandwidth for those.", unsized, operations));
  }
  std::vector<std::pair<Signature, Group>> ranked(groups.begin(), groups.end());
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.second.total > b.second.total; });
  if (ranked.size() > input.options.top) ranked.resize(input.options.top);
  report::Table table{"operations", "Operations by GPU time (summed over ranks)",
                      {{"operation", "operation"}, {"communicator", "communicator"}, {"bytes", "bytes"},
                       {"count", "count"}, {"ranks", "ranks"}, {"time", "time"}, {"median", "median"},
                       {"fastest", "fastest"}, {"algbw", "algbw (median)"}, {"busbw", "busbw (median)"},
                       {"busbw_best", "busbw (fastest)"}},
                      {}};
  for (auto& [signature, g] : ranked) {
    const auto& [hash, function, bytes] = signature;
    auto found = communicators.find(hash);
    int32_t n = found != communicators.end() ? found->second.nranks : 0;
    std::string label = hash == 0 ? "unknown" : found != communicators.end() ? found->second.label() : fmt::format("{:#x}", hash);
    int64_t typical = median(g.durations);
    int64_t fastest = *std::min_element(g.durations.begin(), g.durations.end());
    // Unknown without the communicator's size.
    auto rule = model::busBandwidthRule(function, bytes, n);
    // Captured by copy: clang before 16 cannot capture structured bindings.
    auto bandwidth = [&, bytes = bytes](int64_t ns) {
      return rule && bytes > 0 && ns > 0 ? Cell::of(rule->algbw(ns), Unit::kBytesPerSecond) : Cell::of("n/a");
    };
    auto bus = [&, bytes = bytes](int64_t ns) {
      return rule && bytes > 0 && ns > 0 ? Cell::of(rule->busbw(ns), Unit::kBytesPerSecond) : Cell::of("n/a");
    };
    table.rows.push_back({Cell::of(function), Cell::of(label),
                          bytes > 0 ? Cell::of(static_cast<double>(bytes), Unit::kBytes) : Cell::of("unknown"),
                          Cell::of(static_cast<double>(g.durations.size()), Unit::kCount),
                          Cell::of(static_cast<double>(g.ranks.size()), Unit::kCount),
                          Cell::of(static_cast<double>(g.total), Unit::kNanoseconds),
                          Cell::of(static_cast<double>(typical), Unit::kNanoseconds),
                          Cell::of(static_cast<double>(fastest), Unit::kNanoseconds), bandwidth(typical), bus(typical),
                          bus(fastest)});
  }
  section.tables.push_back(std::move(table));
}

}  // namespace gpuxray::analysis
