#include "analyzer/simulate/layout.h"

#include <fmt/core.h>

#include <algorithm>
#include <set>

namespace gpuxray::simulate {
namespace {

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h *= 0xbf58476d1ce4e5b9ull;
  return h ^ (h >> 31);
}

}  // namespace

Layout::Layout(const SimulationInputs& in)
    : tp_(in.strategy.tp),
      cp_(in.strategy.cp),
      dp_(in.strategy.dataGroup()),
      pp_(in.strategy.pp),
      world_(in.strategy.world()) {
  const auto& c = in.cluster;
  places_.resize(static_cast<size_t>(world_));
  nic_factor_.assign(static_cast<size_t>(world_), 1.0);
  time_factor_.assign(static_cast<size_t>(world_), 1.0);
  for (int rank = 0; rank < world_; ++rank) {
    RankPlace& p = places_[static_cast<size_t>(rank)];
    p.tp = rank % tp_;
    p.dp = (rank / tp_) % dp_;
    p.cp = p.dp % cp_;
    p.stage = rank / (tp_ * dp_);
    p.node = rank / c.gpus_per_node;
    p.local_rank = rank % c.gpus_per_node;
    p.nic = c.nics_per_node > 0 ? p.local_rank * c.nics_per_node / c.gpus_per_node : 0;
    for (const auto& link : in.perturbations.slow_links) {
      if (link.host == hostName(p.node) && link.nic == p.nic) nic_factor_[static_cast<size_t>(rank)] *= link.factor;
    }
  }
  for (const auto& s : in.perturbations.stragglers) time_factor_[static_cast<size_t>(s.rank)] *= s.factor;
}

std::vector<int> Layout::members(CommunicatorKind kind, int rank) const {
  const RankPlace& p = place(rank);
  std::vector<int> ranks;
  switch (kind) {
    case CommunicatorKind::kTensor:
      for (int t = 0; t < tp_; ++t) ranks.push_back(rankOf(t, p.dp, p.stage));
      break;
    case CommunicatorKind::kPipeline:
      for (int s = 0; s < pp_; ++s) ranks.push_back(rankOf(p.tp, p.dp, s));
      break;
    case CommunicatorKind::kData:
      for (int d = 0; d < dp_; ++d) ranks.push_back(rankOf(p.tp, d, p.stage));
      break;
    case CommunicatorKind::kContext:
      for (int c = 0; c < cp_; ++c) ranks.push_back(rankOf(p.tp, p.dp - p.cp + c, p.stage));
      break;
    case CommunicatorKind::kModel:
      for (int s = 0; s < pp_; ++s)
        for (int t = 0; t < tp_; ++t) ranks.push_back(rankOf(t, p.dp, s));
      break;
  }
  return ranks;
}

CommunicatorInfo Layout::communicator(CommunicatorKind kind, int rank) const {
  std::vector<int> ranks = members(kind, rank);
  CommunicatorInfo info;
  info.nranks = static_cast<int>(ranks.size());
  info.comm_rank = static_cast<int>(std::find(ranks.begin(), ranks.end(), rank) - ranks.begin());
  std::set<int> nodes;
  for (int r : ranks) nodes.insert(place(r).node);
  info.nnodes = static_cast<int>(nodes.size());
  uint64_t h = mix(0x6770'7578'7261'7900ull, static_cast<uint64_t>(kind));
  h = mix(h, static_cast<uint64_t>(ranks.front()));
  info.hash = mix(h, static_cast<uint64_t>(ranks.size()));
  const RankPlace& p = place(rank);
  switch (kind) {
    case CommunicatorKind::kTensor: info.name = fmt::format("tensor dp{} pp{}", p.dp, p.stage); break;
    case CommunicatorKind::kPipeline: info.name = fmt::format("pipeline tp{} dp{}", p.tp, p.dp); break;
    case CommunicatorKind::kData: info.name = fmt::format("data tp{} pp{}", p.tp, p.stage); break;
    case CommunicatorKind::kModel: info.name = fmt::format("model dp{}", p.dp); break;
    case CommunicatorKind::kContext: info.name = fmt::format("context tp{} dp{} pp{}", p.tp, p.dp / cp_, p.stage); break;
  }
  return info;
}

GroupLinks Layout::links(CommunicatorKind kind, int rank) const {
  std::vector<int> ranks = members(kind, rank);
  GroupLinks g;
  g.ranks = static_cast<int>(ranks.size());
  std::set<int> nodes;
  for (int r : ranks) {
    nodes.insert(place(r).node);
    g.nic_factor = std::min(g.nic_factor, nicFactor(r));
  }
  g.nodes = static_cast<int>(nodes.size());
  g.per_node = std::max(1, g.ranks / g.nodes);
  if (g.nodes <= 1) g.nic_factor = 1;
  return g;
}

}  // namespace gpuxray::simulate
