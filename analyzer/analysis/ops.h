// The op tree (docs/analyses.md, "Op tree"): the host ranges of every rank (NVTX and
// record_function ranges, PyTorch-profiler cpu_ops with their input shapes and types) nested per
// thread, merged across ranks by path, with the GPU time of the kernels each launched: a kernel
// belongs to the innermost range open on its launch call's thread when that call began (the call
// whose correlation id the kernel carries).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analyzer/analysis/analysis_input.h"
#include "analyzer/report/report.h"

namespace gpuxray::analysis {

struct OpKernel {
  std::string name;  // in full, as the kernels result names it
  uint64_t count = 0;
  int64_t time_ns = 0;
};

// One op path: the same name and inputs under the same parent path, all instances on all ranks.
struct OpNode {
  int32_t parent = -1;  // index into OpsResult::nodes; -1 for a root
  std::string name;     // folded (range_names.h): "ProfilerStep#N", "forward#N", "aten::linear"
  std::string inputs;   // "float[512, 1024], Scalar", an emit_nvtx range's sizes; empty when not recorded
  uint64_t count = 0;   // instances
  uint32_t ranks = 0;   // ranks it appears on
  int64_t host_time_ns = 0;
  int64_t gpu_time_ns = 0;       // its kernels and those of everything under it
  int64_t self_gpu_time_ns = 0;  // the kernels launched directly inside it
  uint64_t self_kernels = 0;
  std::vector<OpKernel> top_kernels;  // of its own, most time first, at most kTopKernels
  static constexpr size_t kTopKernels = 5;
};

struct OpsResult {
  bool recorded = false;  // any host range
  uint64_t host_ranges = 0;
  uint64_t kernels = 0;
  int64_t kernel_time_ns = 0;  // every kernel, all ranks
  // Kernels whose launch call was found (by correlation id), and of those the ones launched
  // outside every range.
  uint64_t correlated_kernels = 0;
  int64_t correlated_time_ns = 0;
  uint64_t outside_ranges_kernels = 0;
  int64_t outside_ranges_time_ns = 0;
  uint64_t uncorrelated_kernels = 0;  // no launch call with the kernel's correlation id
  int64_t uncorrelated_time_ns = 0;
  // Parents before children; past kMaxNodes, the paths with the most GPU time (then host time)
  // and their ancestors.
  std::vector<OpNode> nodes;
  uint64_t nodes_left_out = 0;
  int64_t left_out_self_gpu_time_ns = 0;
  static constexpr size_t kMaxNodes = 2000;
};

// One rank's op tree (its per-rank phase): its own nodes in order of first appearance, each with
// its instances and the kernels launched directly inside it, and its kernel counts; the ranks'
// trees are merged by path across ranks.
struct RankOpNode {
  int32_t parent = -1;  // index into RankOps::nodes
  std::string name;
  std::string inputs;
  uint64_t count = 0;
  int64_t host_time_ns = 0;
  std::vector<OpKernel> kernels;  // by name
};

struct RankOps {
  uint64_t host_ranges = 0;
  uint64_t kernels = 0;
  int64_t kernel_time_ns = 0;
  uint64_t correlated_kernels = 0;
  int64_t correlated_time_ns = 0;
  uint64_t outside_ranges_kernels = 0;
  int64_t outside_ranges_time_ns = 0;
  uint64_t uncorrelated_kernels = 0;
  int64_t uncorrelated_time_ns = 0;
  std::vector<RankOpNode> nodes;
};

RankOps opsOfRank(const model::RankTrace& rank);
OpsResult computeOps(const AnalysisInput& input);
void presentOps(const OpsResult& result, size_t top, report::Report& report);

}  // namespace gpuxray::analysis
