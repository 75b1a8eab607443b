// NCCL's accounting of a collective, in one place for the analyses, the timeline export and the
// simulator (docs/analyses.md, "NCCL conventions"). An operation's `bytes` are NCCL's API count x
// the type size, the model's NcclOp::bytes: for AllGather what one rank sends, for ReduceScatter what
// one rank receives, for Gather and Scatter one rank's share, for AlltoAll everything one rank sends
// (PyTorch's and the simulator's size of it), for the rest the buffer. From those bytes and the
// number of ranks n, as nccl-tests reports bandwidth:
//   data size  = bytes x n for AllGather, ReduceScatter, Gather and Scatter; bytes otherwise
//   algbw      = data size / time
//   busbw      = algbw x factor: 2(n-1)/n AllReduce; (n-1)/n AllGather, ReduceScatter, AlltoAll,
//                Gather, Scatter; 1 Broadcast, Reduce, Send, Recv, SendRecv (and unknown functions)
// and the bytes each rank puts on its busiest link, data size x factor, are for NCCL's ring
// algorithms what a rank sends to its ring successor.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace gpuxray::model {

enum class NcclFunction : uint8_t {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kBroadcast,
  kReduce,
  kAlltoAll,
  kGather,
  kScatter,
  kSend,
  kRecv,
  kSendRecv,
  kOther,  // a name NCCL's profiler does not give (a user's communication kernel, a missing name)
};

// By the name NCCL's profiler gives ("AllReduce", "AlltoAll"; "AllToAll" too).
NcclFunction ncclFunction(std::string_view name);

// nccl-tests' accounting of one operation.
struct BusBandwidthRule {
  double data_bytes = 0;  // what algbw divides by the time
  double factor = 1;      // busbw / algbw

  double busBytes() const { return data_bytes * factor; }
  // Bytes per second for an operation that took `ns` (> 0).
  double algbw(int64_t ns) const { return data_bytes / (static_cast<double>(ns) * 1e-9); }
  double busbw(int64_t ns) const { return busBytes() / (static_cast<double>(ns) * 1e-9); }
};

// nullopt when the number of ranks is not known (below 1): the size and factor depend on it.
std::optional<BusBandwidthRule> busBandwidthRule(NcclFunction function, uint64_t bytes, int32_t nranks);
inline std::optional<BusBandwidthRule> busBandwidthRule(std::string_view function, uint64_t bytes, int32_t nranks) {
  return busBandwidthRule(ncclFunction(function), bytes, nranks);
}

// What one rank sends to its ring successor for a collective on a ring (AllReduce, AllGather,
// ReduceScatter, Broadcast, Reduce; about the buffer per hop for the last two), or nullopt for what
// a ring does not describe or an unknown number of ranks.
std::optional<double> ringBytesPerLink(NcclFunction function, uint64_t bytes, int32_t nranks);

// The ring's sequential steps, each paying the link's latency: 2(n-1) for AllReduce, n-1 otherwise.
double ringSteps(NcclFunction function, int32_t nranks);

}  // namespace gpuxray::model
