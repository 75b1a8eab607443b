// Link hotspots (docs/analyses.md, "Link hotspots"): the run's topology as the traces record it
// (hosts, their GPUs, NVLink/PCIe links and NICs), the bytes each link carries per step, measured
// where NCCL reports them and estimated from a ring model where it does not, its utilization, the
// bandwidth each NIC achieved against the run's other NICs, and the imbalance among equivalent links.
// The result is data; presentLinkHotspots turns it into the report's section, metrics and findings.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "analyzer/analysis/analysis_input.h"
#include "analyzer/analysis/communicators.h"
#include "analyzer/report/report.h"

namespace gpuxray::analysis {

// Bytes one rank's operations put on a link (within the steps), by operation and communicator.
struct LinkUse {
  int32_t from_rank = -1;
  int32_t to_rank = -1;   // -1: the peer is not a rank of the run's files
  std::string operation;  // the NCCL function ("AllReduce", "Send", ...), "" when the trace does not name it
  uint64_t comm_hash = 0;
  uint64_t bytes = 0;
  bool measured = false;  // reported by NCCL (else estimated by the ring model)
};

struct LinkLoadResult {
  std::string host;
  std::string name;   // within its host: "NIC mlx5_1", "NVLink GPU0 ↔ NVSwitch", "GPU1 (no link records)"
  std::string kind;   // "NIC", "NVLink", "PCIe", "GPU" (no link records), "network" (no NIC listed)
  std::string group;  // equivalent links: "NICs", "NVLinks", "PCIe links", "GPUs", "network"
  double capacity_bytes_per_s = std::numeric_limits<double>::quiet_NaN();  // NaN: not recorded
  bool member = false;          // used by a rank of the run: counts toward its group's imbalance
  bool nic_assumed = false;     // a NIC picked by local rank, not reported
  bool measured = false;        // some of its bytes were reported by NCCL
  bool estimated = false;       // some were estimated by the ring model
  uint64_t forward_bytes = 0;   // a→b as the link record names its ends (NIC: sent)
  uint64_t backward_bytes = 0;  // b→a (NIC: received)
  double bytes_per_step = 0;    // both directions
  double utilization_pct = std::numeric_limits<double>::quiet_NaN();     // busier direction / (step x capacity)
  double busy_bandwidth_pct = std::numeric_limits<double>::quiet_NaN();  // the same over busy_ns
  int64_t busy_ns = 0;  // union of the spans of the operations that crossed it
  // NICs: what NCCL's proxy moved through it and the time the network was busy doing so (0: none).
  uint64_t network_bytes = 0;
  uint64_t network_wait_ns = 0;
  double achieved_bytes_per_s = std::numeric_limits<double>::quiet_NaN();       // network_bytes / wait
  double others_median_bytes_per_s = std::numeric_limits<double>::quiet_NaN();  // NaN: not compared
  bool slow = false;                                                            // the slow-link verdict names it
  std::vector<LinkUse> uses;  // by from rank, to rank, operation, communicator

  uint64_t bytes() const { return forward_bytes + backward_bytes; }
  std::string label() const { return host + " " + name; }
  std::string source() const;  // "measured", "estimated", "measured + estimated" ("" when no bytes)
};

struct HostGpu {
  int32_t rank = -1;
  std::string name;           // "GPU<local rank>" (of the first rank on it, when ranks share the GPU)
  std::string id;             // its UUID text when the header lists it, else the device index ("1:0")
  std::optional<size_t> nic;  // index into links: the NIC its network bytes go through
};

struct HostTopology {
  std::string host;
  std::vector<HostGpu> gpus;  // by rank
  std::vector<size_t> links;  // indices into LinkHotspotsResult::links, as recorded
};

// Equivalent links: those of one group on one host that the run's ranks use (two or more, with bytes).
struct LinkGroup {
  std::string host;
  std::string group;
  std::vector<size_t> links;
  double mean_bytes_per_step = 0;
  size_t busiest = 0;
  double imbalance = 0;  // busiest / mean
};

// The slowest NIC against the median of the others (it is never its own yardstick).
struct SlowLinkVerdict {
  size_t link = 0;
  double achieved_bytes_per_s = 0;
  double others_median_bytes_per_s = 0;
  double ratio = 0;  // others' median / its own
  // At or above kSlowRatio: the finding (warning; critical from kCriticalRatio).
  bool slow = false;
  static constexpr double kSlowRatio = 1.33;
  static constexpr double kCriticalRatio = 1.8;
};

struct LinkHotspotsResult {
  size_t steps = 1;           // per-step figures divide by this (the most steps any rank has)
  double step_seconds = 0;    // mean window length; 0 when no windows
  size_t known_links = 0;     // NVLink/PCIe links and NICs the traces list
  bool nics_assumed = false;  // a host has several NICs: each rank's is assumed from its local rank
  bool any_bytes = false;
  std::vector<HostTopology> hosts;  // by host name
  std::vector<LinkLoadResult> links;
  std::vector<size_t> busiest;  // links with bytes, highest utilization (unknown last), then bytes first
  std::vector<LinkGroup> groups;
  std::vector<size_t> nics_compared;  // NICs with proxy transfers, slowest first (two or more, else empty)
  std::optional<SlowLinkVerdict> slowest_nic;
  // The group with the highest imbalance (index into groups), and whether it is flagged: imbalance
  // >= 1.25 on a loaded link (>= 10 % utilized over the step or >= 25 % while its transfers run).
  std::optional<size_t> worst_group;
  bool imbalance_flagged = false;
  double max_utilization_pct = std::numeric_limits<double>::quiet_NaN();  // NaN: no capacity known
  std::map<uint64_t, CommunicatorInfo> communicators;                     // what the uses' communicators are called
};

LinkHotspotsResult computeLinkHotspots(const AnalysisInput& input);
// The `link_hotspots` section (top N rows), the link_* and slow_link_ratio metrics, the findings and
// the typed result.
void presentLinkHotspots(const LinkHotspotsResult& result, size_t top, report::Report& report);

}  // namespace gpuxray::analysis
