// Kernels that waste the GPU: the top kernels by time with their theoretical occupancy (and what
// limits it), waves and how full they are, register spills to local memory, and grids too small
// to reach every SM.

#include "analyzer/analysis/kernels.h"

#include <fmt/core.h>

#include <algorithm>
#include <map>
#include <unordered_map>

#include "analyzer/analysis/analyses.h"
#include "analyzer/analysis/rank_digest.h"
#include "analyzer/model/kernel_names.h"

namespace gpuxray::analysis {
namespace {

using report::Cell;
using report::Unit;

struct LaunchTime {
  uint64_t count = 0;
  int64_t time = 0;
};

// One kernel name across ranks, with the launch shape that took most of its time.
struct KernelSummary {
  KernelResult result;
  int64_t main_shape_time = -1;
};

const format::DeviceProperties* deviceOf(const model::RankTrace& rank, uint32_t device) {
  for (const auto& d : rank.header.devices) {
    if (d.device_id == device) return &d;
  }
  return rank.header.devices.empty() ? nullptr : &rank.header.devices.front();
}

std::string shortName(const std::string& name) {
  return model::reportedKernelName(name);
}

const char* liftedQuantity(OccupancyLimit limit) {
  switch (limit) {
    case OccupancyLimit::kRegisters:
      return "registers_per_thread";
    case OccupancyLimit::kSharedMemory:
      return "shared_memory_bytes";
    default:
      return "threads_per_block";
  }
}

void addLift(report::ResultValue& occupancy, const OccupancyLiftResult& lift, OccupancyLimit limit) {
  using report::ResultValue;
  ResultValue value;  // null: changing the limiter alone fits no more warps
  if (lift.lift) {
    value = ResultValue::object()
                .set("changes", ResultValue::text(liftedQuantity(lift.lift->limit)))
                .set("from", ResultValue::integer(static_cast<int64_t>(lift.lift->from)))
                .set("to", ResultValue::integer(static_cast<int64_t>(lift.lift->to)))
                .set("blocks_per_sm", ResultValue::integer(lift.lift->blocks_per_sm))
                .set("occupancy_pct", ResultValue::number(100.0 * lift.lift->occupancy));
  }
  occupancy.set("lift", std::move(value))
      .set("lift_summary", ResultValue::text(occupancyLiftSentence(lift, limit)))
      .set("sm_full", ResultValue::flag(lift.full))
      .set("also_limited_by", lift.also_limited_by == OccupancyLimit::kUnknown
                                  ? ResultValue()
                                  : ResultValue::text(occupancyLimitName(lift.also_limited_by)));
}

report::ResultValue resultValue(const KernelsResult& result) {
  using report::ResultValue;
  ResultValue kernels = ResultValue::array();
  for (const auto& k : result.kernels) {
    ResultValue launch;  // null: not recorded
    if (k.launchKnown()) {
      auto resource = [&](uint32_t value) { return k.resourcesKnown() ? ResultValue::integer(value) : ResultValue(); };
      launch = ResultValue::object()
                   .set("grid", ResultValue::array()
                                    .push(ResultValue::integer(k.launch.grid_x))
                                    .push(ResultValue::integer(k.launch.grid_y))
                                    .push(ResultValue::integer(k.launch.grid_z)))
                   .set("block", ResultValue::array()
                                     .push(ResultValue::integer(k.launch.block_x))
                                     .push(ResultValue::integer(k.launch.block_y))
                                     .push(ResultValue::integer(k.launch.block_z)))
                   .set("registers_per_thread", resource(k.launch.registers_per_thread))
                   .set("shared_memory_bytes", resource(k.launch.shared_memory_bytes))
                   .set("local_memory_per_thread_bytes", resource(k.launch.local_memory_per_thread));
    }
    ResultValue occupancy;  // null: not estimated
    if (k.occupancy.blocks_per_sm > 0) {
      occupancy = ResultValue::object()
                      .set("blocks_per_sm", ResultValue::integer(k.occupancy.blocks_per_sm))
                      .set("occupancy_pct", ResultValue::number(100.0 * k.occupancy.occupancy))
                      .set("limited_by", ResultValue::text(occupancyLimitName(k.occupancy.limit)))
                      .set("waves", ResultValue::integer(static_cast<int64_t>(k.occupancy.waves)))
                      .set("wave_efficiency_pct", ResultValue::number(100.0 * k.occupancy.wave_efficiency));
    }
    if (k.occupancy.blocks_per_sm > 0) addLift(occupancy, k.lift, k.occupancy.limit);
    kernels.push(ResultValue::object()
                     .set("name", ResultValue::text(k.name))
                     .set("count", ResultValue::integer(static_cast<int64_t>(k.count)))
                     .set("time_ns", ResultValue::integer(k.time_ns))
                     .set("launch", std::move(launch))
                     .set("device_multiprocessors", k.device != nullptr && k.device->sm_count > 0
                                                        ? ResultValue::integer(k.device->sm_count)
                                                        : ResultValue())
                     .set("occupancy", std::move(occupancy))
                     .set("achieved_occupancy_pct",
                          k.achieved_occupancy_pct ? ResultValue::number(*k.achieved_occupancy_pct) : ResultValue())
                     .set("small_grid", ResultValue::flag(smallGrid(k.launch, k.device))));
  }
  return ResultValue::object()
      .set("compute_time_ns", ResultValue::integer(result.compute_time_ns))
      .set("launch_not_recorded_time_ns", ResultValue::integer(result.launch_not_recorded_time_ns))
      .set("low_occupancy_time_ns", ResultValue::integer(result.low_occupancy_time_ns))
      .set("spilling_time_ns", ResultValue::integer(result.spilling_time_ns))
      .set("small_grid_time_ns", ResultValue::integer(result.small_grid_time_ns))
      .set("amd", ResultValue::flag(result.amd))
      .set("kernels", std::move(kernels));
}

}  // namespace

bool smallGrid(const model::LaunchConfig& shape, const format::DeviceProperties* device) {
  return launchRecorded(shape) && device != nullptr && device->sm_count > 0 && shape.blocks() < device->sm_count;
}

KernelsPart kernelsOfRank(const AnalysisInput& input, size_t r) {
  const auto& rank = input.run.ranks[r];
  // (name id, launch config, device) -> time; configs beyond 2^24 per rank share a slot.
  std::unordered_map<uint64_t, LaunchTime> per_launch;
  // A rank has few distinct keys: the last ones found are asked first (entries never move).
  constexpr size_t kRecent = 64;
  std::pair<uint64_t, LaunchTime*> recent[kRecent] = {};
  for (const StepWindow& step : input.windowsOf(r)) {
    auto it = std::lower_bound(rank.activities.begin(), rank.activities.end(), step.window.start,
                               [](const model::GpuActivity& a, int64_t t) { return a.start_ns < t; });
    for (; it != rank.activities.end() && it->start_ns < step.window.end; ++it) {
      if (it->kind != model::ActivityKind::kCompute) continue;
      uint64_t key = (uint64_t{it->name_id} << 32) | (uint64_t{it->detail & 0xffffffu} << 8) | it->device;
      auto& slot = recent[(key ^ (key >> 29) ^ (key >> 8)) % kRecent];
      if (slot.second == nullptr || slot.first != key) slot = {key, &per_launch[key]};
      LaunchTime& launch = *slot.second;
      ++launch.count;
      launch.time += it->duration();
    }
  }
  KernelsPart part;
  part.launches.reserve(per_launch.size());
  for (const auto& [key, launch] : per_launch) {
    part.launches.push_back({static_cast<uint32_t>(key >> 32), static_cast<uint32_t>((key >> 8) & 0xffffffu),
                             static_cast<uint32_t>(key & 0xffu), launch.count, launch.time});
  }
  return part;
}

KernelsResult computeKernels(const AnalysisInput& input) {
  const auto& run = input.run;
  KernelsResult result;
  std::map<std::string, KernelSummary> kernels;
  for (size_t r = 0; r < run.ranks.size(); ++r) {
    const auto& rank = run.ranks[r];
    for (const KernelsPart::Launch& launch : input.digest(r).kernels.launches) {
      const uint32_t name_id = launch.name_id, config_id = launch.config_id;
      if (config_id >= rank.launch_configs.size()) continue;
      const model::LaunchConfig& shape = rank.launch_configs[config_id];
      const format::DeviceProperties* device = deviceOf(rank, launch.device);
      Occupancy occupancy = device != nullptr ? theoreticalOccupancy(shape, *device) : Occupancy{};
      result.amd |= device != nullptr && isAmdDevice(*device);
      result.compute_time_ns += launch.time;
      if (!launchRecorded(shape)) result.launch_not_recorded_time_ns += launch.time;
      if (occupancy.blocks_per_sm > 0 && occupancy.occupancy < 0.25) result.low_occupancy_time_ns += launch.time;
      if (shape.local_memory_per_thread > 0) result.spilling_time_ns += launch.time;
      if (smallGrid(shape, device)) result.small_grid_time_ns += launch.time;

      KernelSummary& summary = kernels[std::string(rank.name(name_id))];
      summary.result.count += launch.count;
      summary.result.time_ns += launch.time;
      if (launch.time > summary.main_shape_time) {
        summary.main_shape_time = launch.time;
        summary.result.launch = shape;
        summary.result.device = device;
        summary.result.occupancy = occupancy;
      }
    }
  }
  for (size_t r = 0; r < run.ranks.size(); ++r) result.step_windows += input.windowsOf(r).size();
  std::map<std::string, std::vector<double>> achieved;
  for (size_t r = 0; r < run.ranks.size(); ++r) {
    for (const auto& launch : input.digest(r).kernel_metrics.launches) {
      if (launch.found && launch.metrics.achieved_occupancy_pct)
        achieved[launch.name].push_back(*launch.metrics.achieved_occupancy_pct);
    }
  }
  std::vector<std::pair<std::string, KernelSummary>> ranked(kernels.begin(), kernels.end());
  std::sort(ranked.begin(), ranked.end(),
            [](const auto& a, const auto& b) { return a.second.result.time_ns > b.second.result.time_ns; });
  for (auto& [name, summary] : ranked) {
    summary.result.name = name;
    if (auto it = achieved.find(name); it != achieved.end()) {
      auto& values = it->second;
      std::sort(values.begin(), values.end());
      size_t mid = values.size() / 2;
      summary.result.achieved_occupancy_pct =
          values.size() % 2 == 1 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
    }
    if (summary.result.occupancy.limit != OccupancyLimit::kUnknown && summary.result.device != nullptr)
      summary.result.lift = occupancyLift(summary.result.launch, *summary.result.device);
    result.kernels.push_back(std::move(summary.result));
  }
  return result;
}

void presentKernels(const KernelsResult& result, size_t top_n, report::Report& report) {
  auto& section = report.addSection("kernels", "Kernels");
  section.notes.push_back(
      "Compute kernels over the steps, all ranks. Occupancy is theoretical (CUDA's occupancy rules for the launch "
      "shape that took most of the kernel's time); achieved occupancy is measured (--kernel-metrics) where it was; "
      "wave efficiency = blocks / (waves x blocks the GPU holds at once).");
  report.addResult("kernels", [&] { return resultValue(result); });
  const int64_t compute_time = result.compute_time_ns;
  if (compute_time == 0) {
    section.notes.push_back("No compute kernels in the trace.");
    return;
  }
  report::Table top{"top_kernels",
                    "Top kernels by time",
                    {{"kernel", "kernel"},
                     {"count", "count"},
                     {"time", "time"},
                     {"time_pct", "% of compute"},
                     {"mean", "mean"},
                     {"grid_blocks", "blocks"},
                     {"block_threads", "threads/block"},
                     {"registers", "regs/thread"},
                     {"shared_memory", "smem/block"},
                     {"occupancy_pct", "occupancy"},
                     {"achieved_occupancy_pct", "achieved"},
                     {"limited_by", "limited by"},
                     {"waves", "waves"},
                     {"wave_efficiency_pct", "wave efficiency"},
                     {"local_memory", "spill/thread"}},
                    {}};
  const Cell not_recorded = Cell::of("not recorded");
  for (size_t i = 0; i < result.kernels.size() && i < top_n; ++i) {
    const KernelResult& k = result.kernels[i];
    const Occupancy& o = k.occupancy;
    bool known = o.blocks_per_sm > 0;
    bool shape = k.launchKnown();
    bool resources = k.resourcesKnown();
    top.rows.push_back(
        {Cell::of(shortName(k.name)), Cell::of(static_cast<double>(k.count), Unit::kCount),
         Cell::of(static_cast<double>(k.time_ns), Unit::kNanoseconds),
         Cell::of(100.0 * static_cast<double>(k.time_ns) / static_cast<double>(compute_time), Unit::kPercent),
         Cell::of(static_cast<double>(k.time_ns) / static_cast<double>(k.count), Unit::kNanoseconds),
         shape ? Cell::of(static_cast<double>(k.launch.blocks()), Unit::kCount) : not_recorded,
         shape ? Cell::of(k.launch.threadsPerBlock(), Unit::kNone) : not_recorded,
         resources ? Cell::of(k.launch.registers_per_thread, Unit::kNone) : not_recorded,
         resources ? Cell::of(k.launch.shared_memory_bytes, Unit::kBytes) : not_recorded,
         known ? Cell::of(100.0 * o.occupancy, Unit::kPercent) : Cell::of("n/a"),
         k.achieved_occupancy_pct ? Cell::of(*k.achieved_occupancy_pct, Unit::kPercent) : Cell::of("not measured"),
         Cell::of(known ? occupancyLimitName(o.limit) : "-"),
         known ? Cell::of(static_cast<double>(o.waves), Unit::kCount) : Cell::of("n/a"),
         known ? Cell::of(100.0 * o.wave_efficiency, Unit::kPercent) : Cell::of("n/a"),
         resources ? Cell::of(k.launch.local_memory_per_thread, Unit::kBytes) : not_recorded});
  }
  section.tables.push_back(std::move(top));
  if (result.launch_not_recorded_time_ns > 0) {
    section.notes.push_back(fmt::format(
        "{:.1f} % of compute time is in kernels whose launch configuration the trace does not record (grid, block, "
        "registers): no occupancy, waves or grid-size finding is made for them.",
        100.0 * static_cast<double>(result.launch_not_recorded_time_ns) / static_cast<double>(compute_time)));
  }
  if (result.amd) {
    section.notes.push_back(
        "AMD GPU: CUDA's occupancy rules do not apply to its compute units (CUs); occupancy and "
        "waves are not estimated.");
  }

  auto pct = [compute_time](int64_t part) {
    return 100.0 * static_cast<double>(part) / static_cast<double>(compute_time);
  };
  report.addMetric("low_occupancy_kernel_pct", pct(result.low_occupancy_time_ns), Unit::kPercent,
                   "compute kernel time at < 25 % theoretical occupancy");
  report.addMetric("spilling_kernel_pct", pct(result.spilling_time_ns), Unit::kPercent,
                   "compute kernel time in kernels that spill registers to local memory");
  report.addMetric("small_grid_kernel_pct", pct(result.small_grid_time_ns), Unit::kPercent,
                   result.amd ? "compute kernel time in grids with fewer workgroups than the GPU has CUs"
                              : "compute kernel time in grids with fewer blocks than the GPU has SMs");

  // Findings: the costliest kernels among those whose launch wastes the GPU.
  size_t reported = 0;
  for (const KernelResult& k : result.kernels) {
    if (reported == 3 || static_cast<double>(k.time_ns) < 0.02 * static_cast<double>(compute_time)) break;
    const Occupancy& o = k.occupancy;
    std::vector<std::string> problems;
    if (o.blocks_per_sm > 0 && o.occupancy < 0.25)
      problems.push_back(
          fmt::format("{:.1f} % theoretical occupancy, limited by {}", 100 * o.occupancy, occupancyLimitName(o.limit)));
    if (o.waves > 0 && o.waves <= 4 && o.wave_efficiency < 0.75)
      problems.push_back(fmt::format("{} wave(s) only {:.0f} % full (tail effect)", o.waves, 100 * o.wave_efficiency));
    if (smallGrid(k.launch, k.device))
      problems.push_back(fmt::format("{} blocks leave {} of {} {} idle", k.launch.blocks(),
                                     k.device->sm_count - k.launch.blocks(), k.device->sm_count,
                                     multiprocessorsName(k.device)));
    if (k.launch.local_memory_per_thread > 0)
      problems.push_back(
          fmt::format("spills {} B of registers per thread to local memory", k.launch.local_memory_per_thread));
    if (problems.empty()) continue;
    report::Finding finding;
    finding.analysis = "kernels";
    // Low occupancy alone is how many tensor-core kernels are built (one big block per SM); it is
    // worth a look, not an alarm, unless the launch also leaves SMs or wave slots empty.
    bool wastes_slots = (o.waves > 0 && o.waves <= 4 && o.wave_efficiency < 0.75) || smallGrid(k.launch, k.device) ||
                        k.launch.local_memory_per_thread > 0;
    finding.severity = wastes_slots ? report::Severity::kWarning : report::Severity::kInfo;
    finding.cost_ns = static_cast<double>(k.time_ns) / static_cast<double>(std::max<size_t>(1, result.step_windows)) *
                      (o.blocks_per_sm > 0 ? 1.0 - o.occupancy * o.wave_efficiency : 0.5);
    finding.summary =
        fmt::format("kernel {} ({:.1f} % of compute time) {}", shortName(k.name), pct(k.time_ns), problems.front());
    for (size_t i = 1; i < problems.size(); ++i) finding.evidence.push_back(problems[i]);
    if (o.blocks_per_sm > 0 && o.occupancy < 0.25)
      finding.evidence.push_back("what would lift the occupancy: " + occupancyLiftSentence(k.lift, o.limit));
    if (k.launch.registers_per_thread > 0) {
      finding.evidence.push_back(fmt::format(
          "launch: {} blocks x {} threads, {} registers/thread, {} B shared memory/block", k.launch.blocks(),
          k.launch.threadsPerBlock(), k.launch.registers_per_thread, k.launch.shared_memory_bytes));
    } else {
      finding.evidence.push_back(
          fmt::format("launch: {} blocks x {} threads (registers and shared memory not recorded)", k.launch.blocks(),
                      k.launch.threadsPerBlock()));
    }
    report.findings.push_back(std::move(finding));
    ++reported;
  }
}

void analyzeKernels(const AnalysisInput& input, report::Report& report) {
  presentKernels(computeKernels(input), input.options.top, report);
}

}  // namespace gpuxray::analysis
