// Device memory over time per rank: what the allocations and frees CUPTI saw add up to, its peak,
// when the peak happened, and which NVTX phase (step, forward, backward, optimizer...) it was in.
// Memory allocated before the capture started is not known, so figures are "allocated while
// captured" (the caching allocators of PyTorch keep their pools, so their peak shows early).

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "analyzer/analysis/analyses.h"

namespace gpuxray::analysis {
namespace {

using report::Cell;
using report::Unit;

// The innermost NVTX range open at `t` on any thread, or nullptr.
const model::NvtxRange* phaseAt(const model::RankTrace& rank, int64_t t) {
  const model::NvtxRange* innermost = nullptr;
  for (const auto& range : rank.nvtx) {
    if (range.start_ns > t) break;
    if (range.end_ns >= t && (innermost == nullptr || range.depth >= innermost->depth)) innermost = &range;
  }
  return innermost;
}

// Instances of one phase share a name but for a trailing number ("ProfilerStep#12" -> "ProfilerStep#N").
std::string phaseName(const std::string& name) {
  size_t end = name.size();
  while (end > 0 && name[end - 1] >= '0' && name[end - 1] <= '9') --end;
  return end < name.size() && end > 0 ? name.substr(0, end) + "N" : name;
}

}  // namespace

void analyzeMemory(const AnalysisInput& input, report::Report& report) {
  const auto& run = input.run;
  auto& section = report.addSection("memory", "Device memory");
  section.notes.push_back("Device memory allocated during the capture (allocations before it are not seen), per rank and device.");
  report::Table peaks{"peaks", "",
                      {{"rank", "rank"}, {"device", "device"}, {"peak", "peak"}, {"peak_pct_of_device", "% of device"},
                       {"peak_at", "at (from start)"}, {"phase", "during"}, {"allocations", "allocations"},
                       {"end", "in use at end"}},
                      {}};
  std::map<int32_t, std::map<std::string, int64_t>> phase_peaks;
  report::Table phases{"phases", "Peak per NVTX range name on the rank with the highest peak (highest over its instances)",
                       {{"rank", "rank"}, {"phase", "range"}, {"peak", "peak"}}, {}};
  double worst_pct = -1;
  uint64_t worst_bytes = 0;
  int32_t worst_rank = -1;
  std::string worst_phase;
  int64_t run_start = 0;
  bool have_start = false;
  for (const auto& rank : run.ranks) {
    Interval span = AnalysisInput::gpuSpan(rank);
    if (span.length() > 0) run_start = have_start ? std::min(run_start, span.start) : span.start, have_start = true;
    if (!rank.memory.empty())
      run_start = have_start ? std::min(run_start, rank.memory.front().time_ns) : rank.memory.front().time_ns, have_start = true;
  }

  if (std::all_of(run.ranks.begin(), run.ranks.end(), [](const auto& rank) { return rank.memory.empty(); })) {
    section.notes.push_back("No device memory allocations in the trace (the PyTorch profiler records them with "
                            "profile_memory=True; gpuxray capture always does).");
    return;
  }
  for (const auto& rank : run.ranks) {
    if (rank.memory.empty()) continue;
    std::map<uint32_t, int64_t> in_use, peak;
    std::map<uint32_t, int64_t> peak_at;
    std::map<uint32_t, uint64_t> allocations;
    std::map<std::string, int64_t> phase_peak;
    for (const auto& change : rank.memory) {
      int64_t& now = in_use[change.device];
      now += change.delta_bytes;
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
        for (auto it = first; it != level.end() && it->first <= range.end_ns; ++it) highest = std::max(highest, it->second);
        int64_t& best = phase_peak[phaseName(rank.strings[range.name_id])];
        best = std::max(best, highest);
      }
    }
    for (const auto& [device, bytes] : peak) {
      const format::DeviceProperties* properties = nullptr;
      for (const auto& d : rank.header.devices) {
        if (d.device_id == device) properties = &d;
      }
      double pct = properties != nullptr && properties->memory_bytes > 0
                       ? 100.0 * static_cast<double>(bytes) / static_cast<double>(properties->memory_bytes)
                       : std::numeric_limits<double>::quiet_NaN();
      const model::NvtxRange* phase = phaseAt(rank, peak_at[device]);
      std::string phase_name = phase != nullptr ? rank.strings[phase->name_id] : "before any NVTX range";
      peaks.rows.push_back({Cell::of(rank.rank, Unit::kNone), Cell::of(device, Unit::kNone),
                            Cell::of(static_cast<double>(bytes), Unit::kBytes), Cell::of(pct, Unit::kPercent),
                            Cell::of(static_cast<double>(peak_at[device] - run_start), Unit::kNanoseconds),
                            Cell::of(phase_name), Cell::of(static_cast<double>(allocations[device]), Unit::kCount),
                            Cell::of(static_cast<double>(in_use[device]), Unit::kBytes)});
      double comparable = std::isnan(pct) ? 0 : pct;
      if (comparable > worst_pct || (worst_pct <= 0 && static_cast<uint64_t>(bytes) > worst_bytes)) {
        worst_pct = comparable;
        worst_bytes = static_cast<uint64_t>(bytes);
        worst_rank = rank.rank;
        worst_phase = phase_name;
      }
    }
    phase_peaks[rank.rank] = std::move(phase_peak);
  }
  // Phases of the rank with the highest peak only: where memory peaks is what matters.
  if (auto it = phase_peaks.find(worst_rank); it != phase_peaks.end()) {
    std::vector<std::pair<std::string, int64_t>> ranked(it->second.begin(), it->second.end());
    std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    for (size_t i = 0; i < ranked.size() && i < input.options.top; ++i) {
      phases.rows.push_back({Cell::of(worst_rank, Unit::kNone), Cell::of(ranked[i].first),
                             Cell::of(static_cast<double>(ranked[i].second), Unit::kBytes)});
    }
  }
  section.tables.push_back(std::move(peaks));
  section.tables.push_back(std::move(phases));
  if (worst_rank < 0) return;
  report.addMetric("peak_memory_bytes", static_cast<double>(worst_bytes), Unit::kBytes,
                   "device memory allocated during the capture at its peak, worst rank");
  if (worst_pct > 0) {
    report.addMetric("peak_memory_pct", worst_pct, Unit::kPercent, "that peak as % of the device's memory");
    if (worst_pct >= 90) {
      report::Finding finding;
      finding.analysis = "memory";
      finding.severity = worst_pct >= 97 ? report::Severity::kCritical : report::Severity::kWarning;
      finding.summary = fmt::format("rank {} peaks at {:.1f} % of its GPU's memory ({}, during {})", worst_rank, worst_pct,
                                    report::formatValue(static_cast<double>(worst_bytes), Unit::kBytes), worst_phase);
      finding.evidence.push_back("near the limit the caching allocator frees and retries (cudaFree + cudaMalloc stalls) or the job runs out of memory");
      report.findings.push_back(std::move(finding));
    }
  }
}

}  // namespace gpuxray::analysis
