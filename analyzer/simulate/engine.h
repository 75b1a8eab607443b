// Plays the steps of a run and says when everything happens on every rank. The unit is the
// tensor-parallel group: its members run the same block programs in lockstep, each kernel taking
// its own time (stragglers, jitter), and every tensor-parallel collective starting when the last
// member reaches it. Blocks wait for their input from the previous pipeline stage (send/recv over
// NVLink or the NICs), gradient buckets are reduced over the data-parallel group as the last
// micro-batch's backward produces them, and the optimizer step follows a gradient-norm all-reduce
// over the model-parallel group.
//
// Without perturbations every data-parallel replica and every tensor-parallel member behaves alike,
// so one of each is simulated ("uniform"): what `plan` relies on to be fast. All times are ns from
// the run's start.
#pragma once

#include <cstdint>
#include <vector>

#include "analyzer/simulate/cost_model.h"
#include "analyzer/simulate/layout.h"
#include "analyzer/simulate/schedule.h"

namespace gpuxray::simulate {

struct P2pOp {
  bool send = false;
  int peer_stage = 0;
  int64_t posted = 0;  // when this side was ready (its kernel starts then and waits for the other)
  int64_t start = 0, end = 0;
  uint64_t bytes = 0;
};

struct CollectiveOp {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  uint64_t bytes = 0;  // NCCL's op bytes
  int64_t arrive = 0;  // when this member got there (its kernel starts then and waits for the others)
  int64_t start = 0, end = 0;
};

// One simulated rank's step.
struct RankStep {
  int64_t start = 0, end = 0;
  std::vector<int64_t> block_begin;       // per block of the stage order, after its input arrived
  std::vector<int64_t> block_end;
  std::vector<int64_t> collective_start;  // the blocks' tensor-parallel collectives, in order
  std::vector<P2pOp> p2p;
  std::vector<CollectiveOp> gradient_ops;  // data-parallel reduction, by bucket
  CollectiveOp grad_norm;
  int64_t optimizer_start = 0, optimizer_end = 0;
  std::vector<CollectiveOp> gather_ops;    // ZeRO >= 1: updated weights gathered back
};

struct Prediction {
  double step_seconds = 0;
  double tokens_per_second = 0;
  double model_tflops_per_gpu = 0;
  double mfu_pct = 0;
  double bubble_pct = 0;
  double exposed_comm_pct = 0;  // of the rank with the most, split below
  // Its parts: tensor-parallel collectives inside the blocks, and the data-parallel gradient
  // reduction and parameter gathering around the optimizer. Pipeline transfers are not in it: a
  // stage waiting on its neighbour is idle, counted in the bubble.
  double exposed_tp_pct = 0;
  double exposed_dp_pct = 0;
  uint64_t memory_per_gpu = 0;
  double hottest_link_pct = 0;
  std::string hottest_link;  // "NIC", "NVLink"
};

class Timeline {
 public:
  Timeline(const CostModel& cost, const Layout& layout);

  bool uniform() const { return uniform_; }
  const std::vector<std::vector<PipelineBlock>>& orders() const { return orders_; }
  // The simulated rank whose times a real rank takes.
  size_t simulatedIndex(int rank) const;
  const RankStep& step(int rank, int step) const { return steps_[static_cast<size_t>(step)][simulatedIndex(rank)]; }
  // A kernel's time on `rank`: its base time with the rank's straggler factor and its jitter.
  int64_t kernelNs(const ProgramItem& item, int rank, int step, size_t block, size_t item_index) const;
  Prediction predict() const;

 private:
  void simulateStep(int step, const std::vector<int64_t>& starts);
  int simulatedRank(size_t index) const;

  const CostModel& cost_;
  const Layout& layout_;
  bool uniform_ = false;
  int sim_tp_ = 1, sim_dp_ = 1;
  double jitter_ = 0;
  std::vector<std::vector<PipelineBlock>> orders_;  // per stage
  std::vector<std::vector<RankStep>> steps_;        // per step, per simulated rank
};

}  // namespace gpuxray::simulate
