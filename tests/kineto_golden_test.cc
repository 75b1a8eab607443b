// gpuxray's own analyses on the real PyTorch-profiler traces in ../shared/traces: the steps, the
// collectives with their sizes and bandwidth, the communicators, and the CLI around them (analyze,
// info and convert on a directory of traces). Skipped when the traces are not next to the project
// (failed under CI: tests/support/kineto_traces.h).

#include <catch2/catch.hpp>
#include <string>

#include "analyzer/analysis/session.h"
#include "analyzer/load/kineto_collectives.h"
#include "analyzer/load/run_loader.h"
#include "tests/support/build_outputs.h"
#include "tests/support/kineto_traces.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace {

namespace analysis = gpuxray::analysis;
namespace report = gpuxray::report;
using gpuxray::testing::TempDir;

// Through the session on the ranks' own clocks (the figures compared are HTA's, per rank).
struct Analyzed {
  explicit Analyzed(analysis::SessionOptions options)
      : session(options), run(session.run()), input(session.input()), report(session.analyze()) {
    options.keep_events = false;  // as the command runs it: each rank digested as it is read
    REQUIRE(report::renderJson(analysis::Session(options).analyze()) == report::renderJson(report));
  }
  analysis::Session session;
  const gpuxray::model::RunTrace& run;
  const analysis::AnalysisInput& input;
  report::Report report;
};

std::unique_ptr<Analyzed> analyzeShared(const std::string& name) {
  auto dir = gpuxray::testing::sharedTraces(name);
  if (!dir) return nullptr;
  analysis::SessionOptions options;
  options.paths = {dir->string()};
  options.align = false;
  return std::make_unique<Analyzed>(options);
}

const report::Table& table(const report::Report& r, const std::string& section, const std::string& id) {
  for (const auto& s : r.sections) {
    if (s.id != section) continue;
    for (const auto& t : s.tables) {
      if (t.id == id) return t;
    }
  }
  FAIL("no table " << section << "/" << id);
  throw;
}

const report::Cell& cell(const report::Table& t, size_t row, const std::string& key) {
  for (size_t c = 0; c < t.columns.size(); ++c) {
    if (t.columns[c].key == key) return t.rows.at(row).at(c);
  }
  FAIL("no column " << key);
  throw;
}

// sharedTraces() has warned (or failed, under CI) when the traces are not there.
#define SKIP_WITHOUT(analyzed, name) \
  if (!(analyzed)) return

}  // namespace

TEST_CASE("kineto golden: nccl_data has three steps, 15 all-reduces and 6 broadcasts on the default group") {
  auto a = analyzeShared("hta_nccl_data_rank0_of2");
  SKIP_WITHOUT(a, "hta_nccl_data_rank0_of2");
  REQUIRE(a->run.ranks.size() == 1);
  const auto& rank = a->run.ranks[0];
  CHECK(a->run.world_size == 2);
  CHECK(a->input.step_source == "NVTX ranges ProfilerStep#N");
  REQUIRE(a->input.steps[0].size() == 3);
  CHECK(a->input.steps[0][0].number == 4);
  CHECK(a->input.steps[0][2].number == 6);
  size_t all_reduce = 0, broadcast = 0;
  for (const auto& op : rank.nccl_ops) {
    if (rank.name(op.func_id) == "AllReduce") ++all_reduce;
    if (rank.name(op.func_id) == "Broadcast") ++broadcast;
    CHECK(op.comm_hash == gpuxray::load::processGroupHash("0"));
    CHECK(rank.name(op.algorithm_id) == "RING");
    CHECK(rank.name(op.protocol_id) == "LL");
  }
  CHECK(all_reduce == 15);
  CHECK(broadcast == 6);
  REQUIRE(rank.communicators.size() == 1);
  CHECK(rank.communicators[0].name == "pg 0 (default_pg)");
  CHECK(rank.communicators[0].nranks == 2);

  // The first all-reduce of 6,637,568 floats: the fourth all-reduce, 2,160.803 µs on the GPU.
  auto first = std::find_if(rank.nccl_ops.begin(), rank.nccl_ops.end(), [](const auto& op) { return op.count == 6637568; });
  REQUIRE(first != rank.nccl_ops.end());
  CHECK(rank.name(first->func_id) == "AllReduce");
  CHECK(first->bytes == 6637568ull * 4);
  CHECK(first->seq == 3);
  CHECK(first->gpu_end_ns - first->gpu_start_ns == 2'160'803);

  const auto& ops = table(a->report, "collective_bandwidth", "operations");
  REQUIRE(ops.rows.size() == 7);  // 5 all-reduce sizes, 2 broadcast sizes
  // The costliest: 3 all-reduces of 2,049,000 floats (8,196,000 B); busbw = algbw for 2 ranks.
  CHECK(cell(ops, 0, "operation").text == "AllReduce");
  CHECK(cell(ops, 0, "bytes").number == 8'196'000);
  CHECK(cell(ops, 0, "count").number == 3);
  double median_ns = cell(ops, 0, "median").number;
  CHECK(cell(ops, 0, "algbw").number == Approx(8'196'000 / (median_ns * 1e-9)));
  CHECK(cell(ops, 0, "busbw").number == Approx(cell(ops, 0, "algbw").number));
}

TEST_CASE("kineto golden: the B200 trace's one all-gather, named the NCCL 2.27 way, with its bus bandwidth") {
  auto a = analyzeShared("tracelens_b200_rank0_of8");
  SKIP_WITHOUT(a, "tracelens_b200_rank0_of8");
  const auto& rank = a->run.ranks.at(0);
  REQUIRE(rank.nccl_ops.size() == 1);
  const auto& op = rank.nccl_ops[0];
  CHECK(rank.name(op.func_id) == "AllGather");
  CHECK(op.count == 25136);
  CHECK(op.bytes == 25136 * 2);  // bf16, per rank
  CHECK(rank.name(op.datatype_id) == "BFloat16");
  CHECK(op.gpu_end_ns - op.gpu_start_ns == 21'953);
  CHECK(a->input.step_source == "none");  // no ProfilerStep, a single collective: no steps
  const auto& ops = table(a->report, "collective_bandwidth", "operations");
  REQUIRE(ops.rows.size() == 1);
  CHECK(cell(ops, 0, "communicator").text == "pg 3 (data, 8 ranks)");
  // nccl-tests: all-gather size = 8 x 50,272 B, busbw = algbw x 7/8.
  double algbw = 8 * 50'272 / 21.953e-6;
  CHECK(cell(ops, 0, "algbw").number == Approx(algbw));
  CHECK(cell(ops, 0, "busbw").number == Approx(algbw * 7 / 8));
  REQUIRE(rank.header.devices.size() == 8);
  CHECK(rank.header.devices[0].name == "NVIDIA B200");
  CHECK(rank.header.devices[0].sm_count == 148);
}

TEST_CASE(
    "kineto golden: the sampled 2-rank set has two steps and ten send/recv kernels per rank, sized from Input Dims") {
  auto a = analyzeShared("hta_sampled_2rank");
  SKIP_WITHOUT(a, "hta_sampled_2rank");
  REQUIRE(a->run.ranks.size() == 2);
  CHECK(a->run.world_size == 128);
  for (size_t r = 0; r < 2; ++r) {
    const auto& rank = a->run.ranks[r];
    CHECK(rank.rank == static_cast<int>(r));
    CHECK(rank.whole_microsecond_times);
    REQUIRE(a->input.steps[r].size() == 2);
    CHECK(a->input.steps[r][0].number == 551);
    CHECK(a->input.steps[r][1].number == 552);
    CHECK(rank.nccl_ops.size() == 10);
    uint64_t bytes = 0;
    for (const auto& op : rank.nccl_ops) {
      CHECK(rank.name(op.func_id) == "SendRecv");
      bytes += op.bytes;
    }
    // PyTorch of early 2023: the kernels carry no collective arguments, and the record_param_comms
    // around their launches only "Input Dims"/"Input type" ([[384]] long = 3,072 B, [[419430400]]
    // unsigned char, [[2846720]] int); the TensorList ones record no shape.
    CHECK(bytes ==
          (r == 0 ? 3072ull + 2 * 419430400ull + 11386880ull : 339738624ull + 11386880ull + 3072ull + 394073856ull));
    for (const auto& c : rank.communicators) CHECK(c.name == "default group");
  }
  bool noted = false;
  for (const auto& s : a->report.sections) {
    for (const auto& note : s.notes) noted |= note.find("12 of 20 operations carry no size") != std::string::npos;
  }
  CHECK(noted);
}

TEST_CASE("kineto golden: analyze, info and convert on a directory of PyTorch-profiler traces") {
  auto dir = gpuxray::testing::sharedTraces("hta_nccl_data_rank0_of2");
  if (!dir) return;
  std::string gpuxray = gpuxray::testing::gpuxrayBinary();
  auto hta = gpuxray::testing::runCommand(gpuxray + " analyze --compat hta " + dir->string());
  INFO(hta.err);
  REQUIRE(hta.exit_code == 0);
  CHECK(hta.out.find("0  435,586  338,781      75,169          21,636  77.78 %  17.26 %       4.97 %") != std::string::npos);
  CHECK(hta.err.find("1 of 2 ranks have no file (rank 1)") == std::string::npos);  // warnings go in the report

  auto info = gpuxray::testing::runCommand(gpuxray + " info " + dir->string());
  CHECK(info.exit_code == 0);
  CHECK(info.out.find("rank      0 of 2, from distributedInfo") != std::string::npos);
  CHECK(info.out.find("nccl_operations 21") != std::string::npos);

  TempDir out;
  auto convert = gpuxray::testing::runCommand(gpuxray + " convert " + dir->string() + " -o " + (out / "native"));
  REQUIRE(convert.exit_code == 0);
  CHECK(convert.out.find("1 rank converted") != std::string::npos);
  auto again = gpuxray::testing::runCommand(gpuxray + " analyze --compat hta " + (out / "native"));
  CHECK(again.out.find("0  435,586  338,781      75,169          21,636  77.78 %  17.26 %       4.97 %") != std::string::npos);
  auto twice = gpuxray::testing::runCommand(gpuxray + " convert " + dir->string() + " -o " + (out / "native"));
  CHECK(twice.exit_code == 1);
  CHECK(twice.err.find("already holds gpuxray traces") != std::string::npos);

  auto bad = gpuxray::testing::runCommand(gpuxray + " analyze --compat tracelens " + dir->string());
  CHECK(bad.exit_code == 1);
  CHECK(bad.err.find("--compat 'tracelens'") != std::string::npos);
  auto lonely = gpuxray::testing::runCommand(gpuxray + " analyze --include-last-step " + dir->string());
  CHECK(lonely.exit_code == 1);
}
