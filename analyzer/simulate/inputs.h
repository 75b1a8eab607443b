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

  int ffnHidden() const { return ffn_hidden > 0 ? ffn_hidden : 4 * hidden; }
  bool isMoe() const { return experts > 0; }
  // Weights of one transformer layer (attention, MLP or all experts, two layer norms).
  uint64_t layerParameters() const;
  // Input embedding (shared with the output layer) and the final layer norm.
  uint64_t embeddingParameters() const;
  uint64_t parameters() const;
};

struct GpuSpec {
  std::string name;
  double peak_bf16_flops = 0;    // dense
  uint64_t hbm_bytes = 0;
  double hbm_bandwidth = 0;      // bytes/s
  double nvlink_bandwidth = 0;   // bytes/s per GPU and direction (through the NVSwitches)
  uint32_t sm_count = 0;
  uint32_t compute_major = 0;
  uint32_t compute_minor = 0;
};

// The share of a peak that each kind of work reaches (0 < e <= 1). The defaults reproduce the
// published Megatron-LM runs of docs/simulation.md within 9 %, all with these same values.
struct Efficiency {
  double gemm = 0.72;         // of peak bf16 FLOP/s
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
enum class Recompute { kNone, kSelective, kFull };

const char* scheduleName(Schedule schedule);
const char* recomputeName(Recompute recompute);
std::optional<Schedule> parseSchedule(const std::string& text);
std::optional<Recompute> parseRecompute(const std::string& text);

struct StrategySpec {
  int tp = 1;
  int pp = 1;
  int dp = 1;
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
  uint64_t bucket_bytes = 40'000'000ull * 2;

  int world() const { return tp * pp * dp; }
  int globalBatch() const { return micro_batch_size * micro_batches * dp; }
  // "TP2 PP2 DP4 mb1x8 1f1b"
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
