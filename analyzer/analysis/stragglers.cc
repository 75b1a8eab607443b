// Stragglers: ranks that make the others wait (docs/analyses.md, "Stragglers"). In each matched
// collective every member but the last waits from its own entry to the last entry; that wait is the
// last rank's doing. Why it was late is read from the interval before its entry, since its previous
// collective on the same communicator: more compute than the median member, more host-bound idle
// (launches that came late), or longer communication of its own.

#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <limits>

#include "analyzer/analysis/analyses.h"
#include "analyzer/analysis/rank_digest.h"
#include "analyzer/analysis/idle_split.h"
#include "analyzer/analysis/statistics.h"

namespace gpuxray::analysis {
namespace {

using report::Cell;
using report::Unit;

constexpr int64_t kUnset = std::numeric_limits<int64_t>::min();
constexpr int64_t kNotableWaitPerStepNs = 100'000;

enum Cause : size_t { kCompute, kHostGaps, kCommunication, kUnclear, kCauses };

// Late arrivals that made the others wait less than this in all are not drawn on the timeline.
constexpr int64_t kShortestMarkedWaitNs = 10'000;

const char* causeName(size_t cause) {
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

struct RankStats {
  uint64_t joined = 0;
  uint64_t last = 0;
  int64_t wait_caused = 0;
  int64_t lateness = 0;  // summed: its entry minus the median member's, where it was last
  std::array<int64_t, kCauses> wait_by_cause{};
  std::array<int64_t, kUnclear> excess{};  // summed over the collectives it was last in

  size_t cause() const {
    return static_cast<size_t>(std::max_element(wait_by_cause.begin(), wait_by_cause.end()) - wait_by_cause.begin());
  }
};

int64_t lowerMedian(std::vector<int64_t>& values) {
  auto middle = values.begin() + static_cast<std::ptrdiff_t>((values.size() - 1) / 2);
  std::nth_element(values.begin(), middle, values.end());
  return *middle;
}

}  // namespace

void analyzeStragglers(const AnalysisInput& input, report::Report& report) {
  const auto& run = input.run;
  const CollectiveIndex& index = input.collectives();
  RankWindows windows(input);
  auto& section = report.addSection("stragglers", "Stragglers: who makes the others wait");
  section.notes.push_back(
      "In each matched collective every member waits from its entry to the last member's; the wait is charged to the "
      "last. cause = what the last rank spent longer on than the median member since its previous collective on the "
      "communicator: compute, host-bound idle (host launch gaps) or communication.");

  std::vector<RankStats> stats(run.ranks.size());
  std::vector<int64_t> previous_end(run.ranks.size(), kUnset);
  std::vector<int64_t> span_start(run.ranks.size(), 0);
  for (size_t r = 0; r < run.ranks.size(); ++r) {
    if (const auto& first = input.digest(r).first_activity_ns) span_start[r] = *first;
  }
  std::array<std::vector<int64_t>, kUnclear> parts;  // per member: compute, host-bound idle, communication
  std::array<std::vector<int64_t>, kUnclear> scratch;
  std::vector<int64_t> entries;
  uint64_t comm = 0;
  int64_t total_wait = 0;
  uint64_t counted = 0;
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
      ++counted;
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
      RankStats& s = stats[members[last].rank_index];
      size_t cause = kUnclear;
      int64_t largest = 0;
      for (size_t p = 0; p < parts.size(); ++p) {
        scratch[p] = parts[p];
        int64_t excess = parts[p][last] - lowerMedian(scratch[p]);
        s.excess[p] += excess;
        if (excess > largest) largest = excess, cause = p;
      }
      if (wait >= kShortestMarkedWaitNs) {
        report.marks.push_back({"stragglers", run.ranks[members[last].rank_index].rank, last_entry, last_entry,
                                fmt::format("late arrival: {} of waiting caused ({})",
                                            report::formatValue(static_cast<double>(wait), report::Unit::kNanoseconds),
                                            causeName(cause))});
      }
      ++s.last;
      s.wait_caused += wait;
      s.wait_by_cause[cause] += wait;
      s.lateness += last_entry - lowerMedian(entries);
      total_wait += wait;
    }
    for (MemberOp m : members) previous_end[m.rank_index] = opOf(run, m).gpu_end_ns;
  }

  double steps = static_cast<double>(windows.steps());
  std::vector<size_t> order;
  for (size_t r = 0; r < stats.size(); ++r) {
    if (stats[r].joined > 0) order.push_back(r);
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return stats[a].wait_caused != stats[b].wait_caused ? stats[a].wait_caused > stats[b].wait_caused : a < b;
  });
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
  for (size_t i = 0; i < order.size() && i < input.options.top; ++i) {
    const RankStats& s = stats[order[i]];
    const auto& rank = run.ranks[order[i]];
    ranks.rows.push_back({Cell::of(rank.rank, Unit::kNone), Cell::of(rank.header.hostname),
                          Cell::of(static_cast<double>(s.joined), Unit::kCount),
                          Cell::of(static_cast<double>(s.last), Unit::kCount),
                          Cell::of(100.0 * static_cast<double>(s.last) / static_cast<double>(s.joined), Unit::kPercent),
                          Cell::of(static_cast<double>(s.wait_caused), Unit::kNanoseconds),
                          Cell::of(static_cast<double>(s.wait_caused) / steps, Unit::kNanoseconds),
                          Cell::of(s.last > 0 ? causeName(s.cause()) : "-"),
                          Cell::of(static_cast<double>(s.wait_by_cause[kCompute]), Unit::kNanoseconds),
                          Cell::of(static_cast<double>(s.wait_by_cause[kHostGaps]), Unit::kNanoseconds),
                          Cell::of(static_cast<double>(s.wait_by_cause[kCommunication]), Unit::kNanoseconds),
                          Cell::of(static_cast<double>(s.wait_by_cause[kUnclear]), Unit::kNanoseconds)});
  }
  section.tables.push_back(std::move(ranks));
  if (counted == 0 || order.empty()) return;

  const RankStats& worst = stats[order.front()];
  const auto& worst_rank = run.ranks[order.front()];
  double wait_per_step = static_cast<double>(worst.wait_caused) / steps;
  report.addMetric("straggler_wait_ms", wait_per_step / 1e6, Unit::kMilliseconds,
                   input.hasSteps() ? "wait the worst straggler causes the other members, per step"
                                    : "wait the worst straggler causes the other members, in all");
  bool dominant = total_wait > 0 && 2 * worst.wait_caused >= total_wait;
  if (!dominant || wait_per_step < kNotableWaitPerStepNs || worst.last == 0) return;

  size_t cause = worst.cause();
  report::Finding finding;
  finding.analysis = "stragglers";
  finding.cost_ns = static_cast<double>(worst.lateness) / steps;
  int64_t step_length = windows.medianLength();
  finding.severity = step_length > 0 && finding.cost_ns >= 0.1 * static_cast<double>(step_length)
                         ? report::Severity::kCritical
                         : report::Severity::kWarning;
  finding.summary = fmt::format(
      "rank {} is the straggler: last into {} of {} collectives, {} of waiting caused ({} per step), "
      "cause: {}",
      worst_rank.rank, worst.last, worst.joined,
      report::formatValue(static_cast<double>(worst.wait_caused), Unit::kNanoseconds),
      report::formatValue(wait_per_step, Unit::kNanoseconds), causeName(cause));
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

}  // namespace gpuxray::analysis
