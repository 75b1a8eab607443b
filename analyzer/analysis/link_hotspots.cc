// Link hotspots: the bytes each link of the run's topology (NVLink and PCIe links of every host's
// GPUs, each host's NICs) carries per step, measured where NCCL reports them and estimated from a
// ring model where it does not, with utilization against the link's capacity and the imbalance
// among equivalent links (definitions: docs/analyses.md).

#include "analyzer/analysis/link_hotspots.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <tuple>
#include <unordered_map>

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
  // (from rank, to rank, operation, communicator) -> bytes and their sources.
  std::map<std::tuple<int32_t, int32_t, std::string, uint64_t>, std::pair<uint64_t, uint8_t>> uses;

  uint64_t bytes() const { return forward + backward; }
};

// Who puts bytes on a link: the rank, its peer, the operation and its communicator.
struct Use {
  int32_t from_rank = -1;
  int32_t to_rank = -1;
  std::string operation;
  uint64_t comm_hash = 0;
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
  const std::string& gpuKeyOf(size_t r) const { return gpu_[r]; }
  const std::string& gpuNameOf(size_t r) const { return gpu_name_[r]; }

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
    // Ranks that share one GPU (its UUID) share its name: the first such rank's local index.
    std::map<std::string, std::string> name_of_gpu;
    for (size_t i = 0; i < ranks.size(); ++i) {
      const model::RankTrace& rank = run_.ranks[ranks[i]];
      std::string& key = gpu_[ranks[i]];
      if (!key.starts_with("GPU-") && users[key] > 1) key = fmt::format("GPU of rank {}", rank.rank);
      int32_t local = rank.header.local_rank >= 0 ? rank.header.local_rank : static_cast<int32_t>(i);
      gpu_name_[ranks[i]] = name_of_gpu.try_emplace(key, fmt::format("GPU{}", local)).first->second;
    }
    std::map<std::pair<std::string, std::string>, bool> seen;
    for (size_t r : ranks) {
      for (const format::Link& link : run_.ranks[r].links) {
        if (link.kind != format::LinkKind::kNvLink && link.kind != format::LinkKind::kPcie) continue;
        std::string a = endpointKeyOf(link.a, r, ranks), b = endpointKeyOf(link.b, r, ranks);
        if (!seen.emplace(std::minmax(a, b), true).second) continue;
        LinkLoad load;
        load.host = host;
        load.kind = link.kind == format::LinkKind::kNvLink ? "NVLink" : "PCIe";
        load.group = link.kind == format::LinkKind::kNvLink ? "NVLinks" : "PCIe links";
        load.name =
            fmt::format("{} {} ↔ {}", load.kind, endpointName(link.a, a, ranks), endpointName(link.b, b, ranks));
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

  // A link end as a key. A GPU end whose id names none of the host's GPUs (no UUID in the header,
  // an id that is not a UUID) is the recording rank's own GPU when the device indices agree.
  std::string endpointKeyOf(const format::Endpoint& e, size_t recorder, const std::vector<size_t>& ranks) const {
    std::string key = endpointKey(e);
    if (e.kind != format::EndpointKind::kGpu) return key;
    if (std::any_of(ranks.begin(), ranks.end(), [&](size_t x) { return gpu_[x] == key; })) return key;
    if (e.device >= 0 && static_cast<uint32_t>(e.device) == deviceOf(run_.ranks[recorder]) &&
        !gpu_[recorder].starts_with("GPU-"))
      return gpu_[recorder];
    return key;
  }

  static uint32_t deviceOf(const model::RankTrace& rank) {
    if (!rank.communicators.empty()) return rank.communicators.front().device;
    if (!rank.nccl_ops.empty()) return rank.nccl_ops.front().device;
    if (!rank.activities.empty()) return rank.activities.front().device;
    return 0;
  }

  // The GPU a rank drives: its device's UUID when the header lists it, else the device index.
  static std::string gpuKey(const model::RankTrace& rank) {
    uint32_t device = deviceOf(rank);
    for (const auto& d : rank.header.devices) {
      if (d.device_id == device && !uuidText(d.uuid).empty()) return uuidText(d.uuid);
    }
    return endpointKey({format::EndpointKind::kGpu, "", static_cast<int32_t>(device)});
  }

  std::string endpointName(const format::Endpoint& e, const std::string& key, const std::vector<size_t>& ranks) const {
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

void carry(Topology& topology, const std::vector<Hop>& hops, double bytes, Interval span, uint8_t source,
           const Use& use) {
  auto whole = static_cast<uint64_t>(std::llround(std::max(0.0, bytes)));
  for (const Hop& hop : hops) {
    LinkLoad& link = topology.links()[hop.link];
    (hop.forward ? link.forward : link.backward) += whole;
    link.sources |= source;
    if (span.length() > 0) link.busy.push_back(span);
    auto& [used_bytes, sources] = link.uses[{use.from_rank, use.to_rank, use.operation, use.comm_hash}];
    used_bytes += whole;
    sources |= source;
  }
}

bool inWindows(const std::vector<StepWindow>& windows, int64_t t) {
  auto w = std::upper_bound(windows.begin(), windows.end(), t,
                            [](int64_t time, const StepWindow& s) { return time < s.window.start; });
  return w != windows.begin() && t < std::prev(w)->window.end;
}

// Adds every byte the ranks' records account for to the links it crosses.
void loadLinks(const AnalysisInput& input, const std::map<uint64_t, CommunicatorInfo>& communicators,
               Topology& topology) {
  const auto& run = input.run;
  std::map<int32_t, size_t> index_of;
  for (size_t r = 0; r < run.ranks.size(); ++r) index_of[run.ranks[r].rank] = r;
  auto indexOf = [&](const CommunicatorInfo& comm, int32_t comm_rank) -> std::optional<size_t> {
    auto member = comm.members.find(comm_rank);
    if (member == comm.members.end()) return std::nullopt;
    auto it = index_of.find(member->second);
    return it == index_of.end() ? std::nullopt : std::optional<size_t>(it->second);
  };
  auto globalRank = [&](uint64_t comm_hash, int32_t comm_rank) {
    auto comm = communicators.find(comm_hash);
    if (comm == communicators.end()) return -1;
    auto member = comm->second.members.find(comm_rank);
    return member == comm->second.members.end() ? -1 : member->second;
  };
  for (size_t r = 0; r < run.ranks.size(); ++r) {
    const model::RankTrace& rank = run.ranks[r];
    const std::vector<StepWindow> windows = input.windowsOf(r);
    std::unordered_map<uint64_t, uint32_t> function_of;  // operation id -> its NCCL function's string id
    if (!rank.transfers.empty()) {
      for (const model::NcclOp& op : rank.nccl_ops) function_of.emplace(op.operation_id, op.func_id);
    }
    std::vector<uint64_t> on_network;  // operations whose network bytes NCCL's proxy reported
    for (const model::NetTransfer& t : rank.transfers) {
      on_network.push_back(t.operation_id);
      if (!inWindows(windows, t.start_ns)) continue;
      auto function = function_of.find(t.operation_id);
      int32_t peer = globalRank(t.comm_hash, t.peer);
      Use use{t.is_send ? rank.rank : peer, t.is_send ? peer : rank.rank,
              function != function_of.end() ? std::string(rank.name(function->second)) : std::string(), t.comm_hash};
      carry(topology, {{topology.nicOf(r), t.is_send}}, static_cast<double>(t.bytes), {t.start_ns, t.end_ns}, kMeasured,
            use);
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
        carry(topology, topology.route(r, *peer), static_cast<double>(op.bytes), span, kMeasured,
              {rank.rank, run.ranks[*peer].rank, std::string(rank.name(op.func_id)), op.comm_hash});
      } else if (op.kind == format::NcclOperationKind::kCollective && own_comm_rank >= 0 && comm->nranks > 1) {
        auto bytes = model::ringBytesPerLink(model::ncclFunction(rank.name(op.func_id)), op.bytes, comm->nranks);
        auto successor = indexOf(*comm, (own_comm_rank + 1) % comm->nranks);
        if (!bytes || !successor || *successor == r) continue;
        bool remote = run.ranks[*successor].header.hostname != rank.header.hostname;
        if (remote && measuredOnNetwork(op.operation_id)) continue;
        carry(topology, topology.route(r, *successor), *bytes, span, kEstimated,
              {rank.rank, run.ranks[*successor].rank, std::string(rank.name(op.func_id)), op.comm_hash});
      }
    }
  }
}

std::string sourceName(bool measured, bool estimated) {
  if (measured && estimated) return "measured + estimated";
  if (estimated) return "estimated";
  return measured ? "measured" : "";
}

// The NICs' network time: per direction the transfers' waits summed, but never more than the union
// of their spans (channels overlap in time); sends and receives add up.
void settleNetworkTime(std::vector<LinkLoad>& links) {
  for (LinkLoad& link : links) {
    link.network_wait_ns = 0;
    for (int direction : {0, 1}) {
      auto spanned =
          static_cast<uint64_t>(std::max<int64_t>(0, totalLength(unionOf(std::move(link.direction_spans[direction])))));
      link.network_wait_ns += std::min(link.direction_wait_ns[direction], spanned);
    }
  }
}

// NICs that move data slower than the run's other NICs: bytes NCCL's proxy moved / the time it waited
// for the network. Equal bytes, longer network waits: a slow NIC (or cable, or switch port), not a
// slow rank (whose peers would wait on the peer instead).
// Each NIC is compared with the median of the other NICs (with two NICs, the other one), so that a
// slow NIC is never its own yardstick.
void compareNics(LinkHotspotsResult& result) {
  auto& links = result.links;
  std::vector<size_t> nics;
  for (size_t l = 0; l < links.size(); ++l) {
    if (links[l].network_wait_ns == 0 || links[l].network_bytes == 0) continue;
    links[l].achieved_bytes_per_s =
        static_cast<double>(links[l].network_bytes) / (static_cast<double>(links[l].network_wait_ns) * 1e-9);
    nics.push_back(l);
  }
  if (nics.size() < 2) return;
  for (size_t nic : nics) {
    std::vector<double> others;
    for (size_t l : nics) {
      if (l != nic) others.push_back(links[l].achieved_bytes_per_s);
    }
    links[nic].others_median_bytes_per_s = median(others);
  }
  std::sort(nics.begin(), nics.end(),
            [&](size_t a, size_t b) { return links[a].achieved_bytes_per_s < links[b].achieved_bytes_per_s; });
  result.nics_compared = nics;
  SlowLinkVerdict verdict;
  verdict.link = nics.front();
  verdict.achieved_bytes_per_s = links[verdict.link].achieved_bytes_per_s;
  verdict.others_median_bytes_per_s = links[verdict.link].others_median_bytes_per_s;
  verdict.ratio =
      verdict.achieved_bytes_per_s > 0 ? verdict.others_median_bytes_per_s / verdict.achieved_bytes_per_s : 0.0;
  verdict.slow = verdict.ratio >= SlowLinkVerdict::kSlowRatio;
  links[verdict.link].slow = verdict.slow;
  result.slowest_nic = verdict;
}

report::ResultValue optionalNumber(double value) {
  return report::ResultValue::number(value);
}

report::ResultValue indexValue(std::optional<size_t> index) {
  return index ? report::ResultValue::integer(static_cast<int64_t>(*index)) : report::ResultValue();
}

report::ResultValue rankValue(int32_t rank) {
  return rank >= 0 ? report::ResultValue::integer(rank) : report::ResultValue();
}

report::ResultValue indicesValue(const std::vector<size_t>& indices) {
  auto array = report::ResultValue::array();
  for (size_t i : indices) array.push(report::ResultValue::integer(static_cast<int64_t>(i)));
  return array;
}

report::ResultValue resultValue(const LinkHotspotsResult& result) {
  using report::ResultValue;
  const double steps = static_cast<double>(result.steps);
  auto communicator = [&](uint64_t comm_hash) -> const CommunicatorInfo* {
    auto it = result.communicators.find(comm_hash);
    return it == result.communicators.end() ? nullptr : &it->second;
  };
  ResultValue hosts = ResultValue::array();
  for (const HostTopology& host : result.hosts) {
    ResultValue gpus = ResultValue::array();
    for (const HostGpu& gpu : host.gpus) {
      gpus.push(ResultValue::object()
                    .set("rank", ResultValue::integer(gpu.rank))
                    .set("gpu", ResultValue::text(gpu.name))
                    .set("id", ResultValue::text(gpu.id))
                    .set("nic", indexValue(gpu.nic)));
    }
    hosts.push(ResultValue::object()
                   .set("host", ResultValue::text(host.host))
                   .set("gpus", std::move(gpus))
                   .set("links", indicesValue(host.links)));
  }
  ResultValue links = ResultValue::array();
  for (size_t l = 0; l < result.links.size(); ++l) {
    const LinkLoadResult& link = result.links[l];
    ResultValue uses = ResultValue::array();
    for (const LinkUse& use : link.uses) {
      uses.push(ResultValue::object()
                    .set("from_rank", rankValue(use.from_rank))
                    .set("to_rank", rankValue(use.to_rank))
                    .set("operation", use.operation.empty() ? ResultValue() : ResultValue::text(use.operation))
                    .set("communicator", communicatorValue(use.comm_hash, communicator(use.comm_hash)))
                    .set("bytes", ResultValue::integer(static_cast<int64_t>(use.bytes)))
                    .set("source", ResultValue::text(use.measured ? "measured" : "estimated")));
    }
    ResultValue network;  // null: no proxy transfers through it
    if (link.network_bytes > 0) {
      network = ResultValue::object()
                    .set("bytes", ResultValue::integer(static_cast<int64_t>(link.network_bytes)))
                    .set("bytes_per_step", ResultValue::number(static_cast<double>(link.network_bytes) / steps))
                    .set("wait_ns", ResultValue::integer(static_cast<int64_t>(link.network_wait_ns)))
                    .set("wait_ns_per_step", ResultValue::number(static_cast<double>(link.network_wait_ns) / steps))
                    .set("achieved_bytes_per_s", optionalNumber(link.achieved_bytes_per_s))
                    .set("others_median_bytes_per_s", optionalNumber(link.others_median_bytes_per_s))
                    .set("vs_median", optionalNumber(link.achieved_bytes_per_s / link.others_median_bytes_per_s));
    }
    std::string source = link.source();
    links.push(ResultValue::object()
                   .set("id", ResultValue::integer(static_cast<int64_t>(l)))
                   .set("host", ResultValue::text(link.host))
                   .set("name", ResultValue::text(link.name))
                   .set("kind", ResultValue::text(link.kind))
                   .set("group", ResultValue::text(link.group))
                   .set("capacity_bytes_per_s", optionalNumber(link.capacity_bytes_per_s))
                   .set("member", ResultValue::flag(link.member))
                   .set("nic_assumed", ResultValue::flag(link.nic_assumed))
                   .set("source", source.empty() ? ResultValue() : ResultValue::text(source))
                   .set("forward_bytes", ResultValue::integer(static_cast<int64_t>(link.forward_bytes)))
                   .set("backward_bytes", ResultValue::integer(static_cast<int64_t>(link.backward_bytes)))
                   .set("bytes", ResultValue::integer(static_cast<int64_t>(link.bytes())))
                   .set("bytes_per_step", ResultValue::number(link.bytes_per_step))
                   .set("utilization_pct", optionalNumber(link.utilization_pct))
                   .set("busy_bandwidth_pct", optionalNumber(link.busy_bandwidth_pct))
                   .set("busy_ns", ResultValue::integer(link.busy_ns))
                   .set("network", std::move(network))
                   .set("slow", ResultValue::flag(link.slow))
                   .set("uses", std::move(uses)));
  }
  ResultValue groups = ResultValue::array();
  for (const LinkGroup& group : result.groups) {
    groups.push(ResultValue::object()
                    .set("host", ResultValue::text(group.host))
                    .set("group", ResultValue::text(group.group))
                    .set("links", indicesValue(group.links))
                    .set("mean_bytes_per_step", ResultValue::number(group.mean_bytes_per_step))
                    .set("busiest", ResultValue::integer(static_cast<int64_t>(group.busiest)))
                    .set("imbalance", ResultValue::number(group.imbalance)));
  }
  ResultValue slowest;
  if (result.slowest_nic) {
    const SlowLinkVerdict& v = *result.slowest_nic;
    slowest = ResultValue::object()
                  .set("link", ResultValue::integer(static_cast<int64_t>(v.link)))
                  .set("achieved_bytes_per_s", ResultValue::number(v.achieved_bytes_per_s))
                  .set("others_median_bytes_per_s", ResultValue::number(v.others_median_bytes_per_s))
                  .set("ratio", ResultValue::number(v.ratio))
                  .set("slow", ResultValue::flag(v.slow))
                  .set("severity", !v.slow ? ResultValue()
                                           : ResultValue::text(v.ratio >= SlowLinkVerdict::kCriticalRatio ? "critical"
                                                                                                          : "warning"));
  }
  ResultValue imbalance;
  if (result.worst_group) {
    const LinkGroup& g = result.groups[*result.worst_group];
    imbalance = ResultValue::object()
                    .set("group", ResultValue::integer(static_cast<int64_t>(*result.worst_group)))
                    .set("link", ResultValue::integer(static_cast<int64_t>(g.busiest)))
                    .set("imbalance", ResultValue::number(g.imbalance))
                    .set("flagged", ResultValue::flag(result.imbalance_flagged));
  }
  return ResultValue::object()
      .set("steps", ResultValue::integer(static_cast<int64_t>(result.steps)))
      .set("step_ns", result.step_seconds > 0 ? ResultValue::number(result.step_seconds * 1e9) : ResultValue())
      .set("known_links", ResultValue::integer(static_cast<int64_t>(result.known_links)))
      .set("nics_assumed", ResultValue::flag(result.nics_assumed))
      .set("hosts", std::move(hosts))
      .set("links", std::move(links))
      .set("busiest", indicesValue(result.busiest))
      .set("groups", std::move(groups))
      .set("nics_compared", indicesValue(result.nics_compared))
      .set("slowest_nic", std::move(slowest))
      .set("imbalance", std::move(imbalance))
      .set("max_utilization_pct", optionalNumber(result.max_utilization_pct));
}

void presentSlowNics(const LinkHotspotsResult& result, size_t top, report::Report& report, report::Section& section) {
  if (!result.slowest_nic) return;
  const auto& links = result.links;
  const double steps = static_cast<double>(result.steps);
  report::Table table{"nic_bandwidth",
                      "NICs by the bandwidth they achieved (NCCL's proxy: bytes / time the network was busy with them)",
                      {{"link", "link"},
                       {"bytes_per_step", "bytes/step"},
                       {"network_time_per_step", "network time/step"},
                       {"achieved", "achieved"},
                       {"vs_median", "vs the other NICs' median"},
                       {"capacity", "capacity"}},
                      {}};
  for (size_t i = 0; i < result.nics_compared.size() && i < top; ++i) {
    const LinkLoadResult& nic = links[result.nics_compared[i]];
    table.rows.push_back(
        {Cell::of(nic.label()), Cell::of(static_cast<double>(nic.network_bytes) / steps, Unit::kBytes),
         Cell::of(static_cast<double>(nic.network_wait_ns) / steps, Unit::kNanoseconds),
         Cell::of(nic.achieved_bytes_per_s, Unit::kBytesPerSecond),
         Cell::of(nic.others_median_bytes_per_s > 0 ? nic.achieved_bytes_per_s / nic.others_median_bytes_per_s : 0.0,
                  Unit::kRatio),
         Cell::of(nic.capacity_bytes_per_s, Unit::kBytesPerSecond)});
  }
  section.tables.push_back(std::move(table));

  const SlowLinkVerdict& verdict = *result.slowest_nic;
  const LinkLoadResult& slowest = links[verdict.link];
  const double typical = verdict.others_median_bytes_per_s;
  report.addMetric("slow_link_ratio", verdict.ratio, Unit::kRatio,
                   "the other NICs' median bandwidth achieved / that of the slowest NIC (1 = all alike)");
  if (!verdict.slow) return;
  report::Finding finding;
  finding.analysis = "link_hotspots";
  finding.severity =
      verdict.ratio >= SlowLinkVerdict::kCriticalRatio ? report::Severity::kCritical : report::Severity::kWarning;
  double expected_wait = static_cast<double>(slowest.network_bytes) / typical * 1e9;
  finding.cost_ns = (static_cast<double>(slowest.network_wait_ns) - expected_wait) / steps;
  finding.cause = {
      report::FindingCause::Kind::kSlowNic, {}, verdict.ratio, fmt::format("{}'s {}", slowest.host, slowest.name)};
  for (const HostTopology& host : result.hosts) {
    for (const HostGpu& gpu : host.gpus) {
      if (gpu.nic == verdict.link) finding.cause.ranks.push_back(gpu.rank);
    }
  }
  finding.summary =
      fmt::format("slow link: {}'s {} moves data at {}, {:.2f}x slower than the median of the run's other NICs ({})",
                  slowest.host, slowest.name, report::formatValue(slowest.achieved_bytes_per_s, Unit::kBytesPerSecond),
                  verdict.ratio, report::formatValue(typical, Unit::kBytesPerSecond));
  finding.evidence.push_back(fmt::format(
      "{} per step through it, the network busy {} with it ({} at the other NICs' median speed); its peers wait on it",
      report::formatValue(static_cast<double>(slowest.network_bytes) / steps, Unit::kBytes),
      report::formatValue(static_cast<double>(slowest.network_wait_ns) / steps, Unit::kNanoseconds),
      report::formatValue(expected_wait / steps, Unit::kNanoseconds)));
  if (slowest.nic_assumed) finding.evidence.push_back("which NIC a rank uses is assumed from its local rank");
  report.findings.push_back(std::move(finding));
}

double utilizationKey(const LinkLoadResult& link) {
  return std::isnan(link.utilization_pct) ? -1.0 : link.utilization_pct;
}

}  // namespace

std::string LinkLoadResult::source() const {
  return sourceName(measured, estimated);
}

LinkHotspotsResult computeLinkHotspots(const AnalysisInput& input) {
  const auto& run = input.run;
  Topology topology(run);
  LinkHotspotsResult result;
  result.communicators = gatherCommunicators(run);
  loadLinks(input, result.communicators, topology);
  std::vector<LinkLoad>& loads = topology.links();
  settleNetworkTime(loads);

  size_t windows = 0;
  int64_t window_time = 0;
  for (size_t r = 0; r < run.ranks.size(); ++r) {
    std::vector<StepWindow> w = input.windowsOf(r);
    result.steps = std::max(result.steps, w.size());
    for (const StepWindow& s : w) window_time += s.window.length(), ++windows;
  }
  result.step_seconds = windows > 0 ? static_cast<double>(window_time) / static_cast<double>(windows) * 1e-9 : 0.0;
  result.known_links = topology.knownLinks();
  result.nics_assumed = topology.assumedNics();

  for (LinkLoad& load : loads) {
    LinkLoadResult link;
    link.host = load.host;
    link.name = load.name;
    link.kind = load.kind;
    link.group = load.group;
    if (load.capacity > 0) link.capacity_bytes_per_s = load.capacity;
    link.member = load.member;
    link.nic_assumed = load.assumed;
    link.measured = (load.sources & kMeasured) != 0;
    link.estimated = (load.sources & kEstimated) != 0;
    link.forward_bytes = load.forward;
    link.backward_bytes = load.backward;
    link.bytes_per_step = static_cast<double>(load.bytes()) / static_cast<double>(result.steps);
    result.any_bytes = result.any_bytes || load.bytes() > 0;
    double busier = static_cast<double>(std::max(load.forward, load.backward));
    if (load.capacity > 0 && result.step_seconds > 0) {
      link.utilization_pct = 100.0 * busier / static_cast<double>(result.steps) / (result.step_seconds * load.capacity);
    }
    link.busy_ns = totalLength(unionOf(std::move(load.busy)));
    if (load.capacity > 0 && link.busy_ns > 0)
      link.busy_bandwidth_pct = 100.0 * busier / (static_cast<double>(link.busy_ns) * 1e-9 * load.capacity);
    link.network_bytes = load.network_bytes;
    link.network_wait_ns = load.network_wait_ns;
    for (const auto& [key, value] : load.uses) {
      const auto& [from, to, operation, comm] = key;
      link.uses.push_back({from, to, operation, comm, value.first, (value.second & kMeasured) != 0});
    }
    result.links.push_back(std::move(link));
  }
  auto& links = result.links;

  std::map<std::string, size_t> host_index;
  for (size_t r = 0; r < run.ranks.size(); ++r) {
    const std::string& host = run.ranks[r].header.hostname;
    auto [it, added] = host_index.try_emplace(host, 0);
    if (added) {
      it->second = result.hosts.size();
      result.hosts.push_back({host, {}, {}});
    }
  }
  // Hosts by name, as the topology numbers them.
  std::sort(result.hosts.begin(), result.hosts.end(), [](const auto& a, const auto& b) { return a.host < b.host; });
  for (size_t h = 0; h < result.hosts.size(); ++h) host_index[result.hosts[h].host] = h;
  for (size_t r = 0; r < run.ranks.size(); ++r) {
    result.hosts[host_index[run.ranks[r].header.hostname]].gpus.push_back(
        {run.ranks[r].rank, topology.gpuNameOf(r), topology.gpuKeyOf(r), topology.nicOf(r)});
  }
  for (size_t l = 0; l < links.size(); ++l) result.hosts[host_index[links[l].host]].links.push_back(l);

  for (size_t l = 0; l < links.size(); ++l) {
    if (links[l].bytes() > 0) result.busiest.push_back(l);
  }
  std::stable_sort(result.busiest.begin(), result.busiest.end(), [&](size_t a, size_t b) {
    if (utilizationKey(links[a]) != utilizationKey(links[b]))
      return utilizationKey(links[a]) > utilizationKey(links[b]);
    return links[a].bytes_per_step > links[b].bytes_per_step;
  });
  double max_utilization = -1;
  for (size_t l : result.busiest) max_utilization = std::max(max_utilization, utilizationKey(links[l]));
  if (max_utilization >= 0) result.max_utilization_pct = max_utilization;

  // Equivalent links: those of one kind on one host that the run's ranks use.
  std::map<std::pair<std::string, std::string>, std::vector<size_t>> groups;
  for (size_t l = 0; l < links.size(); ++l) {
    if (links[l].member) groups[{links[l].host, links[l].group}].push_back(l);
  }
  double worst_imbalance = 0;
  for (const auto& [key, members] : groups) {
    if (members.size() < 2) continue;
    double sum = 0;
    size_t busiest = members.front();
    for (size_t l : members) {
      sum += links[l].bytes_per_step;
      if (links[l].bytes_per_step > links[busiest].bytes_per_step) busiest = l;
    }
    double mean = sum / static_cast<double>(members.size());
    if (mean <= 0) continue;
    double imbalance = links[busiest].bytes_per_step / mean;
    if (imbalance > worst_imbalance) {
      worst_imbalance = imbalance;
      result.worst_group = result.groups.size();
    }
    result.groups.push_back({key.first, key.second, members, mean, busiest, imbalance});
  }
  // Imbalance matters where the busiest link is loaded: over the step, or while its transfers run.
  if (result.worst_group) {
    const LinkLoadResult& hottest = links[result.groups[*result.worst_group].busiest];
    bool loaded = hottest.utilization_pct >= 10 || hottest.busy_bandwidth_pct >= 25;
    result.imbalance_flagged = worst_imbalance >= 1.25 && loaded;
  }
  compareNics(result);
  return result;
}

void presentLinkHotspots(const LinkHotspotsResult& result, size_t top_rows, report::Report& report) {
  auto& section = report.addSection("link_hotspots", "Link load and hotspots");
  report.addResult("link_hotspots", [&] { return resultValue(result); });
  const auto& links = result.links;
  if (!result.any_bytes) {
    section.notes.push_back("No NCCL traffic with GPU times to place on links.");
    return;
  }
  section.notes.push_back(
      "Bytes per step: measured where NCCL reports them (point-to-point operations, counted by their sender; "
      "network transfers of NCCL's proxy), estimated for collectives by a ring model (each rank sends to the next "
      "communicator rank: AllReduce 2(n-1)/n x S, AllGather and ReduceScatter (n-1) x S, Broadcast and Reduce S). "
      "Utilization = bytes in the busier direction / (step time x capacity); busy bandwidth = the same over the time "
      "the link's transfers ran.");
  if (result.nics_assumed) {
    section.notes.push_back(
        "Each rank's NIC is assumed to be its host's NIC number (local rank mod NIC count): NCCL's records do not name "
        "it.");
  }
  if (result.known_links == 0) {
    section.notes.push_back("The traces list no links or NICs: bytes are shown per GPU and per host network.");
  }

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
  for (size_t i = 0; i < result.busiest.size() && i < top_rows; ++i) {
    const LinkLoadResult& link = links[result.busiest[i]];
    top.rows.push_back({Cell::of(link.label()), Cell::of(link.kind), Cell::of(link.bytes_per_step, Unit::kBytes),
                        Cell::of(link.source()), Cell::of(link.utilization_pct, Unit::kPercent),
                        Cell::of(link.busy_bandwidth_pct, Unit::kPercent),
                        Cell::of(link.capacity_bytes_per_s, Unit::kBytesPerSecond)});
  }
  section.tables.push_back(std::move(top));

  report::Table balance{"groups",
                        "Equivalent links (the same kind on one host)",
                        {{"host", "host"},
                         {"links", "links"},
                         {"count", "count"},
                         {"mean_bytes_per_step", "mean bytes/step"},
                         {"busiest", "busiest"},
                         {"imbalance", "max/mean"}},
                        {}};
  for (const LinkGroup& group : result.groups) {
    balance.rows.push_back({Cell::of(group.host), Cell::of(group.group),
                            Cell::of(static_cast<double>(group.links.size()), Unit::kCount),
                            Cell::of(group.mean_bytes_per_step, Unit::kBytes), Cell::of(links[group.busiest].name),
                            Cell::of(group.imbalance, Unit::kRatio)});
  }
  report::keepWorstRows(balance, top_rows, "groups", "most imbalanced first",
                        [](const std::vector<Cell>& row) { return row[5].number; });
  section.tables.push_back(std::move(balance));

  presentSlowNics(result, top_rows, report, section);

  if (result.worst_group) {
    report.addMetric("link_imbalance", result.groups[*result.worst_group].imbalance, Unit::kRatio,
                     "bytes on the busiest link / mean of its equivalent links, worst group");
  }
  if (!std::isnan(result.max_utilization_pct)) {
    report.addMetric("link_utilization_pct", result.max_utilization_pct, Unit::kPercent,
                     "bytes per step / (step time x capacity), busiest link");
  }

  if (result.imbalance_flagged) {
    const LinkGroup& group = result.groups[*result.worst_group];
    const LinkLoadResult& link = links[group.busiest];
    report::Finding finding;
    finding.analysis = "link_hotspots";
    finding.severity = report::Severity::kWarning;
    double excess = link.bytes_per_step - group.mean_bytes_per_step;
    finding.cost_ns = !std::isnan(link.capacity_bytes_per_s) ? excess / link.capacity_bytes_per_s * 1e9 : 0.0;
    finding.summary = fmt::format("{}'s {} carries {:.2f}x the mean of its host's {}", link.host, link.name,
                                  group.imbalance, link.group);
    finding.evidence.push_back(fmt::format("{} per step ({}) against a mean of {} over its host's {}",
                                           report::formatValue(link.bytes_per_step, Unit::kBytes), link.source(),
                                           report::formatValue(group.mean_bytes_per_step, Unit::kBytes), link.group));
    if (link.nic_assumed) finding.evidence.push_back("which NIC a rank uses is assumed from its local rank");
    report.findings.push_back(std::move(finding));
  }
  if (result.max_utilization_pct >= 70) {
    const LinkLoadResult& link = links[result.busiest.front()];
    report::Finding finding;
    finding.analysis = "link_hotspots";
    finding.severity = report::Severity::kWarning;
    finding.cost_ns = result.step_seconds * 1e9 * (link.utilization_pct - 70.0) / 100.0;
    finding.summary = fmt::format("{}'s {} is {:.1f} % utilized over the step: it may bound the step", link.host,
                                  link.name, link.utilization_pct);
    finding.evidence.push_back(fmt::format("{} per step ({}) on a {} link",
                                           report::formatValue(link.bytes_per_step, Unit::kBytes), link.source(),
                                           report::formatValue(link.capacity_bytes_per_s, Unit::kBytesPerSecond)));
    report.findings.push_back(std::move(finding));
  }
}

void analyzeLinkHotspots(const AnalysisInput& input, report::Report& report) {
  presentLinkHotspots(computeLinkHotspots(input), input.options.top, report);
}

}  // namespace gpuxray::analysis
