// The longest path of the critical path's graphs (analysis/longest_path.h) against a straightforward
// reference on random graphs: Kahn's order by (time, node) from an ordered set, each node's distance
// the heaviest of its incoming edges in edge order, the path's end the latest (or earliest) longest.
// Re-timings with some weights changed must give the length a full pass over the changed weights gives.

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include "analyzer/analysis/longest_path.h"

namespace {

namespace analysis = gpuxray::analysis;
using analysis::Edge;
using analysis::PathEnd;

struct Reference {
  int64_t length = 0;
  std::vector<uint32_t> edges;
  bool empty = true;
};

Reference referencePath(const std::vector<int64_t>& times, const std::vector<Edge>& edges, PathEnd end_rule) {
  size_t nodes = times.size();
  std::vector<std::vector<uint32_t>> in(nodes), out(nodes);
  for (uint32_t i = 0; i < edges.size(); ++i) in[edges[i].to].push_back(i), out[edges[i].from].push_back(i);
  std::vector<size_t> pending(nodes);
  std::set<std::pair<int64_t, uint32_t>> ready;
  for (uint32_t n = 0; n < nodes; ++n) {
    pending[n] = in[n].size();
    if (pending[n] == 0) ready.emplace(times[n], n);
  }
  std::vector<int64_t> distance(nodes, 0);
  std::vector<int64_t> via(nodes, -1);
  Reference r;
  uint32_t end = 0;
  while (!ready.empty()) {
    uint32_t n = ready.begin()->second;
    ready.erase(ready.begin());
    for (uint32_t i : in[n]) {
      int64_t d = distance[edges[i].from] + edges[i].weight;
      if (via[n] < 0 || d > distance[n]) distance[n] = d, via[n] = i;
    }
    if (r.empty || distance[n] > distance[end] || (end_rule == PathEnd::kLatest && distance[n] == distance[end]))
      end = n;
    r.empty = false;
    for (uint32_t i : out[n]) {
      if (--pending[edges[i].to] == 0) ready.emplace(times[edges[i].to], edges[i].to);
    }
  }
  if (r.empty) return r;
  r.length = distance[end];
  for (uint32_t n = end; via[n] >= 0; n = edges[static_cast<size_t>(via[n])].from)
    r.edges.insert(r.edges.begin(), static_cast<uint32_t>(via[n]));
  return r;
}

// Nodes with random times (ties included), on spans under and over 2^32 ns; edges forward in time, or from a lower node
// to a higher one whatever their times (Kahn's order then differs from the time order), and sometimes one cycle.
void randomGraph(std::mt19937_64& random, std::vector<int64_t>& times, std::vector<Edge>& edges) {
  auto below = [&](uint64_t n) { return random() % n; };
  size_t nodes = 1 + below(120);
  times.resize(nodes);
  // Some graphs span more than 2^32 ns (the time order's general case).
  int64_t scale = below(4) == 0 ? int64_t{1} << 33 : 1;
  for (int64_t& t : times) t = (static_cast<int64_t>(below(400)) - 100) * scale;
  bool forward_only = below(2) == 0;
  size_t count = below(3 * nodes + 1);
  edges.clear();
  for (size_t k = 0; k < count && nodes > 1; ++k) {
    auto a = static_cast<uint32_t>(below(nodes)), b = static_cast<uint32_t>(below(nodes));
    if (a == b) continue;
    bool a_first = forward_only ? std::pair(times[a], a) < std::pair(times[b], b) : a < b;
    if (!a_first) std::swap(a, b);
    edges.push_back({a, b, static_cast<int64_t>(below(50)), analysis::EdgeKind::kSpan});
  }
  if (below(8) == 0 && nodes > 2) edges.push_back({static_cast<uint32_t>(nodes - 1), 0, 1, analysis::EdgeKind::kSpan});
}

// Re-timings one after another on the same pass, as a step's what-ifs: some weights lowered (to
// zero, or scaled), some raised; each against a full pass over the changed weights. The plan has its
// own weights back afterwards.
void checkRetimings(std::mt19937_64& random, const std::vector<int64_t>& times, const std::vector<Edge>& edges,
                    analysis::PathPlan& plan, analysis::PathScratch& scratch) {
  for (int what_if = 0; what_if < 4 && !edges.empty(); ++what_if) {
    std::vector<Edge> changed = edges;
    size_t changes = 1 + random() % std::min<size_t>(edges.size(), 6);
    for (size_t c = 0; c < changes; ++c) {
      auto e = static_cast<uint32_t>(random() % edges.size());
      int64_t weight = what_if == 3 ? changed[e].weight + static_cast<int64_t>(random() % 40)
                                    : changed[e].weight * static_cast<int64_t>(random() % 2) / 2;
      changed[e].weight = weight;
      analysis::retime(plan, scratch, e, weight);
      CHECK(analysis::weightOf(plan, e) == weight);
    }
    INFO("what-if " << what_if);
    CHECK(analysis::retimedLength(plan, scratch) == referencePath(times, changed, PathEnd::kLatest).length);
  }
  for (uint32_t e = 0; e < edges.size(); ++e) CHECK(analysis::weightOf(plan, e) == edges[e].weight);
}

}  // namespace

TEST_CASE("longest path: path and length as a straightforward Kahn's pass gives them, on random graphs",
          "[critical_path]") {
  std::mt19937_64 random(15);
  analysis::PathPlan plan;  // reused from graph to graph, as a run's steps reuse it
  for (int graph = 0; graph < 400; ++graph) {
    std::vector<int64_t> times;
    std::vector<Edge> edges;
    randomGraph(random, times, edges);
    PathEnd end_rule = graph % 3 == 0 ? PathEnd::kEarliest : PathEnd::kLatest;
    INFO("graph " << graph << ": " << times.size() << " nodes, " << edges.size() << " edges");
    analysis::planOf(times, edges, plan);
    analysis::PathScratch scratch;
    analysis::LongestPath path = analysis::longestPathOf(plan, end_rule, &scratch);
    Reference expected = referencePath(times, edges, end_rule);
    REQUIRE(path.empty == expected.empty);
    CHECK(path.length == expected.length);
    CHECK(path.edges == expected.edges);

    checkRetimings(random, times, edges, plan, scratch);
    CHECK(analysis::longestPathOf(plan, end_rule).edges == expected.edges);
  }
}

TEST_CASE("longest path: a plan with its chains merged gives the latest-ending path and re-timings unchanged",
          "[critical_path]") {
  std::mt19937_64 random(16);
  analysis::PathPlan plan;
  for (int graph = 0; graph < 400; ++graph) {
    std::vector<int64_t> times;
    std::vector<Edge> edges;
    randomGraph(random, times, edges);
    // Mostly chains: a few of the random edges, and runs of consecutive nodes in time order (a stream's
    // kernels and gaps), some tied in time.
    edges.resize(std::min<size_t>(edges.size(), times.size() / 4));
    std::vector<uint32_t> by_time(times.size());
    for (uint32_t n = 0; n < by_time.size(); ++n) by_time[n] = n;
    std::stable_sort(by_time.begin(), by_time.end(), [&](uint32_t a, uint32_t b) { return times[a] < times[b]; });
    for (size_t k = 0; k + 1 < by_time.size(); ++k) {
      if (random() % 5 != 0)
        edges.push_back({by_time[k], by_time[k + 1], static_cast<int64_t>(random() % 50), analysis::EdgeKind::kSpan});
    }
    // Shuffled, a chain's edges come in any order (the plan sums the later ones first); in a quarter of
    // the graphs each chain's edges come in its order, as a step's graph has them (summed in one pass).
    if (graph % 4 != 0) std::shuffle(edges.begin(), edges.end(), random);
    INFO("graph " << graph << ": " << times.size() << " nodes, " << edges.size() << " edges");
    analysis::planOf(times, edges, plan, analysis::Chains::kMerged);
    analysis::PathScratch scratch;
    analysis::LongestPath path = analysis::longestPathOf(plan, PathEnd::kLatest, &scratch);
    Reference expected = referencePath(times, edges, PathEnd::kLatest);
    REQUIRE(path.empty == expected.empty);
    CHECK(path.length == expected.length);
    CHECK(path.edges == expected.edges);
    checkRetimings(random, times, edges, plan, scratch);
    CHECK(analysis::longestPathOf(plan, PathEnd::kLatest).edges == expected.edges);
  }
}
