// Where each rank sits: its tensor, context, data and pipeline coordinates (Megatron's order: tensor
// fastest, then context, then data, then pipeline), its node, GPU and NIC, and the communicators it
// belongs to. The data coordinate `dp` counts over the data-and-context group (dp x cp ranks that hold
// the same weights); `cp` is its position in its context-parallel ring.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analyzer/simulate/cost_model.h"
#include "analyzer/simulate/inputs.h"

namespace gpuxray::simulate {

struct RankPlace {
  int tp = 0, dp = 0, stage = 0;
  int cp = 0;
  int node = 0, local_rank = 0, nic = 0;
};

enum class CommunicatorKind { kTensor, kPipeline, kData, kModel, kContext };

struct CommunicatorInfo {
  uint64_t hash = 0;
  std::string name;
  int comm_rank = 0;
  int nranks = 0;
  int nnodes = 0;
};

class Layout {
 public:
  explicit Layout(const SimulationInputs& inputs);

  int world() const { return world_; }
  int rankOf(int tp, int dp, int stage) const { return tp + tp_ * (dp + dp_ * stage); }
  const RankPlace& place(int rank) const { return places_[static_cast<size_t>(rank)]; }
  bool sameNode(int a, int b) const { return place(a).node == place(b).node; }
  // The bandwidth factor of a rank's NIC (slow-link perturbations), and of a straggler's kernels.
  double nicFactor(int rank) const { return nic_factor_[static_cast<size_t>(rank)]; }
  double timeFactor(int rank) const { return time_factor_[static_cast<size_t>(rank)]; }

  // The communicator of this kind that `rank` belongs to (nranks 1 when the dimension is 1).
  CommunicatorInfo communicator(CommunicatorKind kind, int rank) const;
  // Its members, by communicator rank.
  std::vector<int> members(CommunicatorKind kind, int rank) const;
  GroupLinks links(CommunicatorKind kind, int rank) const;

 private:
  int tp_, cp_, dp_, pp_, world_;
  std::vector<RankPlace> places_;
  std::vector<double> nic_factor_, time_factor_;
};

}  // namespace gpuxray::simulate
