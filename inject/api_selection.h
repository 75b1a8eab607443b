// Which runtime and driver API calls are worth a record. Launches, copies, memsets, allocations and
// synchronization explain the timeline; calls that frameworks make by the million to ask questions
// (cudaGetDevice, cudaGetLastError, capture-state queries) only cost time and space.
#pragma once

#include <string_view>

namespace gpuxray::inject {

// Runtime calls are recorded unless they are among the hot queries.
bool isTracedRuntimeApi(std::string_view name);
// Driver calls are recorded only for what applications and compilers (Triton, CUTLASS) call
// directly: launches, graph launches, copies, memsets, allocations, synchronization.
bool isTracedDriverApi(std::string_view name);

}  // namespace gpuxray::inject
