#include "analyzer/simulate/presets.h"

#include <map>

#include "analyzer/simulate/calibration.h"

namespace gpuxray::simulate {
namespace {

ModelSpec gpt(const char* name, int layers, int hidden, int heads) {
  ModelSpec m;
  m.name = name;
  m.layers = layers;
  m.hidden = hidden;
  m.heads = heads;
  m.sequence = 2048;
  m.vocabulary = 51200;
  return m;
}

const std::map<std::string, ModelSpec>& models() {
  static const std::map<std::string, ModelSpec> table = [] {
    std::map<std::string, ModelSpec> t;
    auto add = [&](ModelSpec m) { t[m.name] = m; };
    add(gpt("gpt-350m", 24, 1024, 16));
    add(gpt("gpt-1.3b", 24, 2048, 16));
    add(gpt("gpt-6.7b", 32, 4096, 32));
    // Narayanan et al. (SC'21), Table 1: the weak-scaling family (s = 2048, V = 51200).
    add(gpt("megatron-1.7b", 24, 2304, 24));
    add(gpt("megatron-3.6b", 30, 3072, 32));
    add(gpt("megatron-7.5b", 36, 4096, 32));
    add(gpt("megatron-18b", 40, 6144, 48));
    add(gpt("megatron-39b", 48, 8192, 64));
    add(gpt("megatron-76b", 60, 10240, 80));
    add(gpt("megatron-145b", 80, 12288, 96));
    add(gpt("megatron-310b", 96, 16384, 128));
    add(gpt("megatron-530b", 105, 20480, 128));
    add(gpt("megatron-1t", 128, 25600, 160));
    // Korthikanti et al. (2022), Table 3.
    add(gpt("megatron-22b", 48, 6144, 64));
    add(gpt("gpt3-175b", 96, 12288, 96));
    // Llama 3 (Grattafiori et al., "The Llama 3 Herd of Models", 2024, Table 3; Meta's released
    // configs): grouped-query attention with 8 KV heads, SwiGLU MLPs, rotary positions, untied
    // embeddings, vocabulary 128256, sequence 8192.
    auto llama = [&](const char* name, int layers, int hidden, int heads, int ffn, int kv_heads = 8,
                     int sequence = 8192, int vocabulary = 128256) {
      ModelSpec m = gpt(name, layers, hidden, heads);
      m.sequence = sequence;
      m.vocabulary = vocabulary;
      m.ffn_hidden = ffn;
      m.kv_heads = kv_heads;
      m.ffn_gated = true;
      m.tie_embeddings = false;
      m.learned_positions = false;
      add(m);
    };
    llama("llama3-8b", 32, 4096, 32, 14336);
    llama("llama3-70b", 80, 8192, 64, 28672);
    llama("llama3-405b", 126, 16384, 128, 53248);
    // Llama 2 (Touvron et al. 2023, Table 1; Meta's released configs): vocabulary 32000, sequence
    // 4096; 7B and 13B with full multi-head attention.
    llama("llama2-7b", 32, 4096, 32, 11008, 32, 4096, 32000);
    llama("llama2-13b", 40, 5120, 40, 13824, 40, 4096, 32000);
    llama("llama2-70b", 80, 8192, 64, 28672, 8, 4096, 32000);
    ModelSpec moe = gpt("moe-8x350m", 24, 1024, 16);
    moe.experts = 8;
    moe.experts_per_token = 2;
    add(moe);
    return t;
  }();
  return table;
}

const std::map<std::string, GpuSpec>& gpus() {
  static const std::map<std::string, GpuSpec> table = {
      // Dense peaks from NVIDIA's data sheets (A100: 312 TFLOP/s bf16, no FP8; H100/H200 SXM: 989
      // bf16, 1979 FP8).
      {"a100-40gb", {"NVIDIA A100-SXM4-40GB", 312e12, 0, 40ull << 30, 1.555e12, 300e9, 108, 8, 0, "a100"}},
      {"a100-80gb", {"NVIDIA A100-SXM4-80GB", 312e12, 0, 80ull << 30, 2.039e12, 300e9, 108, 8, 0, "a100"}},
      {"h100-sxm", {"NVIDIA H100 80GB HBM3", 989e12, 1979e12, 80ull << 30, 3.35e12, 450e9, 132, 9, 0, "h100"}},
      {"h200-sxm", {"NVIDIA H200", 989e12, 1979e12, 141ull << 30, 4.8e12, 450e9, 132, 9, 0, "h200"}},
  };
  return table;
}

ClusterSpec node(const char* name, const char* gpu, int nics, double nic_bits_per_s) {
  ClusterSpec c;
  c.name = name;
  c.gpus_per_node = 8;
  c.gpu = gpus().at(gpu);
  c.nics_per_node = nics;
  c.nic_bandwidth = nic_bits_per_s / 8;
  if (auto calibration = calibrationFor(c.gpu.generation)) c.efficiency = calibration->efficiency;
  return c;
}

const std::map<std::string, ClusterSpec>& clusters() {
  static const std::map<std::string, ClusterSpec> table = {
      // Selene's nodes (Narayanan et al.): 8 A100 80GB, NVSwitch, 8 HDR InfiniBand NICs for compute.
      {"dgx-a100", node("dgx-a100", "a100-80gb", 8, 200e9)},
      {"dgx-h100", node("dgx-h100", "h100-sxm", 8, 400e9)},
      {"dgx-h200", node("dgx-h200", "h200-sxm", 8, 400e9)},
  };
  return table;
}

SimulationInputs inputsFor(const char* model, const char* cluster, int nodes, StrategySpec strategy) {
  SimulationInputs in;
  in.model = models().at(model);
  in.cluster = clusters().at(cluster);
  in.cluster.nodes = nodes;
  in.strategy = strategy;
  return in;
}

const std::map<std::string, RunPreset>& runs() {
  static const std::map<std::string, RunPreset> table = [] {
    std::map<std::string, RunPreset> t;
    {
      StrategySpec s;
      s.tp = 2, s.pp = 2, s.dp = 4;
      s.micro_batch_size = 1, s.micro_batches = 8;
      s.sequence_parallel = true;
      s.recompute = Recompute::kSelective;
      s.zero_stage = 1;
      RunPreset p{"demo", "a 1.3B GPT on 2 nodes x 8 H100, TP2 x PP2 x DP4, 1F1B; node-00's NIC 3 at half speed",
                  inputsFor("gpt-1.3b", "dgx-h100", 2, s)};
      p.inputs.perturbations.slow_links.push_back({"node-00", 3, 0.5});
      p.inputs.perturbations.jitter_pct = 2;
      p.inputs.steps = 4;
      p.inputs.run_id = "sim-demo";
      t[p.name] = p;
    }
    {
      StrategySpec s;
      s.tp = 8, s.pp = 8, s.dp = 16;
      s.micro_batch_size = 1, s.micro_batches = 96;
      s.sequence_parallel = true;
      s.recompute = Recompute::kSelective;
      s.zero_stage = 1;
      RunPreset p{"gpt3-175b-1024", "GPT-3 175B on 128 nodes x 8 A100 (1024 GPUs), TP8 x PP8 x DP16, batch 1536",
                  inputsFor("gpt3-175b", "dgx-a100", 128, s)};
      p.inputs.steps = 2;
      p.inputs.run_id = "sim-gpt3-175b-1024";
      t[p.name] = p;
    }
    {
      StrategySpec s;
      s.tp = 2, s.pp = 1, s.dp = 4;
      s.micro_batch_size = 2, s.micro_batches = 4;
      RunPreset p{"moe-small", "an 8-expert MoE (top-2) on 1 node x 8 H100, experts spread over TP2, DP4",
                  inputsFor("moe-8x350m", "dgx-h100", 1, s)};
      p.inputs.run_id = "sim-moe-small";
      t[p.name] = p;
    }
    for (auto& [name, preset] : t) preset.inputs.model_source = preset.inputs.cluster_source =
                                       preset.inputs.strategy_source = "preset " + name;
    return t;
  }();
  return table;
}

template <typename Map>
std::vector<std::string> keys(const Map& map) {
  std::vector<std::string> names;
  for (const auto& [name, value] : map) names.push_back(name);
  return names;
}

}  // namespace

std::optional<ModelSpec> modelPreset(const std::string& name) {
  auto it = models().find(name);
  return it == models().end() ? std::nullopt : std::optional(it->second);
}

std::optional<GpuSpec> gpuPreset(const std::string& name) {
  auto it = gpus().find(name);
  return it == gpus().end() ? std::nullopt : std::optional(it->second);
}

std::optional<ClusterSpec> clusterPreset(const std::string& name) {
  auto it = clusters().find(name);
  return it == clusters().end() ? std::nullopt : std::optional(it->second);
}

std::optional<RunPreset> runPreset(const std::string& name) {
  auto it = runs().find(name);
  return it == runs().end() ? std::nullopt : std::optional(it->second);
}

std::vector<std::string> modelPresetNames() { return keys(models()); }
std::vector<std::string> gpuPresetNames() { return keys(gpus()); }
std::vector<std::string> clusterPresetNames() { return keys(clusters()); }
std::vector<std::string> runPresetNames() { return keys(runs()); }

std::string joinNames(const std::vector<std::string>& names) {
  std::string text;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) text += i + 1 == names.size() ? " or " : ", ";
    text += names[i];
  }
  return text;
}

}  // namespace gpuxray::simulate
