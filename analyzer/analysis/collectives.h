// Collectives across ranks (docs/analyses.md, "Collectives"): each collective matched over its
// members, how far apart the members entered it (arrival skew) and who came last, how long the
// transfer took once all were in, and the bandwidth that gives by nccl-tests' rules, against what
// the slowest link between the members carries. Per rank without matching (also for one rank's
// trace): collective_bandwidth. The results are data; the present* functions turn them into the
// report's sections, metrics and findings.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "analyzer/analysis/analysis_input.h"
#include "analyzer/analysis/communicators.h"
#include "analyzer/report/report.h"

namespace gpuxray::analysis {

// What the slowest link among a collective's members carries per direction.
struct LinkExpectation {
  double bytes_per_s = 0;  // 0: unknown
  std::string limited_by;  // "node-b's NIC mlx5_0", "rank 3's NVLink"
  // Across hosts: the fastest host's NIC bandwidth, to tell one slow host from a slow fabric.
  double fastest_bytes_per_s = 0;
  std::string slowest_host, fastest_host;
};

// How often a rank entered last (collectives with a skew above 0).
struct LastArrival {
  int32_t rank = -1;
  uint64_t times = 0;
};

// Matched collectives of one (communicator, operation, size).
struct CollectiveSignature {
  uint64_t comm_hash = 0;
  std::string operation;  // the NCCL function
  uint64_t bytes = 0;     // per the operation record (count x size)
  size_t count = 0;
  int64_t skew_median_ns = 0, skew_p90_ns = 0, skew_max_ns = 0, skew_total_ns = 0;
  int64_t transfer_median_ns = 0, transfer_total_ns = 0;  // median member end - last entry
  // nccl-tests' rule for the size and factor (data_bytes 0: unknown function or communicator size).
  double data_bytes = 0;
  double busbw_factor = 1;
  std::vector<double> busbw;  // bytes/s of each collective with a transfer time above 0
  double algbw_median = std::numeric_limits<double>::quiet_NaN();  // NaN: none measured
  double busbw_median = std::numeric_limits<double>::quiet_NaN();
  LinkExpectation link;
  double link_pct = std::numeric_limits<double>::quiet_NaN();  // busbw median / link; NaN: unknown
  std::vector<LastArrival> last_arrivals;                      // most often last first, then by rank

  bool linkKnown() const { return link.bytes_per_s > 0 && !busbw.empty(); }
  bool bandwidthBound() const;  // >= 8 MiB with the link known
};

// One matched collective.
struct SkewedCollective {
  uint64_t comm_hash = 0;
  std::string operation;
  uint64_t seq = 0;
  uint64_t bytes = 0;
  int64_t first_entry_ns = 0;  // run clock
  int64_t skew_ns = 0;
  int64_t transfer_ns = 0;
  int32_t first_rank = -1, last_rank = -1;
};

// A communicator whose collectives are limited by one host's NICs (>= 2x slower than another's).
struct SlowCollectiveLink {
  uint64_t comm_hash = 0;
  std::vector<size_t> signatures;  // indices into CollectivesResult::signatures
  double ratio = 0;                // fastest host's NICs / the slowest's
  double lost_ns = 0;              // transfer time beyond what the fastest NICs would take, summed
  size_t biggest = 0;              // the signature moving the most bytes
};

struct CommunicatorSkew {
  uint64_t comm_hash = 0;
  size_t collectives = 0;
  int64_t skew_median_ns = 0;
  int64_t skew_p90_ns = 0;
  std::vector<LastArrival> last_arrivals;
};

struct CollectivesResult {
  int64_t origin_ns = 0;  // the run's first GPU activity (the --window origin)
  std::map<uint64_t, CommunicatorInfo> communicators;
  std::vector<CollectiveSignature> signatures;  // by communicator, operation string id, bytes
  // The `top` collectives entered furthest apart (skew > 0), most first.
  std::vector<SkewedCollective> most_skewed;
  std::vector<CommunicatorSkew> per_communicator;  // by communicator hash
  std::optional<size_t> worst_skew;                // index into per_communicator: highest median skew
  std::optional<size_t> lowest_bandwidth;          // bandwidth-bound signature with the lowest % of link
  std::vector<SlowCollectiveLink> slow_links;
  double steps = 1;            // per-step costs divide by this
  int64_t step_length_ns = 0;  // median step length (rank index 0)

  static constexpr int64_t kLargeSkewNs = 100'000;
  static constexpr double kLowBusBandwidthPct = 50;
};

CollectivesResult computeCollectives(const AnalysisInput& input);
void presentCollectives(const CollectivesResult& result, report::Report& report);

// NCCL operations of every rank grouped by (communicator, operation, bytes), without matching.
struct RankOperationGroup {
  uint64_t comm_hash = 0;
  std::string operation;
  uint64_t bytes = 0;  // 0: not recorded
  size_t count = 0;
  std::vector<int32_t> ranks;
  int64_t time_ns = 0;  // GPU time summed over ranks
  int64_t median_ns = 0, fastest_ns = 0;
  // nccl-tests' figures at the median and the fastest time; NaN without a size or communicator size.
  double algbw_median = std::numeric_limits<double>::quiet_NaN();
  double busbw_median = std::numeric_limits<double>::quiet_NaN();
  double busbw_fastest = std::numeric_limits<double>::quiet_NaN();
};

// Per rank: its NCCL operations in the steps.
struct RankCollectiveSummary {
  int32_t rank = -1;
  size_t operations = 0;
  size_t unsized = 0;
  int64_t time_ns = 0;
  uint64_t bytes = 0;
};

struct CollectiveBandwidthResult {
  std::map<uint64_t, CommunicatorInfo> communicators;
  uint64_t operations = 0, unsized = 0;
  std::vector<RankOperationGroup> groups;    // most GPU time first
  std::vector<RankCollectiveSummary> ranks;  // in run order
};

CollectiveBandwidthResult computeCollectiveBandwidth(const AnalysisInput& input);
void presentCollectiveBandwidth(const CollectiveBandwidthResult& result, size_t top, report::Report& report);

}  // namespace gpuxray::analysis
