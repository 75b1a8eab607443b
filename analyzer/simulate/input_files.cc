#include "analyzer/simulate/input_files.h"

#include <fmt/core.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "analyzer/errors.h"
#include "analyzer/simulate/calibration.h"
#include "analyzer/simulate/presets.h"

namespace gpuxray::simulate {
namespace {

using Json = nlohmann::json;

nlohmann::json fromYaml(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined: return nullptr;
    case YAML::NodeType::Sequence: {
      Json array = Json::array();
      for (const auto& item : node) array.push_back(fromYaml(item));
      return array;
    }
    case YAML::NodeType::Map: {
      Json object = Json::object();
      for (const auto& item : node) object[item.first.as<std::string>()] = fromYaml(item.second);
      return object;
    }
    case YAML::NodeType::Scalar: break;
  }
  const std::string& text = node.Scalar();
  if (node.Tag() == "!") return text;  // quoted
  static const std::regex integer("[-+]?[0-9]+");
  static const std::regex real("[-+]?([0-9]+\\.?[0-9]*|\\.[0-9]+)([eE][-+]?[0-9]+)?");
  if (std::regex_match(text, integer)) return std::stoll(text);
  if (std::regex_match(text, real)) return std::stod(text);
  if (text == "true" || text == "yes" || text == "on") return true;
  if (text == "false" || text == "no" || text == "off") return false;
  if (text == "null" || text == "~") return nullptr;
  return text;
}

Json readDocument(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(fmt::format("{}: cannot read the file", path));
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string extension = std::filesystem::path(path).extension().string();
  if (extension == ".yaml" || extension == ".yml") {
    try {
      return fromYaml(YAML::Load(buffer.str()));
    } catch (const YAML::Exception& e) {
      throw InputError(fmt::format("{}:{}:{}: not valid YAML: {}", path, e.mark.line + 1, e.mark.column + 1, e.msg));
    }
  }
  try {
    return Json::parse(buffer.str());
  } catch (const Json::parse_error& e) {
    throw InputError(fmt::format("{}: not valid JSON: {}", path, e.what()));
  }
}

std::string describe(const Json& value) {
  std::string text = value.dump();
  return text.size() > 40 ? text.substr(0, 37) + "..." : text;
}

// The fields of one object, read with checks; finish() rejects the ones nobody asked for.
class Fields {
 public:
  Fields(const Json& object, std::string file, std::string path)
      : object_(object), file_(std::move(file)), path_(std::move(path)) {
    if (!object_.is_object()) fail("", fmt::format("expected an object, got {}", describe(object_)));
  }

  bool has(const char* key) const { return object_.contains(key); }
  const Json& at(const char* key) {
    used_.insert(key);
    return object_.at(key);
  }
  std::string field(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  const std::string& file() const { return file_; }

  [[noreturn]] void fail(const std::string& key, const std::string& message) const {
    std::string where = key.empty() ? path_ : field(key);
    throw InputError(where.empty() ? fmt::format("{}: {}", file_, message)
                                   : fmt::format("{}: {}: {}", file_, where, message));
  }

  void integer(const char* key, int& target, int minimum) {
    if (!has(key)) return;
    const Json& v = at(key);
    if (!v.is_number_integer() || v.get<int64_t>() < minimum || v.get<int64_t>() > 1'000'000'000)
      fail(key, fmt::format("expected an integer >= {}, got {}", minimum, describe(v)));
    target = static_cast<int>(v.get<int64_t>());
  }
  void unsignedInteger(const char* key, uint64_t& target) {
    if (!has(key)) return;
    const Json& v = at(key);
    if (!v.is_number_integer() || v.get<int64_t>() < 0) fail(key, fmt::format("expected an integer >= 0, got {}", describe(v)));
    target = v.get<uint64_t>();
  }
  // A positive number, stored multiplied by `scale`.
  void number(const char* key, double& target, double scale = 1, bool allow_zero = false) {
    if (!has(key)) return;
    const Json& v = at(key);
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0 ||
        (!allow_zero && v.get<double>() == 0))
      fail(key, fmt::format("expected a {} number, got {}", allow_zero ? "non-negative" : "positive", describe(v)));
    target = v.get<double>() * scale;
  }
  void boolean(const char* key, bool& target) {
    if (!has(key)) return;
    const Json& v = at(key);
    if (!v.is_boolean()) fail(key, fmt::format("expected true or false, got {}", describe(v)));
    target = v.get<bool>();
  }
  void text(const char* key, std::string& target) {
    if (!has(key)) return;
    const Json& v = at(key);
    if (!v.is_string()) fail(key, fmt::format("expected a string, got {}", describe(v)));
    target = v.get<std::string>();
  }

  void finish() const {
    for (const auto& [key, value] : object_.items()) {
      if (!used_.contains(key)) fail(key, "unknown field");
    }
  }

 private:
  const Json& object_;
  std::string file_;
  std::string path_;
  std::set<std::string> used_;
};

ModelSpec modelFrom(const Json& value, const std::string& file, const std::string& path) {
  ModelSpec m;
  if (value.is_string()) {
    auto preset = modelPreset(value.get<std::string>());
    if (!preset)
      throw InputError(fmt::format("{}: {}: no model preset '{}' (presets: {})", file, path, value.get<std::string>(),
                                   joinNames(modelPresetNames())));
    return *preset;
  }
  Fields f(value, file, path);
  if (f.has("preset")) {
    std::string name;
    f.text("preset", name);
    auto preset = modelPreset(name);
    if (!preset) f.fail("preset", fmt::format("no model preset '{}' (presets: {})", name, joinNames(modelPresetNames())));
    m = *preset;
  }
  f.text("name", m.name);
  f.integer("layers", m.layers, 1);
  f.integer("hidden", m.hidden, 1);
  f.integer("heads", m.heads, 1);
  f.integer("sequence", m.sequence, 1);
  f.integer("vocabulary", m.vocabulary, 1);
  f.integer("ffn_hidden", m.ffn_hidden, 0);
  f.integer("experts", m.experts, 0);
  f.integer("experts_per_token", m.experts_per_token, 0);
  f.integer("kv_heads", m.kv_heads, 1);
  f.boolean("ffn_gated", m.ffn_gated);
  f.boolean("tie_embeddings", m.tie_embeddings);
  f.boolean("learned_positions", m.learned_positions);
  f.finish();
  if (m.layers == 0 || m.hidden == 0 || m.heads == 0 || m.sequence == 0 || m.vocabulary == 0)
    f.fail("", "a model needs layers, hidden, heads, sequence and vocabulary (or a preset)");
  if (m.name.empty()) m.name = std::filesystem::path(file).stem().string();
  return m;
}

GpuSpec gpuFrom(const Json& value, const std::string& file, const std::string& path) {
  if (value.is_string()) {
    auto preset = gpuPreset(value.get<std::string>());
    if (!preset)
      throw InputError(fmt::format("{}: {}: no GPU preset '{}' (presets: {})", file, path, value.get<std::string>(),
                                   joinNames(gpuPresetNames())));
    return *preset;
  }
  Fields f(value, file, path);
  GpuSpec g;
  if (f.has("preset")) {
    std::string name;
    f.text("preset", name);
    auto preset = gpuPreset(name);
    if (!preset) f.fail("preset", fmt::format("no GPU preset '{}' (presets: {})", name, joinNames(gpuPresetNames())));
    g = *preset;
  }
  f.text("name", g.name);
  f.number("peak_bf16_tflops", g.peak_bf16_flops, 1e12);
  f.number("peak_fp8_tflops", g.peak_fp8_flops, 1e12, true);
  if (f.has("generation")) {
    f.text("generation", g.generation);
    if (!calibrationFor(g.generation))
      f.fail("generation", fmt::format("no efficiency set '{}' (have {})", g.generation,
                                       joinNames(calibratedGenerations())));
  }
  double hbm = static_cast<double>(g.hbm_bytes) / (1ull << 30);
  f.number("hbm_gib", hbm);
  g.hbm_bytes = static_cast<uint64_t>(hbm * (1ull << 30));
  f.number("hbm_bandwidth_gbs", g.hbm_bandwidth, 1e9);
  f.number("nvlink_gbs", g.nvlink_bandwidth, 1e9);
  int sm = static_cast<int>(g.sm_count);
  f.integer("sm_count", sm, 1);
  g.sm_count = static_cast<uint32_t>(sm);
  if (f.has("compute_capability")) {
    std::string cc;
    f.text("compute_capability", cc);
    unsigned major = 0, minor = 0;
    if (std::sscanf(cc.c_str(), "%u.%u", &major, &minor) != 2)
      f.fail("compute_capability", fmt::format("expected MAJOR.MINOR such as \"9.0\", got \"{}\"", cc));
    g.compute_major = major, g.compute_minor = minor;
  }
  f.finish();
  if (g.peak_bf16_flops == 0 || g.hbm_bytes == 0 || g.hbm_bandwidth == 0 || g.nvlink_bandwidth == 0)
    f.fail("", "a GPU needs peak_bf16_tflops, hbm_gib, hbm_bandwidth_gbs and nvlink_gbs (or a preset)");
  if (g.sm_count == 0) g.sm_count = 132;
  if (g.compute_major == 0) g.compute_major = 9;
  return g;
}

ClusterSpec clusterFrom(const Json& value, const std::string& file, const std::string& path) {
  if (value.is_string()) {
    auto preset = clusterPreset(value.get<std::string>());
    if (!preset)
      throw InputError(fmt::format("{}: {}: no cluster preset '{}' (presets: {})", file, path,
                                   value.get<std::string>(), joinNames(clusterPresetNames())));
    return *preset;
  }
  Fields f(value, file, path);
  ClusterSpec c;
  if (f.has("preset")) {
    std::string name;
    f.text("preset", name);
    auto preset = clusterPreset(name);
    if (!preset)
      f.fail("preset", fmt::format("no cluster preset '{}' (presets: {})", name, joinNames(clusterPresetNames())));
    c = *preset;
  }
  f.text("name", c.name);
  f.integer("nodes", c.nodes, 1);
  f.integer("gpus_per_node", c.gpus_per_node, 1);
  if (f.has("gpu")) {
    c.gpu = gpuFrom(f.at("gpu"), file, f.field("gpu"));
    // A GPU of another generation brings its own efficiency set; `efficiency` below overrides it.
    if (auto calibration = calibrationFor(c.gpu.generation)) c.efficiency = calibration->efficiency;
  }
  f.integer("nics_per_node", c.nics_per_node, 0);
  f.number("nic_gbps", c.nic_bandwidth, 1e9 / 8);
  f.number("nvlink_latency_us", c.nvlink_latency_s, 1e-6, true);
  f.number("network_latency_us", c.network_latency_s, 1e-6, true);
  if (f.has("efficiency")) {
    Fields e(f.at("efficiency"), file, f.field("efficiency"));
    e.number("gemm", c.efficiency.gemm);
    e.number("gemm_fp8", c.efficiency.gemm_fp8);
    e.number("attention", c.efficiency.attention);
    e.number("elementwise", c.efficiency.elementwise);
    e.number("nvlink", c.efficiency.nvlink);
    e.number("network", c.efficiency.network);
    e.finish();
  }
  f.finish();
  if (c.gpus_per_node == 0 || c.gpu.peak_bf16_flops == 0)
    f.fail("", "a cluster needs gpus_per_node and gpu (or a preset)");
  if (c.name.empty()) c.name = std::filesystem::path(file).stem().string();
  return c;
}

StrategySpec strategyFrom(const Json& value, const std::string& file, const std::string& path) {
  Fields f(value, file, path);
  StrategySpec s;
  f.integer("tp", s.tp, 1);
  f.integer("pp", s.pp, 1);
  f.integer("dp", s.dp, 1);
  f.integer("cp", s.cp, 1);
  f.integer("micro_batch_size", s.micro_batch_size, 1);
  f.integer("micro_batches", s.micro_batches, 1);
  if (f.has("global_batch")) {
    if (f.has("micro_batches")) f.fail("global_batch", "give either micro_batches or global_batch, not both");
    int global = 0;
    f.integer("global_batch", global, 1);
    if (global % (s.micro_batch_size * s.dp) != 0)
      f.fail("global_batch", fmt::format("{} is not a multiple of micro_batch_size x dp = {}", global,
                                         s.micro_batch_size * s.dp));
    s.micro_batches = global / (s.micro_batch_size * s.dp);
  }
  if (f.has("schedule")) {
    std::string name;
    f.text("schedule", name);
    auto schedule = parseSchedule(name);
    if (!schedule) f.fail("schedule", fmt::format("expected gpipe, 1f1b or interleaved, got \"{}\"", name));
    s.schedule = *schedule;
  }
  f.integer("chunks", s.chunks, 1);
  f.boolean("sequence_parallel", s.sequence_parallel);
  if (f.has("recompute")) {
    std::string name;
    f.text("recompute", name);
    auto recompute = parseRecompute(name);
    if (!recompute) f.fail("recompute", fmt::format("expected none, selective or full, got \"{}\"", name));
    s.recompute = *recompute;
  }
  f.integer("zero_stage", s.zero_stage, 0);
  if (f.has("distributed_optimizer")) {
    bool distributed = false;
    f.boolean("distributed_optimizer", distributed);
    if (distributed) s.zero_stage = std::max(s.zero_stage, 1);
  }
  f.boolean("overlap_grad_reduce", s.overlap_grad_reduce);
  f.boolean("flash_attention", s.flash_attention);
  if (f.has("tp_comm_overlap")) {
    // true and false as Megatron spells it: true is Transformer Engine's default (pipeline).
    const Json& v = f.at("tp_comm_overlap");
    std::string name = v.is_boolean()  ? (v.get<bool>() ? "pipeline" : "none")
                       : v.is_string() ? v.get<std::string>()
                                       : "";
    auto overlap = parseTpOverlap(name);
    if (!overlap)
      f.fail("tp_comm_overlap", fmt::format("expected none, pipeline, ring, true or false, got {}", describe(v)));
    s.tp_comm_overlap = *overlap;
  }
  if (f.has("precision")) {
    std::string name;
    f.text("precision", name);
    auto precision = parsePrecision(name);
    if (!precision) f.fail("precision", fmt::format("expected bf16 or fp8, got \"{}\"", name));
    s.precision = *precision;
  }
  if (f.has("fusion")) {
    std::string name;
    f.text("fusion", name);
    auto fusion = parseFusion(name);
    if (!fusion) f.fail("fusion", fmt::format("expected none, default or all, got \"{}\"", name));
    s.fusion = *fusion;
  }
  if (f.has("bucket_mb")) {
    double mb = 0;
    f.number("bucket_mb", mb);
    s.bucket_bytes = static_cast<uint64_t>(mb * 1e6);
  }
  f.finish();
  return s;
}

Perturbations perturbationsFrom(const Json& value, const std::string& file, const std::string& path) {
  Fields f(value, file, path);
  Perturbations p;
  auto list = [&](const char* key, auto parse_text, auto& target) {
    if (!f.has(key)) return;
    const Json& items = f.at(key);
    if (!items.is_array()) f.fail(key, fmt::format("expected a list, got {}", describe(items)));
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string())
        f.fail(fmt::format("{}[{}]", key, i), fmt::format("expected a string, got {}", describe(items[i])));
      try {
        target.push_back(parse_text(items[i].get<std::string>()));
      } catch (const UsageError& e) {
        f.fail(fmt::format("{}[{}]", key, i), e.what());
      }
    }
  };
  list("slow_links", parseSlowLink, p.slow_links);
  list("stragglers", parseStraggler, p.stragglers);
  f.number("jitter_pct", p.jitter_pct, 1, true);
  f.finish();
  return p;
}

bool isFile(const std::string& path) {
  std::error_code ignored;
  return std::filesystem::is_regular_file(path, ignored);
}

double parseFactor(const std::string& text, const std::string& whole, const char* format) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || !(value > 0) || !std::isfinite(value))
    throw UsageError(fmt::format("'{}': expected {} with a positive factor", whole, format));
  return value;
}

}  // namespace

ModelSpec loadModel(const std::string& name_or_path, std::string& source) {
  if (auto preset = modelPreset(name_or_path)) {
    source = "preset " + name_or_path;
    return *preset;
  }
  if (!isFile(name_or_path))
    throw UsageError(fmt::format("--model '{}': neither a model preset ({}) nor a file", name_or_path,
                                 joinNames(modelPresetNames())));
  source = name_or_path;
  return modelFrom(readDocument(name_or_path), name_or_path, "");
}

ClusterSpec loadCluster(const std::string& name_or_path, std::string& source) {
  if (auto preset = clusterPreset(name_or_path)) {
    source = "preset " + name_or_path;
    return *preset;
  }
  if (!isFile(name_or_path))
    throw UsageError(fmt::format("--cluster '{}': neither a cluster preset ({}) nor a file", name_or_path,
                                 joinNames(clusterPresetNames())));
  source = name_or_path;
  return clusterFrom(readDocument(name_or_path), name_or_path, "");
}

StrategySpec loadStrategy(const std::string& path) {
  if (!isFile(path)) throw UsageError(fmt::format("--strategy '{}': no such file", path));
  return strategyFrom(readDocument(path), path, "");
}

SimulationInputs loadConfig(const std::string& path) {
  if (!isFile(path)) throw UsageError(fmt::format("--config '{}': no such file", path));
  Json document = readDocument(path);
  Fields f(document, path, "");
  SimulationInputs in;
  if (f.has("preset")) {
    std::string name;
    f.text("preset", name);
    auto preset = runPreset(name);
    if (!preset) f.fail("preset", fmt::format("no run preset '{}' (presets: {})", name, joinNames(runPresetNames())));
    in = preset->inputs;
  }
  if (f.has("model")) {
    in.model = modelFrom(f.at("model"), path, "model");
    in.model_source = path;
  }
  if (f.has("cluster")) {
    in.cluster = clusterFrom(f.at("cluster"), path, "cluster");
    in.cluster_source = path;
  }
  if (f.has("strategy")) {
    in.strategy = strategyFrom(f.at("strategy"), path, "strategy");
    in.strategy_source = path;
  }
  if (f.has("perturbations")) in.perturbations = perturbationsFrom(f.at("perturbations"), path, "perturbations");
  f.integer("steps", in.steps, 1);
  uint64_t seed = in.seed;
  f.unsignedInteger("seed", seed);
  in.seed = seed;
  f.text("run_id", in.run_id);
  f.finish();
  if (in.model.layers == 0) f.fail("", "no model: give a model section or a preset");
  if (in.cluster.gpus_per_node == 0) f.fail("", "no cluster: give a cluster section or a preset");
  return in;
}

SlowLink parseSlowLink(const std::string& text) {
  static const char* kFormat = "HOST:NIC=FACTOR (e.g. node-01:3=0.5)";
  size_t colon = text.rfind(':');
  size_t equals = text.rfind('=');
  if (colon == std::string::npos || equals == std::string::npos || colon == 0 || equals < colon + 2)
    throw UsageError(fmt::format("'{}': expected {}", text, kFormat));
  SlowLink link;
  link.host = text.substr(0, colon);
  std::string nic = text.substr(colon + 1, equals - colon - 1);
  if (nic.find_first_not_of("0123456789") != std::string::npos || nic.size() > 6)
    throw UsageError(fmt::format("'{}': expected {}; the NIC is a number", text, kFormat));
  link.nic = std::stoi(nic);
  link.factor = parseFactor(text.substr(equals + 1), text, kFormat);
  return link;
}

Straggler parseStraggler(const std::string& text) {
  static const char* kFormat = "RANK=FACTOR (e.g. 5=1.3)";
  size_t equals = text.find('=');
  std::string rank = text.substr(0, equals);
  if (equals == std::string::npos || rank.empty() || rank.find_first_not_of("0123456789") != std::string::npos ||
      rank.size() > 9)
    throw UsageError(fmt::format("'{}': expected {}", text, kFormat));
  Straggler s;
  s.rank = std::stoi(rank);
  s.factor = parseFactor(text.substr(equals + 1), text, kFormat);
  return s;
}

}  // namespace gpuxray::simulate
