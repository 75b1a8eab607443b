// Fully populated instances of every record type of the trace format, for round-trip and
// compatibility tests.
//
// Variant 0 of every sample sets EVERY field to a non-zero value that differs from the other fields
// of the same message, so that a field the writer drops, or writes under another field's number,
// changes what the reader returns (format_compat_test.cc checks that property on the wire). Other
// variants move the values around and add edge cases: durations that are negative (end < start) or
// zero, values that need ten varint bytes, negative int32s, -0.0.
//
// Samples that refer to strings intern them through the writer that will write them, as the capture
// does; their ids are only meaningful in that writer's file.
#pragma once

#include <cstdint>
#include <type_traits>
#include <vector>

#include "proto/records.h"
#include "proto/trace_writer.h"

namespace gpuxray::testing {

// Variant 0: all three CaptureConfig booleans true. Variants 1 and 2 set them to (true, false, false)
// and (false, true, false), so that between the three every pair of booleans differs once.
format::FileHeader sampleHeader(uint32_t variant = 0);
format::DeviceProperties sampleDevice(uint32_t variant);
format::Link sampleLink(uint32_t variant);

// What a capture passes to finish(): dropped counts for a few categories (and a bogus written count,
// which the writer must replace by its own), an end reason, detail and warnings (one of them empty).
format::Trailer sampleTrailer();
// What the reader returns for `given` once the writer counted `written` records per category.
format::Trailer expectedTrailer(const format::Trailer& given, const format::CategoryCounts& written);

format::KernelRecord sampleKernel(format::TraceWriter& writer, uint32_t variant);
format::ApiCallRecord sampleApiCall(uint32_t variant);
// Defines the function through the writer and returns the definition the reader should give back.
format::ApiFunction sampleApiFunction(format::TraceWriter& writer, uint32_t variant);
format::MemcpyRecord sampleMemcpy(uint32_t variant);
format::MemsetRecord sampleMemset(uint32_t variant);
format::MemoryEventRecord sampleMemoryEvent(uint32_t variant);
// With payload fields of all four types, among them one of each type whose value is zero.
format::NvtxEventRecord sampleNvtxEvent(format::TraceWriter& writer, uint32_t variant);
format::SynchronizationRecord sampleSynchronization(uint32_t variant);
format::NcclCommunicatorRecord sampleNcclCommunicator(uint32_t variant);
format::NcclOperationRecord sampleNcclOperation(format::TraceWriter& writer, uint32_t variant);
format::NetTransferRecord sampleNetTransfer(uint32_t variant);
format::MetricSampleRecord sampleMetricSample(format::TraceWriter& writer, uint32_t variant);
// Variant 1 leaves half the fields unmeasured and sets one to 0 (present, not absent).
format::KernelMetricsRecord sampleKernelMetrics(uint32_t variant);
format::ClockAnchor sampleClockAnchor(uint32_t variant);
format::ExternalCorrelationRecord sampleExternalCorrelation(uint32_t variant);
format::OverheadRecord sampleOverhead(uint32_t variant);
format::ResourceNameRecord sampleResourceName(format::TraceWriter& writer, uint32_t variant);
format::StreamRecord sampleStream(uint32_t variant);

// Generic access for tests that run over every record type.
template <typename Record>
Record sample([[maybe_unused]] format::TraceWriter& writer, uint32_t variant) {
  using namespace format;
  if constexpr (std::is_same_v<Record, KernelRecord>) return sampleKernel(writer, variant);
  else if constexpr (std::is_same_v<Record, ApiCallRecord>) return sampleApiCall(variant);
  else if constexpr (std::is_same_v<Record, MemcpyRecord>) return sampleMemcpy(variant);
  else if constexpr (std::is_same_v<Record, MemsetRecord>) return sampleMemset(variant);
  else if constexpr (std::is_same_v<Record, MemoryEventRecord>) return sampleMemoryEvent(variant);
  else if constexpr (std::is_same_v<Record, NvtxEventRecord>) return sampleNvtxEvent(writer, variant);
  else if constexpr (std::is_same_v<Record, SynchronizationRecord>) return sampleSynchronization(variant);
  else if constexpr (std::is_same_v<Record, NcclCommunicatorRecord>) return sampleNcclCommunicator(variant);
  else if constexpr (std::is_same_v<Record, NcclOperationRecord>) return sampleNcclOperation(writer, variant);
  else if constexpr (std::is_same_v<Record, NetTransferRecord>) return sampleNetTransfer(variant);
  else if constexpr (std::is_same_v<Record, MetricSampleRecord>) return sampleMetricSample(writer, variant);
  else if constexpr (std::is_same_v<Record, KernelMetricsRecord>)
    return sampleKernelMetrics(variant);
  else if constexpr (std::is_same_v<Record, ClockAnchor>) return sampleClockAnchor(variant);
  else if constexpr (std::is_same_v<Record, ExternalCorrelationRecord>) return sampleExternalCorrelation(variant);
  else if constexpr (std::is_same_v<Record, OverheadRecord>) return sampleOverhead(variant);
  else if constexpr (std::is_same_v<Record, ResourceNameRecord>) return sampleResourceName(writer, variant);
  else if constexpr (std::is_same_v<Record, StreamRecord>) return sampleStream(variant);
  else if constexpr (std::is_same_v<Record, DeviceProperties>) return sampleDevice(variant);
  else if constexpr (std::is_same_v<Record, Link>) return sampleLink(variant);
  else static_assert(sizeof(Record) == 0, "no sample for this type");
}

// The list of `batch` that holds records of type Record.
template <typename Record>
std::vector<Record>& recordsIn(format::EventBatch& b) {
  using namespace format;
  if constexpr (std::is_same_v<Record, KernelRecord>) return b.kernels;
  else if constexpr (std::is_same_v<Record, ApiCallRecord>) return b.api_calls;
  else if constexpr (std::is_same_v<Record, MemcpyRecord>) return b.memcpys;
  else if constexpr (std::is_same_v<Record, MemsetRecord>) return b.memsets;
  else if constexpr (std::is_same_v<Record, MemoryEventRecord>) return b.memory_events;
  else if constexpr (std::is_same_v<Record, NvtxEventRecord>) return b.nvtx_events;
  else if constexpr (std::is_same_v<Record, SynchronizationRecord>) return b.synchronizations;
  else if constexpr (std::is_same_v<Record, NcclCommunicatorRecord>) return b.nccl_communicators;
  else if constexpr (std::is_same_v<Record, NcclOperationRecord>) return b.nccl_operations;
  else if constexpr (std::is_same_v<Record, NetTransferRecord>) return b.net_transfers;
  else if constexpr (std::is_same_v<Record, MetricSampleRecord>) return b.metric_samples;
  else if constexpr (std::is_same_v<Record, KernelMetricsRecord>)
    return b.kernel_metrics;
  else if constexpr (std::is_same_v<Record, ClockAnchor>) return b.clock_anchors;
  else if constexpr (std::is_same_v<Record, ExternalCorrelationRecord>) return b.external_correlations;
  else if constexpr (std::is_same_v<Record, OverheadRecord>) return b.overheads;
  else if constexpr (std::is_same_v<Record, ResourceNameRecord>) return b.resource_names;
  else if constexpr (std::is_same_v<Record, StreamRecord>) return b.streams;
  else if constexpr (std::is_same_v<Record, DeviceProperties>) return b.devices;
  else if constexpr (std::is_same_v<Record, Link>) return b.links;
  else static_assert(sizeof(Record) == 0, "no list for this type");
}

// Adds one record of every type (and one API function definition, device and link) of the given variant to `writer`
// and returns what the reader should return for them when they end up in one chunk.
format::EventBatch addSampleBatch(format::TraceWriter& writer, uint32_t variant);

// Interns `count` strings nobody refers to, so that the string ids handed out afterwards are larger
// than every small value (enums, device numbers) in the samples.
void internFillerStrings(format::TraceWriter& writer, uint32_t count);

}  // namespace gpuxray::testing
