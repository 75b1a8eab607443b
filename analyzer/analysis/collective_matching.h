// The same NCCL operation seen from every rank that took part: collectives matched by (communicator,
// function, sequence number), point-to-point operations by order (the i-th Send from A to B on a
// communicator pairs with the i-th Recv on B from A). Clock alignment, the collectives analysis and
// the straggler analysis all read this.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "analyzer/model/run_trace.h"

namespace gpuxray::analysis {

struct MemberOp {
  uint32_t rank_index = 0;  // into run.ranks
  uint32_t op_index = 0;    // into that rank's nccl_ops
};

struct MatchedCollective {
  uint64_t comm_hash = 0;
  uint64_t seq = 0;
  uint32_t func = 0;          // into CollectiveIndex::funcs
  uint32_t first_member = 0;  // into CollectiveIndex::members
  uint32_t member_count = 0;
};

struct P2pPair {
  MemberOp send;
  MemberOp recv;
};

struct CollectiveIndex {
  std::vector<std::string> funcs;
  // Collectives with GPU times joined by two or more ranks, by communicator and then by time.
  std::vector<MatchedCollective> collectives;
  // Members of each collective, by rank index.
  std::vector<MemberOp> members;
  // Sends paired with their receives, both with GPU times.
  std::vector<P2pPair> p2p;
  // Collective operations no other rank's operation matched (a rank missing, a torn file).
  uint64_t unmatched = 0;
  // Keys that one rank holds twice (graph replays that do not advance NCCL's sequence number).
  uint64_t ambiguous = 0;

  std::span<const MemberOp> membersOf(const MatchedCollective& c) const {
    return {members.data() + c.first_member, c.member_count};
  }
};

CollectiveIndex matchOperations(const model::RunTrace& run);

inline model::NcclOp opOf(const model::RunTrace& run, MemberOp m) {
  return run.ranks[m.rank_index].nccl_ops[m.op_index];
}

}  // namespace gpuxray::analysis
