// Theoretical occupancy against the values NVIDIA's occupancy calculator gives, and golden tests
// for the kernel and memory sections.

#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <string>

#include "analyzer/analysis/analyses.h"
#include "analyzer/analysis/occupancy.h"
#include "analyzer/analysis/kernels.h"
#include "analyzer/analysis/memory.h"
#include "analyzer/analysis/session.h"
#include "tests/support/run_builder.h"
#include "tests/support/temp_dir.h"

namespace {

using gpuxray::format::DeviceProperties;
using gpuxray::model::LaunchConfig;
namespace analysis = gpuxray::analysis;

DeviceProperties gpu(uint32_t sms, uint64_t shared_per_sm, uint64_t optin, uint32_t major, uint32_t minor) {
  DeviceProperties d;
  d.sm_count = sms;
  d.compute_major = major;
  d.compute_minor = minor;
  d.max_threads_per_sm = 2048;
  d.registers_per_sm = 65536;
  d.registers_per_block = 65536;
  d.shared_memory_per_sm = shared_per_sm;
  d.shared_memory_per_block = 49152;
  d.shared_memory_per_block_optin = optin;
  d.warp_size = 32;
  return d;
}

const DeviceProperties kH100 = gpu(132, 233472, 232448, 9, 0);
const DeviceProperties kA100 = gpu(108, 167936, 166912, 8, 0);

LaunchConfig launch(uint32_t blocks, uint32_t threads, uint32_t registers, uint32_t shared) {
  return LaunchConfig{blocks, 1, 1, threads, 1, 1, registers, shared, 0};
}

// The run in `dir` as the session prepares it for the analyses (on its own clock: one rank).
std::unique_ptr<analysis::Session> prepared(const std::filesystem::path& dir) {
  analysis::SessionOptions options;
  options.paths = {dir.string()};
  options.align = false;
  return std::make_unique<analysis::Session>(options);
}

}  // namespace

TEST_CASE("analyze: theoretical occupancy follows CUDA's occupancy rules") {
  // Values computed with NVIDIA's cuda_occupancy.h (see the notes on CUPTI).
  auto registers = analysis::theoreticalOccupancy(launch(1000, 256, 128, 0), kH100);
  CHECK(registers.blocks_per_sm == 2);
  CHECK(registers.occupancy == Approx(0.25));
  CHECK(registers.limit == analysis::OccupancyLimit::kRegisters);

  CHECK(analysis::theoreticalOccupancy(launch(1000, 256, 64, 48 * 1024), kA100).blocks_per_sm == 3);
  CHECK(analysis::theoreticalOccupancy(launch(1000, 256, 64, 48 * 1024), kH100).blocks_per_sm == 4);
  // With 32 registers only the shared memory limits it.
  auto shared = analysis::theoreticalOccupancy(launch(1000, 256, 32, 48 * 1024), kH100);
  CHECK(shared.blocks_per_sm == 4);
  CHECK(shared.limit == analysis::OccupancyLimit::kSharedMemory);

  CHECK(analysis::theoreticalOccupancy(launch(1000, 384, 168, 200 * 1024), kA100).blocks_per_sm == 0);
  CHECK(analysis::theoreticalOccupancy(launch(1000, 384, 168, 200 * 1024), kH100).blocks_per_sm == 1);

  // Waves: 2 blocks/SM x 132 SMs = 264 slots; 300 blocks = 2 waves, the second 36 of 264 full.
  auto waves = analysis::theoreticalOccupancy(launch(300, 256, 128, 0), kH100);
  CHECK(waves.waves == 2);
  CHECK(waves.wave_efficiency == Approx(300.0 / 528.0));
  // A block that cannot run at all.
  CHECK(analysis::theoreticalOccupancy(launch(10, 1024, 255, 0), kH100).blocks_per_sm == 0);
}

TEST_CASE("analyze: what would lift the occupancy limiter follows the same rules") {
  using analysis::OccupancyLimit;
  auto lift = [](const LaunchConfig& shape) { return analysis::occupancyLift(shape, kH100); };
  auto fits = [](const LaunchConfig& shape) { return analysis::theoreticalOccupancy(shape, kH100).blocks_per_sm; };

  // Registers: 168/thread fit one 256-thread block; at most 128 fit two, and 129 still one.
  auto registers = lift(launch(1000, 256, 168, 0));
  REQUIRE(registers.lift);
  CHECK(registers.lift->limit == OccupancyLimit::kRegisters);
  CHECK(registers.lift->from == 168);
  CHECK(registers.lift->to == 128);
  CHECK(registers.lift->blocks_per_sm == 2);
  CHECK(registers.lift->occupancy == Approx(0.25));
  CHECK(fits(launch(1000, 256, 129, 0)) == 1);
  CHECK(analysis::occupancyLiftSentence(registers, OccupancyLimit::kRegisters) ==
        "168 registers/thread -> <= 128 fits 2 blocks per SM, 25.0 % occupancy");
  // From two blocks, the next is at 80 (registers are allocated per warp in 256s).
  auto from_two = lift(launch(1000, 256, 128, 0));
  REQUIRE(from_two.lift);
  CHECK(from_two.lift->to == 80);
  CHECK(fits(launch(1000, 256, 80, 0)) == 3);
  CHECK(fits(launch(1000, 256, 81, 0)) == 2);

  // Shared memory: 48 KiB/block fit four; the largest size that fits five, and one byte more does not.
  auto shared = lift(launch(1000, 256, 32, 48 * 1024));
  REQUIRE(shared.lift);
  CHECK(shared.lift->limit == OccupancyLimit::kSharedMemory);
  CHECK(shared.lift->to == 45568);
  CHECK(shared.lift->blocks_per_sm == 5);
  CHECK(fits(launch(1000, 256, 32, 45568)) == 5);
  CHECK(fits(launch(1000, 256, 32, 45569)) == 4);

  // Warps: two 768-thread blocks hold 48 of 64 warps; 512 threads fit four blocks, every warp.
  auto warps = lift(launch(1000, 768, 32, 0));
  REQUIRE(warps.lift);
  CHECK(warps.lift->limit == OccupancyLimit::kWarps);
  CHECK(warps.lift->to == 512);
  CHECK(warps.lift->occupancy == Approx(1.0));
  CHECK(analysis::occupancyLiftSentence(warps, OccupancyLimit::kWarps) ==
        "768 threads/block -> 512 fits 4 blocks per SM, 100.0 % occupancy");
  // The blocks-per-SM cap: 32 blocks of one warp fill half the SM; two-warp blocks fill it.
  auto blocks = lift(launch(1000, 32, 32, 0));
  REQUIRE(blocks.lift);
  CHECK(blocks.lift->limit == OccupancyLimit::kBlocks);
  CHECK(blocks.lift->from == 32);
  CHECK(blocks.lift->to == 64);
  CHECK(blocks.lift->occupancy == Approx(1.0));

  // The other side: nothing to lift when the SM is full, or when another limit binds as tightly.
  auto full = lift(launch(1000, 256, 32, 0));
  CHECK_FALSE(full.lift);
  CHECK(full.full);
  auto tied = lift(launch(1000, 256, 128, 100 * 1024));
  CHECK(analysis::theoreticalOccupancy(launch(1000, 256, 128, 100 * 1024), kH100).limit == OccupancyLimit::kRegisters);
  CHECK_FALSE(tied.lift);
  CHECK_FALSE(tied.full);
  CHECK(tied.also_limited_by == OccupancyLimit::kSharedMemory);
  CHECK(analysis::occupancyLiftSentence(tied, OccupancyLimit::kRegisters) ==
        "registers and shared memory limit it alike: changing one alone fits no more blocks");
  // Launches the rules do not estimate have no lift.
  CHECK_FALSE(lift(launch(0, 0, 0, 0)).lift);
}

TEST_CASE("analyze: the kernel section ranks kernels by time and flags small grids and spills") {
  gpuxray::testing::TempDir dir;
  gpuxray::testing::RunBuilder run("golden-kernels", 1);
  auto& rank = run.rank(0, "node-0", 0);
  rank.header.devices.push_back(kH100);
  for (int i = 0; i < 10; ++i) {
    double t = i * 100.0;
    rank.kernel("big_gemm", t, t + 60);
    rank.kernels.back().shape.grid_x = 264 * 4;
    rank.kernel("tiny_reduce", t + 60, t + 90);  // 8 blocks on 132 SMs
    rank.kernels.back().shape.grid_x = 8;
    rank.kernels.back().shape.local_memory_per_thread = 64;
  }
  run.write(dir.path());
  auto session = prepared(dir.path());
  gpuxray::report::Report report;
  analysis::analyzeKernels(session->input(), report);
  const auto& top = report.sections.at(0).tables.at(0);
  REQUIRE(top.rows.size() == 2);
  CHECK(top.rows[0][0].text == "big_gemm");
  CHECK(top.rows[0][2].number == Approx(600'000));
  CHECK(top.rows[1][0].text == "tiny_reduce");
  // 8 blocks on 132 SMs: tiny_reduce's 300 µs of 900 are small-grid and spilling.
  CHECK(report.metric("small_grid_kernel_pct")->value == Approx(100.0 / 3.0));
  CHECK(report.metric("spilling_kernel_pct")->value == Approx(100.0 / 3.0));
  REQUIRE(report.findings.size() == 1);
  CHECK(report.findings[0].summary.find("kernel tiny_reduce (33.3 % of compute time)") == 0);
  CHECK(report.findings[0].severity == gpuxray::report::Severity::kWarning);

  // The same as data: every kernel with its launch configuration, and the JSON's results.kernels.
  auto result = analysis::computeKernels(session->input());
  REQUIRE(result.kernels.size() == 2);
  CHECK(result.compute_time_ns == 900'000);
  CHECK(result.small_grid_time_ns == 300'000);
  CHECK(result.spilling_time_ns == 300'000);
  const auto& tiny = result.kernels[1];
  CHECK(tiny.name == "tiny_reduce");
  CHECK(tiny.count == 10);
  CHECK(tiny.launch.grid_x == 8);
  CHECK(tiny.launch.local_memory_per_thread == 64);
  CHECK(analysis::smallGrid(tiny.launch, tiny.device));
  std::string json = gpuxray::report::renderJson(report);
  size_t kernels = json.find("\"results\": {\n    \"kernels\": {");
  REQUIRE(kernels != std::string::npos);
  size_t entry = json.find("\"name\": \"tiny_reduce\"", kernels);
  REQUIRE(entry != std::string::npos);
  CHECK(json.find("\"local_memory_per_thread_bytes\": 64", entry) != std::string::npos);
  CHECK(json.find("\"device_multiprocessors\": 132", entry) != std::string::npos);
  CHECK(json.find("\"small_grid\": true", entry) != std::string::npos);
  // 32 registers, 256 threads: 8 blocks hold every warp of an H100 SM.
  CHECK(json.find("\"sm_full\": true", entry) != std::string::npos);
  CHECK(json.find("\"lift_summary\": \"the SMs already hold the most warps they can: nothing to lift\"", entry) !=
        std::string::npos);
}

TEST_CASE("analyze: memory in use over time, its peak, when and in which phase") {
  gpuxray::testing::TempDir dir;
  gpuxray::testing::RunBuilder run("golden-memory", 1);
  auto& rank = run.rank(0, "node-0", 0);
  DeviceProperties device = kH100;
  device.memory_bytes = 80ull << 30;
  rank.header.devices.push_back(device);
  rank.kernel("k", 0, 1000);
  rank.range("forward", 100, 400);
  rank.range("backward", 400, 900);
  auto event = [&](double us, bool allocate, uint64_t gib) {
    gpuxray::format::MemoryEventRecord m;
    m.timestamp_ns = rank.ns(us);
    m.operation = allocate ? gpuxray::format::MemoryOperation::kAllocate : gpuxray::format::MemoryOperation::kRelease;
    m.memory_kind = gpuxray::format::MemoryKind::kDevice;
    m.bytes = gib << 30;
    rank.memory.push_back(m);
  };
  event(50, true, 20);    // 20 GiB before any range
  event(200, true, 30);   // 50 in forward
  event(500, true, 24);   // 74 in backward: the peak
  event(600, false, 30);  // 44
  run.write(dir.path());
  auto session = prepared(dir.path());
  gpuxray::report::Report report;
  analysis::analyzeMemory(session->input(), report);
  const auto& peaks = report.sections.at(0).tables.at(0);
  REQUIRE(peaks.rows.size() == 1);
  CHECK(peaks.rows[0][2].number == Approx(74.0 * (1 << 30)));
  CHECK(peaks.rows[0][3].number == Approx(100.0 * 74 / 80));
  CHECK(peaks.rows[0][4].number == Approx(500'000));
  CHECK(peaks.rows[0][5].text == "backward");
  CHECK(peaks.rows[0][7].number == Approx(44.0 * (1 << 30)));
  const auto& phases = report.sections.at(0).tables.at(1);
  REQUIRE(phases.rows.size() == 2);
  CHECK(phases.rows[0][1].text == "backward");
  CHECK(phases.rows[1][1].text == "forward");
  CHECK(phases.rows[1][2].number == Approx(50.0 * (1 << 30)));
  CHECK(report.metric("peak_memory_pct")->value == Approx(92.5));
  REQUIRE(report.findings.size() == 1);
  CHECK(report.findings[0].summary == "rank 0 peaks at 92.5 % of its GPU's memory (74.0 GiB, during backward)");

  // The same as data: the typed result, and the JSON report's results.memory.
  auto result = analysis::computeMemory(session->input());
  REQUIRE(result.devices.size() == 1);
  const auto& d = result.devices[0];
  CHECK(d.peak_bytes == 74ll << 30);
  CHECK(d.peak_at_ns - result.origin_ns == 500'000);
  CHECK(d.peak_phase == "backward");
  CHECK(d.peak_pct_of_device == Approx(92.5));
  CHECK(d.allocations == 3);
  REQUIRE(d.curve.size() == 4);
  CHECK(d.curve[1].bytes == 50ll << 30);
  CHECK(d.curve[3].bytes == 44ll << 30);
  CHECK(result.worst_rank == 0);
  REQUIRE(result.worst_rank_phases.size() == 2);
  CHECK(result.worst_rank_phases[0].phase == "backward");
  std::string json = gpuxray::report::renderJson(report);
  CHECK(json.find("\"schema_version\": 2") != std::string::npos);
  CHECK(json.find("\"results\": {\n    \"memory\": {\n      \"recorded\": true") != std::string::npos);
  CHECK(json.find("\"peak_at_ns\": 500000") != std::string::npos);
}

TEST_CASE("analyze: the memory curve keeps the peak when it is thinned, and says when memory is not recorded") {
  gpuxray::testing::TempDir dir;
  gpuxray::testing::RunBuilder run("golden-memory-curve", 1);
  auto& rank = run.rank(0, "node-0", 0);
  rank.header.devices.push_back(kH100);  // memory size not set: not recorded
  rank.kernel("k", 0, 10000);
  // 5000 changes: up 1 MiB, down 1 MiB, ..., and one 3 MiB spike at change 3001.
  for (int i = 0; i < 5000; ++i) {
    gpuxray::format::MemoryEventRecord m;
    m.timestamp_ns = rank.ns(i);
    m.operation = i % 2 == 0 ? gpuxray::format::MemoryOperation::kAllocate : gpuxray::format::MemoryOperation::kRelease;
    m.memory_kind = gpuxray::format::MemoryKind::kDevice;
    m.bytes = (i == 3000 || i == 3001 ? 3ull : 1ull) << 20;
    rank.memory.push_back(m);
  }
  run.write(dir.path());
  auto session = prepared(dir.path());
  auto result = analysis::computeMemory(session->input());
  REQUIRE(result.devices.size() == 1);
  const auto& curve = result.devices[0].curve;
  CHECK(curve.size() == 1000);  // ceil(5000 / 1024) = 5 changes a point
  CHECK(result.devices[0].peak_bytes == 3ll << 20);
  CHECK(std::any_of(curve.begin(), curve.end(), [](const auto& p) { return p.bytes == 3ll << 20; }));
  CHECK(std::isnan(result.devices[0].peak_pct_of_device));
  gpuxray::report::Report report;
  analysis::presentMemory(result, 10, report);
  CHECK(gpuxray::report::renderJson(report).find("\"peak_pct_of_device\": null") != std::string::npos);
  CHECK_FALSE(report.metric("peak_memory_pct"));
}
