// Link hotspots: the bytes each link of the run's topology (NVLink and PCIe links of every host's
// GPUs, each host's NICs) carries per step, measured where NCCL reports them and estimated from a
// ring model where it does not, with utilization against the link's capacity and the imbalance
// among equivalent links (definitions: docs/analyses.md).

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>

#include "analyzer/analysis/analyses.h"
#include "analyzer/analysis/communicators.h"
#include "analyzer/analysis/statistics.h"
#include "analyzer/model/nccl_conventions.h"

namespace gpuxray::analysis {
namespace {

using report::Cell;
using report::Unit;

constexpr uint8_t kMeasured = 1;
constexpr uint8_t kEstimated = 2;

struct LinkLoad {
  std::string host;
  std::string name;       // within its host: "NIC mlx5_1", "NVLink GPU0 ↔ NVSwitch"
  std::string kind;       // "NIC", "NVLink", "PCIe", ...
  std::string group;      // equivalent links: "NICs", "NVLinks", ...
  double capacity = 0;    // bytes/s; 0 when unknown
  bool member = false;    // used by a rank of the run: counts toward its group's imbalance
  bool assumed = false;   // a NIC picked by local rank, not reported
  uint64_t forward = 0;   // bytes a→b (NIC: sent)
  uint64_t backward = 0;  // bytes b→a (NIC: received)
  uint8_t sources = 0;
  std::vector<Interval> busy;
  // NICs: what NCCL's proxy moved through it and how long the network was busy doing so: per
  // direction, the transfers' network time (each the union of its concurrent steps' waits, one
  // channel), summed, but never more than the union of the transfers' own spans (channels overlap
  // in time); sends and receives add up (a NIC moves both at once).
  uint64_t network_bytes = 0;
  uint64_t network_wait_ns = 0;
  uint64_t direction_wait_ns[2] = {0, 0};
  std::vector<Interval> direction_spans[2];
  double achievedBandwidth() const {
    return network_wait_ns > 0 ? static_cast<double>(network_bytes) / (static_cast<double>(network_wait_ns) * 1e-9)
                               : 0.0;
  }

  uint64_t bytes() const { return forward + backward; }
  std::string label() const { return host + " " + name; }
};

// A link some bytes cross, and which way.
struct Hop {
  size_t link = 0;
  bool forward = true;
};

// A link's endpoints as keys (a GPU's UUID text, a switch, a bridge's bus).
struct LinkEnds {
  std::string a, b;
  bool a_is_gpu = false, b_is_gpu = false;
};

std::string uuidText(const std::string& raw) {
  if (raw.size() != 16) return {};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string text = "GPU-";
  for (size_t i = 0; i < raw.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) text += '-';
    auto byte = static_cast<uint8_t>(raw[i]);
    text += kHex[byte >> 4];
    text += kHex[byte & 0xf];
  }
  return text;
}

std::string endpointKey(const format::Endpoint& e) {
  return e.id.empty() ? fmt::format("{}:{}", static_cast<uint32_t>(e.kind), e.device) : e.id;
}

// Hosts, GPUs, links and NICs of the run, and the links the bytes between two ranks cross.
class Topology {
 public:
  explicit Topology(const model::RunTrace& run) : run_(run) {
    size_t n = run.ranks.size();
    gpu_.resize(n);
    gpu_name_.resize(n);
    nic_.resize(n);
    std::map<std::string, std::vector<size_t>> ranks_of_host;
    for (size_t r = 0; r < n; ++r) ranks_of_host[run.ranks[r].header.hostname].push_back(r);
    for (auto& [host, ranks] : ranks_of_host) addHost(host, ranks);
  }

  std::vector<LinkLoad>& links() { return links_; }
  const std::vector<LinkLoad>& links() const { return links_; }
  size_t knownLinks() const { return known_links_; }
  size_t nicOf(size_t r) const { return nic_[r]; }
  bool assumedNics() const { return assumed_nics_; }

  // The links bytes from rank index `from` to rank index `to` cross.
  const std::vector<Hop>& route(size_t from, size_t to) {
    auto [it, added] = routes_.try_emplace({from, to});
    if (!added) return it->second;
    std::vector<Hop>& hops = it->second;
    if (run_.ranks[from].header.hostname != run_.ranks[to].header.hostname) {
      hops = {{nic_[from], true}, {nic_[to], false}};
      return hops;
    }
    if (gpu_[from] == gpu_[to]) return hops;
    const std::string& host = run_.ranks[from].header.hostname;
    for (size_t l : host_links_[host]) {
      const auto& [a, b, a_gpu, b_gpu] = ends_[l];
      if (links_[l].kind == "NVLink" && ((a == gpu_[from] && b == gpu_[to]) || (a == gpu_[to] && b == gpu_[from]))) {
        hops = {{l, a == gpu_[from]}};
        return hops;
      }
    }
    for (const char* kind : {"NVLink", "PCIe"}) {
      auto out = attached(host, from, kind), in = attached(host, to, kind);
      if (out && in) {
        hops = {{*out, ends_[*out].a == gpu_[from]}, {*in, ends_[*in].a != gpu_[to]}};
        return hops;
      }
    }
    hops = {{unlisted(from), true}, {unlisted(to), false}};
    return hops;
  }

 private:
  void addHost(const std::string& host, const std::vector<size_t>& ranks) {
    std::vector<format::NetworkInterface> nics;
    for (size_t r : ranks) {
      const model::RankTrace& rank = run_.ranks[r];
      gpu_[r] = gpuKey(rank);
      for (const auto& nic : rank.header.nics) {
        if (std::none_of(nics.begin(), nics.end(), [&](const auto& x) { return x.name == nic.name; }))
          nics.push_back(nic);
      }
    }
    // Without UUIDs, ranks that each see their own GPU as device 0 would look like one GPU.
    std::map<std::string, size_t> users;
    for (size_t r : ranks) ++users[gpu_[r]];
    for (size_t i = 0; i < ranks.size(); ++i) {
      const model::RankTrace& rank = run_.ranks[ranks[i]];
      std::string& key = gpu_[ranks[i]];
      if (!key.starts_with("GPU-") && users[key] > 1) key = fmt::format("GPU of rank {}", rank.rank);
      int32_t local = rank.header.local_rank >= 0 ? rank.header.local_rank : static_cast<int32_t>(i);
      gpu_name_[ranks[i]] = fmt::format("GPU{}", local);
    }
    std::map<std::pair<std::string, std::string>, bool> seen;
    for (size_t r : ranks) {
      for (const format::Link& link : run_.ranks[r].links) {
        if (link.kind != format::LinkKind::kNvLink && link.kind != format::LinkKind::kPcie) continue;
        std::string a = endpointKey(link.a), b = endpointKey(link.b);
        if (!seen.emplace(std::minmax(a, b), true).second) continue;
        LinkLoad load;
        load.host = host;
        load.kind = link.kind == format::LinkKind::kNvLink ? "NVLink" : "PCIe";
        load.group = link.kind == format::LinkKind::kNvLink ? "NVLinks" : "PCIe links";
        load.name = fmt::format("{} {} ↔ {}", load.kind, endpointName(link.a, ranks), endpointName(link.b, ranks));
        load.capacity = static_cast<double>(link.bandwidth_bytes_per_s);
        load.member = std::any_of(ranks.begin(), ranks.end(), [&](size_t x) { return gpu_[x] == a || gpu_[x] == b; });
        host_links_[host].push_back(links_.size());
        ends_.push_back({a, b, link.a.kind == format::EndpointKind::kGpu, link.b.kind == format::EndpointKind::kGpu});
        links_.push_back(std::move(load));
        ++known_links_;
      }
    }
    std::vector<size_t> nic_links;
    for (const auto& nic : nics) {
      LinkLoad load;
      load.host = host;
      load.name = "NIC " + nic.name;
      load.kind = "NIC";
      load.group = "NICs";
      load.capacity = static_cast<double>(nic.bandwidth_bytes_per_s);
      load.assumed = nics.size() > 1;
      nic_links.push_back(links_.size());
      ends_.emplace_back();
      links_.push_back(std::move(load));
      ++known_links_;
    }
    for (size_t i = 0; i < ranks.size(); ++i) {
      size_t r = ranks[i];
      if (nic_links.empty()) {
        nic_[r] = hostNetwork(host);
        continue;
      }
      int32_t local = run_.ranks[r].header.local_rank >= 0 ? run_.ranks[r].header.local_rank : static_cast<int32_t>(i);
      nic_[r] = nic_links[static_cast<size_t>(local) % nic_links.size()];
      links_[nic_[r]].member = true;
      assumed_nics_ = assumed_nics_ || nic_links.size() > 1;
    }
  }

  // The GPU a rank drives: its device's UUID when the header lists it, else the device index.
  static std::string gpuKey(const model::RankTrace& rank) {
    uint32_t device = 0;
    if (!rank.communicators.empty()) {
      device = rank.communicators.front().device;
    } else if (!rank.nccl_ops.empty()) {
      device = rank.nccl_ops.front().device;
    } else if (!rank.activities.empty()) {
      device = rank.activities.front().device;
    }
    for (const auto& d : rank.header.devices) {
      if (d.device_id == device && !uuidText(d.uuid).empty()) return uuidText(d.uuid);
    }
    return endpointKey({format::EndpointKind::kGpu, "", static_cast<int32_t>(device)});
  }

  std::string endpointName(const format::Endpoint& e, const std::vector<size_t>& ranks) const {
    std::string key = endpointKey(e);
    for (size_t r : ranks) {
      if (gpu_[r] == key) return gpu_name_[r];
    }
    switch (e.kind) {
      case format::EndpointKind::kNvSwitch:
        return "NVSwitch";
      case format::EndpointKind::kGpu:
        return e.device >= 0 ? fmt::format("GPU{}", e.device) : e.id;
      default:
        return e.id.empty() ? "?" : e.id;
    }
  }

  // The link of `kind` between a rank's GPU and a switch or bridge.
  std::optional<size_t> attached(const std::string& host, size_t r, const std::string& kind) const {
    auto it = host_links_.find(host);
    if (it == host_links_.end()) return std::nullopt;
    for (size_t l : it->second) {
      const LinkEnds& e = ends_[l];
      if (links_[l].kind == kind && ((e.a == gpu_[r] && !e.b_is_gpu) || (e.b == gpu_[r] && !e.a_is_gpu))) return l;
    }
    return std::nullopt;
  }

  // Without link records: the traffic in and out of a rank's GPU.
  size_t unlisted(size_t r) {
    auto [it, added] = unlisted_.try_emplace(gpu_[r] + "@" + run_.ranks[r].header.hostname, links_.size());
    if (added) {
      LinkLoad load;
      load.host = run_.ranks[r].header.hostname;
      load.name = gpu_name_[r] + " (no link records)";
      load.kind = "GPU";
      load.group = "GPUs";
      load.member = true;
      ends_.push_back({gpu_[r], "", true, false});
      links_.push_back(std::move(load));
    }
    return it->second;
  }

  size_t hostNetwork(const std::string& host) {
    auto [it, added] = unlisted_.try_emplace("network@" + host, links_.size());
    if (added) {
      LinkLoad load;
      load.host = host;
      load.name = "network (no NIC listed)";
      load.kind = "network";
      load.group = "network";
      ends_.emplace_back();
      links_.push_back(std::move(load));
    }
    return it->second;
  }

  const model::RunTrace& run_;
  std::vector<LinkLoad> links_;
  std::vector<LinkEnds> ends_;  // parallel to links_
  std::map<std::string, std::vector<size_t>> host_links_;
  std::map<std::string, size_t> unlisted_;
  std::vector<std::string> gpu_, gpu_name_;
  std::vector<size_t> nic_;
  std::map<std::pair<size_t, size_t>, std::vector<Hop>> routes_;
  size_t known_links_ = 0;
  bool assumed_nics_ = false;
};

void carry(Topology& topology, const std::vector<Hop>& hops, double bytes, Interval span, uint8_t source) {
  auto whole = static_cast<uint64_t>(std::llround(std::max(0.0, bytes)));
  for (const Hop& hop : hops) {
    LinkLoad& link = topology.links()[hop.link];
    (hop.forward ? link.forward : link.backward) += whole;
    link.sources |= source;
    if (span.length() > 0) link.busy.push_back(span);
  }
}

bool inWindows(const std::vector<StepWindow>& windows, int64_t t) {
  auto w = std::upper_bound(windows.begin(), windows.end(), t,
                            [](int64_t time, const StepWindow& s) { return time < s.window.start; });
  return w != windows.begin() && t < std::prev(w)->window.end;
}

// Adds every byte the ranks' records account for to the links it crosses.
void loadLinks(const AnalysisInput& input, Topology& topology) {
  const auto& run = input.run;
  auto communicators = gatherCommunicators(run);
  std::map<int32_t, size_t> index_of;
  for (size_t r = 0; r < run.ranks.size(); ++r) index_of[run.ranks[r].rank] = r;
  auto indexOf = [&](const CommunicatorInfo& comm, int32_t comm_rank) -> std::optional<size_t> {
    auto member = comm.members.find(comm_rank);
    if (member == comm.members.end()) return std::nullopt;
    auto it = index_of.find(member->second);
    return it == index_of.end() ? std::nullopt : std::optional<size_t>(it->second);
  };
  for (size_t r = 0; r < run.ranks.size(); ++r) {
    const model::RankTrace& rank = run.ranks[r];
    const std::vector<StepWindow> windows = input.windowsOf(r);
    std::vector<uint64_t> on_network;  // operations whose network bytes NCCL's proxy reported
    for (const model::NetTransfer& t : rank.transfers) {
      on_network.push_back(t.operation_id);
      if (!inWindows(windows, t.start_ns)) continue;
      carry(topology, {{topology.nicOf(r), t.is_send}}, static_cast<double>(t.bytes), {t.start_ns, t.end_ns},
            kMeasured);
      LinkLoad& nic = topology.links()[topology.nicOf(r)];
      nic.network_bytes += t.bytes;
      nic.direction_wait_ns[t.is_send ? 1 : 0] += t.wait_network_ns;
      if (t.wait_network_ns > 0 && t.end_ns > t.start_ns)
        nic.direction_spans[t.is_send ? 1 : 0].push_back({t.start_ns, t.end_ns});
    }
    std::sort(on_network.begin(), on_network.end());
    auto measuredOnNetwork = [&](uint64_t id) { return std::binary_search(on_network.begin(), on_network.end(), id); };

    const CommunicatorInfo* comm = nullptr;
    int32_t own_comm_rank = -1;
    for (const model::NcclOp& op : rank.nccl_ops) {
      if (!op.hasGpuTimes() || !inWindows(windows, op.gpu_start_ns)) continue;
      if (comm == nullptr || comm->comm_hash != op.comm_hash) {
        auto it = communicators.find(op.comm_hash);
        if (it == communicators.end()) continue;
        comm = &it->second;
        own_comm_rank = -1;
        for (const auto& c : rank.communicators) {
          if (c.comm_hash == op.comm_hash) own_comm_rank = c.comm_rank;
        }
      }
      Interval span{op.gpu_start_ns, op.gpu_end_ns};
      if (op.kind == format::NcclOperationKind::kSend) {
        auto peer = indexOf(*comm, op.peer);
        if (!peer) continue;
        bool remote = run.ranks[*peer].header.hostname != rank.header.hostname;
        if (remote && measuredOnNetwork(op.operation_id)) continue;
        carry(topology, topology.route(r, *peer), static_cast<double>(op.bytes), span, kMeasured);
      } else if (op.kind == format::NcclOperationKind::kCollective && own_comm_rank >= 0 && comm->nranks > 1) {
        auto bytes = model::ringBytesPerLink(model::ncclFunction(rank.name(op.func_id)), op.bytes, comm->nranks);
        auto successor = indexOf(*comm, (own_comm_rank + 1) % comm->nranks);
        if (!bytes || !successor || *successor == r) continue;
        bool remote = run.ranks[*successor].header.hostname != rank.header.hostname;
        if (remote && measuredOnNetwork(op.operation_id)) continue;
        carry(topology, topology.route(r, *successor), *bytes, span, kEstimated);
      }
    }
  }
}

struct LinkFigures {
  size_t link = 0;
  double bytes_per_step = 0;
  double utilization_pct = std::numeric_limits<double>::quiet_NaN();
  double busy_bandwidth_pct = std::numeric_limits<double>::quiet_NaN();
};

std::string sourceName(uint8_t sources) {
  if (sources == (kMeasured | kEstimated)) return "measured + estimated";
  return sources == kEstimated ? "estimated" : "measured";
}

// NICs that move data slower than the run's other NICs: bytes NCCL's proxy moved / the time it waited
// for the network. Equal bytes, longer network waits: a slow NIC (or cable, or switch port), not a
// slow rank (whose peers would wait on the peer instead).
// Each NIC is compared with the median of the other NICs (with two NICs, the other one), so that a
// slow NIC is never its own yardstick.
void reportSlowNics(const AnalysisInput& input, std::vector<LinkLoad>& links, size_t steps, report::Report& report,
                    report::Section& section) {
  std::vector<size_t> nics;
  for (size_t l = 0; l < links.size(); ++l) {
    LinkLoad& link = links[l];
    link.network_wait_ns = 0;
    for (int direction : {0, 1}) {
      auto spanned =
          static_cast<uint64_t>(std::max<int64_t>(0, totalLength(unionOf(std::move(link.direction_spans[direction])))));
      link.network_wait_ns += std::min(link.direction_wait_ns[direction], spanned);
    }
    if (link.network_wait_ns == 0 || link.network_bytes == 0) continue;
    nics.push_back(l);
  }
  if (nics.size() < 2) return;
  auto othersMedian = [&](size_t nic) {
    std::vector<double> others;
    for (size_t l : nics) {
      if (l != nic) others.push_back(links[l].achievedBandwidth());
    }
    return median(others);
  };
  std::sort(nics.begin(), nics.end(),
            [&](size_t a, size_t b) { return links[a].achievedBandwidth() < links[b].achievedBandwidth(); });
  const double typical = othersMedian(nics.front());
  report::Table table{"nic_bandwidth", "NICs by the bandwidth they achieved (NCCL's proxy: bytes / time the network was busy with them)",
                      {{"link", "link"}, {"bytes_per_step", "bytes/step"}, {"network_time_per_step", "network time/step"},
                       {"achieved", "achieved"}, {"vs_median", "vs the other NICs' median"}, {"capacity", "capacity"}},
                      {}};
  for (size_t i = 0; i < nics.size() && i < input.options.top; ++i) {
    const LinkLoad& nic = links[nics[i]];
    table.rows.push_back({Cell::of(nic.label()),
                          Cell::of(static_cast<double>(nic.network_bytes) / static_cast<double>(steps), Unit::kBytes),
                          Cell::of(static_cast<double>(nic.network_wait_ns) / static_cast<double>(steps), Unit::kNanoseconds),
                          Cell::of(nic.achievedBandwidth(), Unit::kBytesPerSecond),
                          Cell::of(othersMedian(nics[i]) > 0 ? nic.achievedBandwidth() / othersMedian(nics[i]) : 0.0,
                                   Unit::kRatio),
                          Cell::of(nic.capacity > 0 ? nic.capacity : std::numeric_limits<double>::quiet_NaN(),
                                   Unit::kBytesPerSecond)});
  }
  section.tables.push_back(std::move(table));

  const LinkLoad& slowest = links[nics.front()];
  double ratio = slowest.achievedBandwidth() > 0 ? typical / slowest.achievedBandwidth() : 0.0;
  report.addMetric("slow_link_ratio", ratio, Unit::kRatio,
                   "the other NICs' median bandwidth achieved / that of the slowest NIC (1 = all alike)");
  if (ratio < 1.33) return;
  report::Finding finding;
  finding.analysis = "link_hotspots";
  finding.severity = ratio >= 1.8 ? report::Severity::kCritical : report::Severity::kWarning;
  double expected_wait = static_cast<double>(slowest.network_bytes) / typical * 1e9;
  finding.cost_ns = (static_cast<double>(slowest.network_wait_ns) - expected_wait) / static_cast<double>(steps);
  finding.summary = fmt::format("slow link: {}'s {} moves data at {}, {:.2f}x slower than the median of the run's other NICs ({})",
                                slowest.host, slowest.name,
                                report::formatValue(slowest.achievedBandwidth(), Unit::kBytesPerSecond), ratio,
                                report::formatValue(typical, Unit::kBytesPerSecond));
  finding.evidence.push_back(fmt::format(
      "{} per step through it, the network busy {} with it ({} at the other NICs' median speed); its peers wait on it",
      report::formatValue(static_cast<double>(slowest.network_bytes) / static_cast<double>(steps), Unit::kBytes),
      report::formatValue(static_cast<double>(slowest.network_wait_ns) / static_cast<double>(steps), Unit::kNanoseconds),
      report::formatValue(expected_wait / static_cast<double>(steps), Unit::kNanoseconds)));
  if (slowest.assumed) finding.evidence.push_back("which NIC a rank uses is assumed from its local rank");
  report.findings.push_back(std::move(finding));
}

}  // namespace

void analyzeLinkHotspots(const AnalysisInput& input, report::Report& report) {
  const auto& run = input.run;
  auto& section = report.addSection("link_hotspots", "Link load and hotspots");
  Topology topology(run);
  loadLinks(input, topology);

  size_t steps = 1, windows = 0;
  int64_t window_time = 0;
  for (size_t r = 0; r < run.ranks.size(); ++r) {
    std::vector<StepWindow> w = input.windowsOf(r);
    steps = std::max(steps, w.size());
    for (const StepWindow& s : w) window_time += s.window.length(), ++windows;
  }
  double step_seconds = windows > 0 ? static_cast<double>(window_time) / static_cast<double>(windows) * 1e-9 : 0.0;

  std::vector<LinkLoad>& links = topology.links();
  std::vector<LinkFigures> figures(links.size());
  bool any_bytes = false;
  for (size_t l = 0; l < links.size(); ++l) {
    LinkLoad& link = links[l];
    LinkFigures& f = figures[l];
    f.link = l;
    f.bytes_per_step = static_cast<double>(link.bytes()) / static_cast<double>(steps);
    any_bytes = any_bytes || link.bytes() > 0;
    double busier = static_cast<double>(std::max(link.forward, link.backward));
    if (link.capacity > 0 && step_seconds > 0) {
      f.utilization_pct = 100.0 * busier / static_cast<double>(steps) / (step_seconds * link.capacity);
    }
    int64_t busy = totalLength(unionOf(std::move(link.busy)));
    if (link.capacity > 0 && busy > 0)
      f.busy_bandwidth_pct = 100.0 * busier / (static_cast<double>(busy) * 1e-9 * link.capacity);
  }
  if (!any_bytes) {
    section.notes.push_back("No NCCL traffic with GPU times to place on links.");
    return;
  }
  section.notes.push_back(
      "Bytes per step: measured where NCCL reports them (point-to-point operations, counted by their sender; "
      "network transfers of NCCL's proxy), estimated for collectives by a ring model (each rank sends to the next "
      "communicator rank: AllReduce 2(n-1)/n x S, AllGather and ReduceScatter (n-1) x S, Broadcast and Reduce S). "
      "Utilization = bytes in the busier direction / (step time x capacity); busy bandwidth = the same over the time "
      "the link's transfers ran.");
  if (topology.assumedNics()) {
    section.notes.push_back(
        "Each rank's NIC is assumed to be its host's NIC number (local rank mod NIC count): NCCL's records do not name "
        "it.");
  }
  if (topology.knownLinks() == 0) {
    section.notes.push_back("The traces list no links or NICs: bytes are shown per GPU and per host network.");
  }

  std::vector<LinkFigures> ranked;
  for (const LinkFigures& f : figures) {
    if (links[f.link].bytes() > 0) ranked.push_back(f);
  }
  auto utilization = [](const LinkFigures& f) { return std::isnan(f.utilization_pct) ? -1.0 : f.utilization_pct; };
  std::sort(ranked.begin(), ranked.end(), [&](const LinkFigures& a, const LinkFigures& b) {
    if (utilization(a) != utilization(b)) return utilization(a) > utilization(b);
    return a.bytes_per_step > b.bytes_per_step;
  });
  report::Table top{"links",
                    "Busiest links (per step)",
                    {{"link", "link"},
                     {"kind", "kind"},
                     {"bytes_per_step", "bytes/step"},
                     {"source", "source"},
                     {"utilization_pct", "utilization"},
                     {"busy_bandwidth_pct", "busy bandwidth"},
                     {"capacity", "capacity"}},
                    {}};
  double max_utilization = -1;
  for (const LinkFigures& f : ranked) max_utilization = std::max(max_utilization, utilization(f));
  for (size_t i = 0; i < ranked.size() && i < input.options.top; ++i) {
    const LinkFigures& f = ranked[i];
    const LinkLoad& link = links[f.link];
    top.rows.push_back({Cell::of(link.label()), Cell::of(link.kind), Cell::of(f.bytes_per_step, Unit::kBytes),
                        Cell::of(sourceName(link.sources)), Cell::of(f.utilization_pct, Unit::kPercent),
                        Cell::of(f.busy_bandwidth_pct, Unit::kPercent),
                        Cell::of(link.capacity > 0 ? link.capacity : std::numeric_limits<double>::quiet_NaN(),
                                 Unit::kBytesPerSecond)});
  }
  section.tables.push_back(std::move(top));

  // Equivalent links: those of one kind on one host that the run's ranks use.
  std::map<std::pair<std::string, std::string>, std::vector<size_t>> groups;
  for (size_t l = 0; l < links.size(); ++l) {
    if (links[l].member) groups[{links[l].host, links[l].group}].push_back(l);
  }
  report::Table balance{"groups",
                        "Equivalent links (the same kind on one host)",
                        {{"host", "host"},
                         {"links", "links"},
                         {"count", "count"},
                         {"mean_bytes_per_step", "mean bytes/step"},
                         {"busiest", "busiest"},
                         {"imbalance", "max/mean"}},
                        {}};
  double worst_imbalance = 0;
  size_t worst_link = 0;
  double worst_mean = 0;
  for (const auto& [key, members] : groups) {
    if (members.size() < 2) continue;
    double sum = 0;
    size_t busiest = members.front();
    for (size_t l : members) {
      sum += figures[l].bytes_per_step;
      if (figures[l].bytes_per_step > figures[busiest].bytes_per_step) busiest = l;
    }
    double mean = sum / static_cast<double>(members.size());
    if (mean <= 0) continue;
    double imbalance = figures[busiest].bytes_per_step / mean;
    balance.rows.push_back({Cell::of(key.first), Cell::of(key.second),
                            Cell::of(static_cast<double>(members.size()), Unit::kCount), Cell::of(mean, Unit::kBytes),
                            Cell::of(links[busiest].name), Cell::of(imbalance, Unit::kRatio)});
    if (imbalance > worst_imbalance) {
      worst_imbalance = imbalance;
      worst_link = busiest;
      worst_mean = mean;
    }
  }
  section.tables.push_back(std::move(balance));

  reportSlowNics(input, links, steps, report, section);

  if (worst_imbalance > 0) {
    report.addMetric("link_imbalance", worst_imbalance, Unit::kRatio,
                     "bytes on the busiest link / mean of its equivalent links, worst group");
  }
  if (max_utilization >= 0) {
    report.addMetric("link_utilization_pct", max_utilization, Unit::kPercent,
                     "bytes per step / (step time x capacity), busiest link");
  }

  // Imbalance matters where the busiest link is loaded: over the step, or while its transfers run.
  const LinkFigures& hottest = figures[worst_link];
  bool loaded = hottest.utilization_pct >= 10 || hottest.busy_bandwidth_pct >= 25;
  if (worst_imbalance >= 1.25 && loaded) {
    const LinkLoad& link = links[worst_link];
    report::Finding finding;
    finding.analysis = "link_hotspots";
    finding.severity = report::Severity::kWarning;
    double excess = figures[worst_link].bytes_per_step - worst_mean;
    finding.cost_ns = link.capacity > 0 ? excess / link.capacity * 1e9 : 0.0;
    finding.summary = fmt::format("{}'s {} carries {:.2f}x the mean of its host's {}", link.host, link.name,
                                  worst_imbalance, link.group);
    finding.evidence.push_back(fmt::format("{} per step ({}) against a mean of {} over its host's {}",
                                           report::formatValue(figures[worst_link].bytes_per_step, Unit::kBytes),
                                           sourceName(link.sources), report::formatValue(worst_mean, Unit::kBytes),
                                           link.group));
    if (link.assumed) finding.evidence.push_back("which NIC a rank uses is assumed from its local rank");
    report.findings.push_back(std::move(finding));
  }
  if (max_utilization >= 70) {
    const LinkFigures& f = ranked.front();
    const LinkLoad& link = links[f.link];
    report::Finding finding;
    finding.analysis = "link_hotspots";
    finding.severity = report::Severity::kWarning;
    finding.cost_ns = step_seconds * 1e9 * (f.utilization_pct - 70.0) / 100.0;
    finding.summary = fmt::format("{}'s {} is {:.1f} % utilized over the step: it may bound the step", link.host,
                                  link.name, f.utilization_pct);
    finding.evidence.push_back(
        fmt::format("{} per step ({}) on a {} link", report::formatValue(f.bytes_per_step, Unit::kBytes),
                    sourceName(link.sources), report::formatValue(link.capacity, Unit::kBytesPerSecond)));
    report.findings.push_back(std::move(finding));
  }
}

}  // namespace gpuxray::analysis
