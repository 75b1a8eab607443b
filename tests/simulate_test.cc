#include <catch2/catch.hpp>
#include <fmt/core.h>

#include <cmath>
#include <fstream>
#include <map>

#include "analyzer/errors.h"
#include "analyzer/load/run_loader.h"
#include "analyzer/simulate/cost_model.h"
#include "analyzer/simulate/engine.h"
#include "analyzer/simulate/input_files.h"
#include "analyzer/simulate/layout.h"
#include "analyzer/simulate/planner.h"
#include "analyzer/simulate/presets.h"
#include "analyzer/simulate/schedule.h"
#include "analyzer/simulate/trace_generation.h"
#include "tests/support/pipeline_bubble.h"
#include "tests/support/published_runs.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace {

using namespace gpuxray;
using namespace gpuxray::simulate;
using gpuxray::testing::TempDir;

void writeFile(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// A pipeline whose stages do the same work and whose communication costs nothing: 16 layers per
// model chunk, a vocabulary small enough that the output layer is negligible.
SimulationInputs balancedPipeline(int pp, int m, Schedule schedule, int chunks) {
  SimulationInputs in;
  in.model = {"balanced", 16 * pp * chunks, 1024, 16, 1024, 8, 0, 0, 0};
  in.cluster = *clusterPreset("dgx-h100");
  in.cluster.nodes = 1;
  in.cluster.gpu.nvlink_bandwidth = 1e18;
  in.cluster.nvlink_latency_s = 0;
  in.strategy.pp = pp;
  in.strategy.micro_batches = m;
  in.strategy.schedule = schedule;
  in.strategy.chunks = chunks;
  in.steps = 2;
  in.run_id = "balanced";
  return in;
}

model::RunTrace simulateAndLoad(const SimulationInputs& in, const std::string& dir) {
  validate(in);
  CostModel cost(in);
  Layout layout(in);
  Timeline timeline(cost, layout);
  GenerationOptions options;
  options.directory = dir;
  options.threads = 2;
  writeTraces(cost, layout, timeline, options);
  load::LoadOptions load_options;
  load_options.threads = 2;
  return load::loadRun({dir}, load_options);
}

std::string errorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("simulate: by construction, the measured 1F1B and GPipe bubble is (p-1)/(m+p-1)") {
  for (Schedule schedule : {Schedule::kOneFOneB, Schedule::kGpipe}) {
    for (auto [p, m] : std::vector<std::pair<int, int>>{{2, 4}, {4, 8}, {4, 16}, {8, 16}}) {
      TempDir dir;
      model::RunTrace run = simulateAndLoad(balancedPipeline(p, m, schedule, 1), dir.path().string());
      const double expected = 100.0 * (p - 1) / (m + p - 1);
      for (int step = 0; step < 2; ++step) {
        const double measured = gpuxray::testing::measuredBubblePct(run.ranks.front(), step);
        INFO(fmt::format("{} p={} m={} step {}: measured {:.3f} %, expected {:.3f} %", scheduleName(schedule), p, m,
                         step, measured, expected));
        CHECK(std::fabs(measured - expected) < 0.5);
      }
    }
  }
}

TEST_CASE("simulate: by construction, the measured interleaved bubble is (p-1)/(v m+p-1)") {
  for (auto [p, m, v] : std::vector<std::tuple<int, int, int>>{{2, 4, 2}, {4, 8, 2}, {4, 8, 4}, {4, 16, 3}}) {
    TempDir dir;
    model::RunTrace run = simulateAndLoad(balancedPipeline(p, m, Schedule::kInterleaved, v), dir.path().string());
    const double expected = 100.0 * (p - 1) / (v * m + p - 1);
    const double measured = gpuxray::testing::measuredBubblePct(run.ranks.front(), 1);
    INFO(fmt::format("interleaved p={} m={} v={}: measured {:.3f} %, expected {:.3f} %", p, m, v, measured, expected));
    CHECK(std::fabs(measured - expected) < 0.5);
  }
}

TEST_CASE("simulate: schedules run every forward and backward once, in a valid order") {
  StrategySpec s;
  s.pp = 4, s.micro_batches = 8;
  for (auto [schedule, chunks] : std::vector<std::pair<Schedule, int>>{
           {Schedule::kGpipe, 1}, {Schedule::kOneFOneB, 1}, {Schedule::kInterleaved, 2}}) {
    s.schedule = schedule, s.chunks = chunks;
    for (int stage = 0; stage < s.pp; ++stage) {
      auto order = stageOrder(s, stage);
      REQUIRE(order.size() == static_cast<size_t>(2 * s.micro_batches * chunks));
      std::map<std::tuple<bool, int, int>, int> seen;
      for (const auto& b : order) {
        ++seen[{b.forward, b.micro_batch, b.chunk}];
        if (!b.forward) CHECK(seen.count({true, b.micro_batch, b.chunk}) == 1);  // backward after its forward
      }
      CHECK(seen.size() == order.size());
    }
    if (schedule == Schedule::kOneFOneB) {
      CHECK(peakActivationsInFlight(stageOrder(s, 0)) == 4);  // p micro-batches on the first stage
      CHECK(peakActivationsInFlight(stageOrder(s, 3)) == 1);
    }
    if (schedule == Schedule::kGpipe) CHECK(peakActivationsInFlight(stageOrder(s, 0)) == 8);
  }
}

TEST_CASE("simulate: predictions match published Megatron-LM runs within 15 %, with one set of efficiencies") {
  for (const auto& run : gpuxray::testing::publishedRuns()) {
    validate(run.inputs);
    CostModel cost(run.inputs);
    cost.checkMemoryFits();
    Layout layout(run.inputs);
    Prediction p = Timeline(cost, layout).predict();
    const double predicted =
        run.is_tflops ? gpuxray::testing::narayananTflopsPerGpu(run.inputs, p.step_seconds) : p.step_seconds;
    INFO(fmt::format("{} ({}): predicted {:.2f}, published {:.2f}", run.label, run.source, predicted, run.published));
    CHECK(std::fabs(predicted / run.published - 1) < 0.15);
  }
}

TEST_CASE("simulate: the same seed gives the same files, another seed other jitter") {
  SimulationInputs in = runPreset("demo")->inputs;
  in.steps = 2;
  TempDir a, b, c;
  simulateAndLoad(in, a.path().string());
  simulateAndLoad(in, b.path().string());
  in.seed = 2;
  simulateAndLoad(in, c.path().string());
  for (const char* file : {"rank-00000.gpuxray", "rank-00011.gpuxray"}) {
    std::string first = gpuxray::testing::readWholeFile(a / file);
    CHECK(!first.empty());
    CHECK(first == gpuxray::testing::readWholeFile(b / file));
    CHECK(first != gpuxray::testing::readWholeFile(c / file));
  }
}

TEST_CASE("simulate: a slow NIC shows in its transfers, a straggler in its kernels and its peers' waits") {
  TempDir dir;
  SimulationInputs in = runPreset("demo")->inputs;  // node-00's NIC 3 at half speed
  in.perturbations.jitter_pct = 0;
  in.steps = 2;
  model::RunTrace run = simulateAndLoad(in, dir.path().string());
  auto throughput = [&](int rank) {  // bytes per ns its NIC needed
    double bytes = 0, ns = 0, waited = 0;
    for (const auto& t : run.ranks[static_cast<size_t>(rank)].transfers) {
      bytes += static_cast<double>(t.bytes);
      ns += static_cast<double>(t.wait_network_ns);
      waited += static_cast<double>(t.end_ns - t.start_ns);
    }
    REQUIRE(ns > 0);
    return std::make_pair(bytes / ns, bytes / waited);
  };
  auto [slow_nic, slow_wall] = throughput(3);  // node-00, local rank 3
  auto [fast_nic, fast_wall] = throughput(2);
  CHECK(slow_nic / fast_nic == Approx(0.5).epsilon(0.01));
  CHECK(slow_wall / fast_wall < 0.6);
  auto [peer_nic, peer_wall] = throughput(11);  // rank 3's pipeline peer on node-01 waits for it
  CHECK(peer_nic == Approx(fast_nic).epsilon(0.01));
  CHECK(peer_wall / fast_wall < 0.6);

  TempDir straggler_dir;
  in.perturbations = {};
  in.perturbations.stragglers.push_back({1, 1.5});
  run = simulateAndLoad(in, straggler_dir.path().string());
  auto sums = [&](int rank) {
    const auto& r = run.ranks[static_cast<size_t>(rank)];
    double compute = 0, communication = 0;
    for (const auto& a : r.activities) {
      if (a.kind == model::ActivityKind::kCompute) compute += static_cast<double>(a.duration());
      else if (r.streams[a.stream].stream == 13) communication += static_cast<double>(a.duration());
    }
    return std::make_pair(compute, communication);
  };
  auto [slow_compute, slow_wait] = sums(1);
  auto [peer_compute, peer_wait] = sums(0);  // rank 1's tensor-parallel peer
  CHECK(slow_compute / peer_compute == Approx(1.5).epsilon(0.01));
  CHECK(peer_wait > 2 * slow_wait);
}

TEST_CASE("simulate: collectives carry the same (communicator, seq) everywhere and sends pair with receives") {
  TempDir dir;
  model::RunTrace run = simulateAndLoad(runPreset("demo")->inputs, dir.path().string());
  std::map<std::pair<uint64_t, uint64_t>, std::vector<std::pair<std::string, uint64_t>>> collectives;
  std::map<uint64_t, int> members;
  std::map<std::tuple<uint64_t, int, int>, std::vector<std::pair<uint64_t, int64_t>>> sends, receives;
  for (const auto& rank : run.ranks) {
    for (const auto& c : rank.communicators) {
      members[c.comm_hash] = c.nranks;
      for (const auto& op : rank.nccl_ops) {
        if (op.comm_hash != c.comm_hash) continue;
        if (op.kind == format::NcclOperationKind::kCollective) {
          collectives[{op.comm_hash, op.seq}].emplace_back(std::string(rank.name(op.func_id)), op.bytes);
        } else {
          bool send = op.kind == format::NcclOperationKind::kSend;
          auto key = send ? std::make_tuple(op.comm_hash, c.comm_rank, op.peer) : std::make_tuple(op.comm_hash, op.peer, c.comm_rank);
          (send ? sends : receives)[key].emplace_back(op.bytes, op.gpu_end_ns);
        }
      }
    }
  }
  REQUIRE(!collectives.empty());
  for (const auto& [key, ops] : collectives) {
    CHECK(static_cast<int>(ops.size()) == members[key.first]);
    for (const auto& op : ops) CHECK(op == ops.front());
  }
  REQUIRE(!sends.empty());
  CHECK(sends.size() == receives.size());
  for (const auto& [key, list] : sends) CHECK(list == receives[key]);
}

TEST_CASE("simulate: inputs from JSON and YAML files, presets and overrides") {
  TempDir dir;
  writeFile(dir / "model.json", R"({"preset": "gpt-1.3b", "layers": 12, "name": "half"})");
  std::string source;
  ModelSpec model = loadModel(dir / "model.json", source);
  CHECK(model.layers == 12);
  CHECK(model.hidden == 2048);
  CHECK(source == dir / "model.json");
  writeFile(dir / "run.yaml", R"(model: gpt-350m
cluster:
  preset: dgx-h100
  nodes: 2
  nic_gbps: 200
  efficiency: {gemm: 0.6}
strategy:
  tp: 2
  pp: 2
  dp: 4
  global_batch: 32
  schedule: interleaved
  chunks: 2
  recompute: selective
  distributed_optimizer: true
perturbations:
  slow_links: ["node-01:2=0.25"]
  stragglers: ["5=1.2"]
  jitter_pct: 3
steps: 2
seed: 7
)");
  SimulationInputs in = loadConfig(dir / "run.yaml");
  CHECK(in.model.name == "gpt-350m");
  CHECK(in.cluster.nodes == 2);
  CHECK(in.cluster.nic_bandwidth == Approx(25e9));
  CHECK(in.cluster.efficiency.gemm == Approx(0.6));
  CHECK(in.strategy.micro_batches == 8);  // 32 sequences over micro-batches of 1 and DP4
  CHECK(in.strategy.schedule == Schedule::kInterleaved);
  CHECK(in.strategy.zero_stage == 1);
  CHECK(in.perturbations.slow_links.at(0).host == "node-01");
  CHECK(in.perturbations.slow_links.at(0).nic == 2);
  CHECK(in.perturbations.stragglers.at(0).factor == Approx(1.2));
  CHECK(in.seed == 7);
  CHECK_NOTHROW(validate(in));
}

TEST_CASE("simulate: bad input gets one precise line naming the file and the field") {
  TempDir dir;
  writeFile(dir / "model.json", R"({"layers": 2, "hiden": 5})");
  std::string source;
  CHECK(errorOf([&] { loadModel(dir / "model.json", source); }) == dir / "model.json" + ": hiden: unknown field");
  writeFile(dir / "run.yaml", "model:\n  preset: gpt-350m\n  heads: many\ncluster: dgx-h100\n");
  CHECK(errorOf([&] { loadConfig(dir / "run.yaml"); }) ==
        dir / "run.yaml" + ": model.heads: expected an integer >= 1, got \"many\"");
  writeFile(dir / "broken.yaml", "model: [gpt\ncluster: x\n");
  CHECK(errorOf([&] { loadConfig(dir / "broken.yaml"); }).starts_with(dir / "broken.yaml" + ":"));
  CHECK(errorOf([&] { loadConfig(dir / "broken.yaml"); }).find("not valid YAML") != std::string::npos);
  writeFile(dir / "strategy.json", R"({"tp": 2, "schedule": "zigzag"})");
  CHECK(errorOf([&] { loadStrategy(dir / "strategy.json"); }) ==
        dir / "strategy.json" + ": schedule: expected gpipe, 1f1b or interleaved, got \"zigzag\"");
  CHECK(errorOf([&] { parseSlowLink("node-01:x=0.5"); }).find("HOST:NIC=FACTOR") != std::string::npos);
  CHECK(errorOf([&] { parseStraggler("3=-1"); }).find("RANK=FACTOR") != std::string::npos);

  SimulationInputs in = runPreset("demo")->inputs;
  in.strategy.tp = 3;
  CHECK(errorOf([&] { validate(in); }).starts_with("strategy.tp = 3 does not divide model.heads = 16"));
  in = runPreset("demo")->inputs;
  in.strategy.dp = 8;
  CHECK(errorOf([&] { validate(in); }).starts_with("the strategy needs 32 GPUs (TP2 x PP2 x DP8) but the cluster has 16"));
  in = runPreset("demo")->inputs;
  in.perturbations.slow_links = {{"node-07", 0, 0.5}};
  CHECK(errorOf([&] { validate(in); }).starts_with("slow link node-07:0: no such host"));
  in = runPreset("demo")->inputs;
  in.strategy.pp = 5;
  CHECK(errorOf([&] { validate(in); }).find("does not divide model.layers = 24") != std::string::npos);
  in = runPreset("demo")->inputs;
  in.model = *modelPreset("gpt3-175b");
  in.strategy = {};
  in.strategy.tp = 8;
  in.cluster.nodes = 1;
  validate(in);
  std::string memory = errorOf([&] { CostModel(in).checkMemoryFits(); });
  CHECK(memory.starts_with("the strategy does not fit in memory: pipeline stage 0 needs"));
  CHECK(memory.find("cluster.gpu.hbm_gib is 80.0") != std::string::npos);
}

TEST_CASE("plan: ranks every strategy that fits, fastest first") {
  ClusterSpec cluster = *clusterPreset("dgx-h100");
  PlanOptions options;
  options.gpus = 16;
  options.global_batch = 64;
  PlanResult result = plan(*modelPreset("gpt-1.3b"), cluster, options);
  REQUIRE(result.ranked.size() > 10);
  CHECK(result.considered == result.ranked.size() + result.invalid + result.too_big);
  for (size_t i = 0; i < result.ranked.size(); ++i) {
    const auto& c = result.ranked[i];
    CHECK(c.strategy.world() == 16);
    CHECK(c.strategy.globalBatch() == 64);
    CHECK(c.prediction.memory_per_gpu <= cluster.gpu.hbm_bytes);
    if (i > 0) CHECK(result.ranked[i - 1].prediction.step_seconds <= c.prediction.step_seconds);
  }
  report::Table table = planTable(result, 5);
  CHECK(table.rows.size() == 5);
  CHECK(table.rows[0][1].text == result.ranked[0].strategy.label());
  // 1.3B on 16 GPUs: pure data parallelism beats deep pipelines.
  CHECK(result.ranked[0].strategy.pp <= 2);
}

TEST_CASE("cli: simulate the demo, analyze it; bad input exits 2 with the reason") {
  TempDir dir;
  const std::string gpuxray = GPUXRAY_BINARY;
  auto simulated = gpuxray::testing::runCommand(gpuxray + " simulate --preset demo --steps 2 -o " + dir / "demo");
  INFO(simulated.err);
  REQUIRE(simulated.exit_code == 0);
  CHECK(simulated.out.find("planted: node-00 NIC 3 at 50 % bandwidth") != std::string::npos);
  auto analyzed = gpuxray::testing::runCommand(gpuxray + " analyze --format json " + dir / "demo");
  REQUIRE(analyzed.exit_code == 0);
  CHECK(analyzed.out.find("\"run_id\": \"sim-demo\"") != std::string::npos);

  auto smaller = gpuxray::testing::runCommand(gpuxray + " simulate --preset demo --dp 2 -o " + dir / "demo");
  CHECK(smaller.exit_code == 2);
  CHECK(smaller.err.find(".gpuxray, which this run of 8 ranks would not overwrite") != std::string::npos);

  auto bad = gpuxray::testing::runCommand(gpuxray + " simulate --model gpt-1.3b --cluster dgx-h100 --tp 3 -o " +
                                          dir / "bad");
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("strategy.tp = 3 does not divide model.heads = 16") != std::string::npos);
  auto unknown = gpuxray::testing::runCommand(gpuxray + " simulate --preset nope -o " + dir / "bad");
  CHECK(unknown.exit_code == 1);
  CHECK(unknown.err.find("--preset 'nope': no such preset") != std::string::npos);

  auto planned = gpuxray::testing::runCommand(gpuxray + " plan --model gpt-1.3b --cluster dgx-h100 --gpus 16 "
                                              "--global-batch 64 --top 3 --format json");
  REQUIRE(planned.exit_code == 0);
  CHECK(planned.out.find("\"schema\": \"gpuxray.plan\"") != std::string::npos);
  CHECK(planned.out.find("\"step_time_ns\"") != std::string::npos);
}

TEST_CASE("simulate: MoE layers exchange tokens with all-to-alls inside the tensor-parallel group") {
  TempDir dir;
  SimulationInputs in = runPreset("moe-small")->inputs;
  in.steps = 1;
  model::RunTrace run = simulateAndLoad(in, dir.path().string());
  const auto& rank = run.ranks.front();
  std::map<std::string, int> funcs;
  for (const auto& op : rank.nccl_ops) ++funcs[std::string(rank.name(op.func_id))];
  // Per layer and micro-batch: dispatch and combine, forward and backward.
  CHECK(funcs["AlltoAll"] == 4 * in.model.layers * in.strategy.micro_batches);
  CostModel cost(in);
  CHECK(cost.modelFlopsPerStep() > CostModel([&] {
          SimulationInputs dense = in;
          dense.model.experts = dense.model.experts_per_token = 0;
          return dense;
        }()).modelFlopsPerStep());
  CHECK(in.model.parameters() > 4 * modelPreset("gpt-350m")->parameters());  // 8 experts per MLP
}
