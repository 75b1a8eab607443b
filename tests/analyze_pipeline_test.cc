// Golden tests for the pipeline-bubble analysis: pipelines laid out by the schedule generator
// (tests/support/pipeline_schedule.h), with the answers worked out by hand from its timeline.

#include <catch2/catch.hpp>
#include <string>

#include "analyzer/analysis/pipeline_bubbles.h"
#include "tests/support/analyzed_run.h"
#include "tests/support/build_outputs.h"
#include "tests/support/pipeline_schedule.h"
#include "tests/support/run_builder.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace {

using gpuxray::testing::analyze;
using gpuxray::testing::cell;
using gpuxray::testing::PipelineScheduleKind;
using gpuxray::testing::PipelineStep;
using gpuxray::testing::PipelineTimeline;
using gpuxray::testing::RankBuilder;
using gpuxray::testing::RunBuilder;
using gpuxray::testing::table;
using gpuxray::testing::TempDir;
using gpuxray::testing::text;

constexpr uint64_t kWorld = 0xD000000000000001ull;
constexpr uint64_t kActivationBytes = 16 << 20;

// Writes one step of `timeline` onto the ranks of one pipeline (stage s on ranks[s], communicator
// rank s of `comm`), then a gradient-norm all-reduce (100 µs) and an optimizer kernel (400 µs) on
// every stage once the pipeline has drained. Returns the step's end.
// With `pass_ranges`, each compute's launch lies in a host range "forward#i" / "backward#i", as the
// simulator writes them.
double writeStep(std::vector<RankBuilder*> ranks, uint64_t comm, const PipelineTimeline& timeline, int number,
                 double start_us, bool tail, bool pass_ranges = false) {
  double end = tail ? timeline.end_us + 500 : timeline.end_us;
  for (size_t s = 0; s < ranks.size(); ++s) {
    RankBuilder& rank = *ranks[s];
    rank.range("ProfilerStep#" + std::to_string(number), start_us, end);
    for (const auto& c : timeline.compute[s]) {
      rank.kernel(c.forward ? "forward_gemm" : "backward_gemm", c.start_us, c.end_us, gpuxray::testing::kComputeStream,
                  c.start_us - c.launch_us);
      if (pass_ranges)
        rank.range((c.forward ? "forward#" : "backward#") + std::to_string(c.micro_batch), c.launch_us - 0.25,
                   c.launch_us + 0.25);
    }
    for (const auto& t : timeline.transfers[s]) {
      rank.p2p(comm, t.send, t.peer, t.start_us, t.end_us, kActivationBytes, t.enqueue_us);
    }
    if (tail) {
      // Launched early: the host does not wait for the pipeline to drain.
      rank.collective(kWorld, "AllReduce", static_cast<uint64_t>(number), timeline.end_us, timeline.end_us + 100, 4,
                      start_us + 50);
      rank.kernel("optimizer_step", timeline.end_us + 100, timeline.end_us + 500, gpuxray::testing::kComputeStream,
                  timeline.end_us + 100 - (start_us + 51));
    }
  }
  return end;
}

// A 4-stage 1F1B pipeline, m = 4, on ranks 0-3 of one host: forward 1 ms and backward 2 ms per
// micro-batch, except stage 2 (1.5 ms and 3 ms). Two steps; in the second the host launches stage
// 0's last backward 200 µs after its gradient arrived.
//
// The generator's timeline of step 1 (µs; F/B = forward/backward of micro-batch i):
//   stage 0: F0 0-1000 F1 -2000 F2 -3000 | F3 3500-4500 | B0 11500-13500 | B1 16000-18000 | B2 20500-22500 | B3
//   23500-25500 stage 1: F0 1000-2000 F1 -3000 | F2 3500-4500 | B0 9500-11500 F3 -12500 | B1 14000-16000 | B2
//   18500-20500 | B3 21500-23500 stage 2: F0 2000-3500 F1 -5000 | B0 6500-9500 F2 -11000 B1 -14000 F3 -15500 B2 -18500
//   B3 -21500 stage 3: F0 3500-4500 B0 -6500 F1 -7500 B1 -9500 | F2 11000-12000 B2 -14000 | F3 15500-16500 B3 -18500
// The pipeline drains at 25500 (stage 0's last backward); all-reduce 25500-25600 and optimizer
// -26000 end the step. Idle per stage (the gaps above):
//   stage 0: waits on stage 1 500 + 7000 + 2500 + 2500 + 1000 = 13500, tail 100
//   stage 1: warm-up 1000, waits on stage 2 500 + 5000 + 1500 + 2500 + 1000 = 10500,
//            cool-down 23500-25500 = 2000, tail 100
//   stage 2: warm-up 2000, waits on stage 3 1500, cool-down 21500-25500 = 4000, tail 100
//   stage 3: warm-up 3500, waits on stage 2 1500 + 1500 = 3000, cool-down 18500-25500 = 7000, tail 100
// Step 2 (26000-52200): the same, except stage 0's B3 runs 200 µs late (host-bound), so the
// pipeline drains 200 µs later and every other stage's cool-down grows by 200.
PipelineStep imbalancedStep(double start_us) {
  PipelineStep step{PipelineScheduleKind::kOneFOneB, 4,        4, {1000, 1000, 1500, 1000},
                    {2000, 2000, 3000, 2000},        start_us, {}};
  return step;
}

void writeImbalancedRun(const std::filesystem::path& dir, bool pass_ranges = false) {
  constexpr uint64_t kPp = 0xA000000000000001ull;
  RunBuilder run("golden-pipeline", 4);
  std::vector<RankBuilder*> ranks;
  for (int r = 0; r < 4; ++r) {
    auto& rank = run.rank(r, "node-0", r);
    rank.communicator(kPp, "pp", r, 4, 1);
    rank.communicator(kWorld, "world", r, 4, 1);
    ranks.push_back(&rank);
  }
  double end = writeStep(ranks, kPp, gpuxray::testing::simulatePipeline(imbalancedStep(0)), 1, 0, true, pass_ranges);
  PipelineStep second = imbalancedStep(end);
  second.launch_delays_us[{0, false, 3}] = 200;
  writeStep(ranks, kPp, gpuxray::testing::simulatePipeline(second), 2, end, true, pass_ranges);
  run.write(dir);
}

const gpuxray::report::Finding* pipelineFinding(const gpuxray::report::Report& report) {
  for (const auto& f : report.findings) {
    if (f.analysis == "pipeline_bubbles") return &f;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("analyze: the schedule generator lays out 1F1B from its dependencies") {
  auto timeline = gpuxray::testing::simulatePipeline(imbalancedStep(0));
  CHECK(timeline.end_us == 25500);
  REQUIRE(timeline.compute[3].size() == 8);
  CHECK(timeline.compute[3][4].start_us == 11000);  // stage 3's F2 waits for stage 2
  CHECK(timeline.compute[0][7].start_us == 23500);  // stage 0's B3
  CHECK(timeline.compute[1][5].end_us == 16000);    // stage 1's B1
}

TEST_CASE("analyze: pipeline stages, micro-batches, schedule and bubbles of an imbalanced 1F1B pipeline") {
  TempDir dir;
  writeImbalancedRun(dir.path());
  auto a = analyze(dir.path().string());

  const auto& pipelines = table(a.report, "pipeline_bubbles", "pipelines");
  REQUIRE(pipelines.rows.size() == 1);
  CHECK(text(pipelines, 0, "ranks") == "0 → 1 → 2 → 3");
  CHECK(cell(pipelines, 0, "stages") == 4);
  CHECK(cell(pipelines, 0, "micro_batches") == 4);
  CHECK(text(pipelines, 0, "schedule") == "1F1B");
  CHECK(cell(pipelines, 0, "theoretical_pct") == Approx(100.0 * 3 / 7));

  const auto& stages = table(a.report, "pipeline_bubbles", "stages");
  REQUIRE(stages.rows.size() == 4);
  for (size_t s = 0; s < 4; ++s) {
    INFO("stage " << s);
    CHECK(cell(stages, s, "stage") == static_cast<double>(s));
    CHECK(text(stages, s, "ranks") == std::to_string(s));
    CHECK(cell(stages, s, "micro_batches") == 4);
    CHECK(cell(stages, s, "theoretical_pct") == Approx(100.0 * 3 / 7));
    CHECK(cell(stages, s, "tail") == Approx(100'000));
  }
  // Per step, the mean of the two steps (52.2 ms in all); compute includes the 0.4 ms optimizer.
  CHECK(cell(stages, 0, "compute") == Approx(12'400'000));
  CHECK(cell(stages, 2, "compute") == Approx(18'400'000));
  CHECK(cell(stages, 0, "bubble") == Approx((13'600'000 + 13'800'000) / 2.0));
  CHECK(cell(stages, 0, "bubble_pct") == Approx(100.0 * 27'400 / 52'200));
  CHECK(cell(stages, 0, "wait_downstream") == Approx(13'500'000));
  CHECK(cell(stages, 0, "warm_up") == Approx(0));
  CHECK(cell(stages, 0, "cool_down") == Approx(0));
  CHECK(cell(stages, 0, "host_bound") == Approx(100'000));  // 200 µs in step 2
  CHECK(text(stages, 0, "waits_on") == "stage 1");

  CHECK(cell(stages, 1, "warm_up") == Approx(1'000'000));
  CHECK(cell(stages, 1, "wait_downstream") == Approx(10'500'000));
  CHECK(cell(stages, 1, "cool_down") == Approx(2'100'000));
  CHECK(text(stages, 1, "waits_on") == "stage 2");

  CHECK(cell(stages, 2, "bubble") == Approx(7'700'000));
  CHECK(cell(stages, 2, "bubble_pct") == Approx(100.0 * 15'400 / 52'200));
  CHECK(cell(stages, 2, "warm_up") == Approx(2'000'000));
  CHECK(cell(stages, 2, "wait_downstream") == Approx(1'500'000));
  CHECK(cell(stages, 2, "cool_down") == Approx(4'100'000));

  CHECK(cell(stages, 3, "warm_up") == Approx(3'500'000));
  CHECK(cell(stages, 3, "wait_upstream") == Approx(3'000'000));
  CHECK(cell(stages, 3, "wait_downstream") == Approx(0));
  CHECK(cell(stages, 3, "cool_down") == Approx(7'100'000));
  CHECK(text(stages, 3, "waits_on") == "stage 2");
  for (size_t s = 0; s < 4; ++s) CHECK(cell(stages, s, "other") == Approx(0));

  // Compute per micro-batch: 3 ms on every stage but stage 2 (4.5 ms): 1.33x the mean of 3.375 ms.
  CHECK(cell(stages, 0, "compute_per_micro_batch") == Approx(3'000'000));
  CHECK(cell(stages, 2, "compute_per_micro_batch") == Approx(4'500'000));

  REQUIRE(a.report.metric("bubble_pct") != nullptr);
  CHECK(a.report.metric("bubble_pct")->value == Approx(100.0 * 27'400 / 52'200));
  const gpuxray::report::Finding* finding = pipelineFinding(a.report);
  REQUIRE(finding != nullptr);
  CHECK(finding->summary ==
        "pipeline stage 2 (rank 2) is the slowest: 1.33x the mean compute per micro-batch; stages 1 and 3 wait on it");
  CHECK(finding->severity == gpuxray::report::Severity::kCritical);

  // Every idle gap is a mark on the timeline, labelled by its main cause: stage 3 waits on stage 2
  // for 3 ms per step in all, and warms up 3.5 ms.
  int64_t stage3_upstream = 0, stage3_warm_up = 0;
  for (const auto& mark : a.report.marks) {
    if (mark.analysis != "pipeline_bubbles" || mark.rank != 3) continue;
    if (mark.label == "bubble (stage 3): waiting on stage 2 (upstream)") stage3_upstream += mark.end_ns - mark.start_ns;
    if (mark.label == "bubble (stage 3): warm-up") stage3_warm_up += mark.end_ns - mark.start_ns;
  }
  CHECK(stage3_upstream == 2 * 3'000'000);
  CHECK(stage3_warm_up == 2 * 3'500'000);
}

// Two GPipe pipelines side by side (data-parallel replicas on ranks 0-3 and 4-7, each with its
// own communicator), balanced stages (1 ms forward, 2 ms backward), m = 8, no tail: every stage
// idles (p-1)(t_f+t_b) = 9 ms of the (m+p-1)(t_f+t_b) = 33 ms step, exactly the theoretical 3/11.
// Stage 0 runs F0-F7 (0-8 ms), waits on stage 1 until its first gradient arrives at 17 ms, and
// runs B0-B7 back to back; stage 3 waits 3 ms for its first activation and idles 6 ms after its
// last backward while stages 2-0 finish theirs.
// The passes of a stage's step as "F1 [0, 1000]" (µs from the step's start).
std::vector<std::string> passesOf(const gpuxray::analysis::PipelineStageStep& step) {
  std::vector<std::string> passes;
  for (const auto& b : step.blocks) {
    passes.push_back((b.forward ? "F" : "B") + std::to_string(b.micro_batch) + " [" +
                     std::to_string((b.span.start - step.window.start) / 1000) + ", " +
                     std::to_string((b.span.end - step.window.start) / 1000) + "]");
  }
  return passes;
}

TEST_CASE("analyze: each micro-batch's pass on a stage, from its forward#N and backward#N ranges") {
  TempDir dir;
  writeImbalancedRun(dir.path(), true);
  auto a = analyze(dir.path().string());
  auto result = gpuxray::analysis::computePipelineBubbles(a.session->input());
  REQUIRE(result.pipelines.size() == 1);
  auto timeline = gpuxray::testing::simulatePipeline(imbalancedStep(0));
  for (const auto& stage : result.pipelines[0].stages) {
    INFO("stage " << stage.stage);
    CHECK(stage.blocks_source == gpuxray::analysis::ComputeBlockSource::kRanges);
    REQUIRE(stage.steps.size() == 2);
    std::vector<std::string> expected;
    for (const auto& c : timeline.compute[stage.stage]) {
      expected.push_back((c.forward ? "F" : "B") + std::to_string(c.micro_batch + 1) + " [" +
                         std::to_string(static_cast<int64_t>(c.start_us)) + ", " +
                         std::to_string(static_cast<int64_t>(c.end_us)) + "]");
    }
    CHECK(passesOf(stage.steps[0]) == expected);
    CHECK(stage.steps[1].blocks.size() == 8);
  }
}

TEST_CASE("analyze: without ranges, a stage's passes are its compute between pipeline operations") {
  TempDir dir;
  writeImbalancedRun(dir.path());
  auto a = analyze(dir.path().string());
  auto result = gpuxray::analysis::computePipelineBubbles(a.session->input());
  REQUIRE(result.pipelines.size() == 1);
  const auto& stages = result.pipelines[0].stages;
  for (const auto& stage : stages)
    CHECK(stage.blocks_source == gpuxray::analysis::ComputeBlockSource::kBetweenOperations);
  // Stage 0 sends each activation as its forward ends and waits idle for each gradient (the
  // timeline above, micro-batches from 1).
  CHECK(passesOf(stages[0].steps[0]) ==
        std::vector<std::string>{"F1 [0, 1000]", "F2 [1000, 2000]", "F3 [2000, 3000]", "F4 [3500, 4500]",
                                 "B1 [11500, 13500]", "B2 [16000, 18000]", "B3 [20500, 22500]", "B4 [23500, 25500]"});
  // The last stage sends each gradient right after the micro-batch's forward and backward: one box
  // each, named by the backward it ends with; F2 arrived while it computed and splits nothing.
  CHECK(passesOf(stages[3].steps[0]) ==
        std::vector<std::string>{"B1 [3500, 6500]", "B2 [6500, 9500]", "B3 [11000, 14000]", "B4 [15500, 18500]"});
}

TEST_CASE("analyze: balanced GPipe replicas match the theoretical bubble") {
  TempDir dir;
  RunBuilder run("golden-gpipe", 8);
  PipelineStep step{PipelineScheduleKind::kGPipe, 4, 8, {1000, 1000, 1000, 1000}, {2000, 2000, 2000, 2000}, 0, {}};
  for (int replica = 0; replica < 2; ++replica) {
    uint64_t comm = uint64_t{0xA000000000000010} + static_cast<uint64_t>(replica);
    std::vector<RankBuilder*> ranks;
    for (int s = 0; s < 4; ++s) {
      int r = replica * 4 + s;
      auto& rank = run.rank(r, "node-" + std::to_string(replica), s);
      rank.communicator(comm, "pp", s, 4, 1);
      ranks.push_back(&rank);
    }
    double end = 0;
    for (int number = 1; number <= 2; ++number) {
      step.start_us = end;
      end = writeStep(ranks, comm, gpuxray::testing::simulatePipeline(step), number, end, false);
    }
  }
  run.write(dir.path());
  auto a = analyze(dir.path().string());

  const auto& pipelines = table(a.report, "pipeline_bubbles", "pipelines");
  REQUIRE(pipelines.rows.size() == 2);
  CHECK(text(pipelines, 0, "ranks") == "0 → 1 → 2 → 3");
  CHECK(text(pipelines, 1, "ranks") == "4 → 5 → 6 → 7");
  CHECK(text(pipelines, 0, "schedule") == "GPipe");
  CHECK(cell(pipelines, 0, "micro_batches") == 8);
  const auto& stages = table(a.report, "pipeline_bubbles", "stages");
  REQUIRE(stages.rows.size() == 4);
  for (size_t s = 0; s < 4; ++s) {
    INFO("stage " << s);
    CHECK(text(stages, s, "ranks") == std::to_string(s) + ", " + std::to_string(s + 4));
    CHECK(cell(stages, s, "bubble") == Approx(9'000'000));
    CHECK(cell(stages, s, "bubble_pct") == Approx(100.0 * 3 / 11));
    CHECK(cell(stages, s, "theoretical_pct") == Approx(100.0 * 3 / 11));
    CHECK(cell(stages, s, "warm_up") == Approx(1'000'000.0 * static_cast<double>(s)));
    CHECK(cell(stages, s, "cool_down") == Approx(2'000'000.0 * static_cast<double>(s)));
  }
  CHECK(cell(stages, 0, "wait_downstream") == Approx(9'000'000));
  CHECK(cell(stages, 3, "wait_upstream") == Approx(0));
  CHECK(a.report.metric("bubble_pct")->value == Approx(100.0 * 3 / 11));
  const gpuxray::report::Finding* finding = pipelineFinding(a.report);
  REQUIRE(finding != nullptr);
  CHECK(finding->summary ==
        "pipeline stage 0 (ranks 0, 4) is idle 27.3 % of the step in bubbles, mostly waiting on stage 1");

  // The same as data: stages, their operations and bubbles per step, sends matched to receives.
  auto result = gpuxray::analysis::computePipelineBubbles(a.session->input());
  REQUIRE(result.pipelines.size() == 2);
  const auto& pipeline = result.pipelines[0];
  CHECK(pipeline.ranks == std::vector<int32_t>{0, 1, 2, 3});
  CHECK(pipeline.micro_batches == 8);
  CHECK(pipeline.schedule == "GPipe");
  CHECK(pipeline.theoretical_pct == Approx(100.0 * 3 / 11));
  REQUIRE(pipeline.stages.size() == 4);
  for (const auto& stage : pipeline.stages) {
    INFO("stage " << stage.stage);
    CHECK(stage.rank == static_cast<int32_t>(stage.stage));
    REQUIRE(stage.steps.size() == 2);
    const auto& first_step = stage.steps[0];
    CHECK(first_step.micro_batches == 8);
    CHECK_FALSE(first_step.interleaved);
    CHECK(first_step.idle.total() == 9'000'000);
    // The first and last stages talk to one neighbour (8 activations, 8 gradients), the others to two.
    bool inner = stage.stage == 1 || stage.stage == 2;
    CHECK(first_step.ops.size() == (inner ? 32u : 16u));
    size_t forward = 0;
    for (const auto& op : first_step.ops) forward += op.forward();
    CHECK(forward == first_step.ops.size() / 2);
    int64_t bubbles = 0;
    for (const auto& bubble : first_step.bubbles) bubbles += bubble.span.length();
    CHECK(bubbles == 9'000'000);
  }
  // Stage 3 waits 3 ms for its first activation: warm-up, from the start of its step.
  const auto& last_stage = pipeline.stages[3].steps[0];
  REQUIRE(!last_stage.bubbles.empty());
  CHECK(last_stage.bubbles[0].cause == "warm-up");
  CHECK(last_stage.bubbles[0].span.start == last_stage.window.start);
  CHECK(last_stage.bubbles[0].span.length() == 3'000'000);
  // Per step 8 activations and 8 gradients between each pair of neighbours: 48, over two steps 96.
  REQUIRE(pipeline.messages.size() == 96);
  size_t forward_messages = 0;
  for (const auto& m : pipeline.messages) {
    forward_messages += m.forward;
    CHECK(m.to_rank == (m.forward ? m.from_rank + 1 : m.from_rank - 1));
    CHECK(m.receive.end >= m.send.start);
  }
  CHECK(forward_messages == 48);
  CHECK(pipeline.messages.front().step == 1);
  CHECK(pipeline.messages.back().step == 2);
  REQUIRE(result.verdict.has_value());
  const auto& worst = result.stage_summaries[result.verdict->worst];
  CHECK(worst.stage == 0);
  CHECK(worst.ranks == std::vector<int32_t>{0, 4});
  CHECK(worst.waits_on == 1u);
  CHECK(result.verdict->main_cause == "waiting on stage 1");
  CHECK(result.verdict->bubble_pct == Approx(100.0 * 3 / 11));
  CHECK(result.verdict->micro_batches == 8);
  CHECK(result.verdict->flagged);
  CHECK_FALSE(result.stage_summaries[3].waits_on.has_value());  // stage 3 only warms up and cools down
}

TEST_CASE("analyze: a run without point-to-point traffic has no pipeline stages and no bubble metric") {
  TempDir dir;
  RunBuilder run("golden-no-pipeline", 2);
  for (int r = 0; r < 2; ++r) {
    auto& rank = run.rank(r, "node-0", r);
    rank.communicator(kWorld, "dp", r, 2, 1);
    rank.kernel("gemm", 0, 600);
    rank.collective(kWorld, "AllReduce", 1, 600, 900, 64 << 20);
    // A lone send with no partner anywhere must not make a pipeline of one.
    if (r == 0) rank.p2p(0xB0, true, 5, 900, 950, 1024);
  }
  run.write(dir.path());
  auto a = analyze(dir.path().string());
  const auto& s = gpuxray::testing::section(a.report, "pipeline_bubbles");
  CHECK(s.tables.empty());
  REQUIRE(s.notes.size() == 1);
  CHECK(s.notes[0].find("No pipeline stages") == 0);
  CHECK(a.report.metric("bubble_pct") == nullptr);
}

TEST_CASE("analyze: the CLI reports the slowest pipeline stage") {
  TempDir dir;
  writeImbalancedRun(dir.path() / "run");
  auto result = gpuxray::testing::runCommand(gpuxray::testing::gpuxrayBinary() + " analyze " + (dir / "run"));
  INFO(result.err);
  REQUIRE(result.exit_code == 0);
  CHECK(result.out.find("[critical] pipeline stage 2 (rank 2) is the slowest: 1.33x the mean compute per micro-batch; "
                        "stages 1 and 3 wait on it") != std::string::npos);
  size_t metric = result.out.find("\n  bubble_pct ");
  REQUIRE(metric != std::string::npos);
  CHECK(result.out.substr(metric, result.out.find('\n', metric + 1) - metric).find(" 52.5 %  pipeline bubble") !=
        std::string::npos);
  auto failing = gpuxray::testing::runCommand(gpuxray::testing::gpuxrayBinary() + " analyze " + (dir / "run") +
                                              " --fail-on 'bubble_pct>50'");
  CHECK(failing.exit_code == 3);
}

// Point-to-point traffic that is no plain pipeline gets a note and no figures: activations going
// around a cycle (as interleaved schedules send them), or one rank feeding two.
TEST_CASE("analyze: cycles and fan-out in point-to-point traffic are reported, not analysed") {
  constexpr uint64_t kPp = 0xA000000000000020ull;
  auto check = [](const std::vector<std::pair<int, int>>& sends, const std::string& note) {
    TempDir dir;
    RunBuilder run("golden-not-a-pipeline", 3);
    for (int r = 0; r < 3; ++r) run.rank(r, "node-0", r).communicator(kPp, "pp", r, 3, 1);
    double t = 0;
    for (const auto& [from, to] : sends) {
      run.rank(from, "node-0", from).kernel("forward", t, t + 100).p2p(kPp, true, to, t + 100, t + 150, 1024);
      run.rank(to, "node-0", to).p2p(kPp, false, from, t + 100, t + 150, 1024);
      t += 200;
    }
    run.write(dir.path());
    auto a = analyze(dir.path().string());
    const auto& s = gpuxray::testing::section(a.report, "pipeline_bubbles");
    CHECK(s.tables.empty());
    REQUIRE(s.notes.size() == 1);
    CHECK(s.notes[0] == note);
    CHECK(a.report.metric("bubble_pct") == nullptr);
  };
  check({{0, 1}, {1, 2}, {2, 0}},
        "No pipeline stages: the point-to-point traffic forms a cycle (an interleaved schedule?), which is not "
        "analysed.");
  check({{0, 1}, {0, 2}}, "No pipeline stages: rank 0 sends activations to several ranks (1, 2).");
}

TEST_CASE("analyze: timeline marks are made only for a timeline; the report is the same without them") {
  TempDir dir;
  writeImbalancedRun(dir.path());
  gpuxray::analysis::SessionOptions options;
  options.paths = {dir.path().string()};
  auto with = gpuxray::analysis::Session(options).analyze();
  options.timeline_marks = false;  // gpuxray report, diff, and analyze without --perfetto / --chrome-json
  auto without = gpuxray::analysis::Session(options).analyze();
  auto marksOf = [&](const std::string& analysis) {
    return std::count_if(with.marks.begin(), with.marks.end(), [&](const auto& m) { return m.analysis == analysis; });
  };
  CHECK(marksOf("pipeline_bubbles") > 0);
  CHECK(marksOf("overlap") > 0);
  CHECK(without.marks.empty());
  CHECK(gpuxray::report::renderJson(with) == gpuxray::report::renderJson(without));
  CHECK(gpuxray::report::renderText(with) == gpuxray::report::renderText(without));
}
