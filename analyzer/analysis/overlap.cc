// Communication/computation overlap: how much of each rank's communication runs while compute
// runs too, and how much is exposed (the GPU does nothing but communicate), per step, per
// communicator, and which collectives expose the most.

#include <fmt/core.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "analyzer/analysis/analyses.h"
#include "analyzer/analysis/communicators.h"
#include "analyzer/analysis/rank_digest.h"
#include "analyzer/analysis/statistics.h"
#include "analyzer/model/communication_kernels.h"

namespace gpuxray::analysis {
namespace {

using report::Cell;
using report::Unit;

// Exposed stretches shorter than this are not drawn: a timeline of thousands of slivers helps no one.
constexpr int64_t kShortestMarkNs = 10'000;

struct CollectiveExposure {
  uint64_t count = 0;
  int64_t time = 0;
  int64_t exposed = 0;
};

// Communication that is not NCCL's (DeepEP, custom all-reduce, --comm-kernel ...): no NCCL
// operation stands for it, so its kernels are summed per library and operation, all ranks.
report::Table otherCommunication(const AnalysisInput& input) {
  report::Table table{"other_communication", "Communication kernels outside NCCL (all ranks)",
                      {{"library", "library"}, {"operation", "operation"}, {"kernels", "kernels"}, {"time", "time"}},
                      {}};
  std::map<std::pair<std::string, std::string>, CollectiveExposure> per_family;
  for (size_t r = 0; r < input.run.ranks.size(); ++r) {
    for (const auto& family : input.digest(r).overlap.other_communication) {
      auto& sum = per_family[{family.library, family.operation}];
      sum.count += family.count;
      sum.time += family.time;
    }
  }
  for (const auto& [key, sum] : per_family) {
    table.rows.push_back({Cell::of(key.first), Cell::of(key.second), Cell::of(static_cast<double>(sum.count), Unit::kCount),
                          Cell::of(static_cast<double>(sum.time), Unit::kNanoseconds)});
  }
  return table;
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
  for (const auto& [key, sum] : per_family) part.other_communication.push_back({key.first, key.second, sum.count, sum.time});

  const GpuTimeSets& sets = input.time_sets[r];
  if (sets.communication.empty()) return part;
  part.has_communication = true;
  IntervalSet exposed_set = subtract(sets.communication, sets.compute);
  for (const StepWindow& step : input.windowsOf(r)) {
    for (const Interval& piece : clip(exposed_set, step.window)) {
      if (piece.length() >= kShortestMarkNs) part.exposed_marks.push_back(piece);
    }
    int64_t e = lengthWithin(exposed_set, step.window);
    part.communication += lengthWithin(sets.communication, step.window);
    part.exposed += e;
    part.time += step.window.length();
    part.exposed_per_step.push_back(e);
  }
  return part;
}

void analyzeOverlap(const AnalysisInput& input, report::Report& report) {
  const auto& run = input.run;
  auto& section = report.addSection("overlap", "Communication and computation overlap");
  section.notes.push_back(
      "overlap = share of communication time during which compute also runs; exposed = communication with no compute "
      "beside it (all streams of the rank merged).");
  report::Table ranks{"ranks", "",
                      {{"rank", "rank"}, {"communication", "communication"}, {"overlap_pct", "overlapped"},
                       {"exposed", "exposed"}, {"exposed_pct_of_step", "exposed % of step"},
                       {"exposed_per_step_median", "exposed/step median"}, {"exposed_per_step_worst", "exposed/step worst"}},
                      {}};
  double worst_exposed_pct = -1;
  int32_t worst_rank = -1;
  int64_t worst_median = 0;
  double lowest_overlap = 101;

  for (size_t r = 0; r < run.ranks.size(); ++r) {
    const OverlapPart& part = input.digest(r).overlap;
    if (!part.has_communication) continue;
    for (const Interval& piece : part.exposed_marks)
      report.marks.push_back({"overlap", run.ranks[r].rank, piece.start, piece.end, "exposed communication"});
    const int64_t communication = part.communication, exposed = part.exposed, time = part.time;
    const std::vector<int64_t>& per_step = part.exposed_per_step;
    if (communication == 0 || time == 0) continue;
    double overlap_pct = 100.0 * static_cast<double>(communication - exposed) / static_cast<double>(communication);
    double exposed_pct = 100.0 * static_cast<double>(exposed) / static_cast<double>(time);
    ranks.rows.push_back({Cell::of(run.ranks[r].rank, Unit::kNone), Cell::of(static_cast<double>(communication), Unit::kNanoseconds),
                          Cell::of(overlap_pct, Unit::kPercent), Cell::of(static_cast<double>(exposed), Unit::kNanoseconds),
                          Cell::of(exposed_pct, Unit::kPercent), Cell::of(static_cast<double>(median(per_step)), Unit::kNanoseconds),
                          Cell::of(static_cast<double>(maximum(per_step)), Unit::kNanoseconds)});
    lowest_overlap = std::min(lowest_overlap, overlap_pct);
    if (exposed_pct > worst_exposed_pct) {
      worst_exposed_pct = exposed_pct;
      worst_rank = run.ranks[r].rank;
      worst_median = median(per_step);
    }
  }
  if (ranks.rows.empty()) {
    section.notes.push_back("No communication kernels in the trace: nothing to overlap.");
    return;
  }
  section.tables.push_back(std::move(ranks));
  if (report::Table other = otherCommunication(input); !other.rows.empty()) section.tables.push_back(std::move(other));

  // Per communicator and per collective signature, from NCCL's own GPU times.
  auto communicators = gatherCommunicators(run);
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
  report::Table comms{"communicators", "Per communicator (NCCL operations' own GPU times, all ranks)",
                      {{"communicator", "communicator"}, {"role", "role"}, {"operations", "operations"},
                       {"time", "time"}, {"exposed", "exposed"}, {"exposed_pct", "exposed %"}},
                      {}};
  for (const auto& [hash, c] : per_comm) {
    const auto& info = communicators[hash];
    comms.rows.push_back({Cell::of(info.label()), Cell::of(communicatorRoleName(info.role)),
                          Cell::of(static_cast<double>(c.count), Unit::kCount), Cell::of(static_cast<double>(c.time), Unit::kNanoseconds),
                          Cell::of(static_cast<double>(c.exposed), Unit::kNanoseconds),
                          Cell::of(c.time > 0 ? 100.0 * static_cast<double>(c.exposed) / static_cast<double>(c.time) : 0.0, Unit::kPercent)});
  }
  section.tables.push_back(std::move(comms));

  std::vector<std::pair<Signature, CollectiveExposure>> ranked(per_signature.begin(), per_signature.end());
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.second.exposed > b.second.exposed; });
  if (ranked.size() > input.options.top) ranked.resize(input.options.top);
  report::Table top{"top_exposed", "Operations that expose the most communication (summed over ranks)",
                    {{"operation", "operation"}, {"bytes", "bytes"}, {"communicator", "communicator"},
                     {"count", "count"}, {"exposed", "exposed"}, {"exposed_mean", "exposed each"}},
                    {}};
  for (const auto& [signature, c] : ranked) {
    if (c.exposed == 0) break;
    const auto& [hash, func, bytes] = signature;
    top.rows.push_back({Cell::of(func),
                        bytes > 0 ? Cell::of(static_cast<double>(bytes), Unit::kBytes) : Cell::of("not recorded"),
                        Cell::of(communicators[hash].label()), Cell::of(static_cast<double>(c.count), Unit::kCount),
                        Cell::of(static_cast<double>(c.exposed), Unit::kNanoseconds),
                        Cell::of(static_cast<double>(c.exposed) / static_cast<double>(c.count), Unit::kNanoseconds)});
  }
  section.tables.push_back(std::move(top));

  if (worst_rank < 0) return;
  report.addMetric("exposed_comm_pct", worst_exposed_pct, Unit::kPercent,
                   "communication not hidden by compute, % of step time, worst rank");
  report.addMetric("overlap_pct", lowest_overlap, Unit::kPercent,
                   "communication overlapped by compute, % of communication time, lowest rank");
  if (worst_exposed_pct >= 5) {
    report::Finding finding;
    finding.analysis = "overlap";
    finding.severity = worst_exposed_pct >= 20 ? report::Severity::kCritical : report::Severity::kWarning;
    finding.cost_ns = static_cast<double>(worst_median);
    finding.summary = fmt::format("exposed communication takes {:.1f} % of rank {}'s step time ({} per step)",
                                  worst_exposed_pct, worst_rank,
                                  report::formatValue(static_cast<double>(worst_median), Unit::kNanoseconds));
    if (!ranked.empty() && ranked.front().second.exposed > 0) {
      const auto& [hash, func, bytes] = ranked.front().first;
      finding.evidence.push_back(
          fmt::format("most exposed: {} of {} on {}, {} exposed in {} calls", func,
                      bytes > 0 ? report::formatValue(static_cast<double>(bytes), Unit::kBytes)
                                : std::string("a size not recorded"),
                      communicators[hash].label(),
                      report::formatValue(static_cast<double>(ranked.front().second.exposed), Unit::kNanoseconds),
                      ranked.front().second.count));
    }
    report.findings.push_back(std::move(finding));
  }
}

}  // namespace gpuxray::analysis
