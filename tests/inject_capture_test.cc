// The capture session end to end without a GPU: a fake CUPTI delivers hand-built records through
// the real buffer callbacks, and the trace file is read back.

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <thread>

#include "inject/activity_buffers.h"
#include "inject/api_selection.h"
#include "inject/capture_config.h"
#include "inject/capture_session.h"
#include "inject/device_query.h"
#include "proto/trace_reader.h"
#include "tests/support/fake_cupti.h"
#include "tests/support/nccl_nvtx_schemas.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace {

using namespace gpuxray;
using gpuxray::testing::FakeCupti;
using gpuxray::testing::TempDir;
using gpuxray::inject::NcclProfiler;
namespace nccl_abi = gpuxray::inject::nccl_abi;

inject::EnvironmentLookup environmentOf(std::map<std::string, std::string> variables) {
  return [variables = std::move(variables)](const char* name) -> const char* {
    auto it = variables.find(name);
    return it == variables.end() ? nullptr : it->second.c_str();
  };
}

struct CaptureFixture {
  TempDir dir;
  std::vector<std::string> logged;
  inject::CaptureConfig config;
  std::map<std::string, std::string> environment = {{"RANK", "2"}, {"WORLD_SIZE", "4"}, {"GPUXRAY_RUN_ID", "test-run"}};
  std::string library_path;
  int nccl_version = 0;

  CaptureFixture() {
    FakeCupti::instance().reset();
    config.output_dir = (dir.path() / "traces").string();
    config.flush_interval_ms = 20;
  }

  std::unique_ptr<inject::CaptureSession> session() {
    inject::CaptureDependencies deps;
    deps.cupti = FakeCupti::instance().api();
    deps.cupti_path = "/fake/libcupti.so.13";
    deps.cupti_api_version = 130001;
    deps.environment = environmentOf(environment);
    deps.library_path = library_path;
    deps.nccl_version = nccl_version;
    deps.log = [this](const std::string& line) { logged.push_back(line); };
    return std::make_unique<inject::CaptureSession>(std::move(deps), config);
  }
};

CUpti_ActivityKernel10 kernelRecord(uint32_t correlation, uint64_t start) {
  return gpuxray::testing::kernelActivity({.correlation = correlation, .start = start});
}

struct ReadBack {
  format::FileHeader header;
  format::EventBatch all;
  std::optional<format::Trailer> trailer;
};

ReadBack readBack(const std::string& path) {
  format::TraceReader reader(path);
  ReadBack result{reader.header(), {}, {}};
  format::EventBatch batch;
  while (reader.next(batch)) {
    result.all.kernels.insert(result.all.kernels.end(), batch.kernels.begin(), batch.kernels.end());
    result.all.clock_anchors.insert(result.all.clock_anchors.end(), batch.clock_anchors.begin(),
                                    batch.clock_anchors.end());
  }
  result.trailer = reader.trailer();
  return result;
}

}  // namespace

TEST_CASE("a capture writes the header, the records CUPTI delivers and a trailer") {
  CaptureFixture fixture;
  auto session = fixture.session();
  REQUIRE(session->start());
  for (uint32_t i = 0; i < 1000; ++i) FakeCupti::instance().queue(kernelRecord(i + 1, 1'000'000 + 2000ull * i));
  // Several flush intervals pass: the periodic flush collects the records and writes them.
  std::this_thread::sleep_for(std::chrono::milliseconds(120));
  CHECK(FakeCupti::instance().flushes >= 2);
  session->stop(format::CaptureEnd::kProcessExit, "exit");
  CHECK(FakeCupti::instance().forced_flushes == 1);

  auto file = readBack(session->tracePath());
  CHECK(session->tracePath() == fixture.config.output_dir + "/rank-00002.gpuxray");
  CHECK(file.header.rank == 2);
  CHECK(file.header.world_size == 4);
  CHECK(file.header.run_id == "test-run");
  CHECK(file.header.cupti_api_version == 130001);
  CHECK(file.header.time_base == "cupti");
  CHECK(file.header.clock_anchors.size() == 1);
  // No NCCL loaded yet, and NCCL_PROFILER_PLUGIN unset: NCCL will find this library as its plugin.
  CHECK(file.header.nccl_capture_source == format::NcclCaptureSource::kProfilerPlugin);
  CHECK(file.header.capture_config.nccl_profiler);
  CHECK(file.header.nccl_version.empty());
  REQUIRE(file.all.kernels.size() == 1000);
  CHECK(file.all.kernels[999].correlation_id == 1000);
  CHECK(file.all.kernels[999].grid_x == 132);
  CHECK(file.all.clock_anchors.size() >= 2);
  REQUIRE(file.trailer);
  CHECK(file.trailer->end == format::CaptureEnd::kProcessExit);
  CHECK(file.trailer->warnings.empty());
  CHECK(fixture.logged.empty());
}

TEST_CASE("the activity kinds follow the configured categories, and hot API queries are filtered") {
  CaptureFixture fixture;
  fixture.config.categories.memory = false;
  auto session = fixture.session();
  REQUIRE(session->start());
  session->stop(format::CaptureEnd::kProcessExit, "exit");
  const auto& fake = FakeCupti::instance();
  CHECK(fake.enabled_kinds.count(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == 1);
  CHECK(fake.enabled_kinds.count(CUPTI_ACTIVITY_KIND_MEMCPY2) == 1);
  CHECK(fake.enabled_kinds.count(CUPTI_ACTIVITY_KIND_MARKER) == 1);
  CHECK(fake.enabled_kinds.count(CUPTI_ACTIVITY_KIND_NVLINK) == 1);
  CHECK(fake.enabled_kinds.count(CUPTI_ACTIVITY_KIND_MEMORY2) == 0);
  CHECK(fake.enabled_kinds.count(CUPTI_ACTIVITY_KIND_RUNTIME) == 1);
  CHECK(fake.enabled_kinds.count(CUPTI_ACTIVITY_KIND_DRIVER) == 0);
  CHECK(fake.runtime_disabled.count(CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020) == 1);
  CHECK(fake.runtime_disabled.count(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000) == 0);
  CHECK(fake.driver_enabled == std::set<uint32_t>{CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel});
}

TEST_CASE("API selection keeps launches, copies and syncs and drops hot queries") {
  CHECK(inject::isTracedRuntimeApi("cudaLaunchKernel_v7000"));
  CHECK(inject::isTracedRuntimeApi("cudaMemcpyAsync_v3020"));
  CHECK(inject::isTracedRuntimeApi("cudaStreamSynchronize_v3020"));
  CHECK_FALSE(inject::isTracedRuntimeApi("cudaGetDevice_v3020"));
  CHECK_FALSE(inject::isTracedRuntimeApi("cudaStreamIsCapturing_v10000"));
  CHECK_FALSE(inject::isTracedRuntimeApi("cudaGetLastError_v3020"));
  CHECK(inject::isTracedDriverApi("cuLaunchKernelEx"));
  CHECK(inject::isTracedDriverApi("cuMemcpyHtoDAsync_v2"));
  CHECK_FALSE(inject::isTracedDriverApi("cuCtxGetCurrent"));
  CHECK_FALSE(inject::isTracedDriverApi("cuDeviceGetAttribute"));
}

TEST_CASE("past the buffer bound, requests get no buffer and every loss is reported") {
  SECTION("the pool itself") {
    inject::ActivityBuffers buffers(8u << 20, 4u << 20);
    uint8_t* first = buffers.acquire();
    uint8_t* second = buffers.acquire();
    CHECK(first != nullptr);
    CHECK(second != nullptr);
    CHECK(reinterpret_cast<uintptr_t>(first) % 8 == 0);
    CHECK(buffers.acquire() == nullptr);
    CHECK(buffers.refused() == 1);
    buffers.complete(first, 100);
    auto filled = buffers.takeFilled();
    REQUIRE(filled.size() == 1);
    CHECK(filled[0].valid_bytes == 100);
    buffers.release(filled[0].buffer);
    CHECK(buffers.acquire() == first);
    CHECK(buffers.bytesAllocated() == (8u << 20));
    buffers.release(first);
    buffers.release(second);
  }
  SECTION("every buffer handed out is zeroed: made ready, fresh, or written and given back") {
    constexpr size_t kBytes = 1u << 20;
    inject::ActivityBuffers buffers(3 * kBytes, kBytes, /*ready_buffers=*/5);
    CHECK(buffers.bytesAllocated() == 3 * kBytes);  // no more made ready than the bound allows
    auto zeroed = [&](const uint8_t* b) { return std::all_of(b, b + kBytes, [](uint8_t v) { return v == 0; }); };
    uint8_t* ready = buffers.acquire();
    REQUIRE(ready != nullptr);
    CHECK(zeroed(ready));
    std::memset(ready, 0xAB, kBytes);
    buffers.complete(ready, kBytes);
    buffers.release(buffers.takeFilled().at(0).buffer);
    std::vector<uint8_t*> all;
    for (uint8_t* b = buffers.acquire(); b != nullptr; b = buffers.acquire()) all.push_back(b);
    REQUIRE(all.size() == 3);
    for (uint8_t* b : all) CHECK(zeroed(b));
    for (uint8_t* b : all) buffers.release(b);
  }
  SECTION("through a capture") {
    CaptureFixture fixture;
    fixture.config.buffer_limit_bytes = 8u << 20;
    auto session = fixture.session();
    REQUIRE(session->start());
    auto& fake = FakeCupti::instance();
    fake.buffers_per_flush = 3;
    fake.dropped_to_report = 123;
    fake.queue(kernelRecord(1, 5000));
    std::this_thread::sleep_for(std::chrono::milliseconds(60));
    session->stop(format::CaptureEnd::kProcessExit, "exit");
    CHECK(fake.buffers_refused >= 1);

    auto file = readBack(session->tracePath());
    CHECK(file.all.kernels.size() == 1);
    REQUIRE(file.trailer);
    format::CategoryCount uncategorized{format::Category::kUnknown, 0, 123};
    CHECK(std::find(file.trailer->counts.begin(), file.trailer->counts.end(), uncategorized) !=
          file.trailer->counts.end());
    auto has = [&](const std::string& text) {
      for (const auto& w : file.trailer->warnings) {
        if (w.find(text) != std::string::npos) return true;
      }
      return false;
    };
    CHECK(has("CUPTI dropped 123 records for lack of buffer space"));
    CHECK(has("buffer requests refused at the 8 MiB limit (GPUXRAY_BUFFER_LIMIT_MB)"));
  }
}

TEST_CASE("when another tool holds CUPTI, one line says so, the file records why, and NCCL capture goes on") {
  CaptureFixture fixture;
  FakeCupti::instance().subscribe_result = CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  auto session = fixture.session();
  REQUIRE(session->start());
  CHECK_FALSE(session->cuptiActive());
  CHECK(FakeCupti::instance().enabled_kinds.empty());
  // NCCL still reports its operations through the plugin.
  NcclProfiler& nccl = *session->ncclProfiler();
  void* context = nullptr;
  int mask = 0;
  REQUIRE(nccl.init(&context, 0xABC, &mask, "dp", 1, 2, 0, {5, true}) == nccl_abi::kSuccess);
  void* op = nullptr;
  nccl.startColl(context, &op, {3, "AllReduce", nullptr, nullptr, 64, 0, "ncclFloat32", 0, 4, "RING", "LL"});
  nccl.stopEvent(op);
  session->stop(format::CaptureEnd::kProcessExit, "exit");

  const std::string expected =
      "CUPTI is already in use by another tool (Nsight Systems, Nsight Compute, torch.profiler, ...): "
      "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED (39); no GPU activity captured";
  REQUIRE(fixture.logged.size() == 1);
  CHECK(fixture.logged[0] == expected);
  format::TraceReader reader(fixture.config.output_dir + "/rank-00002.gpuxray");
  format::EventBatch batch;
  std::vector<format::NcclOperationRecord> ops;
  std::vector<format::NcclCommunicatorRecord> comms;
  while (reader.next(batch)) {
    ops.insert(ops.end(), batch.nccl_operations.begin(), batch.nccl_operations.end());
    comms.insert(comms.end(), batch.nccl_communicators.begin(), batch.nccl_communicators.end());
    CHECK(batch.kernels.empty());
  }
  REQUIRE(reader.trailer());
  CHECK(reader.trailer()->end == format::CaptureEnd::kProcessExit);
  CHECK(reader.trailer()->warnings == std::vector<std::string>{expected});
  REQUIRE(comms.size() == 1);
  CHECK(comms[0].comm_hash == 0xABC);
  REQUIRE(ops.size() == 1);
  CHECK(ops[0].seq == 3);
  CHECK(ops[0].bytes == 256);
  CHECK(reader.strings().get(ops[0].func_id) == "AllReduce");
  CHECK(reader.strings().get(ops[0].protocol_id) == "LL");
}

TEST_CASE("NCCL's NVTX ranges reach the file with their payloads decoded by the schemas CUPTI describes") {
  using namespace gpuxray::testing::nccl_nvtx;
  CaptureFixture fixture;
  auto& fake = FakeCupti::instance();
  registerSchemas(fake, 2);
  auto session = fixture.session();
  REQUIRE(session->start());
  CUpti_ActivityMarker2 start{};
  start.kind = CUPTI_ACTIVITY_KIND_MARKER;
  start.flags = CUPTI_ACTIVITY_FLAG_MARKER_START;
  start.timestamp = 5000;
  start.id = 1;
  start.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
  start.objectId.pt.threadId = 99;
  start.name = "ncclAllReduce";
  start.domain = "NCCL";
  CUpti_ActivityMarker2 end = start;
  end.flags = CUPTI_ACTIVITY_FLAG_MARKER_END;
  end.timestamp = 6000;
  end.name = nullptr;
  fake.queue(start);
  fake.queue(extendedPayloadData(1, kAllReduceSchema, AllReduce{0x77, 1u << 20, RedOp::kAvg}, 2));
  fake.queue(end);
  session->stop(format::CaptureEnd::kProcessExit, "exit");

  format::TraceReader reader(session->tracePath());
  format::EventBatch batch;
  std::vector<format::NvtxEventRecord> ranges;
  while (reader.next(batch)) ranges.insert(ranges.end(), batch.nvtx_events.begin(), batch.nvtx_events.end());
  REQUIRE(ranges.size() == 1);
  CHECK(reader.strings().get(ranges[0].domain_id) == "NCCL");
  CHECK(reader.strings().get(ranges[0].name_id) == "ncclAllReduce");
  CHECK(ranges[0].end_ns - ranges[0].start_ns == 1000);
  REQUIRE(ranges[0].payload.size() == 3);
  CHECK(reader.strings().get(ranges[0].payload[0].name_id) == "NCCL communicator ID");
  CHECK(ranges[0].payload[0].uint_value == 0x77);
  CHECK(reader.strings().get(ranges[0].payload[1].name_id) == "Message size [bytes]");
  CHECK(ranges[0].payload[1].uint_value == 1u << 20);
  CHECK(reader.strings().get(ranges[0].payload[2].name_id) == "Reduction operation");
  CHECK(reader.strings().get(ranges[0].payload[2].string_id) == "Avg");
  REQUIRE(reader.trailer());
  CHECK(reader.trailer()->warnings.empty());
}

TEST_CASE("when NCCL cannot use the plugin, the header says NCCL's NVTX ranges stand in, and one line says why") {
  CaptureFixture fixture;
  fixture.library_path = "/opt/gpuxray/libgpuxray_inject.so";
  fixture.environment["NCCL_PROFILER_PLUGIN"] = fixture.library_path;
  fixture.nccl_version = 22105;  // NCCL 2.21.5, older than any profiler interface the plugin serves
  auto session = fixture.session();
  REQUIRE(session->start());
  session->stop(format::CaptureEnd::kProcessExit, "exit");

  format::TraceReader reader(session->tracePath());
  CHECK(reader.header().nccl_capture_source == format::NcclCaptureSource::kNvtx);
  CHECK(reader.header().nccl_version == "2.21.5");
  CHECK_FALSE(reader.header().capture_config.nccl_profiler);
  const std::string note =
      "NCCL 2.21.5 is older than 2.23.0, the oldest that can load gpuxray's profiler plugin: NCCL's operations are "
      "taken from its NVTX ranges instead (operation, bytes, root or peer, communicator; no algorithm, protocol or "
      "channels)";
  CHECK(fixture.logged == std::vector<std::string>{note});
  format::EventBatch batch;
  while (reader.next(batch)) {
  }
  REQUIRE(reader.trailer());
  CHECK(reader.trailer()->warnings == std::vector<std::string>{note});
}

TEST_CASE("with another profiler plugin and NVTX left out of the capture, the header says NCCL is not captured") {
  CaptureFixture fixture;
  fixture.library_path = "/opt/gpuxray/libgpuxray_inject.so";
  fixture.environment["NCCL_PROFILER_PLUGIN"] = "/opt/other/libnccl-profiler.so";
  fixture.config.categories.nvtx = false;
  auto session = fixture.session();
  REQUIRE(session->start());
  session->stop(format::CaptureEnd::kProcessExit, "exit");

  format::TraceReader reader(session->tracePath());
  CHECK(reader.header().nccl_capture_source == format::NcclCaptureSource::kNone);
  REQUIRE(fixture.logged.size() == 1);
  CHECK(fixture.logged[0] ==
        "NCCL_PROFILER_PLUGIN=/opt/other/libnccl-profiler.so names another profiler plugin, and NCCL loads only one, "
        "and NVTX is not captured (GPUXRAY_CAPTURE leaves it out): NCCL's operations are not captured");
}

TEST_CASE("an existing trace file is never overwritten") {
  CaptureFixture fixture;
  std::filesystem::create_directories(fixture.config.output_dir);
  std::ofstream(fixture.config.output_dir + "/rank-00002.gpuxray") << "earlier run";
  auto session = fixture.session();
  REQUIRE(session->start());
  session->stop(format::CaptureEnd::kProcessExit, "exit");
  CHECK(session->tracePath() == fixture.config.output_dir + "/rank-00002-" + std::to_string(getpid()) + ".gpuxray");
  CHECK(gpuxray::testing::readWholeFile(fixture.config.output_dir + "/rank-00002.gpuxray") == "earlier run");
}

TEST_CASE("a stop requested by a signal finishes the file and names the signal") {
  CaptureFixture fixture;
  auto session = fixture.session();
  REQUIRE(session->start());
  FakeCupti::instance().queue(kernelRecord(1, 5000));
  session->requestStopFromSignal(SIGTERM);
  CHECK(session->waitUntilFinished(5000));
  auto file = readBack(session->tracePath());
  CHECK(file.all.kernels.size() == 1);
  REQUIRE(file.trailer);
  CHECK(file.trailer->end == format::CaptureEnd::kSignal);
  CHECK(file.trailer->end_detail == "SIGTERM");
  session->stop(format::CaptureEnd::kProcessExit, "exit");
}

TEST_CASE("capture settings come from the environment; a bad value warns and keeps the default") {
  auto config = inject::readCaptureConfig(environmentOf({{"GPUXRAY_OUTPUT_DIR", "/tmp/x"},
                                                         {"GPUXRAY_CAPTURE", "all,-memory,-overhead"},
                                                         {"GPUXRAY_BUFFER_LIMIT_MB", "128"},
                                                         {"GPUXRAY_FLUSH_INTERVAL_MS", "250"},
                                                         {"GPUXRAY_LOG_LEVEL", "info"},
                                                         {"GPUXRAY_METRICS", "1"}}));
  CHECK(config.output_dir == "/tmp/x");
  CHECK_FALSE(config.categories.memory);
  CHECK_FALSE(config.categories.overhead);
  CHECK(config.categories.kernel);
  CHECK(config.buffer_limit_bytes == (128ull << 20));
  CHECK(config.flush_interval_ms == 250);
  CHECK(config.log_level == inject::LogLevel::kInfo);
  CHECK(config.metrics);
  CHECK(config.warnings.empty());
  CHECK(config.activityNames() == std::vector<std::string>{"kernel", "memcpy", "memset", "api", "nvtx", "sync"});

  auto bad = inject::readCaptureConfig(environmentOf(
      {{"GPUXRAY_CAPTURE", "kernels"}, {"GPUXRAY_BUFFER_LIMIT_MB", "lots"}, {"GPUXRAY_FLUSH_INTERVAL_MS", "0"}}));
  CHECK(bad.categories.memory);
  CHECK(bad.buffer_limit_bytes == (64ull << 20));
  CHECK(bad.flush_interval_ms == 1000);
  REQUIRE(bad.warnings.size() == 3);
  CHECK(bad.warnings[1] == "GPUXRAY_BUFFER_LIMIT_MB='lots' is not a number of MiB from 8 to 65536; using 64");

  auto only = inject::readCaptureConfig(environmentOf({{"GPUXRAY_CAPTURE", "kernel,nvtx"}}));
  CHECK(only.activityNames() == std::vector<std::string>{"kernel", "nvtx"});
  CHECK(only.nvtx_recorder);  // gpuxray's own recorder unless told otherwise

  CHECK_FALSE(inject::readCaptureConfig(environmentOf({{"GPUXRAY_NVTX_RECORDER", "0"}})).nvtx_recorder);
  auto recorder = inject::readCaptureConfig(environmentOf({{"GPUXRAY_NVTX_RECORDER", "maybe"}}));
  CHECK(recorder.nvtx_recorder);
  REQUIRE(recorder.warnings.size() == 1);
  CHECK(recorder.warnings[0].starts_with("GPUXRAY_NVTX_RECORDER='maybe'"));
}

TEST_CASE("device properties come from the driver, bandwidth from memory clock and bus width") {
  inject::DriverApi driver;
  driver.deviceGetCount = [](int* count) {
    *count = 1;
    return CUDA_SUCCESS;
  };
  driver.deviceGet = [](CUdevice* device, int ordinal) {
    *device = ordinal;
    return CUDA_SUCCESS;
  };
  driver.deviceGetAttribute = [](int* value, CUdevice_attribute attribute, CUdevice) {
    switch (attribute) {
      case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *value = 132; break;
      case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *value = 9; break;
      case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: *value = 2048; break;
      case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *value = 32; break;
      case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *value = 232448; break;
      case CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK: *value = 1024; break;
      case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: *value = 2619000; break;
      case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: *value = 5120; break;
      default: *value = 0;
    }
    return CUDA_SUCCESS;
  };
  driver.deviceGetName = [](char* name, int, CUdevice) {
    std::strcpy(name, "NVIDIA H100 80GB HBM3");
    return CUDA_SUCCESS;
  };
  auto devices = inject::queryDevices(driver);
  REQUIRE(devices.size() == 1);
  CHECK(devices[0].name == "NVIDIA H100 80GB HBM3");
  CHECK(devices[0].sm_count == 132);
  CHECK(devices[0].max_warps_per_sm == 64);
  CHECK(devices[0].shared_memory_per_block_optin == 232448);
  CHECK(devices[0].reserved_shared_memory_per_block == 1024);
  CHECK(devices[0].memory_bandwidth_bytes_per_s == 3'352'320'000'000ull);

  CHECK(inject::queryDevices(inject::DriverApi{}).empty());
}

TEST_CASE("NCCL operations' GPU times are put on the trace clock by the NCCL kernel that ran them") {
  CaptureFixture fixture;
  auto session = fixture.session();
  REQUIRE(session->start());
  NcclProfiler& nccl = *session->ncclProfiler();
  void* context = nullptr;
  int mask = 0;
  REQUIRE(nccl.init(&context, 0xABC, &mask, "dp", 1, 2, 0, {5, true}) == nccl_abi::kSuccess);
  void* op = nullptr;
  nccl.startColl(context, &op, {3, "AllReduce", nullptr, nullptr, 64, 0, "ncclFloat32", 1, 4, "RING", "LL"});
  nccl.stopEvent(op);
  uint64_t launched = 0;
  FakeCupti::instance().api().getTimestamp(&launched);

  // The kernel ran from 100 to 400 µs after the launch (capture clock); the GPU's clock is 2 s
  // behind, and the channel ran from 1 µs after the kernel's start to 1 µs before its end.
  constexpr uint64_t kGpuBehind = 2'000'000'000;
  CUpti_ActivityKernel10 kernel = kernelRecord(77, launched + 100'000);
  kernel.end = launched + 400'000;
  // CUPTI names a kernel by its symbol (seen on an H200 with CUDA 13.0), so NCCL's come mangled.
  kernel.name = "_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE";
  FakeCupti::instance().queue(kernel);
  std::this_thread::sleep_for(std::chrono::milliseconds(2));  // the host sees the stop after the fact
  nccl_abi::KernelChDescr channel{0, launched + 101'000 - kGpuBehind};
  void* kernel_channel = nullptr;
  nccl.startKernelCh(context, &kernel_channel, op, channel);
  nccl_abi::EventStateArgs stopped{};
  stopped.kernel_ch.gpu_timer = launched + 399'000 - kGpuBehind;
  nccl.recordEventState(kernel_channel, nccl_abi::kKernelChStop, &stopped);
  nccl.stopEvent(kernel_channel);
  session->stop(format::CaptureEnd::kProcessExit, "exit");

  format::TraceReader reader(session->tracePath());
  format::EventBatch batch;
  std::vector<format::NcclOperationRecord> ops;
  while (reader.next(batch)) ops.insert(ops.end(), batch.nccl_operations.begin(), batch.nccl_operations.end());
  REQUIRE(ops.size() == 1);
  CHECK(ops[0].kernel_correlation_id == 77);
  CHECK(ops[0].gpu_clock_error_ns <= 1000);
  CHECK(std::llabs(static_cast<int64_t>(ops[0].gpu_start_ns - (launched + 101'000))) <= 1000);
  CHECK(std::llabs(static_cast<int64_t>(ops[0].gpu_end_ns - (launched + 399'000))) <= 1000);
  REQUIRE(reader.trailer());
  CHECK(reader.trailer()->warnings.empty());
}
