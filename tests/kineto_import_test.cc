// The PyTorch-profiler importer on hand-made traces: what each event becomes in the model, gzip and
// plain text alike, and every kind of bad input (counted, one warning line each, the rest used).

#include <catch2/catch.hpp>
#include <string>

#include "analyzer/errors.h"
#include "analyzer/load/byte_input.h"
#include "analyzer/load/json_event_splitter.h"
#include "analyzer/load/kineto_collectives.h"
#include "analyzer/load/kineto_event.h"
#include "analyzer/load/kineto_importer.h"
#include "analyzer/load/run_loader.h"
#include "tests/support/kineto_traces.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace {

namespace load = gpuxray::load;
namespace model = gpuxray::model;
using gpuxray::testing::kernelEvent;
using gpuxray::testing::launchEvent;
using gpuxray::testing::TempDir;

bool anyContains(const std::vector<std::string>& lines, const std::string& part) {
  for (const auto& line : lines) {
    if (line.find(part) != std::string::npos) return true;
  }
  return false;
}

// Rank 1 of 2: two steps, a GEMM, an NCCL all-reduce with its arguments, a copy, a memset, a
// stream synchronization (and one on no stream), a Triton op naming a stream, a kernel whose
// correlation only its ac2g flow gives, an allocation, an unknown category and metadata.
std::string handMadeTrace() {
  std::string events = fmt::format(
      R"json([{{"ph": "M", "name": "process_name", "pid": 7, "tid": 0, "args": {{"name": "python"}}}},
{{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 7, "tid": 7, "ts": 1000.5, "dur": 2000}},
{{"ph": "X", "cat": "user_annotation", "name": "## forward ##", "pid": 7, "tid": 7, "ts": 1001, "dur": 500}},
{{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#4", "pid": 7, "tid": 7, "ts": 3000.5, "dur": 2000}},
{{"ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep#3", "pid": 0, "tid": 7, "ts": 1010, "dur": 1900}},
{},
{},
{},
{},
{{"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)", "pid": 0, "tid": 7, "ts": 1300, "dur": 10,
  "args": {{"device": 0, "stream": 7, "correlation": 13, "bytes": 4096}}}},
{{"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "pid": 0, "tid": 7, "ts": 1320, "dur": 2,
  "args": {{"device": 0, "stream": 7, "correlation": 14, "bytes": 512}}}},
{{"ph": "X", "cat": "cuda_sync", "name": "Stream Sync", "pid": 0, "tid": 7, "ts": 1330, "dur": 50,
  "args": {{"device": 0, "stream": 7, "correlation": 15}}}},
{{"ph": "X", "cat": "cuda_sync", "name": "Context Sync", "pid": 0, "tid": 0, "ts": 1400, "dur": 5,
  "args": {{"device": 0, "stream": -1, "correlation": 16}}}},
{{"ph": "X", "cat": "cpu_op", "name": "triton_poi_fused_add_0", "pid": 7, "tid": 7, "ts": 1500, "dur": 20,
  "args": {{"stream": 0, "kernel_backend": "triton"}}}},
{},
{{"ph": "f", "id": 77, "pid": 0, "tid": 7, "ts": 1600, "cat": "ac2g", "name": "ac2g", "bp": "e"}},
{{"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 7, "tid": 7, "ts": 1050, "s": "t",
  "args": {{"Device Type": 1, "Device Id": 0, "Bytes": 1048576, "Total Allocated": 1048576}}}},
{{"ph": "X", "cat": "made_up_category", "name": "x", "pid": 7, "tid": 7, "ts": 1, "dur": 1}}
])json",
      launchEvent("1005", 11), kernelEvent("void gemm_kernel<float>(float*)", "1100.25", "100.5", 7, 11),
      launchEvent("1150", 12),
      kernelEvent("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "1200", "80", 20, 12,
                  R"(, "Collective name": "allreduce", "In msg nelems": 1000, "Out msg nelems": 1000, "Group size": 2,
  "dtype": "Float", "Process Group Name": "0", "Process Group Description": "default_pg", "Process Group Ranks": "[0, 1]")"),
      R"({"ph": "X", "cat": "kernel", "name": "late_kernel", "pid": 0, "tid": 7, "ts": 1600, "dur": 10, "args": {"device": 0, "stream": 7}})");
  return fmt::format(R"({{"schemaVersion": 1,
"deviceProperties": [{{"id": 0, "name": "NVIDIA H100", "totalGlobalMem": 85000000000, "computeMajor": 9,
  "computeMinor": 0, "maxThreadsPerMultiprocessor": 2048, "regsPerMultiprocessor": 65536, "warpSize": 32,
  "sharedMemPerBlock": 49152, "sharedMemPerMultiprocessor": 233472, "numSms": 132}}],
"distributedInfo": {{"backend": "nccl", "rank": 1, "world_size": 2, "pg_count": 2, "pg_config": [
  {{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl", "pg_size": 2, "ranks": [0, 1]}},
  {{"pg_name": "1", "pg_desc": "undefined", "backend_config": "cpu:gloo", "pg_size": 2, "ranks": [0, 1]}}],
  "nccl_version": "2.21.5"}},
"traceEvents": {},
"traceName": "x", "baseTimeNanoseconds": 1700000000000000000}})",
                     events);
}

model::RankTrace import(const std::string& path, std::vector<std::string>& warnings, load::KinetoImportStats* stats = nullptr) {
  return load::importKinetoTrace(path, warnings, stats);
}

}  // namespace

TEST_CASE("kineto: every kind of event lands in the model") {
  TempDir dir;
  gpuxray::testing::writeText(dir.path() / "run" / "trace.json", handMadeTrace());
  std::vector<std::string> warnings;
  load::KinetoImportStats stats;
  model::RankTrace rank = import(dir / "run/trace.json", warnings, &stats);
  CHECK(rank.rank == 1);
  CHECK(rank.header.world_size == 2);
  CHECK(rank.header.run_id == "run");
  CHECK(rank.header.nccl_version == "2.21.5");
  CHECK_FALSE(rank.whole_microsecond_times);
  REQUIRE(rank.header.devices.size() == 1);
  CHECK(rank.header.devices[0].sm_count == 132);
  CHECK(rank.header.devices[0].max_warps_per_sm == 64);
  CHECK(stats.events == 18);
  CHECK(stats.by_category[static_cast<size_t>(load::KinetoCategory::kUnknown)] == 1);
  CHECK(anyContains(warnings, "1 events of unknown categories were ignored: \"made_up_category\" (1)"));

  // By start: gemm, all-reduce, memcpy, memset, sync, triton op, late kernel (the context sync has no stream).
  REQUIRE(rank.activities.size() == 7);
  const auto& gemm = rank.activities[0];
  CHECK(gemm.kind == model::ActivityKind::kCompute);
  CHECK(gemm.start_ns == 1'100'250);
  CHECK(gemm.end_ns == 1'200'750);
  CHECK(gemm.correlation_id == 11);
  CHECK(rank.launch_configs.at(gemm.detail).grid_x == 108);
  CHECK(rank.launch_configs.at(gemm.detail).shared_memory_bytes == 1024);
  CHECK(rank.activities[1].kind == model::ActivityKind::kCommunication);
  CHECK(rank.streams[rank.activities[1].stream].stream == 20);
  CHECK(rank.activities[2].kind == model::ActivityKind::kMemcpy);
  CHECK(rank.activities[2].detail == 4096);
  CHECK(rank.activities[3].kind == model::ActivityKind::kMemset);
  CHECK(rank.activities[4].kind == model::ActivityKind::kSync);
  CHECK(rank.name(rank.activities[4].name_id) == "Stream Sync");
  CHECK(rank.activities[5].kind == model::ActivityKind::kHostOp);
  CHECK(rank.streams[rank.activities[5].stream].stream == 0);
  CHECK(rank.activities[6].correlation_id == 77);  // from its ac2g flow

  REQUIRE(rank.host_calls.size() == 2);
  CHECK(rank.launchOf(12)->start_ns == 1'150'000);

  // Ranges: host annotations nest; the GPU copy of a step keeps its own domain.
  REQUIRE(rank.nvtx.size() == 4);
  CHECK(rank.name(rank.nvtx[0].name_id) == "ProfilerStep#3");
  CHECK(rank.nvtx[0].depth == 0);
  CHECK(rank.name(rank.nvtx[1].name_id) == "## forward ##");
  CHECK(rank.nvtx[1].depth == 1);
  CHECK(rank.name(rank.nvtx[2].domain_id) == model::kGpuUserAnnotationDomain);

  REQUIRE(rank.nccl_ops.size() == 1);
  const auto& op = rank.nccl_ops[0];
  CHECK(rank.name(op.func_id) == "AllReduce");
  CHECK(op.kind == gpuxray::format::NcclOperationKind::kCollective);
  CHECK(op.bytes == 4000);
  CHECK(op.count == 1000);
  CHECK(op.comm_hash == load::processGroupHash("0"));
  CHECK(op.seq == 0);
  CHECK(rank.name(op.algorithm_id) == "RING");
  CHECK(rank.name(op.protocol_id) == "LL");
  CHECK(op.channels == 108);
  CHECK(op.enqueue_ns == 1'150'000);
  CHECK(op.gpu_start_ns == 1'200'000);
  // Only the NCCL process group this rank is in becomes a communicator; gloo's does not.
  REQUIRE(rank.communicators.size() == 1);
  CHECK(rank.communicators[0].name == "pg 0 (default_pg)");
  CHECK(rank.communicators[0].comm_rank == 1);
  CHECK(rank.communicators[0].nranks == 2);
  REQUIRE(rank.memory.size() == 1);
  CHECK(rank.memory[0].delta_bytes == 1048576);
}

TEST_CASE("kineto: gzip (one member or several) reads the same as plain text") {
  TempDir dir;
  std::string text = handMadeTrace();
  gpuxray::testing::writeText(dir.path() / "plain.json", text);
  gpuxray::testing::writeGzip(dir.path() / "one.json.gz", {text});
  size_t half = text.size() / 2;
  gpuxray::testing::writeGzip(dir.path() / "two.json.gz", {text.substr(0, half), text.substr(half)});
  std::vector<std::string> warnings;
  auto plain = import(dir / "plain.json", warnings);
  for (const char* name : {"one.json.gz", "two.json.gz"}) {
    INFO(name);
    std::vector<std::string> w;
    load::KinetoImportStats stats;
    auto zipped = import(dir / name, w, &stats);
    REQUIRE(w.size() == warnings.size());
    for (size_t i = 0; i < w.size(); ++i) CHECK(w[i].substr(w[i].find(": ")) == warnings[i].substr(warnings[i].find(": ")));
    CHECK(stats.json_bytes == text.size());
    CHECK(zipped.activities.size() == plain.activities.size());
    CHECK(zipped.nccl_ops.size() == plain.nccl_ops.size());
    CHECK(zipped.nvtx.size() == plain.nvtx.size());
  }
}

TEST_CASE("kineto: events cut across blocks, strings full of brackets and a value longer than a block") {
  TempDir dir;
  std::string long_name(5000, 'x');
  std::string text = R"({"traceEvents": [)";
  for (int i = 0; i < 50; ++i) {
    text += fmt::format(R"({}{{"ph": "X", "cat": "user_annotation", "name": "a{{b]c\"}}[{}", "ts": {}, "dur": 1}})",
                        i == 0 ? "" : ",", i == 25 ? long_name : std::to_string(i), i * 10);
  }
  text += R"(], "distributedInfo": {"rank": 3, "note": "}]"}})";
  gpuxray::testing::writeText(dir.path() / "t.json", text);
  load::ByteInput input(dir / "t.json");
  load::JsonEventSplitter splitter(input, 64);
  load::JsonEventSplitter::Piece piece;
  size_t events = 0;
  std::string member;
  while (splitter.next(piece)) {
    if (piece.kind == load::JsonEventSplitter::Piece::Kind::kEvents) {
      for (const auto& [from, to] : piece.events) {
        std::string_view event(piece.begin + from, to - from);
        CHECK(event.front() == '{');
        CHECK(event.back() == '}');
        ++events;
      }
    } else {
      member = piece.key + "=" + std::string(piece.begin, piece.end);
    }
  }
  CHECK(splitter.problem().empty());
  CHECK(events == 50);
  CHECK(member == R"(distributedInfo={"rank": 3, "note": "}]"})");

  std::vector<std::string> warnings;
  auto rank = import(dir / "t.json", warnings);
  CHECK(rank.nvtx.size() == 50);
  CHECK(rank.rank == 3);
  CHECK(rank.whole_microsecond_times);
}

TEST_CASE("kineto: malformed events are skipped and counted, the rest is used") {
  TempDir dir;
  std::string text = R"({"distributedInfo": {"rank": 0}, "traceEvents": [)" + launchEvent("10", 1) + "," +
                     kernelEvent("k1", "20", "5", 7, 1) + R"(, {"ph": "X", "cat": "kernel" "name": "broken"},
                     {"ph": "X", "cat": "kernel", "name": "bad\u00ZZ"}, 17, )" +
                     kernelEvent("k2", "40", "5", 7, 2) + "]}";
  gpuxray::testing::writeText(dir.path() / "t.json", text);
  std::vector<std::string> warnings;
  load::KinetoImportStats stats;
  auto rank = import(dir / "t.json", warnings, &stats);
  CHECK(stats.malformed == 3);
  CHECK(rank.activities.size() == 2);
  CHECK(anyContains(warnings, "t.json: 3 events are not valid JSON objects (the first at byte"));
}

TEST_CASE("kineto: a truncated file or gzip stream keeps the events before the cut") {
  TempDir dir;
  std::string text = handMadeTrace();
  size_t cut = text.find("\"Memset (Device)\"");
  gpuxray::testing::writeText(dir.path() / "cut.json", text.substr(0, cut));
  std::vector<std::string> warnings;
  load::KinetoImportStats stats;
  auto rank = import(dir / "cut.json", warnings, &stats);
  CHECK(stats.truncated);
  CHECK(rank.activities.size() == 3);  // gemm, all-reduce, memcpy
  REQUIRE(warnings.size() >= 1);
  CHECK(anyContains(warnings, "cut.json: the JSON ends early, inside traceEvents at byte"));

  gpuxray::testing::writeGzip(dir.path() / "full.json.gz", {text});
  std::string zipped = gpuxray::testing::readWholeFile(dir / "full.json.gz");
  gpuxray::testing::writeText(dir.path() / "cut.json.gz", zipped.substr(0, zipped.size() * 2 / 3));
  std::vector<std::string> gz_warnings;
  load::KinetoImportStats gz_stats;
  auto partial = import(dir / "cut.json.gz", gz_warnings, &gz_stats);
  CHECK(gz_stats.truncated);
  CHECK(anyContains(gz_warnings, "cut.json.gz: the gzip data is truncated"));
  CHECK(gz_stats.events > 0);
  CHECK(partial.rank == 1);
}

TEST_CASE("kineto: events without the fields needed are counted; files that are no trace are refused") {
  TempDir dir;
  std::string text = R"({"traceEvents": [)" + kernelEvent("k1", "20", "5", 7, 1) +
                     R"(, {"ph": "X", "cat": "kernel", "name": "no time", "args": {"stream": 7}},
                        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy", "ts": 5, "dur": 1, "args": {}}]})";
  gpuxray::testing::writeText(dir.path() / "t.json", text);
  std::vector<std::string> warnings;
  load::KinetoImportStats stats;
  auto rank = import(dir / "t.json", warnings, &stats);
  CHECK(stats.missing_fields == 2);
  CHECK(rank.activities.size() == 1);
  CHECK(anyContains(warnings, "t.json: 2 events lack a field gpuxray needs"));
  CHECK(rank.rank == -1);

  gpuxray::testing::writeText(dir.path() / "garbage.json", "this is not json");
  CHECK_THROWS_WITH(import(dir / "garbage.json", warnings),
                    Catch::Contains("garbage.json: not a JSON trace: it starts with 't'"));
  gpuxray::testing::writeText(dir.path() / "empty.json", "");
  CHECK_THROWS_WITH(import(dir / "empty.json", warnings), Catch::Contains("empty.json: the file is empty"));
  gpuxray::testing::writeText(dir.path() / "other.json", R"({"name": "package.json", "version": "1.0"})");
  CHECK_THROWS_WITH(import(dir / "other.json", warnings), Catch::Contains("other.json: no traceEvents"));
  // A bare array of events is a Chrome trace too.
  gpuxray::testing::writeText(dir.path() / "bare.json", "[" + kernelEvent("k", "1", "1", 7, 1) + "]");
  CHECK(import(dir / "bare.json", warnings).activities.size() == 1);
}

TEST_CASE("kineto: a run's ranks: from the file name without distributedInfo, the first of duplicates kept") {
  TempDir dir;
  auto trace = [](int rank) {
    std::string info = rank >= 0 ? fmt::format(R"("distributedInfo": {{"rank": {}, "world_size": 4}}, )", rank) : "";
    return "{" + info + R"("traceEvents": [)" + kernelEvent("k", "10", "5", 7, 1) + "]}";
  };
  gpuxray::testing::writeText(dir.path() / "run" / "a_rank-0.json", trace(0));
  gpuxray::testing::writeText(dir.path() / "run" / "b_rank-0.json", trace(0));
  gpuxray::testing::writeText(dir.path() / "run" / "worker_rank-2.json", trace(-1));
  gpuxray::testing::writeText(dir.path() / "run" / "zz.json", trace(-1));
  auto run = load::loadRun({dir / "run"}, {});
  REQUIRE(run.ranks.size() == 3);
  CHECK(run.ranks[0].rank == 0);
  CHECK(run.ranks[0].path.ends_with("a_rank-0.json"));
  CHECK(run.ranks[1].rank == 1);
  CHECK(run.ranks[1].path.ends_with("zz.json"));
  CHECK(run.ranks[2].rank == 2);
  CHECK(anyContains(run.warnings, "b_rank-0.json: rank 0 is also in"));
  CHECK(anyContains(run.warnings, "worker_rank-2.json: no rank in the trace (no distributedInfo); taken as rank 2, taken from the file name"));
  CHECK(anyContains(run.warnings, "zz.json: no rank in the trace (no distributedInfo); taken as rank 1, the first rank free"));
  CHECK(anyContains(run.warnings, "1 of 4 ranks have no file (rank 3)"));
}

TEST_CASE("kineto: times are kept to the nanosecond the text gives") {
  CHECK(load::microsecondsOfDouble(4458676522690.655).ns == 4458676522690655);
  CHECK(load::microsecondsOfDouble(1365627862757.064).ns == 1365627862757064);
  CHECK(load::microsecondsOfDouble(0.001).ns == 1);
  CHECK(static_cast<double>(load::microsecondsOfDouble(7812345678901.239).ns) / 1000.0 == 7812345678901.239);
}

TEST_CASE("kineto: NCCL kernel names, PyTorch collective names, dtypes and rank lists") {
  auto old_name = load::parseNcclKernelName("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)");
  CHECK(old_name.function == "AllReduce");
  CHECK(old_name.algorithm == "RING");
  CHECK(old_name.protocol == "LL");
  auto new_name = load::parseNcclKernelName("ncclDevKernel_ReduceScatter_Sum_bf16_NVLS_TREE_SIMPLE(ncclDevKernelArgsStorage<4096ul>)");
  CHECK(new_name.function == "ReduceScatter");
  CHECK(new_name.algorithm == "NVLS_TREE");
  CHECK(new_name.protocol == "SIMPLE");
  auto gather = load::parseNcclKernelName("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)");
  CHECK(gather.algorithm == "RING");
  CHECK(gather.protocol == "LL");
  CHECK(load::parseNcclKernelName("ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)").function == "Generic");
  CHECK(load::parseNcclKernelName("void gemm()").function.empty());
  CHECK(model::isCommunicationKernel("ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)"));
  CHECK(model::isCommunicationKernel("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)"));

  CHECK(load::ncclFunctionOfCollective("allreduce") == "AllReduce");
  CHECK(load::ncclFunctionOfCollective("_allgather_base") == "AllGather");
  CHECK(load::ncclFunctionOfCollective("reduce_scatter_tensor_coalesced") == "ReduceScatter");
  CHECK(load::ncclFunctionOfCollective("all_to_all") == "AlltoAll");
  CHECK(load::ncclFunctionOfCollective("broadcast") == "Broadcast");
  CHECK(load::ncclFunctionOfCollective("reduce") == "Reduce");
  CHECK(load::ncclFunctionOfCollective("send") == "Send");
  CHECK(load::ncclFunctionOfCollective("recv") == "Recv");
  CHECK(load::ncclFunctionOfCollective("gather") == "Gather");
  CHECK(load::ncclFunctionOfCollective("nonsense").empty());

  CHECK(load::dtypeSize("Float") == 4);
  CHECK(load::dtypeSize("BFloat16") == 2);
  CHECK(load::dtypeSize("c10::Half") == 2);
  CHECK(load::dtypeSize("Float8_e4m3fn") == 1);
  CHECK(load::dtypeSize("Long") == 8);
  CHECK(load::dtypeSize("Int") == 4);
  CHECK(load::dtypeSize("ComplexFloat") == 8);
  CHECK(load::dtypeSize("what") == 0);
  CHECK(load::parseRankList("[0, 1, 12]") == std::vector<int32_t>{0, 1, 12});
  CHECK(load::parseRankList("[]").empty());
}
