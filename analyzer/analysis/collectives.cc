// Collectives across ranks: each collective matched over its members (docs/analyses.md,
// "Collectives"), how far apart the members entered it (arrival skew) and who came last, how long
// the transfer took once all were in, and the bandwidth that gives by nccl-tests' rules, against
// what the link between the members should carry.

#include <fmt/core.h>

#include <algorithm>
#include <map>
#include <string_view>
#include <tuple>

#include "analyzer/analysis/analyses.h"
#include "analyzer/analysis/communicators.h"
#include "analyzer/analysis/statistics.h"
#include "analyzer/model/nccl_conventions.h"

namespace gpuxray::analysis {
namespace {

using report::Cell;
using report::Unit;

// Below this size a collective is latency-bound; its bandwidth says little about the link.
constexpr uint64_t kBandwidthBoundBytes = 8ull << 20;
constexpr double kLowBusBandwidthPct = 50;
constexpr double kSlowLinkRatio = 2;
constexpr int64_t kLargeSkewNs = 100'000;

// What the slowest link among a collective's members carries per direction.
struct LinkExpectation {
  double bytes_per_s = 0;  // 0: unknown
  std::string limited_by;  // "node-b's NIC mlx5_0", "rank 3's NVLink"
  // Across hosts: the fastest host's NIC bandwidth, to tell one slow host from a slow fabric.
  double fastest_bytes_per_s = 0;
  std::string slowest_host, fastest_host;
};

bool touchesGpu(const format::Link& link, uint32_t device) {
  auto is = [device](const format::Endpoint& e) {
    return e.kind == format::EndpointKind::kGpu && e.device == static_cast<int32_t>(device);
  };
  return is(link.a) || is(link.b);
}

// A GPU's NVLink bandwidth (all its links together), or its PCIe link's when it has no NVLink.
std::pair<double, const char*> gpuLinkBandwidth(const model::RankTrace& rank, uint32_t device) {
  double nvlink = 0, pcie = 0;
  for (const auto& link : rank.header.links) {
    if (!touchesGpu(link, device)) continue;
    if (link.kind == format::LinkKind::kNvLink) nvlink += static_cast<double>(link.bandwidth_bytes_per_s);
    if (link.kind == format::LinkKind::kPcie) pcie = std::max(pcie, static_cast<double>(link.bandwidth_bytes_per_s));
  }
  return nvlink > 0 ? std::pair{nvlink, "NVLink"} : std::pair{pcie, "PCIe"};
}

double nicBandwidth(const model::RankTrace& rank, std::string& names) {
  double total = 0;
  for (const auto& nic : rank.header.nics) {
    total += static_cast<double>(nic.bandwidth_bytes_per_s);
    names += (names.empty() ? "" : "+") + nic.name;
  }
  return total;
}

LinkExpectation expectedLink(const model::RunTrace& run, std::span<const MemberOp> members) {
  LinkExpectation link;
  std::map<std::string, std::pair<double, std::string>> per_host;  // host -> (NIC bandwidth, names)
  for (MemberOp m : members) per_host.try_emplace(run.ranks[m.rank_index].header.hostname);
  if (per_host.size() == 1) {
    for (MemberOp m : members) {
      const auto& rank = run.ranks[m.rank_index];
      auto [bandwidth, kind] = gpuLinkBandwidth(rank, opOf(run, m).device);
      if (bandwidth <= 0) return {};
      if (link.bytes_per_s == 0 || bandwidth < link.bytes_per_s) {
        link.bytes_per_s = bandwidth;
        link.limited_by = fmt::format("rank {}'s {}", rank.rank, kind);
      }
    }
    return link;
  }
  for (MemberOp m : members) {
    const auto& rank = run.ranks[m.rank_index];
    auto& [bandwidth, names] = per_host[rank.header.hostname];
    if (bandwidth == 0) bandwidth = nicBandwidth(rank, names);
  }
  for (const auto& [host, nic] : per_host) {
    if (nic.first <= 0) return {};  // a host without NIC figures: the slowest cannot be told
    if (link.bytes_per_s == 0 || nic.first < link.bytes_per_s) {
      link.bytes_per_s = nic.first;
      link.slowest_host = host;
      link.limited_by = fmt::format("{}'s NIC {}", host, nic.second);
    }
    if (nic.first > link.fastest_bytes_per_s) {
      link.fastest_bytes_per_s = nic.first;
      link.fastest_host = host;
    }
  }
  return link;
}

struct Signature {
  uint64_t comm_hash = 0;
  uint32_t func = 0;
  uint64_t bytes = 0;  // per the operation record (count x size)
  model::BusBandwidthRule bus;  // nccl-tests' data size and busbw factor
  std::vector<int64_t> skews;
  std::vector<int64_t> transfers;
  std::vector<double> busbw;
  std::map<int32_t, uint64_t> last;  // rank -> times it entered last
  LinkExpectation link;
  // Filled by summarize().
  int64_t skew_median = 0, skew_p90 = 0, transfer_median = 0;
  double busbw_median = 0;
  double link_pct = 0;  // 0 when the link or the bandwidth is unknown

  void summarize() {
    skew_median = median(skews);
    skew_p90 = percentile(skews, 90);
    transfer_median = median(transfers);
    busbw_median = median(busbw);
    link_pct = linkKnown() ? 100.0 * busbw_median / link.bytes_per_s : 0;
  }
  bool linkKnown() const { return link.bytes_per_s > 0 && !busbw.empty(); }
  bool bandwidthBound() const { return bytes >= kBandwidthBoundBytes && linkKnown(); }
};

struct SkewRow {
  int64_t skew;
  int64_t transfer;
  size_t collective;
  int32_t first_rank, last_rank;
};

std::string lastArrivers(const std::map<int32_t, uint64_t>& last, size_t count) {
  std::vector<std::pair<uint64_t, int32_t>> ranked;
  for (const auto& [rank, times] : last) ranked.emplace_back(times, rank);
  std::sort(ranked.begin(), ranked.end(),
            [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  std::string text;
  for (size_t i = 0; i < ranked.size() && i < 3; ++i)
    text += fmt::format("{}rank {} ({} of {})", i ? ", " : "", ranked[i].second, ranked[i].first, count);
  return text.empty() ? "-" : text;
}

}  // namespace

void analyzeCollectives(const AnalysisInput& input, report::Report& report) {
  const auto& run = input.run;
  const CollectiveIndex& index = input.collectives();
  auto communicators = gatherCommunicators(run);
  RankWindows windows(input);
  auto& section = report.addSection("collectives", "Collectives across ranks");
  section.notes.push_back(
      "entry = GPU start of a member's NCCL kernel (when that rank joined); skew = last entry - first entry; transfer "
      "= "
      "median member end - last entry; busbw by nccl-tests' rules, against the slowest link among the members (NVLink "
      "within a host, the NICs across hosts).");

  std::map<std::tuple<uint64_t, uint32_t, uint64_t>, Signature> signatures;
  std::map<uint64_t, std::vector<int64_t>> skews_per_comm;
  std::map<uint64_t, std::map<int32_t, uint64_t>> last_per_comm;
  std::map<uint64_t, LinkExpectation> links;
  std::vector<SkewRow> skew_rows;
  std::vector<int64_t> ends;
  for (size_t ci = 0; ci < index.collectives.size(); ++ci) {
    const MatchedCollective& c = index.collectives[ci];
    auto members = index.membersOf(c);
    int64_t first_entry = 0, last_entry = 0;
    int32_t first_rank = -1, last_rank = -1;
    size_t last_member = 0;
    ends.clear();
    for (size_t k = 0; k < members.size(); ++k) {
      const auto& op = opOf(run, members[k]);
      int32_t rank = run.ranks[members[k].rank_index].rank;
      if (first_rank < 0 || op.gpu_start_ns < first_entry) first_entry = op.gpu_start_ns, first_rank = rank;
      if (last_rank < 0 || op.gpu_start_ns > last_entry)
        last_entry = op.gpu_start_ns, last_rank = rank, last_member = k;
      ends.push_back(op.gpu_end_ns);
    }
    if (!windows.contains(members[last_member].rank_index, last_entry)) continue;
    int64_t skew = last_entry - first_entry;
    auto middle = ends.begin() + static_cast<std::ptrdiff_t>((ends.size() - 1) / 2);
    std::nth_element(ends.begin(), middle, ends.end());
    int64_t transfer = *middle - last_entry;

    const auto& info = communicators[c.comm_hash];
    int n = std::max<int>(info.nranks, static_cast<int>(members.size()));
    const auto& func = index.funcs[c.func];
    uint64_t bytes = opOf(run, members[0]).bytes;
    auto& s = signatures[{c.comm_hash, c.func, bytes}];
    if (s.skews.empty()) {
      s.comm_hash = c.comm_hash, s.func = c.func, s.bytes = bytes;
      s.bus = model::busBandwidthRule(func, bytes, n).value_or(model::BusBandwidthRule{});
      auto [link, inserted] = links.try_emplace(c.comm_hash);
      if (inserted) link->second = expectedLink(run, members);
      s.link = link->second;
    }
    s.skews.push_back(skew);
    s.transfers.push_back(transfer);
    if (transfer > 0) s.busbw.push_back(s.bus.busbw(transfer));
    skews_per_comm[c.comm_hash].push_back(skew);
    if (skew > 0) {
      ++s.last[last_rank];
      ++last_per_comm[c.comm_hash][last_rank];
    }
    skew_rows.push_back({skew, transfer, ci, first_rank, last_rank});
  }

  report::Table table{"signatures",
                      "Per communicator, operation and size",
                      {{"communicator", "communicator"},
                       {"operation", "operation"},
                       {"bytes", "bytes"},
                       {"count", "count"},
                       {"skew_median", "skew median"},
                       {"skew_p90", "skew p90"},
                       {"transfer_median", "transfer median"},
                       {"busbw_median", "busbw median"},
                       {"link_bandwidth", "link"},
                       {"link_pct", "% of link"},
                       {"limited_by", "slowest link"},
                       {"last_arrivers", "last to arrive"}},
                      {}};
  double lowest_pct = -1;
  const Signature* worst_bandwidth = nullptr;
  for (auto& [key, s] : signatures) {
    s.summarize();
    const auto& info = communicators[s.comm_hash];
    table.rows.push_back(
        {Cell::of(info.label()), Cell::of(index.funcs[s.func]), Cell::of(static_cast<double>(s.bytes), Unit::kBytes),
         Cell::of(static_cast<double>(s.skews.size()), Unit::kCount),
         Cell::of(static_cast<double>(s.skew_median), Unit::kNanoseconds),
         Cell::of(static_cast<double>(s.skew_p90), Unit::kNanoseconds),
         Cell::of(static_cast<double>(s.transfer_median), Unit::kNanoseconds),
         s.busbw.empty() ? Cell::of("-") : Cell::of(s.busbw_median, Unit::kBytesPerSecond),
         s.link.bytes_per_s > 0 ? Cell::of(s.link.bytes_per_s, Unit::kBytesPerSecond) : Cell::of("unknown"),
         s.linkKnown() ? Cell::of(s.link_pct, Unit::kPercent) : Cell::of("-"),
         Cell::of(s.link.limited_by.empty() ? "-" : s.link.limited_by),
         Cell::of(lastArrivers(s.last, s.skews.size()))});
    if (s.bandwidthBound() && (lowest_pct < 0 || s.link_pct < lowest_pct)) {
      lowest_pct = s.link_pct;
      worst_bandwidth = &s;
    }
  }
  section.tables.push_back(std::move(table));

  size_t shown = std::min(input.options.top, skew_rows.size());
  std::partial_sort(skew_rows.begin(), skew_rows.begin() + static_cast<std::ptrdiff_t>(shown), skew_rows.end(),
                    [](const SkewRow& a, const SkewRow& b) {
                      return a.skew != b.skew ? a.skew > b.skew : a.collective < b.collective;
                    });
  report::Table top{"top_skew",
                    "Collectives whose members arrived furthest apart",
                    {{"communicator", "communicator"},
                     {"operation", "operation"},
                     {"seq", "seq"},
                     {"bytes", "bytes"},
                     {"skew", "skew"},
                     {"first", "first in"},
                     {"last", "last in"},
                     {"transfer", "transfer"}},
                    {}};
  for (size_t i = 0; i < shown && skew_rows[i].skew > 0; ++i) {
    const SkewRow& row = skew_rows[i];
    const MatchedCollective& c = index.collectives[row.collective];
    top.rows.push_back({Cell::of(communicators[c.comm_hash].label()), Cell::of(index.funcs[c.func]),
                        Cell::of(static_cast<double>(c.seq), Unit::kNone),
                        Cell::of(static_cast<double>(opOf(run, index.members[c.first_member]).bytes), Unit::kBytes),
                        Cell::of(static_cast<double>(row.skew), Unit::kNanoseconds),
                        Cell::of(row.first_rank, Unit::kNone), Cell::of(row.last_rank, Unit::kNone),
                        Cell::of(static_cast<double>(row.transfer), Unit::kNanoseconds)});
  }
  section.tables.push_back(std::move(top));
  if (skews_per_comm.empty()) return;

  // Skew: the communicator whose collectives are entered furthest apart, by median.
  uint64_t worst_comm = 0;
  int64_t worst_skew = -1;
  for (const auto& [hash, skews] : skews_per_comm) {
    int64_t m = median(skews);
    if (m > worst_skew) worst_skew = m, worst_comm = hash;
  }
  report.addMetric("collective_skew_ms", static_cast<double>(worst_skew) / 1e6, Unit::kMilliseconds,
                   "median arrival skew of matched collectives (last entry - first entry), worst communicator");
  if (lowest_pct >= 0) {
    report.addMetric("busbw_pct_of_link", lowest_pct, Unit::kPercent,
                     "median bus bandwidth of collectives of 8 MiB or more, % of the slowest member link, lowest");
  }
  double steps = static_cast<double>(windows.steps());
  int64_t step_length = windows.medianLength();

  if (worst_skew >= kLargeSkewNs) {
    const auto& skews = skews_per_comm[worst_comm];
    const auto& last = last_per_comm[worst_comm];
    report::Finding finding;
    finding.analysis = "collectives";
    finding.cost_ns = static_cast<double>(worst_skew) * static_cast<double>(skews.size()) / steps;
    finding.severity = report::Severity::kWarning;  // the straggler finding says who and why
    finding.summary = fmt::format(
        "ranks enter collectives on {} {} apart (median skew; p90 {}): the first ones wait for the last",
        communicators[worst_comm].label(), report::formatValue(static_cast<double>(worst_skew), Unit::kNanoseconds),
        report::formatValue(static_cast<double>(percentile(skews, 90)), Unit::kNanoseconds));
    finding.evidence.push_back(fmt::format("last to arrive: {}", lastArrivers(last, skews.size())));
    finding.evidence.push_back("see the stragglers section for why the last ones are late");
    report.findings.push_back(std::move(finding));
  }

  // A slow link: one host's NICs much slower than the other members', limiting collectives that run
  // at (or near) its speed.
  std::map<uint64_t, std::vector<const Signature*>> slow_links;
  for (const auto& [key, s] : signatures) {
    bool heterogeneous = s.link.fastest_bytes_per_s >= kSlowLinkRatio * s.link.bytes_per_s && s.link.bytes_per_s > 0;
    if (heterogeneous && s.bandwidthBound() && s.link_pct >= kLowBusBandwidthPct) slow_links[s.comm_hash].push_back(&s);
  }
  for (const auto& [hash, group] : slow_links) {
    const LinkExpectation& link = group.front()->link;
    double ratio = link.fastest_bytes_per_s / link.bytes_per_s;
    double lost = 0;
    for (const Signature* s : group)
      lost += static_cast<double>(s->transfer_median) * static_cast<double>(s->skews.size()) * (1 - 1 / ratio);
    const Signature& biggest = **std::max_element(
        group.begin(), group.end(),
        [](const Signature* a, const Signature* b) { return a->bytes * a->skews.size() < b->bytes * b->skews.size(); });
    report::Finding finding;
    finding.analysis = "collectives";
    finding.cost_ns = lost / steps;
    finding.severity = step_length > 0 && finding.cost_ns >= 0.1 * static_cast<double>(step_length)
                           ? report::Severity::kCritical
                           : report::Severity::kWarning;
    finding.summary =
        fmt::format("slow link: {} ({}) is {:.1f}x slower than {}'s and limits {} on {} to {} bus bandwidth",
                    link.limited_by, report::formatValue(link.bytes_per_s, Unit::kBytesPerSecond), ratio,
                    link.fastest_host, index.funcs[biggest.func], communicators[hash].label(),
                    report::formatValue(biggest.busbw_median, Unit::kBytesPerSecond));
    for (const Signature* s : group) {
      finding.evidence.push_back(
          fmt::format("{} x {} of {}: transfer {} (median), busbw {} = {:.1f} % of {}", s->skews.size(),
                      index.funcs[s->func], report::formatValue(static_cast<double>(s->bytes), Unit::kBytes),
                      report::formatValue(static_cast<double>(s->transfer_median), Unit::kNanoseconds),
                      report::formatValue(s->busbw_median, Unit::kBytesPerSecond), s->link_pct,
                      report::formatValue(link.bytes_per_s, Unit::kBytesPerSecond)));
    }
    finding.evidence.push_back(
        fmt::format("{}'s NICs give {}: at that speed these transfers would take {:.1f}x less time", link.fastest_host,
                    report::formatValue(link.fastest_bytes_per_s, Unit::kBytesPerSecond), ratio));
    report.findings.push_back(std::move(finding));
  }

  // Bandwidth well below what the slowest link gives.
  if (worst_bandwidth != nullptr && lowest_pct < kLowBusBandwidthPct) {
    const Signature& s = *worst_bandwidth;
    double ideal = s.bus.busBytes() / s.link.bytes_per_s * 1e9;
    report::Finding finding;
    finding.analysis = "collectives";
    finding.severity = report::Severity::kWarning;
    finding.cost_ns =
        std::max(0.0, static_cast<double>(s.transfer_median) - ideal) * static_cast<double>(s.skews.size()) / steps;
    finding.summary = fmt::format("{} of {} on {} reaches {:.1f} % of the link's bandwidth ({} busbw; {} gives {})",
                                  index.funcs[s.func], report::formatValue(static_cast<double>(s.bytes), Unit::kBytes),
                                  communicators[s.comm_hash].label(), s.link_pct,
                                  report::formatValue(s.busbw_median, Unit::kBytesPerSecond), s.link.limited_by,
                                  report::formatValue(s.link.bytes_per_s, Unit::kBytesPerSecond));
    finding.evidence.push_back(
        fmt::format("{} calls, transfer {} (median) where the link allows {}", s.skews.size(),
                    report::formatValue(static_cast<double>(s.transfer_median), Unit::kNanoseconds),
                    report::formatValue(ideal, Unit::kNanoseconds)));
    report.findings.push_back(std::move(finding));
  }
}

}  // namespace gpuxray::analysis
