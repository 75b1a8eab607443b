#include "analyzer/analysis/analysis_input.h"

#include <algorithm>
#include <iterator>

#include "analyzer/analysis/rank_digest.h"
#include "analyzer/analysis/statistics.h"

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

const CollectiveIndex& AnalysisInput::collectives() const {
  if (!collective_index) collective_index = std::make_shared<const CollectiveIndex>(matchOperations(run));
  return *collective_index;
}

const RankDigest& AnalysisInput::digest(size_t r) const {
  return (*digests)[r];
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
  return {StepWindow{-1, digests != nullptr ? digest(r).gpu_span : gpuSpan(run.ranks[r])}};
}

RankWindows::RankWindows(const AnalysisInput& input) {
  for (size_t r = 0; r < input.run.ranks.size(); ++r) {
    windows_.push_back(input.windowsOf(r));
    std::sort(windows_.back().begin(), windows_.back().end(),
              [](const StepWindow& a, const StepWindow& b) { return a.window.start < b.window.start; });
  }
  if (input.hasSteps()) {
    steps_ = 1;
    for (const auto& w : windows_) steps_ = std::max(steps_, w.size());
  }
  if (!windows_.empty()) {
    std::vector<int64_t> lengths;
    for (const auto& w : windows_.front()) lengths.push_back(w.window.length());
    median_length_ = median(std::move(lengths));
  }
}

bool RankWindows::contains(size_t r, int64_t t) const {
  if (r >= windows_.size()) return false;
  const auto& windows = windows_[r];
  auto after = std::upper_bound(windows.begin(), windows.end(), t,
                                [](int64_t time, const StepWindow& w) { return time < w.window.start; });
  return after != windows.begin() && t < std::prev(after)->window.end;
}

}  // namespace gpuxray::analysis
