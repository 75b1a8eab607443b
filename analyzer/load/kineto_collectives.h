// What PyTorch-profiler traces say about NCCL collectives, in NCCL's own terms: the function,
// algorithm and protocol in a kernel's name (ncclKernel_AllReduce_RING_LL_Sum_float,
// ncclDevKernel_AllGather_RING_LL, RCCL's ncclDevKernel_Generic), the function behind PyTorch's
// collective names ("allreduce", "_allgather_base", ...), element sizes of PyTorch's dtype names,
// and process-group rank lists ("[0, 1, 2]").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gpuxray::load {

struct NcclKernelName {
  std::string function;   // "AllReduce", "SendRecv", "Generic"...; empty: not an NCCL kernel name
  std::string algorithm;  // "RING", "TREE", "NVLS_TREE"...; may be empty
  std::string protocol;   // "LL", "LL128", "SIMPLE"; may be empty
};

NcclKernelName parseNcclKernelName(std::string_view name);

// NCCL's function for a PyTorch collective name; "" when it names none.
std::string_view ncclFunctionOfCollective(std::string_view collective);

// Bytes per element of a PyTorch dtype name ("Float", "BFloat16", "c10::Half", ...); 0 if unknown.
uint32_t dtypeSize(std::string_view dtype);

// "[0, 1, 2]" -> {0, 1, 2}; malformed items are skipped.
std::vector<int32_t> parseRankList(std::string_view text);

// The communicator hash gpuxray gives a PyTorch process group: the same on every rank.
uint64_t processGroupHash(std::string_view group_name);

}  // namespace gpuxray::load
