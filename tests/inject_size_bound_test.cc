// Size bounds: a file that stops at --max-size-mb, and the ring (--ring) that keeps the most recent
// chunks, read back by the ordinary reader, including after a kill -9 in the middle of rotating.

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <thread>

#include "inject/capture_config.h"
#include "inject/capture_session.h"
#include "proto/file_layout.h"
#include "proto/ring_file_sink.h"
#include "proto/trace_reader.h"
#include "proto/trace_writer.h"
#include "tests/support/fake_cupti.h"
#include "tests/support/temp_dir.h"

namespace {

using namespace gpuxray;
using gpuxray::testing::FakeCupti;
using gpuxray::testing::TempDir;

constexpr uint32_t kSlot = 256u << 10;

// Kernels whose start times and ids are random, so that they do not compress to nothing.
void addBatch(format::TraceWriter& writer, uint64_t batch, std::mt19937_64& random) {
  auto name = writer.intern("kernel_" + std::to_string(batch % 7));
  for (int i = 0; i < 4000; ++i) {
    format::KernelRecord kernel;
    kernel.start_ns = batch * 1'000'000'000ull + (random() % 900'000'000ull);
    kernel.end_ns = kernel.start_ns + 1 + random() % 100'000;
    kernel.correlation_id = static_cast<uint32_t>(random());
    kernel.name_id = name;
    kernel.grid_x = static_cast<uint32_t>(random() % 4096);
    writer.add(kernel);
  }
  writer.flush();
}

struct ReadBack {
  std::vector<std::string> warnings;
  std::set<uint64_t> seconds;  // which batches' kernels are in the file (start / 1 s)
  std::optional<format::Trailer> trailer;
  bool header = false;
};

ReadBack readBack(const std::string& path) {
  format::TraceReader reader(path);
  ReadBack result;
  result.header = reader.header().format_major == format::kFormatMajor;
  format::EventBatch batch;
  while (reader.next(batch)) {
    for (const auto& k : batch.kernels) result.seconds.insert(k.start_ns / 1'000'000'000ull);
  }
  result.trailer = reader.trailer();
  result.warnings = reader.warnings();
  return result;
}

inject::EnvironmentLookup noEnvironment() {
  return [](const char*) -> const char* { return nullptr; };
}

}  // namespace

TEST_CASE("a filler chunk is a valid, empty chunk of exactly the size asked", "[size]") {
  for (uint32_t bytes : {64u, 65u, 200u, 4096u, 100'003u}) {
    auto filler = format::fillerChunk(bytes);
    REQUIRE(filler.size() == bytes);
    std::span<const uint8_t> all(filler);
    format::ChunkHeader header;
    REQUIRE(format::decodeChunkHeader(all.first(format::kChunkHeaderSize), &header) ==
            format::ChunkHeaderProblem::kNone);
    CHECK(header.stored_size == bytes - format::kChunkHeaderSize);
    CHECK(format::chunkChecksumMatches(all.first(format::kChunkHeaderSize), all.subspan(format::kChunkHeaderSize)));
  }
}

TEST_CASE("the ring keeps the most recent chunks within its size, and reads without warnings", "[size]") {
  TempDir dir;
  std::string path = (dir.path() / "ring.gpuxray").string();
  const uint64_t capacity = 2u << 20;
  auto sink = std::make_unique<format::RingFileSink>(path, capacity, kSlot);
  REQUIRE(sink->ok());
  const format::RingFileSink* ring = sink.get();
  format::WriterOptions options;
  options.max_batch_bytes = kSlot / 4;
  format::TraceWriter writer(std::move(sink), options);
  format::FileHeader header;
  header.hostname = "node-0";
  REQUIRE(writer.writeHeader(header));
  std::mt19937_64 random(7);
  for (uint64_t batch = 1; batch <= 40; ++batch) addBatch(writer, batch, random);
  format::Trailer trailer;
  trailer.end = format::CaptureEnd::kProcessExit;
  REQUIRE(writer.finish(trailer));
  CHECK(ring->overwrittenChunks() > 0);
  CHECK(std::filesystem::file_size(path) <= capacity);

  auto file = readBack(path);
  CHECK(file.header);
  CHECK(file.warnings.empty());
  REQUIRE(file.trailer);
  CHECK(file.trailer->end == format::CaptureEnd::kProcessExit);
  // The last batches are there, the first ones were written over.
  CHECK(file.seconds.contains(40));
  CHECK(file.seconds.contains(39));
  CHECK_FALSE(file.seconds.contains(1));
}

TEST_CASE("a process killed with -9 while it rotates its ring leaves a file that reads", "[size]") {
  TempDir dir;
  for (int attempt = 0; attempt < 4; ++attempt) {
    std::string path = (dir.path() / ("ring-" + std::to_string(attempt) + ".gpuxray")).string();
    pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      auto sink = std::make_unique<format::RingFileSink>(path, 1u << 20, kSlot);
      format::WriterOptions options;
      options.max_batch_bytes = kSlot / 4;
      format::TraceWriter writer(std::move(sink), options);
      writer.writeHeader({});
      std::mt19937_64 random(static_cast<uint64_t>(attempt));
      for (uint64_t batch = 1;; ++batch) addBatch(writer, batch, random);
    }
    // Long enough for the ring to have turned over several times.
    std::this_thread::sleep_for(std::chrono::milliseconds(150 + 37 * attempt));
    kill(child, SIGKILL);
    int status = 0;
    waitpid(child, &status, 0);
    REQUIRE(WIFSIGNALED(status));
    auto file = readBack(path);
    CHECK(file.header);
    CHECK_FALSE(file.seconds.empty());
    CHECK_FALSE(file.trailer);
    CHECK(std::filesystem::file_size(path) <= (1u << 20));
    // At most the slot being written is torn; the reader skips it by its checksum.
    CHECK(file.warnings.size() <= 1);
  }
}

TEST_CASE("a size bound (--max-size-mb) through a capture: it stops near the bound and the trailer says so", "[size]") {
  TempDir dir;
  FakeCupti::instance().reset();
  inject::CaptureConfig config;
  config.output_dir = (dir.path() / "traces").string();
  config.flush_interval_ms = 10;
  config.max_file_bytes = 1u << 20;
  std::vector<std::string> logged;
  inject::CaptureDependencies deps;
  deps.cupti = FakeCupti::instance().api();
  deps.cupti_path = "/fake/libcupti.so.13";
  deps.cupti_api_version = 130001;
  deps.environment = noEnvironment();
  deps.log = [&](const std::string& line) { logged.push_back(line); };
  inject::CaptureSession session(std::move(deps), config);
  REQUIRE(session.start());
  std::mt19937_64 random(3);
  auto& fake = FakeCupti::instance();
  // Records keep coming until the bound is reached, for at most 60 s: on a loaded machine the capture
  // thread writes the first MiB later than the 3 s that 200 rounds take. Past 200 rounds (more than the
  // bound's worth) the test only waits, so that a slow capture thread is not buried under a backlog
  // that its last flush must then translate.
  auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  int rounds = 0;
  while (fake.isEnabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) && std::chrono::steady_clock::now() < give_up) {
    if (rounds++ >= 200) {
      std::this_thread::sleep_for(std::chrono::milliseconds(15));
      continue;
    }
    for (int i = 0; i < 5000; ++i) {
      CUpti_ActivityKernel10 kernel{};
      kernel.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
      kernel.start = 1'000'000'000ull + random() % 1'000'000'000'000ull;
      kernel.end = kernel.start + random() % 1'000'000;
      kernel.correlationId = static_cast<uint32_t>(random());
      kernel.gridX = static_cast<int32_t>(random() % 100000);
      kernel.gridY = kernel.gridZ = kernel.blockX = kernel.blockY = kernel.blockZ = 1;
      kernel.name = "k";
      fake.queue(kernel);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(15));
  }
  // The bound switched the kinds off: CUPTI records nothing more.
  CHECK_FALSE(fake.isEnabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  // The last flush translates what is still queued; a loaded CI machine took longer than the default
  // 10 s, and a stop that gives up leaves the file without its trailer, which is what is checked here.
  session.stop(format::CaptureEnd::kProcessExit, "exit", /*timeout_ms=*/60000);
  auto size = std::filesystem::file_size(session.tracePath());
  CHECK(size >= (1u << 20));
  // One flush's chunks past the bound at most (64 KiB batches).
  CHECK(size <= (1u << 20) + (512u << 10));
  format::TraceReader reader(session.tracePath());
  format::EventBatch batch;
  while (reader.next(batch)) {
  }
  REQUIRE(reader.trailer());
  CHECK(reader.trailer()->end == format::CaptureEnd::kLimitReached);
  CHECK(reader.trailer()->end_detail ==
        "the trace file reached its 1 MiB bound (GPUXRAY_MAX_SIZE_MB); capture stopped");
  REQUIRE(logged.size() == 1);
  CHECK(logged[0] == reader.trailer()->end_detail);
}

TEST_CASE("bad size variables are one warning each", "[size]") {
  std::map<std::string, std::string> variables = {{"GPUXRAY_MAX_SIZE_MB", "0"}, {"GPUXRAY_RING", "1"}};
  auto config = inject::readCaptureConfig([&](const char* name) -> const char* {
    auto it = variables.find(name);
    return it == variables.end() ? nullptr : it->second.c_str();
  });
  REQUIRE(config.warnings.size() == 2);
  CHECK(config.warnings[0] == "GPUXRAY_MAX_SIZE_MB='0' is not a number of MiB from 1 to 1048576; using no bound");
  CHECK(config.warnings[1] == "GPUXRAY_RING='1' is not usable without GPUXRAY_MAX_SIZE_MB; using no ring");
  CHECK(config.max_file_bytes == 0);
  CHECK_FALSE(config.ring);
}
