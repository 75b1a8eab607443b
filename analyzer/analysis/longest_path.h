// The longest path through a graph whose nodes have times, as the critical path needs it
// (critical_path.*, docs/analyses.md "Critical path"): Kahn's order taking the earliest node first,
// each node reached by its heaviest incoming edge (the first such), and re-timings of the same graph
// with some edges' weights changed (the what-if) that re-time only what those edges reach.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace gpuxray::analysis {

// Where the path ends when several nodes end a longest path: the latest (gpuxray's: a wait that ends
// the step is then on the path, not after it) or the earliest (networkx's, so HTA's).
enum class PathEnd : uint8_t { kLatest, kEarliest };

// What an edge of the critical path's graph stands for (the longest path reads only its ends and weight).
enum class EdgeKind : uint8_t { kSpan, kDependency, kLaunch, kKernelGap, kSync };

struct Edge {
  uint32_t from = 0;
  uint32_t to = 0;
  int64_t weight = 0;
  EdgeKind kind = EdgeKind::kSpan;
};

// The longest path through a graph of nodes with times: Kahn's order taking the earliest node first
// (HTA numbers its nodes by time), each node reached by its heaviest incoming edge (the first such).
struct LongestPath {
  std::vector<uint32_t> edges;  // in path order
  uint32_t first = 0;           // its first node
  int64_t length = 0;
  bool empty = true;
};

// Whether a plan merges chains: a node with one edge in and one out, both forward in (time, node), is
// left out of the order and its two edges become one, of their summed weight, that keeps the original
// edges (to give the path back edge by edge) and their own weights (a re-timing changes them one by
// one). Kahn's order of the other nodes, their distances and the path stay the same; only the end the
// earliest rule takes can differ (a merged node can tie the longest path's length before its chain's
// end does), so a merged plan serves PathEnd::kLatest only.
enum class Chains : uint8_t { kKept, kMerged };

// What the longest path needs of a graph whatever its weights, numbered by position in Kahn's order
// (earliest first; the nodes it never reaches after those it does): each position's incoming edges,
// their sources' positions and weights side by side, so that a pass reads them in order. A what-if
// changes some weights in place, re-times only what they reach, and puts them back. Its buffers keep
// their memory from one step to the next.
struct PathPlan {
  uint32_t reached = 0;              // positions [0, reached) are Kahn's order
  std::vector<uint32_t> node;        // per position, its node (merged nodes have none)
  std::vector<uint32_t> dense;       // per node left (not merged), its number among them, in node order
  std::vector<uint32_t> kept_node;   // per such number, its node
  std::vector<uint32_t> position;    // by that number, the node's position
  std::vector<uint32_t> first_in;    // per position, its first incoming slot
  std::vector<uint32_t> in_source;   // per slot (by destination, then last edge's index): the source's position
  std::vector<uint32_t> in_edge;     // per slot, its edge (of a chain, the last)
  std::vector<int64_t> in_weight;    // per slot, its edge's weight (of a chain, the sum)
  std::vector<uint32_t> chain_first;  // per edge, its chain's first edge (itself when not merged)
  std::vector<uint32_t> slot_of;      // per chain's first edge, the chain's slot
  std::vector<int64_t> edge_weight;  // per edge, its own weight
  std::vector<uint32_t> chain_prev;  // per edge, the edge before it in its chain (UINT32_MAX: the first)
  std::vector<uint32_t> first_out;   // by number, its first outgoing edge's target in `out_target`
  std::vector<uint32_t> out_target;  // the targets' numbers (a re-timing looks up the positions of the few it reaches)
  struct Incoming {
    uint32_t edge;
    uint32_t from;
    int64_t weight;
  };
  // While planning: the edges (chains merged) in order of their last edges, then by destination (from
  // node_first_in, by number); per node, its edges in and out; per edge, its chain's weight up to it.
  std::vector<uint32_t> node_first_in;
  std::vector<Incoming> chains, node_incoming;
  std::vector<int64_t> chain_weight;
  std::vector<uint8_t> links, merged;
  std::vector<uint32_t> single_in, unsummed;
};

// What tells the nodes a merged plan leaves out: one edge in and one out, both forward in (time, node).
// Per node, its links count its edges in (the low two bits) and out (the next two), 1 for one forward
// edge and 2 for anything more: a node to leave out has kOneInOneOut. countLink adds an edge's.
inline constexpr uint8_t kOneInOneOut = 1 | 1 << 2;
inline void countLink(uint8_t& from_links, int64_t from_ns, uint32_t from, uint8_t& to_links, int64_t to_ns,
                      uint32_t to) {
  uint8_t one = std::pair(from_ns, from) < std::pair(to_ns, to) ? 1 : 2;
  to_links = static_cast<uint8_t>((to_links & 3) == 0 ? to_links | one : (to_links & 0xfc) | 2);
  from_links = static_cast<uint8_t>((from_links & 12) == 0 ? from_links | one << 2 : (from_links & 0xf3) | 8);
}

// `plan` of the nodes' `times` and `edges` (its buffers are reused).
void planOf(const std::vector<int64_t>& times, const std::vector<Edge>& edges, PathPlan& plan,
            Chains chains = Chains::kKept);

// A pass's distances, by position, and the edges' weights a re-timing changed (to put them back).
struct PathScratch {
  std::vector<int64_t> distance;       // by position, the longest path's length to it as traced
  std::vector<int64_t> longest_up_to;  // by position, the longest of distance[0..position]
  std::vector<int64_t> retimed;        // distance, as a re-timing changes it (put back after each)
  std::vector<uint8_t> dirty;          // by position: an incoming weight or source's distance changed
  // (where, the value before)
  std::vector<std::pair<uint32_t, int64_t>> changed_edges, changed_slots, changed_positions;
};

// The longest path with the plan's weights; `scratch` keeps its distances for re-timings.
LongestPath longestPathOf(const PathPlan& plan, PathEnd end_rule, PathScratch* scratch = nullptr);

// An edge's weight in the plan, and its weight for the next re-timing (retimedLength puts it back).
int64_t weightOf(const PathPlan& plan, uint32_t edge);
void retime(PathPlan& plan, PathScratch& scratch, uint32_t edge, int64_t weight);

// The longest path's length with the weights retime() changed, after longestPathOf filled `scratch`
// with the same plan: only the positions the changes reach are re-timed, in Kahn's order (a node none
// of whose incoming weights or sources changed keeps its distance). Puts the weights back.
int64_t retimedLength(PathPlan& plan, PathScratch& scratch);

}  // namespace gpuxray::analysis
