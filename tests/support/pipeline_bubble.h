// The pipeline bubble of one rank in one step, measured from a loaded trace: the share of the time
// between the rank's first and last compute kernel of the step's forward and backward passes
// (kernels on the GPU inside ProfilerStep#N whose launch call began inside a host NVTX range
// forward#N or backward#N; a call at the instant a range ends belongs to the next) when no compute
// kernel runs.
//
// The by-construction tests of the simulator use it until the analyzer's own pipeline-bubble
// analysis (metric bubble_pct, analyzer/analysis/pipeline_bubbles.cc) is merged; then they can
// compare that metric (per stage) with the same formulas instead.
#pragma once

#include <algorithm>
#include <string_view>
#include <vector>

#include "analyzer/model/run_trace.h"

namespace gpuxray::testing {

inline double measuredBubblePct(const model::RankTrace& rank, int step) {
  const std::string step_name = "ProfilerStep#" + std::to_string(step);
  int64_t step_start = 0, step_end = -1;
  std::vector<std::pair<int64_t, int64_t>> passes;
  for (const auto& range : rank.nvtx) {
    std::string_view name = rank.name(range.name_id);
    if (name == step_name) step_start = range.start_ns, step_end = range.end_ns;
    if (name.starts_with("forward#") || name.starts_with("backward#"))
      passes.emplace_back(range.start_ns, range.end_ns);
  }
  std::vector<std::pair<int64_t, int64_t>> kernels;
  for (const auto& a : rank.activities) {
    if (a.kind != model::ActivityKind::kCompute || a.start_ns < step_start || a.end_ns > step_end) continue;
    const model::HostCall* call = rank.launchOf(a.correlation_id);
    bool in_pass = call != nullptr && std::any_of(passes.begin(), passes.end(), [&](const auto& p) {
                     return call->start_ns >= p.first && call->start_ns < p.second;
                   });
    if (in_pass) kernels.emplace_back(a.start_ns, a.end_ns);
  }
  if (kernels.empty()) return 0;
  std::sort(kernels.begin(), kernels.end());
  int64_t first = kernels.front().first, last = first, busy = 0, covered = first;
  for (const auto& [start, end] : kernels) {
    last = std::max(last, end);
    if (end > covered) busy += end - std::max(start, covered), covered = end;
  }
  return 100.0 * static_cast<double>(last - first - busy) / static_cast<double>(last - first);
}

}  // namespace gpuxray::testing
