// The hand-written writer (no libprotobuf) against the classes protoc generates from gpuxray.proto:
// its bytes parse with no unknown fields, every field of the schema is reachable, values land in the
// fields the schema names (checked against an independent records -> protobuf mapping written here),
// and where both serialize in field-number order the bytes are identical. Also: the C++ enums have
// the wire values of the proto enums, and a reader skips what a newer minor version adds.

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/message.h>
#include <google/protobuf/util/message_differencer.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "proto/file_layout.h"
#include "proto/gpuxray.pb.h"
#include "proto/trace_reader.h"
#include "proto/trace_writer.h"
#include "proto/wire_encoder.h"
#include "tests/support/record_printing.h"
#include "tests/support/sample_records.h"
#include "tests/support/trace_files.h"

namespace {

using namespace gpuxray::format;
using namespace gpuxray::testing;
using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// ---------------------------------------------------------------------------------------------------
// Enums: the C++ values are the wire values.

#define SAME_VALUE(cpp, proto) static_assert(static_cast<int>(cpp) == (proto), #cpp " must equal " #proto)

SAME_VALUE(CopyKind::kUnknown, pb::COPY_UNKNOWN);
SAME_VALUE(CopyKind::kHtoD, pb::COPY_HTOD);
SAME_VALUE(CopyKind::kDtoH, pb::COPY_DTOH);
SAME_VALUE(CopyKind::kHtoA, pb::COPY_HTOA);
SAME_VALUE(CopyKind::kAtoH, pb::COPY_ATOH);
SAME_VALUE(CopyKind::kAtoA, pb::COPY_ATOA);
SAME_VALUE(CopyKind::kAtoD, pb::COPY_ATOD);
SAME_VALUE(CopyKind::kDtoA, pb::COPY_DTOA);
SAME_VALUE(CopyKind::kDtoD, pb::COPY_DTOD);
SAME_VALUE(CopyKind::kHtoH, pb::COPY_HTOH);
SAME_VALUE(CopyKind::kPtoP, pb::COPY_PTOP);

SAME_VALUE(MemoryKind::kUnknown, pb::MEMORY_UNKNOWN);
SAME_VALUE(MemoryKind::kPageable, pb::MEMORY_PAGEABLE);
SAME_VALUE(MemoryKind::kPinned, pb::MEMORY_PINNED);
SAME_VALUE(MemoryKind::kDevice, pb::MEMORY_DEVICE);
SAME_VALUE(MemoryKind::kArray, pb::MEMORY_ARRAY);
SAME_VALUE(MemoryKind::kManaged, pb::MEMORY_MANAGED);
SAME_VALUE(MemoryKind::kDeviceStatic, pb::MEMORY_DEVICE_STATIC);
SAME_VALUE(MemoryKind::kManagedStatic, pb::MEMORY_MANAGED_STATIC);

SAME_VALUE(ApiDomain::kUnknown, pb::API_UNKNOWN);
SAME_VALUE(ApiDomain::kRuntime, pb::API_RUNTIME);
SAME_VALUE(ApiDomain::kDriver, pb::API_DRIVER);

SAME_VALUE(EndpointKind::kUnknown, pb::ENDPOINT_UNKNOWN);
SAME_VALUE(EndpointKind::kGpu, pb::ENDPOINT_GPU);
SAME_VALUE(EndpointKind::kCpu, pb::ENDPOINT_CPU);
SAME_VALUE(EndpointKind::kNvSwitch, pb::ENDPOINT_NVSWITCH);
SAME_VALUE(EndpointKind::kPcieBridge, pb::ENDPOINT_PCIE_BRIDGE);
SAME_VALUE(EndpointKind::kNic, pb::ENDPOINT_NIC);

SAME_VALUE(LinkKind::kUnknown, pb::LINK_UNKNOWN);
SAME_VALUE(LinkKind::kNvLink, pb::LINK_NVLINK);
SAME_VALUE(LinkKind::kPcie, pb::LINK_PCIE);
SAME_VALUE(LinkKind::kNetwork, pb::LINK_NETWORK);

SAME_VALUE(MemoryOperation::kUnknown, pb::MEMORY_OPERATION_UNKNOWN);
SAME_VALUE(MemoryOperation::kAllocate, pb::MEMORY_ALLOCATE);
SAME_VALUE(MemoryOperation::kRelease, pb::MEMORY_RELEASE);

SAME_VALUE(NvtxEventKind::kUnknown, pb::NVTX_UNKNOWN);
SAME_VALUE(NvtxEventKind::kRange, pb::NVTX_RANGE);
SAME_VALUE(NvtxEventKind::kMark, pb::NVTX_MARK);

SAME_VALUE(SynchronizationKind::kUnknown, pb::SYNC_UNKNOWN);
SAME_VALUE(SynchronizationKind::kEventSynchronize, pb::SYNC_EVENT_SYNCHRONIZE);
SAME_VALUE(SynchronizationKind::kStreamWaitEvent, pb::SYNC_STREAM_WAIT_EVENT);
SAME_VALUE(SynchronizationKind::kStreamSynchronize, pb::SYNC_STREAM_SYNCHRONIZE);
SAME_VALUE(SynchronizationKind::kContextSynchronize, pb::SYNC_CONTEXT_SYNCHRONIZE);

SAME_VALUE(NcclOperationKind::kUnknown, pb::NCCL_OP_UNKNOWN);
SAME_VALUE(NcclOperationKind::kCollective, pb::NCCL_OP_COLLECTIVE);
SAME_VALUE(NcclOperationKind::kSend, pb::NCCL_OP_SEND);
SAME_VALUE(NcclOperationKind::kRecv, pb::NCCL_OP_RECV);

SAME_VALUE(ResourceKind::kUnknown, pb::RESOURCE_UNKNOWN);
SAME_VALUE(ResourceKind::kThread, pb::RESOURCE_THREAD);
SAME_VALUE(ResourceKind::kDevice, pb::RESOURCE_DEVICE);
SAME_VALUE(ResourceKind::kContext, pb::RESOURCE_CONTEXT);
SAME_VALUE(ResourceKind::kStream, pb::RESOURCE_STREAM);
SAME_VALUE(ResourceKind::kCudaEvent, pb::RESOURCE_CUDA_EVENT);

SAME_VALUE(Category::kUnknown, pb::CATEGORY_UNKNOWN);
SAME_VALUE(Category::kKernel, pb::CATEGORY_KERNEL);
SAME_VALUE(Category::kApiCall, pb::CATEGORY_API_CALL);
SAME_VALUE(Category::kMemcpy, pb::CATEGORY_MEMCPY);
SAME_VALUE(Category::kMemset, pb::CATEGORY_MEMSET);
SAME_VALUE(Category::kMemory, pb::CATEGORY_MEMORY);
SAME_VALUE(Category::kNvtx, pb::CATEGORY_NVTX);
SAME_VALUE(Category::kSynchronization, pb::CATEGORY_SYNCHRONIZATION);
SAME_VALUE(Category::kNcclCommunicator, pb::CATEGORY_NCCL_COMMUNICATOR);
SAME_VALUE(Category::kNcclOperation, pb::CATEGORY_NCCL_OPERATION);
SAME_VALUE(Category::kNetTransfer, pb::CATEGORY_NET_TRANSFER);
SAME_VALUE(Category::kMetricSample, pb::CATEGORY_METRIC_SAMPLE);
SAME_VALUE(Category::kKernelMetrics, pb::CATEGORY_KERNEL_METRICS);
SAME_VALUE(Category::kExternalCorrelation, pb::CATEGORY_EXTERNAL_CORRELATION);
SAME_VALUE(Category::kOverhead, pb::CATEGORY_OVERHEAD);
SAME_VALUE(Category::kResourceName, pb::CATEGORY_RESOURCE_NAME);
SAME_VALUE(Category::kStream, pb::CATEGORY_STREAM);
static_assert(kCategoryCount == pb::EventCategory_ARRAYSIZE, "kCategoryCount must cover every EventCategory");

SAME_VALUE(CaptureEnd::kUnknown, pb::END_UNKNOWN);
SAME_VALUE(CaptureEnd::kProcessExit, pb::END_PROCESS_EXIT);
SAME_VALUE(CaptureEnd::kSignal, pb::END_SIGNAL);
SAME_VALUE(CaptureEnd::kLimitReached, pb::END_LIMIT_REACHED);
SAME_VALUE(CaptureEnd::kRequested, pb::END_REQUESTED);
SAME_VALUE(CaptureEnd::kGenerated, pb::END_GENERATED);

SAME_VALUE(NcclCaptureSource::kUnknown, pb::NCCL_CAPTURE_UNKNOWN);
SAME_VALUE(NcclCaptureSource::kNone, pb::NCCL_CAPTURE_NONE);
SAME_VALUE(NcclCaptureSource::kProfilerPlugin, pb::NCCL_CAPTURE_PROFILER_PLUGIN);
SAME_VALUE(NcclCaptureSource::kNvtx, pb::NCCL_CAPTURE_NVTX);

#undef SAME_VALUE

TEST_CASE("every proto enum has exactly the values its C++ enum lists", "[format][compat]") {
  // The static_asserts above pair each C++ enumerator with its proto value; these counts (the number
  // of static_asserts per enum) catch a value added to the proto but not to records.h.
  struct Expected {
    const google::protobuf::EnumDescriptor* proto;
    int cpp_values;
  };
  const std::vector<Expected> enums = {
      {pb::CopyKind_descriptor(), 11},          {pb::MemoryKind_descriptor(), 8},
      {pb::ApiDomain_descriptor(), 3},          {pb::EndpointKind_descriptor(), 6},
      {pb::LinkKind_descriptor(), 4},           {pb::MemoryOperation_descriptor(), 3},
      {pb::NvtxEventKind_descriptor(), 3},      {pb::SynchronizationKind_descriptor(), 5},
      {pb::NcclOperationKind_descriptor(), 4},  {pb::ResourceKind_descriptor(), 6},
      {pb::EventCategory_descriptor(), 17},     {pb::CaptureEnd_descriptor(), 6},
      {pb::NcclCaptureSource_descriptor(), 4},
  };
  for (const Expected& e : enums) {
    INFO(e.proto->full_name());
    CHECK(e.proto->value_count() == e.cpp_values);
    // Dense from zero, so that the C++ values 0..n-1 are all of them.
    for (int i = 0; i < e.proto->value_count(); ++i) CHECK(e.proto->FindValueByNumber(i) != nullptr);
  }
  CHECK(static_cast<int>(kCategoryCount) == pb::EventCategory_descriptor()->value_count());
}

// ---------------------------------------------------------------------------------------------------
// Records -> generated messages, written from gpuxray.proto independently of the writer and reader.

void toPb(const ClockAnchor& a, pb::ClockAnchor* p) {
  p->set_capture_ns(a.capture_ns);
  p->set_realtime_ns(a.realtime_ns);
  p->set_monotonic_ns(a.monotonic_ns);
  p->set_uncertainty_ns(a.uncertainty_ns);
}

void toPb(const DeviceProperties& d, pb::DeviceProperties* p) {
  p->set_device_id(d.device_id);
  p->set_name(d.name);
  p->set_uuid(d.uuid);
  p->set_pci_bus_id(d.pci_bus_id);
  p->set_compute_major(d.compute_major);
  p->set_compute_minor(d.compute_minor);
  p->set_sm_count(d.sm_count);
  p->set_max_threads_per_sm(d.max_threads_per_sm);
  p->set_max_warps_per_sm(d.max_warps_per_sm);
  p->set_max_blocks_per_sm(d.max_blocks_per_sm);
  p->set_registers_per_sm(d.registers_per_sm);
  p->set_registers_per_block(d.registers_per_block);
  p->set_shared_memory_per_sm(d.shared_memory_per_sm);
  p->set_shared_memory_per_block(d.shared_memory_per_block);
  p->set_shared_memory_per_block_optin(d.shared_memory_per_block_optin);
  p->set_reserved_shared_memory_per_block(d.reserved_shared_memory_per_block);
  p->set_memory_bytes(d.memory_bytes);
  p->set_memory_bandwidth_bytes_per_s(d.memory_bandwidth_bytes_per_s);
  p->set_core_clock_khz(d.core_clock_khz);
  p->set_memory_clock_khz(d.memory_clock_khz);
  p->set_memory_bus_width_bits(d.memory_bus_width_bits);
  p->set_l2_cache_bytes(d.l2_cache_bytes);
  p->set_max_threads_per_block(d.max_threads_per_block);
  p->set_warp_size(d.warp_size);
  p->set_max_registers_per_thread(d.max_registers_per_thread);
  p->set_numa_node(d.numa_node);
  p->set_mig_gpu_instance_id(d.mig_gpu_instance_id);
  p->set_mig_compute_instance_id(d.mig_compute_instance_id);
  p->set_peak_bf16_flops(d.peak_bf16_flops);
}

void toPb(const Endpoint& e, pb::Endpoint* p) {
  p->set_kind(static_cast<pb::EndpointKind>(e.kind));
  p->set_id(e.id);
  p->set_device(e.device);
}

void toPb(const Link& l, pb::Link* p) {
  p->set_kind(static_cast<pb::LinkKind>(l.kind));
  toPb(l.a, p->mutable_a());
  toPb(l.b, p->mutable_b());
  p->set_version(l.version);
  p->set_width(l.width);
  p->set_bandwidth_bytes_per_s(l.bandwidth_bytes_per_s);
  for (uint32_t port : l.ports_a) p->add_ports_a(port);
  for (uint32_t port : l.ports_b) p->add_ports_b(port);
}

void toPb(const NetworkInterface& n, pb::NetworkInterface* p) {
  p->set_name(n.name);
  p->set_port(n.port);
  p->set_bandwidth_bytes_per_s(n.bandwidth_bytes_per_s);
  p->set_pci_bus_id(n.pci_bus_id);
  p->set_transport(n.transport);
  p->set_numa_node(n.numa_node);
}

void toPb(const CaptureConfig& c, pb::CaptureConfig* p) {
  for (const auto& s : c.activities) p->add_activities(s);
  p->set_buffer_bytes(c.buffer_bytes);
  p->set_max_buffer_memory_bytes(c.max_buffer_memory_bytes);
  p->set_flush_period_ms(c.flush_period_ms);
  p->set_nccl_profiler(c.nccl_profiler);
  p->set_nvtx(c.nvtx);
  p->set_metric_sampling(c.metric_sampling);
  p->set_metric_interval_us(c.metric_interval_us);
  for (const auto& s : c.metrics) p->add_metrics(s);
  for (const auto& s : c.options) p->add_options(s);
}

void toPb(const CaptureWindow& w, pb::CaptureWindow* p) {
  p->set_start_ns(w.start_ns);
  p->set_end_ns(w.end_ns);
  p->set_started_by(static_cast<pb::WindowEdge>(w.started_by));
  p->set_ended_by(static_cast<pb::WindowEdge>(w.ended_by));
  p->set_detail(w.detail);
}

void toPb(const FileHeader& h, pb::FileHeader* p) {
  p->set_format_major(h.format_major);
  p->set_format_minor(h.format_minor);
  p->set_tool_version(h.tool_version);
  p->set_run_id(h.run_id);
  p->set_run_id_source(h.run_id_source);
  p->set_rank(h.rank);
  p->set_local_rank(h.local_rank);
  p->set_world_size(h.world_size);
  p->set_local_world_size(h.local_world_size);
  p->set_rank_source(h.rank_source);
  p->set_hostname(h.hostname);
  p->set_pid(h.pid);
  for (const auto& s : h.command_line) p->add_command_line(s);
  p->set_start_time_ns(h.start_time_ns);
  p->set_time_base(h.time_base);
  for (const auto& a : h.clock_anchors) toPb(a, p->add_clock_anchors());
  for (const auto& d : h.devices) toPb(d, p->add_devices());
  for (const auto& l : h.links) toPb(l, p->add_links());
  for (const auto& n : h.nics) toPb(n, p->add_nics());
  toPb(h.capture_config, p->mutable_capture_config());
  p->set_simulated(h.simulated);
  p->set_simulation_inputs(h.simulation_inputs);
  p->set_cupti_api_version(h.cupti_api_version);
  p->set_cuda_driver_version(h.cuda_driver_version);
  p->set_nccl_version(h.nccl_version);
  p->set_nccl_capture_source(static_cast<pb::NcclCaptureSource>(h.nccl_capture_source));
  p->set_capture_window_plan(h.capture_window_plan);
  for (const auto& w : h.capture_windows) toPb(w, p->add_capture_windows());
}

int64_t duration(uint64_t start, uint64_t end) { return static_cast<int64_t>(end - start); }

void toPb(const MemcpyRecord& r, pb::Memcpy* p) {
  p->set_start_ns(r.start_ns);
  p->set_duration_ns(duration(r.start_ns, r.end_ns));
  p->set_device(r.device);
  p->set_stream(r.stream);
  p->set_correlation_id(r.correlation_id);
  p->set_copy_kind(static_cast<pb::CopyKind>(r.copy_kind));
  p->set_bytes(r.bytes);
  p->set_src_kind(static_cast<pb::MemoryKind>(r.src_kind));
  p->set_dst_kind(static_cast<pb::MemoryKind>(r.dst_kind));
  p->set_src_device(r.src_device);
  p->set_dst_device(r.dst_device);
  p->set_is_async(r.is_async);
  p->set_context(r.context);
  p->set_graph_id(r.graph_id);
  p->set_graph_node_id(r.graph_node_id);
}

void toPb(const MemsetRecord& r, pb::Memset* p) {
  p->set_start_ns(r.start_ns);
  p->set_duration_ns(duration(r.start_ns, r.end_ns));
  p->set_device(r.device);
  p->set_stream(r.stream);
  p->set_correlation_id(r.correlation_id);
  p->set_bytes(r.bytes);
  p->set_value(r.value);
  p->set_memory_kind(static_cast<pb::MemoryKind>(r.memory_kind));
  p->set_context(r.context);
  p->set_graph_id(r.graph_id);
  p->set_graph_node_id(r.graph_node_id);
}

void toPb(const MemoryEventRecord& r, pb::MemoryEvent* p) {
  p->set_timestamp_ns(r.timestamp_ns);
  p->set_operation(static_cast<pb::MemoryOperation>(r.operation));
  p->set_device(r.device);
  p->set_address(r.address);
  p->set_bytes(r.bytes);
  p->set_memory_kind(static_cast<pb::MemoryKind>(r.memory_kind));
  p->set_stream(r.stream);
  p->set_correlation_id(r.correlation_id);
  p->set_is_async(r.is_async);
  p->set_pool_address(r.pool_address);
}

void toPb(const PayloadField& f, pb::PayloadField* p) {
  p->set_name_iid(f.name_id);
  switch (f.type) {
    case PayloadField::Type::kInt: p->set_int_value(f.int_value); break;
    case PayloadField::Type::kUint: p->set_uint_value(f.uint_value); break;
    case PayloadField::Type::kDouble: p->set_double_value(f.double_value); break;
    case PayloadField::Type::kString: p->set_string_iid(f.string_id); break;
  }
}

void toPb(const NvtxEventRecord& r, pb::NvtxEvent* p) {
  p->set_kind(static_cast<pb::NvtxEventKind>(r.kind));
  p->set_start_ns(r.start_ns);
  p->set_end_ns(r.end_ns);
  p->set_domain_iid(r.domain_id);
  p->set_name_iid(r.name_id);
  p->set_thread_id(r.thread_id);
  p->set_device(r.device);
  p->set_stream(r.stream);
  p->set_category(r.category);
  p->set_color(r.color);
  p->set_payload_schema(r.payload_schema);
  for (const auto& f : r.payload) toPb(f, p->add_payload());
  p->set_depth(r.depth);
}

void toPb(const SynchronizationRecord& r, pb::Synchronization* p) {
  p->set_start_ns(r.start_ns);
  p->set_duration_ns(duration(r.start_ns, r.end_ns));
  p->set_kind(static_cast<pb::SynchronizationKind>(r.kind));
  p->set_device(r.device);
  p->set_stream(r.stream);
  p->set_correlation_id(r.correlation_id);
  p->set_context(r.context);
  p->set_cuda_event_id(r.cuda_event_id);
  p->set_thread_id(r.thread_id);
}

void toPb(const NcclCommunicatorRecord& r, pb::NcclCommunicator* p) {
  p->set_comm_hash(r.comm_hash);
  p->set_name(r.name);
  p->set_comm_rank(r.comm_rank);
  p->set_nranks(r.nranks);
  p->set_nnodes(r.nnodes);
  p->set_global_rank(r.global_rank);
  p->set_device(r.device);
  p->set_init_ns(r.init_ns);
  p->set_profiler_version(r.profiler_version);
}

void toPb(const NcclOperationRecord& r, pb::NcclOperation* p) {
  p->set_kind(static_cast<pb::NcclOperationKind>(r.kind));
  p->set_comm_hash(r.comm_hash);
  p->set_seq(r.seq);
  p->set_func_iid(r.func_id);
  p->set_enqueue_ns(r.enqueue_ns);
  p->set_gpu_start_ns(r.gpu_start_ns);
  p->set_gpu_end_ns(r.gpu_end_ns);
  p->set_bytes(r.bytes);
  p->set_count(r.count);
  p->set_datatype_iid(r.datatype_id);
  p->set_root(r.root);
  p->set_peer(r.peer);
  p->set_algorithm_iid(r.algorithm_id);
  p->set_protocol_iid(r.protocol_id);
  p->set_channels(r.channels);
  p->set_warps(r.warps);
  p->set_graph_captured(r.graph_captured);
  p->set_reduce_op_iid(r.reduce_op_id);
  p->set_stream(r.stream);
  p->set_device(r.device);
  p->set_operation_id(r.operation_id);
  p->set_enqueue_end_ns(r.enqueue_end_ns);
  p->set_gpu_clock_error_ns(r.gpu_clock_error_ns);
  p->set_kernel_correlation_id(r.kernel_correlation_id);
  p->set_gpu_clock_unmapped(r.gpu_clock_unmapped);
}

void toPb(const NetTransferRecord& r, pb::NetTransfer* p) {
  p->set_operation_id(r.operation_id);
  p->set_peer(r.peer);
  p->set_channel(r.channel);
  p->set_is_send(r.is_send);
  p->set_bytes(r.bytes);
  p->set_start_ns(r.start_ns);
  p->set_end_ns(r.end_ns);
  p->set_steps(r.steps);
  p->set_wait_gpu_ns(r.wait_gpu_ns);
  p->set_wait_peer_ns(r.wait_peer_ns);
  p->set_wait_network_ns(r.wait_network_ns);
  p->set_comm_hash(r.comm_hash);
}

void toPb(const MetricSampleRecord& r, pb::MetricSample* p) {
  p->set_timestamp_ns(r.timestamp_ns);
  p->set_device(r.device);
  p->set_metric_iid(r.metric_id);
  p->set_value(r.value);
}

void toPb(const KernelMetricsRecord& r, pb::KernelMetrics* p) {
  p->set_correlation_id(r.correlation_id);
  p->set_device(r.device);
  p->set_passes(r.passes);
  if (r.achieved_occupancy_pct) p->set_achieved_occupancy_pct(*r.achieved_occupancy_pct);
  if (r.sm_throughput_pct) p->set_sm_throughput_pct(*r.sm_throughput_pct);
  if (r.tensor_pipe_pct) p->set_tensor_pipe_pct(*r.tensor_pipe_pct);
  if (r.dram_read_bytes) p->set_dram_read_bytes(*r.dram_read_bytes);
  if (r.dram_write_bytes) p->set_dram_write_bytes(*r.dram_write_bytes);
  if (r.l2_bytes) p->set_l2_bytes(*r.l2_bytes);
  if (r.l2_hit_rate_pct) p->set_l2_hit_rate_pct(*r.l2_hit_rate_pct);
  if (r.l1_bytes) p->set_l1_bytes(*r.l1_bytes);
  if (r.l1_hit_rate_pct) p->set_l1_hit_rate_pct(*r.l1_hit_rate_pct);
  if (r.shared_wavefronts) p->set_shared_wavefronts(*r.shared_wavefronts);
  if (r.local_load_bytes) p->set_local_load_bytes(*r.local_load_bytes);
  if (r.local_store_bytes) p->set_local_store_bytes(*r.local_store_bytes);
  if (r.gpu_duration_ns) p->set_gpu_duration_ns(*r.gpu_duration_ns);
}

void toPb(const ExternalCorrelationRecord& r, pb::ExternalCorrelation* p) {
  p->set_kind(r.kind);
  p->set_external_id(r.external_id);
  p->set_correlation_id(r.correlation_id);
}

void toPb(const OverheadRecord& r, pb::Overhead* p) {
  p->set_kind(r.kind);
  p->set_start_ns(r.start_ns);
  p->set_duration_ns(duration(r.start_ns, r.end_ns));
  p->set_thread_id(r.thread_id);
  p->set_device(r.device);
}

void toPb(const ResourceNameRecord& r, pb::ResourceName* p) {
  p->set_kind(static_cast<pb::ResourceKind>(r.kind));
  p->set_id(r.id);
  p->set_device(r.device);
  p->set_name_iid(r.name_id);
}

void toPb(const StreamRecord& r, pb::StreamInfo* p) {
  p->set_stream(r.stream);
  p->set_device(r.device);
  p->set_context(r.context);
  p->set_priority(r.priority);
  p->set_flags(r.flags);
  p->set_correlation_id(r.correlation_id);
}

void toPb(const ApiFunction& f, pb::ApiFunction* p) {
  p->set_domain(static_cast<pb::ApiDomain>(f.domain));
  p->set_cbid(f.cbid);
  p->set_name_iid(f.name_id);
}

void toPb(const Trailer& t, pb::Trailer* p) {
  for (const auto& c : t.counts) {
    pb::CategoryCount* count = p->add_counts();
    count->set_category(static_cast<pb::EventCategory>(c.category));
    count->set_written(c.written);
    count->set_dropped(c.dropped);
  }
  p->set_end(static_cast<pb::CaptureEnd>(t.end));
  p->set_end_time_ns(t.end_time_ns);
  p->set_end_detail(t.end_detail);
  for (const auto& w : t.warnings) p->add_warnings(w);
}

// Kernel configurations in the order of first launch, numbered from 1, as the writer defines them.
class KernelConfigs {
 public:
  uint32_t idOf(const KernelRecord& k, pb::EventBatch* definitions) {
    auto key = std::make_tuple(k.name_id, k.grid_x, k.grid_y, k.grid_z, k.block_x, k.block_y, k.block_z,
                               k.registers_per_thread, k.static_shared_memory, k.dynamic_shared_memory,
                               k.local_memory_per_thread, k.cluster_x, k.cluster_y, k.cluster_z,
                               k.shared_memory_optin, k.shared_memory_carveout_pct, k.shared_memory_executed,
                               k.launch_type, k.max_active_clusters);
    auto [it, inserted] = ids_.emplace(key, static_cast<uint32_t>(ids_.size() + 1));
    if (inserted) {
      pb::KernelConfig* c = definitions->add_kernel_configs();
      c->set_id(it->second);
      c->set_name_iid(k.name_id);
      c->set_grid_x(k.grid_x);
      c->set_grid_y(k.grid_y);
      c->set_grid_z(k.grid_z);
      c->set_block_x(k.block_x);
      c->set_block_y(k.block_y);
      c->set_block_z(k.block_z);
      c->set_registers_per_thread(k.registers_per_thread);
      c->set_static_shared_memory(k.static_shared_memory);
      c->set_dynamic_shared_memory(k.dynamic_shared_memory);
      c->set_local_memory_per_thread(k.local_memory_per_thread);
      c->set_cluster_x(k.cluster_x);
      c->set_cluster_y(k.cluster_y);
      c->set_cluster_z(k.cluster_z);
      c->set_shared_memory_optin(k.shared_memory_optin);
      c->set_shared_memory_carveout_pct(k.shared_memory_carveout_pct);
      c->set_shared_memory_executed(k.shared_memory_executed);
      c->set_launch_type(k.launch_type);
      c->set_max_active_clusters(k.max_active_clusters);
    }
    return it->second;
  }

 private:
  std::map<std::tuple<uint32_t, uint32_t, uint32_t, uint32_t, uint32_t, uint32_t, uint32_t, uint32_t, uint32_t,
                      uint32_t, uint32_t, uint32_t, uint32_t, uint32_t, bool, uint32_t, uint32_t, uint32_t, uint32_t>,
           uint32_t>
      ids_;
};

// The columns as gpuxray.proto describes them: deltas from the previous record of the batch (the
// first from zero); optional columns only when some record has a non-zero value (the writer keeps
// graph_id and graph_node_id together).
void toPb(const std::vector<KernelRecord>& kernels, KernelConfigs& configs, pb::EventBatch* batch) {
  if (kernels.empty()) return;
  pb::KernelColumns* c = batch->mutable_kernels();
  uint64_t previous_start = 0;
  uint32_t previous_correlation = 0;
  bool any_context = false, any_graph = false;
  for (const KernelRecord& k : kernels) {
    c->add_start_delta_ns(static_cast<int64_t>(k.start_ns - previous_start));
    c->add_duration_ns(duration(k.start_ns, k.end_ns));
    c->add_device(k.device);
    c->add_stream(k.stream);
    c->add_correlation_delta(static_cast<int64_t>(k.correlation_id) - static_cast<int64_t>(previous_correlation));
    c->add_config_id(configs.idOf(k, batch));
    previous_start = k.start_ns;
    previous_correlation = k.correlation_id;
    any_context |= k.context != 0;
    any_graph |= k.graph_id != 0 || k.graph_node_id != 0;
  }
  for (const KernelRecord& k : kernels) {
    if (any_context) c->add_context(k.context);
    if (any_graph) c->add_graph_id(k.graph_id);
    if (any_graph) c->add_graph_node_id(k.graph_node_id);
  }
}

void toPb(const std::vector<ApiCallRecord>& calls, pb::EventBatch* batch) {
  if (calls.empty()) return;
  pb::ApiCallColumns* c = batch->mutable_api_calls();
  uint64_t previous_start = 0;
  uint32_t previous_correlation = 0;
  bool any_return_code = false, any_process_id = false;
  for (const ApiCallRecord& a : calls) {
    c->add_start_delta_ns(static_cast<int64_t>(a.start_ns - previous_start));
    c->add_duration_ns(duration(a.start_ns, a.end_ns));
    c->add_domain(static_cast<uint32_t>(a.domain));
    c->add_cbid(a.cbid);
    c->add_thread_id(a.thread_id);
    c->add_correlation_delta(static_cast<int64_t>(a.correlation_id) - static_cast<int64_t>(previous_correlation));
    previous_start = a.start_ns;
    previous_correlation = a.correlation_id;
    any_return_code |= a.return_code != 0;
    any_process_id |= a.process_id != 0;
  }
  for (const ApiCallRecord& a : calls) {
    if (any_return_code) c->add_return_code(a.return_code);
    if (any_process_id) c->add_process_id(a.process_id);
  }
}

// Everything of `b` but the string definitions, which the test takes from the writer's output.
void toPb(const EventBatch& b, KernelConfigs& configs, pb::EventBatch* p) {
  toPb(b.kernels, configs, p);
  toPb(b.api_calls, p);
  for (const auto& r : b.memcpys) toPb(r, p->add_memcpys());
  for (const auto& r : b.memsets) toPb(r, p->add_memsets());
  for (const auto& r : b.memory_events) toPb(r, p->add_memory_events());
  for (const auto& r : b.nvtx_events) toPb(r, p->add_nvtx_events());
  for (const auto& r : b.synchronizations) toPb(r, p->add_synchronizations());
  for (const auto& r : b.nccl_communicators) toPb(r, p->add_nccl_communicators());
  for (const auto& r : b.nccl_operations) toPb(r, p->add_nccl_operations());
  for (const auto& r : b.net_transfers) toPb(r, p->add_net_transfers());
  for (const auto& r : b.metric_samples) toPb(r, p->add_metric_samples());
  for (const auto& r : b.clock_anchors) toPb(r, p->add_clock_anchors());
  for (const auto& r : b.external_correlations) toPb(r, p->add_external_correlations());
  for (const auto& r : b.overheads) toPb(r, p->add_overheads());
  for (const auto& r : b.resource_names) toPb(r, p->add_resource_names());
  for (const auto& r : b.streams) toPb(r, p->add_streams());
  for (const auto& r : b.api_functions) toPb(r, p->add_api_functions());
  for (const auto& r : b.devices) toPb(r, p->add_devices());
  for (const auto& r : b.links) toPb(r, p->add_links());
  for (const auto& r : b.capture_windows) toPb(r, p->add_capture_windows());
  for (const auto& r : b.kernel_metrics) toPb(r, p->add_kernel_metrics());
}

// ---------------------------------------------------------------------------------------------------
// Looking at parsed messages through reflection.

pb::Chunk parseChunk(const ChunkView& chunk) {
  pb::Chunk parsed;
  INFO("chunk at byte offset " << chunk.offset);
  REQUIRE(parsed.ParseFromArray(chunk.payload.data(), static_cast<int>(chunk.payload.size())));
  return parsed;
}

std::string asString(const std::vector<uint8_t>& bytes) { return {bytes.begin(), bytes.end()}; }

// Calls `visit(message, path)` for `message` and every message inside it.
template <typename Visit>
void forEachMessage(const Message& message, const std::string& path, Visit&& visit) {
  visit(message, path);
  const Reflection* reflection = message.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  reflection->ListFields(message, &fields);
  for (const FieldDescriptor* field : fields) {
    if (field->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) continue;
    if (field->is_repeated()) {
      for (int i = 0; i < reflection->FieldSize(message, field); ++i)
        forEachMessage(reflection->GetRepeatedMessage(message, field, i),
                       path + "." + field->name() + "[" + std::to_string(i) + "]", visit);
    } else {
      forEachMessage(reflection->GetMessage(message, field), path + "." + field->name(), visit);
    }
  }
}

std::vector<std::string> unknownFieldPaths(const Message& message) {
  std::vector<std::string> paths;
  forEachMessage(message, message.GetDescriptor()->name(), [&](const Message& m, const std::string& path) {
    if (!m.GetReflection()->GetUnknownFields(m).empty()) paths.push_back(path);
  });
  return paths;
}

// Full names of all fields of `type` and of every message type reachable from it.
void schemaFields(const Descriptor* type, std::set<const Descriptor*>& seen, std::set<std::string>& fields) {
  if (!seen.insert(type).second) return;
  for (int i = 0; i < type->field_count(); ++i) {
    const FieldDescriptor* field = type->field(i);
    fields.insert(field->full_name());
    if (field->message_type() != nullptr) schemaFields(field->message_type(), seen, fields);
  }
}

// "Message.field = value" pairs of singular scalar fields of one message that hold the same value
// (booleans excepted: there is only one non-zero bool).
std::vector<std::string> sharedValues(const Message& m, const std::string& path) {
  const Reflection* r = m.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  r->ListFields(m, &fields);
  std::map<std::string, std::string> owner;  // value (typed text) -> field name
  std::vector<std::string> shared;
  for (const FieldDescriptor* f : fields) {
    if (f->is_repeated()) continue;
    std::string value;
    switch (f->cpp_type()) {
      case FieldDescriptor::CPPTYPE_INT32: value = "n" + std::to_string(r->GetInt32(m, f)); break;
      case FieldDescriptor::CPPTYPE_INT64: value = "n" + std::to_string(r->GetInt64(m, f)); break;
      case FieldDescriptor::CPPTYPE_UINT32: value = "n" + std::to_string(r->GetUInt32(m, f)); break;
      case FieldDescriptor::CPPTYPE_UINT64: value = "n" + std::to_string(r->GetUInt64(m, f)); break;
      case FieldDescriptor::CPPTYPE_ENUM: value = "n" + std::to_string(r->GetEnumValue(m, f)); break;
      case FieldDescriptor::CPPTYPE_DOUBLE: {
        char text[40];
        std::snprintf(text, sizeof text, "%a", r->GetDouble(m, f));
        value = std::string("d") + text;
        break;
      }
      case FieldDescriptor::CPPTYPE_STRING: value = "s" + r->GetString(m, f); break;
      default: continue;  // bool, message
    }
    auto [it, inserted] = owner.emplace(value, f->name());
    if (!inserted) shared.push_back(path + ": " + it->second + " and " + f->name() + " both " + value.substr(1));
  }
  return shared;
}

// A file of variant-0 samples: the header, one record of every type and the trailer. String ids
// start above 100, clear of the small values (enums, device numbers) of the samples.
std::vector<uint8_t> sampleFile() {
  MemoryTrace trace;
  REQUIRE(trace.writer().writeHeader(sampleHeader()));
  internFillerStrings(trace.writer(), 100);
  addSampleBatch(trace.writer(), 0);
  REQUIRE(trace.writer().finish(sampleTrailer()));
  return trace.bytes();
}

// The differences between two messages, as MessageDifferencer reports them ("" if none).
std::string differences(const Message& actual, const Message& expected) {
  std::string report;
  google::protobuf::util::MessageDifferencer differencer;
  differencer.ReportDifferencesToString(&report);
  differencer.Compare(actual, expected);
  return report;
}

// ---------------------------------------------------------------------------------------------------

TEST_CASE("every chunk the writer produces parses with the generated classes, with no unknown fields",
          "[format][compat]") {
  const std::vector<ChunkView> chunks = splitChunks(sampleFile());
  REQUIRE(chunks.size() == 3);
  std::vector<pb::Chunk::ContentCase> contents;
  for (const ChunkView& chunk : chunks) {
    pb::Chunk parsed = parseChunk(chunk);
    contents.push_back(parsed.content_case());
    INFO("chunk at byte offset " << chunk.offset);
    CHECK(unknownFieldPaths(parsed).empty());
  }
  CHECK(contents == std::vector<pb::Chunk::ContentCase>{pb::Chunk::kHeader, pb::Chunk::kBatch, pb::Chunk::kTrailer});
}

TEST_CASE("the samples reach every field of every message in the schema", "[format][compat]") {
  // Together with the round-trip tests this proves the writer writes, and the reader reads, every
  // field gpuxray.proto has: a field added to the schema but not to records.h shows up here.
  std::set<const Descriptor*> seen;
  std::set<std::string> unset;
  schemaFields(pb::Chunk::descriptor(), seen, unset);
  for (const ChunkView& chunk : splitChunks(sampleFile())) {
    forEachMessage(parseChunk(chunk), "Chunk", [&](const Message& m, const std::string&) {
      std::vector<const FieldDescriptor*> fields;
      m.GetReflection()->ListFields(m, &fields);
      for (const FieldDescriptor* f : fields) unset.erase(f->full_name());
    });
  }
  CHECK(unset == std::set<std::string>{});
}

TEST_CASE("the samples give the fields of each message different values", "[format][compat]") {
  // Were two fields equal, a writer that swapped their numbers would go unnoticed.
  std::vector<std::string> shared;
  for (const ChunkView& chunk : splitChunks(sampleFile())) {
    forEachMessage(parseChunk(chunk), "Chunk", [&](const Message& m, const std::string& path) {
      // Trailer counts are the writer's numbers, not sample values.
      if (m.GetDescriptor() == pb::CategoryCount::descriptor()) return;
      for (std::string& s : sharedValues(m, path)) shared.push_back(std::move(s));
    });
  }
  CHECK(shared == std::vector<std::string>{});
}

TEST_CASE("decoded values sit in the fields the schema names", "[format][compat]") {
  // A few values read through the generated getters, where a mistake would be easy: negative int32s,
  // zigzag durations, empty repeated strings, oneof members holding zero, fixed64 hashes.
  const std::vector<ChunkView> chunks = splitChunks(sampleFile());
  REQUIRE(chunks.size() == 3);
  const pb::FileHeader header = parseChunk(chunks[0]).header();
  CHECK(header.format_major() == kFormatMajor);
  CHECK(header.rank() == 37);
  CHECK(header.local_rank() == -1);
  // (Generated getters do not check indexes: sizes first.)
  REQUIRE(header.command_line_size() == 4);
  CHECK(header.command_line(1).empty());
  REQUIRE(header.devices_size() == 2);
  CHECK(header.devices(0).uuid() == sampleDevice(0).uuid);
  REQUIRE(header.links_size() == 3);
  CHECK(header.links(0).a().device() == 3);
  CHECK(header.links(0).b().device() == -1);
  REQUIRE(header.links(0).ports_b_size() == 2);
  CHECK(header.links(0).ports_b(1) == 4'294'967'295u);
  REQUIRE(header.nics_size() == 2);
  CHECK(header.nics(0).numa_node() == -1);
  REQUIRE(header.capture_config().activities_size() == 4);
  CHECK(header.capture_config().activities(1).empty());
  CHECK(header.capture_config().nvtx());

  const pb::EventBatch batch = parseChunk(chunks[1]).batch();
  REQUIRE(batch.memcpys_size() == 1);
  REQUIRE(batch.nccl_operations_size() == 1);
  REQUIRE(batch.streams_size() == 1);
  REQUIRE(batch.kernels().duration_ns_size() == 1);
  REQUIRE(batch.kernels().graph_node_id_size() == 1);
  REQUIRE(batch.nvtx_events_size() == 1);
  CHECK(batch.memcpys(0).duration_ns() == 91'237);
  CHECK(batch.memcpys(0).copy_kind() == pb::COPY_PTOP);
  CHECK(batch.nccl_operations(0).root() == -1);
  CHECK(batch.nccl_operations(0).peer() == -2);
  CHECK(batch.nccl_operations(0).comm_hash() == 0x9e37'79b9'7f4a'7c15ull);
  CHECK(batch.streams(0).priority() == -5);
  CHECK(batch.kernels().duration_ns(0) == 123'457);
  CHECK(batch.kernels().graph_node_id(0) == 0xfedc'ba98'7654'3210ull);
  const auto& payload = batch.nvtx_events(0).payload();
  REQUIRE(payload.size() == 9);
  CHECK(payload[0].int_value() == -5'000'000'000ll);
  CHECK(payload[4].value_case() == pb::PayloadField::kIntValue);
  CHECK(payload[5].value_case() == pb::PayloadField::kUintValue);
  CHECK(payload[6].value_case() == pb::PayloadField::kDoubleValue);
  CHECK(payload[7].value_case() == pb::PayloadField::kStringIid);
  CHECK(payload[7].string_iid() == 0);

  const pb::Trailer trailer = parseChunk(chunks[2]).trailer();
  CHECK(trailer.end() == pb::END_SIGNAL);
  REQUIRE(trailer.warnings_size() == 3);
  CHECK(trailer.warnings(1).empty());
}

TEST_CASE("a batch of every record type is the message libprotobuf builds from the same records",
          "[format][compat]") {
  // Not byte-identical: the writer emits definitions (strings = 1, kernel_configs = 2,
  // api_functions = 19) as they come, then the columns, then row messages in arrival order, while
  // libprotobuf serializes in field-number order. Parsers accept any order, so compare messages.
  MemoryTrace trace;
  REQUIRE(trace.writer().writeHeader(sampleHeader()));
  std::vector<EventBatch> written;
  for (uint32_t variant = 0; variant < 3; ++variant) {
    written.push_back(addSampleBatch(trace.writer(), variant));
    REQUIRE(trace.writer().flush());
  }
  const std::vector<ChunkView> chunks = splitChunks(trace.bytes());
  REQUIRE(chunks.size() == 1 + written.size());
  KernelConfigs configs;
  for (size_t i = 0; i < written.size(); ++i) {
    INFO("batch " << i);
    const pb::EventBatch actual = parseChunk(chunks[1 + i]).batch();
    pb::EventBatch expected;
    *expected.mutable_strings() = actual.strings();
    toPb(written[i], configs, &expected);
    CHECK(differences(actual, expected) == "");
  }
}

TEST_CASE("header and trailer chunks are byte-identical to libprotobuf's serialization", "[format][compat]") {
  // Both are written in field-number order, so the bytes must match exactly.
  MemoryTrace trace;
  REQUIRE(trace.writer().writeHeader(sampleHeader()));
  REQUIRE(trace.writer().finish(sampleTrailer()));
  const std::vector<ChunkView> chunks = splitChunks(trace.bytes());
  REQUIRE(chunks.size() == 2);

  pb::Chunk header;
  toPb(sampleHeader(), header.mutable_header());
  CHECK(asString(chunks[0].payload) == header.SerializeAsString());

  pb::Chunk trailer;
  toPb(expectedTrailer(sampleTrailer(), {}), trailer.mutable_trailer());
  CHECK(asString(chunks[1].payload) == trailer.SerializeAsString());
}

TEST_CASE("row messages are byte-identical to libprotobuf's serialization", "[format][compat]") {
  // A batch with one kind of row and the strings it uses is in field-number order too: strings (1)
  // are defined before the rows (5..18).
  MemoryTrace trace;
  TraceWriter& writer = trace.writer();
  REQUIRE(writer.writeHeader(sampleHeader()));
  std::vector<MemcpyRecord> copies = {sampleMemcpy(0), sampleMemcpy(1), sampleMemcpy(2)};
  for (const auto& r : copies) writer.add(r);
  REQUIRE(writer.flush());
  std::vector<NvtxEventRecord> ranges = {sampleNvtxEvent(writer, 0), sampleNvtxEvent(writer, 1)};
  for (const auto& r : ranges) writer.add(r);
  REQUIRE(writer.flush());
  const std::vector<ChunkView> chunks = splitChunks(trace.bytes());
  REQUIRE(chunks.size() == 3);

  SECTION("memcpy") {
    pb::Chunk expected;
    for (const auto& r : copies) toPb(r, expected.mutable_batch()->add_memcpys());
    CHECK(asString(chunks[1].payload) == expected.SerializeAsString());
  }
  SECTION("NVTX with payload fields of every type, zeros included") {
    pb::Chunk expected;
    *expected.mutable_batch()->mutable_strings() = parseChunk(chunks[2]).batch().strings();
    for (const auto& r : ranges) toPb(r, expected.mutable_batch()->add_nvtx_events());
    CHECK(asString(chunks[2].payload) == expected.SerializeAsString());
  }
}

TEST_CASE("kernel and API call columns are byte-identical to libprotobuf's packed encoding", "[format][compat]") {
  MemoryTrace trace;
  TraceWriter& writer = trace.writer();
  REQUIRE(writer.writeHeader(sampleHeader()));
  std::vector<KernelRecord> kernels;
  for (uint32_t variant = 0; variant < 3; ++variant) kernels.push_back(sampleKernel(writer, variant));
  kernels.push_back(kernels[0]);  // a repeated configuration
  std::vector<ApiCallRecord> calls = {sampleApiCall(0), sampleApiCall(1), sampleApiCall(2)};
  // Names are interned above, so strings (1) come before kernel_configs (2), kernels (3), api_calls (4).
  for (const auto& k : kernels) writer.add(k);
  for (const auto& a : calls) writer.add(a);
  REQUIRE(writer.flush());
  const std::vector<ChunkView> chunks = splitChunks(trace.bytes());
  REQUIRE(chunks.size() == 2);

  pb::Chunk expected;
  pb::EventBatch* batch = expected.mutable_batch();
  *batch->mutable_strings() = parseChunk(chunks[1]).batch().strings();
  KernelConfigs configs;
  toPb(kernels, configs, batch);
  toPb(calls, batch);
  CHECK(batch->kernel_configs_size() == 3);
  CHECK(asString(chunks[1].payload) == expected.SerializeAsString());
}

TEST_CASE("optional columns are left out when every record has zero there", "[format][compat]") {
  MemoryTrace trace;
  TraceWriter& writer = trace.writer();
  REQUIRE(writer.writeHeader(sampleHeader()));
  KernelRecord kernel = sampleKernel(writer, 0);
  kernel.context = 0;
  kernel.graph_id = 0;
  kernel.graph_node_id = 0;
  ApiCallRecord call = sampleApiCall(0);
  call.return_code = 0;
  call.process_id = 0;
  writer.add(kernel);
  writer.add(call);
  REQUIRE(writer.flush());
  const std::vector<ChunkView> chunks = splitChunks(trace.bytes());
  REQUIRE(chunks.size() == 2);

  const pb::EventBatch batch = parseChunk(chunks[1]).batch();
  CHECK(batch.kernels().start_delta_ns_size() == 1);
  CHECK(batch.kernels().context_size() == 0);
  CHECK(batch.kernels().graph_id_size() == 0);
  CHECK(batch.kernels().graph_node_id_size() == 0);
  CHECK(batch.api_calls().return_code_size() == 0);
  CHECK(batch.api_calls().process_id_size() == 0);
  // ...and read back as zero.
  ReadResult result = readAll(trace.bytes());
  REQUIRE(result.batches.size() == 1);
  CHECK(result.batches[0].kernels == std::vector<KernelRecord>{kernel});
  CHECK(result.batches[0].api_calls == std::vector<ApiCallRecord>{call});
}

TEST_CASE("each chunk defines the kernel configurations its launches use", "[format][compat]") {
  WriterOptions options;
  options.max_records_per_chunk = 3;
  MemoryTrace trace(options);
  TraceWriter& writer = trace.writer();
  REQUIRE(writer.writeHeader(sampleHeader()));
  const KernelRecord a = sampleKernel(writer, 0), b = sampleKernel(writer, 1), c = sampleKernel(writer, 2);
  for (const KernelRecord& k : {a, b, a, /* next chunk */ c, a, c, /* next chunk */ b, c, a}) writer.add(k);
  REQUIRE(writer.flush());
  const std::vector<ChunkView> chunks = splitChunks(trace.bytes());
  REQUIRE(chunks.size() == 4);

  std::vector<std::vector<uint32_t>> defined, used;
  for (size_t i = 1; i < chunks.size(); ++i) {
    const pb::EventBatch batch = parseChunk(chunks[i]).batch();
    defined.emplace_back();
    for (const auto& config : batch.kernel_configs()) defined.back().push_back(config.id());
    used.emplace_back(batch.kernels().config_id().begin(), batch.kernels().config_id().end());
  }
  CHECK(defined == std::vector<std::vector<uint32_t>>{{1, 2}, {3, 1}, {2, 3, 1}});
  CHECK(used == std::vector<std::vector<uint32_t>>{{1, 2, 1}, {3, 1, 3}, {2, 3, 1}});
}

TEST_CASE("a damaged chunk takes only its own records: later chunks keep their names and configurations",
          "[format][compat]") {
  WriterOptions options;
  options.max_records_per_chunk = 3;
  MemoryTrace trace(options);
  TraceWriter& writer = trace.writer();
  REQUIRE(writer.writeHeader(sampleHeader()));
  const KernelRecord a = sampleKernel(writer, 0), b = sampleKernel(writer, 1);
  for (const KernelRecord& k : {a, b, a, b, a, b}) writer.add(k);
  NvtxEventRecord range;
  range.kind = NvtxEventKind::kRange;
  range.name_id = writer.intern("step 1");
  writer.add(range);
  REQUIRE(writer.flush());
  std::vector<uint8_t> bytes(trace.bytes().begin(), trace.bytes().end());
  const std::vector<ChunkView> chunks = splitChunks(bytes);
  REQUIRE(chunks.size() == 4);
  // Damage the first batch, which was the first to define everything.
  bytes[chunks[1].offset + kChunkHeaderSize + 2] ^= 0xFF;

  ReadResult result = readAll(bytes);
  REQUIRE(result.batches.size() == 2);
  CHECK(result.stats.damaged_chunks == 1);
  CHECK(result.stats.unresolved_references == 0);
  CHECK(result.batches[0].kernels == std::vector<KernelRecord>{b, a, b});
  TraceReader reader("damaged", bytes);
  EventBatch batch;
  std::vector<std::string> names;
  while (reader.next(batch)) {
    for (const auto& k : batch.kernels) names.emplace_back(reader.strings().get(k.name_id));
    for (const auto& e : batch.nvtx_events) names.emplace_back(reader.strings().get(e.name_id));
  }
  CHECK(names.size() == 4);
  for (const auto& name : names) CHECK(name.find("<missing") == std::string::npos);
  CHECK(names.back() == "step 1");
}

// ---------------------------------------------------------------------------------------------------
// Forward compatibility: what a newer minor version may add is skipped.

void appendChunk(std::vector<uint8_t>& file, const WireEncoder& payload) {
  auto header = encodeChunkHeader(Codec::kNone, static_cast<uint32_t>(payload.size()), payload.bytes());
  file.insert(file.end(), header.begin(), header.end());
  file.insert(file.end(), payload.bytes().begin(), payload.bytes().end());
}

TEST_CASE("a reader skips fields and chunk contents that a newer minor version adds", "[format][compat]") {
  using E = WireEncoder;
  std::vector<uint8_t> file;
  auto preamble = encodePreamble({static_cast<uint16_t>(kFormatMajor), static_cast<uint16_t>(kFormatMinor + 9)});
  file.insert(file.end(), preamble.begin(), preamble.end());

  E header;
  header.message(1, [](E& h) {
    h.uintField(1, kFormatMajor);
    h.intField(6, 3);                                      // rank
    h.message(17, [](E& d) { d.uintField(7, 132); d.uintField(30, 1); });  // sm_count, a new field
    h.stringField(26, "a field of minor version 9");
  });
  appendChunk(file, header);

  E batch;
  batch.message(2, [](E& b) {
    b.message(5, [](E& m) {
      m.uintField(1, 1'000);    // start_ns
      m.uintField(7, 4'096);    // bytes
      m.uintField(16, 77);      // new in Memcpy
    });
    b.message(20, [](E& n) { n.uintField(1, 5); });  // a new record type
  });
  appendChunk(file, batch);

  E unknown_content;
  unknown_content.message(4, [](E& x) { x.uintField(1, 1); });  // a new kind of chunk
  appendChunk(file, unknown_content);

  TraceReader reader("newer.gxt", file);
  CHECK(reader.version().minor == kFormatMinor + 9);
  CHECK(reader.header().rank == 3);
  REQUIRE(reader.header().devices.size() == 1);
  CHECK(reader.header().devices[0].sm_count == 132);
  ReadResult result = readAll(reader);
  REQUIRE(result.batches.size() == 1);
  REQUIRE(result.batches[0].memcpys.size() == 1);
  CHECK(result.batches[0].memcpys[0].bytes == 4'096);
  CHECK(result.batches[0].memcpys[0].end_ns == 1'000);
  REQUIRE(result.warnings.size() == 1);
  CHECK_THAT(result.warnings[0], Catch::Contains("holds nothing this reader knows (newer minor version?)"));
}

TEST_CASE("a reader of format 1.1 reads a 1.2 file with kernel metrics, skipping only them", "[format][compat]") {
  // Format 1.1's schema: today's without the KernelMetrics message, its EventBatch field and its
  // trailer category.
  google::protobuf::FileDescriptorProto schema;
  pb::Chunk::descriptor()->file()->CopyTo(&schema);
  auto& messages = *schema.mutable_message_type();
  for (int i = 0; i < messages.size(); ++i) {
    if (messages[i].name() == "KernelMetrics") {
      messages.DeleteSubrange(i, 1);
      break;
    }
  }
  for (auto& message : messages) {
    if (message.name() != "EventBatch") continue;
    auto& fields = *message.mutable_field();
    for (int i = 0; i < fields.size(); ++i) {
      if (fields[i].name() == "kernel_metrics") fields.DeleteSubrange(i--, 1);
    }
  }
  for (auto& e : *schema.mutable_enum_type()) {
    if (e.name() != "EventCategory") continue;
    auto& values = *e.mutable_value();
    for (int i = 0; i < values.size(); ++i) {
      if (values[i].name() == "CATEGORY_KERNEL_METRICS") values.DeleteSubrange(i--, 1);
    }
  }
  google::protobuf::DescriptorPool pool;
  const google::protobuf::FileDescriptor* old_file = pool.BuildFile(schema);
  REQUIRE(old_file != nullptr);
  const Descriptor* old_chunk = old_file->FindMessageTypeByName("Chunk");
  REQUIRE(old_chunk != nullptr);
  REQUIRE(old_file->FindMessageTypeByName("KernelMetrics") == nullptr);
  google::protobuf::DynamicMessageFactory factory(&pool);

  const std::vector<ChunkView> chunks = splitChunks(sampleFile());
  REQUIRE(chunks.size() == 3);
  std::unique_ptr<Message> batch(factory.GetPrototype(old_chunk)->New());
  const std::vector<uint8_t>& payload = chunks[1].payload;
  REQUIRE(batch->ParseFromArray(payload.data(), static_cast<int>(payload.size())));
  const FieldDescriptor* batch_field = old_chunk->FindFieldByName("batch");
  const Message& events = batch->GetReflection()->GetMessage(*batch, batch_field);
  const Descriptor* old_batch = events.GetDescriptor();
  // Everything 1.1 knows is there; the kernel metrics are unknown fields it skips.
  CHECK(events.GetReflection()->FieldSize(events, old_batch->FindFieldByName("memcpys")) == 1);
  CHECK(events.GetReflection()->FieldSize(events, old_batch->FindFieldByName("metric_samples")) == 1);
  const auto& unknown = events.GetReflection()->GetUnknownFields(events);
  REQUIRE(unknown.field_count() == 1);
  CHECK(unknown.field(0).number() == pb::EventBatch::kKernelMetricsFieldNumber);
}

}  // namespace
