#include "analyzer/load/record_fields.h"

namespace gpuxray::load {
namespace {

constexpr MessageFields kFields[] = {
    {"Chunk", "*", "", ""},
    // The header and what batches add to it (clock anchors, devices, links, windows) are kept whole in
    // RankTrace::header.
    {"FileHeader", "*", "", ""},
    {"CaptureWindow", "*", "", ""},
    {"ClockAnchor", "*", "", ""},
    {"DeviceProperties", "*", "", ""},
    {"Endpoint", "*", "", ""},
    {"Link", "*", "", ""},
    {"NetworkInterface", "*", "", ""},
    {"CaptureConfig", "*", "", ""},
    {"EventBatch",
     "strings kernel_configs kernels api_calls memcpys memsets memory_events nvtx_events synchronizations "
     "nccl_communicators nccl_operations net_transfers metric_samples clock_anchors api_functions devices links "
     "capture_windows kernel_metrics",
     "external_correlations overheads resource_names streams",
     "no analysis reads them: framework correlation ids, CUPTI's own overhead, names and properties of streams"},
    {"InternedString", "*", "", ""},
    {"KernelConfig",
     "id name_iid grid_x grid_y grid_z block_x block_y block_z registers_per_thread static_shared_memory "
     "dynamic_shared_memory local_memory_per_thread",
     "cluster_x cluster_y cluster_z shared_memory_optin shared_memory_carveout_pct shared_memory_executed launch_type "
     "max_active_clusters",
     "model::LaunchConfig keeps what the occupancy estimate needs"},
    {"KernelColumns", "start_delta_ns duration_ns device stream correlation_delta config_id",
     "context graph_id graph_node_id",
     "streams are keyed by device and stream; graph launches are told by their API calls"},
    {"ApiFunction", "*", "", ""},
    {"ApiCallColumns", "start_delta_ns duration_ns domain cbid thread_id correlation_delta", "return_code process_id",
     "no analysis reads them"},
    {"Memcpy", "start_ns duration_ns device stream correlation_id bytes",
     "copy_kind src_kind dst_kind src_device dst_device is_async context graph_id graph_node_id",
     "the analyses take a copy's time and bytes only"},
    {"Memset", "start_ns duration_ns device stream correlation_id bytes",
     "value memory_kind context graph_id graph_node_id", "the analyses take a memset's time and bytes only"},
    {"MemoryEvent", "timestamp_ns operation device address bytes memory_kind",
     "stream correlation_id is_async pool_address",
     "the memory curve is the sum of allocations and releases per device, each release paired with its allocation by "
     "address"},
    {"PayloadField", "name_iid uint_value string_iid", "int_value double_value",
     "only a cpu_op's \"stream\" field (it puts the op on its stream) and \"inputs\" (its input types and shapes) are read"},
    {"NvtxEvent", "kind start_ns end_ns domain_iid name_iid thread_id device payload depth",
     "stream category color payload_schema", "ranges are placed by thread and depth"},
    {"Synchronization", "start_ns duration_ns kind device stream correlation_id", "context cuda_event_id thread_id",
     "a synchronization is kept as time on its stream"},
    {"NcclCommunicator", "comm_hash name comm_rank nranks nnodes global_rank device", "init_ns profiler_version",
     "no analysis reads them"},
    {"NcclOperation",
     "kind comm_hash seq func_iid enqueue_ns gpu_start_ns gpu_end_ns bytes count datatype_iid root peer algorithm_iid "
     "protocol_iid channels device operation_id gpu_clock_error_ns gpu_clock_unmapped",
     "warps graph_captured reduce_op_iid stream enqueue_end_ns kernel_correlation_id", "no analysis reads them yet"},
    {"NetTransfer",
     "operation_id peer channel is_send bytes start_ns end_ns wait_gpu_ns wait_peer_ns wait_network_ns comm_hash",
     "steps", "the analyses use a transfer's bytes and times"},
    {"MetricSample", "*", "", ""},
    {"KernelMetrics", "*", "", ""},
    {"ExternalCorrelation", "", "kind external_id correlation_id", "framework correlation ids: no analysis reads them"},
    {"Overhead", "", "kind start_ns duration_ns thread_id device", "CUPTI's own overhead: no analysis reads it"},
    {"ResourceName", "", "kind id device name_iid", "no analysis names streams or devices by them yet"},
    {"StreamInfo", "", "stream device context priority flags correlation_id", "no analysis reads stream properties"},
    // Trailers give the capture's drops and warnings (the capture_* stats).
    {"CategoryCount", "category dropped", "written", "the reader counts what it read itself"},
    {"Trailer", "counts warnings", "end end_time_ns end_detail", "`gpuxray info` shows how a capture ended"},
};

}  // namespace

std::span<const MessageFields> loadedRecordFields() {
  return kFields;
}

}  // namespace gpuxray::load
