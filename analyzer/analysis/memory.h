// Device memory over time per rank and device (docs/analyses.md, "Memory"): what the allocations and
// frees seen during the capture add up to, its peak, when and in which NVTX phase. The result is
// data; presentMemory turns it into the report's section, metrics and finding.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "analyzer/analysis/analysis_input.h"
#include "analyzer/report/report.h"

namespace gpuxray::analysis {

// Bytes in use on one device right after a change, on the run clock.
struct MemoryPoint {
  int64_t time_ns = 0;
  int64_t bytes = 0;
};

struct DeviceMemory {
  int32_t rank = -1;
  uint32_t device = 0;
  int64_t peak_bytes = 0;
  int64_t peak_at_ns = 0;  // on the run clock
  // The innermost NVTX range open at the peak, or "before any NVTX range".
  std::string peak_phase;
  double peak_pct_of_device = 0;  // NaN when the trace does not record the device's memory
  uint64_t allocations = 0;
  int64_t end_bytes = 0;  // in use at the end of the capture
  // The level after each change; past kMaxCurvePoints, the highest level of each run of consecutive
  // changes (so the peak is always a point).
  std::vector<MemoryPoint> curve;
  static constexpr size_t kMaxCurvePoints = 1024;
};

// The highest level reached inside the instances of one NVTX range name ("ProfilerStep#N").
struct PhasePeak {
  std::string phase;
  int64_t peak_bytes = 0;
};

struct MemoryResult {
  bool recorded = false;              // any rank has device memory changes
  int64_t origin_ns = 0;              // the run's first GPU activity or memory change: "at (from start)"
  std::vector<DeviceMemory> devices;  // by rank (run order), then device id
  // The device with the highest peak as % of its memory (or in bytes when no size is known).
  int32_t worst_rank = -1;
  double worst_pct = -1;  // <= 0: no device size known
  int64_t worst_bytes = 0;
  std::string worst_phase;
  // The worst rank's phases, highest peak first (all devices summed).
  std::vector<PhasePeak> worst_rank_phases;
};

// The run's first GPU activity or memory change, on the run clock: where memory times count from.
int64_t memoryOrigin(const AnalysisInput& input);

// At most `most` points: of each run of ceil(size / most) consecutive points, the one whose
// level(point) is highest (the first of equals), so the peak is always kept.
template <class Point, class Level>
std::vector<Point> keepHighest(std::vector<Point> curve, size_t most, Level level) {
  if (curve.size() <= most) return curve;
  size_t per_point = (curve.size() + most - 1) / most;
  std::vector<Point> kept;
  for (size_t first = 0; first < curve.size(); first += per_point) {
    auto begin = curve.begin() + static_cast<std::ptrdiff_t>(first);
    auto end = curve.begin() + static_cast<std::ptrdiff_t>(std::min(curve.size(), first + per_point));
    kept.push_back(*std::max_element(begin, end, [&](const auto& a, const auto& b) { return level(a) < level(b); }));
  }
  return kept;
}

MemoryResult computeMemory(const AnalysisInput& input);
// The `memory` section (top N phases), the peak_memory_* metrics, the near-the-limit finding and
// the typed result.
void presentMemory(const MemoryResult& result, size_t top, report::Report& report);

}  // namespace gpuxray::analysis
