#include "inject/activity_translator.h"

#include <cupti_activity.h>
#include <nvtx3/nvToolsExtPayload.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

namespace gpuxray::inject {


namespace {

// The record layouts this file reads, with their sizes on x86-64 in CUDA 13.0: a toolkit whose
// structs differ fails here rather than misreading records.
static_assert(sizeof(CUpti_ActivityKernel10) == 216);
static_assert(sizeof(CUpti_ActivityMemcpy6) == 96);
static_assert(sizeof(CUpti_ActivityMemcpyPtoP4) == 96);
static_assert(sizeof(CUpti_ActivityMemset4) == 88);
static_assert(sizeof(CUpti_ActivityMemory4) == 128);
static_assert(sizeof(CUpti_ActivityAPI) == 40);
static_assert(sizeof(CUpti_ActivityDevice5) == 184);
static_assert(sizeof(CUpti_ActivityContext3) == 32);
static_assert(sizeof(CUpti_ActivityStream) == 24);
static_assert(sizeof(CUpti_ActivityName) == 32);
static_assert(sizeof(CUpti_ActivityMarker2) == 56);
static_assert(sizeof(CUpti_ActivityMarkerData2) == 40);
static_assert(sizeof(CUpti_ActivityOverhead3) == 56);
static_assert(sizeof(CUpti_ActivitySynchronization2) == 56);
static_assert(sizeof(CUpti_ActivityExternalCorrelation) == 24);
static_assert(sizeof(CUpti_ActivityNvLink4) == 136);
static_assert(sizeof(CUpti_ActivityPcie) == 168);
// CUDA 12.x's structs, from 13.0's cupti_activity_deprecated.h (docs/cuda-versions.md: the same
// offsets as CUDA 12.9 Update 1's own header).
static_assert(sizeof(CUpti_ActivityKernel9) == 208);
static_assert(sizeof(CUpti_ActivityMemcpy5) == 88);
static_assert(sizeof(CUpti_ActivityMemory3) == 120);
static_assert(sizeof(CUpti_ActivitySynchronization) == 40);
static_assert(sizeof(CUpti_ActivityMarkerData) == 32);
// Each newer struct appends to its predecessor, so a record's time is where activityTime() reads it
// whichever the version delivers.
static_assert(offsetof(CUpti_ActivityKernel9, start) == offsetof(CUpti_ActivityKernel10, start));
static_assert(offsetof(CUpti_ActivityMemcpy5, start) == offsetof(CUpti_ActivityMemcpy6, start));
static_assert(offsetof(CUpti_ActivityMemory3, timestamp) == offsetof(CUpti_ActivityMemory4, timestamp));
static_assert(offsetof(CUpti_ActivitySynchronization, start) == offsetof(CUpti_ActivitySynchronization2, start));

// Our enums carry CUPTI's values (gpuxray.proto says so), so conversion is a range check and a cast.
static_assert(static_cast<uint32_t>(format::CopyKind::kHtoD) == CUPTI_ACTIVITY_MEMCPY_KIND_HTOD);
static_assert(static_cast<uint32_t>(format::CopyKind::kDtoH) == CUPTI_ACTIVITY_MEMCPY_KIND_DTOH);
static_assert(static_cast<uint32_t>(format::CopyKind::kHtoA) == CUPTI_ACTIVITY_MEMCPY_KIND_HTOA);
static_assert(static_cast<uint32_t>(format::CopyKind::kAtoH) == CUPTI_ACTIVITY_MEMCPY_KIND_ATOH);
static_assert(static_cast<uint32_t>(format::CopyKind::kAtoA) == CUPTI_ACTIVITY_MEMCPY_KIND_ATOA);
static_assert(static_cast<uint32_t>(format::CopyKind::kAtoD) == CUPTI_ACTIVITY_MEMCPY_KIND_ATOD);
static_assert(static_cast<uint32_t>(format::CopyKind::kDtoA) == CUPTI_ACTIVITY_MEMCPY_KIND_DTOA);
static_assert(static_cast<uint32_t>(format::CopyKind::kDtoD) == CUPTI_ACTIVITY_MEMCPY_KIND_DTOD);
static_assert(static_cast<uint32_t>(format::CopyKind::kHtoH) == CUPTI_ACTIVITY_MEMCPY_KIND_HTOH);
static_assert(static_cast<uint32_t>(format::CopyKind::kPtoP) == CUPTI_ACTIVITY_MEMCPY_KIND_PTOP);

static_assert(static_cast<uint32_t>(format::MemoryKind::kPageable) == CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE);
static_assert(static_cast<uint32_t>(format::MemoryKind::kPinned) == CUPTI_ACTIVITY_MEMORY_KIND_PINNED);
static_assert(static_cast<uint32_t>(format::MemoryKind::kDevice) == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE);
static_assert(static_cast<uint32_t>(format::MemoryKind::kArray) == CUPTI_ACTIVITY_MEMORY_KIND_ARRAY);
static_assert(static_cast<uint32_t>(format::MemoryKind::kManaged) == CUPTI_ACTIVITY_MEMORY_KIND_MANAGED);
static_assert(static_cast<uint32_t>(format::MemoryKind::kDeviceStatic) == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC);
static_assert(static_cast<uint32_t>(format::MemoryKind::kManagedStatic) ==
              CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC);

static_assert(static_cast<uint32_t>(format::SynchronizationKind::kEventSynchronize) ==
              CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE);
static_assert(static_cast<uint32_t>(format::SynchronizationKind::kStreamWaitEvent) ==
              CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT);
static_assert(static_cast<uint32_t>(format::SynchronizationKind::kStreamSynchronize) ==
              CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE);
static_assert(static_cast<uint32_t>(format::SynchronizationKind::kContextSynchronize) ==
              CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE);

static_assert(static_cast<uint32_t>(format::MemoryOperation::kAllocate) ==
              CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION);
static_assert(static_cast<uint32_t>(format::MemoryOperation::kRelease) == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE);

// CUPTI hands records as CUpti_Activity; the kind says which struct it really is.
template <typename T>
const T& as(const CUpti_Activity& record) {
  return reinterpret_cast<const T&>(record);
}

format::CopyKind copyKind(uint32_t value) {
  return value <= CUPTI_ACTIVITY_MEMCPY_KIND_PTOP ? static_cast<format::CopyKind>(value) : format::CopyKind::kUnknown;
}

format::MemoryKind memoryKind(uint32_t value) {
  return value <= CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC ? static_cast<format::MemoryKind>(value)
                                                             : format::MemoryKind::kUnknown;
}

format::SynchronizationKind synchronizationKind(uint32_t value) {
  return value <= CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE ? static_cast<format::SynchronizationKind>(value)
                                                                           : format::SynchronizationKind::kUnknown;
}

std::string rawUuid(const CUuuid& uuid) { return std::string(uuid.bytes, sizeof uuid.bytes); }

// "GPU-8f2ec001-7f80-a0a1-a2a3-a4a5a6a7a8a9", as nvidia-smi writes it.
std::string gpuUuidText(const CUuuid& uuid) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string text = "GPU-";
  for (size_t i = 0; i < sizeof uuid.bytes; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) text += '-';
    auto byte = static_cast<uint8_t>(uuid.bytes[i]);
    text += kHex[byte >> 4];
    text += kHex[byte & 0xf];
  }
  return text;
}

// A PCIe bus, "dddd:bb": a bridge endpoint is named by the bus it serves downstream (its secondary
// bus), which is the upstream bus of whatever hangs below it.
std::string pciBusText(uint32_t domain, uint32_t bus) {
  char text[16];
  std::snprintf(text, sizeof text, "%04x:%02x", domain & 0xffffu, bus & 0xffu);
  return text;
}

// Usable bytes per second per lane and direction, after line encoding: gen1/2 8b/10b (2.5 and
// 5 GT/s), gen3-5 128b/130b (8, 16, 32 GT/s), gen6 64 GT/s PAM4 with FLIT (242/256).
uint64_t pcieLaneBytesPerSecond(uint32_t generation) {
  switch (generation) {
    case CUPTI_PCIE_GEN_GEN1: return 250'000'000;
    case CUPTI_PCIE_GEN_GEN2: return 500'000'000;
    case CUPTI_PCIE_GEN_GEN3: return 984'615'385;
    case CUPTI_PCIE_GEN_GEN4: return 1'969'230'769;
    case CUPTI_PCIE_GEN_GEN5: return 3'938'461'538;
    case CUPTI_PCIE_GEN_GEN6: return 7'562'500'000;
    default: return 0;
  }
}

// A CUPTI-owned allocation the client must free (see TranslatorOptions).
void freeCuptiAllocation(const void* pointer) { std::free(const_cast<void*>(pointer)); }

}  // namespace

std::optional<uint64_t> activityTime(const CUpti_Activity& record) {
  switch (record.kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      // Untimed: a launch the range profiler replayed, which it measures only inside windows.
      uint64_t start = as<CUpti_ActivityKernel10>(record).start;
      return start != 0 ? std::optional<uint64_t>(start) : std::nullopt;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: return as<CUpti_ActivityMemcpy6>(record).start;
    case CUPTI_ACTIVITY_KIND_MEMCPY2: return as<CUpti_ActivityMemcpyPtoP4>(record).start;
    case CUPTI_ACTIVITY_KIND_MEMSET: return as<CUpti_ActivityMemset4>(record).start;
    case CUPTI_ACTIVITY_KIND_MEMORY2: return as<CUpti_ActivityMemory4>(record).timestamp;
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: return as<CUpti_ActivityAPI>(record).start;
    case CUPTI_ACTIVITY_KIND_MARKER: return as<CUpti_ActivityMarker2>(record).timestamp;
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: return as<CUpti_ActivitySynchronization2>(record).start;
    case CUPTI_ACTIVITY_KIND_OVERHEAD: return as<CUpti_ActivityOverhead3>(record).start;
    default: return std::nullopt;
  }
}

ActivityTranslator::ActivityTranslator(format::TraceWriter& writer, ApiNameLookup api_names, TranslatorOptions options,
                                       NvtxPayloadTypeSource payload_types)
    : writer_(writer),
      api_names_(std::move(api_names)),
      options_(options),
      payload_decoder_(std::move(payload_types), [&writer](std::string_view text) { return writer.intern(text); }) {}

void ActivityTranslator::translate(const CUpti_Activity& record) {
  auto kind = static_cast<uint32_t>(record.kind);
  if (kind < stats_.seen.size()) ++stats_.seen[kind];
  switch (record.kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      if (options_.layouts.kernel == 9) {
        translateKernel(as<CUpti_ActivityKernel9>(record));
      } else {
        translateKernel(as<CUpti_ActivityKernel10>(record));
      }
      break;
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      if (options_.layouts.memcpy == 5) {
        translateMemcpy(as<CUpti_ActivityMemcpy5>(record));
      } else {
        translateMemcpy(as<CUpti_ActivityMemcpy6>(record));
      }
      break;
    case CUPTI_ACTIVITY_KIND_MEMCPY2: translatePeerMemcpy(record); break;
    case CUPTI_ACTIVITY_KIND_MEMSET: translateMemset(record); break;
    case CUPTI_ACTIVITY_KIND_MEMORY2:
      if (options_.layouts.memory == 3) {
        translateMemory(as<CUpti_ActivityMemory3>(record));
      } else {
        translateMemory(as<CUpti_ActivityMemory4>(record));
      }
      break;
    case CUPTI_ACTIVITY_KIND_RUNTIME: translateApi(record, format::ApiDomain::kRuntime); break;
    case CUPTI_ACTIVITY_KIND_DRIVER: translateApi(record, format::ApiDomain::kDriver); break;
    case CUPTI_ACTIVITY_KIND_MARKER: translateMarker(record); break;
    case CUPTI_ACTIVITY_KIND_MARKER_DATA:
      if (options_.layouts.marker_data == 1) {
        translateMarkerData(as<CUpti_ActivityMarkerData>(record));
      } else {
        translateMarkerData(as<CUpti_ActivityMarkerData2>(record));
      }
      break;
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
      if (options_.layouts.synchronization == 1) {
        translateSynchronization(as<CUpti_ActivitySynchronization>(record));
      } else {
        translateSynchronization(as<CUpti_ActivitySynchronization2>(record));
      }
      break;
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: translateExternalCorrelation(record); break;
    case CUPTI_ACTIVITY_KIND_OVERHEAD: translateOverhead(record); break;
    case CUPTI_ACTIVITY_KIND_NAME: translateName(record); break;
    case CUPTI_ACTIVITY_KIND_STREAM: translateStream(record); break;
    case CUPTI_ACTIVITY_KIND_CONTEXT: translateContext(record); break;
    case CUPTI_ACTIVITY_KIND_DEVICE: translateDevice(record); break;
    case CUPTI_ACTIVITY_KIND_NVLINK: translateNvLink(record); break;
    case CUPTI_ACTIVITY_KIND_PCIE: translatePcie(record); break;
    // Seen, deliberately not written: pool creation/trim/destruction has no record in the format
    // (MEMORY2 already gives every allocation's pool address), and a graph launch's whole-graph
    // span is the envelope of its kernels, which carry graph_id.
    case CUPTI_ACTIVITY_KIND_MEMORY_POOL:
    case CUPTI_ACTIVITY_KIND_GRAPH_TRACE: break;
    default: ++stats_.unknown_kind; break;
  }
}

uint64_t ActivityTranslator::endOrStart(uint64_t start, uint64_t end) {
  if (end == 0 || end < start) {
    ++stats_.incomplete;
    return start;
  }
  return end;
}

uint32_t ActivityTranslator::deviceOfContext(uint32_t context) const {
  auto it = context_devices_.find(context);
  return it == context_devices_.end() ? 0 : it->second;
}

int32_t ActivityTranslator::deviceOfUuid(const std::string& uuid) const {
  for (const auto& [id, device] : devices_) {
    if (device.uuid == uuid) return static_cast<int32_t>(id);
  }
  return -1;
}

// Kernel9 (CUDA 12.x) and Kernel10 (13.0) share every field read here.
template <typename Kernel>
void ActivityTranslator::translateKernel(const Kernel& k) {
  format::KernelRecord out;
  out.start_ns = k.start;
  if (k.start == 0 && k.end == 0) {
    ++stats_.untimed_kernels;
  } else {
    out.end_ns = endOrStart(k.start, k.end);
  }
  out.device = k.deviceId;
  out.stream = k.streamId;
  out.correlation_id = k.correlationId;
  out.context = k.contextId;
  out.graph_id = k.graphId;
  out.graph_node_id = k.graphNodeId;
  out.name_id = k.name != nullptr ? writer_.intern(k.name) : 0;
  out.grid_x = static_cast<uint32_t>(k.gridX);
  out.grid_y = static_cast<uint32_t>(k.gridY);
  out.grid_z = static_cast<uint32_t>(k.gridZ);
  out.block_x = static_cast<uint32_t>(k.blockX);
  out.block_y = static_cast<uint32_t>(k.blockY);
  out.block_z = static_cast<uint32_t>(k.blockZ);
  out.registers_per_thread = k.registersPerThread;
  out.static_shared_memory = static_cast<uint32_t>(k.staticSharedMemory);
  out.dynamic_shared_memory = static_cast<uint32_t>(k.dynamicSharedMemory);
  out.local_memory_per_thread = k.localMemoryPerThread;
  out.cluster_x = k.clusterX;
  out.cluster_y = k.clusterY;
  out.cluster_z = k.clusterZ;
  out.shared_memory_optin = k.shmemLimitConfig == CUPTI_FUNC_SHMEM_LIMIT_OPTIN;
  out.shared_memory_carveout_pct = k.isSharedMemoryCarveoutRequested != 0 ? k.sharedMemoryCarveoutRequested : 0u;
  out.shared_memory_executed = k.sharedMemoryExecuted;
  out.launch_type = k.launchType;
  out.max_active_clusters = k.maxActiveClusters;
  writer_.add(out);
  if (options_.on_kernel && k.name != nullptr) options_.on_kernel(out, k.name);
}

// Memcpy5, Memcpy6 and MemcpyPtoP4 share their fields but for the peer devices.
template <typename Copy>
format::MemcpyRecord ActivityTranslator::copyRecord(const Copy& m, uint32_t src_device, uint32_t dst_device) {
  format::MemcpyRecord out;
  out.start_ns = m.start;
  out.end_ns = endOrStart(m.start, m.end);
  out.device = m.deviceId;
  out.stream = m.streamId;
  out.correlation_id = m.correlationId;
  out.copy_kind = copyKind(m.copyKind);
  out.bytes = m.bytes;
  out.src_kind = memoryKind(m.srcKind);
  out.dst_kind = memoryKind(m.dstKind);
  out.src_device = src_device;
  out.dst_device = dst_device;
  out.is_async = (m.flags & CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC) != 0;
  out.context = m.contextId;
  out.graph_id = m.graphId;
  out.graph_node_id = m.graphNodeId;
  return out;
}

template <typename Copy>
void ActivityTranslator::translateMemcpy(const Copy& m) {
  writer_.add(copyRecord(m, m.deviceId, m.deviceId));
}

void ActivityTranslator::translatePeerMemcpy(const CUpti_Activity& record) {
  const auto& m = as<CUpti_ActivityMemcpyPtoP4>(record);
  writer_.add(copyRecord(m, m.srcDeviceId, m.dstDeviceId));
}

void ActivityTranslator::translateMemset(const CUpti_Activity& record) {
  const auto& m = as<CUpti_ActivityMemset4>(record);
  format::MemsetRecord out;
  out.start_ns = m.start;
  out.end_ns = endOrStart(m.start, m.end);
  out.device = m.deviceId;
  out.stream = m.streamId;
  out.correlation_id = m.correlationId;
  out.bytes = m.bytes;
  out.value = m.value;
  out.memory_kind = memoryKind(m.memoryKind);
  out.context = m.contextId;
  out.graph_id = m.graphId;
  out.graph_node_id = m.graphNodeId;
  writer_.add(out);
}

// Memory3 (CUDA 12.4-12.5) and Memory4 share every field read here.
template <typename Memory>
void ActivityTranslator::translateMemory(const Memory& m) {
  format::MemoryEventRecord out;
  out.timestamp_ns = m.timestamp;
  switch (m.memoryOperationType) {
    case CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION: out.operation = format::MemoryOperation::kAllocate; break;
    case CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE: out.operation = format::MemoryOperation::kRelease; break;
    default: out.operation = format::MemoryOperation::kUnknown; break;
  }
  out.device = m.deviceId;
  out.address = m.address;
  out.bytes = m.bytes;
  out.memory_kind = memoryKind(static_cast<uint32_t>(m.memoryKind));
  // CUPTI_INVALID_STREAM_ID for synchronous operations, kept as is.
  out.stream = m.streamId;
  out.correlation_id = m.correlationId;
  out.is_async = m.isAsync != 0;
  if (m.memoryPoolConfig.memoryPoolType != CUPTI_ACTIVITY_MEMORY_POOL_TYPE_INVALID) {
    out.pool_address = m.memoryPoolConfig.address;
  }
  writer_.add(out);
}

void ActivityTranslator::translateApi(const CUpti_Activity& record, format::ApiDomain domain) {
  const auto& a = as<CUpti_ActivityAPI>(record);
  uint64_t key = (static_cast<uint64_t>(domain) << 32) | a.cbid;
  if (named_api_functions_.emplace(key, true).second) {
    auto cupti_domain = domain == format::ApiDomain::kRuntime ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API;
    const char* name = api_names_ ? api_names_(cupti_domain, a.cbid) : nullptr;
    if (name != nullptr && name[0] != '\0') {
      writer_.defineApiFunction(domain, a.cbid, name);
    } else {
      std::string fallback = (domain == format::ApiDomain::kRuntime ? "runtime_api_" : "driver_api_") + std::to_string(a.cbid);
      writer_.defineApiFunction(domain, a.cbid, fallback);
    }
  }
  format::ApiCallRecord out;
  out.start_ns = a.start;
  out.end_ns = a.end;
  out.domain = domain;
  out.cbid = a.cbid;
  out.thread_id = a.threadId;
  out.correlation_id = a.correlationId;
  out.return_code = a.returnValue;
  out.process_id = a.processId;
  writer_.add(out);
}

// --- NVTX -----------------------------------------------------------------------------------------

void ActivityTranslator::translateMarker(const CUpti_Activity& record) {
  const auto& m = as<CUpti_ActivityMarker2>(record);
  auto flags = static_cast<uint32_t>(m.flags);

  if ((flags & CUPTI_ACTIVITY_FLAG_MARKER_END) != 0) {
    auto it = open_ranges_.find(m.id);
    if (it == open_ranges_.end()) {
      ++stats_.unmatched_nvtx;
      return;
    }
    OpenRange range = std::move(it->second);
    open_ranges_.erase(it);
    closeDepth(range.depth_key);
    range.event.end_ns = m.timestamp >= range.event.start_ns ? m.timestamp : range.event.start_ns;
    finishNvtxEvent(m.id, std::move(range.event), range.has_data);
    return;
  }

  format::NvtxEventRecord event;
  event.start_ns = m.timestamp;
  event.end_ns = m.timestamp;
  // NULL names the default domain: the empty string, id 0.
  event.domain_id = m.domain != nullptr ? writer_.intern(m.domain) : 0;
  event.name_id = m.name != nullptr ? writer_.intern(m.name) : 0;
  DepthKey depth_key{static_cast<uint32_t>(m.objectKind), 0, event.domain_id};
  switch (m.objectKind) {
    case CUPTI_ACTIVITY_OBJECT_THREAD:
      event.thread_id = m.objectId.pt.threadId;
      std::get<1>(depth_key) = m.objectId.pt.threadId;
      break;
    case CUPTI_ACTIVITY_OBJECT_DEVICE:
    case CUPTI_ACTIVITY_OBJECT_CONTEXT:
    case CUPTI_ACTIVITY_OBJECT_STREAM:
      event.device = m.objectId.dcs.deviceId;
      event.stream = m.objectId.dcs.streamId;
      std::get<1>(depth_key) = (static_cast<uint64_t>(m.objectId.dcs.deviceId) << 32) | m.objectId.dcs.streamId;
      break;
    default: break;
  }

  if ((flags & CUPTI_ACTIVITY_FLAG_MARKER_START) != 0) {
    event.kind = format::NvtxEventKind::kRange;
    uint32_t& open = open_depth_[depth_key];
    event.depth = open++;
    OpenRange range{std::move(event), false, depth_key};
    if (auto data = marker_data_.find(m.id); data != marker_data_.end()) {
      attach(range.event, std::move(data->second.data));
      range.has_data = true;
      marker_data_.erase(data);
    }
    if (auto [it, inserted] = open_ranges_.try_emplace(m.id, std::move(range)); !inserted) {
      // A start id reused before its end arrived: the earlier range is written as unmatched.
      ++stats_.unmatched_nvtx;
      closeDepth(it->second.depth_key);
      writer_.add(it->second.event);
      it->second = std::move(range);
    }
    return;
  }

  // Instantaneous markers, and anything else CUPTI flags (user sync objects), are marks.
  event.kind = format::NvtxEventKind::kMark;
  finishNvtxEvent(m.id, std::move(event), false);
}

void ActivityTranslator::attach(format::NvtxEventRecord& event, MarkerData data) {
  event.color = data.color;
  event.category = data.category;
  event.payload_schema = data.payload_schema;
  event.payload = std::move(data.payload);
}

void ActivityTranslator::finishNvtxEvent(uint32_t id, format::NvtxEventRecord event, bool has_data) {
  if (!has_data) {
    if (auto data = marker_data_.find(id); data != marker_data_.end()) {
      attach(event, std::move(data->second.data));
      marker_data_.erase(data);
      has_data = true;
    }
  }
  if (has_data) {
    writer_.add(event);
    return;
  }
  if (auto [it, inserted] = held_events_.try_emplace(id, HeldEvent{event, period_}); !inserted) {
    // The id came back while the previous event still waited: that one goes out without data.
    writer_.add(it->second.event);
    it->second = HeldEvent{std::move(event), period_};
  }
  enforceHoldLimit();
}

// MarkerData (CUDA 12.x) has no NVTX domain and no extended payloads: its payload kinds end at
// UTILIZATION_LEVEL, so kind 6 there is unknown, never a pointer.
template <typename Data>
void ActivityTranslator::translateMarkerData(const Data& d) {
  constexpr bool kHasExtendedPayloads = requires(const Data& x) { x.cuptiDomainId; };
  MarkerData data;
  if ((static_cast<uint32_t>(d.flags) & CUPTI_ACTIVITY_FLAG_MARKER_COLOR_ARGB) != 0) data.color = d.color;
  data.category = d.category;
  format::PayloadField field;
  bool has_field = true;
  switch (d.payloadKind) {
    case CUPTI_METRIC_VALUE_KIND_DOUBLE:
      // A marker without payload comes as DOUBLE 0 (all bits zero); a genuine 0.0 is lost with it.
      has_field = d.payload.metricValueUint64 != 0;
      field.type = format::PayloadField::Type::kDouble;
      field.double_value = d.payload.metricValueDouble;
      break;
    case CUPTI_METRIC_VALUE_KIND_PERCENT:
      field.type = format::PayloadField::Type::kDouble;
      field.double_value = d.payload.metricValuePercent;
      break;
    case CUPTI_METRIC_VALUE_KIND_UINT64:
      field.type = format::PayloadField::Type::kUint;
      field.uint_value = d.payload.metricValueUint64;
      break;
    case CUPTI_METRIC_VALUE_KIND_THROUGHPUT:
      field.type = format::PayloadField::Type::kUint;
      field.uint_value = d.payload.metricValueThroughput;
      break;
    case CUPTI_METRIC_VALUE_KIND_INT64:
      field.type = format::PayloadField::Type::kInt;
      field.int_value = d.payload.metricValueInt64;
      break;
    case CUPTI_METRIC_VALUE_KIND_UTILIZATION_LEVEL:
      field.type = format::PayloadField::Type::kUint;
      field.uint_value = static_cast<uint64_t>(d.payload.metricValueUtilizationLevel);
      break;
    case CUPTI_METRIC_VALUE_KIND_NVTX_EXTENDED_PAYLOAD:
      // A pointer to an nvtxPayloadData_t that CUPTI malloc'ed for us; its schema, registered in the
      // domain CUPTI numbers cuptiDomainId, gives the layout of its bytes.
      has_field = false;
      if constexpr (kHasExtendedPayloads) {
        ++stats_.extended_payloads;
        auto* payload = reinterpret_cast<const nvtxPayloadData_t*>(
            static_cast<uintptr_t>(d.payload.metricValueNvtxExtendedPayload));
        if (payload != nullptr) {
          data.payload_schema = payload->schemaId;
          data.payload = payload_decoder_.decode(d.cuptiDomainId, payload->schemaId, payload->payload, payload->size);
          stats_.nvtx_payloads = payload_decoder_.stats();
          if (options_.free_cupti_allocations) {
            freeCuptiAllocation(payload->payload);
            freeCuptiAllocation(payload);
          }
        }
      }
      break;
    default: has_field = false; break;
  }
  if (has_field) data.payload.push_back(field);

  if (auto range = open_ranges_.find(d.id); range != open_ranges_.end()) {
    attach(range->second.event, std::move(data));
    range->second.has_data = true;
    return;
  }
  if (auto held = held_events_.find(d.id); held != held_events_.end()) {
    attach(held->second.event, std::move(data));
    writer_.add(held->second.event);
    held_events_.erase(held);
    return;
  }
  if (auto [it, inserted] = marker_data_.try_emplace(d.id, HeldData{data, period_}); !inserted) {
    ++stats_.orphan_marker_data;
    it->second = HeldData{std::move(data), period_};
  }
  enforceHoldLimit();
}

void ActivityTranslator::closeDepth(const DepthKey& key) {
  auto it = open_depth_.find(key);
  if (it == open_depth_.end()) return;
  if (--it->second == 0) open_depth_.erase(it);
}

void ActivityTranslator::enforceHoldLimit() {
  if (held_events_.size() + marker_data_.size() > options_.max_held_nvtx) flushPending();
}

void ActivityTranslator::flushPending() {
  for (auto it = held_events_.begin(); it != held_events_.end();) {
    if (it->second.period < period_) {
      writer_.add(it->second.event);
      it = held_events_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = marker_data_.begin(); it != marker_data_.end();) {
    if (it->second.period < period_) {
      ++stats_.orphan_marker_data;
      it = marker_data_.erase(it);
    } else {
      ++it;
    }
  }
  ++period_;
}

void ActivityTranslator::finish() {
  for (auto& [id, range] : open_ranges_) {
    ++stats_.unmatched_nvtx;
    range.event.end_ns = range.event.start_ns;
    writer_.add(range.event);
  }
  open_ranges_.clear();
  open_depth_.clear();
  for (auto& [id, held] : held_events_) writer_.add(held.event);
  held_events_.clear();
  stats_.orphan_marker_data += marker_data_.size();
  marker_data_.clear();
}

// --- Everything else ------------------------------------------------------------------------------

// Synchronization (CUDA 12.4-12.6) and Synchronization2 share every field read here.
template <typename Synchronization>
void ActivityTranslator::translateSynchronization(const Synchronization& s) {
  format::SynchronizationRecord out;
  out.start_ns = s.start;
  out.end_ns = s.end >= s.start ? s.end : s.start;
  out.kind = synchronizationKind(static_cast<uint32_t>(s.type));
  // Synchronization2 names no device and no thread: the device comes from the context.
  out.device = deviceOfContext(s.contextId);
  out.stream = s.streamId;
  out.correlation_id = s.correlationId;
  out.context = s.contextId;
  out.cuda_event_id = s.cudaEventId;
  writer_.add(out);
}

void ActivityTranslator::translateExternalCorrelation(const CUpti_Activity& record) {
  const auto& e = as<CUpti_ActivityExternalCorrelation>(record);
  format::ExternalCorrelationRecord out;
  out.kind = static_cast<uint32_t>(e.externalKind);
  out.external_id = e.externalId;
  out.correlation_id = e.correlationId;
  writer_.add(out);
}

void ActivityTranslator::translateOverhead(const CUpti_Activity& record) {
  const auto& o = as<CUpti_ActivityOverhead3>(record);
  format::OverheadRecord out;
  out.kind = static_cast<uint32_t>(o.overheadKind);
  out.start_ns = o.start;
  out.end_ns = o.end >= o.start ? o.end : o.start;
  switch (o.objectKind) {
    case CUPTI_ACTIVITY_OBJECT_THREAD: out.thread_id = o.objectId.pt.threadId; break;
    case CUPTI_ACTIVITY_OBJECT_DEVICE:
    case CUPTI_ACTIVITY_OBJECT_CONTEXT:
    case CUPTI_ACTIVITY_OBJECT_STREAM: out.device = o.objectId.dcs.deviceId; break;
    default: break;
  }
  if (options_.free_cupti_allocations && options_.layouts.client_frees_overhead_data)
    freeCuptiAllocation(o.overheadData);
  writer_.add(out);
}

void ActivityTranslator::translateName(const CUpti_Activity& record) {
  const auto& n = as<CUpti_ActivityName>(record);
  format::ResourceNameRecord out;
  switch (n.objectKind) {
    case CUPTI_ACTIVITY_OBJECT_THREAD:
      out.kind = format::ResourceKind::kThread;
      out.id = n.objectId.pt.threadId;
      break;
    case CUPTI_ACTIVITY_OBJECT_DEVICE:
      out.kind = format::ResourceKind::kDevice;
      out.id = n.objectId.dcs.deviceId;
      out.device = n.objectId.dcs.deviceId;
      break;
    case CUPTI_ACTIVITY_OBJECT_CONTEXT:
      out.kind = format::ResourceKind::kContext;
      out.id = n.objectId.dcs.contextId;
      out.device = n.objectId.dcs.deviceId;
      break;
    case CUPTI_ACTIVITY_OBJECT_STREAM:
      out.kind = format::ResourceKind::kStream;
      out.id = n.objectId.dcs.streamId;
      out.device = n.objectId.dcs.deviceId;
      break;
    default:
      // A process (or something newer): the format has no kind for it.
      out.kind = format::ResourceKind::kUnknown;
      out.id = n.objectId.pt.processId;
      break;
  }
  out.name_id = n.name != nullptr ? writer_.intern(n.name) : 0;
  writer_.add(out);
}

void ActivityTranslator::translateStream(const CUpti_Activity& record) {
  const auto& s = as<CUpti_ActivityStream>(record);
  format::StreamRecord out;
  out.stream = s.streamId;
  // CUpti_ActivityStream names no device: it comes from the context.
  out.device = deviceOfContext(s.contextId);
  out.context = s.contextId;
  out.priority = static_cast<int32_t>(s.priority);
  out.flags = static_cast<uint32_t>(s.flag);
  out.correlation_id = s.correlationId;
  writer_.add(out);
}

void ActivityTranslator::translateContext(const CUpti_Activity& record) {
  const auto& c = as<CUpti_ActivityContext3>(record);
  context_devices_[c.contextId] = c.deviceId;
}

void ActivityTranslator::translateDevice(const CUpti_Activity& record) {
  const auto& d = as<CUpti_ActivityDevice5>(record);
  format::DeviceProperties out;
  out.device_id = d.id;
  if (d.name != nullptr) out.name = d.name;
  out.uuid = rawUuid(d.uuid);
  out.compute_major = d.computeCapabilityMajor;
  out.compute_minor = d.computeCapabilityMinor;
  out.sm_count = d.numMultiprocessors;
  out.max_warps_per_sm = d.maxWarpsPerMultiprocessor;
  out.max_threads_per_sm = d.maxWarpsPerMultiprocessor * d.numThreadsPerWarp;
  out.max_blocks_per_sm = d.maxBlocksPerMultiprocessor;
  out.registers_per_sm = d.maxRegistersPerMultiprocessor;
  out.registers_per_block = d.maxRegistersPerBlock;
  out.shared_memory_per_sm = d.maxSharedMemoryPerMultiprocessor;
  out.shared_memory_per_block = d.maxSharedMemoryPerBlock;
  out.memory_bytes = d.globalMemorySize;
  out.memory_bandwidth_bytes_per_s = d.globalMemoryBandwidth * 1000;
  out.core_clock_khz = d.coreClockRate;
  out.l2_cache_bytes = d.l2CacheSize;
  out.max_threads_per_block = d.maxThreadsPerBlock;
  out.warp_size = d.numThreadsPerWarp;
  // numaId is the NUMA node of the GPU's own memory, meaningful only when that memory is a NUMA
  // node (coherent platforms such as GH200); the CPU affinity of other GPUs is the capture's job.
  if (d.isNumaNode != 0) out.numa_node = d.numaId;
  // UINT32_MAX when MIG is off.
  if (d.isMigEnabled != 0) {
    out.mig_gpu_instance_id = d.gpuInstanceId;
    out.mig_compute_instance_id = d.computeInstanceId;
  }
  if (options_.free_cupti_allocations && options_.layouts.client_frees_device_name) freeCuptiAllocation(d.name);
  devices_[d.id] = std::move(out);
}

void ActivityTranslator::translateNvLink(const CUpti_Activity& record) {
  const auto& l = as<CUpti_ActivityNvLink4>(record);
  struct Side {
    format::Endpoint endpoint;
    std::string raw_uuid;
    std::vector<uint32_t> ports;
  };
  auto side = [&](CUpti_DevType type, const auto& id, const int8_t* ports) {
    Side s;
    if (type == CUPTI_DEV_TYPE_GPU) {
      s.raw_uuid = rawUuid(id.uuidDev);
      s.endpoint = {format::EndpointKind::kGpu, gpuUuidText(id.uuidDev), deviceOfUuid(s.raw_uuid)};
      // The first physicalNvLinkCount entries, without CUPTI_NVLINK_INVALID_PORT.
      uint32_t count = l.physicalNvLinkCount < CUPTI_MAX_NVLINK_PORTS ? l.physicalNvLinkCount : CUPTI_MAX_NVLINK_PORTS;
      for (uint32_t i = 0; i < count; ++i) {
        if (ports[i] != CUPTI_NVLINK_INVALID_PORT) s.ports.push_back(static_cast<uint32_t>(ports[i]));
      }
    } else if (type == CUPTI_DEV_TYPE_NPU) {
      s.endpoint = {format::EndpointKind::kCpu,
                    "npu-" + std::to_string(id.npu.domainId) + "-" + std::to_string(id.npu.index), -1};
    }
    return s;
  };
  Side a = side(l.typeDev0, l.idDev0, l.portDev0);
  Side b = side(l.typeDev1, l.idDev1, l.portDev1);
  format::Link link;
  link.kind = format::LinkKind::kNvLink;
  link.version = l.nvlinkVersion;
  link.width = l.physicalNvLinkCount;
  link.bandwidth_bytes_per_s = l.bandwidth * 1000;

  if (l.nvswitchConnected == 0) {
    link.a = std::move(a.endpoint);
    link.b = std::move(b.endpoint);
    link.ports_a = std::move(a.ports);
    link.ports_b = std::move(b.ports);
    writer_.add(link);
    return;
  }
  // Through NVSwitches CUPTI reports one logical link per GPU pair, all over the same physical links
  // of each GPU. Physically that is each GPU's links to the switch fabric: written once per GPU.
  for (Side* s : {&a, &b}) {
    if (s->endpoint.kind != format::EndpointKind::kGpu) continue;
    if (!nvswitch_linked_.emplace(s->raw_uuid, true).second) continue;
    format::Link to_switch = link;
    to_switch.a = s->endpoint;
    to_switch.b = {format::EndpointKind::kNvSwitch, "nvswitch", -1};
    to_switch.ports_a = s->ports;
    writer_.add(to_switch);
  }
}

void ActivityTranslator::translatePcie(const CUpti_Activity& record) {
  const auto& p = as<CUpti_ActivityPcie>(record);
  format::Link link;
  link.kind = format::LinkKind::kPcie;
  link.version = p.pcieGeneration;
  link.width = p.linkWidth;
  link.bandwidth_bytes_per_s = pcieLaneBytesPerSecond(p.pcieGeneration) * p.linkWidth;
  if (p.type == CUPTI_PCIE_DEVICE_TYPE_GPU) {
    link.a = {format::EndpointKind::kGpu, gpuUuidText(p.attr.gpuAttr.uuidDev), static_cast<int32_t>(p.id.devId)};
  } else {
    link.a = {format::EndpointKind::kPcieBridge, pciBusText(p.domain, p.attr.bridgeAttr.secondaryBus), -1};
  }
  link.b = {format::EndpointKind::kPcieBridge, pciBusText(p.domain, p.upstreamBus), -1};
  writer_.add(link);
}

}  // namespace gpuxray::inject
