#include "proto/records.h"

namespace gpuxray::format {

const char* categoryName(Category category) {
  switch (category) {
    case Category::kKernel: return "kernel";
    case Category::kApiCall: return "api_call";
    case Category::kMemcpy: return "memcpy";
    case Category::kMemset: return "memset";
    case Category::kMemory: return "memory";
    case Category::kNvtx: return "nvtx";
    case Category::kSynchronization: return "synchronization";
    case Category::kNcclCommunicator: return "nccl_communicator";
    case Category::kNcclOperation: return "nccl_operation";
    case Category::kNetTransfer: return "net_transfer";
    case Category::kMetricSample: return "metric_sample";
    case Category::kExternalCorrelation: return "external_correlation";
    case Category::kOverhead: return "overhead";
    case Category::kResourceName: return "resource_name";
    case Category::kStream: return "stream";
    case Category::kKernelMetrics:
      return "kernel_metrics";
    case Category::kUnknown: return "uncategorized";
  }
  return "uncategorized";
}

void countRecords(const EventBatch& b, CategoryCounts& counts) {
  auto add = [&](Category category, size_t n) { counts[static_cast<uint32_t>(category)] += n; };
  add(Category::kKernel, b.kernels.size());
  add(Category::kApiCall, b.api_calls.size());
  add(Category::kMemcpy, b.memcpys.size());
  add(Category::kMemset, b.memsets.size());
  add(Category::kMemory, b.memory_events.size());
  add(Category::kNvtx, b.nvtx_events.size());
  add(Category::kSynchronization, b.synchronizations.size());
  add(Category::kNcclCommunicator, b.nccl_communicators.size());
  add(Category::kNcclOperation, b.nccl_operations.size());
  add(Category::kNetTransfer, b.net_transfers.size());
  add(Category::kMetricSample, b.metric_samples.size());
  add(Category::kExternalCorrelation, b.external_correlations.size());
  add(Category::kOverhead, b.overheads.size());
  add(Category::kResourceName, b.resource_names.size());
  add(Category::kStream, b.streams.size());
  add(Category::kKernelMetrics, b.kernel_metrics.size());
}

const char* ncclCaptureSourceName(NcclCaptureSource source) {
  switch (source) {
    case NcclCaptureSource::kNone: return "none";
    case NcclCaptureSource::kProfilerPlugin: return "profiler-plugin";
    case NcclCaptureSource::kNvtx: return "nvtx";
    case NcclCaptureSource::kUnknown: break;
  }
  return "unknown";
}

const char* captureEndName(CaptureEnd end) {
  switch (end) {
    case CaptureEnd::kProcessExit: return "process exit";
    case CaptureEnd::kSignal: return "signal";
    case CaptureEnd::kLimitReached: return "limit reached";
    case CaptureEnd::kRequested: return "requested";
    case CaptureEnd::kGenerated: return "generated";
    case CaptureEnd::kUnknown: break;
  }
  return "unknown";
}

const char* windowEdgeName(WindowEdge edge) {
  switch (edge) {
    case WindowEdge::kCaptureStart: return "capture start";
    case WindowEdge::kCaptureEnd: return "capture end";
    case WindowEdge::kDelay: return "delay";
    case WindowEdge::kDuration: return "duration";
    case WindowEdge::kProfilerApi: return "cudaProfilerStart/Stop";
    case WindowEdge::kNvtxRange: return "NVTX range";
    case WindowEdge::kStep: return "step";
    case WindowEdge::kTrigger: return "trigger";
    case WindowEdge::kUnknown: break;
  }
  return "unknown";
}

}  // namespace gpuxray::format
