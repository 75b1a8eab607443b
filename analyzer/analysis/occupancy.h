// Theoretical occupancy of a kernel launch, by the rules of CUDA's occupancy calculator
// (cuda_occupancy.h): how many blocks of this shape fit on one SM at once, and what limits them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "analyzer/model/run_trace.h"
#include "proto/records.h"

namespace gpuxray::analysis {

enum class OccupancyLimit { kWarps, kRegisters, kSharedMemory, kBlocks, kUnknown };
const char* occupancyLimitName(OccupancyLimit limit);

struct Occupancy {
  uint32_t blocks_per_sm = 0;
  double occupancy = 0;  // active warps / max warps per SM, 0-1
  OccupancyLimit limit = OccupancyLimit::kUnknown;
  uint64_t waves = 0;
  // Share of the SMs' block slots the launch fills over its waves (1 = every wave full).
  double wave_efficiency = 0;
};

// Whether the trace recorded the launch's shape (grid and block); ROCm traces and some others do not.
bool launchRecorded(const model::LaunchConfig& launch);

// AMD GPUs (64-wide wavefronts, or named so): CUDA's occupancy rules do not apply, and their
// multiprocessors are compute units.
bool isAmdDevice(const format::DeviceProperties& device);
// "SMs" or "CUs", as the vendor calls them.
const char* multiprocessorsName(const format::DeviceProperties* device);

// Zero blocks_per_sm when the device lacks what the rules need, or the block cannot run at all.
Occupancy theoreticalOccupancy(const model::LaunchConfig& launch, const format::DeviceProperties& device);

// What would lift the limiter: the limiting resource's value today and the value at which more blocks
// fit on each SM ("168 registers/thread -> <= 128 fits 2 blocks per SM"), by the same rules.
struct OccupancyLift {
  OccupancyLimit limit = OccupancyLimit::kUnknown;  // the resource to change
  uint64_t from = 0;                                // registers/thread, shared memory bytes/block, or threads/block
  // registers and shared memory: at most this; block size: this many threads per block (fewer when
  // warps limit, more when the blocks-per-SM cap does).
  uint64_t to = 0;
  uint32_t blocks_per_sm = 0;  // blocks per SM at `to`
  double occupancy = 0;        // theoretical occupancy at `to`, 0-1
};
struct OccupancyLiftResult {
  std::optional<OccupancyLift> lift;  // nullopt: changing the limiter alone fits no more warps
  // Why not, when nullopt: another limit binds as tightly (kUnknown when the SM is already full).
  OccupancyLimit also_limited_by = OccupancyLimit::kUnknown;
  bool full = false;  // the SM already holds the most warps it can
};
// Only for launches theoreticalOccupancy estimates (recorded, NVIDIA, device known).
OccupancyLiftResult occupancyLift(const model::LaunchConfig& launch, const format::DeviceProperties& device);
// The lift in words, for the report and the X-ray alike.
std::string occupancyLiftSentence(const OccupancyLiftResult& lift, OccupancyLimit limit);

}  // namespace gpuxray::analysis
