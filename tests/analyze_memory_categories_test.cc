// Memory by category: the inference against a hand-built run with known answers and against the
// simulator, which knows what each of its allocations holds; the categories add up to the memory
// analysis's peak; recomputation shows as a sawtooth.

#include <catch2/catch.hpp>
#include <map>
#include <mutex>
#include <numeric>
#include <string>

#include "analyzer/analysis/memory.h"
#include "analyzer/analysis/memory_categories.h"
#include "analyzer/analysis/session.h"
#include "analyzer/report/report.h"
#include "analyzer/simulate/cost_model.h"
#include "analyzer/simulate/engine.h"
#include "analyzer/simulate/layout.h"
#include "analyzer/simulate/presets.h"
#include "analyzer/simulate/trace_generation.h"
#include "tests/support/run_builder.h"
#include "tests/support/temp_dir.h"

namespace {

namespace analysis = gpuxray::analysis;
namespace simulate = gpuxray::simulate;
using gpuxray::model::MemoryCategory;

std::unique_ptr<analysis::Session> prepared(const std::string& dir) {
  analysis::SessionOptions options;
  options.paths = {dir};
  options.align = false;
  return std::make_unique<analysis::Session>(options);
}

int64_t sum(const analysis::CategoryBytes& bytes) {
  return std::accumulate(bytes.begin(), bytes.end(), int64_t{0});
}

}  // namespace

TEST_CASE("memory categories: each allocation's category from its lifetime, and what the peak held") {
  gpuxray::testing::TempDir dir;
  gpuxray::testing::RunBuilder run("golden-memory-categories", 1);
  auto& rank = run.rank(0, "node-0");
  rank.header.devices.push_back({});
  rank.header.devices.back().memory_bytes = 80ull << 30;
  rank.kernel("k", 0, 3000);
  constexpr int64_t MiB = 1 << 20;
  rank.memoryChange(10, 100 * MiB, 0x1000);  // the weights, before the first step: parameters
  for (int step = 0; step < 2; ++step) {
    const double t = 100 + step * 1000;
    rank.range("ProfilerStep#" + std::to_string(step), t, t + 1000);
    rank.range("forward", t, t + 400);
    rank.range("aten::mm", t + 10, t + 40);
    rank.range("backward", t + 400, t + 800);
    rank.range("Optimizer.step#Adam.step", t + 800, t + 950);
    const uint64_t step_address = 0x100000 * static_cast<uint64_t>(step + 1);
    rank.memoryChange(t + 50, 40 * MiB, step_address + 0x10);  // forward, freed in backward: activations
    rank.memoryChange(t + 20, 8 * MiB, step_address + 0x20);   // inside aten::mm, freed there: temporaries
    rank.memoryChange(t + 30, -8 * MiB, step_address + 0x20);
    rank.memoryChange(t + 600, -40 * MiB, step_address + 0x10);
    if (step == 0) {
      rank.memoryChange(t + 500, 100 * MiB, 0x2000);  // first backward, kept: gradients
      rank.memoryChange(t + 810, 200 * MiB, 0x3000);  // first optimizer step, kept: optimizer state
    }
    rank.memoryChange(t + 300, 5 * MiB, step_address + 0x30);  // forward, kept: other
  }
  rank.memoryChange(2500, -2 * MiB, 0x9999);  // a release of nothing seen: other, below zero
  run.write(dir.path());
  auto session = prepared(dir.path().string());
  const auto& input = session->input();
  REQUIRE(input.steps.at(0).size() == 2);

  auto allocations = analysis::categorizeAllocations(input);
  REQUIRE(allocations.size() == 1);
  std::map<uint64_t, MemoryCategory> by_address;
  for (const auto& a : allocations[0]) by_address[a.address] = a.category;
  CHECK(by_address.at(0x1000) == MemoryCategory::kParameters);
  CHECK(by_address.at(0x2000) == MemoryCategory::kGradients);
  CHECK(by_address.at(0x3000) == MemoryCategory::kOptimizerState);
  CHECK(by_address.at(0x100010) == MemoryCategory::kActivations);
  CHECK(by_address.at(0x200010) == MemoryCategory::kActivations);
  CHECK(by_address.at(0x100020) == MemoryCategory::kTemporaries);
  CHECK(by_address.at(0x100030) == MemoryCategory::kOther);

  auto result = analysis::computeMemoryCategories(input);
  auto memory = analysis::computeMemory(input);
  REQUIRE(result.devices.size() == 1);
  REQUIRE(memory.devices.size() == 1);
  const auto& d = result.devices[0];
  CHECK(result.addresses_recorded);
  CHECK(result.phases_recorded);
  // The peak: step 1's forward activations on top of everything kept (parameters, gradients,
  // optimizer state, step 0's and step 1's kept 5 MiB).
  CHECK(d.peak_bytes == memory.devices[0].peak_bytes);
  CHECK(d.peak_at_ns == memory.devices[0].peak_at_ns);
  CHECK(sum(d.at_peak) == d.peak_bytes);
  CHECK(d.peak_bytes == (100 + 100 + 200 + 40 + 5 + 5) * MiB);
  CHECK(d.at_peak[static_cast<size_t>(MemoryCategory::kParameters)] == 100 * MiB);
  CHECK(d.at_peak[static_cast<size_t>(MemoryCategory::kGradients)] == 100 * MiB);
  CHECK(d.at_peak[static_cast<size_t>(MemoryCategory::kOptimizerState)] == 200 * MiB);
  CHECK(d.at_peak[static_cast<size_t>(MemoryCategory::kActivations)] == 40 * MiB);
  CHECK(d.at_peak[static_cast<size_t>(MemoryCategory::kTemporaries)] == 0);
  CHECK(d.at_peak[static_cast<size_t>(MemoryCategory::kOther)] == 10 * MiB);
  CHECK(d.peak_phase == analysis::MemoryPhase::kForward);
  CHECK(d.peak_step == 1);
  CHECK(d.unmatched_release_bytes == 2 * MiB);
  // Every point of the curve adds up to the memory analysis's level at the same change.
  REQUIRE(d.curve.size() == memory.devices[0].curve.size());
  for (size_t i = 0; i < d.curve.size(); ++i) CHECK(d.curve[i].total() == memory.devices[0].curve[i].bytes);
  CHECK(d.curve.back().bytes[static_cast<size_t>(MemoryCategory::kOther)] == 8 * MiB);

  gpuxray::report::Report report;
  analysis::presentMemoryCategories(result, 10, report);
  std::string json = gpuxray::report::renderJson(report);
  CHECK(json.find("\"memory_categories\": {") != std::string::npos);
  CHECK(json.find("\"peak_phase\": \"forward\"") != std::string::npos);
  CHECK(json.find("\"optimizer_state\": 209715200") != std::string::npos);
  const auto& row = report.sections.at(0).tables.at(0).rows.at(0);
  CHECK(row.back().text == "forward (step 1)");
  CHECK(row[5].number == Approx(200.0 * MiB));  // rank, device, peak, parameters, gradients, optimizer state
}

TEST_CASE("memory categories: without addresses nothing pairs, and without memory the result says so") {
  gpuxray::testing::TempDir dir;
  gpuxray::testing::RunBuilder run("golden-memory-categories-bare", 1);
  auto& rank = run.rank(0, "node-0");
  rank.kernel("k", 0, 1000);
  rank.memoryChange(10, 1 << 20);
  rank.memoryChange(20, -(1 << 20));
  run.write(dir.path());
  auto session = prepared(dir.path().string());
  auto result = analysis::computeMemoryCategories(session->input());
  CHECK(result.recorded);
  CHECK_FALSE(result.addresses_recorded);
  REQUIRE(result.devices.size() == 1);
  CHECK(result.devices[0].peak_bytes == 1 << 20);
  CHECK(sum(result.devices[0].at_peak) == 1 << 20);

  gpuxray::testing::TempDir empty;
  gpuxray::testing::RunBuilder none("golden-memory-categories-none", 1);
  none.rank(0, "node-0").kernel("k", 0, 1000);
  none.write(empty.path());
  auto bare = prepared(empty.path().string());
  auto nothing = analysis::computeMemoryCategories(bare->input());
  CHECK_FALSE(nothing.recorded);
  CHECK(nothing.devices.empty());
}

TEST_CASE("memory categories: the inference finds the simulator's own categories, recomputation's sawtooth included") {
  auto recompute = GENERATE(simulate::Recompute::kNone, simulate::Recompute::kFull);
  simulate::SimulationInputs in;
  in.model = {"small", 8, 1024, 16, 1024, 8, 0, 0, 0};
  in.cluster = *simulate::clusterPreset("dgx-h100");
  in.cluster.nodes = 1;
  in.strategy.pp = 2;
  in.strategy.micro_batches = 4;
  in.strategy.recompute = recompute;
  in.steps = 2;
  in.run_id = "categories";
  simulate::validate(in);
  simulate::CostModel cost(in);
  simulate::Layout layout(in);
  simulate::Timeline timeline(cost, layout);
  gpuxray::testing::TempDir dir;
  simulate::GenerationOptions options;
  options.directory = dir.path().string();
  options.threads = 1;
  std::mutex mutex;
  std::map<std::pair<int, uint64_t>, MemoryCategory> truth;
  options.allocation_category = [&](int rank, uint64_t address, MemoryCategory category) {
    std::lock_guard lock(mutex);
    truth[{rank, address}] = category;
  };
  simulate::writeTraces(cost, layout, timeline, options);

  auto session = prepared(dir.path().string());
  const auto& input = session->input();
  auto allocations = analysis::categorizeAllocations(input);
  size_t compared = 0;
  std::map<MemoryCategory, size_t> seen;
  for (size_t r = 0; r < input.run.ranks.size(); ++r) {
    for (const auto& a : allocations[r]) {
      INFO("rank " << input.run.ranks[r].rank << " allocation at " << a.allocated_ns << " of " << a.bytes << " bytes");
      auto it = truth.find({input.run.ranks[r].rank, a.address});
      REQUIRE(it != truth.end());
      CHECK(gpuxray::model::memoryCategoryName(a.category) == gpuxray::model::memoryCategoryName(it->second));
      ++compared, ++seen[a.category];
    }
  }
  CHECK(compared == truth.size());
  for (auto category : {MemoryCategory::kParameters, MemoryCategory::kGradients, MemoryCategory::kOptimizerState,
                        MemoryCategory::kActivations, MemoryCategory::kOther})
    CHECK(seen[category] > 0);

  auto result = analysis::computeMemoryCategories(input);
  auto memory = analysis::computeMemory(input);
  REQUIRE(result.devices.size() == memory.devices.size());
  for (size_t i = 0; i < result.devices.size(); ++i) {
    CHECK(sum(result.devices[i].at_peak) == memory.devices[i].peak_bytes);
    CHECK(result.devices[i].unmatched_release_bytes == 0);
  }
  // Rank 0's activations over its first backward: one rise per micro-batch's chunk without
  // recomputation; with it, a rise and fall per recomputed layer on top (a sawtooth).
  const auto& curve = result.devices[0].curve;
  const size_t activations = static_cast<size_t>(MemoryCategory::kActivations);
  size_t rises = 0;
  for (size_t i = 1; i < curve.size(); ++i) rises += curve[i].bytes[activations] > curve[i - 1].bytes[activations];
  const size_t micro_batches_per_rank = static_cast<size_t>(in.strategy.micro_batches * in.steps);
  if (recompute == simulate::Recompute::kNone) {
    CHECK(rises == micro_batches_per_rank);
  } else {
    const size_t layers = static_cast<size_t>(cost.layersPerChunk());
    CHECK(rises >= micro_batches_per_rank * (1 + layers));
    CHECK(result.devices[0].peak_phase == analysis::MemoryPhase::kRecompute);
  }
}
