#include "analyzer/analysis/longest_path.h"

#include <algorithm>
#include <climits>
#include <functional>

namespace gpuxray::analysis {
namespace {

// `order`'s nodes (ascending) by (time, node): a stable radix sort of their times, 11 bits a pass over
// the span they cover.
void timeOrder(const std::vector<int64_t>& times, std::vector<uint32_t>& order) {
  size_t nodes = order.size();
  auto earlier = [&](uint32_t a, uint32_t b) { return times[a] < times[b]; };
  if (nodes == 0 || std::is_sorted(order.begin(), order.end(), earlier)) return;
  auto [low_at, high_at] = std::minmax_element(order.begin(), order.end(), earlier);
  int64_t low = times[*low_at];
  uint64_t span = static_cast<uint64_t>(times[*high_at]) - static_cast<uint64_t>(low);
  constexpr int kBits = 11;
  std::vector<uint32_t> counts(size_t{1} << kBits);
  // Spans under 2^32 ns (most steps) sort (time << 32 | node) words, half the bytes of the general case.
  if (span < (uint64_t{1} << 32)) {
    std::vector<uint64_t> keyed(nodes), sorted(nodes);
    for (size_t k = 0; k < nodes; ++k)
      keyed[k] = (static_cast<uint64_t>(times[order[k]]) - static_cast<uint64_t>(low)) << 32 | order[k];
    for (int shift = 32; shift < 64 && (span >> (shift - 32)) != 0; shift += kBits) {
      std::fill(counts.begin(), counts.end(), 0);
      for (uint64_t k : keyed) ++counts[(k >> shift) & ((1u << kBits) - 1)];
      uint32_t sum = 0;
      for (uint32_t& c : counts) sum += std::exchange(c, sum);
      for (uint64_t k : keyed) sorted[counts[(k >> shift) & ((1u << kBits) - 1)]++] = k;
      keyed.swap(sorted);
    }
    for (size_t k = 0; k < nodes; ++k) order[k] = static_cast<uint32_t>(keyed[k]);
    return;
  }
  struct Keyed {
    uint64_t key;
    uint32_t node;
  };
  std::vector<Keyed> keyed(nodes), sorted(nodes);
  for (size_t k = 0; k < nodes; ++k)
    keyed[k] = {static_cast<uint64_t>(times[order[k]]) - static_cast<uint64_t>(low), order[k]};
  for (int shift = 0; shift < 64 && (span >> shift) != 0; shift += kBits) {
    std::fill(counts.begin(), counts.end(), 0);
    for (const Keyed& k : keyed) ++counts[(k.key >> shift) & ((1u << kBits) - 1)];
    uint32_t sum = 0;
    for (uint32_t& c : counts) sum += std::exchange(c, sum);
    for (const Keyed& k : keyed) sorted[counts[(k.key >> shift) & ((1u << kBits) - 1)]++] = k;
    keyed.swap(sorted);
  }
  for (size_t k = 0; k < nodes; ++k) order[k] = keyed[k].node;
}

// Each node's links (countLink), and its one edge in where it has one.
void countLinks(const std::vector<int64_t>& times, const std::vector<Edge>& edges, PathPlan& plan) {
  plan.links.assign(times.size(), 0);
  plan.single_in.resize(times.size());
  for (uint32_t i = 0; i < edges.size(); ++i) {
    const Edge& e = edges[i];
    countLink(plan.links[e.from], times[e.from], e.from, plan.links[e.to], times[e.to], e.to);
    plan.single_in[e.to] = i;
  }
}

}  // namespace

void planOf(const std::vector<int64_t>& times, const std::vector<Edge>& edges, PathPlan& plan, Chains chains) {
  size_t nodes = times.size();
  bool merging = chains == Chains::kMerged;
  if (merging) countLinks(times, edges, plan);
  // The nodes left, numbered densely in node order (`kept_node`, and per node its number in `dense`).
  std::vector<uint32_t>& dense = plan.dense;
  std::vector<uint32_t>& kept_node = plan.kept_node;
  dense.resize(nodes);
  plan.merged.resize(nodes);
  kept_node.clear();
  for (uint32_t n = 0; n < nodes; ++n) {
    plan.merged[n] = merging && plan.links[n] == kOneInOneOut;
    if (!plan.merged[n]) {
      dense[n] = static_cast<uint32_t>(kept_node.size()), kept_node.push_back(n);
      if (merging) plan.single_in[n] = UINT32_MAX;  // no chain runs through it
    }
  }
  size_t kept = kept_node.size();
  // By node first, where a rank's edges stay among its own nodes; an edge into a merged node stands for
  // its whole chain, at the chain's last edge (so that a node's incoming edges keep their order).
  std::vector<uint32_t>& node_first_in = plan.node_first_in;
  std::vector<PathPlan::Incoming>& chain_list = plan.chains;
  std::vector<PathPlan::Incoming>& incoming = plan.node_incoming;
  std::vector<uint32_t>& first_out = plan.first_out;
  node_first_in.assign(kept + 1, 0);
  first_out.assign(kept + 1, 0);
  plan.edge_weight.resize(edges.size());
  plan.chain_prev.resize(edges.size());
  chain_list.clear();
  // Per edge, its chain's first edge and the chain's weight up to it, in one pass when each edge comes
  // after the one before it in its chain (as a step's graph is built); an edge whose chain runs back to
  // later edges has them summed first.
  std::vector<uint32_t>& chain_first = plan.chain_first;
  std::vector<int64_t>& chain_weight = plan.chain_weight;
  chain_first.assign(edges.size(), UINT32_MAX);
  chain_weight.resize(edges.size());
  // A merged node's one edge in, read in one look (a node left holds UINT32_MAX there).
  auto previousOf = [&](uint32_t e) { return merging ? plan.single_in[edges[e].from] : UINT32_MAX; };
  auto sumUpTo = [&](uint32_t e) {
    uint32_t previous = previousOf(e);
    chain_first[e] = previous == UINT32_MAX ? e : chain_first[previous];
    chain_weight[e] = (previous == UINT32_MAX ? 0 : chain_weight[previous]) + edges[e].weight;
  };
  std::vector<uint32_t>& unsummed = plan.unsummed;  // a chain's edges back to the last one summed
  for (uint32_t i = 0; i < edges.size(); ++i) {
    plan.edge_weight[i] = edges[i].weight;
    uint32_t previous = previousOf(i);
    plan.chain_prev[i] = previous;
    if (chain_first[i] == UINT32_MAX) {
      if (previous != UINT32_MAX && chain_first[previous] == UINT32_MAX) {
        unsummed.clear();
        for (uint32_t e = i; e != UINT32_MAX && chain_first[e] == UINT32_MAX; e = previousOf(e)) unsummed.push_back(e);
        for (auto e = unsummed.rbegin(); e != unsummed.rend(); ++e) sumUpTo(*e);
      } else {
        sumUpTo(i);
      }
    }
    if (plan.merged[edges[i].to]) continue;
    uint32_t first = chain_first[i];
    chain_list.push_back({i, edges[first].from, chain_weight[i]});
    ++node_first_in[dense[edges[i].to]], ++first_out[dense[edges[first].from]];
  }
  // Each node's count becomes where its edges end, then, filled backwards, where they begin.
  for (size_t d = 1; d < kept; ++d) node_first_in[d] += node_first_in[d - 1], first_out[d] += first_out[d - 1];
  if (kept > 0) node_first_in[kept] = node_first_in[kept - 1], first_out[kept] = first_out[kept - 1];
  std::vector<uint32_t>& outgoing = plan.out_target;  // the targets, numbered densely
  outgoing.resize(chain_list.size());
  incoming.resize(chain_list.size());
  for (auto in = chain_list.rbegin(); in != chain_list.rend(); ++in) {
    uint32_t to = dense[edges[in->edge].to];
    incoming[--node_first_in[to]] = *in;
    outgoing[--first_out[dense[in->from]]] = to;
  }
  std::vector<uint32_t>& order = plan.node;
  order.assign(kept_node.begin(), kept_node.end());
  // When every edge runs forward in (time, node) order, as in most steps, that order is Kahn's: the
  // earliest ready node is always the earliest one left.
  auto forward = [&](const PathPlan::Incoming& in) {
    uint32_t to = edges[in.edge].to;
    return std::pair(times[in.from], in.from) < std::pair(times[to], to);
  };
  if (std::all_of(incoming.begin(), incoming.end(), forward)) {
    timeOrder(times, order);
  } else {
    std::vector<uint32_t> pending(kept);
    using Ready = std::pair<int64_t, uint32_t>;
    std::vector<Ready> heap;
    heap.reserve(kept);
    auto later = std::greater<>();
    for (uint32_t d = 0; d < kept; ++d) {
      pending[d] = node_first_in[d + 1] - node_first_in[d];
      if (pending[d] == 0) heap.emplace_back(times[kept_node[d]], kept_node[d]);
    }
    std::make_heap(heap.begin(), heap.end(), later);
    order.clear();
    while (!heap.empty()) {
      std::pop_heap(heap.begin(), heap.end(), later);
      uint32_t n = heap.back().second;
      heap.pop_back();
      order.push_back(n);
      for (uint32_t k = first_out[dense[n]]; k < first_out[dense[n] + 1]; ++k) {
        uint32_t to = outgoing[k];
        if (--pending[to] == 0) {
          heap.emplace_back(times[kept_node[to]], kept_node[to]);
          std::push_heap(heap.begin(), heap.end(), later);
        }
      }
    }
  }
  // A cycle leaves nodes unreached, where a merged node could have ended the path before its chain's
  // unreached end: such a graph keeps its chains.
  if (order.size() < kept && chains == Chains::kMerged) return planOf(times, edges, plan, Chains::kKept);
  plan.reached = static_cast<uint32_t>(order.size());
  plan.position.assign(kept, UINT32_MAX);
  for (uint32_t p = 0; p < order.size(); ++p) plan.position[dense[order[p]]] = p;
  for (uint32_t d = 0; d < kept && order.size() < kept; ++d) {
    if (plan.position[d] == UINT32_MAX)
      plan.position[d] = static_cast<uint32_t>(order.size()), order.push_back(kept_node[d]);
  }
  // Then by position, written in order.
  plan.first_in.resize(kept + 1);
  plan.in_source.resize(incoming.size());
  plan.in_edge.resize(incoming.size());
  plan.in_weight.resize(incoming.size());
  plan.slot_of.resize(edges.size());
  uint32_t slot = 0;
  for (uint32_t p = 0; p < kept; ++p) {
    plan.first_in[p] = slot;
    uint32_t d = dense[order[p]];
    for (uint32_t k = node_first_in[d]; k < node_first_in[d + 1]; ++k, ++slot) {
      const PathPlan::Incoming& in = incoming[k];
      plan.in_source[slot] = plan.position[dense[in.from]];
      plan.in_edge[slot] = in.edge;
      plan.in_weight[slot] = in.weight;
      plan.slot_of[chain_first[in.edge]] = slot;
    }
  }
  plan.first_in[kept] = slot;
}

LongestPath longestPathOf(const PathPlan& plan, PathEnd end_rule, PathScratch* scratch) {
  PathScratch own;
  PathScratch& buffers = scratch != nullptr ? *scratch : own;
  std::vector<int64_t>& distance = buffers.distance;
  std::vector<int64_t>& longest = buffers.longest_up_to;
  std::vector<int32_t> via(plan.reached, -1);  // the slot the longest path arrives by
  distance.assign(plan.node.size(), 0);
  longest.resize(plan.reached);
  LongestPath out;
  uint32_t end = 0;
  for (uint32_t p = 0; p < plan.reached; ++p) {
    int64_t best = 0;
    int32_t best_slot = -1;
    for (uint32_t k = plan.first_in[p]; k < plan.first_in[p + 1]; ++k) {
      int64_t d = distance[plan.in_source[k]] + plan.in_weight[k];
      if (best_slot < 0 || d > best) best = d, best_slot = static_cast<int32_t>(k);
    }
    distance[p] = best;
    via[p] = best_slot;
    if (p == 0 || best > distance[end] || (end_rule == PathEnd::kLatest && best == distance[end])) end = p;
    longest[p] = distance[end];
  }
  if (plan.reached == 0) return out;
  out.empty = false;
  out.length = distance[end];
  uint32_t first = end;
  while (via[first] >= 0) {
    for (uint32_t e = plan.in_edge[static_cast<size_t>(via[first])]; e != UINT32_MAX; e = plan.chain_prev[e])
      out.edges.push_back(e);
    first = plan.in_source[static_cast<size_t>(via[first])];
  }
  out.first = plan.node[first];
  std::reverse(out.edges.begin(), out.edges.end());
  if (scratch != nullptr) buffers.retimed = distance;
  return out;
}

namespace {

void putWeightsBack(PathPlan& plan, PathScratch& scratch) {
  for (auto it = scratch.changed_slots.rbegin(); it != scratch.changed_slots.rend(); ++it)
    plan.in_weight[it->first] = it->second;
  for (auto it = scratch.changed_edges.rbegin(); it != scratch.changed_edges.rend(); ++it)
    plan.edge_weight[it->first] = it->second;
  scratch.changed_slots.clear();
  scratch.changed_edges.clear();
}

}  // namespace

int64_t retimedLength(PathPlan& plan, PathScratch& scratch) {
  if (plan.reached == 0) {
    putWeightsBack(plan, scratch);
    return 0;
  }
  std::vector<int64_t>& retimed = scratch.retimed;
  scratch.dirty.resize(plan.node.size(), 0);
  uint32_t first = plan.reached;
  // Each changed slot's destination: the position whose range of slots holds it.
  for (const auto& [slot, before] : scratch.changed_slots) {
    auto p = static_cast<uint32_t>(std::upper_bound(plan.first_in.begin(), plan.first_in.end(), slot) -
                                   plan.first_in.begin() - 1);
    if (p < plan.reached) scratch.dirty[p] = 1, first = std::min(first, p);
  }
  int64_t length = first > 0 ? scratch.longest_up_to[first - 1] : INT64_MIN;
  for (uint32_t p = first; p < plan.reached; ++p) {
    if (scratch.dirty[p]) {
      scratch.dirty[p] = 0;
      int64_t best = 0;
      bool any = false;
      for (uint32_t k = plan.first_in[p]; k < plan.first_in[p + 1]; ++k) {
        int64_t d = retimed[plan.in_source[k]] + plan.in_weight[k];
        if (!any || d > best) best = d, any = true;
      }
      if (best != retimed[p]) {
        scratch.changed_positions.emplace_back(p, retimed[p]);
        retimed[p] = best;
        uint32_t d = plan.dense[plan.node[p]];
        for (uint32_t k = plan.first_out[d]; k < plan.first_out[d + 1]; ++k)
          scratch.dirty[plan.position[plan.out_target[k]]] = 1;
      }
    }
    length = std::max(length, retimed[p]);
  }
  for (uint32_t p = plan.reached; p < scratch.dirty.size(); ++p) scratch.dirty[p] = 0;
  for (const auto& [p, before] : scratch.changed_positions) retimed[p] = before;
  scratch.changed_positions.clear();
  putWeightsBack(plan, scratch);
  return length;
}

int64_t weightOf(const PathPlan& plan, uint32_t edge) {
  return plan.edge_weight[edge];
}
void retime(PathPlan& plan, PathScratch& scratch, uint32_t edge, int64_t weight) {
  int64_t& own = plan.edge_weight[edge];
  if (own == weight) return;
  uint32_t slot = plan.slot_of[plan.chain_first[edge]];
  scratch.changed_edges.emplace_back(edge, own);
  scratch.changed_slots.emplace_back(slot, plan.in_weight[slot]);
  plan.in_weight[slot] += weight - own;
  own = weight;
}

}  // namespace gpuxray::analysis
