// CUPTI activity records (CUDA 13.0 layouts, built by hand and zeroed like CUPTI's) through the
// ActivityTranslator into a trace file in memory, read back and checked field by field.

#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <nvtx3/nvToolsExtPayload.h>
#include <string>
#include <utility>
#include <vector>

#include "inject/activity_translator.h"
#include "inject/nvtx_payload_decoder.h"
#include "proto/trace_reader.h"
#include "proto/trace_writer.h"
#include "tests/support/fake_cupti.h"
#include "tests/support/nccl_nvtx_schemas.h"
#include "tests/support/record_printing.h"
#include "tests/support/trace_files.h"

namespace {

using namespace gpuxray::format;
using gpuxray::inject::ActivityTranslator;
using gpuxray::inject::NvtxPayloadTypeSource;
using gpuxray::inject::TranslatorOptions;
using gpuxray::testing::FakeCupti;
using gpuxray::testing::MemoryTrace;

// CUPTI_INVALID_STREAM_ID, whose macro is an old-style cast.
constexpr uint32_t kInvalidStream = 0xFFFF'FFFFu;

// What the file holds once the translator has finished: every batch merged into one.
struct ReadBack {
  EventBatch all;
  std::unique_ptr<TraceReader> reader;
  std::vector<uint8_t> bytes;

  std::string name(StringId id) const { return std::string(reader->strings().get(id)); }
};

template <typename T>
void append(std::vector<T>& to, std::vector<T>& from) {
  for (auto& item : from) to.push_back(std::move(item));
}

// A translator writing into memory, with a fake cuptiGetCallbackName that knows two functions.
class Harness {
 public:
  explicit Harness(TranslatorOptions options = {}, NvtxPayloadTypeSource payload_types = {})
      : translator_(trace_.writer(),
                    [this](CUpti_CallbackDomain domain, uint32_t cbid) -> const char* {
                      ++lookups[{domain, cbid}];
                      if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && cbid == 211) return "cudaLaunchKernel_v7000";
                      if (domain == CUPTI_CB_DOMAIN_DRIVER_API && cbid == 307) return "cuLaunchKernel";
                      return nullptr;
                    },
                    options, std::move(payload_types)) {
    REQUIRE(trace_.writer().writeHeader(FileHeader{}));
  }

  template <typename Record>
  void feed(const Record& record) {
    translator_.translate(reinterpret_cast<const CUpti_Activity&>(record));
  }

  ActivityTranslator& translator() { return translator_; }
  uint64_t written(Category category) { return trace_.writer().written(category); }

  // Finishes the translator and the file, and reads it back.
  ReadBack read() {
    translator_.finish();
    REQUIRE(trace_.writer().finish(Trailer{}));
    ReadBack result;
    result.bytes = trace_.bytes();
    result.reader = std::make_unique<TraceReader>("translated.gxt", result.bytes);
    EventBatch batch;
    while (result.reader->next(batch)) {
      EventBatch& all = result.all;
      append(all.kernels, batch.kernels);
      append(all.api_calls, batch.api_calls);
      append(all.memcpys, batch.memcpys);
      append(all.memsets, batch.memsets);
      append(all.memory_events, batch.memory_events);
      append(all.nvtx_events, batch.nvtx_events);
      append(all.synchronizations, batch.synchronizations);
      append(all.external_correlations, batch.external_correlations);
      append(all.overheads, batch.overheads);
      append(all.resource_names, batch.resource_names);
      append(all.streams, batch.streams);
      append(all.api_functions, batch.api_functions);
      append(all.devices, batch.devices);
      append(all.links, batch.links);
      append(all.nccl_communicators, batch.nccl_communicators);
      append(all.nccl_operations, batch.nccl_operations);
      append(all.net_transfers, batch.net_transfers);
      append(all.metric_samples, batch.metric_samples);
      append(all.clock_anchors, batch.clock_anchors);
    }
    REQUIRE(result.reader->warnings().empty());
    REQUIRE(result.reader->trailer().has_value());
    return result;
  }

  std::map<std::pair<CUpti_CallbackDomain, uint32_t>, int> lookups;

 private:
  MemoryTrace trace_;
  ActivityTranslator translator_;
};

CUuuid uuidOf(uint8_t first) {
  CUuuid uuid{};
  for (int i = 0; i < 16; ++i) uuid.bytes[i] = static_cast<char>(first + i);
  return uuid;
}

std::string rawUuid(uint8_t first) {
  CUuuid uuid = uuidOf(first);
  return std::string(uuid.bytes, 16);
}

CUpti_ActivityKernel10 sampleKernel() {
  CUpti_ActivityKernel10 k{};
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.start = 1'000'000;
  k.end = 1'250'000;
  k.deviceId = 3;
  k.contextId = 5;
  k.streamId = 17;
  k.correlationId = 4242;
  k.gridX = 132;
  k.gridY = 2;
  k.gridZ = 1;
  k.blockX = 256;
  k.blockY = 1;
  k.blockZ = 1;
  k.registersPerThread = 168;
  k.staticSharedMemory = 1024;
  k.dynamicSharedMemory = 200 * 1024;
  k.localMemoryPerThread = 48;
  k.name = "void gemm_kernel<128, 64>(float*)";
  k.launchType = CUPTI_ACTIVITY_LAUNCH_TYPE_COOPERATIVE_SINGLE_DEVICE;
  k.isSharedMemoryCarveoutRequested = 1;
  k.sharedMemoryCarveoutRequested = 75;
  k.sharedMemoryExecuted = 228 * 1024;
  k.graphNodeId = 0x1'0000'0007ull;
  k.shmemLimitConfig = CUPTI_FUNC_SHMEM_LIMIT_OPTIN;
  k.graphId = 9;
  k.clusterX = 2;
  k.clusterY = 1;
  k.clusterZ = 1;
  k.maxActiveClusters = 33;
  return k;
}

CUpti_ActivityMarker2 marker(uint32_t id, CUpti_ActivityFlag flags, uint64_t timestamp, uint32_t thread,
                             const char* name, const char* domain = nullptr) {
  CUpti_ActivityMarker2 m{};
  m.kind = CUPTI_ACTIVITY_KIND_MARKER;
  m.flags = flags;
  m.timestamp = timestamp;
  m.id = id;
  m.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
  m.objectId.pt.processId = 77;
  m.objectId.pt.threadId = thread;
  m.name = name;
  m.domain = domain;
  return m;
}

CUpti_ActivityMarkerData2 markerData(uint32_t id, uint32_t color, uint32_t category, int64_t payload) {
  CUpti_ActivityMarkerData2 d{};
  d.kind = CUPTI_ACTIVITY_KIND_MARKER_DATA;
  d.flags = CUPTI_ACTIVITY_FLAG_MARKER_COLOR_ARGB;
  d.id = id;
  d.payloadKind = CUPTI_METRIC_VALUE_KIND_INT64;
  d.payload.metricValueInt64 = payload;
  d.color = color;
  d.category = category;
  return d;
}

const NvtxEventRecord* findNvtx(const ReadBack& file, const std::string& name) {
  for (const auto& event : file.all.nvtx_events) {
    if (file.name(event.name_id) == name) return &event;
  }
  return nullptr;
}

PayloadField intField(int64_t value) {
  PayloadField field;
  field.type = PayloadField::Type::kInt;
  field.int_value = value;
  return field;
}

}  // namespace

TEST_CASE("translator: a concurrent kernel keeps its whole launch configuration") {
  Harness h;
  h.feed(sampleKernel());
  CUpti_ActivityKernel10 plain{};
  plain.kind = CUPTI_ACTIVITY_KIND_KERNEL;
  plain.start = 10;
  plain.end = 20;
  plain.gridX = plain.gridY = plain.gridZ = 1;
  plain.blockX = 32;
  plain.blockY = plain.blockZ = 1;
  plain.name = "plain";
  plain.shmemLimitConfig = CUPTI_FUNC_SHMEM_LIMIT_DEFAULT;
  plain.isSharedMemoryCarveoutRequested = 0;
  plain.sharedMemoryCarveoutRequested = 50;  // not requested: ignored
  h.feed(plain);
  auto file = h.read();

  REQUIRE(file.all.kernels.size() == 2);
  KernelRecord expected;
  expected.start_ns = 1'000'000;
  expected.end_ns = 1'250'000;
  expected.device = 3;
  expected.stream = 17;
  expected.correlation_id = 4242;
  expected.context = 5;
  expected.graph_id = 9;
  expected.graph_node_id = 0x1'0000'0007ull;
  expected.name_id = file.all.kernels[0].name_id;
  expected.grid_x = 132;
  expected.grid_y = 2;
  expected.grid_z = 1;
  expected.block_x = 256;
  expected.block_y = 1;
  expected.block_z = 1;
  expected.registers_per_thread = 168;
  expected.static_shared_memory = 1024;
  expected.dynamic_shared_memory = 200 * 1024;
  expected.local_memory_per_thread = 48;
  expected.cluster_x = 2;
  expected.cluster_y = 1;
  expected.cluster_z = 1;
  expected.shared_memory_optin = true;
  expected.shared_memory_carveout_pct = 75;
  expected.shared_memory_executed = 228 * 1024;
  expected.launch_type = 1;
  expected.max_active_clusters = 33;
  CHECK(file.all.kernels[0] == expected);
  CHECK(file.name(file.all.kernels[0].name_id) == "void gemm_kernel<128, 64>(float*)");

  const KernelRecord& p = file.all.kernels[1];
  CHECK(file.name(p.name_id) == "plain");
  CHECK_FALSE(p.shared_memory_optin);
  CHECK(p.shared_memory_carveout_pct == 0);
  CHECK(p.block_x == 32);
  CHECK(p.end_ns == 20);

  const auto& stats = h.translator().stats();
  CHECK(stats.seen[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL] == 1);
  CHECK(stats.seen[CUPTI_ACTIVITY_KIND_KERNEL] == 1);
  CHECK(stats.incomplete == 0);
  CHECK(stats.unknown_kind == 0);
}

TEST_CASE("translator: kernels, copies and memsets without a valid end get end = start and are counted") {
  Harness h;
  auto running = sampleKernel();
  running.end = 0;
  h.feed(running);
  auto backwards = sampleKernel();
  backwards.start = 500;
  backwards.end = 400;
  h.feed(backwards);
  auto fine = sampleKernel();
  h.feed(fine);

  CUpti_ActivityMemcpy6 copy{};
  copy.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  copy.start = 900;
  copy.end = 0;
  h.feed(copy);
  CUpti_ActivityMemset4 set{};
  set.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  set.start = 700;
  set.end = 0;
  h.feed(set);
  auto file = h.read();

  REQUIRE(file.all.kernels.size() == 3);
  CHECK(file.all.kernels[0].start_ns == 1'000'000);
  CHECK(file.all.kernels[0].end_ns == 1'000'000);
  CHECK(file.all.kernels[1].start_ns == 500);
  CHECK(file.all.kernels[1].end_ns == 500);
  CHECK(file.all.kernels[2].end_ns == 1'250'000);
  REQUIRE(file.all.memcpys.size() == 1);
  CHECK(file.all.memcpys[0].end_ns == 900);
  REQUIRE(file.all.memsets.size() == 1);
  CHECK(file.all.memsets[0].end_ns == 700);
  CHECK(h.translator().stats().incomplete == 4);
}

TEST_CASE("translator: copies, peer copies and memsets") {
  Harness h;
  CUpti_ActivityMemcpy6 copy{};
  copy.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  copy.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  copy.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
  copy.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  copy.flags = CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC;
  copy.bytes = 1ull << 33;
  copy.start = 100;
  copy.end = 350;
  copy.deviceId = 2;
  copy.contextId = 4;
  copy.streamId = 13;
  copy.correlationId = 99;
  copy.graphNodeId = 71;
  copy.graphId = 6;
  copy.copyCount = 1;
  h.feed(copy);

  CUpti_ActivityMemcpy6 odd{};
  odd.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  odd.copyKind = 200;  // a kind newer than this build
  odd.srcKind = 9;
  odd.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_MANAGED;
  odd.start = 1;
  odd.end = 2;
  h.feed(odd);

  CUpti_ActivityMemcpyPtoP4 peer{};
  peer.kind = CUPTI_ACTIVITY_KIND_MEMCPY2;
  peer.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
  peer.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  peer.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  peer.bytes = 4096;
  peer.start = 1000;
  peer.end = 1100;
  peer.deviceId = 1;
  peer.contextId = 8;
  peer.streamId = 21;
  peer.srcDeviceId = 1;
  peer.srcContextId = 8;
  peer.dstDeviceId = 6;
  peer.dstContextId = 12;
  peer.correlationId = 555;
  peer.graphNodeId = 3;
  peer.graphId = 2;
  h.feed(peer);

  CUpti_ActivityMemset4 set{};
  set.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  set.value = 0xab;
  set.bytes = 1 << 20;
  set.start = 2000;
  set.end = 2100;
  set.deviceId = 7;
  set.contextId = 3;
  set.streamId = 31;
  set.correlationId = 12;
  set.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  set.graphNodeId = 44;
  set.graphId = 5;
  h.feed(set);
  auto file = h.read();

  REQUIRE(file.all.memcpys.size() == 3);
  MemcpyRecord expected;
  expected.start_ns = 100;
  expected.end_ns = 350;
  expected.device = 2;
  expected.stream = 13;
  expected.correlation_id = 99;
  expected.copy_kind = CopyKind::kHtoD;
  expected.bytes = 1ull << 33;
  expected.src_kind = MemoryKind::kPinned;
  expected.dst_kind = MemoryKind::kDevice;
  expected.src_device = 2;
  expected.dst_device = 2;
  expected.is_async = true;
  expected.context = 4;
  expected.graph_id = 6;
  expected.graph_node_id = 71;
  CHECK(file.all.memcpys[0] == expected);

  CHECK(file.all.memcpys[1].copy_kind == CopyKind::kUnknown);
  CHECK(file.all.memcpys[1].src_kind == MemoryKind::kUnknown);
  CHECK(file.all.memcpys[1].dst_kind == MemoryKind::kManaged);
  CHECK_FALSE(file.all.memcpys[1].is_async);

  MemcpyRecord expected_peer;
  expected_peer.start_ns = 1000;
  expected_peer.end_ns = 1100;
  expected_peer.device = 1;
  expected_peer.stream = 21;
  expected_peer.correlation_id = 555;
  expected_peer.copy_kind = CopyKind::kPtoP;
  expected_peer.bytes = 4096;
  expected_peer.src_kind = MemoryKind::kDevice;
  expected_peer.dst_kind = MemoryKind::kDevice;
  expected_peer.src_device = 1;
  expected_peer.dst_device = 6;
  expected_peer.context = 8;
  expected_peer.graph_id = 2;
  expected_peer.graph_node_id = 3;
  CHECK(file.all.memcpys[2] == expected_peer);

  REQUIRE(file.all.memsets.size() == 1);
  MemsetRecord expected_set;
  expected_set.start_ns = 2000;
  expected_set.end_ns = 2100;
  expected_set.device = 7;
  expected_set.stream = 31;
  expected_set.correlation_id = 12;
  expected_set.bytes = 1 << 20;
  expected_set.value = 0xab;
  expected_set.memory_kind = MemoryKind::kDevice;
  expected_set.context = 3;
  expected_set.graph_id = 5;
  expected_set.graph_node_id = 44;
  CHECK(file.all.memsets[0] == expected_set);
}

TEST_CASE("translator: allocations and releases, with the pool address only for pool memory") {
  Harness h;
  CUpti_ActivityMemory4 alloc{};
  alloc.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
  alloc.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
  alloc.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  alloc.correlationId = 31;
  alloc.address = 0x7f00'0000'0000ull;
  alloc.bytes = 2ull << 30;
  alloc.timestamp = 123'456;
  alloc.deviceId = 1;
  alloc.contextId = 2;
  alloc.streamId = 14;
  alloc.isAsync = 1;
  alloc.memoryPoolConfig.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
  alloc.memoryPoolConfig.address = 0x7e00'0000'0000ull;
  h.feed(alloc);

  CUpti_ActivityMemory4 release{};
  release.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
  release.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
  release.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  release.correlationId = 40;
  release.address = 0x7f00'0000'0000ull;
  release.bytes = 2ull << 30;
  release.timestamp = 223'456;
  release.deviceId = 1;
  release.streamId = kInvalidStream;
  release.memoryPoolConfig.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_INVALID;
  release.memoryPoolConfig.address = 0xdead;  // not a pool allocation: ignored
  h.feed(release);

  CUpti_ActivityMemoryPool3 pool{};
  pool.kind = CUPTI_ACTIVITY_KIND_MEMORY_POOL;
  pool.memoryPoolOperationType = CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_CREATED;
  h.feed(pool);
  auto file = h.read();

  REQUIRE(file.all.memory_events.size() == 2);
  MemoryEventRecord expected;
  expected.timestamp_ns = 123'456;
  expected.operation = MemoryOperation::kAllocate;
  expected.device = 1;
  expected.address = 0x7f00'0000'0000ull;
  expected.bytes = 2ull << 30;
  expected.memory_kind = MemoryKind::kDevice;
  expected.stream = 14;
  expected.correlation_id = 31;
  expected.is_async = true;
  expected.pool_address = 0x7e00'0000'0000ull;
  CHECK(file.all.memory_events[0] == expected);

  const MemoryEventRecord& r = file.all.memory_events[1];
  CHECK(r.operation == MemoryOperation::kRelease);
  CHECK(r.timestamp_ns == 223'456);
  CHECK(r.stream == kInvalidStream);
  CHECK_FALSE(r.is_async);
  CHECK(r.pool_address == 0);

  const auto& stats = h.translator().stats();
  CHECK(stats.seen[CUPTI_ACTIVITY_KIND_MEMORY_POOL] == 1);
  CHECK(stats.unknown_kind == 0);
}

TEST_CASE("translator: API calls, with each function named once through the lookup") {
  Harness h;
  auto api = [](CUpti_ActivityKind kind, uint32_t cbid, uint64_t start, uint32_t correlation) {
    CUpti_ActivityAPI a{};
    a.kind = kind;
    a.cbid = cbid;
    a.start = start;
    a.end = start + 40;
    a.processId = 4321;
    a.threadId = 98765;
    a.correlationId = correlation;
    a.returnValue = 0;
    return a;
  };
  h.feed(api(CUPTI_ACTIVITY_KIND_RUNTIME, 211, 1000, 1));
  h.feed(api(CUPTI_ACTIVITY_KIND_RUNTIME, 211, 2000, 3));
  auto failed = api(CUPTI_ACTIVITY_KIND_DRIVER, 17, 3000, 4);
  failed.returnValue = 2;  // CUDA_ERROR_OUT_OF_MEMORY
  h.feed(failed);
  h.feed(api(CUPTI_ACTIVITY_KIND_DRIVER, 307, 4000, 5));
  h.feed(api(CUPTI_ACTIVITY_KIND_RUNTIME, 17, 5000, 6));  // same cbid, other domain
  auto file = h.read();

  REQUIRE(file.all.api_calls.size() == 5);
  ApiCallRecord expected;
  expected.start_ns = 1000;
  expected.end_ns = 1040;
  expected.domain = ApiDomain::kRuntime;
  expected.cbid = 211;
  expected.thread_id = 98765;
  expected.correlation_id = 1;
  expected.return_code = 0;
  expected.process_id = 4321;
  CHECK(file.all.api_calls[0] == expected);
  CHECK(file.all.api_calls[2].domain == ApiDomain::kDriver);
  CHECK(file.all.api_calls[2].return_code == 2);
  CHECK(file.all.api_calls[4].domain == ApiDomain::kRuntime);

  std::map<std::pair<ApiDomain, uint32_t>, std::string> names;
  for (const auto& f : file.all.api_functions) {
    CHECK(names.emplace(std::pair{f.domain, f.cbid}, file.name(f.name_id)).second);
  }
  CHECK(names == std::map<std::pair<ApiDomain, uint32_t>, std::string>{
                     {{ApiDomain::kRuntime, 211}, "cudaLaunchKernel_v7000"},
                     {{ApiDomain::kRuntime, 17}, "runtime_api_17"},
                     {{ApiDomain::kDriver, 17}, "driver_api_17"},
                     {{ApiDomain::kDriver, 307}, "cuLaunchKernel"},
                 });
  CHECK(h.lookups[{CUPTI_CB_DOMAIN_RUNTIME_API, 211}] == 1);
  CHECK(h.lookups[{CUPTI_CB_DOMAIN_DRIVER_API, 17}] == 1);
  CHECK(h.lookups.size() == 4);
}

TEST_CASE("translator: an NVTX range gets its data whether it comes before the start, between, or after the end") {
  Harness h;
  // Data before the start.
  h.feed(markerData(1, 0xff00ff00, 3, -7));
  h.feed(marker(1, CUPTI_ACTIVITY_FLAG_MARKER_START, 100, 11, "before", "nccl"));
  h.feed(marker(1, CUPTI_ACTIVITY_FLAG_MARKER_END, 200, 11, nullptr, "nccl"));
  CHECK(h.written(Category::kNvtx) == 1);
  // Data between start and end.
  h.feed(marker(2, CUPTI_ACTIVITY_FLAG_MARKER_START, 300, 11, "between"));
  h.feed(markerData(2, 0xff0000ff, 4, 8));
  h.feed(marker(2, CUPTI_ACTIVITY_FLAG_MARKER_END, 400, 11, nullptr));
  CHECK(h.written(Category::kNvtx) == 2);
  // Data after the end: the range waits for it.
  h.feed(marker(3, CUPTI_ACTIVITY_FLAG_MARKER_START, 500, 11, "after"));
  h.feed(marker(3, CUPTI_ACTIVITY_FLAG_MARKER_END, 600, 11, nullptr));
  CHECK(h.written(Category::kNvtx) == 2);
  h.translator().flushPending();  // the end of the buffer the range came in: it may wait one more
  CHECK(h.written(Category::kNvtx) == 2);
  h.feed(markerData(3, 0xffff0000, 5, 9));
  CHECK(h.written(Category::kNvtx) == 3);
  auto file = h.read();

  REQUIRE(file.all.nvtx_events.size() == 3);
  NvtxEventRecord expected;
  expected.kind = NvtxEventKind::kRange;
  expected.start_ns = 100;
  expected.end_ns = 200;
  expected.domain_id = file.all.nvtx_events[0].domain_id;
  expected.name_id = file.all.nvtx_events[0].name_id;
  expected.thread_id = 11;
  expected.category = 3;
  expected.color = 0xff00ff00;
  expected.payload = {intField(-7)};
  CHECK(file.all.nvtx_events[0] == expected);
  CHECK(file.name(expected.name_id) == "before");
  CHECK(file.name(expected.domain_id) == "nccl");

  const NvtxEventRecord* between = findNvtx(file, "between");
  REQUIRE(between != nullptr);
  CHECK(between->kind == NvtxEventKind::kRange);
  CHECK(between->start_ns == 300);
  CHECK(between->end_ns == 400);
  CHECK(between->domain_id == 0);  // the default domain
  CHECK(between->color == 0xff0000ff);
  CHECK(between->category == 4);
  CHECK(between->payload == std::vector<PayloadField>{intField(8)});

  const NvtxEventRecord* after = findNvtx(file, "after");
  REQUIRE(after != nullptr);
  CHECK(after->start_ns == 500);
  CHECK(after->end_ns == 600);
  CHECK(after->color == 0xffff0000);
  CHECK(after->category == 5);
  CHECK(after->payload == std::vector<PayloadField>{intField(9)});

  CHECK(h.translator().stats().unmatched_nvtx == 0);
  CHECK(h.translator().stats().orphan_marker_data == 0);
}

TEST_CASE("translator: NCCL's extended payloads become named fields of its ranges, by the schemas CUPTI describes") {
  using namespace gpuxray::testing::nccl_nvtx;
  constexpr uint32_t kNcclCuptiDomain = 4;
  FakeCupti::instance().reset();
  registerSchemas(FakeCupti::instance(), kNcclCuptiDomain);
  TranslatorOptions options;
  options.free_cupti_allocations = true;
  Harness h(options, gpuxray::inject::cuptiPayloadTypeSource(FakeCupti::instance().api(), true));

  h.feed(marker(7, CUPTI_ACTIVITY_FLAG_MARKER_START, 1000, 21, "ncclAllReduce", "NCCL"));
  h.feed(extendedPayloadData(7, kAllReduceSchema, AllReduce{0xabcdef0123456789ull, 8u << 20, RedOp::kSum},
                             kNcclCuptiDomain));
  h.feed(marker(7, CUPTI_ACTIVITY_FLAG_MARKER_END, 1900, 21, nullptr, "NCCL"));
  // Data before its range, as CUPTI may deliver it.
  h.feed(extendedPayloadData(8, kSendSchema, SendRecv{0xabcdef0123456789ull, 4096, 3}, kNcclCuptiDomain));
  h.feed(marker(8, CUPTI_ACTIVITY_FLAG_MARKER_START, 2000, 21, "ncclSend", "NCCL"));
  h.feed(marker(8, CUPTI_ACTIVITY_FLAG_MARKER_END, 2100, 21, nullptr, "NCCL"));
  // The same schema id in another domain, which registered nothing: kept undecoded.
  h.feed(marker(9, CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS, 2200, 21, "someone else's", "other"));
  h.feed(extendedPayloadData(9, kAllReduceSchema, AllReduce{1, 2, RedOp::kMax}, kNcclCuptiDomain + 1));
  auto file = h.read();

  auto fields = [&](const char* name) {
    const NvtxEventRecord* event = findNvtx(file, name);
    REQUIRE(event != nullptr);
    std::vector<std::string> text;
    for (const PayloadField& field : event->payload) {
      std::string value = field.type == PayloadField::Type::kString ? file.name(field.string_id)
                          : field.type == PayloadField::Type::kUint ? std::to_string(field.uint_value)
                          : field.type == PayloadField::Type::kInt  ? std::to_string(field.int_value)
                                                                    : std::to_string(field.double_value);
      text.push_back(file.name(field.name_id) + "=" + value);
    }
    return text;
  };
  const NvtxEventRecord* all_reduce = findNvtx(file, "ncclAllReduce");
  REQUIRE(all_reduce != nullptr);
  CHECK(all_reduce->kind == NvtxEventKind::kRange);
  CHECK(file.name(all_reduce->domain_id) == "NCCL");
  CHECK(all_reduce->start_ns == 1000);
  CHECK(all_reduce->end_ns == 1900);
  CHECK(all_reduce->payload_schema == kAllReduceSchema);
  CHECK(fields("ncclAllReduce") == std::vector<std::string>{"NCCL communicator ID=" + std::to_string(0xabcdef0123456789ull),
                                                            "Message size [bytes]=8388608", "Reduction operation=Sum"});
  CHECK(all_reduce->payload[0].type == PayloadField::Type::kUint);
  CHECK(fields("ncclSend") == std::vector<std::string>{"NCCL communicator ID=" + std::to_string(0xabcdef0123456789ull),
                                                       "Message size [bytes]=4096", "Peer rank=3"});
  CHECK(findNvtx(file, "ncclSend")->payload[2].type == PayloadField::Type::kInt);
  CHECK(fields("someone else's").empty());
  CHECK(findNvtx(file, "someone else's")->payload_schema == kAllReduceSchema);

  const auto& stats = h.translator().stats();
  CHECK(stats.extended_payloads == 3);
  CHECK(stats.nvtx_payloads.decoded_fields == 6);
  CHECK(stats.nvtx_payloads.undecoded_payloads == 1);
  CHECK(stats.nvtx_payloads.skipped_entries == 0);
}

TEST_CASE("translator: NVTX marks pair with data in either order and are written without it after a full period") {
  Harness h;
  h.feed(marker(10, CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS, 1000, 5, "mark-then-data"));
  CHECK(h.written(Category::kNvtx) == 0);
  h.feed(markerData(10, 0xff123456, 1, 42));
  CHECK(h.written(Category::kNvtx) == 1);

  h.feed(markerData(11, 0xff654321, 2, 43));
  h.feed(marker(11, CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS, 1100, 5, "data-then-mark"));
  CHECK(h.written(Category::kNvtx) == 2);

  h.feed(marker(12, CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS, 1200, 5, "no-data"));
  h.translator().flushPending();
  CHECK(h.written(Category::kNvtx) == 2);  // may still get data from the next buffer
  h.translator().flushPending();
  CHECK(h.written(Category::kNvtx) == 3);

  // Data whose marker never comes is dropped after the same wait, and counted.
  h.feed(markerData(13, 0, 0, 1));
  h.translator().flushPending();
  h.translator().flushPending();
  CHECK(h.translator().stats().orphan_marker_data == 1);
  // Late data for the mark already written without it is an orphan too (held until finish()).
  h.feed(markerData(12, 0, 0, 1));
  auto file = h.read();
  CHECK(h.translator().stats().orphan_marker_data == 2);

  REQUIRE(file.all.nvtx_events.size() == 3);
  NvtxEventRecord expected;
  expected.kind = NvtxEventKind::kMark;
  expected.start_ns = 1000;
  expected.end_ns = 1000;
  expected.name_id = file.all.nvtx_events[0].name_id;
  expected.thread_id = 5;
  expected.category = 1;
  expected.color = 0xff123456;
  expected.payload = {intField(42)};
  CHECK(file.all.nvtx_events[0] == expected);
  CHECK(file.name(expected.name_id) == "mark-then-data");

  const NvtxEventRecord* second = findNvtx(file, "data-then-mark");
  REQUIRE(second != nullptr);
  CHECK(second->kind == NvtxEventKind::kMark);
  CHECK(second->end_ns == 1100);
  CHECK(second->color == 0xff654321);
  CHECK(second->payload == std::vector<PayloadField>{intField(43)});

  const NvtxEventRecord* bare = findNvtx(file, "no-data");
  REQUIRE(bare != nullptr);
  CHECK(bare->kind == NvtxEventKind::kMark);
  CHECK(bare->start_ns == 1200);
  CHECK(bare->end_ns == 1200);
  CHECK(bare->color == 0);
  CHECK(bare->payload.empty());
}

TEST_CASE("translator: held NVTX events are all written by finish()") {
  Harness h;
  h.feed(marker(1, CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS, 10, 5, "held mark"));
  h.feed(marker(2, CUPTI_ACTIVITY_FLAG_MARKER_START, 20, 5, "held range"));
  h.feed(marker(2, CUPTI_ACTIVITY_FLAG_MARKER_END, 30, 5, nullptr));
  CHECK(h.written(Category::kNvtx) == 0);
  auto file = h.read();
  CHECK(file.all.nvtx_events.size() == 2);
  CHECK(findNvtx(file, "held mark") != nullptr);
  CHECK(findNvtx(file, "held range") != nullptr);
}

TEST_CASE("translator: NVTX depth, stream scope, payload kinds, unmatched ends and unclosed starts") {
  Harness h;
  // Thread 1 nests three deep in the default domain; another domain on the same thread starts at 0.
  h.feed(marker(1, CUPTI_ACTIVITY_FLAG_MARKER_START, 100, 1, "outer"));
  h.feed(marker(2, CUPTI_ACTIVITY_FLAG_MARKER_START, 110, 1, "middle"));
  h.feed(marker(3, CUPTI_ACTIVITY_FLAG_MARKER_START, 120, 1, "inner"));
  h.feed(marker(4, CUPTI_ACTIVITY_FLAG_MARKER_START, 125, 1, "other domain", "mine"));
  h.feed(marker(5, CUPTI_ACTIVITY_FLAG_MARKER_START, 126, 2, "other thread"));
  h.feed(marker(3, CUPTI_ACTIVITY_FLAG_MARKER_END, 130, 1, nullptr));
  h.feed(marker(6, CUPTI_ACTIVITY_FLAG_MARKER_START, 135, 1, "sibling of inner"));
  for (uint32_t id : {6u, 2u, 1u, 4u, 5u}) h.feed(marker(id, CUPTI_ACTIVITY_FLAG_MARKER_END, 140 + id, 1, nullptr));

  // Scoped to a stream.
  auto on_stream = marker(20, CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS, 300, 0, "on stream");
  on_stream.objectKind = CUPTI_ACTIVITY_OBJECT_STREAM;
  on_stream.objectId.dcs.deviceId = 2;
  on_stream.objectId.dcs.contextId = 9;
  on_stream.objectId.dcs.streamId = 33;
  h.feed(on_stream);

  // Payload kinds.
  auto payload_mark = [&](uint32_t id, const char* name, CUpti_MetricValueKind kind, uint64_t bits) {
    h.feed(marker(id, CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS, 400 + id, 1, name));
    CUpti_ActivityMarkerData2 d{};
    d.kind = CUPTI_ACTIVITY_KIND_MARKER_DATA;
    d.flags = CUPTI_ACTIVITY_FLAG_MARKER_COLOR_NONE;
    d.id = id;
    d.payloadKind = kind;
    d.payload.metricValueUint64 = bits;
    d.color = 0x12345678;  // COLOR_NONE: not a color
    d.category = 0;
    h.feed(d);
  };
  double three_halves = 1.5;
  uint64_t three_halves_bits = 0;
  std::memcpy(&three_halves_bits, &three_halves, sizeof three_halves_bits);
  payload_mark(30, "uint", CUPTI_METRIC_VALUE_KIND_UINT64, 0xffff'ffff'ffff'fff0ull);
  payload_mark(31, "double", CUPTI_METRIC_VALUE_KIND_DOUBLE, three_halves_bits);
  payload_mark(32, "none", CUPTI_METRIC_VALUE_KIND_DOUBLE, 0);

  nvtxPayloadData_t extended{};
  extended.schemaId = (1ull << 24) + 5;
  extended.size = 0;
  extended.payload = nullptr;
  payload_mark(33, "extended", CUPTI_METRIC_VALUE_KIND_NVTX_EXTENDED_PAYLOAD, reinterpret_cast<uintptr_t>(&extended));

  // An end without a start, and a start never closed.
  h.feed(marker(50, CUPTI_ACTIVITY_FLAG_MARKER_END, 500, 1, nullptr));
  h.feed(marker(51, CUPTI_ACTIVITY_FLAG_MARKER_START, 510, 1, "never closed"));
  auto file = h.read();

  auto depth = [&](const char* name) {
    const NvtxEventRecord* e = findNvtx(file, name);
    REQUIRE(e != nullptr);
    return e->depth;
  };
  CHECK(depth("outer") == 0);
  CHECK(depth("middle") == 1);
  CHECK(depth("inner") == 2);
  CHECK(depth("sibling of inner") == 2);
  CHECK(depth("other domain") == 0);
  CHECK(depth("other thread") == 0);
  CHECK(findNvtx(file, "outer")->end_ns == 141);
  CHECK(file.name(findNvtx(file, "other domain")->domain_id) == "mine");

  const NvtxEventRecord* stream = findNvtx(file, "on stream");
  REQUIRE(stream != nullptr);
  CHECK(stream->thread_id == 0);
  CHECK(stream->device == 2);
  CHECK(stream->stream == 33);

  PayloadField uint_field;
  uint_field.type = PayloadField::Type::kUint;
  uint_field.uint_value = 0xffff'ffff'ffff'fff0ull;
  CHECK(findNvtx(file, "uint")->payload == std::vector<PayloadField>{uint_field});
  CHECK(findNvtx(file, "uint")->color == 0);
  PayloadField double_field;
  double_field.type = PayloadField::Type::kDouble;
  double_field.double_value = 1.5;
  CHECK(findNvtx(file, "double")->payload == std::vector<PayloadField>{double_field});
  CHECK(findNvtx(file, "none")->payload.empty());
  const NvtxEventRecord* ext = findNvtx(file, "extended");
  REQUIRE(ext != nullptr);
  CHECK(ext->payload.empty());
  CHECK(ext->payload_schema == (1ull << 24) + 5);

  const NvtxEventRecord* open = findNvtx(file, "never closed");
  REQUIRE(open != nullptr);
  CHECK(open->kind == NvtxEventKind::kRange);
  CHECK(open->start_ns == 510);
  CHECK(open->end_ns == 510);

  const auto& stats = h.translator().stats();
  CHECK(stats.unmatched_nvtx == 2);
  CHECK(stats.extended_payloads == 1);
  CHECK(stats.seen[CUPTI_ACTIVITY_KIND_MARKER] == 19);
  CHECK(stats.seen[CUPTI_ACTIVITY_KIND_MARKER_DATA] == 4);
}

TEST_CASE("translator: synchronizations, external correlations, overheads, names and streams") {
  Harness h;
  CUpti_ActivityContext3 context{};
  context.kind = CUPTI_ACTIVITY_KIND_CONTEXT;
  context.contextId = 8;
  context.deviceId = 6;
  h.feed(context);

  CUpti_ActivitySynchronization2 sync{};
  sync.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  sync.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT;
  sync.start = 1000;
  sync.end = 1500;
  sync.correlationId = 77;
  sync.contextId = 8;
  sync.streamId = 19;
  sync.cudaEventId = 4;
  h.feed(sync);

  CUpti_ActivityExternalCorrelation external{};
  external.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
  external.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
  external.externalId = 0xabcdef0123ull;
  external.correlationId = 77;
  h.feed(external);

  CUpti_ActivityOverhead3 overhead{};
  overhead.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
  overhead.overheadKind = CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH;
  overhead.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
  overhead.objectId.pt.processId = 10;
  overhead.objectId.pt.threadId = 20;
  overhead.start = 5000;
  overhead.end = 5600;
  h.feed(overhead);
  CUpti_ActivityOverhead3 device_overhead = overhead;
  device_overhead.overheadKind = CUPTI_ACTIVITY_OVERHEAD_DRIVER_COMPILER;
  device_overhead.objectKind = CUPTI_ACTIVITY_OBJECT_DEVICE;
  device_overhead.objectId.dcs.deviceId = 3;
  h.feed(device_overhead);

  auto name = [&](CUpti_ActivityObjectKind kind, uint32_t a, uint32_t b, uint32_t c, const char* text) {
    CUpti_ActivityName n{};
    n.kind = CUPTI_ACTIVITY_KIND_NAME;
    n.objectKind = kind;
    if (kind == CUPTI_ACTIVITY_OBJECT_THREAD || kind == CUPTI_ACTIVITY_OBJECT_PROCESS) {
      n.objectId.pt.processId = a;
      n.objectId.pt.threadId = b;
    } else {
      n.objectId.dcs.deviceId = a;
      n.objectId.dcs.contextId = b;
      n.objectId.dcs.streamId = c;
    }
    n.name = text;
    h.feed(n);
  };
  name(CUPTI_ACTIVITY_OBJECT_THREAD, 10, 20, 0, "dataloader");
  name(CUPTI_ACTIVITY_OBJECT_DEVICE, 1, 0, 0, "gpu one");
  name(CUPTI_ACTIVITY_OBJECT_CONTEXT, 1, 8, 0, "primary");
  name(CUPTI_ACTIVITY_OBJECT_STREAM, 1, 8, 19, "nccl stream");

  CUpti_ActivityStream stream{};
  stream.kind = CUPTI_ACTIVITY_KIND_STREAM;
  stream.contextId = 8;
  stream.streamId = 19;
  stream.priority = static_cast<uint32_t>(-2);
  stream.flag = CUPTI_ACTIVITY_STREAM_CREATE_FLAG_NON_BLOCKING;
  stream.correlationId = 61;
  h.feed(stream);
  CUpti_ActivityStream unknown_context = stream;
  unknown_context.contextId = 99;
  h.feed(unknown_context);
  auto file = h.read();

  REQUIRE(file.all.synchronizations.size() == 1);
  SynchronizationRecord expected_sync;
  expected_sync.start_ns = 1000;
  expected_sync.end_ns = 1500;
  expected_sync.kind = SynchronizationKind::kStreamWaitEvent;
  expected_sync.device = 6;
  expected_sync.stream = 19;
  expected_sync.correlation_id = 77;
  expected_sync.context = 8;
  expected_sync.cuda_event_id = 4;
  CHECK(file.all.synchronizations[0] == expected_sync);

  REQUIRE(file.all.external_correlations.size() == 1);
  CHECK(file.all.external_correlations[0] ==
        ExternalCorrelationRecord{CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 0xabcdef0123ull, 77});

  REQUIRE(file.all.overheads.size() == 2);
  CHECK(file.all.overheads[0] == OverheadRecord{CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH, 5000, 5600, 20, 0});
  CHECK(file.all.overheads[1] == OverheadRecord{CUPTI_ACTIVITY_OVERHEAD_DRIVER_COMPILER, 5000, 5600, 0, 3});

  REQUIRE(file.all.resource_names.size() == 4);
  const auto& names = file.all.resource_names;
  CHECK(names[0].kind == ResourceKind::kThread);
  CHECK(names[0].id == 20);
  CHECK(file.name(names[0].name_id) == "dataloader");
  CHECK(names[1].kind == ResourceKind::kDevice);
  CHECK(names[1].id == 1);
  CHECK(names[1].device == 1);
  CHECK(file.name(names[1].name_id) == "gpu one");
  CHECK(names[2].kind == ResourceKind::kContext);
  CHECK(names[2].id == 8);
  CHECK(names[2].device == 1);
  CHECK(file.name(names[2].name_id) == "primary");
  CHECK(names[3].kind == ResourceKind::kStream);
  CHECK(names[3].id == 19);
  CHECK(names[3].device == 1);
  CHECK(file.name(names[3].name_id) == "nccl stream");

  REQUIRE(file.all.streams.size() == 2);
  CHECK(file.all.streams[0] == StreamRecord{19, 6, 8, -2, CUPTI_ACTIVITY_STREAM_CREATE_FLAG_NON_BLOCKING, 61});
  CHECK(file.all.streams[1].device == 0);  // context never described
  CHECK(h.translator().stats().seen[CUPTI_ACTIVITY_KIND_CONTEXT] == 1);
}

TEST_CASE("translator: DEVICE records are kept for the capture, not written") {
  Harness h;
  CUpti_ActivityDevice5 d{};
  d.kind = CUPTI_ACTIVITY_KIND_DEVICE;
  d.globalMemoryBandwidth = 4'800'000'000ull;  // kB/s
  d.globalMemorySize = 141ull << 30;
  d.constantMemorySize = 65536;
  d.l2CacheSize = 50 << 20;
  d.numThreadsPerWarp = 32;
  d.coreClockRate = 1'980'000;
  d.numMemcpyEngines = 7;
  d.numMultiprocessors = 132;
  d.maxIPC = 4;
  d.maxWarpsPerMultiprocessor = 64;
  d.maxBlocksPerMultiprocessor = 32;
  d.maxSharedMemoryPerMultiprocessor = 233472;
  d.maxRegistersPerMultiprocessor = 65536;
  d.maxRegistersPerBlock = 65536;
  d.maxSharedMemoryPerBlock = 49152;
  d.maxThreadsPerBlock = 1024;
  d.computeCapabilityMajor = 9;
  d.computeCapabilityMinor = 0;
  d.id = 2;
  d.uuid = uuidOf(0x80);
  d.name = "NVIDIA H200";
  d.isMigEnabled = 0;
  d.gpuInstanceId = UINT32_MAX;
  d.computeInstanceId = UINT32_MAX;
  d.isNumaNode = 0;
  d.numaId = UINT32_MAX;
  h.feed(d);

  CUpti_ActivityDevice5 mig = d;
  mig.id = 3;
  mig.isMigEnabled = 1;
  mig.gpuInstanceId = 5;
  mig.computeInstanceId = 1;
  mig.isNumaNode = 1;
  mig.numaId = 4;
  h.feed(mig);

  const auto& devices = h.translator().devices();
  REQUIRE(devices.size() == 2);
  REQUIRE(devices.contains(2));
  DeviceProperties expected;
  expected.device_id = 2;
  expected.name = "NVIDIA H200";
  expected.uuid = rawUuid(0x80);
  expected.compute_major = 9;
  expected.compute_minor = 0;
  expected.sm_count = 132;
  expected.max_threads_per_sm = 2048;
  expected.max_warps_per_sm = 64;
  expected.max_blocks_per_sm = 32;
  expected.registers_per_sm = 65536;
  expected.registers_per_block = 65536;
  expected.shared_memory_per_sm = 233472;
  expected.shared_memory_per_block = 49152;
  expected.memory_bytes = 141ull << 30;
  expected.memory_bandwidth_bytes_per_s = 4'800'000'000'000ull;
  expected.core_clock_khz = 1'980'000;
  expected.l2_cache_bytes = 50 << 20;
  expected.max_threads_per_block = 1024;
  expected.warp_size = 32;
  CHECK(devices.at(2) == expected);
  CHECK(devices.at(2).uuid.size() == 16);

  DeviceProperties expected_mig = expected;
  expected_mig.device_id = 3;
  expected_mig.mig_gpu_instance_id = 5;
  expected_mig.mig_compute_instance_id = 1;
  expected_mig.numa_node = 4;
  CHECK(devices.at(3) == expected_mig);

  auto file = h.read();
  CHECK(file.all.devices.empty());
  CHECK(h.translator().stats().seen[CUPTI_ACTIVITY_KIND_DEVICE] == 2);
}

TEST_CASE("translator: NVLink records become links between GPUs, to the CPU, or to the NVSwitch fabric") {
  Harness h;
  CUpti_ActivityDevice5 d{};
  d.kind = CUPTI_ACTIVITY_KIND_DEVICE;
  d.id = 4;
  d.uuid = uuidOf(0x10);
  d.name = "gpu";
  h.feed(d);

  auto nvlink = [](CUpti_DevType type0, CUuuid uuid0, CUpti_DevType type1, CUuuid uuid1) {
    CUpti_ActivityNvLink4 l{};
    l.kind = CUPTI_ACTIVITY_KIND_NVLINK;
    l.nvlinkVersion = 4;
    l.typeDev0 = type0;
    l.typeDev1 = type1;
    l.idDev0.uuidDev = uuid0;
    l.idDev1.uuidDev = uuid1;
    l.physicalNvLinkCount = 3;
    std::memset(l.portDev0, CUPTI_NVLINK_INVALID_PORT, sizeof l.portDev0);
    std::memset(l.portDev1, CUPTI_NVLINK_INVALID_PORT, sizeof l.portDev1);
    l.portDev0[0] = 0;
    l.portDev0[1] = 5;
    l.portDev0[2] = CUPTI_NVLINK_INVALID_PORT;
    l.portDev0[3] = 9;  // beyond physicalNvLinkCount: ignored
    l.portDev1[0] = 2;
    l.portDev1[1] = 3;
    l.portDev1[2] = 17;
    l.bandwidth = 75'000'000;  // kB/s
    return l;
  };
  // GPU 4 to an unknown GPU, directly.
  h.feed(nvlink(CUPTI_DEV_TYPE_GPU, uuidOf(0x10), CUPTI_DEV_TYPE_GPU, uuidOf(0x20)));
  // GPU to the CPU's NVLink unit.
  auto to_cpu = nvlink(CUPTI_DEV_TYPE_GPU, uuidOf(0x20), CUPTI_DEV_TYPE_NPU, CUuuid{});
  to_cpu.idDev1.npu.index = 1;
  to_cpu.idDev1.npu.domainId = 2;
  h.feed(to_cpu);
  // Three GPUs through NVSwitches: three pair records, one link per GPU.
  for (auto [x, y] : {std::pair<uint8_t, uint8_t>{0x30, 0x40}, {0x30, 0x50}, {0x40, 0x50}}) {
    auto switched = nvlink(CUPTI_DEV_TYPE_GPU, uuidOf(x), CUPTI_DEV_TYPE_GPU, uuidOf(y));
    switched.nvswitchConnected = 1;
    h.feed(switched);
  }
  auto file = h.read();

  REQUIRE(file.all.links.size() == 5);
  Link direct;
  direct.kind = LinkKind::kNvLink;
  direct.a = {EndpointKind::kGpu, "GPU-10111213-1415-1617-1819-1a1b1c1d1e1f", 4};
  direct.b = {EndpointKind::kGpu, "GPU-20212223-2425-2627-2829-2a2b2c2d2e2f", -1};
  direct.version = 4;
  direct.width = 3;
  direct.bandwidth_bytes_per_s = 75'000'000'000ull;
  direct.ports_a = {0, 5};
  direct.ports_b = {2, 3, 17};
  CHECK(file.all.links[0] == direct);

  const Link& cpu = file.all.links[1];
  CHECK(cpu.a.kind == EndpointKind::kGpu);
  CHECK(cpu.b == Endpoint{EndpointKind::kCpu, "npu-2-1", -1});
  CHECK(cpu.ports_b.empty());

  // Each GPU with its own ports: GPU-30 was always side 0 of its records, the others side 1 first.
  std::vector<std::pair<std::string, std::vector<uint32_t>>> switched;
  for (size_t i = 2; i < file.all.links.size(); ++i) {
    const Link& l = file.all.links[i];
    CHECK(l.kind == LinkKind::kNvLink);
    CHECK(l.b == Endpoint{EndpointKind::kNvSwitch, "nvswitch", -1});
    CHECK(l.ports_b.empty());
    CHECK(l.width == 3);
    CHECK(l.bandwidth_bytes_per_s == 75'000'000'000ull);
    switched.emplace_back(l.a.id.substr(0, 6), l.ports_a);
  }
  CHECK(switched == std::vector<std::pair<std::string, std::vector<uint32_t>>>{
                        {"GPU-30", {0, 5}}, {"GPU-40", {2, 3, 17}}, {"GPU-50", {2, 3, 17}}});
  CHECK(file.all.devices.empty());
}

TEST_CASE("translator: PCIe records become links to the upstream bridge, with bandwidth from generation and width") {
  Harness h;
  CUpti_ActivityPcie gpu{};
  gpu.kind = CUPTI_ACTIVITY_KIND_PCIE;
  gpu.type = CUPTI_PCIE_DEVICE_TYPE_GPU;
  gpu.id.devId = 1;
  gpu.domain = 0;
  gpu.pcieGeneration = CUPTI_PCIE_GEN_GEN4;
  gpu.linkRate = 16;
  gpu.linkWidth = 16;
  gpu.upstreamBus = 0x3a;
  gpu.attr.gpuAttr.uuidDev = uuidOf(0xa0);
  h.feed(gpu);

  CUpti_ActivityPcie bridge{};
  bridge.kind = CUPTI_ACTIVITY_KIND_PCIE;
  bridge.type = CUPTI_PCIE_DEVICE_TYPE_BRIDGE;
  bridge.id.bridgeId = 7;
  bridge.domain = 1;
  bridge.pcieGeneration = CUPTI_PCIE_GEN_GEN5;
  bridge.linkRate = 32;
  bridge.linkWidth = 8;
  bridge.upstreamBus = 0x10;
  bridge.attr.bridgeAttr.secondaryBus = 0x3a;
  bridge.attr.bridgeAttr.deviceId = 0x1234;
  bridge.attr.bridgeAttr.vendorId = 0x10b5;
  h.feed(bridge);
  auto file = h.read();

  REQUIRE(file.all.links.size() == 2);
  Link expected;
  expected.kind = LinkKind::kPcie;
  expected.a = {EndpointKind::kGpu, "GPU-a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf", 1};
  expected.b = {EndpointKind::kPcieBridge, "0000:3a", -1};
  expected.version = 4;
  expected.width = 16;
  expected.bandwidth_bytes_per_s = 1'969'230'769ull * 16;
  CHECK(file.all.links[0] == expected);

  Link expected_bridge;
  expected_bridge.kind = LinkKind::kPcie;
  expected_bridge.a = {EndpointKind::kPcieBridge, "0001:3a", -1};
  expected_bridge.b = {EndpointKind::kPcieBridge, "0001:10", -1};
  expected_bridge.version = 5;
  expected_bridge.width = 8;
  expected_bridge.bandwidth_bytes_per_s = 3'938'461'538ull * 8;
  CHECK(file.all.links[1] == expected_bridge);
}

TEST_CASE("translator: kinds it does not read are counted, graph traces and pools are seen but not written") {
  Harness h;
  CUpti_ActivityGraphTrace2 graph{};
  graph.kind = CUPTI_ACTIVITY_KIND_GRAPH_TRACE;
  graph.start = 1;
  graph.end = 2;
  h.feed(graph);

  CUpti_ActivityCudaEvent2 event{};
  event.kind = CUPTI_ACTIVITY_KIND_CUDA_EVENT;
  h.feed(event);
  CUpti_ActivityDeviceAttribute attribute{};
  attribute.kind = CUPTI_ACTIVITY_KIND_DEVICE_ATTRIBUTE;
  h.feed(attribute);
  // A kind from a newer CUPTI than this build knows.
  CUpti_ActivityAPI future{};
  future.kind = static_cast<CUpti_ActivityKind>(CUPTI_ACTIVITY_KIND_COUNT + 5);
  h.feed(future);
  auto file = h.read();

  const auto& stats = h.translator().stats();
  CHECK(stats.unknown_kind == 3);
  CHECK(stats.seen[CUPTI_ACTIVITY_KIND_GRAPH_TRACE] == 1);
  CHECK(stats.seen[CUPTI_ACTIVITY_KIND_CUDA_EVENT] == 1);
  CHECK(stats.seen[CUPTI_ACTIVITY_KIND_DEVICE_ATTRIBUTE] == 1);
  CategoryCounts counts{};
  countRecords(file.all, counts);
  uint64_t total = 0;
  for (uint64_t c : counts) total += c;
  CHECK(total == 0);
}

TEST_CASE("translator: with free_cupti_allocations it frees what CUDA 13.0 leaves to the client") {
  // Under the sanitizer build a leak or a double free here fails the run.
  TranslatorOptions options;
  options.free_cupti_allocations = true;
  Harness h(options);

  CUpti_ActivityDevice5 d{};
  d.kind = CUPTI_ACTIVITY_KIND_DEVICE;
  d.id = 0;
  char* name = static_cast<char*>(std::malloc(16));
  std::strcpy(name, "NVIDIA A100");
  d.name = name;
  h.feed(d);

  CUpti_ActivityOverhead3 overhead{};
  overhead.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
  overhead.overheadKind = CUPTI_ACTIVITY_OVERHEAD_COMMAND_BUFFER_FULL;
  overhead.overheadData = std::malloc(32);
  h.feed(overhead);

  auto* payload = static_cast<nvtxPayloadData_t*>(std::malloc(sizeof(nvtxPayloadData_t)));
  payload->schemaId = 1234;
  payload->size = 8;
  payload->payload = std::malloc(8);
  CUpti_ActivityMarkerData2 data{};
  data.kind = CUPTI_ACTIVITY_KIND_MARKER_DATA;
  data.id = 1;
  data.payloadKind = CUPTI_METRIC_VALUE_KIND_NVTX_EXTENDED_PAYLOAD;
  data.payload.metricValueNvtxExtendedPayload = reinterpret_cast<uintptr_t>(payload);
  h.feed(data);
  h.feed(marker(1, CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS, 5, 1, "with extended payload"));

  CHECK(h.translator().devices().at(0).name == "NVIDIA A100");
  auto file = h.read();
  REQUIRE(file.all.nvtx_events.size() == 1);
  CHECK(file.all.nvtx_events[0].payload_schema == 1234);
}
