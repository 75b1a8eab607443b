#include "analyzer/analysis/hta_compat.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>

#include "analyzer/analysis/analyses.h"
#include "analyzer/analysis/rank_digest.h"
#include "analyzer/report/units.h"

namespace gpuxray::analysis {
namespace hta {

namespace {

// Times below 2^53 ns convert to double exactly, so start / 1000.0 is the double Python reads from
// the trace's "ts" text; larger ones (Unix-epoch nanoseconds of native traces, which HTA never
// reads) are rounded in integers.
constexpr int64_t kExactInDouble = int64_t{1} << 53;

int64_t floorDiv(int64_t a, int64_t b) {
  return a / b - ((a % b != 0) && ((a < 0) != (b < 0)));
}

}  // namespace

int64_t roundedStart(int64_t start_ns, bool whole_microseconds) {
  if (whole_microseconds) return start_ns;
  if (std::llabs(start_ns) >= kExactInDouble) return -floorDiv(-start_ns, 1000) * 1000;
  return static_cast<int64_t>(std::ceil(static_cast<double>(start_ns) / 1000.0)) * 1000;
}

int64_t roundedEnd(int64_t start_ns, int64_t end_ns, bool whole_microseconds) {
  if (whole_microseconds) return end_ns;
  if (std::llabs(end_ns) >= kExactInDouble) return floorDiv(end_ns, 1000) * 1000;
  double end_us = static_cast<double>(start_ns) / 1000.0 + static_cast<double>(end_ns - start_ns) / 1000.0;
  return static_cast<int64_t>(std::floor(end_us)) * 1000;
}

double percent(double part, double whole) {
  double value = 100.0 * (part / whole);
  if (!std::isfinite(value)) return value;
  char text[64];
  std::snprintf(text, sizeof text, "%.2f", value);  // correctly rounded, half-even on ties, as Python's round()
  return std::strtod(text, nullptr);
}

KernelType kernelTypeOfName(std::string_view name) {
  auto starts = [&](std::string_view p) { return name.starts_with(p); };
  auto has = [&](std::string_view p) { return name.find(p) != std::string_view::npos; };
  if (starts("nccl") || starts("hip") || starts("hccl") || has("ncclKernel")) return KernelType::kCommunication;
  if (starts("Memcpy") || starts("Memset") || starts("hipMemcpy") || starts("hipMemset") || starts("dma"))
    return KernelType::kMemory;
  bool cuda_launch = starts("cuda") && name.find("LaunchKernel", 4) != std::string_view::npos;
  bool non_compute = starts("nccl") || has("Memcpy") || has("Memset") || has("dma") || has("Sync") ||
                     starts("Stream Wait Event") || cuda_launch || starts("runFunction") || starts("hip") ||
                     starts("job_exe") || starts("packet") || starts("pe_exe") || starts("cpum_exe_subgraph") ||
                     starts("hccl") || starts("collective_subgraph_execution");
  return non_compute ? KernelType::kOther : KernelType::kComputation;
}

KernelType kernelTypeOf(const model::RankTrace& rank, const model::GpuActivity& activity) {
  if (activity.name_id == 0) {
    switch (activity.kind) {
      case model::ActivityKind::kMemcpy:
      case model::ActivityKind::kMemset:
        return KernelType::kMemory;
      case model::ActivityKind::kSync:
        return KernelType::kOther;
      default:
        break;
    }
  }
  return kernelTypeOfName(rank.name(activity.name_id));
}

StepFilter stepFilterOf(const model::RunTrace& run, bool include_last_step) {
  std::set<std::string_view> names;
  for (const auto& rank : run.ranks) {
    for (const auto& range : rank.nvtx) {
      std::string_view name = rank.name(range.name_id);
      if (name.find("ProfilerStep") != std::string_view::npos) names.insert(name);
    }
  }
  return {names.size(), names.size() >= 2 && !include_last_step};
}

int64_t lastStepStart(const model::RankTrace& rank) {
  int64_t last = -1;
  bool any = false;
  for (const auto& range : rank.nvtx) {
    if (rank.name(range.name_id).find("ProfilerStep") == std::string_view::npos) continue;
    int64_t start = roundedStart(range.start_ns, rank.whole_microsecond_times);
    last = any ? std::max(last, start) : start;
    any = true;
  }
  return any ? last : -1;
}

}  // namespace hta

namespace {

using report::Cell;
using report::Unit;

struct HtaKernel {
  int64_t start = 0, end = 0;
  hta::KernelType type = hta::KernelType::kOther;
  uint32_t stream = 0;
  int64_t launch = -1;  // rounded start of its runtime call; -1 without one
};

// The rank's GPU kernels as HTA sees them: rounded, typed by name, the last step dropped.
std::vector<HtaKernel> htaKernels(const model::RankTrace& rank, bool filter) {
  const bool whole = rank.whole_microsecond_times;
  int64_t last_step = filter ? hta::lastStepStart(rank) : 0;
  std::vector<int8_t> types(rank.strings.size(), -1);
  std::vector<HtaKernel> kernels;
  kernels.reserve(rank.activities.size());
  for (const auto& a : rank.activities) {
    const model::HostCall* call = a.correlation_id != 0 ? rank.launchOf(a.correlation_id) : nullptr;
    int64_t launch = call != nullptr ? hta::roundedStart(call->start_ns, whole) : -1;
    // Host ops carry no correlation id; HTA matches them with the host events that lack one too.
    if (filter && a.kind != model::ActivityKind::kHostOp && (last_step < 0 || launch < 0 || launch >= last_step))
      continue;
    hta::KernelType type;
    if (a.name_id != 0 && a.name_id < types.size()) {
      if (types[a.name_id] < 0) types[a.name_id] = static_cast<int8_t>(hta::kernelTypeOf(rank, a));
      type = static_cast<hta::KernelType>(types[a.name_id]);
    } else {
      type = hta::kernelTypeOf(rank, a);
    }
    int64_t start = hta::roundedStart(a.start_ns, whole);
    kernels.push_back(
        {start, hta::roundedEnd(a.start_ns, a.end_ns, whole), type, rank.streams[a.stream].stream, launch});
  }
  return kernels;
}

IntervalSet unionOfType(const std::vector<HtaKernel>& kernels, std::optional<hta::KernelType> type) {
  std::vector<Interval> intervals;
  for (const auto& k : kernels) {
    if (!type || k.type == *type) intervals.push_back({k.start, k.end});
  }
  return unionOf(std::move(intervals));
}

std::string microseconds(int64_t ns) {
  if (ns % 1000 == 0)
    return report::formatCount(static_cast<uint64_t>(std::llabs(ns / 1000))).insert(0, ns < 0 ? "-" : "");
  return fmt::format("{:.3f}", static_cast<double>(ns) / 1000.0);
}

double us(int64_t ns) {
  return static_cast<double>(ns) / 1000.0;
}

Cell microsecondCell(int64_t ns) {
  return Cell::shownAs(static_cast<double>(ns) / 1000.0, Unit::kNone, microseconds(ns));
}

Cell percentCell(double value) {
  return Cell::shownAs(value, Unit::kPercent, std::isnan(value) ? "n/a" : fmt::format("{:.2f} %", value));
}

struct HtaIdleSplit {
  int64_t host_wait = 0, kernel_wait = 0, other = 0;
};

// HTA's idle time breakdown of one stream: the gap before each kernel (in start order, after the
// previous one's end) is host_wait when its launch came after that end, kernel_wait when shorter
// than 30 µs, other otherwise.
HtaIdleSplit idleOfStream(std::vector<const HtaKernel*> kernels) {
  std::stable_sort(kernels.begin(), kernels.end(), [](const auto* a, const auto* b) { return a->start < b->start; });
  HtaIdleSplit split;
  for (size_t i = 1; i < kernels.size(); ++i) {
    int64_t previous_end = kernels[i - 1]->end;
    int64_t gap = kernels[i]->start - previous_end;
    if (kernels[i]->launch >= 0 && kernels[i]->launch > previous_end) {
      split.host_wait += gap;
    } else if (gap < hta::kKernelWaitThresholdNs) {
      split.kernel_wait += gap;
    } else {
      split.other += gap;
    }
  }
  return split;
}

report::ResultValue resultValue(const hta::HtaResult& result) {
  using report::ResultValue;
  ResultValue ranks = ResultValue::array();
  for (const hta::HtaRank& r : result.ranks) {
    ResultValue streams = ResultValue::array();
    for (const hta::HtaStreamIdle& s : r.streams) {
      streams.push(ResultValue::object()
                       .set("stream", ResultValue::integer(s.stream))
                       .set("host_wait_ns", ResultValue::integer(s.host_wait_ns))
                       .set("kernel_wait_ns", ResultValue::integer(s.kernel_wait_ns))
                       .set("other_ns", ResultValue::integer(s.other_ns)));
    }
    ranks.push(ResultValue::object()
                   .set("rank", ResultValue::integer(r.rank))
                   .set("span_ns", ResultValue::integer(r.span_ns))
                   .set("idle_ns", ResultValue::integer(r.idle_ns))
                   .set("compute_ns", ResultValue::integer(r.compute_ns))
                   .set("non_compute_ns", ResultValue::integer(r.non_compute_ns))
                   .set("idle_pct", ResultValue::number(r.idle_pct))
                   .set("compute_pct", ResultValue::number(r.compute_pct))
                   .set("non_compute_pct", ResultValue::number(r.non_compute_pct))
                   .set("comm_comp_overlap_pct", ResultValue::number(r.overlap_pct))
                   .set("idle_time_breakdown", std::move(streams)));
  }
  ResultValue empty = ResultValue::array();
  for (int32_t rank : result.empty_ranks) empty.push(ResultValue::integer(rank));
  return ResultValue::object()
      .set("profiler_step_names", ResultValue::integer(static_cast<int64_t>(result.filter.step_names)))
      .set("last_step_dropped", ResultValue::flag(result.filter.applied))
      .set("ranks", std::move(ranks))
      .set("ranks_without_kernels", std::move(empty));
}

}  // namespace

bool htaStepFilterApplied(const model::RunTrace& run, bool include_last_step) {
  return hta::stepFilterOf(run, include_last_step).applied;
}

HtaPart htaOfRank(const model::RankTrace& rank, bool filter_applied) {
  HtaPart part;
  part.filter_applied = filter_applied;
  std::vector<HtaKernel> kernels = htaKernels(rank, filter_applied);
  if (kernels.empty()) return part;
  hta::HtaRank out;
  out.rank = rank.rank;
  int64_t first = kernels.front().start, last = kernels.front().end;
  for (const auto& k : kernels) first = std::min(first, k.start), last = std::max(last, k.end);
  out.span_ns = last - first;
  IntervalSet busy = unionOfType(kernels, std::nullopt);
  IntervalSet compute = unionOfType(kernels, hta::KernelType::kComputation);
  IntervalSet communication = unionOfType(kernels, hta::KernelType::kCommunication);
  out.idle_ns = out.span_ns - totalLength(busy);
  out.compute_ns = totalLength(compute);
  out.non_compute_ns = out.span_ns - out.compute_ns - out.idle_ns;
  out.idle_pct = hta::percent(us(out.idle_ns), us(out.span_ns));
  out.compute_pct = hta::percent(us(out.compute_ns), us(out.span_ns));
  out.non_compute_pct = hta::percent(us(out.non_compute_ns), us(out.span_ns));
  out.overlap_pct = hta::percent(us(totalLength(intersect(compute, communication))), us(totalLength(communication)));
  std::map<uint32_t, std::vector<const HtaKernel*>> by_stream;
  for (const auto& k : kernels) by_stream[k.stream].push_back(&k);
  for (const auto& [stream, members] : by_stream) {
    HtaIdleSplit split = idleOfStream(members);
    out.streams.push_back({stream, split.host_wait, split.kernel_wait, split.other});
  }
  part.figures = std::move(out);
  return part;
}

hta::HtaResult computeHtaCompat(const AnalysisInput& input) {
  const auto& run = input.run;
  hta::HtaResult result;
  result.filter = hta::stepFilterOf(run, input.options.include_last_step);
  for (size_t r = 0; r < run.ranks.size(); ++r) {
    const HtaPart& part = *input.digest(r).hta;
    if (!part.figures) {
      result.empty_ranks.push_back(run.ranks[r].rank);
      continue;
    }
    result.ranks.push_back(*part.figures);
    result.ranks.back().rank = run.ranks[r].rank;  // a PyTorch-profiler trace's rank is given after it is digested
  }
  return result;
}

void presentHtaCompat(const hta::HtaResult& result, report::Report& report) {
  const hta::StepFilter& filter = result.filter;
  auto& section = report.addSection("hta", "Holistic Trace Analysis figures (--compat hta)");
  report.addResult("hta", [&] { return resultValue(result); });
  section.notes.push_back(
      "As HTA 0.6.1 computes them: times in whole microseconds (starts rounded up, ends down), every event with a "
      "stream counted as GPU time (cuda_sync included), kernels typed by name; docs/analyses.md says how gpuxray's "
      "own figures differ.");
  if (filter.applied) {
    section.notes.push_back(fmt::format(
        "The last ProfilerStep is dropped, as HTA does by default: only GPU work launched before it began is counted "
        "({} ProfilerStep names in the run; --include-last-step keeps it).",
        filter.step_names));
  } else if (filter.step_names >= 2) {
    section.notes.push_back("The last ProfilerStep is kept (--include-last-step).");
  } else {
    section.notes.push_back(
        fmt::format("All GPU work is counted: HTA drops the last ProfilerStep only when a run has "
                    "two or more ({} here).",
                    filter.step_names));
  }
  report::Table breakdown{"temporal_breakdown",
                          "Temporal breakdown (get_temporal_breakdown)",
                          {{"rank", "rank"},
                           {"span_us", "span µs"},
                           {"idle_us", "idle µs"},
                           {"compute_us", "compute µs"},
                           {"non_compute_us", "non-compute µs"},
                           {"idle_pct", "idle"},
                           {"compute_pct", "compute"},
                           {"non_compute_pct", "non-compute"}},
                          {}};
  report::Table overlap{"comm_comp_overlap",
                        "Communication/computation overlap (get_comm_comp_overlap)",
                        {{"rank", "rank"}, {"overlap_pct", "comp/comm overlap"}},
                        {}};
  report::Table idle{"idle_time_breakdown",
                     "Idle time per stream (get_idle_time_breakdown, 30 µs kernel-wait threshold)",
                     {{"rank", "rank"},
                      {"stream", "stream"},
                      {"host_wait_us", "host wait µs"},
                      {"kernel_wait_us", "kernel wait µs"},
                      {"other_us", "other µs"}},
                     {}};
  double worst_idle = -1, lowest_overlap = 1e9;
  for (const hta::HtaRank& r : result.ranks) {
    breakdown.rows.push_back({Cell::of(r.rank, Unit::kNone), microsecondCell(r.span_ns), microsecondCell(r.idle_ns),
                              microsecondCell(r.compute_ns), microsecondCell(r.non_compute_ns), percentCell(r.idle_pct),
                              percentCell(r.compute_pct), percentCell(r.non_compute_pct)});
    worst_idle = std::max(worst_idle, r.idle_pct);
    overlap.rows.push_back({Cell::of(r.rank, Unit::kNone), percentCell(r.overlap_pct)});
    if (!std::isnan(r.overlap_pct)) lowest_overlap = std::min(lowest_overlap, r.overlap_pct);
    for (const hta::HtaStreamIdle& s : r.streams) {
      idle.rows.push_back({Cell::of(r.rank, Unit::kNone), Cell::of(s.stream, Unit::kNone),
                           microsecondCell(s.host_wait_ns), microsecondCell(s.kernel_wait_ns),
                           microsecondCell(s.other_ns)});
    }
  }
  if (!result.empty_ranks.empty()) {
    std::string list = report::formatRanks({result.empty_ranks.begin(), result.empty_ranks.end()});
    section.notes.push_back(
        fmt::format("No GPU kernels left on rank{} {} (HTA keeps none when a rank lacks a ProfilerStep "
                    "of its own or launched nothing before its last one).",
                    result.empty_ranks.size() == 1 ? "" : "s", list));
  }
  section.tables.push_back(std::move(breakdown));
  section.tables.push_back(std::move(overlap));
  section.tables.push_back(std::move(idle));
  if (worst_idle >= 0)
    report.addMetric("idle_pct", worst_idle, Unit::kPercent,
                     "GPU idle time, % of the span, worst rank (HTA's definition)");
  if (lowest_overlap <= 100) {
    report.addMetric(
        "overlap_pct", lowest_overlap, Unit::kPercent,
        "communication overlapped by computation, % of communication time, lowest rank (HTA's definition)");
  }
}

void analyzeHtaCompat(const AnalysisInput& input, report::Report& report) {
  presentHtaCompat(computeHtaCompat(input), report);
}

}  // namespace gpuxray::analysis
