// The tables NCCL looks up in a profiler plugin (ncclProfiler_v6 for NCCL 2.29+, _v5 for 2.28, _v4
// for 2.27, _v3 for 2.26, _v2 for 2.24-2.25, _v1 for 2.23), each adapting its version's calls to
// the capture's version-neutral NcclProfiler. The first communicator starts the capture if
// CUDA has not yet (through the starter set by the entry points); if there is still no profiler,
// init refuses, which turns NCCL's profiling off for that communicator.
#pragma once

#include "inject/nccl_profiler.h"
#include "inject/nccl_profiler_abi.h"

namespace gpuxray::inject {

void setNcclProfiler(NcclProfiler* profiler);
// Called by a communicator's init when no capture runs yet.
void setNcclCaptureStarter(void (*start_capture)());

namespace nccl_plugin {
nccl_abi::Result initV5(void** context, uint64_t comm_hash, int* mask, const char* name, int n_nodes, int n_ranks,
                        int rank, nccl_abi::Logger log);
nccl_abi::Result startEventV5(void* context, void** handle, nccl_abi::EventDescrV5* descr);
nccl_abi::Result initV6(void** context, uint64_t comm_hash, int* mask, const char* name, int n_nodes, int n_ranks,
                        int rank, nccl_abi::Logger log);
nccl_abi::Result initV4(void** context, int* mask, const char* name, uint64_t comm_hash, int n_nodes, int n_ranks,
                        int rank, nccl_abi::Logger log);
nccl_abi::Result startEventV4(void* context, void** handle, nccl_abi::EventDescrV4* descr);
nccl_abi::Result initV1(void** context, int* mask);
nccl_abi::Result startEventV1(void* context, void** handle, nccl_abi::EventDescrV1* descr);
nccl_abi::Result initV2(void** context, int* mask);
nccl_abi::Result startEventV2(void* context, void** handle, nccl_abi::EventDescrV2* descr);
nccl_abi::Result initV3(void** context, int* mask);
nccl_abi::Result startEventV3(void* context, void** handle, nccl_abi::EventDescrV3* descr);
nccl_abi::Result recordEventStateV1(void* handle, int state, nccl_abi::EventStateArgsV1* args);
nccl_abi::Result stopEvent(void* handle);
nccl_abi::Result recordEventState(void* handle, int state, nccl_abi::EventStateArgs* args);
nccl_abi::Result finalize(void* context);
}  // namespace nccl_plugin

// The v1 code tables: NCCL's names for its ncclFunc_t, ncclDataType_t, NCCL_ALGO_* and
// NCCL_PROTO_* values, as later versions spell them.
const char* ncclFuncName(uint8_t code);
const char* ncclDatatypeName(uint8_t code);
const char* ncclAlgorithmName(uint8_t code);
const char* ncclProtocolName(uint8_t code);

// Constant-initialized, so the exported tables are ready when NCCL looks them up.
constexpr nccl_abi::ProfilerV5 profilerV5Table() {
  return {"gpuxray", nccl_plugin::initV5, nccl_plugin::startEventV5, nccl_plugin::stopEvent,
          nccl_plugin::recordEventState, nccl_plugin::finalize};
}
constexpr nccl_abi::ProfilerV6 profilerV6Table() {
  return {"gpuxray", nccl_plugin::initV6, nccl_plugin::startEventV5, nccl_plugin::stopEvent,
          nccl_plugin::recordEventState, nccl_plugin::finalize};
}
constexpr nccl_abi::ProfilerV4 profilerV4Table() {
  return {"gpuxray", nccl_plugin::initV4, nccl_plugin::startEventV4, nccl_plugin::stopEvent,
          nccl_plugin::recordEventState, nccl_plugin::finalize};
}
constexpr nccl_abi::ProfilerV3 profilerV3Table() {
  return {"gpuxray", nccl_plugin::initV3, nccl_plugin::startEventV3, nccl_plugin::stopEvent,
          nccl_plugin::recordEventStateV1, nccl_plugin::finalize};
}
constexpr nccl_abi::ProfilerV2 profilerV2Table() {
  return {"gpuxray", nccl_plugin::initV2, nccl_plugin::startEventV2, nccl_plugin::stopEvent,
          nccl_plugin::recordEventStateV1, nccl_plugin::finalize};
}
constexpr nccl_abi::ProfilerV1 profilerV1Table() {
  return {"gpuxray", nccl_plugin::initV1, nccl_plugin::startEventV1, nccl_plugin::stopEvent,
          nccl_plugin::recordEventStateV1, nccl_plugin::finalize};
}

// The oldest NCCL that finds one of these tables (v1 came with 2.23), as ncclGetVersion() codes it.
// Older NCCL cannot use the plugin: the capture falls back to NCCL's NVTX ranges.
inline constexpr int kOldestNcclForPlugin = 22300;

}  // namespace gpuxray::inject
