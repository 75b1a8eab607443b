#include "analyzer/analysis/analysis_input.h"

#include <algorithm>
#include <iterator>

#include "analyzer/analysis/rank_digest.h"
#include "analyzer/analysis/statistics.h"

namespace gpuxray::analysis {

namespace {

int64_t launchStartOf(const model::RankTrace& rank, const model::GpuActivity& a) {
  const model::HostCall* call = a.correlation_id != 0 ? rank.launchOf(a.correlation_id) : nullptr;
  return call != nullptr ? call->start_ns : kNoLaunch;
}

// First start to last end of the GPU work added, in the activities' order (AnalysisInput::gpuSpan).
struct WorkSpan {
  Interval span;
  bool any = false;
  void add(const model::GpuActivity& work) {
    if (!any) span = {work.start_ns, work.end_ns}, any = true;
    span.end = std::max(span.end, work.end_ns);
  }
};

}  // namespace

GpuTimeSets gpuTimeSetsOf(const model::RankTrace& rank) {
  const auto& activities = rank.activities;
  auto by_start = [](const model::GpuActivity& a, const model::GpuActivity& b) { return a.start_ns < b.start_ns; };
  if (!std::is_sorted(activities.begin(), activities.end(), by_start)) {
    std::vector<Interval> busy, compute, communication, memory;
    for (const auto& a : activities) {
      if (!model::isGpuWork(a.kind)) continue;
      Interval i{a.start_ns, a.end_ns};
      busy.push_back(i);
      if (a.kind == model::ActivityKind::kCompute) compute.push_back(i);
      if (a.kind == model::ActivityKind::kCommunication) communication.push_back(i);
      if (a.kind == model::ActivityKind::kMemcpy || a.kind == model::ActivityKind::kMemset) memory.push_back(i);
    }
    std::vector<int64_t> launch_start;
    launch_start.reserve(activities.size());
    for (const auto& a : activities) launch_start.push_back(launchStartOf(rank, a));
    return {unionOf(std::move(busy)), unionOf(std::move(compute)), unionOf(std::move(communication)),
            unionOf(std::move(memory)), AnalysisInput::gpuSpan(rank), std::move(launch_start)};
  }
  // Activities come by start, so each set is merged as it is walked (as unionOf merges), in one walk
  // that also finds the span and the launches. Each set has room for every activity: its memory is
  // touched only as far as it is filled, and the sets live only while their rank is digested.
  GpuTimeSets sets;
  IntervalSet* const all[] = {&sets.busy, &sets.compute, &sets.communication, &sets.memory};
  for (IntervalSet* set : all) set->reserve(activities.size());
  auto setOf = [](model::ActivityKind kind) -> size_t {
    return kind == model::ActivityKind::kCompute ? 1 : kind == model::ActivityKind::kCommunication ? 2 : 3;
  };
  auto add = [&](size_t s, const model::GpuActivity& a) {
    IntervalSet& set = *all[s];
    if (!set.empty() && a.start_ns <= set.back().end) {
      set.back().end = std::max(set.back().end, a.end_ns);
    } else {
      set.push_back({a.start_ns, a.end_ns});
    }
  };
  sets.launch_start.resize(activities.size());
  WorkSpan span;
  for (size_t i = 0; i < activities.size(); ++i) {
    const model::GpuActivity& a = activities[i];
    sets.launch_start[i] = launchStartOf(rank, a);
    if (!model::isGpuWork(a.kind)) continue;
    span.add(a);
    if (a.end_ns <= a.start_ns) continue;
    add(0, a);
    add(setOf(a.kind), a);
  }
  sets.span = span.span;
  return sets;
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
  WorkSpan span;
  for (const model::GpuActivity& a : rank.activities) {
    if (model::isGpuWork(a.kind)) span.add(a);
  }
  return span.span;
}

std::vector<StepWindow> AnalysisInput::windowsOf(size_t r) const {
  if (r < steps.size() && !steps[r].empty()) return steps[r];
  return {StepWindow{-1, digests != nullptr ? digest(r).gpu_span : gpuSpan(run.ranks[r])}};
}

RankWindows::RankWindows(const AnalysisInput& input) {
  auto by_start = [](const StepWindow& a, const StepWindow& b) { return a.window.start < b.window.start; };
  windows_held_.reserve(input.run.ranks.size());  // no reallocation: windows_ points into it
  for (size_t r = 0; r < input.run.ranks.size(); ++r) {
    if (r < input.steps.size() && !input.steps[r].empty() &&
        std::is_sorted(input.steps[r].begin(), input.steps[r].end(), by_start)) {
      windows_.emplace_back(input.steps[r]);
      continue;
    }
    windows_held_.push_back(input.windowsOf(r));
    std::sort(windows_held_.back().begin(), windows_held_.back().end(), by_start);
    windows_.emplace_back(windows_held_.back());
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
