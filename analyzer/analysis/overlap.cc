// Communication/computation overlap: how much of each rank's communication runs while compute
// runs too, and how much is exposed (the GPU does nothing but communicate), per step, per
// communicator, and which collectives expose the most.

#include "analyzer/analysis/overlap.h"

#include <fmt/core.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "analyzer/analysis/analyses.h"
#include "analyzer/analysis/communicators.h"
#include "analyzer/analysis/rank_digest.h"
#include "analyzer/analysis/statistics.h"
#include "analyzer/model/communication_kernels.h"
#include "analyzer/report/units.h"

namespace gpuxray::analysis {
namespace {

using report::Cell;
using report::Unit;

struct CollectiveExposure {
  uint64_t count = 0;
  int64_t time = 0;
  int64_t exposed = 0;
};

// Communication that is not NCCL's (DeepEP, custom all-reduce, --comm-kernel ...): no NCCL
// operation stands for it, so its kernels are summed per library and operation, all ranks.
std::vector<OtherCommunication> otherCommunication(const AnalysisInput& input) {
  std::map<std::pair<std::string, std::string>, CollectiveExposure> per_family;
  for (size_t r = 0; r < input.run.ranks.size(); ++r) {
    for (const auto& family : input.digest(r).overlap.other_communication) {
      auto& sum = per_family[{family.library, family.operation}];
      sum.count += family.kernels;
      sum.time += family.time_ns;
    }
  }
  std::vector<OtherCommunication> out;
  for (const auto& [key, sum] : per_family) out.push_back({key.first, key.second, sum.count, sum.time});
  return out;
}

std::string labelOf(const OverlapResult& result, uint64_t hash) {
  auto it = result.communicators.find(hash);
  return it != result.communicators.end() ? it->second.label() : CommunicatorInfo{}.label();
}

report::ResultValue resultValue(const OverlapResult& result) {
  using report::ResultValue;
  ResultValue ranks = ResultValue::array();
  for (const RankOverlap& r : result.ranks) {
    ResultValue steps = ResultValue::array();
    for (size_t i = 0; i < r.exposed_per_step_ns.size(); ++i) {
      steps.push(ResultValue::object()
                     .set("step", r.steps[i] >= 0 ? ResultValue::integer(r.steps[i]) : ResultValue())
                     .set("exposed_ns", ResultValue::integer(r.exposed_per_step_ns[i])));
    }
    ranks.push(ResultValue::object()
                   .set("rank", ResultValue::integer(r.rank))
                   .set("communication_ns", ResultValue::integer(r.communication_ns))
                   .set("exposed_ns", ResultValue::integer(r.exposed_ns))
                   .set("time_ns", ResultValue::integer(r.time_ns))
                   .set("overlap_pct", ResultValue::number(r.overlapPct()))
                   .set("exposed_pct_of_time", ResultValue::number(r.exposedPct()))
                   .set("steps", std::move(steps)));
  }
  auto exposures = [&](const std::vector<OperationExposure>& list) {
    ResultValue array = ResultValue::array();
    for (const OperationExposure& e : list) {
      auto it = result.communicators.find(e.comm_hash);
      ResultValue item = ResultValue::object().set(
          "communicator", communicatorValue(e.comm_hash, it != result.communicators.end() ? &it->second : nullptr));
      if (!e.operation.empty()) {
        item.set("operation", ResultValue::text(e.operation))
            .set("bytes", e.bytes > 0 ? ResultValue::integer(static_cast<int64_t>(e.bytes)) : ResultValue());
      }
      item.set("count", ResultValue::integer(static_cast<int64_t>(e.count)))
          .set("time_ns", ResultValue::integer(e.time_ns))
          .set("exposed_ns", ResultValue::integer(e.exposed_ns));
      array.push(std::move(item));
    }
    return array;
  };
  ResultValue other = ResultValue::array();
  for (const OtherCommunication& o : result.other_communication) {
    other.push(ResultValue::object()
                   .set("library", ResultValue::text(o.library))
                   .set("operation", ResultValue::text(o.operation))
                   .set("kernels", ResultValue::integer(static_cast<int64_t>(o.kernels)))
                   .set("time_ns", ResultValue::integer(o.time_ns)));
  }
  return ResultValue::object()
      .set("ranks", std::move(ranks))
      .set("per_communicator", exposures(result.per_communicator))
      .set("per_operation", exposures(result.per_operation))
      .set("other_communication", std::move(other))
      .set("worst_rank", result.worst >= 0 ? ResultValue::integer(result.ranks[static_cast<size_t>(result.worst)].rank)
                                           : ResultValue());
}

}  // namespace

OverlapPart overlapOfRank(const AnalysisInput& input, size_t r) {
  const auto& rank = input.run.ranks[r];
  OverlapPart part;
  std::map<std::pair<std::string, std::string>, CollectiveExposure> per_family;
  std::map<uint32_t, const model::CommunicationKernelFamily*> families;
  for (const auto& a : rank.activities) {
    if (a.kind != model::ActivityKind::kCommunication) continue;
    auto [it, inserted] = families.try_emplace(a.name_id, nullptr);
    if (inserted) it->second = model::communicationFamilyOf(rank.name(a.name_id));
    if (it->second == nullptr || it->second->nccl) continue;
    std::string operation = model::communicationOperationOf(rank.name(a.name_id));
    auto& sum = per_family[{std::string(it->second->library), operation.empty() ? "not recorded" : operation}];
    ++sum.count;
    sum.time += a.duration();
  }
  for (const auto& [key, sum] : per_family)
    part.other_communication.push_back({key.first, key.second, sum.count, sum.time});

  const GpuTimeSets& sets = input.time_sets[r];
  if (sets.communication.empty()) return part;
  IntervalSet exposed_set = exposedCommunication(sets);
  RankOverlap figures;
  figures.rank = rank.rank;
  for (const StepWindow& step : input.windowsOf(r)) {
    for (const Interval& piece : clip(exposed_set, step.window)) {
      if (piece.length() >= OverlapResult::kShortestMarkNs) figures.exposed_marks.push_back(piece);
    }
    int64_t e = lengthWithin(exposed_set, step.window);
    figures.communication_ns += lengthWithin(sets.communication, step.window);
    figures.exposed_ns += e;
    figures.time_ns += step.window.length();
    figures.exposed_per_step_ns.push_back(e);
    figures.steps.push_back(step.number);
  }
  // No communication inside the windows: no exposed stretch either.
  if (figures.communication_ns == 0 || figures.time_ns == 0) return part;
  figures.exposed_step_median_ns = median(figures.exposed_per_step_ns);
  figures.exposed_step_worst_ns = maximum(figures.exposed_per_step_ns);
  part.rank = std::move(figures);
  return part;
}

double RankOverlap::overlapPct() const {
  return 100.0 * static_cast<double>(communication_ns - exposed_ns) / static_cast<double>(communication_ns);
}
double RankOverlap::exposedPct() const {
  return 100.0 * static_cast<double>(exposed_ns) / static_cast<double>(time_ns);
}

IntervalSet exposedCommunication(const GpuTimeSets& sets) {
  return subtract(sets.communication, sets.compute);
}

IntervalSet exposedCommunication(const GpuTimeSets& sets, Interval window) {
  return subtract(clip(sets.communication, window), clip(sets.compute, window));
}

OverlapResult computeOverlap(const AnalysisInput& input) {
  const auto& run = input.run;
  OverlapResult result;
  double worst_exposed_pct = -1;
  for (size_t r = 0; r < run.ranks.size(); ++r) {
    const OverlapPart& part = input.digest(r).overlap;
    if (!part.rank) continue;
    RankOverlap rank = *part.rank;
    rank.rank = run.ranks[r].rank;  // a PyTorch-profiler trace's rank is given after it is digested
    result.lowest_overlap_pct = std::min(result.lowest_overlap_pct, rank.overlapPct());
    if (rank.exposedPct() > worst_exposed_pct) {
      worst_exposed_pct = rank.exposedPct();
      result.worst = static_cast<int64_t>(result.ranks.size());
    }
    result.ranks.push_back(std::move(rank));
  }
  result.other_communication = otherCommunication(input);

  // Per communicator and per collective signature, from NCCL's own GPU times.
  result.communicators = gatherCommunicators(run);
  std::map<uint64_t, CollectiveExposure> per_comm;
  using Signature = std::tuple<uint64_t, std::string, uint64_t>;
  std::map<Signature, CollectiveExposure> per_signature;
  for (size_t r = 0; r < run.ranks.size(); ++r) {
    const auto& rank = run.ranks[r];
    const RankDigest& digest = input.digest(r);
    std::vector<StepWindow> windows = input.windowsOf(r);
    for (const auto& op : rank.nccl_ops) {
      if (!op.hasGpuTimes()) continue;
      Interval span{op.gpu_start_ns, op.gpu_end_ns};
      bool in_steps = std::any_of(windows.begin(), windows.end(), [&](const StepWindow& w) {
        return span.start < w.window.end && span.end > w.window.start;
      });
      if (!in_steps) continue;
      int64_t exposed = span.length() - digest.computeWithin(span.start, span.end);
      auto& c = per_comm[op.comm_hash];
      ++c.count, c.time += span.length(), c.exposed += exposed;
      auto& s = per_signature[{op.comm_hash, std::string(rank.name(op.func_id)), op.bytes}];
      ++s.count, s.time += span.length(), s.exposed += exposed;
    }
  }
  for (const auto& [hash, c] : per_comm) result.per_communicator.push_back({hash, "", 0, c.count, c.time, c.exposed});
  std::vector<std::pair<Signature, CollectiveExposure>> ranked(per_signature.begin(), per_signature.end());
  std::sort(ranked.begin(), ranked.end(),
            [](const auto& a, const auto& b) { return a.second.exposed > b.second.exposed; });
  for (const auto& [signature, c] : ranked) {
    const auto& [hash, func, bytes] = signature;
    result.per_operation.push_back({hash, func, bytes, c.count, c.time, c.exposed});
  }
  return result;
}

void presentOverlap(const OverlapResult& result, size_t top_rows, report::Report& report) {
  auto& section = report.addSection("overlap", "Communication and computation overlap");
  report.addResult("overlap", [&] { return resultValue(result); });
  section.notes.push_back(
      "overlap = share of communication time during which compute also runs; exposed = communication with no compute "
      "beside it (all streams of the rank merged).");
  report::Table ranks{"ranks",
                      "",
                      {{"rank", "rank"},
                       {"communication", "communication"},
                       {"overlap_pct", "overlapped"},
                       {"exposed", "exposed"},
                       {"exposed_pct_of_step", "exposed % of step"},
                       {"exposed_per_step_median", "exposed/step median"},
                       {"exposed_per_step_worst", "exposed/step worst"}},
                      {}};
  for (const RankOverlap& r : result.ranks) {
    if (report.keep_marks) {
      for (const Interval& piece : r.exposed_marks)
        report.marks.push_back({"overlap", r.rank, piece.start, piece.end, "exposed communication"});
    }
    ranks.rows.push_back(
        {Cell::of(r.rank, Unit::kNone), Cell::of(static_cast<double>(r.communication_ns), Unit::kNanoseconds),
         Cell::of(r.overlapPct(), Unit::kPercent), Cell::of(static_cast<double>(r.exposed_ns), Unit::kNanoseconds),
         Cell::of(r.exposedPct(), Unit::kPercent),
         Cell::of(static_cast<double>(r.exposed_step_median_ns), Unit::kNanoseconds),
         Cell::of(static_cast<double>(r.exposed_step_worst_ns), Unit::kNanoseconds)});
  }
  if (ranks.rows.empty()) {
    section.notes.push_back("No communication kernels in the trace: nothing to overlap.");
    return;
  }
  report::keepWorstRows(ranks, top_rows, "ranks", "most exposed first",
                        [](const std::vector<Cell>& row) { return row[4].number; });
  section.tables.push_back(std::move(ranks));
  if (!result.other_communication.empty()) {
    report::Table table{"other_communication",
                        "Communication kernels outside NCCL (all ranks)",
                        {{"library", "library"}, {"operation", "operation"}, {"kernels", "kernels"}, {"time", "time"}},
                        {}};
    for (const OtherCommunication& o : result.other_communication) {
      table.rows.push_back({Cell::of(o.library), Cell::of(o.operation),
                            Cell::of(static_cast<double>(o.kernels), Unit::kCount),
                            Cell::of(static_cast<double>(o.time_ns), Unit::kNanoseconds)});
    }
    section.tables.push_back(std::move(table));
  }

  report::Table comms{"communicators",
                      "Per communicator (NCCL operations' own GPU times, all ranks)",
                      {{"communicator", "communicator"},
                       {"role", "role"},
                       {"operations", "operations"},
                       {"time", "time"},
                       {"exposed", "exposed"},
                       {"exposed_pct", "exposed %"}},
                      {}};
  for (const OperationExposure& c : result.per_communicator) {
    auto it = result.communicators.find(c.comm_hash);
    const CommunicatorInfo info = it != result.communicators.end() ? it->second : CommunicatorInfo{};
    comms.rows.push_back(
        {Cell::of(info.label()), Cell::of(communicatorRoleName(info.role)),
         Cell::of(static_cast<double>(c.count), Unit::kCount),
         Cell::of(static_cast<double>(c.time_ns), Unit::kNanoseconds),
         Cell::of(static_cast<double>(c.exposed_ns), Unit::kNanoseconds),
         Cell::of(c.time_ns > 0 ? 100.0 * static_cast<double>(c.exposed_ns) / static_cast<double>(c.time_ns) : 0.0,
                  Unit::kPercent)});
  }
  section.tables.push_back(std::move(comms));

  report::Table top{"top_exposed",
                    "Operations that expose the most communication (summed over ranks)",
                    {{"operation", "operation"},
                     {"bytes", "bytes"},
                     {"communicator", "communicator"},
                     {"count", "count"},
                     {"exposed", "exposed"},
                     {"exposed_mean", "exposed each"}},
                    {}};
  for (size_t i = 0; i < result.per_operation.size() && i < top_rows; ++i) {
    const OperationExposure& c = result.per_operation[i];
    if (c.exposed_ns == 0) break;
    top.rows.push_back(
        {Cell::of(c.operation),
         c.bytes > 0 ? Cell::of(static_cast<double>(c.bytes), Unit::kBytes) : Cell::of("not recorded"),
         Cell::of(labelOf(result, c.comm_hash)), Cell::of(static_cast<double>(c.count), Unit::kCount),
         Cell::of(static_cast<double>(c.exposed_ns), Unit::kNanoseconds),
         Cell::of(static_cast<double>(c.exposed_ns) / static_cast<double>(c.count), Unit::kNanoseconds)});
  }
  section.tables.push_back(std::move(top));

  if (result.worst < 0) return;
  const RankOverlap& worst = result.ranks[static_cast<size_t>(result.worst)];
  double worst_exposed_pct = worst.exposedPct();
  int64_t worst_median = worst.exposed_step_median_ns;
  report.addMetric("exposed_comm_pct", worst_exposed_pct, Unit::kPercent,
                   "communication not hidden by compute, % of step time, worst rank");
  report.addMetric("overlap_pct", result.lowest_overlap_pct, Unit::kPercent,
                   "communication overlapped by compute, % of communication time, lowest rank");
  if (worst_exposed_pct >= 5) {
    report::Finding finding;
    finding.analysis = "overlap";
    finding.severity = worst_exposed_pct >= 20 ? report::Severity::kCritical : report::Severity::kWarning;
    finding.cost_ns = static_cast<double>(worst_median);
    finding.cause = {report::FindingCause::Kind::kExposedCommunication,
                     {worst.rank},
                     1,
                     fmt::format("{}'s exposed communication", report::rankName(worst.rank))};
    finding.summary = fmt::format("exposed communication takes {:.1f} % of {}'s step time ({} per step)",
                                  worst_exposed_pct, report::rankName(worst.rank),
                                  report::formatValue(static_cast<double>(worst_median), Unit::kNanoseconds));
    if (!result.per_operation.empty() && top_rows > 0 && result.per_operation.front().exposed_ns > 0) {
      const OperationExposure& most = result.per_operation.front();
      finding.evidence.push_back(
          fmt::format("most exposed: {} of {} on {}, {} exposed in {} calls", most.operation,
                      most.bytes > 0 ? report::formatValue(static_cast<double>(most.bytes), Unit::kBytes)
                                     : std::string("a size not recorded"),
                      labelOf(result, most.comm_hash),
                      report::formatValue(static_cast<double>(most.exposed_ns), Unit::kNanoseconds), most.count));
    }
    report.findings.push_back(std::move(finding));
  }
}

void analyzeOverlap(const AnalysisInput& input, report::Report& report) {
  presentOverlap(computeOverlap(input), input.options.top, report);
}

}  // namespace gpuxray::analysis
