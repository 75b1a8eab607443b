// CUDA 12.4-12.9's CUPTI records, built byte by byte at the offsets and sizes of each version's
// own header (docs/cuda-versions.md: CUDA 12.9 Update 1's cupti_activity.h and each 12.x's
// bindings; not the structs this project compiles with), through the translator and through a
// capture session with the fake CUPTI, read back field by field.

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "inject/activity_translator.h"
#include "inject/capture_session.h"
#include "inject/cupti_layouts.h"
#include "proto/trace_reader.h"
#include "tests/support/fake_cupti.h"
#include "tests/support/temp_dir.h"
#include "tests/support/trace_files.h"

namespace {

using namespace gpuxray;
using gpuxray::testing::FakeCupti;

// A record as libcupti lays it out: `size` bytes, CUPTI zeroes what it does not set.
class RawRecord {
 public:
  RawRecord(size_t size, CUpti_ActivityKind kind) : bytes_(size, 0) { put<uint32_t>(0, kind); }
  template <typename T>
  RawRecord& put(size_t offset, T value) {
    REQUIRE(offset + sizeof(T) <= bytes_.size());
    std::memcpy(bytes_.data() + offset, &value, sizeof(T));
    return *this;
  }
  const CUpti_Activity& activity() const { return *reinterpret_cast<const CUpti_Activity*>(bytes_.data()); }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

// What each version's header says, written here independently of cupti_layouts.cc: the byte size
// of the struct it delivers for each kind whose struct changed within CUDA 12.
struct VersionFacts {
  uint32_t api;
  size_t memcpy_bytes;           // Memcpy5 88, Memcpy6 96
  size_t memory_bytes;           // Memory3 120, Memory4 128
  size_t synchronization_bytes;  // Synchronization 40, Synchronization2 56
  size_t context_bytes;          // Context2 24, Context3 32
};
constexpr VersionFacts kCuda12[] = {
    {22, 88, 120, 40, 24}, {23, 88, 120, 40, 32}, {24, 88, 128, 40, 32}, {26, 96, 128, 56, 32}, {28, 96, 128, 56, 32},
};
constexpr size_t kKernel9Bytes = 208;
constexpr size_t kMarkerDataBytes = 32;
constexpr size_t kMarker2Bytes = 56;
constexpr size_t kOverhead3Bytes = 56;
constexpr size_t kDevice5Bytes = 184;

// Kernel9: every field the translator reads, at its offset.
RawRecord kernel9(const char* name, uint64_t start) {
  RawRecord r(kKernel9Bytes, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  r.put<uint16_t>(6, 96)                                 // registersPerThread
      .put<uint64_t>(16, start)                          // start
      .put<uint64_t>(24, start + 4000)                   // end
      .put<uint32_t>(40, 3)                              // deviceId
      .put<uint32_t>(44, 11)                             // contextId
      .put<uint32_t>(48, 13)                             // streamId
      .put<int32_t>(52, 264)                             // gridX
      .put<int32_t>(56, 2)                               // gridY
      .put<int32_t>(60, 1)                               // gridZ
      .put<int32_t>(64, 384)                             // blockX
      .put<int32_t>(68, 1)                               // blockY
      .put<int32_t>(72, 1)                               // blockZ
      .put<int32_t>(76, 1024)                            // staticSharedMemory
      .put<int32_t>(80, 200 * 1024)                      // dynamicSharedMemory
      .put<uint32_t>(84, 16)                             // localMemoryPerThread
      .put<uint32_t>(92, 777)                            // correlationId
      .put<const char*>(104, name)                       // name
      .put<uint8_t>(136, 2)                              // launchType
      .put<uint8_t>(137, 1)                              // isSharedMemoryCarveoutRequested
      .put<uint8_t>(138, 100)                            // sharedMemoryCarveoutRequested
      .put<uint32_t>(140, 233472)                        // sharedMemoryExecuted
      .put<uint64_t>(144, 0x1234'5678'9abcull)           // graphNodeId
      .put<uint32_t>(152, CUPTI_FUNC_SHMEM_LIMIT_OPTIN)  // shmemLimitConfig
      .put<uint32_t>(156, 42)                            // graphId
      .put<uint32_t>(176, 2)                             // clusterX
      .put<uint32_t>(180, 1)                             // clusterY
      .put<uint32_t>(184, 1)                             // clusterZ
      .put<uint32_t>(204, 66);                           // maxActiveClusters
  return r;
}

// Memcpy5 and Memcpy6 share these offsets; only their sizes differ.
RawRecord memcpyRecord(size_t size) {
  RawRecord r(size, CUPTI_ACTIVITY_KIND_MEMCPY);
  r.put<uint8_t>(4, CUPTI_ACTIVITY_MEMCPY_KIND_DTOH)
      .put<uint8_t>(5, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE)
      .put<uint8_t>(6, CUPTI_ACTIVITY_MEMORY_KIND_PINNED)
      .put<uint8_t>(7, CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC)
      .put<uint64_t>(8, 1u << 20)  // bytes
      .put<uint64_t>(16, 50'000)   // start
      .put<uint64_t>(24, 60'000)   // end
      .put<uint32_t>(32, 1)        // deviceId
      .put<uint32_t>(36, 11)       // contextId
      .put<uint32_t>(40, 14)       // streamId
      .put<uint32_t>(44, 901)      // correlationId
      .put<uint64_t>(64, 55)       // graphNodeId
      .put<uint32_t>(72, 5);       // graphId
  return r;
}

// Memory3 and Memory4 share these offsets.
RawRecord memoryRecord(size_t size) {
  RawRecord r(size, CUPTI_ACTIVITY_KIND_MEMORY2);
  r.put<uint32_t>(4, CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION)
      .put<uint32_t>(8, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE)
      .put<uint32_t>(12, 902)                                    // correlationId
      .put<uint64_t>(16, 0x7f00'0000'0000ull)                    // address
      .put<uint64_t>(24, 2u << 20)                               // bytes
      .put<uint64_t>(32, 70'000)                                 // timestamp
      .put<uint32_t>(52, 2)                                      // deviceId
      .put<uint32_t>(60, 15)                                     // streamId
      .put<uint32_t>(72, 1)                                      // isAsync
      .put<uint32_t>(80, CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL)  // memoryPoolConfig.memoryPoolType
      .put<uint64_t>(88, 0x7e00'0000'0000ull);                   // memoryPoolConfig.address
  return r;
}

// Synchronization and Synchronization2 share these offsets.
RawRecord synchronizationRecord(size_t size) {
  RawRecord r(size, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION);
  r.put<uint32_t>(4, CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE)
      .put<uint64_t>(8, 80'000)   // start
      .put<uint64_t>(16, 81'000)  // end
      .put<uint32_t>(24, 903)     // correlationId
      .put<uint32_t>(28, 11)      // contextId
      .put<uint32_t>(32, 16)      // streamId
      .put<uint32_t>(36, 9);      // cudaEventId
  return r;
}

// Context2 and Context3 share contextId and deviceId.
RawRecord contextRecord(size_t size) {
  RawRecord r(size, CUPTI_ACTIVITY_KIND_CONTEXT);
  r.put<uint32_t>(4, 11).put<uint32_t>(8, 3);
  return r;
}

RawRecord markerStart(uint32_t id, const char* name, uint64_t at) {
  RawRecord r(kMarker2Bytes, CUPTI_ACTIVITY_KIND_MARKER);
  r.put<uint32_t>(4, CUPTI_ACTIVITY_FLAG_MARKER_START)
      .put<uint64_t>(8, at)
      .put<uint32_t>(16, id)
      .put<uint32_t>(20, CUPTI_ACTIVITY_OBJECT_THREAD)
      .put<uint32_t>(28, 4242)  // objectId.pt.threadId
      .put<const char*>(40, name);
  return r;
}

RawRecord markerEnd(uint32_t id, uint64_t at) {
  RawRecord r(kMarker2Bytes, CUPTI_ACTIVITY_KIND_MARKER);
  r.put<uint32_t>(4, CUPTI_ACTIVITY_FLAG_MARKER_END).put<uint64_t>(8, at).put<uint32_t>(16, id);
  r.put<uint32_t>(20, CUPTI_ACTIVITY_OBJECT_THREAD).put<uint32_t>(28, 4242);
  return r;
}

// MarkerData (CUDA 12.x): flags 4, id 8, payloadKind 12, payload 16, color 24, category 28.
RawRecord markerData(uint32_t id, uint32_t payload_kind, uint64_t payload) {
  RawRecord r(kMarkerDataBytes, CUPTI_ACTIVITY_KIND_MARKER_DATA);
  r.put<uint32_t>(4, CUPTI_ACTIVITY_FLAG_MARKER_COLOR_ARGB)
      .put<uint32_t>(8, id)
      .put<uint32_t>(12, payload_kind)
      .put<uint64_t>(16, payload)
      .put<uint32_t>(24, 0xff00ff00u)
      .put<uint32_t>(28, 7);
  return r;
}

format::EventBatch readEverything(const std::vector<uint8_t>& bytes) {
  auto result = testing::readAll(bytes);
  REQUIRE(result.warnings.empty());
  format::EventBatch all;
  for (auto& batch : result.batches) {
    all.kernels.insert(all.kernels.end(), batch.kernels.begin(), batch.kernels.end());
    all.memcpys.insert(all.memcpys.end(), batch.memcpys.begin(), batch.memcpys.end());
    all.memory_events.insert(all.memory_events.end(), batch.memory_events.begin(), batch.memory_events.end());
    all.synchronizations.insert(all.synchronizations.end(), batch.synchronizations.begin(),
                                batch.synchronizations.end());
    all.nvtx_events.insert(all.nvtx_events.end(), batch.nvtx_events.begin(), batch.nvtx_events.end());
    all.overheads.insert(all.overheads.end(), batch.overheads.begin(), batch.overheads.end());
  }
  return all;
}

}  // namespace

TEST_CASE("CUDA 12 layouts: the known CUPTI API versions and the structs each delivers", "[cuda12]") {
  for (const auto& facts : kCuda12) {
    INFO("CUPTI API " << facts.api);
    auto layouts = inject::cuptiRecordLayouts(facts.api);
    REQUIRE(layouts);
    CHECK(layouts->kernel == 9);
    CHECK(layouts->memcpy == (facts.memcpy_bytes == 88 ? 5 : 6));
    CHECK(layouts->memory == (facts.memory_bytes == 120 ? 3 : 4));
    CHECK(layouts->synchronization == (facts.synchronization_bytes == 40 ? 1 : 2));
    CHECK(layouts->marker_data == 1);
    CHECK_FALSE(layouts->client_frees_device_name);
  }
  CHECK(std::string(inject::cuptiRecordLayouts(22)->toolkit) == "CUDA 12.4");
  CHECK(std::string(inject::cuptiRecordLayouts(28)->toolkit) == "CUDA 12.9 Update 1");
  // Only CUDA 12.9 Update 1's header says the client frees overheadData.
  CHECK(inject::cuptiRecordLayouts(28)->client_frees_overhead_data);
  CHECK_FALSE(inject::cuptiRecordLayouts(26)->client_frees_overhead_data);
  auto cuda13 = inject::cuptiRecordLayouts(130001);
  REQUIRE(cuda13);
  CHECK(cuda13->kernel == 10);
  CHECK(cuda13->marker_data == 2);
  CHECK(cuda13->client_frees_device_name);
  // Before 12.4, 12.7's never-released 25, 12.9's unconfirmed 27, after 12.9, and past 13.0.
  for (uint32_t unknown : {0u, 18u, 21u, 25u, 27u, 29u, 120000u, 129999u, 130100u})
    CHECK_FALSE(inject::cuptiRecordLayouts(unknown));
  CHECK(inject::knownCuptiApiVersions() ==
        "22 (CUDA 12.4), 23 (CUDA 12.5), 24 (CUDA 12.6), 26 (CUDA 12.8), 28 (CUDA 12.9 Update 1), and "
        "130000-130099 (CUDA 13.0)");
}

TEST_CASE("CUDA 12 layouts: each version's records translate field by field", "[cuda12]") {
  for (const auto& facts : kCuda12) {
    INFO("CUPTI API " << facts.api);
    testing::MemoryTrace trace;
    REQUIRE(trace.writer().writeHeader(format::FileHeader{}));
    inject::TranslatorOptions options;
    options.layouts = *inject::cuptiRecordLayouts(facts.api);
    inject::ActivityTranslator translator(trace.writer(), nullptr, options);

    translator.translate(contextRecord(facts.context_bytes).activity());
    translator.translate(kernel9("ampere_gemm", 1'000'000).activity());
    translator.translate(memcpyRecord(facts.memcpy_bytes).activity());
    translator.translate(memoryRecord(facts.memory_bytes).activity());
    translator.translate(synchronizationRecord(facts.synchronization_bytes).activity());
    translator.finish();
    REQUIRE(trace.writer().finish(format::Trailer{}));
    CHECK(translator.stats().unknown_kind == 0);
    CHECK(translator.stats().incomplete == 0);

    auto all = readEverything(trace.bytes());
    REQUIRE(all.kernels.size() == 1);
    const auto& k = all.kernels[0];
    CHECK(k.start_ns == 1'000'000);
    CHECK(k.end_ns == 1'004'000);
    CHECK(k.device == 3);
    CHECK(k.context == 11);
    CHECK(k.stream == 13);
    CHECK(k.correlation_id == 777);
    CHECK(k.grid_x == 264);
    CHECK(k.grid_y == 2);
    CHECK(k.grid_z == 1);
    CHECK(k.block_x == 384);
    CHECK(k.registers_per_thread == 96);
    CHECK(k.static_shared_memory == 1024);
    CHECK(k.dynamic_shared_memory == 200 * 1024);
    CHECK(k.local_memory_per_thread == 16);
    CHECK(k.launch_type == 2);
    CHECK(k.shared_memory_carveout_pct == 100);
    CHECK(k.shared_memory_executed == 233472);
    CHECK(k.shared_memory_optin);
    CHECK(k.graph_node_id == 0x1234'5678'9abcull);
    CHECK(k.graph_id == 42);
    CHECK(k.cluster_x == 2);
    CHECK(k.cluster_y == 1);
    CHECK(k.max_active_clusters == 66);

    REQUIRE(all.memcpys.size() == 1);
    const auto& m = all.memcpys[0];
    CHECK(m.copy_kind == format::CopyKind::kDtoH);
    CHECK(m.src_kind == format::MemoryKind::kDevice);
    CHECK(m.dst_kind == format::MemoryKind::kPinned);
    CHECK(m.is_async);
    CHECK(m.bytes == (1u << 20));
    CHECK(m.start_ns == 50'000);
    CHECK(m.end_ns == 60'000);
    CHECK(m.device == 1);
    CHECK(m.context == 11);
    CHECK(m.stream == 14);
    CHECK(m.correlation_id == 901);
    CHECK(m.graph_node_id == 55);
    CHECK(m.graph_id == 5);

    REQUIRE(all.memory_events.size() == 1);
    const auto& a = all.memory_events[0];
    CHECK(a.operation == format::MemoryOperation::kAllocate);
    CHECK(a.memory_kind == format::MemoryKind::kDevice);
    CHECK(a.correlation_id == 902);
    CHECK(a.address == 0x7f00'0000'0000ull);
    CHECK(a.bytes == (2u << 20));
    CHECK(a.timestamp_ns == 70'000);
    CHECK(a.device == 2);
    CHECK(a.stream == 15);
    CHECK(a.is_async);
    CHECK(a.pool_address == 0x7e00'0000'0000ull);

    REQUIRE(all.synchronizations.size() == 1);
    const auto& s = all.synchronizations[0];
    CHECK(s.kind == format::SynchronizationKind::kStreamSynchronize);
    CHECK(s.start_ns == 80'000);
    CHECK(s.end_ns == 81'000);
    CHECK(s.correlation_id == 903);
    CHECK(s.context == 11);
    CHECK(s.device == 3);  // from the context record
    CHECK(s.stream == 16);
    CHECK(s.cuda_event_id == 9);

    // The capture's window test reads each record's time where the version puts it.
    CHECK(inject::activityTime(kernel9("k", 5).activity()) == 5);
    CHECK(inject::activityTime(memcpyRecord(facts.memcpy_bytes).activity()) == 50'000);
    CHECK(inject::activityTime(memoryRecord(facts.memory_bytes).activity()) == 70'000);
    CHECK(inject::activityTime(synchronizationRecord(facts.synchronization_bytes).activity()) == 80'000);
  }
}

TEST_CASE("CUDA 12 layouts: NVTX marker data has no extended payloads, and its 32 bytes are all that is read",
          "[cuda12]") {
  testing::MemoryTrace trace;
  REQUIRE(trace.writer().writeHeader(format::FileHeader{}));
  inject::TranslatorOptions options;
  options.layouts = *inject::cuptiRecordLayouts(24);
  options.free_cupti_allocations = true;
  inject::ActivityTranslator translator(trace.writer(), nullptr, options);

  translator.translate(markerStart(1, "forward", 100).activity());
  translator.translate(markerData(1, CUPTI_METRIC_VALUE_KIND_UINT64, 31337).activity());
  translator.translate(markerEnd(1, 200).activity());
  // Kind 6 means nothing to CUDA 12's CUPTI: the payload is not a pointer to follow or free.
  translator.translate(markerStart(2, "backward", 300).activity());
  translator.translate(markerData(2, 6, 0xdead'beefull).activity());
  translator.translate(markerEnd(2, 400).activity());
  translator.finish();
  REQUIRE(trace.writer().finish(format::Trailer{}));
  CHECK(translator.stats().extended_payloads == 0);

  auto all = readEverything(trace.bytes());
  REQUIRE(all.nvtx_events.size() == 2);
  const auto& forward = all.nvtx_events[0];
  CHECK(forward.start_ns == 100);
  CHECK(forward.end_ns == 200);
  CHECK(forward.thread_id == 4242);
  CHECK(forward.color == 0xff00ff00u);
  CHECK(forward.category == 7);
  REQUIRE(forward.payload.size() == 1);
  CHECK(forward.payload[0].type == format::PayloadField::Type::kUint);
  CHECK(forward.payload[0].uint_value == 31337);
  const auto& backward = all.nvtx_events[1];
  CHECK(backward.color == 0xff00ff00u);
  CHECK(backward.payload.empty());
  CHECK(backward.payload_schema == 0);
}

TEST_CASE("CUDA 12 layouts: a shared device name is not freed; overhead details only where the header says so",
          "[cuda12]") {
  static const char kDeviceName[] = "NVIDIA H100 80GB HBM3";
  static int kOverheadDetail = 0;
  for (uint32_t api : {22u, 26u, 28u}) {
    INFO("CUPTI API " << api);
    testing::MemoryTrace trace;
    REQUIRE(trace.writer().writeHeader(format::FileHeader{}));
    inject::TranslatorOptions options;
    options.layouts = *inject::cuptiRecordLayouts(api);
    options.free_cupti_allocations = true;
    inject::ActivityTranslator translator(trace.writer(), nullptr, options);

    // Device5: numMultiprocessors 44, computeCapabilityMajor 104, id 112, name 136.
    RawRecord device(kDevice5Bytes, CUPTI_ACTIVITY_KIND_DEVICE);
    device.put<uint32_t>(44, 132).put<uint32_t>(104, 9).put<uint32_t>(112, 0).put<const char*>(136, kDeviceName);
    translator.translate(device.activity());
    REQUIRE(translator.devices().count(0) == 1);
    CHECK(translator.devices().at(0).name == kDeviceName);
    CHECK(translator.devices().at(0).sm_count == 132);
    CHECK(translator.devices().at(0).compute_major == 9);

    // Overhead3: overheadKind 4, objectKind 8, objectId.pt.threadId 16, start 24, end 32, overheadData 48.
    void* detail = api == 28 ? std::malloc(16) : static_cast<void*>(&kOverheadDetail);
    RawRecord overhead(kOverhead3Bytes, CUPTI_ACTIVITY_KIND_OVERHEAD);
    overhead.put<uint32_t>(4, CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH)
        .put<uint32_t>(8, CUPTI_ACTIVITY_OBJECT_THREAD)
        .put<uint32_t>(16, 777)
        .put<uint64_t>(24, 1000)
        .put<uint64_t>(32, 1500)
        .put<void*>(48, detail);
    translator.translate(overhead.activity());
    translator.finish();
    REQUIRE(trace.writer().finish(format::Trailer{}));
    auto all = readEverything(trace.bytes());
    REQUIRE(all.overheads.size() == 1);
    CHECK(all.overheads[0].kind == CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH);
    CHECK(all.overheads[0].thread_id == 777);
    CHECK(all.overheads[0].start_ns == 1000);
    CHECK(all.overheads[0].end_ns == 1500);
  }
}

TEST_CASE("CUDA 12 layouts: a capture session with CUDA 12.4's libcupti", "[cuda12]") {
  testing::TempDir dir;
  FakeCupti::instance().reset();
  FakeCupti::instance().api_version = 22;
  FakeCupti::instance().selects_api_calls = false;
  inject::CaptureConfig config;
  config.output_dir = (dir.path() / "traces").string();
  config.flush_interval_ms = 20;
  inject::CaptureDependencies deps;
  deps.cupti = FakeCupti::instance().api();
  deps.cupti_path = "/fake/libcupti.so.12";
  deps.cupti_api_version = 22;
  deps.cupti_layouts = *inject::cuptiRecordLayouts(22);
  deps.environment = [](const char*) -> const char* { return nullptr; };
  std::vector<std::string> logged;
  deps.log = [&logged](const std::string& line) { logged.push_back(line); };
  inject::CaptureSession session(std::move(deps), config);
  REQUIRE(session.start());

  // Records of different sizes back to back in one buffer, as libcupti packs them.
  FakeCupti::instance().queueBytes(kernel9("nccl_allreduce", 2'000'000).bytes());
  FakeCupti::instance().queueBytes(memcpyRecord(88).bytes());
  FakeCupti::instance().queueBytes(synchronizationRecord(40).bytes());
  FakeCupti::instance().queueBytes(kernel9("gemm", 3'000'000).bytes());
  std::this_thread::sleep_for(std::chrono::milliseconds(80));
  session.stop(format::CaptureEnd::kProcessExit, "exit");

  format::TraceReader reader(session.tracePath());
  CHECK(reader.header().cupti_api_version == 22);
  auto result = testing::readAll(reader);
  auto counts = testing::countAll(result.batches);
  CHECK(counts[static_cast<size_t>(format::Category::kKernel)] == 2);
  CHECK(counts[static_cast<size_t>(format::Category::kMemcpy)] == 1);
  CHECK(counts[static_cast<size_t>(format::Category::kSynchronization)] == 1);
  std::vector<uint64_t> starts;
  for (const auto& batch : result.batches) {
    for (const auto& kernel : batch.kernels) {
      starts.push_back(kernel.start_ns);
      CHECK(kernel.correlation_id == 777);
      CHECK(kernel.grid_x == 264);
    }
  }
  CHECK(starts == std::vector<uint64_t>{2'000'000, 3'000'000});
  REQUIRE(result.trailer);
  bool warned = false;
  for (const auto& warning : result.trailer->warnings)
    warned |= warning ==
              "this libcupti (CUPTI API 22) cannot switch single API calls: every runtime call is recorded, "
              "no driver call";
  CHECK(warned);
}
