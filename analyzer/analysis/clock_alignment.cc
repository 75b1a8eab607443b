#include "analyzer/analysis/clock_alignment.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <utility>

#include "analyzer/analysis/analyses.h"
#include "analyzer/analysis/collective_matching.h"
#include "analyzer/analysis/statistics.h"
#include "analyzer/report/units.h"

namespace gpuxray::analysis {
namespace {

constexpr size_t kMinMatches = 3;       // fewer: the host keeps its anchors
constexpr size_t kMinDriftSamples = 8;  // fewer: no drift is fitted
constexpr size_t kMaxDriftWindows = 16;
constexpr int64_t kLargeResidualNs = 50'000;
constexpr double kMaxDrift = 1e-3;  // 1000 ppm: far beyond any working clock; steeper fits are noise

// A host's correction: offset (ns) at the reference time plus drift (ns per ns) after it.
struct Correction {
  double offset = 0;
  double drift = 0;
  double at(int64_t t, int64_t reference) const { return offset + drift * static_cast<double>(t - reference); }
};

// One host's part in one collective.
struct HostPart {
  uint32_t host;
  int64_t end;  // median of its members' ends
  int64_t min_end;
  int64_t max_start;
};

struct MemberTimes {
  uint32_t host;
  int64_t start;
  int64_t end;
};

class Aligner {
 public:
  explicit Aligner(model::RunTrace& run) : run_(run) {}

  ClockAlignment run() {
    findHosts();
    mapAnchors();
    auto index = std::make_shared<const CollectiveIndex>(matchOperations(run_));
    estimateOffsets(*index);
    enforceClockConditions(*index);
    measureResiduals(*index);
    apply();
    result_.matches = std::move(index);
    return std::move(result_);
  }

 private:
  void findHosts() {
    std::map<std::string, uint32_t> ids;
    for (const auto& rank : run_.ranks) {
      auto [it, inserted] = ids.try_emplace(rank.header.hostname, static_cast<uint32_t>(result_.hosts.size()));
      if (inserted) result_.hosts.push_back(HostClock{rank.header.hostname, {}});
      result_.hosts[it->second].ranks.push_back(rank.rank);
      host_of_.push_back(it->second);
    }
    corrections_.assign(result_.hosts.size(), Correction{});
  }

  // When the files' time bases differ, each file's capture clock is mapped to CLOCK_REALTIME by the
  // median (realtime - capture) of its anchors; with one time base everywhere the times are compared
  // as they are (the anchors of a CUPTI/realtime clock would only add their read noise).
  void mapAnchors() {
    anchor_shift_.assign(run_.ranks.size(), 0);
    std::set<std::string> bases;
    for (const auto& rank : run_.ranks) bases.insert(rank.header.time_base);
    if (bases.size() <= 1) return;
    result_.anchors_applied = true;
    for (size_t r = 0; r < run_.ranks.size(); ++r) {
      std::vector<int64_t> differences;
      for (const auto& a : run_.ranks[r].header.clock_anchors) {
        if (a.capture_ns != 0 && a.realtime_ns != 0)
          differences.push_back(static_cast<int64_t>(a.realtime_ns - a.capture_ns));
      }
      if (differences.empty()) {
        result_.warnings.push_back(
            fmt::format("clock: {} has time base '{}' and no clock anchors: its times are used as recorded",
                        run_.ranks[r].path, run_.ranks[r].header.time_base));
      }
      anchor_shift_[r] = median(std::move(differences));
    }
  }

  int64_t corrected(uint32_t rank_index, int64_t t) const {
    int64_t anchored = t + anchor_shift_[rank_index];
    return anchored + std::llround(corrections_[host_of_[rank_index]].at(anchored, result_.reference_ns));
  }

  // The hosts of a collective with their members' times on the current correction, by host.
  const std::vector<HostPart>& hostParts(const CollectiveIndex& index, const MatchedCollective& c) {
    members_.clear();
    for (MemberOp m : index.membersOf(c)) {
      const auto& op = opOf(run_, m);
      members_.push_back(
          {host_of_[m.rank_index], corrected(m.rank_index, op.gpu_start_ns), corrected(m.rank_index, op.gpu_end_ns)});
    }
    std::sort(members_.begin(), members_.end(), [](const MemberTimes& a, const MemberTimes& b) {
      return a.host != b.host ? a.host < b.host : a.end < b.end;
    });
    parts_.clear();
    for (size_t i = 0; i < members_.size();) {
      size_t j = i;
      HostPart part{members_[i].host, 0, members_[i].end, members_[i].start};
      while (j < members_.size() && members_[j].host == part.host) {
        part.max_start = std::max(part.max_start, members_[j].start);
        ++j;
      }
      part.end = members_[i + (j - i - 1) / 2].end;  // sorted by end within the host
      parts_.push_back(part);
      i = j;
    }
    return parts_;
  }

  struct Sample {
    int64_t t;  // the other host's end, on its own clock
    int64_t d;  // minus the center host's end
  };

  // Fits d(t) = offset + drift (t - reference) to one pair of hosts' differences: the median when
  // the data shows no drift; else Theil-Sen over medians of windows, kept only when it halves the
  // median absolute residual (and by more than a microsecond).
  Correction fitPair(std::vector<Sample>& samples) const {
    std::vector<int64_t> values;
    values.reserve(samples.size());
    for (const auto& s : samples) values.push_back(s.d);
    Correction constant{static_cast<double>(median(values)), 0};
    if (samples.size() < kMinDriftSamples) return constant;
    std::sort(samples.begin(), samples.end(), [](const Sample& a, const Sample& b) { return a.t < b.t; });
    size_t windows = std::min(kMaxDriftWindows, samples.size() / 4);
    std::vector<std::pair<double, double>> points;
    for (size_t w = 0; w < windows; ++w) {
      size_t from = w * samples.size() / windows, to = (w + 1) * samples.size() / windows;
      std::vector<int64_t> ts, ds;
      for (size_t i = from; i < to; ++i) ts.push_back(samples[i].t), ds.push_back(samples[i].d);
      points.emplace_back(static_cast<double>(median(ts) - result_.reference_ns), static_cast<double>(median(ds)));
    }
    std::vector<double> slopes;
    for (size_t i = 0; i < points.size(); ++i) {
      for (size_t j = i + 1; j < points.size(); ++j) {
        if (points[j].first != points[i].first)
          slopes.push_back((points[j].second - points[i].second) / (points[j].first - points[i].first));
      }
    }
    if (slopes.empty()) return constant;
    double slope = median(slopes);
    if (std::fabs(slope) > kMaxDrift) return constant;
    std::vector<double> intercepts;
    for (const auto& s : samples)
      intercepts.push_back(static_cast<double>(s.d) - slope * static_cast<double>(s.t - result_.reference_ns));
    Correction drifting{median(intercepts), slope};
    auto residual = [&](const Correction& fit) {
      std::vector<double> errors;
      for (const auto& s : samples)
        errors.push_back(std::fabs(static_cast<double>(s.d) - fit.at(s.t, result_.reference_ns)));
      return median(errors);
    };
    double constant_residual = residual(constant), drifting_residual = residual(drifting);
    bool material = drifting_residual < 0.5 * constant_residual && constant_residual - drifting_residual > 1000;
    return material ? drifting : constant;
  }

  // Host `to`'s correction from that of host `from` and their fitted difference d(t) = other's time -
  // center's, t on the other's clock. As maps to the reference clock, f(t) = t + correction(t), and
  // f_to = f_from o g with g the linear map from `to`'s clock to `from`'s: g(t) = t - d(t) when `to`
  // is the other host, its inverse when `to` is the center. Composed exactly, so that drift times
  // offset leaves no error.
  Correction compose(const Correction& from, const Correction& d, bool to_is_other) const {
    // g(t) = T0 + slope (t - T0) + shift
    double slope = to_is_other ? 1 - d.drift : 1 / (1 - d.drift);
    double shift = to_is_other ? -d.offset : d.offset / (1 - d.drift);
    return {from.offset + (1 + from.drift) * shift, (1 + from.drift) * slope - 1};
  }

  // Offsets against the reference host: per collective, every host's end is compared with that of
  // the collective's lowest host; each pair of hosts gets a fit, and the fits with the most samples
  // connect every host to the reference (a maximum spanning tree).
  void estimateOffsets(const CollectiveIndex& index) {
    std::map<std::pair<uint32_t, uint32_t>, std::vector<Sample>> pairs;
    int64_t first = 0, last = 0;
    for (const auto& c : index.collectives) {
      const auto& parts = hostParts(index, c);
      if (parts.size() < 2) continue;
      ++result_.cross_host_collectives;
      for (const auto& part : parts) ++result_.hosts[part.host].matched;
      for (size_t i = 1; i < parts.size(); ++i)
        pairs[{parts[0].host, parts[i].host}].push_back({parts[i].end, parts[i].end - parts[0].end});
      first = result_.cross_host_collectives == 1 ? parts[0].end : std::min(first, parts[0].end);
      last = std::max(last, parts[0].end);
    }
    result_.reference_ns = first + (last - first) / 2;

    struct Edge {
      uint32_t center, other;
      size_t samples;
      Correction difference;  // other's end minus center's, over the other's time
    };
    std::vector<Edge> edges;
    for (auto& [hosts, samples] : pairs) {
      if (samples.size() >= kMinMatches) edges.push_back({hosts.first, hosts.second, samples.size(), fitPair(samples)});
    }
    size_t host_count = result_.hosts.size();
    std::vector<bool> placed(host_count, false);
    for (uint32_t root = 0; root < host_count; ++root) {
      if (placed[root]) continue;
      placed[root] = true;
      if (root != 0) result_.hosts[root].source = "anchors";
      for (;;) {
        const Edge* best = nullptr;
        for (const auto& e : edges) {
          if (placed[e.center] != placed[e.other] && (best == nullptr || e.samples > best->samples)) best = &e;
        }
        if (best == nullptr) break;
        bool center_placed = placed[best->center];
        uint32_t from = center_placed ? best->center : best->other, to = center_placed ? best->other : best->center;
        corrections_[to] = compose(corrections_[from], best->difference, center_placed);
        placed[to] = true;
        result_.hosts[to].source = "collectives";
      }
    }
    for (size_t h = 1; h < host_count; ++h) {
      const auto& host = result_.hosts[h];
      if (host.source != "anchors") continue;
      result_.warnings.push_back(fmt::format(
          "clock: host {} shares {} matched collective{} with other hosts (fewer than {} with any one): its clock is "
          "placed by its clock anchors alone",
          host.host, host.matched, host.matched == 1 ? "" : "s", kMinMatches));
    }
  }

  // The controlled logical clock's conditions, with one shift per host: for host pairs (a, b) the
  // least s_a - s_b that the collectives and send/receive pairs demand, then the least non-negative
  // shifts meeting all of them (longest paths, Bellman-Ford), the reference host kept at 0.
  void enforceClockConditions(const CollectiveIndex& index) {
    std::map<std::pair<uint32_t, uint32_t>, int64_t> needed;  // (later, earlier) -> least s_later - s_earlier
    auto require = [&](uint32_t later, uint32_t earlier, int64_t at_least) {
      if (later == earlier) return;
      auto [it, inserted] = needed.try_emplace({later, earlier}, at_least);
      if (!inserted) it->second = std::max(it->second, at_least);
    };
    for (const auto& c : index.collectives) {
      const auto& parts = hostParts(index, c);
      if (parts.size() < 2) continue;
      auto last_entry = std::max_element(
          parts.begin(), parts.end(), [](const HostPart& a, const HostPart& b) { return a.max_start < b.max_start; });
      auto first_end = std::min_element(parts.begin(), parts.end(),
                                        [](const HostPart& a, const HostPart& b) { return a.min_end < b.min_end; });
      if (first_end->min_end < last_entry->max_start && first_end->host != last_entry->host)
        ++result_.collective_violations;
      for (const auto& part : parts) {
        require(part.host, last_entry->host, last_entry->max_start - part.min_end);
        require(first_end->host, part.host, part.max_start - first_end->min_end);
      }
    }
    for (const auto& pair : index.p2p) {
      uint32_t send_host = host_of_[pair.send.rank_index], recv_host = host_of_[pair.recv.rank_index];
      if (send_host == recv_host) continue;
      ++result_.p2p_pairs;
      int64_t send_start = corrected(pair.send.rank_index, opOf(run_, pair.send).gpu_start_ns);
      int64_t recv_end = corrected(pair.recv.rank_index, opOf(run_, pair.recv).gpu_end_ns);
      if (recv_end < send_start) ++result_.p2p_violations;
      require(recv_host, send_host, send_start - recv_end);
    }
    if (result_.collective_violations == 0 && result_.p2p_violations == 0) return;

    std::vector<int64_t> shift(result_.hosts.size(), 0);
    bool changed = true;
    for (size_t round = 0; changed && round <= shift.size(); ++round) {
      changed = false;
      for (const auto& [hosts, at_least] : needed) {
        auto [later, earlier] = hosts;
        if (shift[earlier] + at_least > shift[later]) {
          shift[later] = shift[earlier] + at_least;
          changed = true;
        }
      }
    }
    if (changed) {
      result_.warnings.push_back(
          "clock: the clock conditions contradict each other (events on two hosts each before the other): no extra "
          "shifts were applied");
      return;
    }
    for (size_t h = 0; h < shift.size(); ++h) {
      int64_t s = shift[h] - shift[0];
      corrections_[h].offset += static_cast<double>(s);
      result_.hosts[h].condition_shift_ns = s;
    }
  }

  // Per host, |its end - the median end of the other hosts| over its cross-host collectives.
  void measureResiduals(const CollectiveIndex& index) {
    std::vector<std::vector<int64_t>> residuals(result_.hosts.size());
    std::vector<int64_t> ends;
    for (const auto& c : index.collectives) {
      const auto& parts = hostParts(index, c);
      if (parts.size() < 2) continue;
      ends.clear();
      for (const auto& part : parts) ends.push_back(part.end);
      std::sort(ends.begin(), ends.end());
      size_t middle = (parts.size() - 2) / 2;  // the lower middle of the others
      for (const auto& part : parts) {
        size_t at = static_cast<size_t>(std::lower_bound(ends.begin(), ends.end(), part.end) - ends.begin());
        int64_t others = ends[middle < at ? middle : middle + 1];
        residuals[part.host].push_back(std::abs(part.end - others));
      }
    }
    for (size_t h = 0; h < residuals.size(); ++h) {
      auto& host = result_.hosts[h];
      host.offset_ns = std::llround(corrections_[h].offset);
      host.drift_ns_per_s = corrections_[h].drift * 1e9;
      if (residuals[h].empty()) continue;
      host.residual_max_ns = maximum(residuals[h]);
      host.residual_median_ns = median(std::move(residuals[h]));
      if (host.residual_median_ns > kLargeResidualNs) {
        result_.warnings.push_back(fmt::format(
            "clock: collective ends on host {} still differ from the other hosts' by {} (median; max {}) after "
            "alignment: cross-host waits shorter than that are uncertain",
            host.host, report::formatDuration(host.residual_median_ns), report::formatDuration(host.residual_max_ns)));
      }
    }
  }

  void apply() {
    result_.rank_clocks.resize(run_.ranks.size());
    for (size_t r = 0; r < run_.ranks.size(); ++r) {
      const Correction& c = corrections_[host_of_[r]];
      RankClock& clock = result_.rank_clocks[r];
      clock.anchor_shift_ns = anchor_shift_[r];
      clock.offset_ns = c.offset;
      clock.drift = c.drift;
      clock.reference_ns = result_.reference_ns;
      applyClock(clock, run_.ranks[r]);
    }
  }

  model::RunTrace& run_;
  ClockAlignment result_;
  std::vector<uint32_t> host_of_;  // per rank index
  std::vector<int64_t> anchor_shift_;
  std::vector<Correction> corrections_;  // per host
  std::vector<MemberTimes> members_;     // scratch
  std::vector<HostPart> parts_;          // scratch
};

template <typename Shift>
void shiftTimes(model::RankTrace& rank, Shift shift) {
  auto nonzero = [&](int64_t& t) {
    if (t != 0) t = shift(t);
  };
  for (auto& a : rank.activities) a.start_ns = shift(a.start_ns), a.end_ns = shift(a.end_ns);
  for (auto& c : rank.host_calls) c.start_ns = shift(c.start_ns), c.end_ns = shift(c.end_ns);
  rank.nvtx.change([&](std::vector<model::NvtxRange>& nvtx) {
    for (auto& n : nvtx) n.start_ns = shift(n.start_ns), nonzero(n.end_ns);
  });
  for (auto& o : rank.host_ops) o.start_ns = shift(o.start_ns), o.end_ns = shift(o.end_ns);
  for (auto& m : rank.memory) m.time_ns = shift(m.time_ns);
  rank.nccl_ops.change([&](std::vector<model::NcclOp>& ops) {
    for (auto& op : ops) nonzero(op.enqueue_ns), nonzero(op.gpu_start_ns), nonzero(op.gpu_end_ns);
  });
  for (auto& t : rank.transfers) nonzero(t.start_ns), nonzero(t.end_ns);
  for (auto& m : rank.metric_samples) m.time_ns = shift(m.time_ns);
  for (auto& p : rank.profiled_kernels) {
    if (!p.launch_found) continue;
    p.launch.start_ns = shift(p.launch.start_ns);
    p.launch.end_ns = shift(p.launch.end_ns);
  }
}

}  // namespace

void applyClock(const RankClock& clock, model::RankTrace& rank) {
  Correction c{clock.offset_ns, clock.drift};
  int64_t anchor = clock.anchor_shift_ns;
  rank.clock_offset_ns = anchor + std::llround(c.offset);
  if (c.drift == 0) {
    int64_t offset = rank.clock_offset_ns;
    if (offset != 0) shiftTimes(rank, [offset](int64_t t) { return t + offset; });
  } else {
    int64_t reference = clock.reference_ns;
    shiftTimes(rank,
               [&c, anchor, reference](int64_t t) { return t + anchor + std::llround(c.at(t + anchor, reference)); });
  }
}

ClockAlignment alignClocks(model::RunTrace& run) {
  return Aligner(run).run();
}

namespace {

// The typed result: what alignClocks did, as data (docs/report-schema.md, `clock`).
report::ResultValue clockValue(const ClockAlignment* clock) {
  using report::ResultValue;
  ResultValue hosts = ResultValue::array();
  ResultValue warnings = ResultValue::array();
  if (clock != nullptr) {
    for (const auto& host : clock->hosts) {
      ResultValue ranks = ResultValue::array();
      for (int32_t rank : host.ranks) ranks.push(ResultValue::integer(rank));
      hosts.push(ResultValue::object()
                     .set("host", ResultValue::text(host.host))
                     .set("ranks", std::move(ranks))
                     .set("offset_ns", ResultValue::integer(host.offset_ns))
                     .set("drift_ns_per_s", ResultValue::number(host.drift_ns_per_s))
                     .set("condition_shift_ns", ResultValue::integer(host.condition_shift_ns))
                     .set("matched", ResultValue::integer(static_cast<int64_t>(host.matched)))
                     .set("residual_median_ns", ResultValue::integer(host.residual_median_ns))
                     .set("residual_max_ns", ResultValue::integer(host.residual_max_ns))
                     .set("source", ResultValue::text(host.source)));
    }
    for (const auto& warning : clock->warnings) warnings.push(ResultValue::text(warning));
  }
  auto count = [&](uint64_t value) {
    return clock != nullptr ? ResultValue::integer(static_cast<int64_t>(value)) : ResultValue();
  };
  return ResultValue::object()
      .set("aligned", ResultValue::flag(clock != nullptr))
      .set("anchors_applied", clock != nullptr ? ResultValue::flag(clock->anchors_applied) : ResultValue())
      .set("reference_ns", clock != nullptr ? ResultValue::integer(clock->reference_ns) : ResultValue())
      .set("hosts", std::move(hosts))
      .set("cross_host_collectives", count(clock != nullptr ? clock->cross_host_collectives : 0))
      .set("collective_violations", count(clock != nullptr ? clock->collective_violations : 0))
      .set("p2p_pairs", count(clock != nullptr ? clock->p2p_pairs : 0))
      .set("p2p_violations", count(clock != nullptr ? clock->p2p_violations : 0))
      .set("warnings", std::move(warnings));
}

}  // namespace

void analyzeClock(const AnalysisInput& input, report::Report& report) {
  using report::Cell;
  using report::Unit;
  auto& section = report.addSection("clock", "Clock alignment across hosts");
  const ClockAlignment* clock = input.clock;
  report.addResult("clock", [&] { return clockValue(clock); });
  if (clock == nullptr) {
    section.notes.push_back(
        "Not aligned (--no-align, or --compat hta as HTA does): every rank's times are compared as recorded.");
    return;
  }
  if (clock->anchors_applied)
    section.notes.push_back(
        "The files' time bases differ: each was first mapped to CLOCK_REALTIME by its clock anchors.");
  if (clock->hosts.size() <= 1) {
    section.notes.push_back("One host: all ranks share its clock; nothing to align.");
  } else {
    section.notes.push_back(
        "offset = added to the host's times: the median difference of collective end times against the reference host, "
        "plus the least shift that lets no receive end before its send started and no collective end before its last "
        "member entered it (condition shift).");
    section.notes.push_back(fmt::format(
        "{} collectives matched across hosts; before the condition shifts {} of them and {} of {} cross-host "
        "send/receive pairs broke the clock conditions.",
        clock->cross_host_collectives, clock->collective_violations, clock->p2p_violations, clock->p2p_pairs));
  }
  report::Table hosts{"hosts",
                      "",
                      {{"host", "host"},
                       {"ranks", "ranks"},
                       {"offset", "offset"},
                       {"drift_ns_per_s", "drift (ns/s)"},
                       {"condition_shift", "condition shift"},
                       {"matched", "matched collectives"},
                       {"residual_median", "residual median"},
                       {"residual_max", "residual max"},
                       {"source", "from"}},
                      {}};
  for (const auto& host : clock->hosts) {
    hosts.rows.push_back(
        {Cell::of(host.host), Cell::of(report::formatRanks(host.ranks)),
         Cell::of(static_cast<double>(host.offset_ns), Unit::kNanoseconds), Cell::of(host.drift_ns_per_s, Unit::kNone),
         Cell::of(static_cast<double>(host.condition_shift_ns), Unit::kNanoseconds),
         Cell::of(static_cast<double>(host.matched), Unit::kCount),
         Cell::of(static_cast<double>(host.residual_median_ns), Unit::kNanoseconds),
         Cell::of(static_cast<double>(host.residual_max_ns), Unit::kNanoseconds), Cell::of(host.source)});
  }
  report::keepWorstRows(hosts, input.options.top, "hosts", "largest residual first",
                        [](const std::vector<Cell>& row) { return row[7].number; });
  section.tables.push_back(std::move(hosts));
  for (const auto& warning : clock->warnings)
    report::warn(report.stats, report.warnings, report::Stat::clock_alignment_problems, 1, warning);
}

}  // namespace gpuxray::analysis
