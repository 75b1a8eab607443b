// What a block of device memory holds, in PyTorch's terms (its memory profiler's categories, merged
// where a trace cannot tell them apart). The memory-categories analysis infers it from lifetimes;
// the simulator knows it for what it allocates.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace gpuxray::model {

enum class MemoryCategory : uint8_t { kParameters, kGradients, kOptimizerState, kActivations, kTemporaries, kOther };

inline constexpr size_t kMemoryCategories = 6;

// "parameters", "gradients", "optimizer_state", "activations", "temporaries", "other".
inline std::string_view memoryCategoryName(MemoryCategory category) {
  constexpr std::array<std::string_view, kMemoryCategories> kNames = {"parameters",  "gradients",   "optimizer_state",
                                                                      "activations", "temporaries", "other"};
  return kNames[static_cast<size_t>(category)];
}

}  // namespace gpuxray::model
