// The run's NCCL communicators, gathered from every rank's records and told apart by their names
// where these state a role, else by what they carry: pipeline groups move point-to-point traffic,
// tensor groups are collectives inside one host (on a one-host run: the busier of two collective
// groups that share a rank), data groups are the other collectives.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "analyzer/model/run_trace.h"

namespace gpuxray::analysis {

enum class CommunicatorRole { kData, kTensor, kPipeline, kOther };
const char* communicatorRoleName(CommunicatorRole role);

struct CommunicatorInfo {
  uint64_t comm_hash = 0;
  std::string name;
  int32_t nranks = 0;
  int32_t nnodes = 0;
  // comm rank -> global rank, as its members reported them.
  std::map<int32_t, int32_t> members;
  std::set<std::string> hosts;
  uint64_t collectives = 0;
  uint64_t point_to_point = 0;
  CommunicatorRole role = CommunicatorRole::kOther;

  // "0x1a2b… (data, 8 ranks)"
  std::string label() const;
};

// The role a communicator's own name states ("dp1", "tensor_parallel", "pp", "tensor dp1 pp0":
// a plain word outranks an indexed one, which may be the group's place on another axis); none when
// it states none, or two of the same kind.
std::optional<CommunicatorRole> roleNamedIn(std::string_view name);

// Roles come from the names where they state one, else from the traffic (see above).
std::map<uint64_t, CommunicatorInfo> gatherCommunicators(const model::RunTrace& run);

}  // namespace gpuxray::analysis

namespace gpuxray::report {
class ResultValue;
}

namespace gpuxray::analysis {

// A communicator as the analyses' typed results name it: {"id": "0x…", "name", "role", "nranks"}
// (name and nranks null when not recorded).
report::ResultValue communicatorValue(uint64_t comm_hash, const CommunicatorInfo* info);

}  // namespace gpuxray::analysis
