#include "tests/support/record_printing.h"

#include <cmath>
#include <cstdio>
#include <optional>
#include <sstream>
#include <type_traits>
#include <vector>

namespace gpuxray::testing {

using namespace gpuxray::format;

namespace {

void put(std::ostringstream& out, const std::string& s) {
  out << '"';
  for (char c : s) {
    auto byte = static_cast<unsigned char>(c);
    if (byte == '"' || byte == '\\') {
      out << '\\' << c;
    } else if (byte >= 0x20 && byte < 0x7f) {
      out << c;
    } else {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", byte);
      out << escaped;
    }
  }
  out << '"';
}

void put(std::ostringstream& out, double d) {
  char text[64];
  std::snprintf(text, sizeof text, "%.17g (%s%a)", d, std::signbit(d) && d == 0 ? "negative zero, " : "", d);
  out << text;
}

void put(std::ostringstream& out, bool b) { out << (b ? "true" : "false"); }

void put(std::ostringstream& out, const std::optional<double>& d) {
  if (d) {
    put(out, *d);
  } else {
    out << "unset";
  }
}

template <typename T>
void put(std::ostringstream& out, const T& v) {
  if constexpr (std::is_enum_v<T>) {
    out << static_cast<std::underlying_type_t<T>>(v);
  } else if constexpr (std::is_integral_v<T>) {
    out << +v;
  } else {
    out << describe(v);
  }
}

template <typename T>
void put(std::ostringstream& out, const std::vector<T>& list) {
  out << '[';
  for (size_t i = 0; i < list.size(); ++i) {
    if (i > 0) out << ", ";
    put(out, list[i]);
  }
  out << ']';
}

// Builds "Type{name=value, ...}".
class Fields {
 public:
  explicit Fields(const char* type) { out_ << type << '{'; }
  template <typename T>
  Fields& operator()(const char* name, const T& value) {
    if (!first_) out_ << ", ";
    first_ = false;
    out_ << name << '=';
    put(out_, value);
    return *this;
  }
  std::string str() { return out_.str() + '}'; }

 private:
  std::ostringstream out_;
  bool first_ = true;
};

}  // namespace

std::string describe(const ClockAnchor& v) {
  return Fields("ClockAnchor")("capture_ns", v.capture_ns)("realtime_ns", v.realtime_ns)(
             "monotonic_ns", v.monotonic_ns)("uncertainty_ns", v.uncertainty_ns)
      .str();
}

std::string describe(const DeviceProperties& v) {
  return Fields("DeviceProperties")("device_id", v.device_id)("name", v.name)("uuid", v.uuid)(
             "pci_bus_id", v.pci_bus_id)("compute_major", v.compute_major)("compute_minor", v.compute_minor)(
             "sm_count", v.sm_count)("max_threads_per_sm", v.max_threads_per_sm)(
             "max_warps_per_sm", v.max_warps_per_sm)("max_blocks_per_sm", v.max_blocks_per_sm)(
             "registers_per_sm", v.registers_per_sm)("registers_per_block", v.registers_per_block)(
             "shared_memory_per_sm", v.shared_memory_per_sm)("shared_memory_per_block", v.shared_memory_per_block)(
             "shared_memory_per_block_optin", v.shared_memory_per_block_optin)(
             "reserved_shared_memory_per_block", v.reserved_shared_memory_per_block)("memory_bytes", v.memory_bytes)(
             "memory_bandwidth_bytes_per_s", v.memory_bandwidth_bytes_per_s)("core_clock_khz", v.core_clock_khz)(
             "memory_clock_khz", v.memory_clock_khz)("memory_bus_width_bits", v.memory_bus_width_bits)(
             "l2_cache_bytes", v.l2_cache_bytes)("max_threads_per_block", v.max_threads_per_block)(
             "warp_size", v.warp_size)("max_registers_per_thread", v.max_registers_per_thread)(
             "numa_node", v.numa_node)("mig_gpu_instance_id", v.mig_gpu_instance_id)(
             "mig_compute_instance_id", v.mig_compute_instance_id)("peak_bf16_flops", v.peak_bf16_flops)
      .str();
}

std::string describe(const Endpoint& v) {
  return Fields("Endpoint")("kind", v.kind)("id", v.id)("device", v.device).str();
}

std::string describe(const Link& v) {
  return Fields("Link")("kind", v.kind)("a", v.a)("b", v.b)("version", v.version)("width", v.width)(
             "bandwidth_bytes_per_s", v.bandwidth_bytes_per_s)("ports_a", v.ports_a)("ports_b", v.ports_b)
      .str();
}

std::string describe(const NetworkInterface& v) {
  return Fields("NetworkInterface")("name", v.name)("port", v.port)("bandwidth_bytes_per_s", v.bandwidth_bytes_per_s)(
             "pci_bus_id", v.pci_bus_id)("transport", v.transport)("numa_node", v.numa_node)
      .str();
}

std::string describe(const CaptureConfig& v) {
  return Fields("CaptureConfig")("activities", v.activities)("buffer_bytes", v.buffer_bytes)(
             "max_buffer_memory_bytes", v.max_buffer_memory_bytes)("flush_period_ms", v.flush_period_ms)(
             "nccl_profiler", v.nccl_profiler)("nvtx", v.nvtx)("metric_sampling", v.metric_sampling)(
             "metric_interval_us", v.metric_interval_us)("metrics", v.metrics)("options", v.options)
      .str();
}

std::string describe(const FileHeader& v) {
  return Fields("FileHeader")("format_major", v.format_major)("format_minor", v.format_minor)(
             "tool_version", v.tool_version)("run_id", v.run_id)("run_id_source", v.run_id_source)("rank", v.rank)(
             "local_rank", v.local_rank)("world_size", v.world_size)("local_world_size", v.local_world_size)(
             "rank_source", v.rank_source)("hostname", v.hostname)("pid", v.pid)("command_line", v.command_line)(
             "start_time_ns", v.start_time_ns)("time_base", v.time_base)("clock_anchors", v.clock_anchors)(
             "devices", v.devices)("links", v.links)("nics", v.nics)("capture_config", v.capture_config)(
             "simulated", v.simulated)("simulation_inputs", v.simulation_inputs)(
             "cupti_api_version", v.cupti_api_version)("cuda_driver_version", v.cuda_driver_version)(
             "nccl_version", v.nccl_version)("nccl_capture_source", std::string(ncclCaptureSourceName(v.nccl_capture_source)))
      .str();
}

std::string describe(const KernelRecord& v) {
  return Fields("KernelRecord")("start_ns", v.start_ns)("end_ns", v.end_ns)("device", v.device)("stream", v.stream)(
             "correlation_id", v.correlation_id)("context", v.context)("graph_id", v.graph_id)(
             "graph_node_id", v.graph_node_id)("name_id", v.name_id)("grid_x", v.grid_x)("grid_y", v.grid_y)(
             "grid_z", v.grid_z)("block_x", v.block_x)("block_y", v.block_y)("block_z", v.block_z)(
             "registers_per_thread", v.registers_per_thread)("static_shared_memory", v.static_shared_memory)(
             "dynamic_shared_memory", v.dynamic_shared_memory)("local_memory_per_thread", v.local_memory_per_thread)(
             "cluster_x", v.cluster_x)("cluster_y", v.cluster_y)("cluster_z", v.cluster_z)(
             "shared_memory_optin", v.shared_memory_optin)("shared_memory_carveout_pct", v.shared_memory_carveout_pct)(
             "shared_memory_executed", v.shared_memory_executed)("launch_type", v.launch_type)(
             "max_active_clusters", v.max_active_clusters)
      .str();
}

std::string describe(const ApiCallRecord& v) {
  return Fields("ApiCallRecord")("start_ns", v.start_ns)("end_ns", v.end_ns)("domain", v.domain)("cbid", v.cbid)(
             "thread_id", v.thread_id)("correlation_id", v.correlation_id)("return_code", v.return_code)(
             "process_id", v.process_id)
      .str();
}

std::string describe(const ApiFunction& v) {
  return Fields("ApiFunction")("domain", v.domain)("cbid", v.cbid)("name_id", v.name_id).str();
}

std::string describe(const MemcpyRecord& v) {
  return Fields("MemcpyRecord")("start_ns", v.start_ns)("end_ns", v.end_ns)("device", v.device)("stream", v.stream)(
             "correlation_id", v.correlation_id)("copy_kind", v.copy_kind)("bytes", v.bytes)("src_kind", v.src_kind)(
             "dst_kind", v.dst_kind)("src_device", v.src_device)("dst_device", v.dst_device)("is_async", v.is_async)(
             "context", v.context)("graph_id", v.graph_id)("graph_node_id", v.graph_node_id)
      .str();
}

std::string describe(const MemsetRecord& v) {
  return Fields("MemsetRecord")("start_ns", v.start_ns)("end_ns", v.end_ns)("device", v.device)("stream", v.stream)(
             "correlation_id", v.correlation_id)("bytes", v.bytes)("value", v.value)("memory_kind", v.memory_kind)(
             "context", v.context)("graph_id", v.graph_id)("graph_node_id", v.graph_node_id)
      .str();
}

std::string describe(const MemoryEventRecord& v) {
  return Fields("MemoryEventRecord")("timestamp_ns", v.timestamp_ns)("operation", v.operation)("device", v.device)(
             "address", v.address)("bytes", v.bytes)("memory_kind", v.memory_kind)("stream", v.stream)(
             "correlation_id", v.correlation_id)("is_async", v.is_async)("pool_address", v.pool_address)
      .str();
}

std::string describe(const PayloadField& v) {
  static const char* const kTypes[] = {"int", "uint", "double", "string"};
  auto type = static_cast<size_t>(v.type);
  return Fields("PayloadField")("name_id", v.name_id)("type", std::string(type < 4 ? kTypes[type] : "?"))(
             "int_value", v.int_value)("uint_value", v.uint_value)("double_value", v.double_value)(
             "string_id", v.string_id)
      .str();
}

std::string describe(const NvtxEventRecord& v) {
  return Fields("NvtxEventRecord")("kind", v.kind)("start_ns", v.start_ns)("end_ns", v.end_ns)(
             "domain_id", v.domain_id)("name_id", v.name_id)("thread_id", v.thread_id)("device", v.device)(
             "stream", v.stream)("category", v.category)("color", v.color)("payload_schema", v.payload_schema)(
             "payload", v.payload)("depth", v.depth)
      .str();
}

std::string describe(const SynchronizationRecord& v) {
  return Fields("SynchronizationRecord")("start_ns", v.start_ns)("end_ns", v.end_ns)("kind", v.kind)(
             "device", v.device)("stream", v.stream)("correlation_id", v.correlation_id)("context", v.context)(
             "cuda_event_id", v.cuda_event_id)("thread_id", v.thread_id)
      .str();
}

std::string describe(const NcclCommunicatorRecord& v) {
  return Fields("NcclCommunicatorRecord")("comm_hash", v.comm_hash)("name", v.name)("comm_rank", v.comm_rank)(
             "nranks", v.nranks)("nnodes", v.nnodes)("global_rank", v.global_rank)("device", v.device)(
             "init_ns", v.init_ns)("profiler_version", v.profiler_version)
      .str();
}

std::string describe(const NcclOperationRecord& v) {
  return Fields("NcclOperationRecord")("kind", v.kind)("comm_hash", v.comm_hash)("seq", v.seq)("func_id", v.func_id)(
             "enqueue_ns", v.enqueue_ns)("gpu_start_ns", v.gpu_start_ns)("gpu_end_ns", v.gpu_end_ns)("bytes", v.bytes)(
             "count", v.count)("datatype_id", v.datatype_id)("root", v.root)("peer", v.peer)(
             "algorithm_id", v.algorithm_id)("protocol_id", v.protocol_id)("channels", v.channels)("warps", v.warps)(
             "graph_captured", v.graph_captured)("reduce_op_id", v.reduce_op_id)("stream", v.stream)(
             "device", v.device)("operation_id", v.operation_id)("enqueue_end_ns", v.enqueue_end_ns)(
             "gpu_clock_error_ns", v.gpu_clock_error_ns)("kernel_correlation_id", v.kernel_correlation_id)(
             "gpu_clock_unmapped", v.gpu_clock_unmapped)
      .str();
}

std::string describe(const NetTransferRecord& v) {
  return Fields("NetTransferRecord")("operation_id", v.operation_id)("peer", v.peer)("channel", v.channel)(
             "is_send", v.is_send)("bytes", v.bytes)("start_ns", v.start_ns)("end_ns", v.end_ns)("steps", v.steps)(
             "wait_gpu_ns", v.wait_gpu_ns)("wait_peer_ns", v.wait_peer_ns)("wait_network_ns", v.wait_network_ns)(
             "comm_hash", v.comm_hash)
      .str();
}

std::string describe(const MetricSampleRecord& v) {
  return Fields("MetricSampleRecord")("timestamp_ns", v.timestamp_ns)("device", v.device)("metric_id", v.metric_id)(
             "value", v.value)
      .str();
}

std::string describe(const KernelMetricsRecord& v) {
  return Fields("KernelMetricsRecord")("correlation_id", v.correlation_id)("device", v.device)("passes", v.passes)(
             "achieved_occupancy_pct", v.achieved_occupancy_pct)("sm_throughput_pct", v.sm_throughput_pct)(
             "tensor_pipe_pct", v.tensor_pipe_pct)("dram_read_bytes", v.dram_read_bytes)(
             "dram_write_bytes", v.dram_write_bytes)("l2_bytes", v.l2_bytes)("l2_hit_rate_pct", v.l2_hit_rate_pct)(
             "l1_bytes", v.l1_bytes)("l1_hit_rate_pct", v.l1_hit_rate_pct)("shared_wavefronts", v.shared_wavefronts)(
             "local_load_bytes", v.local_load_bytes)("local_store_bytes", v.local_store_bytes)("gpu_duration_ns",
                                                                                               v.gpu_duration_ns)
      .str();
}

std::string describe(const ExternalCorrelationRecord& v) {
  return Fields("ExternalCorrelationRecord")("kind", v.kind)("external_id", v.external_id)(
             "correlation_id", v.correlation_id)
      .str();
}

std::string describe(const OverheadRecord& v) {
  return Fields("OverheadRecord")("kind", v.kind)("start_ns", v.start_ns)("end_ns", v.end_ns)(
             "thread_id", v.thread_id)("device", v.device)
      .str();
}

std::string describe(const ResourceNameRecord& v) {
  return Fields("ResourceNameRecord")("kind", v.kind)("id", v.id)("device", v.device)("name_id", v.name_id).str();
}

std::string describe(const StreamRecord& v) {
  return Fields("StreamRecord")("stream", v.stream)("device", v.device)("context", v.context)(
             "priority", v.priority)("flags", v.flags)("correlation_id", v.correlation_id)
      .str();
}

std::string describe(const CategoryCount& v) {
  return Fields("CategoryCount")("category", std::string(categoryName(v.category)))("written", v.written)(
             "dropped", v.dropped)
      .str();
}

std::string describe(const Trailer& v) {
  return Fields("Trailer")("counts", v.counts)("end", std::string(captureEndName(v.end)))(
             "end_time_ns", v.end_time_ns)("end_detail", v.end_detail)("warnings", v.warnings)
      .str();
}

std::string describe(const EventBatch& v) {
  return Fields("EventBatch")("kernels", v.kernels.size())("api_calls", v.api_calls.size())(
             "memcpys", v.memcpys.size())("memsets", v.memsets.size())("memory_events", v.memory_events.size())(
             "nvtx_events", v.nvtx_events.size())("synchronizations", v.synchronizations.size())(
             "nccl_communicators", v.nccl_communicators.size())("nccl_operations", v.nccl_operations.size())(
             "net_transfers", v.net_transfers.size())("metric_samples", v.metric_samples.size())(
             "clock_anchors", v.clock_anchors.size())("external_correlations", v.external_correlations.size())(
             "overheads", v.overheads.size())("resource_names", v.resource_names.size())("streams", v.streams.size())(
             "api_functions", v.api_functions.size())("devices", v.devices.size())("links", v.links.size())(
             "kernel_metrics", v.kernel_metrics.size())
      .str();
}

}  // namespace gpuxray::testing

namespace gpuxray::testing {

void checkSameBatch(const format::EventBatch& actual, const format::EventBatch& expected) {
#define GPUXRAY_CHECK_LIST(list) \
  {                              \
    INFO("EventBatch::" #list);  \
    checkSameRecords(actual.list, expected.list); \
  }
  GPUXRAY_CHECK_LIST(kernels)
  GPUXRAY_CHECK_LIST(api_calls)
  GPUXRAY_CHECK_LIST(memcpys)
  GPUXRAY_CHECK_LIST(memsets)
  GPUXRAY_CHECK_LIST(memory_events)
  GPUXRAY_CHECK_LIST(nvtx_events)
  GPUXRAY_CHECK_LIST(synchronizations)
  GPUXRAY_CHECK_LIST(nccl_communicators)
  GPUXRAY_CHECK_LIST(nccl_operations)
  GPUXRAY_CHECK_LIST(net_transfers)
  GPUXRAY_CHECK_LIST(metric_samples)
  GPUXRAY_CHECK_LIST(clock_anchors)
  GPUXRAY_CHECK_LIST(external_correlations)
  GPUXRAY_CHECK_LIST(overheads)
  GPUXRAY_CHECK_LIST(resource_names)
  GPUXRAY_CHECK_LIST(streams)
  GPUXRAY_CHECK_LIST(api_functions)
  GPUXRAY_CHECK_LIST(devices)
  GPUXRAY_CHECK_LIST(links)
  GPUXRAY_CHECK_LIST(kernel_metrics)
#undef GPUXRAY_CHECK_LIST
  // Catches a list added to EventBatch but not above.
  CHECK(actual == expected);
}

}  // namespace gpuxray::testing
