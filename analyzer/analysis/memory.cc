// Device memory over time per rank: what the allocations and frees CUPTI saw add up to, its peak,
// when the peak happened, and which NVTX phase (step, forward, backward, optimizer...) it was in.
// Memory allocated before the capture started is not known, so figures are "allocated while
// captured" (the caching allocators of PyTorch keep their pools, so their peak shows early).

#include "analyzer/analysis/memory.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>

#include "analyzer/analysis/analyses.h"
#include "analyzer/analysis/range_names.h"
#include "analyzer/analysis/rank_digest.h"
#include "analyzer/report/units.h"

namespace gpuxray::analysis {
namespace {

using report::Cell;
using report::Unit;

// The innermost NVTX range open at `t` on any thread, if any.
std::optional<model::NvtxRange> phaseAt(const model::RankTrace& rank, int64_t t) {
  std::optional<model::NvtxRange> innermost;
  for (const model::NvtxRange& range : rank.nvtx) {
    if (range.start_ns > t) break;
    if (range.end_ns >= t && (!innermost || range.depth >= innermost->depth)) innermost = range;
  }
  return innermost;
}

report::ResultValue resultValue(const MemoryResult& result) {
  using report::ResultValue;
  ResultValue devices = ResultValue::array();
  for (const auto& d : result.devices) {
    ResultValue curve = ResultValue::array();
    for (const auto& point : d.curve) {
      curve.push(ResultValue::array()
                     .push(ResultValue::integer(point.time_ns - result.origin_ns))
                     .push(ResultValue::integer(point.bytes)));
    }
    devices.push(ResultValue::object()
                     .set("rank", ResultValue::integer(d.rank))
                     .set("device", ResultValue::integer(d.device))
                     .set("peak_bytes", ResultValue::integer(d.peak_bytes))
                     .set("peak_at_ns", ResultValue::integer(d.peak_at_ns - result.origin_ns))
                     .set("peak_phase", ResultValue::text(d.peak_phase))
                     .set("peak_pct_of_device", ResultValue::number(d.peak_pct_of_device))
                     .set("allocations", ResultValue::integer(static_cast<int64_t>(d.allocations)))
                     .set("end_bytes", ResultValue::integer(d.end_bytes))
                     .set("curve", std::move(curve)));
  }
  ResultValue phases = ResultValue::array();
  for (const auto& phase : result.worst_rank_phases) {
    phases.push(ResultValue::object()
                    .set("phase", ResultValue::text(phase.phase))
                    .set("peak_bytes", ResultValue::integer(phase.peak_bytes)));
  }
  return ResultValue::object()
      .set("recorded", ResultValue::flag(result.recorded))
      .set("origin_ns", ResultValue::integer(result.origin_ns))
      .set("devices", std::move(devices))
      .set("worst_rank", result.worst_rank >= 0 ? ResultValue::integer(result.worst_rank) : ResultValue())
      .set("worst_rank_phases", std::move(phases));
}

}  // namespace

MemoryPart memoryOfRank(const model::RankTrace& rank) {
  MemoryPart part;
  if (rank.memory.empty()) return part;
  part.first_change_ns = rank.memory.front().time_ns;
  std::map<uint32_t, int64_t> in_use, peak;
  std::map<uint32_t, int64_t> peak_at;
  std::map<uint32_t, uint64_t> allocations;
  std::map<uint32_t, std::vector<MemoryPoint>> curves;
  std::map<std::string, int64_t> phase_peak;
  for (const auto& change : rank.memory) {
    int64_t& now = in_use[change.device];
    now += change.delta_bytes;
    curves[change.device].push_back({change.time_ns, now});
    if (change.delta_bytes > 0) ++allocations[change.device];
    if (now > peak[change.device]) {
      peak[change.device] = now;
      peak_at[change.device] = change.time_ns;
    }
  }
  // The peak per phase: the highest level reached inside each NVTX range name, all devices summed.
  if (!rank.nvtx.empty()) {
    std::vector<std::pair<int64_t, int64_t>> level;  // (time, bytes in use after the change)
    int64_t total = 0;
    for (const auto& change : rank.memory) level.emplace_back(change.time_ns, total += change.delta_bytes);
    for (const auto& range : rank.nvtx) {
      auto first = std::lower_bound(level.begin(), level.end(), range.start_ns,
                                    [](const auto& l, int64_t t) { return l.first < t; });
      int64_t highest = first == level.begin() ? 0 : std::prev(first)->second;
      for (auto it = first; it != level.end() && it->first <= range.end_ns; ++it)
        highest = std::max(highest, it->second);
      int64_t& best = phase_peak[foldedRangeName(rank.name(range.name_id))];
      best = std::max(best, highest);
    }
  }
  for (const auto& [device, bytes] : peak) {
    MemoryPart::Device memory;
    memory.device = device;
    memory.peak_bytes = bytes;
    memory.peak_at_ns = peak_at[device];
    std::optional<model::NvtxRange> phase = phaseAt(rank, peak_at[device]);
    memory.peak_phase = phase ? std::string(splitRangeName(rank.name(phase->name_id)).op) : "before any NVTX range";
    memory.allocations = allocations[device];
    memory.end_bytes = in_use[device];
    for (const MemoryPoint& point : keepHighest(std::move(curves[device]), DeviceMemory::kMaxCurvePoints,
                                                [](const MemoryPoint& p) { return p.bytes; }))
      memory.curve.emplace_back(point.time_ns, point.bytes);
    part.devices.push_back(std::move(memory));
  }
  part.phase_peaks.assign(phase_peak.begin(), phase_peak.end());
  return part;
}

int64_t memoryOrigin(const AnalysisInput& input) {
  int64_t origin = 0;
  bool have_start = false;
  auto take = [&](int64_t t) { origin = have_start ? std::min(origin, t) : t, have_start = true; };
  for (size_t r = 0; r < input.run.ranks.size(); ++r) {
    const RankDigest& digest = input.digest(r);
    if (digest.gpu_span.length() > 0) take(digest.gpu_span.start);
    if (digest.memory.first_change_ns) take(*digest.memory.first_change_ns);
  }
  return origin;
}

MemoryResult computeMemory(const AnalysisInput& input) {
  const auto& run = input.run;
  MemoryResult result;
  result.origin_ns = memoryOrigin(input);
  for (size_t r = 0; r < run.ranks.size(); ++r) result.recorded |= input.digest(r).memory.first_change_ns.has_value();
  if (!result.recorded) return result;

  const std::vector<std::pair<std::string, int64_t>>* worst_phases = nullptr;
  double worst_pct = -1;
  uint64_t worst_bytes = 0;
  for (size_t r = 0; r < run.ranks.size(); ++r) {
    const auto& rank = run.ranks[r];
    const MemoryPart& part = input.digest(r).memory;
    if (!part.first_change_ns) continue;
    for (const auto& device_part : part.devices) {
      const format::DeviceProperties* properties = nullptr;
      for (const auto& d : rank.header.devices) {
        if (d.device_id == device_part.device) properties = &d;
      }
      const int64_t bytes = device_part.peak_bytes;
      DeviceMemory memory;
      memory.rank = rank.rank;
      memory.device = device_part.device;
      memory.peak_bytes = bytes;
      memory.peak_at_ns = device_part.peak_at_ns;
      memory.peak_pct_of_device =
          properties != nullptr && properties->memory_bytes > 0
              ? 100.0 * static_cast<double>(bytes) / static_cast<double>(properties->memory_bytes)
              : std::numeric_limits<double>::quiet_NaN();
      memory.peak_phase = device_part.peak_phase;
      memory.allocations = device_part.allocations;
      memory.end_bytes = device_part.end_bytes;
      for (const auto& [time, level] : device_part.curve) memory.curve.push_back({time, level});
      double comparable = std::isnan(memory.peak_pct_of_device) ? 0 : memory.peak_pct_of_device;
      if (comparable > worst_pct || (worst_pct <= 0 && static_cast<uint64_t>(bytes) > worst_bytes)) {
        worst_pct = comparable;
        worst_bytes = static_cast<uint64_t>(bytes);
        result.worst_rank = rank.rank;
        result.worst_phase = memory.peak_phase;
      }
      result.devices.push_back(std::move(memory));
    }
  }
  // Phases of the rank with the highest peak only: where memory peaks is what matters.
  for (size_t r = 0; r < run.ranks.size(); ++r) {
    if (run.ranks[r].rank == result.worst_rank && input.digest(r).memory.first_change_ns)
      worst_phases = &input.digest(r).memory.phase_peaks;
  }
  result.worst_pct = worst_pct;
  result.worst_bytes = static_cast<int64_t>(worst_bytes);
  // Phases of the rank with the highest peak only: where memory peaks is what matters.
  if (worst_phases != nullptr) {
    for (const auto& [phase, bytes] : *worst_phases) result.worst_rank_phases.push_back({phase, bytes});
    std::sort(result.worst_rank_phases.begin(), result.worst_rank_phases.end(),
              [](const auto& a, const auto& b) { return a.peak_bytes > b.peak_bytes; });
  }
  return result;
}

void presentMemory(const MemoryResult& result, size_t top, report::Report& report) {
  auto& section = report.addSection("memory", "Device memory");
  section.notes.push_back(
      "Device memory allocated during the capture (allocations before it are not seen), per rank and device.");
  report.addResult("memory", [&] { return resultValue(result); });
  if (!result.recorded) {
    section.notes.push_back(
        "No device memory allocations in the trace (the PyTorch profiler records them with "
        "profile_memory=True; gpuxray capture always does).");
    return;
  }
  report::Table peaks{"peaks",
                      "",
                      {{"rank", "rank"},
                       {"device", "device"},
                       {"peak", "peak"},
                       {"peak_pct_of_device", "% of device"},
                       {"peak_at", "at (from start)"},
                       {"phase", "during"},
                       {"allocations", "allocations"},
                       {"end", "in use at end"}},
                      {}};
  for (const auto& d : result.devices) {
    peaks.rows.push_back({Cell::of(d.rank, Unit::kNone), Cell::of(d.device, Unit::kNone),
                          Cell::of(static_cast<double>(d.peak_bytes), Unit::kBytes),
                          Cell::of(d.peak_pct_of_device, Unit::kPercent),
                          Cell::of(static_cast<double>(d.peak_at_ns - result.origin_ns), Unit::kNanoseconds),
                          Cell::of(d.peak_phase), Cell::of(static_cast<double>(d.allocations), Unit::kCount),
                          Cell::of(static_cast<double>(d.end_bytes), Unit::kBytes)});
  }
  report::Table phases{"phases",
                       "Peak per NVTX range name on the rank with the highest peak (highest over its instances)",
                       {{"rank", "rank"}, {"phase", "range"}, {"peak", "peak"}},
                       {}};
  for (size_t i = 0; i < result.worst_rank_phases.size() && i < top; ++i) {
    phases.rows.push_back({Cell::of(result.worst_rank, Unit::kNone), Cell::of(result.worst_rank_phases[i].phase),
                           Cell::of(static_cast<double>(result.worst_rank_phases[i].peak_bytes), Unit::kBytes)});
  }
  report::keepWorstRows(peaks, top, "devices", "highest peak first",
                        [](const std::vector<Cell>& row) { return row[2].number; });
  section.tables.push_back(std::move(peaks));
  section.tables.push_back(std::move(phases));
  if (result.worst_rank < 0) return;
  report.addMetric("peak_memory_bytes", static_cast<double>(result.worst_bytes), Unit::kBytes,
                   "device memory allocated during the capture at its peak, worst rank");
  if (result.worst_pct > 0) {
    report.addMetric("peak_memory_pct", result.worst_pct, Unit::kPercent, "that peak as % of the device's memory");
    if (result.worst_pct >= 90) {
      report::Finding finding;
      finding.analysis = "memory";
      finding.severity = result.worst_pct >= 97 ? report::Severity::kCritical : report::Severity::kWarning;
      finding.summary =
          fmt::format("{} peaks at {:.1f} % of its GPU's memory ({}, during {})", report::rankName(result.worst_rank),
                      result.worst_pct, report::formatValue(static_cast<double>(result.worst_bytes), Unit::kBytes),
                      result.worst_phase);
      finding.evidence.push_back(
          "near the limit the caching allocator frees and retries (cudaFree + cudaMalloc stalls) or the job runs out "
          "of memory");
      report.findings.push_back(std::move(finding));
    }
  }
}

void analyzeMemory(const AnalysisInput& input, report::Report& report) {
  presentMemory(computeMemory(input), input.options.top, report);
}

}  // namespace gpuxray::analysis
