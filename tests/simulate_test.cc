#include <catch2/catch.hpp>
#include <fmt/core.h>

#include <cmath>
#include <ctime>
#include <fstream>
#include <map>
#include <optional>

#include "analyzer/errors.h"
#include "analyzer/load/run_loader.h"
#include "analyzer/simulate/calibration.h"
#include "analyzer/simulate/cost_model.h"
#include "analyzer/simulate/engine.h"
#include "analyzer/simulate/fusion_report.h"
#include "analyzer/simulate/input_files.h"
#include "analyzer/simulate/layout.h"
#include "analyzer/simulate/planner.h"
#include "analyzer/simulate/presets.h"
#include "analyzer/simulate/schedule.h"
#include "analyzer/simulate/trace_generation.h"
#include "tests/support/build_outputs.h"
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

TEST_CASE("simulate: per-generation efficiency sets predict held-out published runs within the stated bounds") {
  struct Sum {
    double total = 0, worst = 0;
    int count = 0;
  };
  std::map<std::string, Sum> fit, held_out;
  for (const auto& run : gpuxray::testing::publishedRuns()) {
    validate(run.inputs);
    CostModel cost(run.inputs);
    // The runs did fit: the memory estimate must not be more than 5 % over the GPU's HBM (GPT-3
    // 175B with micro-batch 2 on H100 comes out at 80.0 GiB). Meta's 405B runs use their own
    // pipeline schedule and memory savings (Llama 3 paper, section 3.3.2); Megatron's interleaved
    // 1F1B, as simulated, would need recomputation to fit there, so only their times are compared.
    if (run.source.find("Llama 3 paper") == std::string::npos) {
      for (int stage = 0; stage < run.inputs.strategy.pp; ++stage)
        CHECK(static_cast<double>(cost.memory(stage).total()) <= 1.05 * static_cast<double>(run.inputs.cluster.gpu.hbm_bytes));
    }
    // Every row runs with its generation's set from efficiency_data.json.
    const auto calibration = calibrationFor(run.generation);
    REQUIRE(calibration);
    CHECK(run.inputs.cluster.efficiency.gemm == calibration->efficiency.gemm);
    CHECK(run.inputs.cluster.efficiency.attention == calibration->efficiency.attention);
    const double predicted = gpuxray::testing::predictedMeasure(run, gpuxray::testing::predictRun(run.inputs));
    const double error = 100 * std::fabs(predicted / run.published - 1);
    INFO(fmt::format("{} {} ({}): predicted {:.4g}, published {:.4g}", run.generation, run.label, run.source, predicted,
                     run.published));
    Sum& sum = (run.held_out ? held_out : fit)[run.generation];
    sum.total += error, sum.worst = std::max(sum.worst, error), ++sum.count;
    CHECK(error <= 20);
  }
  REQUIRE(fit.size() == 2);
  REQUIRE(held_out.size() == 2);
  for (const auto& [generation, sum] : fit) {
    INFO(generation << " fit: mean " << sum.total / sum.count << " %, worst " << sum.worst << " %");
    CHECK(sum.total / sum.count <= 5);
  }
  // docs/simulation.md and issue 19: held-out mean |error| <= 10 % and worst <= 20 % for each.
  const Sum& a100 = held_out.at("a100");
  const Sum& h100 = held_out.at("h100");
  CHECK(a100.count == 6);
  CHECK(h100.count == 6);
  CHECK(a100.total / a100.count <= 10);
  CHECK(a100.worst <= 20);
  CHECK(h100.total / h100.count <= 10);
  CHECK(h100.worst <= 20);
}

TEST_CASE("simulate: efficiency sets are data, one per GPU generation, and reach the presets") {
  const auto a100 = calibrationFor("a100"), h100 = calibrationFor("h100"), h200 = calibrationFor("h200");
  REQUIRE(a100);
  REQUIRE(h100);
  REQUIRE(h200);
  CHECK_FALSE(calibrationFor("v100"));
  CHECK(a100->efficiency.gemm != h100->efficiency.gemm);
  CHECK(clusterPreset("dgx-a100")->efficiency.gemm == a100->efficiency.gemm);
  CHECK(clusterPreset("dgx-h100")->efficiency.gemm_fp8 == h100->efficiency.gemm_fp8);
  CHECK(clusterPreset("dgx-h200")->efficiency.attention == h200->efficiency.attention);
  // H200 has no runs of its own: its uncertainty is stated, and larger than H100's.
  CHECK(h200->uncertainty_pct > h100->uncertainty_pct);
  CHECK(h200->basis.find("no published H200 run") != std::string::npos);
  // A cluster file that swaps the GPU takes that GPU's set, unless it gives its own factors.
  TempDir dir;
  writeFile(dir / "c.yaml", "preset: dgx-h100\ngpu: a100-80gb\n");
  std::string source;
  CHECK(loadCluster(dir / "c.yaml", source).efficiency.gemm == a100->efficiency.gemm);
  writeFile(dir / "d.yaml", "preset: dgx-h100\ngpu: a100-80gb\nefficiency: {gemm: 0.5}\n");
  CHECK(loadCluster(dir / "d.yaml", source).efficiency.gemm == 0.5);
  writeFile(dir / "e.yaml", "preset: dgx-h100\ngpu: {preset: h100-sxm, generation: b200}\n");
  CHECK(errorOf([&] { loadCluster(dir / "e.yaml", source); }) ==
        dir / "e.yaml" + ": gpu.generation: no efficiency set 'b200' (have a100, h100 or h200)");
}

TEST_CASE("simulate: Llama 3 shapes count their published parameters; GQA and SwiGLU change the work") {
  // Meta's model cards: 8.03B, 70.6B, 405.9B parameters (untied embeddings, 8 KV heads, SwiGLU).
  CHECK(std::fabs(static_cast<double>(modelPreset("llama3-8b")->parameters()) / 8.03e9 - 1) < 0.01);
  CHECK(std::fabs(static_cast<double>(modelPreset("llama3-70b")->parameters()) / 70.6e9 - 1) < 0.01);
  CHECK(std::fabs(static_cast<double>(modelPreset("llama3-405b")->parameters()) / 405.9e9 - 1) < 0.01);
  ModelSpec m = *modelPreset("llama3-8b");
  const uint64_t h = 4096, kv = 1024, f = 14336;
  // Q and O h x h, K and V h x kv, three MLP matrices, two norms, and the biases the formula keeps.
  CHECK(m.layerParameters() == 2 * h * h + 2 * h * kv + 2 * h + 2 * kv + 3 * h * f + 2 * f + h + 4 * h);
  CHECK(m.outputParameters() == 128256 * h);
  ModelSpec tied = m;
  tied.tie_embeddings = true;
  CHECK(tied.parameters() == m.parameters() - m.outputParameters());
  // Fewer KV heads: less QKV work and fewer activations; a gated MLP: more.
  SimulationInputs in;
  in.model = m;
  in.cluster = *clusterPreset("dgx-h100");
  in.cluster.nodes = 1;
  in.strategy.tp = 8;
  in.strategy.sequence_parallel = true;
  validate(in);
  SimulationInputs mha = in;
  mha.model.kv_heads = 32;
  SimulationInputs ungated = in;
  ungated.model.ffn_gated = false;
  CHECK(CostModel(in).activationBytesPerLayer() < CostModel(mha).activationBytesPerLayer());
  CHECK(CostModel(in).forward(0).flops < CostModel(mha).forward(0).flops);
  CHECK(CostModel(in).forward(0).flops > CostModel(ungated).forward(0).flops);
  // The model FLOPs: 3 x (2 x every matrix + 4 s h attention) per token and layer, plus the output layer.
  const double B = 1, s = 8192, l = 32, V = 128256;
  const double per_layer = 2.0 * h * (h + 2 * kv) + 2.0 * h * h + 2.0 * 3 * h * f + 4 * s * h;
  CHECK(CostModel(in).modelFlopsPerStep() == Approx(3 * B * s * (l * per_layer + 2.0 * h * V)));
  in.model.kv_heads = 5;
  CHECK(errorOf([&] { validate(in); }).starts_with("model.kv_heads = 5 does not divide model.heads = 32"));
}

TEST_CASE("simulate: context parallelism splits the sequence, rings K and V, and sits in the layout") {
  SimulationInputs in;
  in.model = *modelPreset("llama3-8b");
  in.model.sequence = 32768;
  in.cluster = *clusterPreset("dgx-h100");
  in.cluster.nodes = 2;
  in.strategy.tp = 2;
  in.strategy.dp = 2;
  in.strategy.sequence_parallel = true;
  in.strategy.micro_batches = 4;
  in.strategy.zero_stage = 1;
  SimulationInputs cp = in;
  cp.strategy.cp = 4;
  validate(cp);
  CHECK(cp.strategy.world() == 16);
  CHECK(cp.strategy.dataGroup() == 8);
  const CostModel plain(in), split(cp);
  // Activations per rank fall with the sequence share; attention FLOPs per rank by cp too.
  CHECK(split.activationBytesPerLayer() * 4 == Approx(plain.activationBytesPerLayer()).epsilon(0.001));
  CHECK(split.forward(0).flops * 4 == Approx(plain.forward(0).flops).epsilon(0.001));
  // The distributed optimizer shards over data x context: 8 ranks, not 2.
  CHECK(split.memory(0).optimizer * 4 == Approx(static_cast<double>(plain.memory(0).optimizer)).epsilon(0.001));
  // Megatron's order: tensor fastest, then context, then data, then pipeline.
  Layout layout(cp);
  CHECK(layout.members(CommunicatorKind::kContext, 0) == std::vector<int>{0, 2, 4, 6});
  CHECK(layout.members(CommunicatorKind::kContext, 9) == std::vector<int>{9, 11, 13, 15});
  CHECK(layout.members(CommunicatorKind::kData, 1) == std::vector<int>{1, 3, 5, 7, 9, 11, 13, 15});
  CHECK(layout.members(CommunicatorKind::kTensor, 6) == std::vector<int>{6, 7});
  CHECK(layout.communicator(CommunicatorKind::kContext, 13).comm_rank == 2);
  // The ring's exchange hides behind attention at long sequences; pulled across slow NICs it shows.
  Prediction fast = gpuxray::testing::predictRun(cp);
  SimulationInputs slow = cp;
  slow.cluster.gpu.nvlink_bandwidth = 1e9;
  CHECK(gpuxray::testing::predictRun(slow).step_seconds > fast.step_seconds);
  CHECK(fast.tokens_per_second == Approx(gpuxray::testing::predictRun(cp).tokens_per_second));
  // Bad input: cp that does not split the sequence in 2 x cp chunks, or more ranks than GPUs.
  cp.strategy.cp = 3;
  CHECK(errorOf([&] { validate(cp); }).starts_with("strategy.cp = 3: 2 x cp = 6 does not divide model.sequence = 32768"));
  cp.strategy.cp = 8;
  CHECK(errorOf([&] { validate(cp); }).starts_with("the strategy needs 32 GPUs (TP2 x CP8 x PP1 x DP2) but the cluster has 16"));
  cp.strategy.cp = 2;
  cp.strategy.flash_attention = false;
  CHECK(errorOf([&] { validate(cp); }).starts_with("strategy.cp = 2 needs strategy.flash_attention"));
  TempDir dir;
  writeFile(dir / "s.yaml", "tp: 2\ncp: 0\n");
  CHECK(errorOf([&] { loadStrategy(dir / "s.yaml"); }) == dir / "s.yaml" + ": cp: expected an integer >= 1, got 0");
  writeFile(dir / "t.yaml", "tp: 2\ncontext: 2\n");
  CHECK(errorOf([&] { loadStrategy(dir / "t.yaml"); }) == dir / "t.yaml" + ": context: unknown field");
}

TEST_CASE("simulate: FP8 GEMMs run at the FP8 peak where the GPU has one") {
  SimulationInputs in;
  in.model = *modelPreset("llama3-8b");
  in.cluster = *clusterPreset("dgx-h100");
  in.cluster.nodes = 1;
  in.strategy.dp = 8;
  in.strategy.zero_stage = 1;
  SimulationInputs fp8 = in;
  fp8.strategy.precision = Precision::kFp8;
  validate(fp8);
  const double bf16_s = gpuxray::testing::predictRun(in).step_seconds;
  const double fp8_s = gpuxray::testing::predictRun(fp8).step_seconds;
  CHECK(fp8_s < bf16_s);
  CHECK(fp8_s > bf16_s / 2);  // attention, the output layer and elementwise work stay bf16
  fp8.cluster = *clusterPreset("dgx-a100");
  fp8.cluster.nodes = 1;
  CHECK(errorOf([&] { validate(fp8); }).starts_with("strategy.precision = fp8 needs cluster.gpu.peak_fp8_tflops"));
  TempDir dir;
  writeFile(dir / "s.yaml", "precision: fp4\n");
  CHECK(errorOf([&] { loadStrategy(dir / "s.yaml"); }) == dir / "s.yaml" + ": precision: expected bf16 or fp8, got \"fp4\"");
}

TEST_CASE("plan: a Llama-3-405B-like config on thousands of H100s plans in seconds; TP8 PP16 DP64 fits") {
  TempDir dir;
  writeFile(dir / "l405.yaml",
            "name: llama3-405b-like\nlayers: 126\nhidden: 16384\nheads: 128\nkv_heads: 8\nffn_hidden: 53248\n"
            "ffn_gated: true\ntie_embeddings: false\nlearned_positions: false\nvocabulary: 128256\nsequence: 8192\n");
  std::string source;
  const ModelSpec model = loadModel(dir / "l405.yaml", source);
  SimulationInputs in;
  in.model = model;
  in.cluster = *clusterPreset("dgx-h100");
  in.cluster.nodes = 1024;
  StrategySpec& s = in.strategy;
  s.tp = 8, s.pp = 16, s.dp = 64;
  s.micro_batches = 32;
  s.schedule = Schedule::kInterleaved, s.chunks = 4;
  s.sequence_parallel = true;
  s.zero_stage = 1;  // the distributed optimizer
  validate(in);
  // 126 layers on 64 model chunks: one layer less on the first and the last.
  const CostModel uneven(in);
  CHECK(uneven.layersIn(0) == 1);
  CHECK(uneven.layersIn(1) == 2);
  CHECK(uneven.layersIn(63) == 1);
  // Without recomputation the first stage's 158 layer-micro-batches of activations do not fit;
  // with full recomputation they do.
  CHECK_THROWS_AS(uneven.checkMemoryFits(), InputError);
  s.recompute = Recompute::kFull;
  const CostModel recomputed(in);
  recomputed.checkMemoryFits();
  for (int stage = 0; stage < 16; ++stage) CHECK(recomputed.memory(stage).total() <= (80ull << 30));

  PlanOptions options;
  options.gpus = 8192;
  options.global_batch = 2048;
  const std::clock_t begin = std::clock();
  const PlanResult result = plan(model, *clusterPreset("dgx-h100"), options);
  const double cpu_seconds = static_cast<double>(std::clock() - begin) / CLOCKS_PER_SEC;
  INFO("plan took " << cpu_seconds << " s of CPU for " << result.considered << " strategies");
  CHECK(cpu_seconds <= 10);
  REQUIRE(!result.ranked.empty());
  bool has_cp = false;
  for (const auto& c : result.ranked) has_cp |= c.strategy.cp > 1;
  CHECK(has_cp);
  const report::Table memory = planMemoryTable(result, 3);
  REQUIRE(memory.rows.size() == 3);
  const MemoryUse& best = result.ranked[0].memory;
  CHECK(memory.rows[0][6].number == static_cast<double>(best.total()));
  CHECK(best.total() == best.weights + best.gradients + best.optimizer + best.activations + best.workspace);
  const report::Table misses = tooBigTable(result, 5, 80ull << 30);
  REQUIRE(!misses.rows.empty());
  CHECK(misses.rows[0][6].number > static_cast<double>(80ull << 30));
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
  in.strategy.pp = 7;  // 4 layers a stage would leave the last stage none; 5 stages of 5, 5, 5, 5, 4 are valid
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

  // The exposed communication splits into its tensor- and data-parallel parts; without TP the
  // tensor part is nothing, and with it some strategy waits on its TP collectives.
  bool tensor_exposed = false, data_exposed = false;
  for (const auto& c : result.ranked) {
    const auto& p = c.prediction;
    CHECK(p.exposed_tp_pct + p.exposed_dp_pct == Approx(p.exposed_comm_pct).margin(1e-9));
    CHECK(p.exposed_tp_pct >= 0);
    CHECK(p.exposed_dp_pct >= 0);
    if (c.strategy.tp == 1) CHECK(p.exposed_tp_pct == 0);
    tensor_exposed |= p.exposed_tp_pct > 0;
    data_exposed |= p.exposed_dp_pct > 0;
  }
  CHECK(tensor_exposed);
  CHECK(data_exposed);
  // The memory table carries the GPU's memory, what every row's total must fit in.
  CHECK(result.device_memory_bytes == cluster.gpu.hbm_bytes);
  report::Table memory = planMemoryTable(result, 5);
  REQUIRE(memory.columns.back().key == "device_bytes");
  for (const auto& row : memory.rows) {
    CHECK(row.back().number == Approx(static_cast<double>(cluster.gpu.hbm_bytes)));
    CHECK(row[row.size() - 2].number <= row.back().number);
  }
}

TEST_CASE("cli: simulate the demo, analyze it; bad input exits 2 with the reason") {
  TempDir dir;
  const std::string gpuxray = gpuxray::testing::gpuxrayBinary();
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

TEST_CASE("simulate: kernel fusion's HBM bytes for one layer follow the formulas, worked by hand") {
  // One GPT layer on one GPU: h 1024, 16 heads, s 1024, b 1, f 4096 (docs/simulation.md, "Kernel fusion").
  SimulationInputs in;
  in.model = {"one-layer", 1, 1024, 16, 1024, 8, 0, 0, 0};
  in.cluster = *clusterPreset("dgx-h100");
  in.cluster.nodes = 1;
  validate(in);
  const double Th = 1 << 20;  // T h = 1024 x 1024 elements
  auto bytesOf = [&](Fusion fusion) {
    SimulationInputs variant = in;
    variant.strategy.fusion = fusion;
    std::map<std::string, double> groups;
    for (const auto& t : CostModel(variant).layerTraffic()) groups[t.group] = t.bytes;
    return groups;
  };
  auto fused = bytesOf(Fusion::kDefault);
  // Norms: 2 x (4 + 6) bytes per element; bias-dropout-add 2 x (7 + 6); GeLU 4 + 6 per MLP element
  // (T f = 4 T h); flash attention: forward reads Q, K, V, writes O (8 T h), backward 16 T h.
  CHECK(fused["norms"] == 20 * Th);
  CHECK(fused["bias-dropout-add"] == 26 * Th);
  CHECK(fused["activation"] == 40 * Th);
  CHECK(fused["attention"] == 24 * Th);
  auto none = bytesOf(Fusion::kNone);
  // Unfused: norms 2 x (10 + 12); bias, dropout and residual add 2 x (15 + 13); bias + GeLU 8 + 8 per
  // MLP element; attention as two batched GEMMs, mask, softmax and dropout over a s^2 = 16 T h scores:
  // forward 8 T h + 17 per score, backward 8 T h + 25 per score.
  CHECK(none["norms"] == 44 * Th);
  CHECK(none["bias-dropout-add"] == 56 * Th);
  CHECK(none["activation"] == 64 * Th);
  CHECK(none["attention"] == 16 * Th + 42 * 16 * Th);
  CHECK(none["GEMMs"] == fused["GEMMs"]);
  auto all = bytesOf(Fusion::kAll);
  // Into the GEMMs: norms 2 x (2 + 6), bias-dropout-add 2 x (3 + 6), GeLU 2 + 2.
  CHECK(all["norms"] == 16 * Th);
  CHECK(all["bias-dropout-add"] == 18 * Th);
  CHECK(all["activation"] == 16 * Th);
}

TEST_CASE("simulate: --fusion none is slower than default by the extra bytes' share of the step") {
  // Elementwise-heavy: a narrow model, one GPU, attention without flash in both (so only the
  // elementwise kernels and the softmax change), everything memory bound above the 2 us floor.
  SimulationInputs in;
  in.model = {"narrow", 4, 1024, 16, 2048, 8, 0, 0, 0};
  in.cluster = *clusterPreset("dgx-h100");
  in.cluster.nodes = 1;
  in.strategy.flash_attention = false;
  in.strategy.micro_batches = 4;
  validate(in);
  const FusionComparison c = compareFusion(in, Fusion::kNone, Fusion::kDefault);
  REQUIRE(c.before_step_seconds > c.after_step_seconds);
  const double T = 2048, h = 1024, f = 4096, scores = 16 * T * T;
  const double per_layer = (44 - 20 + 56 - 26) * T * h + (16 - 10) * T * f + (8 - 4 + 10 - 6) * scores;
  const double final_norm = (10 - 4 + 12 - 6) * T * h;
  const auto& g = in.cluster.gpu;
  const double extra_seconds =
      (4 * per_layer + final_norm) * in.strategy.micro_batches / (g.hbm_bandwidth * in.cluster.efficiency.elementwise);
  CHECK(c.before_step_seconds - c.after_step_seconds == Approx(extra_seconds).epsilon(0.01));
  const report::Table table = fusionTable(c);
  REQUIRE(table.rows.size() == 6);
  CHECK(table.rows[0][0].text == "norms");
  CHECK(table.rows[0][2].number < table.rows[0][1].number);
}

TEST_CASE("simulate: TP-communication overlap hides what the GEMM beside it can, worked by hand") {
  // overlapTimes on 132 SMs (ns): a GEMM of G beside a collective of c.
  const int sms = 132;
  // Ring exchange, tp 4: 3 shard steps of c/3 = 200 against chunks of G/4 = 100: each step shows
  // 100, the GEMM keeps every SM (copy engines).
  OverlapTimes ring = overlapTimes({OverlapMethod::kRingExchange, 0, 1}, 400, 600, 4, sms);
  CHECK(ring.gemm_ns == 400);
  CHECK(ring.exposed_ns == 300);
  CHECK(ring.hidden_ns == 300);
  // Leaving 1 SM to the reduce-scatter's ring: the GEMM runs on 131 of 132, 262 -> 264.
  CHECK(overlapTimes({OverlapMethod::kRingExchange, 1, 1}, 262, 30, 4, sms).gemm_ns == 264);
  CHECK(overlapTimes({OverlapMethod::kRingExchange, 1, 1}, 262, 30, 4, sms).exposed_ns == 0);
  // Pipeline, 24 SMs, 4 splits: the GEMM on 108 SMs, 1080 -> 1320, in chunks of 330. A reduce-scatter
  // of 400 (chunks of 100) shows only its last chunk; one of 2000 (chunks of 500) shows the last chunk
  // and 3 x (500 - 330).
  OverlapTimes short_rs = overlapTimes({OverlapMethod::kPipeline, 24, 4}, 1080, 400, 4, sms);
  CHECK(short_rs.gemm_ns == 1320);
  CHECK(short_rs.exposed_ns == 100);
  CHECK(short_rs.hidden_ns == 300);
  OverlapTimes long_rs = overlapTimes({OverlapMethod::kPipeline, 24, 4}, 1080, 2000, 4, sms);
  CHECK(long_rs.exposed_ns == 500 + 3 * 170);
  // Bulk on 24 SMs: a collective of 660 takes 660 x 24/132 = 120 of SM time from a GEMM of 1080; one
  // of 2000 outlasts the GEMM on 108 SMs (1320) and shows 680.
  OverlapTimes bulk = overlapTimes({OverlapMethod::kBulk, 24, 1}, 1080, 660, 4, sms);
  CHECK(bulk.gemm_ns == 1200);
  CHECK(bulk.exposed_ns == 0);
  CHECK(bulk.hidden_ns == 660);
  OverlapTimes long_bulk = overlapTimes({OverlapMethod::kBulk, 24, 1}, 1080, 2000, 4, sms);
  CHECK(long_bulk.gemm_ns == 1320);
  CHECK(long_bulk.exposed_ns == 680);
  CHECK(overlapTimes({}, 1080, 2000, 4, sms).exposed_ns == 2000);  // blocking

  // One Llama 3 70B layer (h 8192, 8 KV heads: kv 1024, SwiGLU f 28672), TP4 with sequence
  // parallelism, micro-batch 1 of 8192 tokens, bf16 on H100 (989 TFLOP/s) at e_gemm 0.5.
  SimulationInputs in;
  in.model = *modelPreset("llama3-70b");
  in.cluster = *clusterPreset("dgx-h100");
  in.cluster.nodes = 1;
  in.cluster.efficiency.gemm = 0.5;
  in.strategy.tp = 4;
  in.strategy.dp = 2;
  in.strategy.sequence_parallel = true;
  // Every all-gather and reduce-scatter moves a shard of 8192 x 8192 x 2 / 4 = 33,554,432 bytes:
  // 3 x 3 us + 3 x 33,554,432 / (450 GB/s x 0.8) = 288.62 us. fc2's GEMM, 2 x 8192 x 28672 x 8192
  // / 4 FLOPs, takes 1945.55 us; QKV's, 2 x 8192 x 8192 x 10240 / 4, 694.84 us.
  auto layerGemms = [](const SimulationInputs& inputs, bool forward) {
    CostModel cost(inputs);
    const BlockProgram& program = forward ? cost.forward(0) : cost.backward(0);
    std::vector<std::pair<ProgramItem, ProgramItem>> gemms;  // (item before, GEMM) of the first layer
    for (size_t k = 1; k < program.items.size() && gemms.size() < 4; ++k) {
      const std::string& name = cost.shapes()[program.items[k].shape].name;
      if (!program.items[k].collective && name.find("xmma_gemm") != std::string::npos)
        gemms.emplace_back(program.items[k - 1], program.items[k]);
    }
    return gemms;
  };
  // Without overlap: fc2 then its reduce-scatter, blocking.
  auto plain = layerGemms(in, true);
  REQUIRE(plain.size() == 4);  // QKV, output projection, fc1, fc2
  CHECK(plain[3].second.duration_ns == Approx(1945546).margin(1));
  CHECK(plain[0].first.collective);  // QKV's all-gather before it
  CHECK(plain[0].first.duration_ns == Approx(288620).margin(1));
  CHECK(plain[0].first.hidden_ns == 0);
  // Pipeline: fc2 on 116 of 132 SMs, 1945.55 x 132/116 = 2213.90 us in 4 chunks of 553.47; the
  // reduce-scatter in 4 chunks of 72.16 us: only the last shows, 216.47 us hide.
  in.strategy.tp_comm_overlap = TpOverlap::kPipeline;
  auto pipeline = layerGemms(in, true);
  CHECK(pipeline[3].second.duration_ns == Approx(2213897).margin(2));
  CHECK(pipeline[3].first.collective);
  CHECK(pipeline[3].first.duration_ns == Approx(72155).margin(2));
  CHECK(pipeline[3].first.hidden_ns == Approx(216465).margin(2));
  // QKV's all-gather by ring exchange: steps of 96.21 us under chunks of 173.71 us: all hidden.
  CHECK(pipeline[0].first.duration_ns == 0);
  CHECK(pipeline[0].first.hidden_ns == Approx(288620).margin(1));
  CHECK(pipeline[0].second.duration_ns == plain[0].second.duration_ns);
  // Ring: fc2 leaves 1 SM, 1945.55 x 132/131 = 1960.40 us, and the steps hide.
  in.strategy.tp_comm_overlap = TpOverlap::kRing;
  auto ring_layer = layerGemms(in, true);
  CHECK(ring_layer[3].second.duration_ns == Approx(1960398).margin(2));
  CHECK(ring_layer[3].first.duration_ns == 0);
  // ... and a kernel adds the 4 partial shards TE's ring leaves: reads 4 x 33,554,432 bytes and
  // writes 33,554,432, 167,772,160 bytes at 3.35 TB/s x e_elementwise.
  {
    CostModel cost(in);
    const auto& items = cost.forward(0).items;
    size_t reduce = 0;
    for (size_t k = 0; k < items.size() && !reduce; ++k)
      if (!items[k].collective && cost.shapes()[items[k].shape].name == "reduce_bf16") reduce = k;
    REQUIRE(reduce > 0);
    CHECK(items[reduce].hbm_bytes == 167772160);
    CHECK(items[reduce].duration_ns ==
          Approx(167772160 / (3.35e12 * in.cluster.efficiency.elementwise) * 1e9).margin(1));
  }
  // Backward, QKV (the layer's last GEMMs): the input's all-gather again beside dgrad on 4 SMs,
  // 694.84 + 288.62 x 4/132 = 703.58 us; the input gradient's reduce-scatter beside wgrad on 24,
  // 694.84 + 288.62 x 24/132 = 747.31 us; nothing shows.
  in.strategy.tp_comm_overlap = TpOverlap::kPipeline;
  CostModel backward(in);
  const auto& items = backward.backward(0).items;
  const double qkv_flops = 2.0 * 8192 * 8192 * 10240 / 4;
  size_t wgrad = 0;  // the first [all-gather, dgrad, reduce-scatter, wgrad] of QKV's size
  for (size_t k = 3; k < items.size() && wgrad == 0; ++k)
    if (items[k - 1].collective && items[k - 3].collective && std::abs(items[k].flops - qkv_flops) < 1 &&
        std::abs(items[k - 2].flops - qkv_flops) < 1)
      wgrad = k;
  REQUIRE(wgrad > 0);
  CHECK(items[wgrad].duration_ns == Approx(747314).margin(2));
  CHECK(items[wgrad - 1].collective);
  CHECK(items[wgrad - 1].duration_ns == 0);
  CHECK(items[wgrad - 2].duration_ns == Approx(703584).margin(2));
  CHECK(items[wgrad - 3].collective);
  CHECK(items[wgrad - 3].hidden_ns == Approx(288620).margin(1));
  // FP8: the userbuffers all-gather FP8, half the bytes: 9 us + 3 x 16,777,216 / 360 GB/s = 148.81 us.
  in.strategy.precision = Precision::kFp8;
  CHECK(layerGemms(in, true)[0].first.hidden_ns == Approx(148810).margin(1));
  CHECK(layerGemms(in, true)[0].first.bytes == 16777216);

  // The whole step is faster with the overlap, and the trace shows the collective beside the GEMM.
  in.strategy.precision = Precision::kBf16;
  in.model.layers = 8;
  in.strategy.micro_batches = 2;
  SimulationInputs blocking = in;
  blocking.strategy.tp_comm_overlap = TpOverlap::kNone;
  CHECK(gpuxray::testing::predictRun(in).step_seconds < gpuxray::testing::predictRun(blocking).step_seconds);
  CHECK(gpuxray::testing::predictRun(in).exposed_comm_pct < gpuxray::testing::predictRun(blocking).exposed_comm_pct);

  // In the written trace the overlapped all-gathers run beside the forward GEMMs; blocking ones end
  // before them.
  auto gathersBesideForwardGemms = [](TpOverlap overlap) {
    SimulationInputs small;
    small.model = *modelPreset("llama3-8b");
    small.model.layers = 2;
    small.cluster = *clusterPreset("dgx-h100");
    small.cluster.nodes = 1;
    small.strategy.tp = 2;
    small.strategy.sequence_parallel = true;
    small.strategy.tp_comm_overlap = overlap;
    small.steps = 1;
    TempDir trace_dir;
    model::RunTrace run = simulateAndLoad(small, trace_dir.path().string());
    const model::RankTrace& rank = run.ranks.front();
    int beside = 0;
    for (const auto& op : rank.nccl_ops) {
      if (rank.name(op.func_id) != "AllGather") continue;
      for (const auto& a : rank.activities)
        if (std::string(rank.name(a.name_id)).find("gemm_bf16bf16_bf16f32_f32_tn") != std::string::npos &&
            a.start_ns < op.gpu_end_ns && op.gpu_start_ns < a.end_ns)
          ++beside;
    }
    return beside;
  };
  CHECK(gathersBesideForwardGemms(TpOverlap::kPipeline) > 0);
  CHECK(gathersBesideForwardGemms(TpOverlap::kNone) == 0);

  // Bad input: the overlap needs sequence parallelism, and a known method.
  in.strategy.sequence_parallel = false;
  CHECK(errorOf([&] { validate(in); })
            .starts_with("strategy.tp_comm_overlap = pipeline needs strategy.tp > 1 and "
                         "strategy.sequence_parallel"));
  TempDir dir;
  writeFile(dir / "s.yaml", "tp: 2\nsequence_parallel: true\ntp_comm_overlap: userbuffers\n");
  CHECK(errorOf([&] { loadStrategy(dir / "s.yaml"); }) ==
        dir / "s.yaml" + ": tp_comm_overlap: expected none, pipeline, ring, true or false, got \"userbuffers\"");
  writeFile(dir / "t.yaml", "tp: 2\nsequence_parallel: true\ntp_comm_overlap: true\n");
  CHECK(loadStrategy(dir / "t.yaml").tp_comm_overlap == TpOverlap::kPipeline);
}

TEST_CASE("simulate: each phase's host range holds its kernels' launch calls, nested in its step") {
  SimulationInputs in = balancedPipeline(2, 4, Schedule::kOneFOneB, 1);
  in.strategy.recompute = Recompute::kFull;
  const CostModel cost(in);
  const Layout layout(in);
  TempDir dir;
  model::RunTrace run = simulateAndLoad(in, dir.path().string());
  REQUIRE(run.ranks.size() == 2);
  for (size_t r = 0; r < run.ranks.size(); ++r) {
    const model::RankTrace& rank = run.ranks[r];
    const int stage = layout.place(static_cast<int>(r)).stage;
    // Ranges nest: each block's inside a step, recompute inside a backward, blocks apart.
    std::vector<model::NvtxRange> blocks;
    for (const auto& range : rank.nvtx) {
      if (range.depth == 0) continue;
      int containers = 0;
      for (const auto& outer : rank.nvtx)
        if (outer.depth == range.depth - 1 && outer.start_ns <= range.start_ns && range.end_ns <= outer.end_ns &&
            (range.depth == 1 || rank.name(outer.name_id).starts_with("backward")))
          ++containers;
      CHECK(containers == 1);
      if (range.depth == 1) blocks.push_back(range);
    }
    for (size_t b = 1; b < blocks.size(); ++b) CHECK(blocks[b - 1].end_ns <= blocks[b].start_ns);
    // Each compute kernel's launch call is in the innermost range of its phase.
    std::map<std::string, int> kernels;  // per range name without its "#N"
    for (const auto& a : rank.activities) {
      if (a.kind != model::ActivityKind::kCompute) continue;
      const model::HostCall* call = rank.launchOf(a.correlation_id);
      REQUIRE(call != nullptr);
      std::optional<model::NvtxRange> innermost;
      for (const auto& range : rank.nvtx)
        if (range.start_ns <= call->start_ns && call->start_ns <= range.end_ns &&
            (!innermost || range.depth > innermost->depth ||
             (range.depth == innermost->depth && range.start_ns > innermost->start_ns)))
          innermost = range;
      REQUIRE(innermost);
      std::string name(rank.name(innermost->name_id));
      ++kernels[name.substr(0, name.find('#'))];
    }
    int forward = 0, backward = 0, recomputed = 0;
    for (const auto& item : cost.forward(stage).items) forward += item.collective ? 0 : 1;
    for (const auto& item : cost.backward(stage).items)
      (item.recompute ? recomputed : backward) += item.collective ? 0 : 1;
    REQUIRE(recomputed > 0);
    const int micro_batches_run = in.strategy.micro_batches * in.steps;
    CHECK(kernels["forward"] == forward * micro_batches_run);
    CHECK(kernels["backward"] == backward * micro_batches_run);
    CHECK(kernels["recompute"] == recomputed * micro_batches_run);
    CHECK(kernels["optimizer"] == in.steps);
    CHECK(kernels["ProfilerStep"] == 0);
  }
}
