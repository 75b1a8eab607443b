#include "analyzer/simulate/inputs.h"

#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include "analyzer/errors.h"

namespace gpuxray::simulate {

uint64_t ModelSpec::layerParameters() const {
  const uint64_t h = static_cast<uint64_t>(hidden);
  const uint64_t f = static_cast<uint64_t>(ffnHidden());
  const uint64_t kv = static_cast<uint64_t>(kvHidden());
  // Q and output h x h, K and V h x kv, with their biases.
  uint64_t attention = 2 * h * h + 2 * h * kv + 2 * h + 2 * kv;
  uint64_t mlp = ffn_gated ? 3 * h * f + 2 * f + h : 2 * h * f + f + h;
  if (isMoe()) mlp = static_cast<uint64_t>(experts) * mlp + h * static_cast<uint64_t>(experts);
  return attention + mlp + 4 * h;
}

uint64_t ModelSpec::embeddingParameters() const {
  const uint64_t h = static_cast<uint64_t>(hidden);
  const uint64_t positions = learned_positions ? static_cast<uint64_t>(sequence) * h : 0;
  return static_cast<uint64_t>(vocabulary) * h + positions + 2 * h;
}

uint64_t ModelSpec::outputParameters() const {
  return tie_embeddings ? 0 : static_cast<uint64_t>(vocabulary) * static_cast<uint64_t>(hidden);
}

uint64_t ModelSpec::parameters() const {
  return static_cast<uint64_t>(layers) * layerParameters() + embeddingParameters() + outputParameters();
}

const char* scheduleName(Schedule schedule) {
  switch (schedule) {
    case Schedule::kGpipe: return "gpipe";
    case Schedule::kOneFOneB: return "1f1b";
    case Schedule::kInterleaved: return "interleaved";
  }
  return "1f1b";
}

const char* recomputeName(Recompute recompute) {
  switch (recompute) {
    case Recompute::kNone: return "none";
    case Recompute::kSelective: return "selective";
    case Recompute::kFull: return "full";
  }
  return "none";
}

const char* tpOverlapName(TpOverlap overlap) {
  switch (overlap) {
    case TpOverlap::kNone:
      return "none";
    case TpOverlap::kPipeline:
      return "pipeline";
    case TpOverlap::kRing:
      return "ring";
  }
  return "none";
}

std::optional<TpOverlap> parseTpOverlap(const std::string& text) {
  if (text == "none") return TpOverlap::kNone;
  if (text == "pipeline") return TpOverlap::kPipeline;
  if (text == "ring") return TpOverlap::kRing;
  return std::nullopt;
}

std::optional<Schedule> parseSchedule(const std::string& text) {
  if (text == "gpipe") return Schedule::kGpipe;
  if (text == "1f1b") return Schedule::kOneFOneB;
  if (text == "interleaved" || text == "interleaved-1f1b") return Schedule::kInterleaved;
  return std::nullopt;
}

std::optional<Recompute> parseRecompute(const std::string& text) {
  if (text == "none") return Recompute::kNone;
  if (text == "selective") return Recompute::kSelective;
  if (text == "full") return Recompute::kFull;
  return std::nullopt;
}

const char* precisionName(Precision precision) { return precision == Precision::kFp8 ? "fp8" : "bf16"; }

std::optional<Precision> parsePrecision(const std::string& text) {
  if (text == "bf16") return Precision::kBf16;
  if (text == "fp8") return Precision::kFp8;
  return std::nullopt;
}

const char* fusionName(Fusion fusion) {
  switch (fusion) {
    case Fusion::kNone: return "none";
    case Fusion::kDefault: return "default";
    case Fusion::kAll: return "all";
  }
  return "default";
}

std::optional<Fusion> parseFusion(const std::string& text) {
  if (text == "none") return Fusion::kNone;
  if (text == "default") return Fusion::kDefault;
  if (text == "all") return Fusion::kAll;
  return std::nullopt;
}

std::string StrategySpec::label() const {
  std::string text = cp > 1 ? fmt::format("TP{} CP{} PP{} DP{} mb{}x{} {}", tp, cp, pp, dp, micro_batch_size,
                                          micro_batches, scheduleName(schedule))
                            : fmt::format("TP{} PP{} DP{} mb{}x{} {}", tp, pp, dp, micro_batch_size, micro_batches,
                                          scheduleName(schedule));
  if (schedule == Schedule::kInterleaved) text += fmt::format(" v{}", chunks);
  if (sequence_parallel) text += " SP";
  if (recompute != Recompute::kNone) text += fmt::format(" rc-{}", recomputeName(recompute));
  if (zero_stage > 0) text += fmt::format(" ZeRO-{}", zero_stage);
  if (tp_comm_overlap != TpOverlap::kNone) text += fmt::format(" tp-overlap-{}", tpOverlapName(tp_comm_overlap));
  if (precision == Precision::kFp8) text += " fp8";
  if (fusion != Fusion::kDefault) text += fmt::format(" fusion-{}", fusionName(fusion));
  return text;
}

std::string SimulationInputs::toJson() const {
  nlohmann::ordered_json j;
  j["generator"] = "gpuxray simulate";
  j["seed"] = seed;
  j["steps"] = steps;
  j["model"] = {{"name", model.name},
                {"layers", model.layers},
                {"hidden", model.hidden},
                {"heads", model.heads},
                {"sequence", model.sequence},
                {"vocabulary", model.vocabulary},
                {"ffn_hidden", model.ffnHidden()},
                {"experts", model.experts},
                {"experts_per_token", model.experts_per_token},
                {"kv_heads", model.kvHeads()},
                {"ffn_gated", model.ffn_gated},
                {"tie_embeddings", model.tie_embeddings},
                {"learned_positions", model.learned_positions},
                {"source", model_source}};
  const auto& g = cluster.gpu;
  j["cluster"] = {{"name", cluster.name},
                  {"nodes", cluster.nodes},
                  {"gpus_per_node", cluster.gpus_per_node},
                  {"gpu",
                   {{"name", g.name},
                    {"peak_bf16_tflops", g.peak_bf16_flops / 1e12},
                    {"peak_fp8_tflops", g.peak_fp8_flops / 1e12},
                    {"generation", g.generation},
                    {"hbm_gib", static_cast<double>(g.hbm_bytes) / (1ull << 30)},
                    {"hbm_bandwidth_gbs", g.hbm_bandwidth / 1e9},
                    {"nvlink_gbs", g.nvlink_bandwidth / 1e9}}},
                  {"nics_per_node", cluster.nics_per_node},
                  {"nic_gbps", cluster.nic_bandwidth * 8 / 1e9},
                  {"nvlink_latency_us", cluster.nvlink_latency_s * 1e6},
                  {"network_latency_us", cluster.network_latency_s * 1e6},
                  {"efficiency",
                   {{"gemm", cluster.efficiency.gemm},
                    {"gemm_fp8", cluster.efficiency.gemm_fp8},
                    {"attention", cluster.efficiency.attention},
                    {"elementwise", cluster.efficiency.elementwise},
                    {"nvlink", cluster.efficiency.nvlink},
                    {"network", cluster.efficiency.network}}},
                  {"source", cluster_source}};
  const auto& s = strategy;
  j["strategy"] = {{"tp", s.tp},
                   {"pp", s.pp},
                   {"dp", s.dp},
                   {"cp", s.cp},
                   {"micro_batch_size", s.micro_batch_size},
                   {"micro_batches", s.micro_batches},
                   {"schedule", scheduleName(s.schedule)},
                   {"chunks", s.chunks},
                   {"sequence_parallel", s.sequence_parallel},
                   {"recompute", recomputeName(s.recompute)},
                   {"zero_stage", s.zero_stage},
                   {"overlap_grad_reduce", s.overlap_grad_reduce},
                   {"flash_attention", s.flash_attention},
                   {"tp_comm_overlap", tpOverlapName(s.tp_comm_overlap)},
                   {"precision", precisionName(s.precision)},
                   {"fusion", fusionName(s.fusion)},
                   {"bucket_mb", static_cast<double>(s.bucket_bytes) / 1e6},
                   {"source", strategy_source}};
  nlohmann::ordered_json slow = nlohmann::ordered_json::array();
  for (const auto& l : perturbations.slow_links) slow.push_back({{"host", l.host}, {"nic", l.nic}, {"factor", l.factor}});
  nlohmann::ordered_json stragglers = nlohmann::ordered_json::array();
  for (const auto& r : perturbations.stragglers) stragglers.push_back({{"rank", r.rank}, {"factor", r.factor}});
  j["perturbations"] = {{"slow_links", slow}, {"stragglers", stragglers}, {"jitter_pct", perturbations.jitter_pct}};
  return j.dump();
}

std::string hostName(int node) { return fmt::format("node-{:02d}", node); }

namespace {

[[noreturn]] void fail(const std::string& source, const std::string& message) {
  throw InputError(fmt::format("{} ({})", message, source));
}

void positive(const std::string& source, const char* field, double value) {
  if (!(value > 0)) fail(source, fmt::format("{} = {} must be positive", field, value));
}

void efficiency(const std::string& source, const char* field, double value) {
  if (!(value > 0 && value <= 1)) fail(source, fmt::format("{} = {} must lie in (0, 1]", field, value));
}

}  // namespace

void validate(const SimulationInputs& in) {
  const auto& m = in.model;
  const auto& c = in.cluster;
  const auto& s = in.strategy;
  const std::string ms = "model from " + in.model_source;
  const std::string cs = "cluster from " + in.cluster_source;
  const std::string ss = "strategy from " + in.strategy_source;
  const std::string sms = ss + ", " + ms;
  const std::string scs = ss + ", " + cs;

  positive(ms, "model.layers", m.layers);
  positive(ms, "model.hidden", m.hidden);
  positive(ms, "model.heads", m.heads);
  positive(ms, "model.sequence", m.sequence);
  positive(ms, "model.vocabulary", m.vocabulary);
  if (m.ffn_hidden < 0) fail(ms, fmt::format("model.ffn_hidden = {} must not be negative", m.ffn_hidden));
  if (m.hidden % m.heads != 0)
    fail(ms, fmt::format("model.heads = {} does not divide model.hidden = {}", m.heads, m.hidden));
  if (m.kv_heads < 0 || (m.kv_heads > 0 && m.heads % m.kv_heads != 0))
    fail(ms, fmt::format("model.kv_heads = {} does not divide model.heads = {}", m.kv_heads, m.heads));
  if (m.experts < 0) fail(ms, fmt::format("model.experts = {} must not be negative", m.experts));
  if (m.isMoe() && (m.experts_per_token < 1 || m.experts_per_token > m.experts))
    fail(ms, fmt::format("model.experts_per_token = {} must lie in 1..model.experts = {}", m.experts_per_token,
                         m.experts));

  positive(cs, "cluster.nodes", c.nodes);
  positive(cs, "cluster.gpus_per_node", c.gpus_per_node);
  positive(cs, "cluster.gpu.peak_bf16_tflops", c.gpu.peak_bf16_flops);
  positive(cs, "cluster.gpu.hbm_gib", static_cast<double>(c.gpu.hbm_bytes));
  positive(cs, "cluster.gpu.hbm_bandwidth_gbs", c.gpu.hbm_bandwidth);
  positive(cs, "cluster.gpu.nvlink_gbs", c.gpu.nvlink_bandwidth);
  if (c.nodes > 1) {
    positive(cs, "cluster.nics_per_node", c.nics_per_node);
    positive(cs, "cluster.nic_gbps", c.nic_bandwidth);
  }
  if (c.nvlink_latency_s < 0 || c.network_latency_s < 0) fail(cs, "cluster latencies must not be negative");
  efficiency(cs, "cluster.efficiency.gemm", c.efficiency.gemm);
  efficiency(cs, "cluster.efficiency.gemm_fp8", c.efficiency.gemm_fp8);
  efficiency(cs, "cluster.efficiency.attention", c.efficiency.attention);
  efficiency(cs, "cluster.efficiency.elementwise", c.efficiency.elementwise);
  efficiency(cs, "cluster.efficiency.nvlink", c.efficiency.nvlink);
  efficiency(cs, "cluster.efficiency.network", c.efficiency.network);

  positive(ss, "strategy.tp", s.tp);
  positive(ss, "strategy.pp", s.pp);
  positive(ss, "strategy.dp", s.dp);
  positive(ss, "strategy.cp", s.cp);
  if (m.sequence % (2 * s.cp) != 0 && s.cp > 1)
    fail(sms, fmt::format("strategy.cp = {}: 2 x cp = {} does not divide model.sequence = {} (ring attention gives "
                          "each rank two chunks of the sequence to balance the causal mask)", s.cp, 2 * s.cp,
                          m.sequence));
  if (s.cp > 1 && !s.usesFlashAttention())
    fail(ss, fmt::format("strategy.cp = {} needs strategy.flash_attention (and fusion other than none): ring "
                         "attention is a flash-attention kernel per chunk", s.cp));
  if (s.tp_comm_overlap != TpOverlap::kNone && !(s.tp > 1 && s.sequence_parallel))
    fail(ss, fmt::format("strategy.tp_comm_overlap = {} needs strategy.tp > 1 and strategy.sequence_parallel: it "
                         "overlaps the sequence-parallel all-gathers and reduce-scatters",
                         tpOverlapName(s.tp_comm_overlap)));
  if (s.precision == Precision::kFp8 && !(c.gpu.peak_fp8_flops > 0))
    fail(scs, fmt::format("strategy.precision = fp8 needs cluster.gpu.peak_fp8_tflops ({} has none)", c.gpu.name));
  positive(ss, "strategy.micro_batch_size", s.micro_batch_size);
  positive(ss, "strategy.micro_batches", s.micro_batches);
  positive(ss, "strategy.chunks", s.chunks);
  if (m.heads % s.tp != 0)
    fail(sms, fmt::format("strategy.tp = {} does not divide model.heads = {}", s.tp, m.heads));
  if (m.ffnHidden() % s.tp != 0)
    fail(sms, fmt::format("strategy.tp = {} does not divide the MLP width {}", s.tp, m.ffnHidden()));
  if (m.isMoe() && m.experts % s.tp != 0)
    fail(sms, fmt::format("strategy.tp = {} does not divide model.experts = {}: experts are spread over the "
                          "tensor-parallel group", s.tp, m.experts));
  if (s.tp < m.kvHeads() ? m.kvHeads() % s.tp != 0 : s.tp % m.kvHeads() != 0)
    fail(sms, fmt::format("strategy.tp = {} and model.kv_heads = {}: one must divide the other", s.tp, m.kvHeads()));
  if (s.tp > c.gpus_per_node || c.gpus_per_node % s.tp != 0)
    fail(scs, fmt::format("strategy.tp = {} must divide cluster.gpus_per_node = {}: a tensor-parallel group stays "
                          "inside one node", s.tp, c.gpus_per_node));
  if (s.schedule == Schedule::kInterleaved) {
    if (s.chunks < 2) fail(ss, fmt::format("strategy.chunks = {}: the interleaved schedule needs 2 or more", s.chunks));
    if (s.pp < 2) fail(ss, "schedule interleaved needs strategy.pp >= 2");
    if (s.micro_batches % s.pp != 0)
      fail(ss, fmt::format("strategy.micro_batches = {} must be a multiple of strategy.pp = {} for the interleaved "
                           "schedule", s.micro_batches, s.pp));
  } else if (s.chunks != 1) {
    fail(ss, fmt::format("strategy.chunks = {} needs schedule interleaved (schedule is {})", s.chunks,
                         scheduleName(s.schedule)));
  }
  const int vstages = s.pp * s.chunks;
  const int missing = (m.layers + vstages - 1) / vstages * vstages - m.layers;
  if (m.layers < vstages || missing > 2 || (missing > 0 && vstages < 2))
    fail(sms, fmt::format("strategy.pp x strategy.chunks = {} does not divide model.layers = {} (or leave one layer "
                          "less on the last and first stages)", vstages, m.layers));
  if (s.zero_stage < 0 || s.zero_stage > 2)
    fail(ss, fmt::format("strategy.zero_stage = {} must be 0, 1 or 2 (ZeRO-3's per-layer weight gathers are not "
                         "simulated)", s.zero_stage));
  if (s.world() > c.gpus())
    fail(scs, fmt::format("the strategy needs {} GPUs (TP{}{} x PP{} x DP{}) but the cluster has {}: {} nodes x {}",
                          s.world(), s.tp, s.cp > 1 ? fmt::format(" x CP{}", s.cp) : "", s.pp, s.dp, c.gpus(),
                          c.nodes, c.gpus_per_node));

  const std::string ps = "perturbations";
  int used_nodes = (s.world() + c.gpus_per_node - 1) / c.gpus_per_node;
  for (const auto& link : in.perturbations.slow_links) {
    bool host_exists = false;
    for (int n = 0; n < used_nodes; ++n) host_exists |= hostName(n) == link.host;
    if (!host_exists)
      fail(ps, fmt::format("slow link {}:{}: no such host; the run uses {} to {}", link.host, link.nic, hostName(0),
                           hostName(used_nodes - 1)));
    if (link.nic < 0 || link.nic >= c.nics_per_node)
      fail(ps, fmt::format("slow link {}:{}: NIC must lie in 0..{} (cluster.nics_per_node = {})", link.host, link.nic,
                           c.nics_per_node - 1, c.nics_per_node));
    if (!(link.factor > 0)) fail(ps, fmt::format("slow link {}:{}={}: factor must be positive", link.host, link.nic, link.factor));
  }
  for (const auto& straggler : in.perturbations.stragglers) {
    if (straggler.rank < 0 || straggler.rank >= s.world())
      fail(ps, fmt::format("straggler rank {}: ranks are 0..{}", straggler.rank, s.world() - 1));
    if (!(straggler.factor > 0))
      fail(ps, fmt::format("straggler {}={}: factor must be positive", straggler.rank, straggler.factor));
  }
  if (in.perturbations.jitter_pct < 0 || in.perturbations.jitter_pct >= 100)
    fail(ps, fmt::format("jitter {} %: must lie in [0, 100)", in.perturbations.jitter_pct));
  if (in.steps < 1) fail(ps, fmt::format("steps = {} must be at least 1", in.steps));
}

}  // namespace gpuxray::simulate
