// Device memory by what it holds (docs/analyses.md, "Memory by category"): each allocation's
// category (parameters, gradients, optimizer state, activations, temporaries, other) inferred from
// its lifetime against the steps and the forward / backward / recompute / optimizer ranges, and per
// rank and device the stacked curve and what each category held at the peak. Kineto's traces carry
// no categories of their own (PyTorch's memory profiler derives its categories from the autograd
// graph, which the trace does not hold), so these are the same inference for every source.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "analyzer/analysis/analysis_input.h"
#include "analyzer/model/memory_category.h"
#include "analyzer/report/report.h"

namespace gpuxray::analysis {

using CategoryBytes = std::array<int64_t, model::kMemoryCategories>;

// What a step is doing at an instant, from the names of the ranges open then.
enum class MemoryPhase : uint8_t { kOutsideSteps, kForward, kBackward, kRecompute, kOptimizer, kUnclassified };
std::string_view memoryPhaseName(MemoryPhase phase);

// One allocation of a device and what it was found to hold.
struct CategorizedAllocation {
  int64_t allocated_ns = 0;
  int64_t released_ns = -1;  // -1: still allocated at the end of the capture
  int64_t bytes = 0;
  uint64_t address = 0;
  uint32_t device = 0;
  model::MemoryCategory category = model::MemoryCategory::kOther;
};

// Bytes in use per category on one device right after a change, on the run clock.
struct CategoryPoint {
  int64_t time_ns = 0;
  CategoryBytes bytes{};
  int64_t total() const;
};

struct DeviceMemoryCategories {
  int32_t rank = -1;
  uint32_t device = 0;
  // The same peak as the memory analysis's (the first change that reaches the highest level).
  int64_t peak_bytes = 0;
  int64_t peak_at_ns = 0;
  CategoryBytes at_peak{};  // sums to peak_bytes
  MemoryPhase peak_phase = MemoryPhase::kOutsideSteps;
  int64_t peak_step = -1;  // the step's number; -1 outside the steps
  std::array<uint64_t, model::kMemoryCategories> allocations{};
  // Bytes released that no allocation seen accounts for (allocated before the capture, or no
  // address recorded); counted in `other`, which may then go below zero.
  int64_t unmatched_release_bytes = 0;
  // The levels after each change; past kMaxCurvePoints, of each run of consecutive changes the one
  // with the highest total (so the peak is a point), as the memory analysis thins its curve.
  std::vector<CategoryPoint> curve;
};

struct MemoryCategoriesResult {
  bool recorded = false;                        // any device memory change
  bool addresses_recorded = false;              // allocations and releases can be paired
  bool phases_recorded = false;                 // some forward, backward, recompute or optimizer range exists
  int64_t origin_ns = 0;                        // as the memory analysis's
  std::vector<DeviceMemoryCategories> devices;  // by rank (run order), then device id
};

// Per rank in run order: each allocation with its category, in allocation order.
std::vector<std::vector<CategorizedAllocation>> categorizeAllocations(const AnalysisInput& input);
MemoryCategoriesResult computeMemoryCategories(const AnalysisInput& input);
// `top`: past twice as many devices, the table lists the `top` with the highest peak.
void presentMemoryCategories(const MemoryCategoriesResult& result, size_t top, report::Report& report);

}  // namespace gpuxray::analysis
