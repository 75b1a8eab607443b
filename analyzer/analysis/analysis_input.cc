#include "analyzer/analysis/analysis_input.h"

#include <algorithm>

namespace gpuxray::analysis {

GpuTimeSets gpuTimeSetsOf(const model::RankTrace& rank) {
  std::vector<Interval> busy, compute, communication, memory;
  busy.reserve(rank.activities.size());
  for (const auto& a : rank.activities) {
    Interval i{a.start_ns, a.end_ns};
    busy.push_back(i);
    switch (a.kind) {
      case model::ActivityKind::kCompute: compute.push_back(i); break;
      case model::ActivityKind::kCommunication: communication.push_back(i); break;
      case model::ActivityKind::kMemcpy:
      case model::ActivityKind::kMemset: memory.push_back(i); break;
    }
  }
  return {unionOf(std::move(busy)), unionOf(std::move(compute)), unionOf(std::move(communication)),
          unionOf(std::move(memory))};
}

bool AnalysisInput::hasSteps() const {
  return std::any_of(steps.begin(), steps.end(), [](const auto& s) { return !s.empty(); });
}

Interval AnalysisInput::gpuSpan(const model::RankTrace& rank) {
  if (rank.activities.empty()) return {};
  int64_t end = rank.activities.front().end_ns;
  for (const auto& a : rank.activities) end = std::max(end, a.end_ns);
  return {rank.activities.front().start_ns, end};
}

std::vector<StepWindow> AnalysisInput::windowsOf(size_t r) const {
  if (r < steps.size() && !steps[r].empty()) return steps[r];
  return {StepWindow{-1, gpuSpan(run.ranks[r])}};
}

}  // namespace gpuxray::analysis
