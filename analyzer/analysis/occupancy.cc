#include "analyzer/analysis/occupancy.h"

#include <algorithm>
#include <initializer_list>
#include <string>

namespace gpuxray::analysis {
namespace {

constexpr uint32_t kReservedSharedMemory = 1024;  // per block, on CC 8.0 and newer

uint64_t roundUp(uint64_t value, uint64_t to) { return (value + to - 1) / to * to; }

// The most resident blocks per SM the architecture allows.
uint32_t blockCap(const format::DeviceProperties& d) {
  if (d.max_blocks_per_sm > 0) return d.max_blocks_per_sm;
  uint32_t cc = d.compute_major * 10 + d.compute_minor;
  if (cc == 80 || cc == 90 || cc == 100) return 32;
  if (cc == 86 || cc == 87) return 16;
  return 24;
}

}  // namespace

const char* occupancyLimitName(OccupancyLimit limit) {
  switch (limit) {
    case OccupancyLimit::kWarps: return "warps";
    case OccupancyLimit::kRegisters: return "registers";
    case OccupancyLimit::kSharedMemory: return "shared memory";
    case OccupancyLimit::kBlocks: return "blocks per SM";
    case OccupancyLimit::kUnknown: return "unknown";
  }
  return "unknown";
}

bool launchRecorded(const model::LaunchConfig& launch) {
  return launch.blocks() > 0 && launch.threadsPerBlock() > 0;
}

bool isAmdDevice(const format::DeviceProperties& device) {
  return device.warp_size == 64 || device.name.find("AMD") != std::string::npos ||
         device.name.find("Instinct") != std::string::npos || device.name.find("Radeon") != std::string::npos;
}

const char* multiprocessorsName(const format::DeviceProperties* device) {
  return device != nullptr && isAmdDevice(*device) ? "CUs" : "SMs";
}

Occupancy theoreticalOccupancy(const model::LaunchConfig& launch, const format::DeviceProperties& device) {
  Occupancy result;
  if (!launchRecorded(launch) || isAmdDevice(device)) return result;
  const uint32_t warp_size = device.warp_size > 0 ? device.warp_size : 32;
  const uint32_t max_threads = device.max_threads_per_sm > 0 ? device.max_threads_per_sm
                                                             : device.max_warps_per_sm * warp_size;
  const uint32_t threads = launch.threadsPerBlock();
  if (threads == 0 || max_threads == 0 || device.registers_per_sm == 0 || device.sm_count == 0) return result;
  const uint32_t max_warps = max_threads / warp_size;
  const uint32_t warps_per_block = (threads + warp_size - 1) / warp_size;

  uint32_t by_warps = max_warps / warps_per_block;

  uint32_t by_registers = by_warps;
  if (launch.registers_per_thread > 0) {
    uint64_t registers_per_warp = roundUp(uint64_t{launch.registers_per_thread} * warp_size, 256);
    uint64_t registers_per_block = registers_per_warp * warps_per_block;
    bool too_many = launch.registers_per_thread > 255 ||
                    (device.registers_per_block > 0 && registers_per_block > device.registers_per_block);
    uint64_t warps_by_registers = (device.registers_per_sm / 4 / registers_per_warp) * 4;
    by_registers = too_many ? 0 : static_cast<uint32_t>(warps_by_registers / warps_per_block);
  }

  uint32_t by_shared = by_warps;
  uint64_t shared_per_block = roundUp(uint64_t{launch.shared_memory_bytes} + kReservedSharedMemory, 128);
  if (device.shared_memory_per_sm > 0) {
    uint64_t block_limit = std::max<uint64_t>(device.shared_memory_per_block_optin, device.shared_memory_per_block) +
                           kReservedSharedMemory;
    by_shared = shared_per_block > block_limit ? 0 : static_cast<uint32_t>(device.shared_memory_per_sm / shared_per_block);
  }

  uint32_t by_blocks = blockCap(device);
  result.blocks_per_sm = std::min({by_warps, by_registers, by_shared, by_blocks});
  result.limit = result.blocks_per_sm == by_warps       ? OccupancyLimit::kWarps
                 : result.blocks_per_sm == by_registers ? OccupancyLimit::kRegisters
                 : result.blocks_per_sm == by_shared    ? OccupancyLimit::kSharedMemory
                                                        : OccupancyLimit::kBlocks;
  if (result.blocks_per_sm == 0) return result;
  result.occupancy = static_cast<double>(result.blocks_per_sm * warps_per_block) / static_cast<double>(max_warps);
  uint64_t slots = uint64_t{result.blocks_per_sm} * device.sm_count;
  uint64_t blocks = launch.blocks();
  result.waves = blocks == 0 ? 0 : (blocks + slots - 1) / slots;
  result.wave_efficiency = result.waves == 0 ? 0 : static_cast<double>(blocks) / static_cast<double>(result.waves * slots);
  return result;
}

}  // namespace gpuxray::analysis
