// How long each piece of a training step takes, and how much memory it holds. Kernel times are
// FLOPs over the GPU's peak times an efficiency factor per kernel class, or bytes over HBM bandwidth
// (whichever is longer); collectives follow the alpha-beta model of NCCL's ring and tree algorithms
// on the topology (NVLink inside a node, one NIC per GPU between nodes); activation memory follows
// Korthikanti et al. (2022). Formulas: docs/simulation.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analyzer/simulate/inputs.h"

namespace gpuxray::simulate {

enum class KernelClass : uint8_t { kGemm, kGemmFp8, kAttention, kElementwise };
enum class CollectiveKind : uint8_t { kAllReduce, kAllGather, kReduceScatter, kAllToAll };

const char* collectiveFunc(CollectiveKind kind);  // NCCL's name: "AllReduce", ...
// Bytes through each rank's busiest link for an op of `bytes` over `ranks` (nccl-tests' data size x
// busbw factor, analyzer/model/nccl_conventions.h).
double busBytes(CollectiveKind kind, uint64_t bytes, int ranks);

// What the trace shows of one kernel: its name and launch configuration.
struct KernelShape {
  std::string name;
  uint32_t grid_x = 1, grid_y = 1, block_x = 128, registers = 32, shared_bytes = 0;
};

// One piece of a block's work on a tensor-parallel rank: a kernel on the compute stream, or a
// collective of the tensor-parallel group that every member joins before going on.
struct ProgramItem {
  bool collective = false;
  bool recompute = false;
  CollectiveKind kind = CollectiveKind::kAllReduce;
  uint16_t shape = 0;     // kernels: index into CostModel::shapes()
  int64_t duration_ns = 0;
  uint64_t bytes = 0;     // collectives: NCCL's op bytes (the API count x element size)
  int64_t hidden_ns = 0;  // collectives run beside the next GEMM: the part of them that GEMM hides
  double flops = 0;       // kernels: the FLOPs it does
  double hbm_bytes = 0;   // kernels: the bytes it moves between HBM and the SMs
};

// The elementwise work of a layer, each as its kernels' HBM bytes per element (docs/simulation.md,
// "Kernel fusion"): every kernel reads its inputs and writes its outputs once, so fusing two
// kernels saves the intermediate tensor's write and read.
enum class ElementwiseOp : uint8_t {
  kNorm, kNormBackward,                      // per hidden element
  kBiasDropoutAdd, kBiasDropoutAddBackward,  // per hidden element
  kActivation, kActivationBackward,          // per MLP element (GeLU or SwiGLU)
  kSoftmax, kSoftmaxBackward,                // per attention score, mask and softmax (without flash)
};
double elementwiseBytes(ElementwiseOp op, Fusion fusion, bool gated);

// A layer's HBM traffic per kernel group, forward and backward, for one micro-batch on one rank.
struct LayerTraffic {
  std::string group;  // "norms", "bias-dropout-add", "activation", "attention", "GEMMs"
  double bytes = 0;
};

// The items of one forward or backward pass of a model chunk for one micro-batch.
struct BlockProgram {
  std::vector<ProgramItem> items;
  // Backward only: the index of the item after which layer k of the chunk (k = 0 first in the
  // chunk) has all its gradients, and the parameters (this rank's share) each layer holds.
  std::vector<size_t> layer_done_item;
  std::vector<int64_t> layer_done_ns;  // the same, as time from the block's start without jitter
  std::vector<uint64_t> layer_parameters;
  int64_t duration_ns = 0;      // kernels and collectives back to back
  int64_t communication_ns = 0; // of which collectives
  double flops = 0;
};

// How a tensor-parallel collective shares the GPU with the GEMM it is paired with (Transformer
// Engine's userbuffers methods, and Megatron's own asynchronous collectives in the backward):
// - kBlocking: before or after the GEMM, the stream waits for it;
// - kBulk: beside the GEMM, on `sms` SMs that the GEMM loses while it runs;
// - kRingExchange: the GEMM in tp chunks, one shard passed to the next rank beside each chunk
//   (copy engines; `sms` > 0 means the GEMM leaves that many SMs free);
// - kPipeline: the GEMM in `splits` chunks on all SMs but `sms`, each chunk's output reduced on
//   those SMs while the next chunk computes.
enum class OverlapMethod : uint8_t { kBlocking, kBulk, kRingExchange, kPipeline };
struct OverlapSite {
  OverlapMethod method = OverlapMethod::kBlocking;
  int sms = 0;
  int splits = 1;
};
// The GEMMs of a layer that a tensor-parallel collective sits beside (TE's names).
// Forward: the all-gather before QKV and fc1, the reduce-scatter after the output projection and
// fc2. Backward: the output gradient's all-gather before the row-parallel input-gradient GEMMs
// (proj and fc2 dgrad); the input's all-gather again before the column-parallel ones (QKV and fc1
// dgrad), for the weight gradient; the input gradient's reduce-scatter (all-reduce) beside their
// weight-gradient GEMMs.
enum class GemmSite : uint8_t {
  kQkvFprop,
  kProjFprop,
  kFc1Fprop,
  kFc2Fprop,
  kProjDgrad,
  kFc2Dgrad,
  kQkvDgrad,
  kFc1Dgrad,
  kQkvWgrad,
  kFc1Wgrad,
};
OverlapSite overlapSite(GemmSite site, const StrategySpec& strategy);
struct OverlapTimes {
  int64_t gemm_ns = 0;     // the GEMM, slowed by the SMs the communication takes
  int64_t exposed_ns = 0;  // what the stream waits for beyond the GEMM
  int64_t hidden_ns = 0;   // the rest of the collective, under the GEMM
};
OverlapTimes overlapTimes(const OverlapSite& site, int64_t gemm_ns, int64_t collective_ns, int tp, int sm_count);

// The members of a communicator as the network sees them.
struct GroupLinks {
  int ranks = 1;
  int nodes = 1;
  int per_node = 1;
  double nic_factor = 1;  // the slowest member NIC's bandwidth factor (slow-link perturbations)
};

struct MemoryUse {
  uint64_t weights = 0, gradients = 0, optimizer = 0, activations = 0, workspace = 0;
  uint64_t total() const { return weights + gradients + optimizer + activations + workspace; }
};

class CostModel {
 public:
  explicit CostModel(const SimulationInputs& inputs);

  const SimulationInputs& inputs() const { return in_; }
  const std::vector<KernelShape>& shapes() const { return shapes_; }
  int virtualStages() const { return in_.strategy.pp * in_.strategy.chunks; }
  // The most layers a model chunk holds; layersIn(vs) is one less on the last (and first) virtual
  // stage when the layers do not divide evenly (Llama 3 405B's 126 layers on 16 stages).
  int layersPerChunk() const { return (in_.model.layers + virtualStages() - 1) / virtualStages(); }
  int layersIn(int vs) const;

  // The programs of virtual stage `vs` (chunk c of stage s is vs = c x pp + s).
  const BlockProgram& forward(int vs) const { return forward_[static_cast<size_t>(vs)]; }
  const BlockProgram& backward(int vs) const { return backward_[static_cast<size_t>(vs)]; }
  const BlockProgram& optimizerStep(int stage) const { return optimizer_[static_cast<size_t>(stage)]; }

  // Bytes each tensor-parallel rank sends to the next stage per micro-batch (activations forward,
  // their gradients backward).
  uint64_t pipelineTransferBytes() const;
  double p2pSeconds(uint64_t bytes, bool same_node, double nic_factor) const;
  double collectiveSeconds(CollectiveKind kind, uint64_t bytes, const GroupLinks& group) const;
  // Bytes each member's NIC carries for one collective of this size (0 inside one node).
  uint64_t networkBytes(CollectiveKind kind, uint64_t bytes, const GroupLinks& group) const;

  // Gradients are reduced in fp32 (Megatron's main_grad); parameters gathered in bf16 (ZeRO >= 1).
  static constexpr uint64_t kGradientBytes = 4;
  static constexpr uint64_t kWeightBytes = 2;
  uint64_t stageParameters(int stage) const;  // this rank's share
  // Activations one layer keeps for its backward, per micro-batch (Korthikanti et al., Table 2).
  uint64_t activationBytesPerLayer() const;
  static uint64_t activationBytesOf(const SimulationInputs& inputs);
  MemoryUse memory(int stage) const;
  // Throws InputError when some stage needs more than the GPU holds, naming the parts.
  void checkMemoryFits() const;

  // FLOPs of one step in all, as Narayanan et al. count them: the model's (72 B s l h^2 (...)) and
  // the hardware's (with recomputation).
  double modelFlopsPerStep() const;
  double hardwareFlopsPerStep() const;
  // One layer's forward and backward HBM bytes per micro-batch and rank, by kernel group (builds
  // the layer's programs again, hence not const).
  std::vector<LayerTraffic> layerTraffic();

 private:
  uint16_t shape(const char* key);
  void kernel(BlockProgram& p, const char* shape_key, KernelClass cls, double flops, double bytes, bool recompute);
  void collective(BlockProgram& p, CollectiveKind kind, uint64_t bytes, bool recompute);
  // A GEMM with the tensor-parallel collective that goes with it (before it when `before`, as an
  // all-gather of its input; else after it), overlapped as `site` says.
  void gemmWithCollective(BlockProgram& p, const char* shape_key, double flops, double bytes, bool recompute,
                          GemmSite site, CollectiveKind kind, uint64_t collective_bytes, bool before);
  static void append(BlockProgram& to, const BlockProgram& from);
  void layerForward(BlockProgram& p, bool recompute);
  void activationForward(BlockProgram& p, double elements, bool recompute);
  void activationBackward(BlockProgram& p, double elements);
  KernelClass layerGemmClass() const;
  // One rank's share of a layer's sequence-parallel all-gather.
  uint64_t gatheredShardBytes() const;
  // The part of context parallelism's ring exchange that the attention kernel does not hide.
  int64_t ringExchangeExposedNs(int64_t attention_ns, uint64_t step_bytes) const;
  void attentionCoreForward(BlockProgram& p, bool recompute);
  void layerBackward(BlockProgram& p);
  void buildPrograms();
  int64_t kernelNs(KernelClass cls, double flops, double bytes) const;

  SimulationInputs in_;
  GroupLinks tensor_group_;
  std::vector<KernelShape> shapes_;
  std::vector<std::string> shape_keys_;  // shapeFor()'s keys, by shape index
  std::vector<BlockProgram> forward_, backward_, optimizer_;
};

}  // namespace gpuxray::simulate
