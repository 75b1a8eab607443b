#include "tests/support/sample_records.h"

#include <string>

namespace gpuxray::testing {

using namespace gpuxray::format;

namespace {

// 2025-11-29 10:00:00.123456789 UTC on the capture clock.
constexpr uint64_t kT0 = 1'764'410'400'123'456'789ull;

std::string numbered(const char* prefix, uint32_t variant) { return prefix + std::to_string(variant); }

// Starts go down from one variant to the next, so consecutive records of a column have negative
// deltas as well as positive ones (the first record's delta is from zero).
uint64_t startFor(uint64_t offset, uint32_t variant) { return kT0 + offset + 9'000'017 - 3'000'001ull * variant; }

// Variant 0 lasts `length` ns; variant 1 ends before it starts (clock skew between CPU and GPU
// timestamps does produce that); variant 2 lasts no time at all.
uint64_t endFor(uint64_t start, uint32_t variant, uint64_t length) {
  switch (variant % 3) {
    case 0: return start + length;
    case 1: return start - (length / 7 + 1);
    default: return start;
  }
}

// Correlation ids jump between the top and the bottom of the uint32 range, so their deltas wrap.
uint32_t correlationFor(uint32_t low, uint32_t variant) {
  return variant % 2 == 0 ? 4'294'960'000u + low + variant : low + variant;
}

}  // namespace

DeviceProperties sampleDevice(uint32_t variant) {
  DeviceProperties d;
  d.device_id = 2 + variant;
  d.name = numbered("NVIDIA H200 #", variant);
  // Raw bytes, with a zero and bytes that are not UTF-8 (the field is `bytes`).
  d.uuid = std::string("\x00\xff\x8f\x2e\xc0\x01\x7f\x80", 8) + std::string(7, static_cast<char>(0xa0 + variant)) +
           std::string(1, '\0');
  d.pci_bus_id = numbered("0000:1", variant) + "8:00.0";
  d.compute_major = 9;
  d.compute_minor = 7;
  d.sm_count = 132;
  d.max_threads_per_sm = 2048;
  d.max_warps_per_sm = 64;
  d.max_blocks_per_sm = 31;
  d.registers_per_sm = 65'536;
  d.registers_per_block = 65'535;
  d.shared_memory_per_sm = 233'472;
  d.shared_memory_per_block = 49'152;
  d.shared_memory_per_block_optin = 232'448;
  d.reserved_shared_memory_per_block = 1'000;
  d.memory_bytes = 150'754'820'096ull;
  d.memory_bandwidth_bytes_per_s = 4'800'000'000'000ull;
  d.core_clock_khz = 1'980'000;
  d.memory_clock_khz = 2'619'000;
  d.memory_bus_width_bits = 6'144;
  d.l2_cache_bytes = 62'914'560;
  d.max_threads_per_block = 1'024;
  d.warp_size = 32;
  d.max_registers_per_thread = 255;
  d.numa_node = 5;
  d.mig_gpu_instance_id = 11;
  d.mig_compute_instance_id = 12;
  // -0.0 has a bit pattern and must survive as such.
  d.peak_bf16_flops = variant == 1 ? -0.0 : 989.4e12 + variant;
  return d;
}

Link sampleLink(uint32_t variant) {
  // The three variants use every LinkKind and every EndpointKind, devices -1 and -2, and ports
  // including 0 and UINT32_MAX.
  switch (variant % 3) {
    case 0:
      return {LinkKind::kNvLink, {EndpointKind::kGpu, "GPU-8f2ec001", 3}, {EndpointKind::kNvSwitch, "nvswitch-2", -1},
              4, 18, 450'000'000'000ull, {0, 1, 17}, {5, 4'294'967'295u}};
    case 1:
      return {LinkKind::kPcie, {EndpointKind::kCpu, "numa-1", -2}, {EndpointKind::kPcieBridge, "0000:17:00.0", -1},
              5, 16, 64'000'000'000ull, {9}, {}};
    default:
      return {LinkKind::kNetwork, {EndpointKind::kNic, "mlx5_3", -1}, {EndpointKind::kNvSwitch, "leaf-switch-4", -1},
              7, 2, 50'000'000'000ull, {}, {6, 8}};
  }
}

FileHeader sampleHeader(uint32_t variant) {
  FileHeader h;
  h.format_major = kFormatMajor;
  // The header's own copy of the minor version; readers go by the preamble, so any value round-trips.
  h.format_minor = 17;
  h.tool_version = "0.1.0-test";
  h.run_id = numbered("run-7f3a-", variant);
  h.run_id_source = "GPUXRAY_RUN_ID";
  h.rank = 37;
  h.local_rank = -1;
  h.world_size = 64;
  h.local_world_size = 8;
  h.rank_source = "SLURM_PROCID";
  h.hostname = "gpu-node-\xce\xb1" "17";  // UTF-8 alpha
  h.pid = 4'194'301;
  h.command_line = {"python3", "", "train.py", "--lr=3e-4"};
  h.start_time_ns = kT0;
  h.time_base = "cupti";
  h.clock_anchors = {sampleClockAnchor(7), sampleClockAnchor(8)};
  h.devices = {sampleDevice(0), sampleDevice(1)};
  h.links = {sampleLink(0), sampleLink(1), sampleLink(2)};
  h.nics = {
      {"mlx5_3", 2, 400'000'000'000ull, "0000:1a:00.0", "IB", -1},
      {"eth0", 1, 100'000'000'000ull, "0000:3b:00.1", "RoCE", 3},
  };
  CaptureConfig& c = h.capture_config;
  c.activities = {"kernel", "", "memcpy", "nvtx"};
  c.buffer_bytes = 8'388'608;
  c.max_buffer_memory_bytes = 1'073'741'825;
  c.flush_period_ms = 250;
  c.nccl_profiler = variant != 2;
  c.nvtx = variant != 1;
  c.metric_sampling = variant == 0;
  c.metric_interval_us = 500;
  c.metrics = {"sm__throughput.avg.pct_of_peak_sustained_elapsed", ""};
  c.options = {"GPUXRAY_FLUSH_MS=250", ""};
  h.simulated = true;
  h.simulation_inputs = R"({"model":"llama-70b","gpus":64})";
  h.cupti_api_version = 24;
  h.cuda_driver_version = 12'080;
  h.nccl_version = "2.27.3";
  h.nccl_capture_source = variant == 1 ? NcclCaptureSource::kProfilerPlugin : NcclCaptureSource::kNvtx;
  h.capture_window_plan = "cudaProfilerStart/Stop, every range";
  h.capture_windows = {{1'000 + variant, 90'000'000'000ull, WindowEdge::kProfilerApi, WindowEdge::kCaptureEnd, "w"}};
  return h;
}

Trailer sampleTrailer() {
  Trailer t;
  t.counts = {
      // The written count is the writer's business: this one must be replaced.
      {Category::kKernel, 999'999, 12},
      {Category::kNvtx, 0, 3},
      {Category::kNetTransfer, 0, 8'589'934'592ull},
      // Dropped counts of one category may come in several entries; they add up.
      {Category::kNvtx, 0, 4},
  };
  t.end = CaptureEnd::kSignal;
  t.end_time_ns = kT0 + 60'000'000'123ull;
  t.end_detail = "SIGTERM";
  t.warnings = {"cupti: 12 records with end=0", "", "nvtx: \xc3\xbc" "nbalanced pop"};
  return t;
}

Trailer expectedTrailer(const Trailer& given, const CategoryCounts& written) {
  CategoryCounts dropped{};
  for (const CategoryCount& c : given.counts) {
    if (static_cast<uint32_t>(c.category) < kCategoryCount) dropped[static_cast<uint32_t>(c.category)] += c.dropped;
  }
  Trailer expected = given;
  expected.counts.clear();
  for (uint32_t i = 1; i < kCategoryCount; ++i) {
    if (written[i] != 0 || dropped[i] != 0) expected.counts.push_back({static_cast<Category>(i), written[i], dropped[i]});
  }
  return expected;
}

KernelRecord sampleKernel(TraceWriter& writer, uint32_t variant) {
  KernelRecord k;
  k.start_ns = startFor(1'000, variant);
  k.end_ns = endFor(k.start_ns, variant, 123'457);
  k.device = 7 + variant;
  k.stream = 29;
  k.correlation_id = correlationFor(501, variant);
  k.context = 5;
  k.graph_id = 43;
  k.graph_node_id = 0xfedc'ba98'7654'3210ull + variant;
  k.name_id = writer.intern(numbered("void gemm_kernel<128, 256, ", variant) + ">(float const*, float*)");
  k.grid_x = 4'096 + variant;
  k.grid_y = 48;
  k.grid_z = 3;
  k.block_x = 256;
  k.block_y = 4;
  k.block_z = 5;
  k.registers_per_thread = 96;
  k.static_shared_memory = 12'288;
  k.dynamic_shared_memory = 65'536;
  k.local_memory_per_thread = 72;
  k.cluster_x = 8;
  k.cluster_y = 6;
  k.cluster_z = 9;
  k.shared_memory_optin = true;
  k.shared_memory_carveout_pct = 87;
  k.shared_memory_executed = 233'472;
  k.launch_type = 2;
  k.max_active_clusters = 15;
  return k;
}

ApiCallRecord sampleApiCall(uint32_t variant) {
  ApiCallRecord a;
  a.start_ns = startFor(2'000, variant);
  a.end_ns = endFor(a.start_ns, variant, 4'321);
  a.domain = variant % 2 == 0 ? ApiDomain::kDriver : ApiDomain::kRuntime;
  a.cbid = 211 + variant;
  a.thread_id = 0x7f12'3456'789a'bc00ull + variant;
  a.correlation_id = correlationFor(777, variant);
  a.return_code = 719;
  a.process_id = 4'194'301 + variant;
  return a;
}

ApiFunction sampleApiFunction(TraceWriter& writer, uint32_t variant) {
  ApiFunction f;
  f.domain = variant % 2 == 0 ? ApiDomain::kDriver : ApiDomain::kRuntime;
  f.cbid = 307 + variant;
  std::string name = numbered("cuLaunchKernelEx_v", variant);
  writer.defineApiFunction(f.domain, f.cbid, name);
  f.name_id = writer.intern(name);
  return f;
}

MemcpyRecord sampleMemcpy(uint32_t variant) {
  MemcpyRecord r;
  r.start_ns = startFor(3'000, variant);
  r.end_ns = endFor(r.start_ns, variant, 91'237);
  r.device = 14;
  r.stream = 19 + variant;
  r.correlation_id = correlationFor(880, variant);
  r.copy_kind = CopyKind::kPtoP;
  r.bytes = 8'589'946'937ull + variant;
  r.src_kind = MemoryKind::kDevice;
  r.dst_kind = MemoryKind::kManaged;
  r.src_device = 15;
  r.dst_device = 16;
  r.is_async = true;
  r.context = 21;
  r.graph_id = 33;
  r.graph_node_id = 0xffff'ffff'ffff'fffeull - variant;
  return r;
}

MemsetRecord sampleMemset(uint32_t variant) {
  MemsetRecord r;
  r.start_ns = startFor(4'000, variant);
  r.end_ns = endFor(r.start_ns, variant, 5'555);
  r.device = 8;
  r.stream = 20 + variant;
  r.correlation_id = correlationFor(990, variant);
  r.bytes = 6'442'450'944ull + variant;
  r.value = 171;
  r.memory_kind = MemoryKind::kDeviceStatic;
  r.context = 22;
  r.graph_id = 34;
  r.graph_node_id = (1ull << 62) + 5 + variant;
  return r;
}

MemoryEventRecord sampleMemoryEvent(uint32_t variant) {
  MemoryEventRecord r;
  r.timestamp_ns = startFor(5'000, variant);
  r.operation = variant % 2 == 0 ? MemoryOperation::kRelease : MemoryOperation::kAllocate;
  r.device = 9;
  r.address = 0x7f00'0000'1000ull + 0x1000ull * variant;
  r.bytes = 2'147'483'648ull + variant;
  r.memory_kind = MemoryKind::kManagedStatic;
  r.stream = 24;
  r.correlation_id = correlationFor(770, variant);
  r.is_async = true;
  r.pool_address = 0x7e00'0000'0000ull;
  return r;
}

NvtxEventRecord sampleNvtxEvent(TraceWriter& writer, uint32_t variant) {
  auto payloadField = [&](const char* name, PayloadField::Type type) {
    PayloadField f;
    f.name_id = writer.intern(name);
    f.type = type;
    return f;
  };
  NvtxEventRecord r;
  r.kind = variant % 2 == 0 ? NvtxEventKind::kRange : NvtxEventKind::kMark;
  r.start_ns = startFor(6'000, variant);
  r.end_ns = r.kind == NvtxEventKind::kMark ? r.start_ns : r.start_ns + 3'000'000'019ull;
  r.domain_id = writer.intern("NCCL");
  r.name_id = writer.intern(numbered("ncclAllReduce step ", variant));
  r.thread_id = 0x7f12'3456'0000'0099ull;
  r.device = 10;
  r.stream = 25;
  r.category = 6 + variant;
  r.color = 0xff76'b900u;
  r.payload_schema = (1ull << 24) + 5;
  r.depth = 4;

  PayloadField f = payloadField("bytes", PayloadField::Type::kInt);
  f.int_value = -5'000'000'000ll - variant;
  r.payload.push_back(f);
  f = payloadField("count", PayloadField::Type::kUint);
  f.uint_value = 0xffff'ffff'ffff'ffffull - variant;
  r.payload.push_back(f);
  f = payloadField("scale", PayloadField::Type::kDouble);
  f.double_value = 6.02214076e23 * (variant + 1);
  r.payload.push_back(f);
  f = payloadField("op", PayloadField::Type::kString);
  f.string_id = writer.intern("AllReduce");
  r.payload.push_back(f);
  // A oneof member holding its type's zero value is still set, and must come back with its type.
  r.payload.push_back(payloadField("zero_int", PayloadField::Type::kInt));
  r.payload.push_back(payloadField("zero_uint", PayloadField::Type::kUint));
  r.payload.push_back(payloadField("zero_double", PayloadField::Type::kDouble));
  r.payload.push_back(payloadField("empty_string", PayloadField::Type::kString));
  f = payloadField("negative_zero", PayloadField::Type::kDouble);
  f.double_value = -0.0;
  r.payload.push_back(f);
  return r;
}

SynchronizationRecord sampleSynchronization(uint32_t variant) {
  SynchronizationRecord r;
  r.start_ns = startFor(7'000, variant);
  r.end_ns = endFor(r.start_ns, variant, 250'001);
  r.kind = variant % 2 == 0 ? SynchronizationKind::kStreamWaitEvent : SynchronizationKind::kContextSynchronize;
  r.device = 11;
  r.stream = 26;
  r.correlation_id = correlationFor(660, variant);
  r.context = 23;
  r.cuda_event_id = 41 + variant;
  r.thread_id = 0x7f12'3456'0000'0001ull;
  return r;
}

NcclCommunicatorRecord sampleNcclCommunicator(uint32_t variant) {
  NcclCommunicatorRecord r;
  r.comm_hash = 0x9e37'79b9'7f4a'7c15ull + variant;
  r.name = numbered("dp-group-", variant);
  r.comm_rank = 27;
  r.nranks = 64;
  r.nnodes = 8;
  r.global_rank = -1;
  r.device = 12;
  r.init_ns = startFor(8'000, variant);
  r.profiler_version = 4;
  return r;
}

NcclOperationRecord sampleNcclOperation(TraceWriter& writer, uint32_t variant) {
  NcclOperationRecord r;
  r.kind = variant % 2 == 0 ? NcclOperationKind::kCollective : NcclOperationKind::kRecv;
  r.comm_hash = 0x9e37'79b9'7f4a'7c15ull + variant;
  r.seq = 1'000'001 + variant;
  r.func_id = writer.intern("AllReduce");
  r.enqueue_ns = startFor(9'000, variant);
  r.gpu_start_ns = r.enqueue_ns + 40'003;
  // The GPU end may precede the start after clock mapping; the fields are independent.
  r.gpu_end_ns = variant == 1 ? r.gpu_start_ns - 11 : r.gpu_start_ns + 1'500'007;
  r.bytes = (1ull << 34) + variant;
  r.count = 4'294'967'296ull + 77;
  r.datatype_id = writer.intern("bf16");
  r.root = -1;
  r.peer = -2 - static_cast<int32_t>(variant);
  r.algorithm_id = writer.intern("Ring");
  r.protocol_id = writer.intern("Simple");
  r.channels = 32;
  r.warps = 16;
  r.graph_captured = true;
  r.reduce_op_id = writer.intern("Sum");
  r.stream = 27;
  r.device = 13;
  r.operation_id = (1ull << 40) + 3 + variant;
  r.enqueue_end_ns = r.enqueue_ns + 9'001;
  r.gpu_clock_error_ns = 250;
  r.kernel_correlation_id = correlationFor(123, variant);
  r.gpu_clock_unmapped = variant % 2 == 0;
  return r;
}

NetTransferRecord sampleNetTransfer(uint32_t variant) {
  NetTransferRecord r;
  r.operation_id = (1ull << 40) + 3 + variant;
  r.peer = -3;
  r.channel = 17 + variant;
  r.is_send = true;
  r.bytes = 2'147'483'653ull;
  r.start_ns = startFor(10'000, variant);
  r.end_ns = variant == 1 ? r.start_ns - 1 : r.start_ns + 700'001;
  r.steps = 96;
  r.wait_gpu_ns = 12'000;
  r.wait_peer_ns = 34'000;
  r.wait_network_ns = 56'000;
  r.comm_hash = 0x9e37'79b9'7f4a'7c15ull + variant;
  return r;
}

KernelMetricsRecord sampleKernelMetrics(uint32_t variant) {
  KernelMetricsRecord r;
  r.correlation_id = 4'000 + variant;
  r.device = 3;
  r.passes = 8 + variant;
  r.achieved_occupancy_pct = 1.5 * 1e0 + variant;
  r.sm_throughput_pct = 2.5 * 1e1 + variant;
  r.tensor_pipe_pct = 3.5 * 1e2 + variant;
  r.dram_read_bytes = 4.5 * 1e3 + variant;
  r.dram_write_bytes = 5.5 * 1e4 + variant;
  r.l2_bytes = 6.5 * 1e5 + variant;
  r.l2_hit_rate_pct = 7.5 * 1e6 + variant;
  r.l1_bytes = 8.5 * 1e0 + variant;
  r.l1_hit_rate_pct = 9.5 * 1e1 + variant;
  r.shared_wavefronts = 10.5 * 1e2 + variant;
  r.local_load_bytes = 11.5 * 1e3 + variant;
  r.local_store_bytes = 12.5 * 1e4 + variant;
  r.gpu_duration_ns = 13.5 * 1e5 + variant;
  if (variant == 1) {
    r.tensor_pipe_pct = 0.0;
    r.l2_bytes.reset();
    r.l1_hit_rate_pct.reset();
    r.shared_wavefronts.reset();
    r.local_store_bytes.reset();
    r.gpu_duration_ns.reset();
  }
  return r;
}

MetricSampleRecord sampleMetricSample(TraceWriter& writer, uint32_t variant) {
  MetricSampleRecord r;
  r.timestamp_ns = startFor(11'000, variant);
  r.device = 15;
  r.metric_id = writer.intern("sm__throughput.avg.pct_of_peak_sustained_elapsed");
  r.value = variant == 1 ? -0.0 : -1.25e-300 * (variant + 1);
  return r;
}

ClockAnchor sampleClockAnchor(uint32_t variant) {
  ClockAnchor a;
  a.capture_ns = startFor(12'000, variant);
  a.realtime_ns = a.capture_ns + 37;
  a.monotonic_ns = 5'000'000'000ull + 1'000'003ull * variant;
  a.uncertainty_ns = 750 + variant;
  return a;
}

ExternalCorrelationRecord sampleExternalCorrelation(uint32_t variant) {
  ExternalCorrelationRecord r;
  r.kind = 5;
  r.external_id = 0x8000'0000'0000'0001ull + variant;
  r.correlation_id = correlationFor(321, variant);
  return r;
}

OverheadRecord sampleOverhead(uint32_t variant) {
  OverheadRecord r;
  r.kind = 2;
  r.start_ns = startFor(13'000, variant);
  r.end_ns = endFor(r.start_ns, variant, 80'000);
  r.thread_id = 0x7f12'3456'0000'0042ull;
  r.device = 16 + variant;
  return r;
}

ResourceNameRecord sampleResourceName(TraceWriter& writer, uint32_t variant) {
  ResourceNameRecord r;
  r.kind = variant % 2 == 0 ? ResourceKind::kStream : ResourceKind::kCudaEvent;
  r.id = 0x5555'0000'0000'0017ull + variant;
  r.device = 17;
  r.name_id = writer.intern(numbered("nccl stream ", variant));
  return r;
}

StreamRecord sampleStream(uint32_t variant) {
  StreamRecord r;
  r.stream = 28 + variant;
  r.device = 18;
  r.context = 24;
  r.priority = -5;
  r.flags = 2;
  r.correlation_id = correlationFor(550, variant);
  return r;
}

EventBatch addSampleBatch(TraceWriter& writer, uint32_t variant) {
  EventBatch b;
  auto add = [&](auto record, auto& list) {
    writer.add(record);
    list.push_back(record);
  };
  b.api_functions.push_back(sampleApiFunction(writer, variant));
  add(sampleKernel(writer, variant), b.kernels);
  add(sampleApiCall(variant), b.api_calls);
  add(sampleMemcpy(variant), b.memcpys);
  add(sampleMemset(variant), b.memsets);
  add(sampleMemoryEvent(variant), b.memory_events);
  add(sampleNvtxEvent(writer, variant), b.nvtx_events);
  add(sampleSynchronization(variant), b.synchronizations);
  add(sampleNcclCommunicator(variant), b.nccl_communicators);
  add(sampleNcclOperation(writer, variant), b.nccl_operations);
  add(sampleNetTransfer(variant), b.net_transfers);
  add(sampleMetricSample(writer, variant), b.metric_samples);
  add(sampleKernelMetrics(variant), b.kernel_metrics);
  add(sampleClockAnchor(variant), b.clock_anchors);
  add(sampleExternalCorrelation(variant), b.external_correlations);
  add(sampleOverhead(variant), b.overheads);
  add(sampleResourceName(writer, variant), b.resource_names);
  add(sampleStream(variant), b.streams);
  add(sampleDevice(variant + 2), b.devices);
  add(sampleLink(variant), b.links);
  add(CaptureWindow{5'000'000 + variant, 7'000'000'000ull + variant, WindowEdge::kStep, WindowEdge::kTrigger,
                    "ProfilerStep#" + std::to_string(variant)},
      b.capture_windows);
  return b;
}

void internFillerStrings(TraceWriter& writer, uint32_t count) {
  for (uint32_t i = 0; i < count; ++i) writer.intern(numbered("filler ", i));
}

}  // namespace gpuxray::testing
