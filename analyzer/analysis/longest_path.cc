#include "analyzer/analysis/longest_path.h"

#include <algorithm>
#include <climits>
#include <functional>

namespace gpuxray::analysis {
namespace {

// The nodes by (time, node): a stable radix sort of their times, 11 bits a pass over the span they cover.
void timeOrder(const std::vector<int64_t>& times, std::vector<uint32_t>& order) {
  size_t nodes = times.size();
  order.resize(nodes);
  for (uint32_t n = 0; n < nodes; ++n) order[n] = n;
  if (nodes == 0 || std::is_sorted(times.begin(), times.end())) return;
  auto [low, high] = std::minmax_element(times.begin(), times.end());
  uint64_t span = static_cast<uint64_t>(*high) - static_cast<uint64_t>(*low);
  constexpr int kBits = 11;
  std::vector<uint32_t> counts(size_t{1} << kBits);
  // Spans under 2^32 ns (most steps) sort (time << 32 | node) words, half the bytes of the general case.
  if (span < (uint64_t{1} << 32)) {
    std::vector<uint64_t> keyed(nodes), sorted(nodes);
    for (uint32_t n = 0; n < nodes; ++n)
      keyed[n] = (static_cast<uint64_t>(times[n]) - static_cast<uint64_t>(*low)) << 32 | n;
    for (int shift = 32; shift < 64 && (span >> (shift - 32)) != 0; shift += kBits) {
      std::fill(counts.begin(), counts.end(), 0);
      for (uint64_t k : keyed) ++counts[(k >> shift) & ((1u << kBits) - 1)];
      uint32_t sum = 0;
      for (uint32_t& c : counts) sum += std::exchange(c, sum);
      for (uint64_t k : keyed) sorted[counts[(k >> shift) & ((1u << kBits) - 1)]++] = k;
      keyed.swap(sorted);
    }
    for (uint32_t n = 0; n < nodes; ++n) order[n] = static_cast<uint32_t>(keyed[n]);
    return;
  }
  struct Keyed {
    uint64_t key;
    uint32_t node;
  };
  std::vector<Keyed> keyed(nodes), sorted(nodes);
  for (uint32_t n = 0; n < nodes; ++n) keyed[n] = {static_cast<uint64_t>(times[n]) - static_cast<uint64_t>(*low), n};
  for (int shift = 0; shift < 64 && (span >> shift) != 0; shift += kBits) {
    std::fill(counts.begin(), counts.end(), 0);
    for (const Keyed& k : keyed) ++counts[(k.key >> shift) & ((1u << kBits) - 1)];
    uint32_t sum = 0;
    for (uint32_t& c : counts) sum += std::exchange(c, sum);
    for (const Keyed& k : keyed) sorted[counts[(k.key >> shift) & ((1u << kBits) - 1)]++] = k;
    keyed.swap(sorted);
  }
  for (uint32_t n = 0; n < nodes; ++n) order[n] = keyed[n].node;
}

}  // namespace

void planOf(const std::vector<int64_t>& times, const std::vector<Edge>& edges, PathPlan& plan) {
  size_t nodes = times.size();
  // By node first, where a rank's edges stay among its own nodes.
  std::vector<uint32_t>& node_first_in = plan.node_first_in;
  std::vector<PathPlan::Incoming>& incoming = plan.node_incoming;
  std::vector<uint32_t>& first_out = plan.first_out;
  node_first_in.assign(nodes + 1, 0);
  first_out.assign(nodes + 1, 0);
  for (const Edge& e : edges) ++node_first_in[e.to + 1], ++first_out[e.from + 1];
  for (size_t n = 0; n < nodes; ++n) node_first_in[n + 1] += node_first_in[n], first_out[n + 1] += first_out[n];
  incoming.resize(edges.size());
  std::vector<uint32_t>& outgoing = plan.out_target;  // the targets' nodes
  outgoing.resize(edges.size());
  {
    std::vector<uint32_t> in_fill(node_first_in.begin(), node_first_in.end() - 1),
        out_fill(first_out.begin(), first_out.end() - 1);
    for (uint32_t i = 0; i < edges.size(); ++i) {
      incoming[in_fill[edges[i].to]++] = {i, edges[i].from, edges[i].weight};
      outgoing[out_fill[edges[i].from]++] = edges[i].to;
    }
  }
  std::vector<uint32_t>& order = plan.node;
  // When every edge runs forward in (time, node) order, as in most steps, that order is Kahn's: the
  // earliest ready node is always the earliest one left.
  auto forward = [&](const Edge& e) { return std::pair(times[e.from], e.from) < std::pair(times[e.to], e.to); };
  if (std::all_of(edges.begin(), edges.end(), forward)) {
    timeOrder(times, order);
  } else {
    std::vector<uint32_t> pending(nodes);
    using Ready = std::pair<int64_t, uint32_t>;
    std::vector<Ready> heap;
    heap.reserve(nodes);
    auto later = std::greater<>();
    for (uint32_t n = 0; n < nodes; ++n) {
      pending[n] = node_first_in[n + 1] - node_first_in[n];
      if (pending[n] == 0) heap.emplace_back(times[n], n);
    }
    std::make_heap(heap.begin(), heap.end(), later);
    order.clear();
    order.reserve(nodes);
    while (!heap.empty()) {
      std::pop_heap(heap.begin(), heap.end(), later);
      uint32_t n = heap.back().second;
      heap.pop_back();
      order.push_back(n);
      for (uint32_t k = first_out[n]; k < first_out[n + 1]; ++k) {
        uint32_t to = outgoing[k];
        if (--pending[to] == 0) {
          heap.emplace_back(times[to], to);
          std::push_heap(heap.begin(), heap.end(), later);
        }
      }
    }
  }
  plan.reached = static_cast<uint32_t>(order.size());
  plan.position.assign(nodes, UINT32_MAX);
  for (uint32_t p = 0; p < order.size(); ++p) plan.position[order[p]] = p;
  for (uint32_t n = 0; n < nodes && order.size() < nodes; ++n) {
    if (plan.position[n] == UINT32_MAX) plan.position[n] = static_cast<uint32_t>(order.size()), order.push_back(n);
  }
  // Then by position, written in order.
  plan.first_in.resize(nodes + 1);
  plan.in_source.resize(edges.size());
  plan.in_edge.resize(edges.size());
  plan.in_weight.resize(edges.size());
  plan.slot_of.resize(edges.size());
  uint32_t slot = 0;
  for (uint32_t p = 0; p < nodes; ++p) {
    plan.first_in[p] = slot;
    uint32_t n = order[p];
    for (uint32_t k = node_first_in[n]; k < node_first_in[n + 1]; ++k, ++slot) {
      const PathPlan::Incoming& in = incoming[k];
      plan.in_source[slot] = plan.position[in.from];
      plan.in_edge[slot] = in.edge;
      plan.in_weight[slot] = in.weight;
      plan.slot_of[in.edge] = slot;
    }
  }
  plan.first_in[nodes] = slot;
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
    out.edges.push_back(plan.in_edge[static_cast<size_t>(via[first])]);
    first = plan.in_source[static_cast<size_t>(via[first])];
  }
  out.first = plan.node[first];
  std::reverse(out.edges.begin(), out.edges.end());
  if (scratch != nullptr) buffers.retimed = distance;
  return out;
}

int64_t retimedLength(PathPlan& plan, PathScratch& scratch) {
  if (plan.reached == 0) {
    for (auto it = scratch.changed_slots.rbegin(); it != scratch.changed_slots.rend(); ++it)
      plan.in_weight[it->first] = it->second;
    scratch.changed_slots.clear();
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
        uint32_t n = plan.node[p];
        for (uint32_t k = plan.first_out[n]; k < plan.first_out[n + 1]; ++k)
          scratch.dirty[plan.position[plan.out_target[k]]] = 1;
      }
    }
    length = std::max(length, retimed[p]);
  }
  for (uint32_t p = plan.reached; p < scratch.dirty.size(); ++p) scratch.dirty[p] = 0;
  for (const auto& [p, before] : scratch.changed_positions) retimed[p] = before;
  for (auto it = scratch.changed_slots.rbegin(); it != scratch.changed_slots.rend(); ++it)
    plan.in_weight[it->first] = it->second;
  scratch.changed_positions.clear();
  scratch.changed_slots.clear();
  return length;
}

int64_t weightOf(const PathPlan& plan, uint32_t edge) {
  return plan.in_weight[plan.slot_of[edge]];
}
void retime(PathPlan& plan, PathScratch& scratch, uint32_t edge, int64_t weight) {
  uint32_t slot = plan.slot_of[edge];
  if (plan.in_weight[slot] == weight) return;
  scratch.changed_slots.emplace_back(slot, plan.in_weight[slot]);
  plan.in_weight[slot] = weight;
}

}  // namespace gpuxray::analysis
