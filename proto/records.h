// The in-memory form of a gpuxray trace file: what the writer takes and the reader returns.
// It mirrors gpuxray.proto message by message, with plain types, so that the injection library can
// write files without libprotobuf. Enum values are the wire values (checked against the generated
// code in tests/format_compat_test.cc).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpuxray::format {

inline constexpr uint32_t kFormatMajor = 1;
inline constexpr uint32_t kFormatMinor = 2;

// String ids index the file's string table; 0 is the empty string.
using StringId = uint32_t;

struct ClockAnchor {
  uint64_t capture_ns = 0;
  uint64_t realtime_ns = 0;
  uint64_t monotonic_ns = 0;
  uint64_t uncertainty_ns = 0;
  bool operator==(const ClockAnchor&) const = default;
};

struct DeviceProperties {
  uint32_t device_id = 0;
  std::string name;
  std::string uuid;  // 16 raw bytes
  std::string pci_bus_id;
  uint32_t compute_major = 0;
  uint32_t compute_minor = 0;
  uint32_t sm_count = 0;
  uint32_t max_threads_per_sm = 0;
  uint32_t max_warps_per_sm = 0;
  uint32_t max_blocks_per_sm = 0;
  uint32_t registers_per_sm = 0;
  uint32_t registers_per_block = 0;
  uint64_t shared_memory_per_sm = 0;
  uint64_t shared_memory_per_block = 0;
  uint64_t shared_memory_per_block_optin = 0;
  uint64_t reserved_shared_memory_per_block = 0;
  uint64_t memory_bytes = 0;
  uint64_t memory_bandwidth_bytes_per_s = 0;
  uint32_t core_clock_khz = 0;
  uint32_t memory_clock_khz = 0;
  uint32_t memory_bus_width_bits = 0;
  uint64_t l2_cache_bytes = 0;
  uint32_t max_threads_per_block = 0;
  uint32_t warp_size = 0;
  uint32_t max_registers_per_thread = 0;
  uint32_t numa_node = 0;
  uint32_t mig_gpu_instance_id = 0;
  uint32_t mig_compute_instance_id = 0;
  double peak_bf16_flops = 0;
  bool operator==(const DeviceProperties&) const = default;
};

enum class EndpointKind : uint32_t { kUnknown = 0, kGpu = 1, kCpu = 2, kNvSwitch = 3, kPcieBridge = 4, kNic = 5 };

struct Endpoint {
  EndpointKind kind = EndpointKind::kUnknown;
  std::string id;
  int32_t device = -1;
  bool operator==(const Endpoint&) const = default;
};

enum class LinkKind : uint32_t { kUnknown = 0, kNvLink = 1, kPcie = 2, kNetwork = 3 };

struct Link {
  LinkKind kind = LinkKind::kUnknown;
  Endpoint a;
  Endpoint b;
  uint32_t version = 0;
  uint32_t width = 0;
  uint64_t bandwidth_bytes_per_s = 0;
  std::vector<uint32_t> ports_a;
  std::vector<uint32_t> ports_b;
  bool operator==(const Link&) const = default;
};

struct NetworkInterface {
  std::string name;
  uint32_t port = 0;
  uint64_t bandwidth_bytes_per_s = 0;
  std::string pci_bus_id;
  std::string transport;
  int32_t numa_node = -1;
  bool operator==(const NetworkInterface&) const = default;
};

struct CaptureConfig {
  std::vector<std::string> activities;
  uint64_t buffer_bytes = 0;
  uint64_t max_buffer_memory_bytes = 0;
  uint32_t flush_period_ms = 0;
  bool nccl_profiler = false;
  bool nvtx = false;
  bool metric_sampling = false;
  uint32_t metric_interval_us = 0;
  std::vector<std::string> metrics;
  std::vector<std::string> options;
  bool operator==(const CaptureConfig&) const = default;
};

// Where NCCL's operations come from (see gpuxray.proto).
enum class NcclCaptureSource : uint32_t { kUnknown = 0, kNone = 1, kProfilerPlugin = 2, kNvtx = 3 };

// "profiler-plugin", "nvtx", "none", "unknown": the name used in reports and JSON.
const char* ncclCaptureSourceName(NcclCaptureSource source);

// What opened or closed a capture window (see gpuxray.proto's WindowEdge).
enum class WindowEdge : uint32_t {
  kUnknown = 0, kCaptureStart = 1, kCaptureEnd = 2, kDelay = 3, kDuration = 4, kProfilerApi = 5, kNvtxRange = 6,
  kStep = 7, kTrigger = 8,
};

// "capture start", "cudaProfilerStart/Stop", ...: the name used in reports.
const char* windowEdgeName(WindowEdge edge);

// A stretch of time in which the capture recorded GPU activity; outside every window it recorded
// none (a file written without windows captured all along).
struct CaptureWindow {
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  WindowEdge started_by = WindowEdge::kUnknown;
  WindowEdge ended_by = WindowEdge::kUnknown;
  // E.g. "ProfilerStep#100" or "trigger for 10 s".
  std::string detail;
  bool operator==(const CaptureWindow&) const = default;
};

struct FileHeader {
  uint32_t format_major = kFormatMajor;
  uint32_t format_minor = kFormatMinor;
  std::string tool_version;
  std::string run_id;
  std::string run_id_source;
  int32_t rank = -1;
  int32_t local_rank = -1;
  int32_t world_size = 0;
  int32_t local_world_size = 0;
  std::string rank_source;
  std::string hostname;
  uint32_t pid = 0;
  std::vector<std::string> command_line;
  uint64_t start_time_ns = 0;
  std::string time_base;
  std::vector<ClockAnchor> clock_anchors;
  std::vector<DeviceProperties> devices;
  std::vector<Link> links;
  std::vector<NetworkInterface> nics;
  CaptureConfig capture_config;
  bool simulated = false;
  std::string simulation_inputs;
  uint32_t cupti_api_version = 0;
  uint32_t cuda_driver_version = 0;
  std::string nccl_version;
  NcclCaptureSource nccl_capture_source = NcclCaptureSource::kUnknown;
  // The windows asked for ("" = the whole run), and those that closed (EventBatch.capture_windows
  // carries the ones that close later; the loader appends them here).
  std::string capture_window_plan;
  std::vector<CaptureWindow> capture_windows;
  bool operator==(const FileHeader&) const = default;
};

// Which id a file gave a kernel's launch configuration: equal whatever it holds.
struct FileConfigId {
  uint32_t value = 0;
  bool operator==(const FileConfigId&) const { return true; }
};

// A kernel launch with its full configuration. The writer interns the configuration part
// (name_id .. max_active_clusters) so repeated launches cost a few bytes each.
struct KernelRecord {
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  uint32_t device = 0;
  uint32_t stream = 0;
  uint32_t correlation_id = 0;
  uint32_t context = 0;
  uint32_t graph_id = 0;
  uint64_t graph_node_id = 0;
  StringId name_id = 0;
  // Set by the reader: the file's id of the launch configuration (name and the fields below), the same
  // for every kernel launched with it; 0 when the kernel has none or the file does not define it. The
  // writer assigns its own, so it is no part of what the kernel was (records compare equal without it).
  FileConfigId config_id;
  uint32_t grid_x = 0, grid_y = 0, grid_z = 0;
  uint32_t block_x = 0, block_y = 0, block_z = 0;
  uint32_t registers_per_thread = 0;
  uint32_t static_shared_memory = 0;
  uint32_t dynamic_shared_memory = 0;
  uint32_t local_memory_per_thread = 0;
  uint32_t cluster_x = 0, cluster_y = 0, cluster_z = 0;
  bool shared_memory_optin = false;
  uint32_t shared_memory_carveout_pct = 0;
  uint32_t shared_memory_executed = 0;
  uint32_t launch_type = 0;
  uint32_t max_active_clusters = 0;
  bool operator==(const KernelRecord&) const = default;
};

enum class ApiDomain : uint32_t { kUnknown = 0, kRuntime = 1, kDriver = 2 };

struct ApiCallRecord {
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  ApiDomain domain = ApiDomain::kUnknown;
  uint32_t cbid = 0;
  uint64_t thread_id = 0;
  uint32_t correlation_id = 0;
  uint32_t return_code = 0;
  uint32_t process_id = 0;
  bool operator==(const ApiCallRecord&) const = default;
};

struct ApiFunction {
  ApiDomain domain = ApiDomain::kUnknown;
  uint32_t cbid = 0;
  StringId name_id = 0;
  bool operator==(const ApiFunction&) const = default;
};

enum class CopyKind : uint32_t {
  kUnknown = 0, kHtoD = 1, kDtoH = 2, kHtoA = 3, kAtoH = 4, kAtoA = 5,
  kAtoD = 6, kDtoA = 7, kDtoD = 8, kHtoH = 9, kPtoP = 10,
};

enum class MemoryKind : uint32_t {
  kUnknown = 0, kPageable = 1, kPinned = 2, kDevice = 3, kArray = 4,
  kManaged = 5, kDeviceStatic = 6, kManagedStatic = 7,
};

struct MemcpyRecord {
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  uint32_t device = 0;
  uint32_t stream = 0;
  uint32_t correlation_id = 0;
  CopyKind copy_kind = CopyKind::kUnknown;
  uint64_t bytes = 0;
  MemoryKind src_kind = MemoryKind::kUnknown;
  MemoryKind dst_kind = MemoryKind::kUnknown;
  uint32_t src_device = 0;
  uint32_t dst_device = 0;
  bool is_async = false;
  uint32_t context = 0;
  uint32_t graph_id = 0;
  uint64_t graph_node_id = 0;
  bool operator==(const MemcpyRecord&) const = default;
};

struct MemsetRecord {
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  uint32_t device = 0;
  uint32_t stream = 0;
  uint32_t correlation_id = 0;
  uint64_t bytes = 0;
  uint32_t value = 0;
  MemoryKind memory_kind = MemoryKind::kUnknown;
  uint32_t context = 0;
  uint32_t graph_id = 0;
  uint64_t graph_node_id = 0;
  bool operator==(const MemsetRecord&) const = default;
};

enum class MemoryOperation : uint32_t { kUnknown = 0, kAllocate = 1, kRelease = 2 };

struct MemoryEventRecord {
  uint64_t timestamp_ns = 0;
  MemoryOperation operation = MemoryOperation::kUnknown;
  uint32_t device = 0;
  uint64_t address = 0;
  uint64_t bytes = 0;
  MemoryKind memory_kind = MemoryKind::kUnknown;
  uint32_t stream = 0;
  uint32_t correlation_id = 0;
  bool is_async = false;
  uint64_t pool_address = 0;
  bool operator==(const MemoryEventRecord&) const = default;
};

struct PayloadField {
  enum class Type : uint8_t { kInt, kUint, kDouble, kString };
  StringId name_id = 0;
  Type type = Type::kInt;
  int64_t int_value = 0;
  uint64_t uint_value = 0;
  double double_value = 0;
  StringId string_id = 0;
  bool operator==(const PayloadField&) const = default;
};

enum class NvtxEventKind : uint32_t { kUnknown = 0, kRange = 1, kMark = 2 };

struct NvtxEventRecord {
  NvtxEventKind kind = NvtxEventKind::kUnknown;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  StringId domain_id = 0;
  StringId name_id = 0;
  uint64_t thread_id = 0;
  uint32_t device = 0;
  uint32_t stream = 0;
  uint32_t category = 0;
  uint32_t color = 0;
  uint64_t payload_schema = 0;
  std::vector<PayloadField> payload;
  uint32_t depth = 0;
  bool operator==(const NvtxEventRecord&) const = default;
};

enum class SynchronizationKind : uint32_t {
  kUnknown = 0, kEventSynchronize = 1, kStreamWaitEvent = 2, kStreamSynchronize = 3, kContextSynchronize = 4,
};

struct SynchronizationRecord {
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  SynchronizationKind kind = SynchronizationKind::kUnknown;
  uint32_t device = 0;
  uint32_t stream = 0;
  uint32_t correlation_id = 0;
  uint32_t context = 0;
  uint32_t cuda_event_id = 0;
  uint64_t thread_id = 0;
  bool operator==(const SynchronizationRecord&) const = default;
};

struct NcclCommunicatorRecord {
  uint64_t comm_hash = 0;
  std::string name;
  int32_t comm_rank = 0;
  int32_t nranks = 0;
  int32_t nnodes = 0;
  int32_t global_rank = 0;
  uint32_t device = 0;
  uint64_t init_ns = 0;
  uint32_t profiler_version = 0;
  bool operator==(const NcclCommunicatorRecord&) const = default;
};

enum class NcclOperationKind : uint32_t { kUnknown = 0, kCollective = 1, kSend = 2, kRecv = 3 };

struct NcclOperationRecord {
  NcclOperationKind kind = NcclOperationKind::kUnknown;
  uint64_t comm_hash = 0;
  uint64_t seq = 0;
  StringId func_id = 0;
  uint64_t enqueue_ns = 0;
  uint64_t gpu_start_ns = 0;
  uint64_t gpu_end_ns = 0;
  uint64_t bytes = 0;
  uint64_t count = 0;
  StringId datatype_id = 0;
  int32_t root = 0;
  int32_t peer = 0;
  StringId algorithm_id = 0;
  StringId protocol_id = 0;
  uint32_t channels = 0;
  uint32_t warps = 0;
  bool graph_captured = false;
  StringId reduce_op_id = 0;
  uint32_t stream = 0;
  uint32_t device = 0;
  uint64_t operation_id = 0;
  uint64_t enqueue_end_ns = 0;
  uint64_t gpu_clock_error_ns = 0;
  uint32_t kernel_correlation_id = 0;
  bool gpu_clock_unmapped = false;
  bool operator==(const NcclOperationRecord&) const = default;
};

struct NetTransferRecord {
  uint64_t operation_id = 0;
  int32_t peer = 0;
  uint32_t channel = 0;
  bool is_send = false;
  uint64_t bytes = 0;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  uint32_t steps = 0;
  uint64_t wait_gpu_ns = 0;
  uint64_t wait_peer_ns = 0;
  uint64_t wait_network_ns = 0;
  uint64_t comm_hash = 0;
  bool operator==(const NetTransferRecord&) const = default;
};

struct MetricSampleRecord {
  uint64_t timestamp_ns = 0;
  uint32_t device = 0;
  StringId metric_id = 0;
  double value = 0;
  bool operator==(const MetricSampleRecord&) const = default;
};

// A launch's counters from the range profiler; the launch with this correlation id was replayed.
// An empty field was not measured.
struct KernelMetricsRecord {
  uint32_t correlation_id = 0;
  uint32_t device = 0;
  uint32_t passes = 0;
  std::optional<double> achieved_occupancy_pct;
  std::optional<double> sm_throughput_pct;
  std::optional<double> tensor_pipe_pct;
  std::optional<double> dram_read_bytes;
  std::optional<double> dram_write_bytes;
  std::optional<double> l2_bytes;
  std::optional<double> l2_hit_rate_pct;
  std::optional<double> l1_bytes;
  std::optional<double> l1_hit_rate_pct;
  std::optional<double> shared_wavefronts;
  std::optional<double> local_load_bytes;
  std::optional<double> local_store_bytes;
  std::optional<double> gpu_duration_ns;
  bool operator==(const KernelMetricsRecord&) const = default;
};

struct ExternalCorrelationRecord {
  uint32_t kind = 0;
  uint64_t external_id = 0;
  uint32_t correlation_id = 0;
  bool operator==(const ExternalCorrelationRecord&) const = default;
};

struct OverheadRecord {
  uint32_t kind = 0;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  uint64_t thread_id = 0;
  uint32_t device = 0;
  bool operator==(const OverheadRecord&) const = default;
};

enum class ResourceKind : uint32_t { kUnknown = 0, kThread = 1, kDevice = 2, kContext = 3, kStream = 4, kCudaEvent = 5 };

struct ResourceNameRecord {
  ResourceKind kind = ResourceKind::kUnknown;
  uint64_t id = 0;
  uint32_t device = 0;
  StringId name_id = 0;
  bool operator==(const ResourceNameRecord&) const = default;
};

struct StreamRecord {
  uint32_t stream = 0;
  uint32_t device = 0;
  uint32_t context = 0;
  int32_t priority = 0;
  uint32_t flags = 0;
  uint32_t correlation_id = 0;
  bool operator==(const StreamRecord&) const = default;
};

// The records of one chunk, as the reader returns them.
struct EventBatch {
  std::vector<KernelRecord> kernels;
  std::vector<ApiCallRecord> api_calls;
  std::vector<MemcpyRecord> memcpys;
  std::vector<MemsetRecord> memsets;
  std::vector<MemoryEventRecord> memory_events;
  std::vector<NvtxEventRecord> nvtx_events;
  std::vector<SynchronizationRecord> synchronizations;
  std::vector<NcclCommunicatorRecord> nccl_communicators;
  std::vector<NcclOperationRecord> nccl_operations;
  std::vector<NetTransferRecord> net_transfers;
  std::vector<MetricSampleRecord> metric_samples;
  std::vector<ClockAnchor> clock_anchors;
  std::vector<ExternalCorrelationRecord> external_correlations;
  std::vector<OverheadRecord> overheads;
  std::vector<ResourceNameRecord> resource_names;
  std::vector<StreamRecord> streams;
  std::vector<ApiFunction> api_functions;
  std::vector<DeviceProperties> devices;
  std::vector<Link> links;
  std::vector<CaptureWindow> capture_windows;
  std::vector<KernelMetricsRecord> kernel_metrics;
  bool operator==(const EventBatch&) const = default;
};

// Record categories, as counted in the trailer. Values are the wire values of EventCategory.
enum class Category : uint32_t {
  kUnknown = 0,
  kKernel = 1,
  kApiCall = 2,
  kMemcpy = 3,
  kMemset = 4,
  kMemory = 5,
  kNvtx = 6,
  kSynchronization = 7,
  kNcclCommunicator = 8,
  kNcclOperation = 9,
  kNetTransfer = 10,
  kMetricSample = 11,
  kExternalCorrelation = 12,
  kOverhead = 13,
  kResourceName = 14,
  kStream = 15,
  kKernelMetrics = 16,
};
inline constexpr uint32_t kCategoryCount = 17;

// "kernel", "api_call", ...: the name used in reports and JSON.
const char* categoryName(Category category);

using CategoryCounts = std::array<uint64_t, kCategoryCount>;
// Adds the number of records of each category in `batch` to `counts`.
void countRecords(const EventBatch& batch, CategoryCounts& counts);

struct CategoryCount {
  Category category = Category::kUnknown;
  uint64_t written = 0;
  uint64_t dropped = 0;
  bool operator==(const CategoryCount&) const = default;
};

enum class CaptureEnd : uint32_t {
  kUnknown = 0, kProcessExit = 1, kSignal = 2, kLimitReached = 3, kRequested = 4, kGenerated = 5,
};

const char* captureEndName(CaptureEnd end);

struct Trailer {
  std::vector<CategoryCount> counts;
  CaptureEnd end = CaptureEnd::kUnknown;
  uint64_t end_time_ns = 0;
  std::string end_detail;
  std::vector<std::string> warnings;
  bool operator==(const Trailer&) const = default;
};

}  // namespace gpuxray::format
