#include "analyzer/analysis/communicators.h"

#include <fmt/core.h>

#include <algorithm>
#include <cctype>
#include <vector>

#include "analyzer/report/results.h"

namespace gpuxray::analysis {

const char* communicatorRoleName(CommunicatorRole role) {
  switch (role) {
    case CommunicatorRole::kData:
      return "data";
    case CommunicatorRole::kTensor:
      return "tensor";
    case CommunicatorRole::kPipeline:
      return "pipeline";
    case CommunicatorRole::kOther:
      return "other";
  }
  return "other";
}

std::string CommunicatorInfo::label() const {
  if (comm_hash == 0 && name.empty()) return "communicator not recorded";
  std::string id = name.empty() ? fmt::format("{:#010x}", comm_hash >> 32) : name;
  if (nranks <= 0) return fmt::format("{} ({}, ranks not recorded)", id, communicatorRoleName(role));
  return fmt::format("{} ({}, {} ranks)", id, communicatorRoleName(role), nranks);
}

std::optional<CommunicatorRole> roleNamedIn(std::string_view name) {
  // A word that is only a role ("tensor", "tp", "pipeline_parallel") states the group's role; one
  // with an index ("dp1", "pp0") may instead place the group along another axis, as in Megatron's
  // "tensor dp1 pp0": indexed words count only when no plain word names a role.
  std::optional<CommunicatorRole> plain, indexed;
  bool plain_conflict = false, indexed_conflict = false;
  std::string word;
  auto finish = [&] {
    size_t digits = word.find_first_of("0123456789");
    std::string stem = word.substr(0, digits);
    std::optional<CommunicatorRole> role;
    if (stem == "dp" || stem == "ddp" || stem == "fsdp" || stem == "data" || stem == "dataparallel")
      role = CommunicatorRole::kData;
    if (stem == "tp" || stem == "tensor" || stem == "tensorparallel") role = CommunicatorRole::kTensor;
    if (stem == "pp" || stem == "pipeline" || stem == "pipelineparallel") role = CommunicatorRole::kPipeline;
    if (role) {
      auto& named = digits == std::string::npos ? plain : indexed;
      bool& conflict = digits == std::string::npos ? plain_conflict : indexed_conflict;
      if (named && *named != *role) conflict = true;  // names two roles: trust neither
      named = role;
    }
    word.clear();
  };
  for (char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      word.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    } else {
      finish();
    }
  }
  finish();
  if (plain) return plain_conflict ? std::nullopt : plain;
  return indexed_conflict ? std::nullopt : indexed;
}

namespace {

std::set<int32_t> memberRanks(const CommunicatorInfo& info) {
  std::set<int32_t> ranks;
  for (const auto& [comm_rank, global] : info.members) ranks.insert(global);
  return ranks;
}

double collectivesPerMember(const CommunicatorInfo& info) {
  return static_cast<double>(info.collectives) / static_cast<double>(std::max<size_t>(1, info.members.size()));
}

}  // namespace

std::map<uint64_t, CommunicatorInfo> gatherCommunicators(const model::RunTrace& run) {
  std::map<uint64_t, CommunicatorInfo> comms;
  std::set<std::string> all_hosts;
  for (const auto& rank : run.ranks) {
    all_hosts.insert(rank.header.hostname);
    for (const auto& c : rank.communicators) {
      auto& info = comms[c.comm_hash];
      info.comm_hash = c.comm_hash;
      if (info.name.empty()) info.name = c.name;
      info.nranks = std::max(info.nranks, c.nranks);
      info.nnodes = std::max(info.nnodes, c.nnodes);
      info.members[c.comm_rank] = c.global_rank >= 0 ? c.global_rank : rank.rank;
      info.hosts.insert(rank.header.hostname);
    }
    for (const auto& op : rank.nccl_ops) {
      auto& info = comms[op.comm_hash];
      info.comm_hash = op.comm_hash;
      (op.kind == format::NcclOperationKind::kCollective ? info.collectives : info.point_to_point)++;
    }
  }
  const size_t world = run.ranks.size();
  std::vector<const CommunicatorInfo*> single_host_groups;  // collectives on one host, not the whole world
  for (auto& [hash, info] : comms) {
    // The program's own name for the group outranks gpuxray's guess from the traffic.
    if (std::optional<CommunicatorRole> named = roleNamedIn(info.name)) {
      info.role = *named;
      continue;
    }
    size_t hosts = std::max<size_t>(info.hosts.size(), static_cast<size_t>(std::max(info.nnodes, 0)));
    if (info.point_to_point > info.collectives) {
      info.role = CommunicatorRole::kPipeline;
    } else if (info.collectives == 0) {
      info.role = CommunicatorRole::kOther;
    } else if (hosts <= 1 && all_hosts.size() > 1) {
      info.role = CommunicatorRole::kTensor;
    } else {
      info.role = CommunicatorRole::kData;
      if (all_hosts.size() <= 1 && info.members.size() > 1 && info.members.size() < world)
        single_host_groups.push_back(&info);
    }
  }
  // On one host every group is inside it: of two collective groups sharing a rank, the one with more
  // collectives per member (every layer, against a step's gradients) is the tensor group.
  for (const CommunicatorInfo* group : single_host_groups) {
    std::set<int32_t> ranks = memberRanks(*group);
    for (const CommunicatorInfo* other : single_host_groups) {
      if (other == group || collectivesPerMember(*group) <= collectivesPerMember(*other)) continue;
      std::set<int32_t> theirs = memberRanks(*other);
      if (std::any_of(ranks.begin(), ranks.end(), [&](int32_t r) { return theirs.contains(r); })) {
        comms[group->comm_hash].role = CommunicatorRole::kTensor;
        break;
      }
    }
  }
  return comms;
}

report::ResultValue communicatorValue(uint64_t comm_hash, const CommunicatorInfo* info) {
  using report::ResultValue;
  bool named = info != nullptr && !info->name.empty();
  return ResultValue::object()
      .set("id", ResultValue::text(fmt::format("{:#018x}", comm_hash)))
      .set("name", named ? ResultValue::text(info->name) : ResultValue())
      .set("role", info != nullptr ? ResultValue::text(communicatorRoleName(info->role)) : ResultValue())
      .set("nranks", info != nullptr && info->nranks > 0 ? ResultValue::integer(info->nranks) : ResultValue());
}

}  // namespace gpuxray::analysis
