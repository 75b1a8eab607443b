// What the simulator takes: a model, a cluster, a parallel strategy and the perturbations to plant.
// Each comes from a preset or a file (input_files.h); validate() checks that they fit together and
// names the field that does not.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpuxray::simulate {

struct ModelSpec {
  std::string name;
  int layers = 0;
  int hidden = 0;
  int heads = 0;
  int sequence = 0;
  int vocabulary = 0;
  int ffn_hidden = 0;         // 0: 4 x hidden
  int experts = 0;            // 0: a dense model; else every layer's MLP is a mixture of experts
  int experts_per_token = 0;  // top-k routing (MoE only)
  int kv_heads = 0;           // 0: as many as heads; fewer: grouped-query attention (1: multi-query)
  bool ffn_gated = false;     // SwiGLU/GeGLU: gate, up and down matrices instead of two
  bool tie_embeddings = true; // the output layer shares the input embedding's weights
  bool learned_positions = true;  // a learned position embedding (GPT); false: rotary (Llama)

  int ffnHidden() const { return ffn_hidden > 0 ? ffn_hidden : 4 * hidden; }
  int kvHeads() const { return kv_heads > 0 ? kv_heads : heads; }
  // Width of the keys (and of the values): kv heads x head size.
  int kvHidden() const { return kvHeads() * (hidden / heads); }
  bool isMoe() const { return experts > 0; }
  // Weights of one transformer layer (attention, MLP or all experts, two layer norms).
  uint64_t layerParameters() const;
  // Input embedding, position embedding and the final layer norm.
  uint64_t embeddingParameters() const;
  // The output layer's own weights: 0 when tied to the input embedding.
  uint64_t outputParameters() const;
  uint64_t parameters() const;
};

struct GpuSpec {
  std::string name;
  double peak_bf16_flops = 0;    // dense
  double peak_fp8_flops = 0;     // dense; 0: no FP8 tensor cores
  uint64_t hbm_bytes = 0;
  double hbm_bandwidth = 0;      // bytes/s
  double nvlink_bandwidth = 0;   // bytes/s per GPU and direction (through the NVSwitches)
  uint32_t sm_count = 0;
  uint32_t compute_major = 0;
  uint32_t compute_minor = 0;
  // The calibration set its kernels follow (efficiency_data.json): "a100", "h100", "h200".
  std::string generation;
};

// The share of a peak that each kind of work reaches (0 < e <= 1). The values per GPU generation
// are data (analyzer/simulate/efficiency_data.json, calibration.h), fitted on published runs.
struct Efficiency {
  double gemm = 0.72;         // of peak bf16 FLOP/s
  double gemm_fp8 = 0.50;     // of peak fp8 FLOP/s (precision fp8)
  double attention = 0.50;    // of peak bf16 FLOP/s (the attention core: scores, softmax, values)
  double elementwise = 0.80;  // of HBM bandwidth (norms, activations, dropout, optimizer)
  double nvlink = 0.80;       // of NVLink bandwidth (NCCL's bus bandwidth inside a node)
  double network = 0.85;      // of NIC bandwidth
};

struct ClusterSpec {
  std::string name;
  int nodes = 0;
  int gpus_per_node = 0;
  GpuSpec gpu;
  int nics_per_node = 0;
  double nic_bandwidth = 0;        // bytes/s per NIC and direction
  double nvlink_latency_s = 3e-6;  // alpha of one step inside a node
  double network_latency_s = 8e-6; // alpha of one step between nodes
  Efficiency efficiency;

  int gpus() const { return nodes * gpus_per_node; }
};

enum class Schedule { kGpipe, kOneFOneB, kInterleaved };
enum class Precision { kBf16, kFp8 };
// Which elementwise work is fused into fewer kernels (docs/simulation.md, "Kernel fusion"): none,
// Megatron's usual fusions (default), or also into the GEMMs' prologues and epilogues and flash
// attention (all).
enum class Fusion { kNone, kDefault, kAll };

enum class Recompute { kNone, kSelective, kFull };

// Transformer Engine's overlap of the sequence-parallel all-gathers and reduce-scatters with the
// GEMMs beside them (Megatron's tp_comm_overlap, userbuffers; docs/simulation.md, "Tensor
// parallelism"): none; the forward reduce-scatters chunked in 4 on their own SMs ("pipeline",
// TE's default and NeMo's Llama 3 70B configuration); or sent by ring exchange like the all-gathers
// ("ring", Megatron-Bridge's FP8 configurations).
enum class TpOverlap { kNone, kPipeline, kRing };

const char* scheduleName(Schedule schedule);
const char* recomputeName(Recompute recompute);
std::optional<Schedule> parseSchedule(const std::string& text);
std::optional<Recompute> parseRecompute(const std::string& text);
const char* precisionName(Precision precision);
std::optional<Precision> parsePrecision(const std::string& text);
const char* fusionName(Fusion fusion);
std::optional<Fusion> parseFusion(const std::string& text);
const char* tpOverlapName(TpOverlap overlap);
std::optional<TpOverlap> parseTpOverlap(const std::string& text);

struct StrategySpec {
  int tp = 1;
  int pp = 1;
  int dp = 1;
  int cp = 1;  // context parallelism: each sequence split over cp ranks, ring attention between them
  int micro_batch_size = 1;
  int micro_batches = 1;  // per data-parallel replica and step
  Schedule schedule = Schedule::kOneFOneB;
  int chunks = 1;  // model chunks per stage (interleaved 1F1B)
  bool sequence_parallel = false;
  Recompute recompute = Recompute::kNone;
  // 0: plain data parallel; 1: optimizer state sharded over DP (Megatron's distributed optimizer);
  // 2: gradients too. (Stage 3 is not simulated.)
  int zero_stage = 0;
  bool overlap_grad_reduce = true;
  bool flash_attention = true;
  TpOverlap tp_comm_overlap = TpOverlap::kNone;
  Precision precision = Precision::kBf16;  // of the GEMMs (fp8: Transformer Engine's delayed scaling)
  Fusion fusion = Fusion::kDefault;
  uint64_t bucket_bytes = 40'000'000ull * 2;

  int world() const { return tp * cp * pp * dp; }
  // The ranks that hold the same weights: gradients are reduced and ZeRO shards over them
  // (Megatron's data-and-context-parallel group).
  int dataGroup() const { return dp * cp; }
  // Flash attention as the fusion level has it: never unfused, always with every fusion.
  bool usesFlashAttention() const {
    return fusion == Fusion::kAll || (fusion == Fusion::kDefault && flash_attention);
  }
  int globalBatch() const { return micro_batch_size * micro_batches * dp; }
  // "TP2 PP2 DP4 mb1x8 1f1b" (CP and the rest when not the default)
  std::string label() const;
};

struct SlowLink {
  std::string host;
  int nic = 0;
  double factor = 1;  // bandwidth multiplied by this (0.5: half speed)
};

struct Straggler {
  int rank = 0;
  double factor = 1;  // kernel times multiplied by this (1.3: 30 % slower)
};

struct Perturbations {
  std::vector<SlowLink> slow_links;
  std::vector<Straggler> stragglers;
  double jitter_pct = 0;  // each kernel's time varies uniformly within +-jitter_pct %
};

struct SimulationInputs {
  ModelSpec model;
  ClusterSpec cluster;
  StrategySpec strategy;
  Perturbations perturbations;
  int steps = 3;
  uint64_t seed = 1;
  std::string run_id;
  // Where each part came from ("preset demo", "model.yaml", "command line"), for error messages.
  std::string model_source = "defaults";
  std::string cluster_source = "defaults";
  std::string strategy_source = "defaults";

  // The inputs as one JSON object: what trace headers carry as simulation_inputs.
  std::string toJson() const;
};

// Throws InputError naming the field (and where it came from) when the inputs are inconsistent:
// sizes that do not divide, more ranks than GPUs, perturbations of hosts or ranks that do not exist.
// Memory is checked separately (cost_model.h: checkMemoryFits).
void validate(const SimulationInputs& inputs);

// Host name of node n: "node-00", "node-01", ...
std::string hostName(int node);

}  // namespace gpuxray::simulate
