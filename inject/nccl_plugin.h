// The tables NCCL looks up in a profiler plugin (ncclProfiler_v5 for NCCL 2.28, ncclProfiler_v4 for
// 2.27), forwarding to the capture's NcclProfiler. Until a capture provides one, init refuses,
// which turns NCCL's profiling off for that communicator.
#pragma once

#include "inject/nccl_profiler.h"
#include "inject/nccl_profiler_abi.h"

namespace gpuxray::inject {

void setNcclProfiler(NcclProfiler* profiler);

extern const nccl_abi::ProfilerV5 kNcclProfilerV5;
extern const nccl_abi::ProfilerV4 kNcclProfilerV4;

}  // namespace gpuxray::inject
