// Writes a simulated run as the trace files a real capture of it would leave: one per rank, with a
// header that says it is simulated and with which inputs, the topology (device, NVLink, PCIe,
// NICs), kernels with their launches, NVTX step and forward/backward ranges, memory allocations
// and frees as PyTorch makes them (weights before the first step, gradients at the first backward,
// optimizer state at the first optimizer step, activations from forward to backward, recomputed
// activations one layer at a time), NCCL communicators and operations (tensor-parallel collectives, pipeline sends and
// receives, data-parallel reductions) and the network transfers of every operation that leaves a
// node.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "analyzer/model/memory_category.h"
#include "analyzer/simulate/cost_model.h"
#include "analyzer/simulate/engine.h"
#include "analyzer/simulate/layout.h"

namespace gpuxray::simulate {

// 2025-11-29 10:00:00 UTC, the clock every simulated run starts from.
inline constexpr uint64_t kSimulatedEpochNs = 1'764'410'400'000'000'000ull;

struct GenerationOptions {
  std::string directory;
  unsigned threads = 0;  // 0: one per core
  std::vector<std::string> command_line;
  // Write only these ranks' files (empty: all).
  std::vector<int> ranks;
  // Called after each file with (files done, files in all).
  std::function<void(size_t, size_t)> progress;
  // Called for each allocation written with (rank, address, what it holds), from the writing threads:
  // the truth the memory-categories analysis is tested against.
  std::function<void(int, uint64_t, model::MemoryCategory)> allocation_category;
};

struct GenerationResult {
  size_t files = 0;
  uint64_t records = 0;
  uint64_t bytes = 0;
};

// Throws InputError when a file cannot be written.
GenerationResult writeTraces(const CostModel& cost, const Layout& layout, const Timeline& timeline,
                             const GenerationOptions& options);

}  // namespace gpuxray::simulate
