// The op tree: nests each rank's host ranges per thread, merges them across ranks by path and
// hangs each kernel on the innermost range open on its launch call's thread when the call began.

#include "analyzer/analysis/ops.h"

#include <fmt/core.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <tuple>
#include <unordered_map>

#include "analyzer/analysis/analyses.h"
#include "analyzer/analysis/range_names.h"
#include "analyzer/analysis/rank_digest.h"

namespace gpuxray::analysis {
namespace {

using report::Cell;
using report::ResultValue;
using report::Unit;

// One host range of a rank, NVTX or cpu_op alike.
struct HostRange {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint64_t thread_id = 0;
  uint32_t name_id = 0;
  uint32_t inputs_id = 0;
  int32_t parent = -1;  // index into the rank's ranges, its innermost container on the thread
  int32_t node = -1;    // index into the merged tree
};

std::vector<HostRange> hostRanges(const model::RankTrace& rank) {
  std::vector<HostRange> ranges;
  ranges.reserve(rank.nvtx.size() + rank.host_ops.size());
  for (const auto& r : rank.nvtx) {
    if (rank.name(r.domain_id) == model::kGpuUserAnnotationDomain) continue;
    ranges.push_back({r.start_ns, r.end_ns, r.thread_id, r.name_id, 0});
  }
  for (const auto& op : rank.host_ops)
    ranges.push_back({op.start_ns, op.end_ns, op.thread_id, op.name_id, op.inputs_id});
  // Per thread by start; of ranges that start together the longer one contains the other.
  std::sort(ranges.begin(), ranges.end(), [](const HostRange& a, const HostRange& b) {
    return std::tie(a.thread_id, a.start_ns, b.end_ns) < std::tie(b.thread_id, b.start_ns, a.end_ns);
  });
  std::vector<int32_t> open;
  for (size_t i = 0; i < ranges.size(); ++i) {
    if (i > 0 && ranges[i].thread_id != ranges[i - 1].thread_id) open.clear();
    while (!open.empty() && ranges[static_cast<size_t>(open.back())].end_ns < ranges[i].end_ns) open.pop_back();
    ranges[i].parent = open.empty() ? -1 : open.back();
    open.push_back(static_cast<int32_t>(i));
  }
  return ranges;
}

// The innermost range of `ranges` (one thread's, from `first` to `last`) open at `t`, or -1.
int32_t innermostAt(const std::vector<HostRange>& ranges, size_t first, size_t last, int64_t t) {
  auto begin = ranges.begin() + static_cast<std::ptrdiff_t>(first);
  auto end = ranges.begin() + static_cast<std::ptrdiff_t>(last);
  auto after = std::upper_bound(begin, end, t, [](int64_t v, const HostRange& r) { return v < r.start_ns; });
  if (after == begin) return -1;
  auto index = static_cast<int32_t>(std::prev(after) - ranges.begin());
  while (index >= 0 && ranges[static_cast<size_t>(index)].end_ns < t) index = ranges[static_cast<size_t>(index)].parent;
  return index;
}

struct NodeKernels {
  std::unordered_map<std::string, OpKernel> by_name;
};

class TreeBuilder {
 public:
  int32_t node(int32_t parent, const std::string& name, const std::string& inputs) {
    auto [it, added] = index_.try_emplace(std::make_tuple(parent, name, inputs), static_cast<int32_t>(nodes_.size()));
    if (added) {
      OpNode n;
      n.parent = parent;
      n.name = name;
      n.inputs = inputs;
      nodes_.push_back(std::move(n));
      kernels_.emplace_back();
      last_file_.push_back(kNoFile);
    }
    return it->second;
  }
  // A rank's tree (the run's `file`-th), its nodes merged into the tree's by path.
  void add(const RankOps& rank_ops, size_t file) {
    std::vector<int32_t> ids(rank_ops.nodes.size(), -1);
    for (size_t i = 0; i < rank_ops.nodes.size(); ++i) {
      const RankOpNode& local = rank_ops.nodes[i];
      int32_t parent = local.parent >= 0 ? ids[static_cast<size_t>(local.parent)] : -1;
      int32_t id = ids[i] = node(parent, local.name, local.inputs);
      OpNode& n = nodes_[static_cast<size_t>(id)];
      n.count += local.count;
      n.host_time_ns += local.host_time_ns;
      if (local.count > 0 && last_file_[static_cast<size_t>(id)] != file)
        ++n.ranks, last_file_[static_cast<size_t>(id)] = file;
      for (const OpKernel& kernel : local.kernels) {
        n.self_gpu_time_ns += kernel.time_ns;
        n.self_kernels += kernel.count;
        OpKernel& k = kernels_[static_cast<size_t>(id)].by_name[kernel.name];
        if (k.name.empty()) k.name = kernel.name;
        k.count += kernel.count;
        k.time_ns += kernel.time_ns;
      }
    }
  }

  std::vector<OpNode> finish(OpsResult& result) {
    // Children come after their parents, so one pass from the end sums each subtree.
    for (size_t i = nodes_.size(); i-- > 0;) {
      nodes_[i].gpu_time_ns += nodes_[i].self_gpu_time_ns;
      if (nodes_[i].parent >= 0) nodes_[static_cast<size_t>(nodes_[i].parent)].gpu_time_ns += nodes_[i].gpu_time_ns;
      std::vector<OpKernel> top;
      for (auto& [name, k] : kernels_[i].by_name) top.push_back(std::move(k));
      std::sort(top.begin(), top.end(), [](const OpKernel& a, const OpKernel& b) {
        return std::tie(b.time_ns, a.name) < std::tie(a.time_ns, b.name);
      });
      if (top.size() > OpNode::kTopKernels) top.resize(OpNode::kTopKernels);
      nodes_[i].top_kernels = std::move(top);
    }
    if (nodes_.size() <= OpsResult::kMaxNodes) return std::move(nodes_);
    std::vector<size_t> order(nodes_.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return std::tie(nodes_[b].gpu_time_ns, nodes_[b].host_time_ns, a) <
             std::tie(nodes_[a].gpu_time_ns, nodes_[a].host_time_ns, b);
    });
    std::vector<bool> keep(nodes_.size(), false);
    size_t kept = 0;
    for (size_t i : order) {
      // A path is kept with all its ancestors; stop before the bound would be passed.
      size_t added = 0;
      for (int32_t n = static_cast<int32_t>(i); n >= 0 && !keep[static_cast<size_t>(n)];
           n = nodes_[static_cast<size_t>(n)].parent)
        ++added;
      if (kept + added > OpsResult::kMaxNodes) continue;
      for (int32_t n = static_cast<int32_t>(i); n >= 0 && !keep[static_cast<size_t>(n)];
           n = nodes_[static_cast<size_t>(n)].parent)
        keep[static_cast<size_t>(n)] = true;
      kept += added;
    }
    std::vector<int32_t> renumbered(nodes_.size(), -1);
    std::vector<OpNode> out;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (!keep[i]) {
        ++result.nodes_left_out;
        result.left_out_self_gpu_time_ns += nodes_[i].self_gpu_time_ns;
        continue;
      }
      renumbered[i] = static_cast<int32_t>(out.size());
      OpNode n = std::move(nodes_[i]);
      if (n.parent >= 0) n.parent = renumbered[static_cast<size_t>(n.parent)];
      out.push_back(std::move(n));
    }
    return out;
  }

 private:
  std::map<std::tuple<int32_t, std::string, std::string>, int32_t> index_;
  std::vector<OpNode> nodes_;
  std::vector<NodeKernels> kernels_;
  // The last file whose tree added to each node, by index (two files of unknown rank are two ranks).
  static constexpr size_t kNoFile = ~size_t{0};
  std::vector<size_t> last_file_;
};

bool isKernel(model::ActivityKind kind) {
  return kind == model::ActivityKind::kCompute || kind == model::ActivityKind::kCommunication;
}

ResultValue resultValue(const OpsResult& result) {
  ResultValue nodes = ResultValue::array();
  for (const auto& n : result.nodes) {
    ResultValue kernels = ResultValue::array();
    for (const auto& k : n.top_kernels) {
      kernels.push(ResultValue::object()
                       .set("name", ResultValue::text(k.name))
                       .set("count", ResultValue::integer(static_cast<int64_t>(k.count)))
                       .set("time_ns", ResultValue::integer(k.time_ns)));
    }
    nodes.push(ResultValue::object()
                   .set("parent", n.parent >= 0 ? ResultValue::integer(n.parent) : ResultValue())
                   .set("name", ResultValue::text(n.name))
                   .set("inputs", n.inputs.empty() ? ResultValue() : ResultValue::text(n.inputs))
                   .set("count", ResultValue::integer(static_cast<int64_t>(n.count)))
                   .set("ranks", ResultValue::integer(n.ranks))
                   .set("host_time_ns", ResultValue::integer(n.host_time_ns))
                   .set("gpu_time_ns", ResultValue::integer(n.gpu_time_ns))
                   .set("self_gpu_time_ns", ResultValue::integer(n.self_gpu_time_ns))
                   .set("self_kernels", ResultValue::integer(static_cast<int64_t>(n.self_kernels)))
                   .set("top_kernels", std::move(kernels)));
  }
  auto count = [](uint64_t n) { return ResultValue::integer(static_cast<int64_t>(n)); };
  return ResultValue::object()
      .set("recorded", ResultValue::flag(result.recorded))
      .set("host_ranges", count(result.host_ranges))
      .set("kernels", count(result.kernels))
      .set("kernel_time_ns", ResultValue::integer(result.kernel_time_ns))
      .set("correlated_kernels", count(result.correlated_kernels))
      .set("correlated_time_ns", ResultValue::integer(result.correlated_time_ns))
      .set("outside_ranges_kernels", count(result.outside_ranges_kernels))
      .set("outside_ranges_time_ns", ResultValue::integer(result.outside_ranges_time_ns))
      .set("uncorrelated_kernels", count(result.uncorrelated_kernels))
      .set("uncorrelated_time_ns", ResultValue::integer(result.uncorrelated_time_ns))
      .set("nodes_left_out", count(result.nodes_left_out))
      .set("left_out_self_gpu_time_ns", ResultValue::integer(result.left_out_self_gpu_time_ns))
      .set("nodes", std::move(nodes));
}

std::string pathOf(const std::vector<OpNode>& nodes, size_t i) {
  std::string path = nodes[i].name;
  for (int32_t p = nodes[i].parent; p >= 0; p = nodes[static_cast<size_t>(p)].parent)
    path = nodes[static_cast<size_t>(p)].name + " > " + path;
  return path;
}

}  // namespace

RankOps opsOfRank(const model::RankTrace& rank) {
  RankOps out;
  std::vector<HostRange> ranges = hostRanges(rank);
  out.host_ranges = ranges.size();
  // Each range's node: its parent's node with its own folded name and inputs.
  std::map<std::tuple<int32_t, std::string, std::string>, int32_t> index;
  std::vector<std::unordered_map<std::string, OpKernel>> kernels;
  for (auto& r : ranges) {
    int32_t parent = r.parent >= 0 ? ranges[static_cast<size_t>(r.parent)].node : -1;
    // emit_nvtx's ranges carry their input shapes in the name; cpu_ops in inputs_id.
    RangeName recorded = splitRangeName(rank.name(r.name_id));
    std::string name = foldedRangeName(recorded.op);
    std::string inputs(r.inputs_id != 0 ? rank.name(r.inputs_id) : recorded.sizes);
    auto [it, added] = index.try_emplace(std::make_tuple(parent, name, inputs), static_cast<int32_t>(out.nodes.size()));
    if (added) {
      out.nodes.push_back({parent, std::move(name), std::move(inputs), 0, 0, {}});
      kernels.emplace_back();
    }
    r.node = it->second;
    RankOpNode& n = out.nodes[static_cast<size_t>(r.node)];
    ++n.count;
    n.host_time_ns += r.end_ns - r.start_ns;
  }
  // Where each thread's ranges begin and end in `ranges`.
  std::unordered_map<uint64_t, std::pair<size_t, size_t>> threads;
  for (size_t i = 0; i < ranges.size(); ++i) {
    auto [it, added] = threads.try_emplace(ranges[i].thread_id, i, i + 1);
    if (!added) it->second.second = i + 1;
  }
  // Kernels come mostly from one launching thread: its entry is looked up once per change.
  std::optional<std::pair<uint64_t, decltype(threads)::const_iterator>> last_thread;
  for (const auto& a : rank.activities) {
    if (!isKernel(a.kind)) continue;
    ++out.kernels;
    out.kernel_time_ns += a.duration();
    const model::HostCall* launch = a.correlation_id != 0 ? rank.launchOf(a.correlation_id) : nullptr;
    if (launch == nullptr || launch->correlation_id != a.correlation_id) {
      ++out.uncorrelated_kernels;
      out.uncorrelated_time_ns += a.duration();
      continue;
    }
    ++out.correlated_kernels;
    out.correlated_time_ns += a.duration();
    uint64_t thread = launch->thread < rank.threads.size() ? rank.threads[launch->thread] : 0;
    if (!last_thread || last_thread->first != thread) last_thread = {thread, threads.find(thread)};
    auto it = last_thread->second;
    int32_t range =
        it == threads.end() ? -1 : innermostAt(ranges, it->second.first, it->second.second, launch->start_ns);
    if (range < 0) {
      ++out.outside_ranges_kernels;
      out.outside_ranges_time_ns += a.duration();
      continue;
    }
    std::string_view name = rank.name(a.name_id);
    OpKernel& k = kernels[static_cast<size_t>(ranges[static_cast<size_t>(range)].node)][std::string(name)];
    if (k.name.empty()) k.name = name;
    ++k.count;
    k.time_ns += a.duration();
  }
  for (size_t i = 0; i < out.nodes.size(); ++i) {
    for (auto& [name, k] : kernels[i]) out.nodes[i].kernels.push_back(std::move(k));
    std::sort(out.nodes[i].kernels.begin(), out.nodes[i].kernels.end(),
              [](const OpKernel& a, const OpKernel& b) { return a.name < b.name; });
  }
  return out;
}

OpsResult computeOps(const AnalysisInput& input) {
  OpsResult result;
  TreeBuilder tree;
  for (size_t r = 0; r < input.run.ranks.size(); ++r) {
    const RankOps& rank_ops = input.digest(r).ops;
    result.host_ranges += rank_ops.host_ranges;
    result.kernels += rank_ops.kernels;
    result.kernel_time_ns += rank_ops.kernel_time_ns;
    result.correlated_kernels += rank_ops.correlated_kernels;
    result.correlated_time_ns += rank_ops.correlated_time_ns;
    result.outside_ranges_kernels += rank_ops.outside_ranges_kernels;
    result.outside_ranges_time_ns += rank_ops.outside_ranges_time_ns;
    result.uncorrelated_kernels += rank_ops.uncorrelated_kernels;
    result.uncorrelated_time_ns += rank_ops.uncorrelated_time_ns;
    tree.add(rank_ops, r);
  }
  result.recorded = result.host_ranges > 0;
  result.nodes = tree.finish(result);
  return result;
}

void presentOps(const OpsResult& result, size_t top, report::Report& report) {
  auto& section = report.addSection("ops", "Op tree: the kernels each host range launched");
  report.addResult("ops", [&] { return resultValue(result); });
  if (!result.recorded) {
    section.notes.push_back(
        "No host ranges in the trace (NVTX or record_function ranges, the PyTorch profiler's cpu_ops).");
    return;
  }
  auto pct = [&](int64_t ns) {
    return result.kernel_time_ns > 0 ? 100.0 * static_cast<double>(ns) / static_cast<double>(result.kernel_time_ns)
                                     : 0.0;
  };
  section.notes.push_back(
      fmt::format("{} host ranges, all ranks; of the kernels' GPU time {:.1f} % was launched inside a range, {:.1f} % "
                  "outside every "
                  "range, {:.1f} % has no launch call with its correlation id.",
                  result.host_ranges, pct(result.correlated_time_ns - result.outside_ranges_time_ns),
                  pct(result.outside_ranges_time_ns), pct(result.uncorrelated_time_ns)));
  std::vector<size_t> order(result.nodes.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::tie(result.nodes[b].self_gpu_time_ns, a) < std::tie(result.nodes[a].self_gpu_time_ns, b);
  });
  report::Table paths{"paths",
                      "Op paths whose own kernels take the most GPU time (all ranks)",
                      {{"path", "op path"},
                       {"inputs", "inputs"},
                       {"count", "count"},
                       {"host_time", "host time"},
                       {"self_gpu_time", "GPU time (own kernels)"},
                       {"gpu_time", "GPU time (with children)"},
                       {"top_kernel", "top kernel"}},
                      {}};
  for (size_t i = 0; i < order.size() && i < top; ++i) {
    const OpNode& n = result.nodes[order[i]];
    if (n.self_gpu_time_ns == 0) break;
    paths.rows.push_back({Cell::of(pathOf(result.nodes, order[i])), Cell::of(n.inputs),
                          Cell::of(static_cast<double>(n.count), Unit::kCount),
                          Cell::of(static_cast<double>(n.host_time_ns), Unit::kNanoseconds),
                          Cell::of(static_cast<double>(n.self_gpu_time_ns), Unit::kNanoseconds),
                          Cell::of(static_cast<double>(n.gpu_time_ns), Unit::kNanoseconds),
                          Cell::of(n.top_kernels.empty() ? std::string() : n.top_kernels.front().name)});
  }
  section.tables.push_back(std::move(paths));
}

void analyzeOps(const AnalysisInput& input, report::Report& report) {
  presentOps(computeOps(input), input.options.top, report);
}

}  // namespace gpuxray::analysis
