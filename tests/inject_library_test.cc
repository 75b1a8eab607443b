// libgpuxray_inject.so as the traced process sees it: what it exports, what it pulls in, and
// that it stays silent and harmless where there is no CUDA work or no GPU.

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <iterator>
#include <set>
#include <sstream>
#include <string>

#include "proto/trace_reader.h"
#include "tests/support/build_outputs.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace {

using gpuxray::testing::runCommand;
using gpuxray::testing::TempDir;

const std::string kLibrary = GPUXRAY_INJECT_LIBRARY;

// What LD_PRELOAD must hold for the library to load (the sanitizer runtime comes first in
// sanitizer builds).
std::string preloadValue() {
#ifdef GPUXRAY_SANITIZER_RUNTIME
  return std::string(GPUXRAY_SANITIZER_RUNTIME) + ":" + kLibrary;
#else
  return kLibrary;
#endif
}

std::set<std::string> words(const std::string& text, size_t column) {
  std::set<std::string> found;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string field;
    for (size_t i = 0; i <= column && fields >> field; ++i) {
      if (i == column) found.insert(field);
    }
  }
  return found;
}

}  // namespace

TEST_CASE("the library exports only the loaders' entry points and gpuxray doctor's checks") {
  auto result = runCommand("nm -D --defined-only " + kLibrary);
  REQUIRE(result.exit_code == 0);
  CHECK(words(result.out, 2) == std::set<std::string>{"InitializeInjection", "InitializeInjectionNvtx2",
                                                      "InitializeInjectionNvtxExtension", "gpuxray_doctor_report_v1",
                                                      "ncclProfiler_v1",
                                                      "ncclProfiler_v2", "ncclProfiler_v3", "ncclProfiler_v4",
                                                      "ncclProfiler_v5", "ncclProfiler_v6"});
}

TEST_CASE("the library depends on nothing that could clash with the traced program's libraries") {
  auto result = runCommand("ldd " + kLibrary);
  REQUIRE(result.exit_code == 0);
  std::set<std::string> allowed = {"linux-vdso.so.1", "libc.so.6", "libstdc++.so.6", "libgcc_s.so.1", "libm.so.6",
                                   "libdl.so.2",      "libpthread.so.0", "librt.so.1", "libzstd.so.1"};
#ifdef GPUXRAY_SANITIZER_RUNTIME
  allowed.insert({"libasan.so.8", "libubsan.so.1"});
#endif
  for (const auto& library : words(result.out, 0)) {
    INFO(result.out);
    if (library.find("ld-linux") != std::string::npos) continue;
    CHECK(allowed.count(library) == 1);
  }
  CHECK(result.out.find("protobuf") == std::string::npos);
  CHECK(result.out.find("libfmt") == std::string::npos);
}

TEST_CASE("preloaded into a process that never uses CUDA, the library leaves no trace") {
  TempDir dir;
  std::string output = dir / "traces";
  std::string environment = "LD_PRELOAD=" + preloadValue() + " GPUXRAY_OUTPUT_DIR=" + output + " ";
  auto quiet = runCommand(environment + "/bin/true");
  CHECK(quiet.exit_code == 0);
  CHECK(quiet.out.empty());
  CHECK(quiet.err.empty());
  auto failing = runCommand(environment + "sh -c 'echo hello; exit 3'");
  CHECK(failing.exit_code == 3);
  CHECK(failing.out == "hello\n");
  CHECK(failing.err.empty());
  CHECK_FALSE(std::filesystem::exists(output));
}

TEST_CASE("preloading points the CUDA driver, NVTX and NCCL at the library unless the user chose otherwise") {
  std::string preload = "LD_PRELOAD=" + preloadValue() + " ";
  auto chosen =
      runCommand(preload + "sh -c 'echo $CUDA_INJECTION64_PATH; echo $NVTX_INJECTION64_PATH; echo $NCCL_PROFILER_PLUGIN'");
  std::string absolute = std::filesystem::canonical(kLibrary).string();
  CHECK(chosen.out == absolute + "\n" + absolute + "\n" + absolute + "\n");
  auto kept = runCommand(preload + "CUDA_INJECTION64_PATH=/other/tool.so sh -c 'echo $CUDA_INJECTION64_PATH'");
  CHECK(kept.out == "/other/tool.so\n");
}

TEST_CASE("without a GPU, InitializeInjection says why in one line, and the file says so too") {
  TempDir dir;
  std::string output = dir / "traces";
  auto result = runCommand("ASAN_OPTIONS=detect_leaks=0 GPUXRAY_OUTPUT_DIR=" + output + " RANK=0 WORLD_SIZE=1 " +
                           GPUXRAY_INJECTION_PROBE + " " + kLibrary + " 2");
  INFO(result.err);
  CHECK(result.exit_code == 0);
  CHECK(result.err ==
        "gpuxray: CUPTI cannot start: CUPTI_ERROR_UNKNOWN (999) (is there a GPU and a working driver?); no GPU "
        "activity captured\n");
  gpuxray::format::TraceReader reader(output + "/rank-00000.gpuxray");
  CHECK(reader.header().rank == 0);
  CHECK(reader.header().capture_config.options.back().find("cupti=") == 0);
  gpuxray::format::EventBatch batch;
  while (reader.next(batch)) {
  }
  REQUIRE(reader.trailer());
  CHECK(reader.trailer()->end == gpuxray::format::CaptureEnd::kProcessExit);
  REQUIRE(reader.trailer()->warnings.size() == 1);
  CHECK(reader.trailer()->warnings[0].find("CUPTI cannot start") == 0);
}

TEST_CASE("a libcupti named by GPUXRAY_CUPTI_PATH that cannot be used is reported, and the program runs on") {
  TempDir dir;
  auto result = runCommand("GPUXRAY_CUPTI_PATH=/nonexistent/libcupti.so.13 GPUXRAY_OUTPUT_DIR=" + (dir / "t") + " " +
                           GPUXRAY_INJECTION_PROBE + " " + kLibrary);
  CHECK(result.exit_code == 0);
  CHECK(result.err ==
        "gpuxray: GPUXRAY_CUPTI_PATH=/nonexistent/libcupti.so.13 is not usable: not found; no GPU activity captured\n");
}

TEST_CASE("NCCL 2.23 to 2.29, played by a harness, load the library as their profiler plugin and its operations reach "
          "the file") {
  namespace format = gpuxray::format;
  const int version = GENERATE(1, 2, 3, 4, 5, 6);
  INFO("profiler ABI v" << version);
  TempDir dir;
  std::string output = dir / "traces";
  auto result = runCommand("ASAN_OPTIONS=detect_leaks=0 GPUXRAY_OUTPUT_DIR=" + output + " RANK=0 WORLD_SIZE=4 " +
                           GPUXRAY_NCCL_HARNESS + " " + kLibrary + " " + std::to_string(version) + " --ops 1");
  INFO(result.err);
  REQUIRE(result.exit_code == 0);
  format::TraceReader reader(output + "/rank-00000.gpuxray");
  format::EventBatch batch;
  std::vector<format::NcclCommunicatorRecord> comms;
  std::vector<format::NcclOperationRecord> ops;
  std::vector<format::NetTransferRecord> transfers;
  while (reader.next(batch)) {
    comms.insert(comms.end(), batch.nccl_communicators.begin(), batch.nccl_communicators.end());
    ops.insert(ops.end(), batch.nccl_operations.begin(), batch.nccl_operations.end());
    transfers.insert(transfers.end(), batch.net_transfers.begin(), batch.net_transfers.end());
  }
  REQUIRE(comms.size() == 1);
  CHECK(comms[0].comm_hash == 0x5eed);
  CHECK(comms[0].name == "harness");
  CHECK(comms[0].comm_rank == 0);
  // Before v4, init names no communicator: its operations do, without its size.
  CHECK(comms[0].nranks == (version >= 4 ? 4 : 0));
  CHECK(comms[0].global_rank == 0);
  CHECK(comms[0].profiler_version == static_cast<uint32_t>(version));

  auto name = [&](format::StringId id) { return std::string(reader.strings().get(id)); };
  auto where = [&](auto predicate) {
    std::vector<format::NcclOperationRecord> found;
    std::copy_if(ops.begin(), ops.end(), std::back_inserter(found), predicate);
    return found;
  };
  // The operations every version sees (the all-to-all is the only float16 one, v5 only).
  auto find = [&](const std::string& func) {
    auto found = where([&](const auto& op) {
      return name(op.func_id) == func && !op.graph_captured && name(op.datatype_id) != "ncclFloat16";
    });
    REQUIRE(found.size() == 1);
    return found[0];
  };
  for (const auto& op : ops) CHECK(op.comm_hash == 0x5eed);
  auto all_reduce = find("AllReduce");
  CHECK(all_reduce.bytes == 2u << 20);
  CHECK(all_reduce.channels == 2);
  // GPU times come with v4's kernel-channel timers (v3's channels have none), put on the trace
  // clock by the host bounds NCCL guarantees (no CUPTI kernels here); tests/inject_nccl_harness_test.cc
  // checks them against the truth.
  if (version >= 4) {
    CHECK(all_reduce.gpu_end_ns - all_reduce.gpu_start_ns >= 30'000);
    CHECK_FALSE(all_reduce.gpu_clock_unmapped);
    CHECK(all_reduce.gpu_clock_error_ns > 0);
  } else {
    CHECK(all_reduce.gpu_start_ns == 0);
    CHECK(all_reduce.gpu_end_ns == 0);
  }
  CHECK(name(all_reduce.algorithm_id) == "RING");
  CHECK(name(all_reduce.protocol_id) == "SIMPLE");
  CHECK(name(all_reduce.datatype_id) == "ncclFloat32");
  CHECK_FALSE(all_reduce.graph_captured);
  CHECK(find("AllGather").bytes == 4096);  // an all-gather's count is in bytes
  CHECK(find("Send").kind == format::NcclOperationKind::kSend);
  CHECK(find("Recv").kind == format::NcclOperationKind::kRecv);
  CHECK(find("Recv").bytes == 2000);
  CHECK(name(find("Recv").datatype_id) == "ncclBfloat16");
  REQUIRE(transfers.size() == 3);
  uint64_t all_reduce_bytes = 0;
  for (const auto& t : transfers) {
    CHECK(t.comm_hash == 0x5eed);
    if (t.operation_id == all_reduce.operation_id) all_reduce_bytes += t.bytes;
  }
  // v1-v3 report the bytes as a proxy operation's running total, v4+ per step.
  CHECK(all_reduce_bytes == 2u << 20);
  CHECK(std::count_if(transfers.begin(), transfers.end(), [](const auto& t) { return t.operation_id == 0; }) == 1);

  size_t expected_ops = 4;
  if (version >= 5) {
    // An all-to-all over 4 ranks: exactly one send and one receive per peer, itself included.
    auto all_to_all = where([&](const auto& op) { return name(op.datatype_id) == "ncclFloat16"; });
    REQUIRE(all_to_all.size() == 8);
    for (int peer = 0; peer < 4; ++peer) {
      for (auto kind : {format::NcclOperationKind::kSend, format::NcclOperationKind::kRecv}) {
        auto to_peer = where([&](const auto& op) {
          return name(op.datatype_id) == "ncclFloat16" && op.peer == peer && op.kind == kind;
        });
        REQUIRE(to_peer.size() == 1);
        CHECK(to_peer[0].bytes == 6000);
        CHECK(to_peer[0].gpu_end_ns > to_peer[0].gpu_start_ns);
      }
    }
    // Two replays of a captured all-reduce, each with its own kernel times.
    auto replays = where([](const auto& op) { return op.graph_captured; });
    REQUIRE(replays.size() == 2);
    std::sort(replays.begin(), replays.end(), [](const auto& a, const auto& b) { return a.seq < b.seq; });
    for (size_t i = 0; i < replays.size(); ++i) {
      CHECK(name(replays[i].func_id) == "AllReduce");
      CHECK(replays[i].seq == 2 + i);
      CHECK(replays[i].bytes == 4096);
      // Each replay's own kernel times (30 µs at least), on the trace clock.
      CHECK(replays[i].gpu_end_ns - replays[i].gpu_start_ns >= 30'000);
      CHECK(replays[i].gpu_start_ns >= replays[i].enqueue_ns);
    }
    expected_ops += all_to_all.size() + replays.size();
  }
  CHECK(ops.size() == expected_ops);

  auto info = runCommand(gpuxray::testing::gpuxrayBinary() + " info " + output);
  CHECK(info.out.find("nccl_communicator 1, nccl_operation " + std::to_string(expected_ops) + ", net_transfer 3") !=
        std::string::npos);
}
