#include "analyzer/analysis/occupancy.h"

#include <fmt/format.h>

#include <algorithm>
#include <initializer_list>
#include <optional>
#include <string>

namespace gpuxray::analysis {
namespace {

constexpr uint32_t kReservedSharedMemory = 1024;  // per block, on CC 8.0 and newer

uint64_t roundUp(uint64_t value, uint64_t to) {
  return (value + to - 1) / to * to;
}

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
    case OccupancyLimit::kWarps:
      return "warps";
    case OccupancyLimit::kRegisters:
      return "registers";
    case OccupancyLimit::kSharedMemory:
      return "shared memory";
    case OccupancyLimit::kBlocks:
      return "blocks per SM";
    case OccupancyLimit::kUnknown:
      return "unknown";
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

namespace {

// Blocks per SM each resource allows on its own, by cuda_occupancy.h's rules.
struct ResourceLimits {
  uint32_t warps_per_block = 0, max_warps = 0;
  uint32_t by_warps = 0, by_registers = 0, by_shared = 0, by_blocks = 0;
};

std::optional<ResourceLimits> resourceLimits(const model::LaunchConfig& launch,
                                             const format::DeviceProperties& device) {
  if (!launchRecorded(launch) || isAmdDevice(device)) return std::nullopt;
  const uint32_t warp_size = device.warp_size > 0 ? device.warp_size : 32;
  const uint32_t max_threads =
      device.max_threads_per_sm > 0 ? device.max_threads_per_sm : device.max_warps_per_sm * warp_size;
  const uint32_t threads = launch.threadsPerBlock();
  if (threads == 0 || max_threads == 0 || device.registers_per_sm == 0 || device.sm_count == 0) return std::nullopt;
  ResourceLimits l;
  l.max_warps = max_threads / warp_size;
  l.warps_per_block = (threads + warp_size - 1) / warp_size;
  l.by_warps = l.max_warps / l.warps_per_block;

  l.by_registers = l.by_warps;
  if (launch.registers_per_thread > 0) {
    uint64_t registers_per_warp = roundUp(uint64_t{launch.registers_per_thread} * warp_size, 256);
    uint64_t registers_per_block = registers_per_warp * l.warps_per_block;
    bool too_many = launch.registers_per_thread > 255 ||
                    (device.registers_per_block > 0 && registers_per_block > device.registers_per_block);
    uint64_t warps_by_registers = (device.registers_per_sm / 4 / registers_per_warp) * 4;
    l.by_registers = too_many ? 0 : static_cast<uint32_t>(warps_by_registers / l.warps_per_block);
  }

  l.by_shared = l.by_warps;
  uint64_t shared_per_block = roundUp(uint64_t{launch.shared_memory_bytes} + kReservedSharedMemory, 128);
  if (device.shared_memory_per_sm > 0) {
    uint64_t block_limit = std::max<uint64_t>(device.shared_memory_per_block_optin, device.shared_memory_per_block) +
                           kReservedSharedMemory;
    l.by_shared =
        shared_per_block > block_limit ? 0 : static_cast<uint32_t>(device.shared_memory_per_sm / shared_per_block);
  }
  l.by_blocks = blockCap(device);
  return l;
}

model::LaunchConfig withThreadsPerBlock(model::LaunchConfig launch, uint32_t threads) {
  launch.block_x = threads;
  launch.block_y = 1;
  launch.block_z = 1;
  return launch;
}

}  // namespace

Occupancy theoreticalOccupancy(const model::LaunchConfig& launch, const format::DeviceProperties& device) {
  Occupancy result;
  std::optional<ResourceLimits> l = resourceLimits(launch, device);
  if (!l) return result;
  result.blocks_per_sm = std::min({l->by_warps, l->by_registers, l->by_shared, l->by_blocks});
  result.limit = result.blocks_per_sm == l->by_warps       ? OccupancyLimit::kWarps
                 : result.blocks_per_sm == l->by_registers ? OccupancyLimit::kRegisters
                 : result.blocks_per_sm == l->by_shared    ? OccupancyLimit::kSharedMemory
                                                           : OccupancyLimit::kBlocks;
  if (result.blocks_per_sm == 0) return result;
  result.occupancy = static_cast<double>(result.blocks_per_sm * l->warps_per_block) / static_cast<double>(l->max_warps);
  uint64_t slots = uint64_t{result.blocks_per_sm} * device.sm_count;
  uint64_t blocks = launch.blocks();
  result.waves = blocks == 0 ? 0 : (blocks + slots - 1) / slots;
  result.wave_efficiency =
      result.waves == 0 ? 0 : static_cast<double>(blocks) / static_cast<double>(result.waves * slots);
  return result;
}

OccupancyLiftResult occupancyLift(const model::LaunchConfig& launch, const format::DeviceProperties& device) {
  OccupancyLiftResult answer;
  std::optional<ResourceLimits> l = resourceLimits(launch, device);
  if (!l) return answer;
  const Occupancy now = theoreticalOccupancy(launch, device);
  const uint32_t warp_size = device.warp_size > 0 ? device.warp_size : 32;
  auto lifted = [&](OccupancyLimit limit, uint64_t from, uint64_t to, const model::LaunchConfig& changed) {
    Occupancy then = theoreticalOccupancy(changed, device);
    answer.lift = OccupancyLift{limit, from, to, then.blocks_per_sm, then.occupancy};
  };
  switch (now.limit) {
    case OccupancyLimit::kRegisters: {
      // Fewer registers: the most per thread at which one more block fits.
      for (uint32_t registers = std::min<uint32_t>(launch.registers_per_thread, 256) - 1; registers > 0; --registers) {
        model::LaunchConfig changed = launch;
        changed.registers_per_thread = registers;
        if (theoreticalOccupancy(changed, device).blocks_per_sm > now.blocks_per_sm) {
          lifted(now.limit, launch.registers_per_thread, registers, changed);
          return answer;
        }
      }
      break;
    }
    case OccupancyLimit::kSharedMemory: {
      // Blocks fitted fall as shared memory grows: the largest size that fits one more block.
      auto fitsMore = [&](uint32_t bytes) {
        model::LaunchConfig changed = launch;
        changed.shared_memory_bytes = bytes;
        return theoreticalOccupancy(changed, device).blocks_per_sm > now.blocks_per_sm;
      };
      if (launch.shared_memory_bytes == 0 || !fitsMore(0)) break;
      uint32_t low = 0, high = launch.shared_memory_bytes;  // fitsMore(low), !fitsMore(high)
      while (high - low > 1) {
        uint32_t middle = low + (high - low) / 2;
        (fitsMore(middle) ? low : high) = middle;
      }
      model::LaunchConfig changed = launch;
      changed.shared_memory_bytes = low;
      lifted(now.limit, launch.shared_memory_bytes, low, changed);
      return answer;
    }
    case OccupancyLimit::kWarps:
    case OccupancyLimit::kBlocks: {
      if (now.blocks_per_sm * l->warps_per_block == l->max_warps) {
        answer.full = true;
        return answer;
      }
      // Warps limit whole blocks: a smaller block packs the SM fuller. The blocks-per-SM cap: a larger
      // block brings more warps per slot. The block size (whole warps) with the highest occupancy in
      // that direction, the nearest of equals.
      const uint32_t max_block_warps =
          (device.max_threads_per_block > 0 ? device.max_threads_per_block : 1024) / warp_size;
      const bool smaller = now.limit == OccupancyLimit::kWarps;
      uint32_t best_warps = 0;
      double best = now.occupancy + 1e-9;
      for (uint32_t warps = smaller ? l->warps_per_block - 1 : l->warps_per_block + 1;
           warps > 0 && warps <= max_block_warps; smaller ? --warps : ++warps) {
        double occupancy = theoreticalOccupancy(withThreadsPerBlock(launch, warps * warp_size), device).occupancy;
        if (occupancy > best + 1e-9) {
          best = occupancy;
          best_warps = warps;
        }
      }
      if (best_warps > 0) {
        lifted(now.limit, launch.threadsPerBlock(), best_warps * warp_size,
               withThreadsPerBlock(launch, best_warps * warp_size));
        return answer;
      }
      break;
    }
    case OccupancyLimit::kUnknown:
      return answer;
  }
  // The limiter alone does not lift it: another resource allows no more blocks.
  if (l->by_registers == now.blocks_per_sm && now.limit != OccupancyLimit::kRegisters)
    answer.also_limited_by = OccupancyLimit::kRegisters;
  else if (l->by_shared == now.blocks_per_sm && now.limit != OccupancyLimit::kSharedMemory)
    answer.also_limited_by = OccupancyLimit::kSharedMemory;
  else if (l->by_blocks == now.blocks_per_sm && now.limit != OccupancyLimit::kBlocks)
    answer.also_limited_by = OccupancyLimit::kBlocks;
  else if (l->by_warps == now.blocks_per_sm && now.limit != OccupancyLimit::kWarps)
    answer.also_limited_by = OccupancyLimit::kWarps;
  return answer;
}

std::string occupancyLiftSentence(const OccupancyLiftResult& lift, OccupancyLimit limit) {
  if (lift.full) return "the SMs already hold the most warps they can: nothing to lift";
  if (!lift.lift) {
    if (lift.also_limited_by == OccupancyLimit::kUnknown)
      return fmt::format("no change of {} alone fits more warps", occupancyLimitName(limit));
    return fmt::format("{} and {} limit it alike: changing one alone fits no more blocks", occupancyLimitName(limit),
                       occupancyLimitName(lift.also_limited_by));
  }
  const OccupancyLift& l = *lift.lift;
  std::string then = fmt::format("{} block{} per SM, {:.1f} % occupancy", l.blocks_per_sm,
                                 l.blocks_per_sm == 1 ? "" : "s", 100.0 * l.occupancy);
  switch (l.limit) {
    case OccupancyLimit::kRegisters:
      return fmt::format("{} registers/thread -> <= {} fits {}", l.from, l.to, then);
    case OccupancyLimit::kSharedMemory:
      return fmt::format("{} B shared memory/block -> <= {} B fits {}", l.from, l.to, then);
    default:
      return fmt::format("{} threads/block -> {} fits {}", l.from, l.to, then);
  }
}

}  // namespace gpuxray::analysis
