// Collectives across ranks: each collective matched over its members (docs/analyses.md,
// "Collectives"), how far apart the members entered it (arrival skew) and who came last, how long
// the transfer took once all were in, and the bandwidth that gives by nccl-tests' rules, against
// what the link between the members should carry.

#include "analyzer/analysis/collectives.h"

#include <fmt/core.h>

#include <algorithm>
#include <map>
#include <string_view>
#include <tuple>

#include "analyzer/analysis/analyses.h"
#include "analyzer/analysis/communicators.h"
#include "analyzer/analysis/statistics.h"
#include "analyzer/model/nccl_conventions.h"
#include "analyzer/report/units.h"

namespace gpuxray::analysis {
namespace {

using report::Cell;
using report::Unit;

// Below this size a collective is latency-bound; its bandwidth says little about the link.
constexpr uint64_t kBandwidthBoundBytes = 8ull << 20;
constexpr double kSlowLinkRatio = 2;

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
        link.limited_by = fmt::format("{}'s {}", report::rankName(rank.rank), kind);
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

// One matched collective, until the most skewed are picked.
struct SkewRow {
  int64_t skew;
  int64_t transfer;
  int64_t first_entry;
  size_t collective;
  int32_t first_rank, last_rank;
};

struct Signature {
  uint64_t comm_hash = 0;
  uint32_t func = 0;
  uint64_t bytes = 0;           // per the operation record (count x size)
  model::BusBandwidthRule bus;  // nccl-tests' data size and busbw factor
  std::vector<int64_t> skews;
  std::vector<int64_t> transfers;
  std::vector<double> busbw;
  std::map<int32_t, uint64_t> last;  // rank -> times it entered last
  LinkExpectation link;
};

std::vector<LastArrival> lastArrivals(const std::map<int32_t, uint64_t>& last) {
  std::vector<LastArrival> ranked;
  for (const auto& [rank, times] : last) ranked.push_back({rank, times});
  std::sort(ranked.begin(), ranked.end(), [](const LastArrival& a, const LastArrival& b) {
    return a.times != b.times ? a.times > b.times : a.rank < b.rank;
  });
  return ranked;
}

std::string lastArrivers(const std::vector<LastArrival>& ranked, size_t count) {
  std::string text;
  for (size_t i = 0; i < ranked.size() && i < 3; ++i)
    text += fmt::format("{}rank {} ({} of {})", i ? ", " : "", ranked[i].rank, ranked[i].times, count);
  return text.empty() ? "-" : text;
}

CollectiveSignature summarize(const Signature& s, std::string operation) {
  CollectiveSignature out;
  out.comm_hash = s.comm_hash;
  out.operation = std::move(operation);
  out.bytes = s.bytes;
  out.count = s.skews.size();
  out.skew_median_ns = median(s.skews);
  out.skew_p90_ns = percentile(s.skews, 90);
  out.skew_max_ns = *std::max_element(s.skews.begin(), s.skews.end());
  for (int64_t skew : s.skews) out.skew_total_ns += skew;
  out.transfer_median_ns = median(s.transfers);
  for (int64_t transfer : s.transfers) out.transfer_total_ns += transfer;
  out.data_bytes = s.bus.data_bytes;
  out.busbw_factor = s.bus.factor;
  out.busbw = s.busbw;
  out.link = s.link;
  if (!s.busbw.empty()) {
    out.busbw_median = median(s.busbw);
    if (out.busbw_factor > 0) out.algbw_median = out.busbw_median / out.busbw_factor;
  }
  if (out.linkKnown()) out.link_pct = 100.0 * median(s.busbw) / s.link.bytes_per_s;
  out.last_arrivals = lastArrivals(s.last);
  return out;
}

std::string labelOf(const CollectivesResult& result, uint64_t comm_hash) {
  auto it = result.communicators.find(comm_hash);
  return it != result.communicators.end() ? it->second.label() : CommunicatorInfo{}.label();
}

}  // namespace

bool CollectiveSignature::bandwidthBound() const {
  return bytes >= kBandwidthBoundBytes && linkKnown();
}

CollectivesResult computeCollectives(const AnalysisInput& input) {
  const auto& run = input.run;
  const CollectiveIndex& index = input.collectives();
  CollectivesResult result;
  result.origin_ns = run.firstActivityNs();
  auto& communicators = result.communicators;
  communicators = gatherCommunicators(run);
  RankWindows windows(input);

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
    skew_rows.push_back({skew, transfer, first_entry, ci, first_rank, last_rank});
  }

  double lowest_pct = -1;
  for (const auto& [key, s] : signatures) {
    result.signatures.push_back(summarize(s, index.funcs[s.func]));
    const CollectiveSignature& summary = result.signatures.back();
    if (summary.bandwidthBound() && (lowest_pct < 0 || summary.link_pct < lowest_pct)) {
      lowest_pct = summary.link_pct;
      result.lowest_bandwidth = result.signatures.size() - 1;
    }
  }

  size_t shown = std::min(input.options.top, skew_rows.size());
  std::partial_sort(skew_rows.begin(), skew_rows.begin() + static_cast<std::ptrdiff_t>(shown), skew_rows.end(),
                    [](const SkewRow& a, const SkewRow& b) {
                      return a.skew != b.skew ? a.skew > b.skew : a.collective < b.collective;
                    });
  for (size_t i = 0; i < shown && skew_rows[i].skew > 0; ++i) {
    const SkewRow& row = skew_rows[i];
    const MatchedCollective& c = index.collectives[row.collective];
    result.most_skewed.push_back({c.comm_hash, std::string(index.funcs[c.func]), c.seq,
                                  opOf(run, index.members[c.first_member]).bytes, row.first_entry, row.skew,
                                  row.transfer, row.first_rank, row.last_rank});
  }

  // Skew: the communicator whose collectives are entered furthest apart, by median.
  int64_t worst_skew = -1;
  for (const auto& [hash, skews] : skews_per_comm) {
    CommunicatorSkew comm{hash, skews.size(), median(skews), percentile(skews, 90), lastArrivals(last_per_comm[hash])};
    if (comm.skew_median_ns > worst_skew)
      worst_skew = comm.skew_median_ns, result.worst_skew = result.per_communicator.size();
    result.per_communicator.push_back(std::move(comm));
  }
  result.steps = static_cast<double>(windows.steps());
  result.step_length_ns = windows.medianLength();

  // A slow link: one host's NICs much slower than the other members', limiting collectives that run
  // at (or near) its speed.
  std::map<uint64_t, SlowCollectiveLink> slow_links;
  for (size_t i = 0; i < result.signatures.size(); ++i) {
    const CollectiveSignature& s = result.signatures[i];
    bool heterogeneous = s.link.fastest_bytes_per_s >= kSlowLinkRatio * s.link.bytes_per_s && s.link.bytes_per_s > 0;
    if (heterogeneous && s.bandwidthBound() && s.link_pct >= CollectivesResult::kLowBusBandwidthPct)
      slow_links[s.comm_hash].signatures.push_back(i);
  }
  for (auto& [hash, slow] : slow_links) {
    const LinkExpectation& link = result.signatures[slow.signatures.front()].link;
    slow.comm_hash = hash;
    slow.ratio = link.fastest_bytes_per_s / link.bytes_per_s;
    for (size_t i : slow.signatures) {
      const CollectiveSignature& s = result.signatures[i];
      slow.lost_ns += static_cast<double>(s.transfer_median_ns) * static_cast<double>(s.count) * (1 - 1 / slow.ratio);
    }
    slow.biggest = *std::max_element(slow.signatures.begin(), slow.signatures.end(), [&](size_t a, size_t b) {
      return result.signatures[a].bytes * result.signatures[a].count <
             result.signatures[b].bytes * result.signatures[b].count;
    });
    result.slow_links.push_back(std::move(slow));
  }
  return result;
}

namespace {

report::ResultValue arrivalsValue(const std::vector<LastArrival>& arrivals) {
  auto array = report::ResultValue::array();
  for (const LastArrival& a : arrivals) {
    array.push(report::ResultValue::object()
                   .set("rank", report::ResultValue::integer(a.rank))
                   .set("times", report::ResultValue::integer(static_cast<int64_t>(a.times))));
  }
  return array;
}

report::ResultValue communicatorOf(const std::map<uint64_t, CommunicatorInfo>& communicators, uint64_t hash) {
  auto it = communicators.find(hash);
  return communicatorValue(hash, it != communicators.end() ? &it->second : nullptr);
}

report::ResultValue resultValue(const CollectivesResult& result) {
  using report::ResultValue;
  ResultValue signatures = ResultValue::array();
  for (const CollectiveSignature& s : result.signatures) {
    ResultValue link;  // null: unknown
    if (s.link.bytes_per_s > 0) {
      link =
          ResultValue::object()
              .set("bytes_per_s", ResultValue::number(s.link.bytes_per_s))
              .set("limited_by", ResultValue::text(s.link.limited_by))
              .set("slowest_host", s.link.slowest_host.empty() ? ResultValue() : ResultValue::text(s.link.slowest_host))
              .set("fastest_host", s.link.fastest_host.empty() ? ResultValue() : ResultValue::text(s.link.fastest_host))
              .set("fastest_bytes_per_s",
                   s.link.fastest_bytes_per_s > 0 ? ResultValue::number(s.link.fastest_bytes_per_s) : ResultValue());
    }
    signatures.push(
        ResultValue::object()
            .set("communicator", communicatorOf(result.communicators, s.comm_hash))
            .set("operation", ResultValue::text(s.operation))
            .set("bytes", s.bytes > 0 ? ResultValue::integer(static_cast<int64_t>(s.bytes)) : ResultValue())
            .set("count", ResultValue::integer(static_cast<int64_t>(s.count)))
            .set("skew_median_ns", ResultValue::integer(s.skew_median_ns))
            .set("skew_p90_ns", ResultValue::integer(s.skew_p90_ns))
            .set("skew_max_ns", ResultValue::integer(s.skew_max_ns))
            .set("skew_total_ns", ResultValue::integer(s.skew_total_ns))
            .set("transfer_median_ns", ResultValue::integer(s.transfer_median_ns))
            .set("transfer_total_ns", ResultValue::integer(s.transfer_total_ns))
            .set("data_bytes", s.data_bytes > 0 ? ResultValue::number(s.data_bytes) : ResultValue())
            .set("busbw_factor", s.data_bytes > 0 ? ResultValue::number(s.busbw_factor) : ResultValue())
            .set("algbw_median_bytes_per_s", s.data_bytes > 0 ? ResultValue::number(s.algbw_median) : ResultValue())
            .set("busbw_median_bytes_per_s", s.data_bytes > 0 ? ResultValue::number(s.busbw_median) : ResultValue())
            .set("link", std::move(link))
            .set("link_pct", ResultValue::number(s.link_pct))
            .set("last_arrivals", arrivalsValue(s.last_arrivals)));
  }
  ResultValue skewed = ResultValue::array();
  for (const SkewedCollective& c : result.most_skewed) {
    skewed.push(ResultValue::object()
                    .set("communicator", communicatorOf(result.communicators, c.comm_hash))
                    .set("operation", ResultValue::text(c.operation))
                    .set("seq", ResultValue::integer(static_cast<int64_t>(c.seq)))
                    .set("bytes", c.bytes > 0 ? ResultValue::integer(static_cast<int64_t>(c.bytes)) : ResultValue())
                    .set("first_entry_ns", ResultValue::integer(c.first_entry_ns - result.origin_ns))
                    .set("skew_ns", ResultValue::integer(c.skew_ns))
                    .set("transfer_ns", ResultValue::integer(c.transfer_ns))
                    .set("first_rank", ResultValue::integer(c.first_rank))
                    .set("last_rank", ResultValue::integer(c.last_rank)));
  }
  ResultValue per_communicator = ResultValue::array();
  for (const CommunicatorSkew& c : result.per_communicator) {
    per_communicator.push(ResultValue::object()
                              .set("communicator", communicatorOf(result.communicators, c.comm_hash))
                              .set("collectives", ResultValue::integer(static_cast<int64_t>(c.collectives)))
                              .set("skew_median_ns", ResultValue::integer(c.skew_median_ns))
                              .set("skew_p90_ns", ResultValue::integer(c.skew_p90_ns))
                              .set("last_arrivals", arrivalsValue(c.last_arrivals))
                              .set("slowest_member", c.last_arrivals.empty()
                                                         ? ResultValue()
                                                         : ResultValue::integer(c.last_arrivals.front().rank)));
  }
  ResultValue slow_links = ResultValue::array();
  for (const SlowCollectiveLink& slow : result.slow_links) {
    ResultValue indices = ResultValue::array();
    for (size_t i : slow.signatures) indices.push(ResultValue::integer(static_cast<int64_t>(i)));
    slow_links.push(
        ResultValue::object()
            .set("communicator", communicatorOf(result.communicators, slow.comm_hash))
            .set("signatures", std::move(indices))
            .set("limited_by", ResultValue::text(result.signatures[slow.signatures.front()].link.limited_by))
            .set("ratio", ResultValue::number(slow.ratio))
            .set("lost_ns_per_step", ResultValue::number(slow.lost_ns / result.steps)));
  }
  auto index = [](std::optional<size_t> i) {
    return i ? ResultValue::integer(static_cast<int64_t>(*i)) : ResultValue();
  };
  return ResultValue::object()
      .set("origin_ns", ResultValue::integer(result.origin_ns))
      .set("signatures", std::move(signatures))
      .set("most_skewed", std::move(skewed))
      .set("per_communicator", std::move(per_communicator))
      .set("worst_skew", index(result.worst_skew))
      .set("lowest_bandwidth", index(result.lowest_bandwidth))
      .set("slow_links", std::move(slow_links));
}

}  // namespace

void presentCollectives(const CollectivesResult& result, report::Report& report) {
  auto& section = report.addSection("collectives", "Collectives across ranks");
  report.addResult("collectives", [&] { return resultValue(result); });
  section.notes.push_back(
      "entry = GPU start of a member's NCCL kernel (when that rank joined); skew = last entry - first entry; transfer "
      "= "
      "median member end - last entry; busbw by nccl-tests' rules, against the slowest link among the members (NVLink "
      "within a host, the NICs across hosts).");
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
  for (const CollectiveSignature& s : result.signatures) {
    table.rows.push_back(
        {Cell::of(labelOf(result, s.comm_hash)), Cell::of(s.operation),
         Cell::of(static_cast<double>(s.bytes), Unit::kBytes), Cell::of(static_cast<double>(s.count), Unit::kCount),
         Cell::of(static_cast<double>(s.skew_median_ns), Unit::kNanoseconds),
         Cell::of(static_cast<double>(s.skew_p90_ns), Unit::kNanoseconds),
         Cell::of(static_cast<double>(s.transfer_median_ns), Unit::kNanoseconds),
         s.busbw.empty() ? Cell::of("-") : Cell::of(s.busbw_median, Unit::kBytesPerSecond),
         s.link.bytes_per_s > 0 ? Cell::of(s.link.bytes_per_s, Unit::kBytesPerSecond) : Cell::of("unknown"),
         s.linkKnown() ? Cell::of(s.link_pct, Unit::kPercent) : Cell::of("-"),
         Cell::of(s.link.limited_by.empty() ? "-" : s.link.limited_by),
         Cell::of(lastArrivers(s.last_arrivals, s.count))});
  }
  section.tables.push_back(std::move(table));

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
  for (const SkewedCollective& row : result.most_skewed) {
    top.rows.push_back(
        {Cell::of(labelOf(result, row.comm_hash)), Cell::of(row.operation),
         Cell::of(static_cast<double>(row.seq), Unit::kNone), Cell::of(static_cast<double>(row.bytes), Unit::kBytes),
         Cell::of(static_cast<double>(row.skew_ns), Unit::kNanoseconds), Cell::of(row.first_rank, Unit::kNone),
         Cell::of(row.last_rank, Unit::kNone), Cell::of(static_cast<double>(row.transfer_ns), Unit::kNanoseconds)});
  }
  section.tables.push_back(std::move(top));
  if (!result.worst_skew) return;

  const CommunicatorSkew& worst = result.per_communicator[*result.worst_skew];
  report.addMetric("collective_skew_ms", static_cast<double>(worst.skew_median_ns) / 1e6, Unit::kMilliseconds,
                   "median arrival skew of matched collectives (last entry - first entry), worst communicator");
  if (result.lowest_bandwidth) {
    report.addMetric("busbw_pct_of_link", result.signatures[*result.lowest_bandwidth].link_pct, Unit::kPercent,
                     "median bus bandwidth of collectives of 8 MiB or more, % of the slowest member link, lowest");
  }
  const double steps = result.steps;

  if (worst.skew_median_ns >= CollectivesResult::kLargeSkewNs) {
    report::Finding finding;
    finding.analysis = "collectives";
    finding.cost_ns = static_cast<double>(worst.skew_median_ns) * static_cast<double>(worst.collectives) / steps;
    finding.severity = report::Severity::kWarning;  // the straggler finding says who and why
    finding.summary =
        fmt::format("ranks enter collectives on {} {} apart (median skew; p90 {}): the first ones wait for the last",
                    labelOf(result, worst.comm_hash),
                    report::formatValue(static_cast<double>(worst.skew_median_ns), Unit::kNanoseconds),
                    report::formatValue(static_cast<double>(worst.skew_p90_ns), Unit::kNanoseconds));
    finding.evidence.push_back(fmt::format("last to arrive: {}", lastArrivers(worst.last_arrivals, worst.collectives)));
    finding.evidence.push_back("see the stragglers section for why the last ones are late");
    report.findings.push_back(std::move(finding));
  }

  for (const SlowCollectiveLink& slow : result.slow_links) {
    const LinkExpectation& link = result.signatures[slow.signatures.front()].link;
    const CollectiveSignature& biggest = result.signatures[slow.biggest];
    report::Finding finding;
    finding.analysis = "collectives";
    finding.cost_ns = slow.lost_ns / steps;
    finding.severity = result.step_length_ns > 0 && finding.cost_ns >= 0.1 * static_cast<double>(result.step_length_ns)
                           ? report::Severity::kCritical
                           : report::Severity::kWarning;
    finding.summary = fmt::format(
        "slow link: {} ({}) is {:.1f}x slower than {}'s and limits {} on {} to {} bus bandwidth", link.limited_by,
        report::formatValue(link.bytes_per_s, Unit::kBytesPerSecond), slow.ratio, link.fastest_host, biggest.operation,
        labelOf(result, slow.comm_hash), report::formatValue(biggest.busbw_median, Unit::kBytesPerSecond));
    for (size_t i : slow.signatures) {
      const CollectiveSignature& s = result.signatures[i];
      finding.evidence.push_back(
          fmt::format("{} x {} of {}: transfer {} (median), busbw {} = {:.1f} % of {}", s.count, s.operation,
                      report::formatValue(static_cast<double>(s.bytes), Unit::kBytes),
                      report::formatValue(static_cast<double>(s.transfer_median_ns), Unit::kNanoseconds),
                      report::formatValue(s.busbw_median, Unit::kBytesPerSecond), s.link_pct,
                      report::formatValue(link.bytes_per_s, Unit::kBytesPerSecond)));
    }
    finding.evidence.push_back(
        fmt::format("{}'s NICs give {}: at that speed these transfers would take {:.1f}x less time", link.fastest_host,
                    report::formatValue(link.fastest_bytes_per_s, Unit::kBytesPerSecond), slow.ratio));
    report.findings.push_back(std::move(finding));
  }

  // Bandwidth well below what the slowest link gives.
  if (result.lowest_bandwidth &&
      result.signatures[*result.lowest_bandwidth].link_pct < CollectivesResult::kLowBusBandwidthPct) {
    const CollectiveSignature& s = result.signatures[*result.lowest_bandwidth];
    double ideal = s.data_bytes * s.busbw_factor / s.link.bytes_per_s * 1e9;
    report::Finding finding;
    finding.analysis = "collectives";
    finding.severity = report::Severity::kWarning;
    finding.cost_ns =
        std::max(0.0, static_cast<double>(s.transfer_median_ns) - ideal) * static_cast<double>(s.count) / steps;
    finding.summary =
        fmt::format("{} of {} on {} reaches {:.1f} % of the link's bandwidth ({} busbw; {} gives {})", s.operation,
                    report::formatValue(static_cast<double>(s.bytes), Unit::kBytes), labelOf(result, s.comm_hash),
                    s.link_pct, report::formatValue(s.busbw_median, Unit::kBytesPerSecond), s.link.limited_by,
                    report::formatValue(s.link.bytes_per_s, Unit::kBytesPerSecond));
    finding.evidence.push_back(
        fmt::format("{} calls, transfer {} (median) where the link allows {}", s.count,
                    report::formatValue(static_cast<double>(s.transfer_median_ns), Unit::kNanoseconds),
                    report::formatValue(ideal, Unit::kNanoseconds)));
    report.findings.push_back(std::move(finding));
  }
}

void analyzeCollectives(const AnalysisInput& input, report::Report& report) {
  presentCollectives(computeCollectives(input), report);
}

}  // namespace gpuxray::analysis
