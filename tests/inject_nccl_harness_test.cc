// libgpuxray_inject.so as NCCL 2.23-2.29 really drive it: tests/support/nccl_harness plays each
// profiler ABI in NCCL's own order of calls (groups, kernels launched before the Coll start, a GPU
// timer seconds behind the host's clock, 8 network steps in flight per channel), with processes in
// UTS namespaces of their own as separate hosts; the files it leaves are read back and analyzed.

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "proto/trace_reader.h"
#include "tests/support/build_outputs.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace {

using gpuxray::testing::runCommand;
using gpuxray::testing::TempDir;
namespace format = gpuxray::format;

const std::string kLibrary = GPUXRAY_INJECT_LIBRARY;
constexpr int kOps = 40;
constexpr uint64_t kAllReduceBytes = 2 * 8 * (1u << 17);  // 2 channels x 8 steps x 128 KiB

struct RankFile {
  format::FileHeader header;
  format::Trailer trailer;
  std::vector<format::NcclCommunicatorRecord> comms;
  std::vector<format::NcclOperationRecord> ops;
  std::vector<format::NetTransferRecord> transfers;
  std::map<uint32_t, std::string> names;
};

RankFile readRank(const std::string& path) {
  format::TraceReader reader(path);
  RankFile file;
  format::EventBatch batch;
  while (reader.next(batch)) {
    file.comms.insert(file.comms.end(), batch.nccl_communicators.begin(), batch.nccl_communicators.end());
    file.ops.insert(file.ops.end(), batch.nccl_operations.begin(), batch.nccl_operations.end());
    file.transfers.insert(file.transfers.end(), batch.net_transfers.begin(), batch.net_transfers.end());
  }
  file.header = reader.header();
  if (reader.trailer()) file.trailer = *reader.trailer();
  for (const auto& op : file.ops) file.names[op.func_id] = std::string(reader.strings().get(op.func_id));
  return file;
}

// Whether this process may give a child a UTS namespace of its own (the harness's hosts).
bool canMakeHosts() {
  return runCommand("unshare --uts true").exit_code == 0;
}

struct Host {
  std::string name;
  int step_us = 20;
};

// One harness process per host (rank = its index), all at once; their files land in `output`.
gpuxray::testing::CommandResult playHosts(int version, const std::vector<Host>& hosts, const std::string& output,
                                          const std::string& truth_prefix, const std::string& extra = "") {
  std::string script;
  for (size_t r = 0; r < hosts.size(); ++r) {
    script += "ASAN_OPTIONS=detect_leaks=0 GPUXRAY_RUN_ID=harness GPUXRAY_OUTPUT_DIR=" + output + " RANK=" + std::to_string(r) +
              " WORLD_SIZE=" + std::to_string(hosts.size()) + " " + GPUXRAY_NCCL_HARNESS + " " + kLibrary + " " +
              std::to_string(version) + " --host " + hosts[r].name + " --rank " + std::to_string(r) + " --ranks " +
              std::to_string(hosts.size()) + " --ops " + std::to_string(kOps) + " --step-us " +
              std::to_string(hosts[r].step_us) + " --truth " + truth_prefix + std::to_string(r) + " " + extra +
              " & pids=\"$pids $!\"\n";
  }
  script += "status=0; for p in $pids; do wait $p || status=1; done; exit $status\n";
  return runCommand("sh -c '" + script + "'");
}

std::string rankPath(const std::string& output, int rank) {
  char name[32];
  std::snprintf(name, sizeof name, "/rank-%05d.gpuxray", rank);
  return output + name;
}

}  // namespace

TEST_CASE(
    "NCCL 2.23-2.29 as they drive the plugin: every operation recorded, GPU times within their error, on two "
    "hosts",
    "[nccl][harness]") {
  if (!canMakeHosts()) {
    WARN("no UTS namespaces here (unshare needs root): the harness cannot play two hosts");
    return;
  }
  const int version = GENERATE(1, 2, 3, 4, 5, 6);
  INFO("profiler ABI v" << version);
  TempDir dir;
  std::string output = dir / "traces";
  auto result = playHosts(version, {{"hostA"}, {"hostB"}}, output, dir / "truth", "--events-after-finalize");
  INFO(result.err);
  REQUIRE(result.exit_code == 0);
  uint64_t worst_error = 0;
  for (int rank = 0; rank < 2; ++rank) {
    RankFile file = readRank(rankPath(output, rank));
    CHECK(file.header.hostname == (rank == 0 ? "hostA" : "hostB"));
    REQUIRE(file.comms.size() == 1);
    CHECK(file.comms[0].comm_hash == 0x5eed);
    CHECK(file.comms[0].profiler_version == static_cast<uint32_t>(version));
    // The truth: each all-reduce's GPU window on the host clock, by sequence number.
    std::map<uint64_t, std::pair<uint64_t, uint64_t>> truth;
    std::ifstream truth_file(dir / ("truth" + std::to_string(rank)));
    uint64_t seq = 0, start = 0, end = 0;
    while (truth_file >> seq >> start >> end) truth[seq] = {start, end};
    REQUIRE(truth.size() == kOps);

    std::vector<format::NcclOperationRecord> all_reduces;
    for (const auto& op : file.ops) {
      if (file.names[op.func_id] == "AllReduce" && !op.graph_captured && op.seq < kOps) all_reduces.push_back(op);
    }
    REQUIRE(all_reduces.size() == kOps);
    std::map<uint64_t, uint64_t> linked_bytes;
    for (const auto& t : file.transfers) linked_bytes[t.operation_id] += t.bytes;
    for (const auto& op : all_reduces) {
      INFO("seq " << op.seq);
      CHECK(op.bytes == kAllReduceBytes);
      CHECK(op.channels == 2);
      CHECK(linked_bytes[op.operation_id] == kAllReduceBytes);
      if (version >= 4) {
        // Kernels started 1-7 µs (one: 204 µs) before the Coll start; the GPU clock is 7.3 s behind.
        REQUIRE_FALSE(op.gpu_clock_unmapped);
        auto [true_start, true_end] = truth[op.seq];
        uint64_t start_error = static_cast<uint64_t>(std::llabs(static_cast<int64_t>(op.gpu_start_ns - true_start)));
        uint64_t end_error = static_cast<uint64_t>(std::llabs(static_cast<int64_t>(op.gpu_end_ns - true_end)));
        CHECK(start_error <= op.gpu_clock_error_ns);
        CHECK(end_error <= op.gpu_clock_error_ns);
        CHECK(op.gpu_clock_error_ns < 1'000'000);
        worst_error = std::max(worst_error, op.gpu_clock_error_ns);
      } else {
        CHECK(op.gpu_start_ns == 0);
      }
    }
    // Every transfer once: the step NCCL reports after the finalize adds none.
    for (const auto& t : file.transfers) {
      CHECK(t.end_ns >= t.start_ns);
      CHECK(t.wait_network_ns <= t.end_ns - t.start_ns);
    }
    bool late_events_noted = false;
    for (const auto& warning : file.trailer.warnings)
      late_events_noted = late_events_noted || warning.find("after their communicator's finalize") != std::string::npos;
    CHECK(late_events_noted);
  }
  WARN("v" << version << ": worst GPU clock error " << worst_error << " ns");
}

TEST_CASE("a slow NIC planted on one host is named, with 2 hosts and with 4", "[nccl][harness]") {
  if (!canMakeHosts()) {
    WARN("no UTS namespaces here (unshare needs root): the harness cannot play hosts");
    return;
  }
  const int hosts_count = GENERATE(2, 4);
  const int version = GENERATE(4, 5);
  INFO(hosts_count << " hosts, ABI v" << version);
  TempDir dir;
  std::string output = dir / "traces";
  std::vector<Host> hosts;
  for (int h = 0; h < hosts_count; ++h) hosts.push_back({"node" + std::to_string(h), h == 1 ? 60 : 20});
  auto result = playHosts(version, hosts, output, dir / "truth");
  INFO(result.err);
  REQUIRE(result.exit_code == 0);
  auto analyzed = runCommand(gpuxray::testing::gpuxrayBinary() + " analyze " + output);
  INFO(analyzed.out << analyzed.err);
  REQUIRE(analyzed.exit_code == 0);
  CHECK(analyzed.out.find("slow link: node1's") != std::string::npos);
  for (int h = 0; h < hosts_count; ++h) {
    if (h != 1) CHECK(analyzed.out.find("slow link: node" + std::to_string(h) + "'s") == std::string::npos);
  }
}

TEST_CASE("a communicator recreated after NCCL dlcloses the plugin continues the process's one file",
          "[nccl][harness]") {
  TempDir dir;
  std::string output = dir / "traces";
  auto result = runCommand("ASAN_OPTIONS=detect_leaks=0 GPUXRAY_OUTPUT_DIR=" + output + " RANK=0 WORLD_SIZE=1 " +
                           GPUXRAY_NCCL_HARNESS + " " + kLibrary + " 4 --ranks 1 --ops 5 --recreate");
  INFO(result.err);
  REQUIRE(result.exit_code == 0);
  auto files = runCommand("ls " + output);
  CHECK(files.out == "rank-00000.gpuxray\n");
  RankFile file = readRank(rankPath(output, 0));
  REQUIRE(file.comms.size() == 2);
  CHECK(file.comms[0].comm_hash == 0x5eed);
  CHECK(file.comms[1].comm_hash == 0x5eee);
  size_t all_reduces = 0;
  for (const auto& op : file.ops) all_reduces += file.names[op.func_id] == "AllReduce" ? 1u : 0u;
  CHECK(all_reduces == 10);
  auto info = runCommand(gpuxray::testing::gpuxrayBinary() + " info " + output);
  INFO(info.out << info.err);
  CHECK(info.exit_code == 0);
  auto analyzed = runCommand(gpuxray::testing::gpuxrayBinary() + " analyze " + output);
  INFO(analyzed.out << analyzed.err);
  CHECK(analyzed.exit_code == 0);
}
