#include "analyzer/analysis/analysis_input.h"

#include <algorithm>

namespace gpuxray::analysis {

GpuTimeSets gpuTimeSetsOf(const model::RankTrace& rank) {
  std::vector<Interval> busy, compute, communication, memory;
  busy.reserve(rank.activities.size());
  for (const auto& a : rank.activities) {
    Interval i{a.start_ns, a.end_ns};
    switch (a.kind) {
      case model::ActivityKind::kCompute: compute.push_back(i); break;
      case model::ActivityKind::kCommunication: communication.push_back(i); break;
      case model::ActivityKind::kMemcpy:
      case model::ActivityKind::kMemset: memory.push_back(i); break;
      case model::ActivityKind::kSync:
      case model::ActivityKind::kHostOp: continue;  // not GPU work
    }
    busy.push_back(i);
  }
  return {unionOf(std::move(busy)), unionOf(std::move(compute)), unionOf(std::move(communication)),
          unionOf(std::move(memory))};
}

bool AnalysisInput::hasSteps() const {
  return std::any_of(steps.begin(), steps.end(), [](const auto& s) { return !s.empty(); });
}

Interval AnalysisInput::gpuSpan(const model::RankTrace& rank) {
  auto first = std::find_if(rank.activities.begin(), rank.activities.end(),
                            [](const model::GpuActivity& a) { return model::isGpuWork(a.kind); });
  if (first == rank.activities.end()) return {};
  int64_t end = first->end_ns;
  for (auto it = first; it != rank.activities.end(); ++it) {
    if (model::isGpuWork(it->kind)) end = std::max(end, it->end_ns);
  }
  return {first->start_ns, end};
}

std::vector<StepWindow> AnalysisInput::windowsOf(size_t r) const {
  if (r < steps.size() && !steps[r].empty()) return steps[r];
  return {StepWindow{-1, gpuSpan(run.ranks[r])}};
}

}  // namespace gpuxray::analysis
