// Stragglers: ranks that make the others wait (docs/analyses.md, "Stragglers"). In each matched
// collective every member but the last waits from its own entry to the last entry; that wait is the
// last rank's doing. Why it was late is read from the interval before its entry, since its previous
// collective on the same communicator: more compute than the median member, more host-bound idle
// (launches that came late), or longer communication of its own.

#include "analyzer/analysis/stragglers.h"

#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <limits>
#include <map>

#include "analyzer/analysis/analyses.h"
#include "analyzer/analysis/idle_split.h"
#include "analyzer/analysis/rank_digest.h"
#include "analyzer/analysis/statistics.h"
#include "analyzer/report/units.h"

namespace gpuxray::analysis {
namespace {

using report::Cell;
using report::Unit;

constexpr int64_t kUnset = std::numeric_limits<int64_t>::min();
constexpr size_t kCompute = kCauseCompute, kHostGaps = kCauseHostGaps, kCommunication = kCauseCommunication,
                 kUnclear = kCauseUnclear, kCauses = kStragglerCauses;

const char* causeExplanation(size_t cause) {
  switch (cause) {
    case kCompute:
      return "it computes longer before the collectives than the other members";
    case kHostGaps:
      return "its GPU waits longer for launches from the host (host-bound idle) before the collectives";
    case kCommunication:
      return "its own communication before the collectives takes longer";
    default:
      return "no one part of the interval before the collectives explains it";
  }
}

int64_t lowerMedian(std::vector<int64_t>& values) {
  auto middle = values.begin() + static_cast<std::ptrdiff_t>((values.size() - 1) / 2);
  std::nth_element(values.begin(), middle, values.end());
  return *middle;
}

// The number of the step of `windows` (sorted) that contains t, or nullopt.
std::optional<int64_t> stepAt(const std::vector<StepWindow>& windows, int64_t t) {
  auto w = std::upper_bound(windows.begin(), windows.end(), t,
                            [](int64_t time, const StepWindow& s) { return time < s.window.start; });
  if (w == windows.begin() || t >= std::prev(w)->window.end) return std::nullopt;
  return std::prev(w)->number;
}

report::ResultValue resultValue(const StragglersResult& result) {
  using report::ResultValue;
  ResultValue ranks = ResultValue::array();
  for (const StragglerRank& s : result.ranks) {
    ResultValue by_cause = ResultValue::object();
    for (size_t c = 0; c < kCauses; ++c) by_cause.set(stragglerCauseName(c), ResultValue::integer(s.wait_by_cause[c]));
    ResultValue excess = ResultValue::object();
    for (size_t c = 0; c < kUnclear; ++c) excess.set(stragglerCauseName(c), ResultValue::integer(s.excess[c]));
    ranks.push(
        ResultValue::object()
            .set("rank", ResultValue::integer(s.rank))
            .set("host", ResultValue::text(s.host))
            .set("collectives", ResultValue::integer(static_cast<int64_t>(s.joined)))
            .set("last", ResultValue::integer(static_cast<int64_t>(s.last)))
            .set("wait_caused_ns", ResultValue::integer(s.wait_caused))
            .set("wait_caused_per_step_ns", ResultValue::number(static_cast<double>(s.wait_caused) / result.steps))
            .set("lateness_ns", ResultValue::integer(s.lateness))
            .set("cause", s.last > 0 ? ResultValue::text(stragglerCauseName(s.cause())) : ResultValue())
            .set("wait_by_cause_ns", std::move(by_cause))
            .set("excess_ns", std::move(excess)));
  }
  ResultValue steps = ResultValue::array();
  for (const StragglerStep& step : result.step_figures) {
    ResultValue per_rank = ResultValue::array();
    for (const StragglerStepRank& r : step.ranks) {
      per_rank.push(ResultValue::object()
                        .set("rank", ResultValue::integer(r.rank))
                        .set("step_ns", ResultValue::integer(r.step_ns))
                        .set("compute_ns", ResultValue::integer(r.compute_ns))
                        .set("wait_caused_ns", ResultValue::integer(r.wait_caused_ns))
                        .set("last", ResultValue::integer(static_cast<int64_t>(r.last))));
    }
    auto rank = [](int32_t r) { return r >= 0 ? ResultValue::integer(r) : ResultValue(); };
    steps.push(ResultValue::object()
                   .set("step", step.step >= 0 ? ResultValue::integer(step.step) : ResultValue())
                   .set("ranks", std::move(per_rank))
                   .set("straggler", rank(step.straggler))
                   .set("slowest", rank(step.slowest)));
  }
  ResultValue verdict;
  if (!result.ranks.empty() && result.counted > 0) {
    const StragglerRank& worst = result.ranks.front();
    verdict =
        ResultValue::object()
            .set("rank", ResultValue::integer(worst.rank))
            .set("wait_per_step_ns", ResultValue::number(static_cast<double>(worst.wait_caused) / result.steps))
            .set("share_of_wait", result.total_wait > 0 ? ResultValue::number(static_cast<double>(worst.wait_caused) /
                                                                              static_cast<double>(result.total_wait))
                                                        : ResultValue())
            .set("cause", worst.last > 0 ? ResultValue::text(stragglerCauseName(worst.cause())) : ResultValue())
            .set("flagged", ResultValue::flag(result.flagged));
  }
  return ResultValue::object()
      .set("origin_ns", ResultValue::integer(result.origin_ns))
      .set("collectives", ResultValue::integer(static_cast<int64_t>(result.counted)))
      .set("total_wait_ns", ResultValue::integer(result.total_wait))
      .set("per_step", ResultValue::flag(result.per_step))
      .set("ranks", std::move(ranks))
      .set("steps", std::move(steps))
      .set("verdict", std::move(verdict));
}

}  // namespace

const char* stragglerCauseName(size_t cause) {
  switch (cause) {
    case kCompute:
      return "compute";
    case kHostGaps:
      return "host launch gaps";
    case kCommunication:
      return "communication";
    default:
      return "unclear";
  }
}

size_t StragglerRank::cause() const {
  return static_cast<size_t>(std::max_element(wait_by_cause.begin(), wait_by_cause.end()) - wait_by_cause.begin());
}

StragglersResult computeStragglers(const AnalysisInput& input, bool step_figures) {
  const auto& run = input.run;
  const CollectiveIndex& index = input.collectives();
  RankWindows windows(input);
  StragglersResult result;
  result.origin_ns = run.firstActivityNs();
  result.per_step = input.hasSteps();

  std::vector<StragglerRank> stats(run.ranks.size());
  std::vector<std::vector<StepWindow>> rank_windows(run.ranks.size());
  // (step number, rank index) -> its figures
  std::map<int64_t, std::map<size_t, StragglerStepRank>> per_step;
  for (size_t r = 0; r < run.ranks.size(); ++r) {
    stats[r].rank_index = r;
    stats[r].rank = run.ranks[r].rank;
    stats[r].host = run.ranks[r].header.hostname;
    if (!step_figures) continue;  // the windows name the steps of the step figures only
    rank_windows[r] = input.windowsOf(r);
    // The time breakdown's steps are these windows, in this order (none without GPU activity).
    const std::vector<StepBreakdown>& breakdown = input.digest(r).breakdown.steps;
    for (size_t i = 0; i < rank_windows[r].size(); ++i) {
      const StepWindow& w = rank_windows[r][i];
      StragglerStepRank& figures = per_step[w.number][r];
      figures.rank = run.ranks[r].rank;
      figures.step_ns += w.window.length();
      if (i < breakdown.size()) figures.compute_ns += breakdown[i].times.compute;
    }
    std::sort(rank_windows[r].begin(), rank_windows[r].end(),
              [](const StepWindow& a, const StepWindow& b) { return a.window.start < b.window.start; });
  }
  std::vector<int64_t> previous_end(run.ranks.size(), kUnset);
  std::vector<int64_t> span_start(run.ranks.size(), 0);
  for (size_t r = 0; r < run.ranks.size(); ++r) {
    if (const auto& first = input.digest(r).first_activity_ns) span_start[r] = *first;
  }
  std::array<std::vector<int64_t>, kUnclear> parts;  // per member: compute, host-bound idle, communication
  std::array<std::vector<int64_t>, kUnclear> scratch;
  std::vector<int64_t> entries;
  uint64_t comm = 0;
  for (const MatchedCollective& c : index.collectives) {
    if (c.comm_hash != comm) {
      std::fill(previous_end.begin(), previous_end.end(), kUnset);
      comm = c.comm_hash;
    }
    auto members = index.membersOf(c);
    size_t last = 0;
    entries.clear();
    for (size_t k = 0; k < members.size(); ++k) {
      entries.push_back(opOf(run, members[k]).gpu_start_ns);
      if (entries[k] > entries[last]) last = k;
    }
    int64_t last_entry = entries[last];
    bool counts = windows.contains(members[last].rank_index, last_entry);
    int64_t wait = 0;
    for (int64_t entry : entries) wait += last_entry - entry;

    if (counts) {
      ++result.counted;
      for (MemberOp m : members) ++stats[m.rank_index].joined;
    }
    if (counts && wait > 0) {
      for (auto& p : parts) p.clear();
      for (MemberOp m : members) {
        const RankDigest& digest = input.digest(m.rank_index);
        int64_t entry = opOf(run, m).gpu_start_ns;
        int64_t from = previous_end[m.rank_index] != kUnset ? previous_end[m.rank_index] : span_start[m.rank_index];
        Interval before{std::min(from, entry), entry};
        parts[kCompute].push_back(digest.computeWithin(before.start, before.end));
        parts[kHostGaps].push_back(digest.hostBoundWithin(before.start, before.end));
        parts[kCommunication].push_back(digest.communicationWithin(before.start, before.end));
      }
      size_t last_index = members[last].rank_index;
      StragglerRank& s = stats[last_index];
      size_t cause = kUnclear;
      int64_t largest = 0;
      for (size_t p = 0; p < parts.size(); ++p) {
        scratch[p] = parts[p];
        int64_t excess = parts[p][last] - lowerMedian(scratch[p]);
        s.excess[p] += excess;
        if (excess > largest) largest = excess, cause = p;
      }
      if (wait >= StragglersResult::kShortestMarkedWaitNs) {
        result.late_arrivals.push_back({run.ranks[last_index].rank, last_entry, wait, cause});
      }
      ++s.last;
      s.wait_caused += wait;
      s.wait_by_cause[cause] += wait;
      s.lateness += last_entry - lowerMedian(entries);
      result.total_wait += wait;
      if (auto step = step_figures ? stepAt(rank_windows[last_index], last_entry) : std::nullopt) {
        StragglerStepRank& figures = per_step[*step][last_index];
        figures.wait_caused_ns += wait;
        ++figures.last;
      }
    }
    for (MemberOp m : members) previous_end[m.rank_index] = opOf(run, m).gpu_end_ns;
  }

  result.steps = static_cast<double>(windows.steps());
  result.step_length_ns = windows.medianLength();
  for (const StragglerRank& s : stats) {
    if (s.joined > 0) result.ranks.push_back(s);
  }
  std::sort(result.ranks.begin(), result.ranks.end(), [](const StragglerRank& a, const StragglerRank& b) {
    return a.wait_caused != b.wait_caused ? a.wait_caused > b.wait_caused : a.rank_index < b.rank_index;
  });
  for (auto& [number, ranks] : per_step) {
    StragglerStep step;
    step.step = number;
    int64_t most_wait = 0, longest = -1;
    for (auto& [r, figures] : ranks) {
      if (figures.wait_caused_ns > most_wait) most_wait = figures.wait_caused_ns, step.straggler = figures.rank;
      if (figures.step_ns > longest) longest = figures.step_ns, step.slowest = figures.rank;
      step.ranks.push_back(figures);
    }
    result.step_figures.push_back(std::move(step));
  }
  if (result.counted > 0 && !result.ranks.empty()) {
    const StragglerRank& worst = result.ranks.front();
    double wait_per_step = static_cast<double>(worst.wait_caused) / result.steps;
    bool dominant = result.total_wait > 0 && 2 * worst.wait_caused >= result.total_wait;
    result.flagged = dominant && wait_per_step >= StragglersResult::kNotableWaitPerStepNs && worst.last > 0;
  }
  return result;
}

void presentStragglers(const StragglersResult& result, size_t top, report::Report& report) {
  auto& section = report.addSection("stragglers", "Stragglers: who makes the others wait");
  report.addResult("stragglers", [&] { return resultValue(result); });
  section.notes.push_back(
      "In each matched collective every member waits from its entry to the last member's; the wait is charged to the "
      "last. cause = what the last rank spent longer on than the median member since its previous collective on the "
      "communicator: compute, host-bound idle (host launch gaps) or communication.");
  if (report.keep_marks) {
    for (const LateArrival& late : result.late_arrivals) {
      report.marks.push_back(
          {"stragglers", late.rank, late.at_ns, late.at_ns,
           fmt::format("late arrival: {} of waiting caused ({})",
                       report::formatValue(static_cast<double>(late.wait_ns), report::Unit::kNanoseconds),
                       stragglerCauseName(late.cause))});
    }
  }
  const double steps = result.steps;
  report::Table ranks{"ranks",
                      "Ranks by the wait they caused",
                      {{"rank", "rank"},
                       {"host", "host"},
                       {"collectives", "collectives"},
                       {"last", "last in"},
                       {"last_pct", "last %"},
                       {"wait_caused", "wait caused"},
                       {"wait_per_step", "wait/step"},
                       {"cause", "cause"},
                       {"wait_compute", "wait: compute"},
                       {"wait_host_gaps", "wait: host gaps"},
                       {"wait_communication", "wait: communication"},
                       {"wait_unclear", "wait: unclear"}},
                      {}};
  for (size_t i = 0; i < result.ranks.size() && i < top; ++i) {
    const StragglerRank& s = result.ranks[i];
    ranks.rows.push_back({Cell::of(s.rank, Unit::kNone), Cell::of(s.host),
                          Cell::of(static_cast<double>(s.joined), Unit::kCount),
                          Cell::of(static_cast<double>(s.last), Unit::kCount),
                          Cell::of(100.0 * static_cast<double>(s.last) / static_cast<double>(s.joined), Unit::kPercent),
                          Cell::of(static_cast<double>(s.wait_caused), Unit::kNanoseconds),
                          Cell::of(static_cast<double>(s.wait_caused) / steps, Unit::kNanoseconds),
                          Cell::of(s.last > 0 ? stragglerCauseName(s.cause()) : "-"),
                          Cell::of(static_cast<double>(s.wait_by_cause[kCompute]), Unit::kNanoseconds),
                          Cell::of(static_cast<double>(s.wait_by_cause[kHostGaps]), Unit::kNanoseconds),
                          Cell::of(static_cast<double>(s.wait_by_cause[kCommunication]), Unit::kNanoseconds),
                          Cell::of(static_cast<double>(s.wait_by_cause[kUnclear]), Unit::kNanoseconds)});
  }
  section.tables.push_back(std::move(ranks));
  if (result.counted == 0 || result.ranks.empty()) return;

  const StragglerRank& worst = result.ranks.front();
  double wait_per_step = static_cast<double>(worst.wait_caused) / steps;
  report.addMetric("straggler_wait_ms", wait_per_step / 1e6, Unit::kMilliseconds,
                   result.per_step ? "wait the worst straggler causes the other members, per step"
                                   : "wait the worst straggler causes the other members, in all");
  if (!result.flagged) return;

  size_t cause = worst.cause();
  report::Finding finding;
  finding.analysis = "stragglers";
  finding.cost_ns = static_cast<double>(worst.lateness) / steps;
  finding.cause = {report::FindingCause::Kind::kStraggler, {worst.rank}, 1, report::rankName(worst.rank)};
  int64_t step_length = result.step_length_ns;
  finding.severity = step_length > 0 && finding.cost_ns >= 0.1 * static_cast<double>(step_length)
                         ? report::Severity::kCritical
                         : report::Severity::kWarning;
  finding.summary = fmt::format(
      "{} is the straggler: last into {} of {} collectives, {} of waiting caused ({} per step), "
      "cause: {}",
      report::rankName(worst.rank), worst.last, worst.joined,
      report::formatValue(static_cast<double>(worst.wait_caused), Unit::kNanoseconds),
      report::formatValue(wait_per_step, Unit::kNanoseconds), stragglerCauseName(cause));
  finding.evidence.push_back(fmt::format("{} ({} of the wait it caused)", causeExplanation(cause),
                                         report::formatValue(100.0 * static_cast<double>(worst.wait_by_cause[cause]) /
                                                                 static_cast<double>(worst.wait_caused),
                                                             Unit::kPercent)));
  double last_count = static_cast<double>(worst.last);
  finding.evidence.push_back(fmt::format(
      "where it was last it entered {} after the median member; before that it spent more than the median member on "
      "compute {}, host-bound idle {}, communication {} (means)",
      report::formatValue(static_cast<double>(worst.lateness) / last_count, Unit::kNanoseconds),
      report::formatValue(static_cast<double>(worst.excess[kCompute]) / last_count, Unit::kNanoseconds),
      report::formatValue(static_cast<double>(worst.excess[kHostGaps]) / last_count, Unit::kNanoseconds),
      report::formatValue(static_cast<double>(worst.excess[kCommunication]) / last_count, Unit::kNanoseconds)));
  report.findings.push_back(std::move(finding));
}

void analyzeStragglers(const AnalysisInput& input, report::Report& report) {
  presentStragglers(computeStragglers(input, report.keep_results), input.options.top, report);
}

}  // namespace gpuxray::analysis
