#include "analyzer/simulate/cost_model.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>

#include "analyzer/errors.h"
#include "analyzer/model/nccl_conventions.h"
#include "analyzer/simulate/schedule.h"

namespace gpuxray::simulate {
namespace {

// Shortest time a kernel takes: launch and drain.
constexpr int64_t kMinimumKernelNs = 2'000;
constexpr uint64_t kWorkspaceBytes = 1ull << 30;

KernelShape shapeFor(const std::string& key, uint32_t compute_major, uint32_t sms) {
  const std::string sm = compute_major >= 9 ? "sm90" : "sm80";
  auto gemm = [&](const char* layout) {
    return KernelShape{fmt::format("{}_xmma_gemm_bf16bf16_bf16f32_f32_{}_n_tilesize256x128x64_warpgroupsize2x1x1_"
                                   "execute_segment_k_off_kernel__5x_cublas", sm, layout),
                       sms * 4, 1, 384, 168, 232448 / 2};
  };
  if (key == "gemm_fwd") return gemm("tn");
  if (key == "gemm_dgrad") return gemm("nn");
  if (key == "gemm_wgrad") return gemm("nt");
  if (key == "flash_fwd")
    return {"flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t>>", sms * 4, 1,
            128, 255, 114688};
  if (key == "flash_bwd")
    return {"flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<128, 64, 128, 8, 2, 4, 2, false, "
            "false, cutlass::bfloat16_t>>", sms * 2, 1, 256, 255, 147456};
  if (key == "bmm") return {fmt::format("{}_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x32_batched_kernel", sm),
                            sms * 8, 1, 256, 128, 65536};
  if (key == "softmax")
    return {"void (anonymous namespace)::scaled_masked_softmax_warp_forward<c10::BFloat16, c10::BFloat16, float, 11>",
            sms * 64, 1, 128, 40, 0};
  if (key == "softmax_bwd")
    return {"void (anonymous namespace)::scaled_masked_softmax_warp_backward<c10::BFloat16, c10::BFloat16, float, 11>",
            sms * 64, 1, 128, 40, 0};
  if (key == "dropout")
    return {"void at::native::(anonymous namespace)::fused_dropout_kernel_vec<c10::BFloat16, float, unsigned int, 1, 4, "
            "bool>", sms * 16, 1, 256, 32, 0};
  if (key == "layer_norm")
    return {"void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>", sms * 32, 1,
            256, 40, 0};
  if (key == "layer_norm_bwd")
    return {"void at::native::(anonymous namespace)::layer_norm_grad_input_kernel_vectorized<c10::BFloat16, float>",
            sms * 32, 1, 256, 48, 0};
  if (key == "bias_dropout_add")
    return {"void at::native::vectorized_elementwise_kernel<4, bias_dropout_add_fused_train, at::detail::Array<char*, 4>>",
            sms * 16, 1, 128, 24, 0};
  if (key == "gelu")
    return {"void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, "
            "at::native::GeluType)::{lambda()#2}::operator()() const::{lambda(c10::BFloat16)#1}, "
            "at::detail::Array<char*, 2>>", sms * 16, 1, 128, 24, 0};
  if (key == "gelu_bwd")
    return {"void at::native::vectorized_elementwise_kernel<4, at::native::GeluBackwardCUDAKernelImpl, "
            "at::detail::Array<char*, 3>>", sms * 16, 1, 128, 28, 0};
  if (key == "swiglu")
    return {"void transformer_engine::gated_act_kernel<transformer_engine::silu, __nv_bfloat16>", sms * 16, 1, 128,
            28, 0};
  if (key == "swiglu_bwd")
    return {"void transformer_engine::dgated_act_kernel<transformer_engine::silu, transformer_engine::dsilu, "
            "__nv_bfloat16>", sms * 16, 1, 128, 32, 0};
  if (key == "embedding")
    return {"void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::BFloat16, long, unsigned int, 2, 2, -2, "
            "true>", sms * 32, 1, 128, 32, 0};
  if (key == "embedding_bwd")
    return {"void at::native::(anonymous namespace)::embedding_backward_feature_kernel<c10::BFloat16, float, long>",
            sms * 8, 1, 1024, 40, 16384};
  if (key == "cross_entropy")
    return {"void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, c10::BFloat16, float, float, "
            "at::native::(anonymous namespace)::LogSoftMaxForwardEpilogue>", sms * 16, 1, 1024, 40, 0};
  if (key == "cross_entropy_bwd")
    return {"void at::native::(anonymous namespace)::cunn_SoftMaxBackward<4, c10::BFloat16, float, float, "
            "at::native::(anonymous namespace)::LogSoftMaxBackwardEpilogue>", sms * 16, 1, 1024, 40, 0};
  if (key == "router") return {"void topk_router_softmax_kernel<c10::BFloat16, float>", sms, 1, 256, 64, 8192};
  if (key == "optimizer")
    return {"void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor<float, float, int>, float, float, "
            "float, float, float, float, adamMode_t, float>", sms * 2, 1, 512, 72, 0};
  return {key, sms, 1, 128, 32, 0};
}

}  // namespace

double elementwiseBytes(ElementwiseOp op, Fusion fusion, bool gated) {
  const int level = static_cast<int>(fusion);  // none 0, default 1, all 2
  auto pick = [&](double none, double fused, double all) { return level == 0 ? none : level == 1 ? fused : all; };
  switch (op) {
    // Norm: none = statistics (read x), normalize (read x, write y), scale and shift (read y, write z);
    // default = one kernel (read x, write y); all = in the next GEMM's prologue (read x).
    case ElementwiseOp::kNorm: return pick(2 + 4 + 4, 4, 2);
    // Backward: none = scale's gradient (read dz, y, write dy) and normalize's (read dy, x, write dx).
    case ElementwiseOp::kNormBackward: return pick(6 + 6, 6, 6);
    // none = bias add (read, write), dropout (read, write, 1-byte mask), residual add (read 2, write);
    // default = one kernel (read x and residual, write, mask); all = in the GEMM's epilogue (read the
    // residual, write the mask).
    case ElementwiseOp::kBiasDropoutAdd: return pick(4 + 5 + 6, 7, 3);
    // Backward: none = the residual's sum (read 2, write), dropout's (read, mask, write), bias's (read).
    case ElementwiseOp::kBiasDropoutAddBackward: return pick(6 + 5 + 2, 6, 6);
    // GeLU: none = bias add (read, write) and GeLU (read, write); default = one kernel; all = in fc1's
    // epilogue (write the activation beside the pre-activation the GEMM writes anyway).
    // SwiGLU: none = SiLU (read, write) and product (read 2, write); default = one kernel (read 2,
    // write); all = in the epilogue (write).
    case ElementwiseOp::kActivation: return gated ? pick(4 + 6, 6, 2) : pick(4 + 4, 4, 2);
    // Backward: GeLU none = GeLU's (read x, dy, write) and bias's (read); all = in dgrad's epilogue
    // (read x). SwiGLU none = product's (read dy, act, up, write 2) and SiLU's (read 2, write).
    case ElementwiseOp::kActivationBackward: return gated ? pick(10 + 6, 10, 10) : pick(6 + 2, 6, 2);
    // none = mask (read, write) and softmax (read, write); default = scaled masked softmax (read, write).
    case ElementwiseOp::kSoftmax: return pick(4 + 4, 4, 4);
    case ElementwiseOp::kSoftmaxBackward: return pick(4 + 6, 6, 6);
  }
  return 0;
}

double busBytes(CollectiveKind kind, uint64_t bytes, int ranks) {
  auto rule = model::busBandwidthRule(collectiveFunc(kind), bytes, ranks);
  return rule ? rule->busBytes() : 0;
}

const char* collectiveFunc(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllReduce: return "AllReduce";
    case CollectiveKind::kAllGather: return "AllGather";
    case CollectiveKind::kReduceScatter: return "ReduceScatter";
    case CollectiveKind::kAllToAll: return "AlltoAll";
  }
  return "AllReduce";
}

OverlapSite overlapSite(GemmSite site, const StrategySpec& st) {
  const bool column_backward = site == GemmSite::kQkvDgrad || site == GemmSite::kFc1Dgrad ||
                               site == GemmSite::kQkvWgrad || site == GemmSite::kFc1Wgrad;
  if (st.tp_comm_overlap == TpOverlap::kNone) {
    // Megatron's own: the column-parallel layers' backward starts the input's all-gather before the
    // input-gradient GEMM and the input gradient's reduce-scatter (all-reduce without sequence
    // parallelism) before the weight-gradient GEMM, asynchronously
    // (LinearWithGradAccumulationAndAsyncCommunication). NCCL runs them on one CTA per channel, 16.
    constexpr int kNcclChannels = 16;
    if (column_backward) return {OverlapMethod::kBulk, kNcclChannels, 1};
    return {};
  }
  // Transformer Engine's methods (initialize_ub) with the SM counts of NeMo's and Megatron-Bridge's
  // H100 configurations for Llama 3 70B (ub_cfg_h100_h8192_tp4_mbs1_seqlen8192,
  // userbuffers_{bf16,fp8}_h100_h8192_tp4_mbs1_seqlen8192).
  const bool ring = st.tp_comm_overlap == TpOverlap::kRing;
  switch (site) {
    case GemmSite::kQkvFprop:
    case GemmSite::kFc1Fprop:
    case GemmSite::kProjDgrad:
    case GemmSite::kFc2Dgrad:
      return {OverlapMethod::kRingExchange, 0, 1};
    case GemmSite::kProjFprop:
      return ring ? OverlapSite{OverlapMethod::kRingExchange, 1, 1} : OverlapSite{OverlapMethod::kPipeline, 24, 4};
    case GemmSite::kFc2Fprop:
      return ring ? OverlapSite{OverlapMethod::kRingExchange, 1, 1} : OverlapSite{OverlapMethod::kPipeline, 16, 4};
    case GemmSite::kQkvDgrad:
      return {OverlapMethod::kBulk, 4, 1};
    case GemmSite::kQkvWgrad:
      return {OverlapMethod::kBulk, 24, 1};
    case GemmSite::kFc1Dgrad:
      return {OverlapMethod::kBulk, 2, 1};
    case GemmSite::kFc1Wgrad:
      return {OverlapMethod::kBulk, 4, 1};
  }
  return {};
}

OverlapTimes overlapTimes(const OverlapSite& site, int64_t gemm_ns, int64_t collective_ns, int tp, int sm_count) {
  const double G = static_cast<double>(gemm_ns), c = static_cast<double>(collective_ns);
  const double sms = std::max(sm_count, 1);
  const double left = std::max(1.0, sms - site.sms);  // SMs the GEMM keeps
  double gemm = G, finish = G + c;
  switch (site.method) {
    case OverlapMethod::kBlocking:
      break;
    case OverlapMethod::kBulk:
      // The collective holds its SMs while it runs: the GEMM loses c x sms of SM time, or runs on
      // the rest throughout when the collective outlasts it.
      gemm = c >= G * sms / left ? G * sms / left : G + c * (sms - left) / sms;
      finish = std::max(gemm, c);
      break;
    case OverlapMethod::kRingExchange: {
      // tp chunks of the GEMM and tp - 1 shard transfers between them: a transfer shows where it
      // outlasts the chunk beside it. The local chunk needs none (first for an all-gather, last for
      // a reduce-scatter).
      gemm = G * sms / left;
      if (tp < 2) return {static_cast<int64_t>(gemm), 0, 0};
      const double step = c / (tp - 1), chunk = gemm / tp;
      finish = gemm + (tp - 1) * std::max(0.0, step - chunk);
      break;
    }
    case OverlapMethod::kPipeline: {
      // Each chunk's output is reduce-scattered while the next chunk computes; the last one's
      // reduction always shows.
      gemm = G * sms / left;
      const double k = std::max(site.splits, 1);
      finish = gemm + c / k + (k - 1) * std::max(0.0, c / k - gemm / k);
      break;
    }
  }
  OverlapTimes t;
  t.gemm_ns = static_cast<int64_t>(gemm);
  t.exposed_ns = static_cast<int64_t>(finish - gemm);
  t.hidden_ns = std::max<int64_t>(0, collective_ns - t.exposed_ns);
  return t;
}

CostModel::CostModel(const SimulationInputs& inputs) : in_(inputs) {
  tensor_group_ = {in_.strategy.tp, 1, in_.strategy.tp, 1};
  buildPrograms();
}

int CostModel::layersIn(int vs) const {
  const int vstages = virtualStages();
  const int most = (in_.model.layers + vstages - 1) / vstages;
  const int missing = most * vstages - in_.model.layers;  // 0, 1 or 2 (validate())
  if (vs == vstages - 1 && missing >= 1) return most - 1;
  if (vs == 0 && missing >= 2) return most - 1;
  return most;
}

uint16_t CostModel::shape(const char* key) {
  for (size_t i = 0; i < shape_keys_.size(); ++i) {
    if (shape_keys_[i] == key) return static_cast<uint16_t>(i);
  }
  shape_keys_.emplace_back(key);
  shapes_.push_back(shapeFor(key, in_.cluster.gpu.compute_major, in_.cluster.gpu.sm_count));
  return static_cast<uint16_t>(shapes_.size() - 1);
}

int64_t CostModel::kernelNs(KernelClass cls, double flops, double bytes) const {
  const auto& g = in_.cluster.gpu;
  const auto& e = in_.cluster.efficiency;
  double memory_s = bytes / (g.hbm_bandwidth * e.elementwise);
  double compute_s = 0;
  if (cls == KernelClass::kGemm) compute_s = flops / (g.peak_bf16_flops * e.gemm);
  if (cls == KernelClass::kGemmFp8) compute_s = flops / (g.peak_fp8_flops * e.gemm_fp8);
  if (cls == KernelClass::kAttention) compute_s = flops / (g.peak_bf16_flops * e.attention);
  return std::max(kMinimumKernelNs, static_cast<int64_t>(std::max(memory_s, compute_s) * 1e9));
}

void CostModel::kernel(BlockProgram& p, const char* key, KernelClass cls, double flops, double bytes, bool recompute) {
  ProgramItem item;
  item.shape = shape(key);
  item.duration_ns = kernelNs(cls, flops, bytes);
  item.flops = flops;
  item.hbm_bytes = bytes;
  item.recompute = recompute;
  p.items.push_back(item);
  p.duration_ns += item.duration_ns;
  p.flops += flops;
}

void CostModel::append(BlockProgram& to, const BlockProgram& from) {
  to.items.insert(to.items.end(), from.items.begin(), from.items.end());
  to.duration_ns += from.duration_ns;
  to.communication_ns += from.communication_ns;
  to.flops += from.flops;
}

void CostModel::collective(BlockProgram& p, CollectiveKind kind, uint64_t bytes, bool recompute) {
  if (in_.strategy.tp == 1) return;
  ProgramItem item;
  item.collective = true;
  item.kind = kind;
  item.bytes = bytes;
  item.recompute = recompute;
  item.duration_ns = static_cast<int64_t>(collectiveSeconds(kind, bytes, tensor_group_) * 1e9);
  p.items.push_back(item);
  p.duration_ns += item.duration_ns;
  p.communication_ns += item.duration_ns;
}

void CostModel::gemmWithCollective(BlockProgram& p, const char* key, double flops, double bytes, bool rc, GemmSite site,
                                   CollectiveKind kind, uint64_t collective_bytes, bool before) {
  const OverlapSite how = overlapSite(site, in_.strategy);
  if (in_.strategy.tp == 1 || how.method == OverlapMethod::kBlocking) {
    if (before) collective(p, kind, collective_bytes, rc);
    kernel(p, key, layerGemmClass(), flops, bytes, rc);
    if (!before) collective(p, kind, collective_bytes, rc);
    return;
  }
  // The collective goes first, as the part of it the GEMM cannot hide; the trace shows it beside
  // the GEMM.
  collective(p, kind, collective_bytes, rc);
  kernel(p, key, layerGemmClass(), flops, bytes, rc);
  ProgramItem& comm = p.items[p.items.size() - 2];
  ProgramItem& gemm = p.items.back();
  const OverlapTimes t = overlapTimes(how, gemm.duration_ns, comm.duration_ns, in_.strategy.tp,
                                      static_cast<int>(in_.cluster.gpu.sm_count));
  p.duration_ns += (t.exposed_ns - comm.duration_ns) + (t.gemm_ns - gemm.duration_ns);
  p.communication_ns += t.exposed_ns - comm.duration_ns;
  comm.duration_ns = t.exposed_ns;
  comm.hidden_ns = t.hidden_ns;
  gemm.duration_ns = t.gemm_ns;
  // TE's ring-exchange reduce-scatter leaves tp partial sums of this rank's shard, which one kernel
  // adds (CommOverlapP2PBase::split_overlap_rs, reduce_bf16): reads tp shards, writes one.
  if (how.method == OverlapMethod::kRingExchange && kind == CollectiveKind::kReduceScatter)
    kernel(p, "reduce_bf16", KernelClass::kElementwise, 0,
           static_cast<double>(in_.strategy.tp + 1) * static_cast<double>(collective_bytes), rc);
}

int64_t CostModel::ringExchangeExposedNs(int64_t attention_ns, uint64_t step_bytes) const {
  const auto& st = in_.strategy;
  if (st.cp <= 1) return 0;
  // Megatron's ring: cp - 1 send/recv steps, each overlapped with the attention of the chunk already
  // there; a step shows only where its transfer outlasts that chunk's compute.
  const bool same_node = st.tp * st.cp <= in_.cluster.gpus_per_node;
  const double step_ns = p2pSeconds(step_bytes, same_node, 1) * 1e9;
  const double chunk_ns = static_cast<double>(attention_ns) / st.cp;
  return static_cast<int64_t>((st.cp - 1) * std::max(0.0, step_ns - chunk_ns));
}

void CostModel::attentionCoreForward(BlockProgram& p, bool rc) {
  const auto& m = in_.model;
  const auto& st = in_.strategy;
  const double b = st.micro_batch_size, s = m.sequence, h = m.hidden, t = st.tp, a = m.heads;
  const double kv = m.kvHidden();
  const double T = b * s / st.cp;  // this rank's queries; the keys are the whole sequence
  const double flops = 4 * T * s * h / t;
  if (st.usesFlashAttention()) {
    kernel(p, "flash_fwd", KernelClass::kAttention, flops, (2 * T * h / t + 2 * b * s * kv / t) * 2, rc);
    ProgramItem& item = p.items.back();
    const int64_t exposed = ringExchangeExposedNs(item.duration_ns, static_cast<uint64_t>(2 * T * kv / t * 2));
    item.duration_ns += exposed;
    p.duration_ns += exposed;
    return;
  }
  const double scores = b * (a / t) * s * s;  // elements of the attention matrix
  kernel(p, "bmm", KernelClass::kAttention, flops / 2, (T * h / t + T * kv / t + scores) * 2, rc);
  kernel(p, "softmax", KernelClass::kElementwise, 0, scores * elementwiseBytes(ElementwiseOp::kSoftmax, st.fusion, false), rc);
  kernel(p, "dropout", KernelClass::kElementwise, 0, scores * (2 * 2 + 1), rc);
  kernel(p, "bmm", KernelClass::kAttention, flops / 2, (scores + T * kv / t + T * h / t) * 2, rc);
}

uint64_t CostModel::gatheredShardBytes() const {
  const auto& st = in_.strategy;
  const double elements =
      static_cast<double>(st.micro_batch_size) * in_.model.sequence / st.cp * in_.model.hidden / st.tp;
  // Transformer Engine's userbuffers all-gather FP8 inputs as FP8 (initialize_ub's fp8_buf).
  const double element_bytes = st.tp_comm_overlap != TpOverlap::kNone && st.precision == Precision::kFp8 ? 1 : 2;
  return static_cast<uint64_t>(elements * element_bytes);
}

KernelClass CostModel::layerGemmClass() const {
  return in_.strategy.precision == Precision::kFp8 ? KernelClass::kGemmFp8 : KernelClass::kGemm;
}

void CostModel::layerForward(BlockProgram& p, bool rc) {
  const auto& m = in_.model;
  const auto& st = in_.strategy;
  const double b = st.micro_batch_size, h = m.hidden, t = st.tp, kv = m.kvHidden();
  const double f = m.ffnHidden();
  const double T = b * m.sequence / st.cp;
  const double Tsp = st.sequence_parallel ? T / t : T;
  const uint64_t full = static_cast<uint64_t>(T * h * 2);
  const uint64_t shard = static_cast<uint64_t>(T * h * 2 / t);
  const uint64_t gathered = gatheredShardBytes();
  const KernelClass gemm_class = layerGemmClass();
  const double norm = elementwiseBytes(ElementwiseOp::kNorm, st.fusion, m.ffn_gated);
  const double bda = elementwiseBytes(ElementwiseOp::kBiasDropoutAdd, st.fusion, m.ffn_gated);
  // [T x k] x [k x n/t]: a column-parallel GEMM whose input is all-gathered first (with sequence
  // parallelism), or a row-parallel one whose output is reduce-scattered (all-reduced) after.
  auto gemm = [&](double n, double k, GemmSite site, bool column) {
    const double flops = 2 * T * k * n / t, bytes = (T * k + k * n / t + T * n / t) * 2;
    if (column && !st.sequence_parallel) return kernel(p, "gemm_fwd", gemm_class, flops, bytes, rc);
    if (column)
      return gemmWithCollective(p, "gemm_fwd", flops, bytes, rc, site, CollectiveKind::kAllGather, gathered, true);
    gemmWithCollective(p, "gemm_fwd", flops, bytes, rc, site,
                       st.sequence_parallel ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce,
                       st.sequence_parallel ? shard : full, false);
  };
  kernel(p, "layer_norm", KernelClass::kElementwise, 0, norm * Tsp * h, rc);
  gemm(h + 2 * kv, h, GemmSite::kQkvFprop, true);
  attentionCoreForward(p, rc);
  gemm(h, h, GemmSite::kProjFprop, false);
  kernel(p, "bias_dropout_add", KernelClass::kElementwise, 0, bda * Tsp * h, rc);
  kernel(p, "layer_norm", KernelClass::kElementwise, 0, norm * Tsp * h, rc);
  const double up = m.ffn_gated ? 2 * f : f;  // gate and up projections side by side
  if (m.isMoe()) {
    const double k = m.experts_per_token;
    kernel(p, "router", KernelClass::kGemm, 2 * Tsp * h * m.experts, Tsp * h * 2, rc);
    const uint64_t routed = static_cast<uint64_t>(T / t * k * h * 2);
    collective(p, CollectiveKind::kAllToAll, routed, rc);
    const double tokens = T * k / t;  // tokens this rank's experts process
    kernel(p, "gemm_fwd", gemm_class, 2 * tokens * h * up, (tokens * h + h * up + tokens * up) * 2, rc);
    activationForward(p, tokens * f, rc);
    kernel(p, "gemm_fwd", gemm_class, 2 * tokens * f * h, (tokens * f + f * h + tokens * h) * 2, rc);
    collective(p, CollectiveKind::kAllToAll, routed, rc);
  } else {
    gemm(up, h, GemmSite::kFc1Fprop, true);
    activationForward(p, T * f / t, rc);
    gemm(h, f, GemmSite::kFc2Fprop, false);
  }
  kernel(p, "bias_dropout_add", KernelClass::kElementwise, 0, bda * Tsp * h, rc);
}

void CostModel::activationForward(BlockProgram& p, double elements, bool rc) {
  const double bytes = elements * elementwiseBytes(ElementwiseOp::kActivation, in_.strategy.fusion, in_.model.ffn_gated);
  kernel(p, in_.model.ffn_gated ? "swiglu" : "gelu", KernelClass::kElementwise, 0, bytes, rc);
}

void CostModel::activationBackward(BlockProgram& p, double elements) {
  const double bytes =
      elements * elementwiseBytes(ElementwiseOp::kActivationBackward, in_.strategy.fusion, in_.model.ffn_gated);
  kernel(p, in_.model.ffn_gated ? "swiglu_bwd" : "gelu_bwd", KernelClass::kElementwise, 0, bytes, false);
}

void CostModel::layerBackward(BlockProgram& p) {
  const auto& m = in_.model;
  const auto& st = in_.strategy;
  const double b = st.micro_batch_size, s = m.sequence, h = m.hidden, t = st.tp, a = m.heads;
  const double kv = m.kvHidden();
  const double f = m.ffnHidden();
  const double T = b * s / st.cp;
  const double Tsp = st.sequence_parallel ? T / t : T;
  const uint64_t full = static_cast<uint64_t>(T * h * 2);
  const uint64_t shard = static_cast<uint64_t>(T * h * 2 / t);
  const uint64_t gathered = gatheredShardBytes();
  const KernelClass gemm_class = layerGemmClass();
  const double norm_bwd = elementwiseBytes(ElementwiseOp::kNormBackward, st.fusion, m.ffn_gated);
  const double bda_bwd = elementwiseBytes(ElementwiseOp::kBiasDropoutAddBackward, st.fusion, m.ffn_gated);
  if (st.recompute == Recompute::kFull) layerForward(p, true);
  // A row-parallel GEMM's backward (output projection, fc2): with sequence parallelism its output
  // gradient is all-gathered before the input-gradient GEMM.
  // The input-gradient GEMM both backwards start with, beside the all-gather sequence parallelism needs.
  auto inputGradient = [&](double flops, double bytes, GemmSite dgrad) {
    if (st.sequence_parallel)
      gemmWithCollective(p, "gemm_dgrad", flops, bytes, false, dgrad, CollectiveKind::kAllGather, gathered, true);
    else
      kernel(p, "gemm_dgrad", gemm_class, flops, bytes, false);
  };
  auto rowBackward = [&](double n, double k, GemmSite dgrad) {
    const double flops = 2 * T * k * n / t;
    const double bytes = (T * k + k * n / t + T * n / t) * 2;
    inputGradient(flops, bytes, dgrad);
    kernel(p, "gemm_wgrad", gemm_class, flops, bytes, false);
  };
  // A column-parallel GEMM's backward (QKV, fc1): the input all-gathered again for the weight
  // gradient (sequence parallelism, Megatron's seq_par_ag_redo) beside the input-gradient GEMM, and
  // the input gradient reduce-scattered (all-reduced) beside the weight-gradient GEMM.
  auto columnBackward = [&](double n, double k, GemmSite dgrad, GemmSite wgrad) {
    const double flops = 2 * T * k * n / t;
    const double bytes = (T * k + k * n / t + T * n / t) * 2;
    inputGradient(flops, bytes, dgrad);
    gemmWithCollective(p, "gemm_wgrad", flops, bytes, false, wgrad,
                       st.sequence_parallel ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce,
                       st.sequence_parallel ? shard : full, true);
  };
  const double up = m.ffn_gated ? 2 * f : f;
  kernel(p, "bias_dropout_add", KernelClass::kElementwise, 0, bda_bwd * Tsp * h, false);
  if (m.isMoe()) {
    const double k = m.experts_per_token;
    const uint64_t routed = static_cast<uint64_t>(T / t * k * h * 2);
    const double tokens = T * k / t;
    collective(p, CollectiveKind::kAllToAll, routed, false);
    kernel(p, "gemm_dgrad", gemm_class, 2 * tokens * f * h, (tokens * f + f * h + tokens * h) * 2, false);
    kernel(p, "gemm_wgrad", gemm_class, 2 * tokens * f * h, (tokens * f + f * h + tokens * h) * 2, false);
    activationBackward(p, tokens * f);
    kernel(p, "gemm_dgrad", gemm_class, 2 * tokens * h * up, (tokens * h + h * up + tokens * up) * 2, false);
    kernel(p, "gemm_wgrad", gemm_class, 2 * tokens * h * up, (tokens * h + h * up + tokens * up) * 2, false);
    collective(p, CollectiveKind::kAllToAll, routed, false);
    kernel(p, "router", KernelClass::kGemm, 4 * Tsp * h * m.experts, Tsp * h * 2, false);
  } else {
    rowBackward(h, f, GemmSite::kFc2Dgrad);
    activationBackward(p, T * f / t);
    columnBackward(up, h, GemmSite::kFc1Dgrad, GemmSite::kFc1Wgrad);
  }
  kernel(p, "layer_norm_bwd", KernelClass::kElementwise, 0, norm_bwd * Tsp * h, false);
  kernel(p, "bias_dropout_add", KernelClass::kElementwise, 0, bda_bwd * Tsp * h, false);
  rowBackward(h, h, GemmSite::kProjDgrad);
  if (st.recompute == Recompute::kSelective && !st.usesFlashAttention()) attentionCoreForward(p, true);
  const double flops = 8 * T * s * h / t;
  if (st.usesFlashAttention()) {
    // Reads Q, K, V, O and dO, writes dQ, dK and dV.
    kernel(p, "flash_bwd", KernelClass::kAttention, flops, (4 * T * h / t + 4 * b * s * kv / t) * 2, false);
    ProgramItem& item = p.items.back();
    // Each ring step carries K and V forward and dK and dV back.
    const int64_t exposed = ringExchangeExposedNs(item.duration_ns, static_cast<uint64_t>(4 * T * kv / t * 2));
    item.duration_ns += exposed;
    p.duration_ns += exposed;
  } else {
    const double scores = b * (a / t) * s * s;
    kernel(p, "bmm", KernelClass::kAttention, flops / 2, (T * h / t + T * kv / t + 2 * scores) * 2, false);
    kernel(p, "dropout", KernelClass::kElementwise, 0, scores * (3 * 2 + 1), false);
    kernel(p, "softmax_bwd", KernelClass::kElementwise, 0,
           scores * elementwiseBytes(ElementwiseOp::kSoftmaxBackward, st.fusion, false), false);
    kernel(p, "bmm", KernelClass::kAttention, flops / 2, (2 * scores + T * kv / t + T * h / t) * 2, false);
  }
  columnBackward(h + 2 * kv, h, GemmSite::kQkvDgrad, GemmSite::kQkvWgrad);
  kernel(p, "layer_norm_bwd", KernelClass::kElementwise, 0, norm_bwd * Tsp * h, false);
}

void CostModel::buildPrograms() {
  const auto& m = in_.model;
  const auto& st = in_.strategy;
  const double b = st.micro_batch_size, s = m.sequence, h = m.hidden, t = st.tp, V = m.vocabulary;
  const double T = b * s / st.cp;
  const double Tsp = st.sequence_parallel ? T / t : T;
  const int vstages = virtualStages();
  const uint64_t layer_params = m.layerParameters() / static_cast<uint64_t>(st.tp);
  const uint64_t embedding_params = m.embeddingParameters() / static_cast<uint64_t>(st.tp);
  const double norm = elementwiseBytes(ElementwiseOp::kNorm, st.fusion, m.ffn_gated);
  const double norm_bwd = elementwiseBytes(ElementwiseOp::kNormBackward, st.fusion, m.ffn_gated);
  const uint64_t output_params = m.outputParameters() / static_cast<uint64_t>(st.tp);
  forward_.assign(static_cast<size_t>(vstages), {});
  backward_.assign(static_cast<size_t>(vstages), {});
  BlockProgram layer_forward, layer_backward;
  layerForward(layer_forward, false);
  layerBackward(layer_backward);
  for (int vs = 0; vs < vstages; ++vs) {
    BlockProgram& fwd = forward_[static_cast<size_t>(vs)];
    BlockProgram& bwd = backward_[static_cast<size_t>(vs)];
    const bool first = vs == 0, last = vs == vstages - 1;
    const int layers = layersIn(vs);
    if (first) {
      kernel(fwd, "embedding", KernelClass::kElementwise, 0, 4 * T * h / t, false);
      if (st.sequence_parallel) collective(fwd, CollectiveKind::kReduceScatter, static_cast<uint64_t>(T * h * 2 / t), false);
      else collective(fwd, CollectiveKind::kAllReduce, static_cast<uint64_t>(T * h * 2), false);
    }
    for (int l = 0; l < layers; ++l) append(fwd, layer_forward);
    auto head = [&](BlockProgram& p, bool rc) {
      kernel(p, "layer_norm", KernelClass::kElementwise, 0, norm * Tsp * h, rc);
      if (st.sequence_parallel) collective(p, CollectiveKind::kAllGather, static_cast<uint64_t>(T * h * 2 / t), rc);
      kernel(p, "gemm_fwd", KernelClass::kGemm, 2 * T * h * V / t, (T * h + h * V / t + T * V / t) * 2, rc);
      kernel(p, "cross_entropy", KernelClass::kElementwise, 0, T * V / t * 2 * 3, rc);
      collective(p, CollectiveKind::kAllReduce, static_cast<uint64_t>(T * 4 * 3), rc);
    };
    if (last) head(fwd, false);

    if (last) {
      kernel(bwd, "cross_entropy_bwd", KernelClass::kElementwise, 0, T * V / t * 2 * 3, false);
      const double flops = 2 * T * h * V / t;
      const double bytes = (T * h + h * V / t + T * V / t) * 2;
      kernel(bwd, "gemm_dgrad", KernelClass::kGemm, flops, bytes, false);
      kernel(bwd, "gemm_wgrad", KernelClass::kGemm, flops, bytes, false);
      if (st.sequence_parallel) collective(bwd, CollectiveKind::kReduceScatter, static_cast<uint64_t>(T * h * 2 / t), false);
      kernel(bwd, "layer_norm_bwd", KernelClass::kElementwise, 0, norm_bwd * Tsp * h, false);
    }
    // Backward visits the chunk's layers last to first; layer_done_item is indexed first to last.
    bwd.layer_done_item.assign(static_cast<size_t>(layers), 0);
    bwd.layer_parameters.assign(static_cast<size_t>(layers), layer_params);
    for (int l = layers - 1; l >= 0; --l) {
      append(bwd, layer_backward);
      bwd.layer_done_item[static_cast<size_t>(l)] = bwd.items.size() - 1;
    }
    if (last) bwd.layer_parameters.back() += m.tie_embeddings ? (first ? 0 : embedding_params) : output_params;
    if (first) {
      kernel(bwd, "embedding_bwd", KernelClass::kElementwise, 0, 4 * T * h / t + static_cast<double>(embedding_params) * 4, false);
      bwd.layer_done_item.front() = bwd.items.size() - 1;
      bwd.layer_parameters.front() += embedding_params;
    }
    bwd.layer_done_ns.assign(static_cast<size_t>(layers), 0);
    int64_t elapsed = 0;
    int next = layers - 1;
    for (size_t k = 0; k < bwd.items.size(); ++k) {
      elapsed += bwd.items[k].duration_ns;
      while (next >= 0 && bwd.layer_done_item[static_cast<size_t>(next)] == k) bwd.layer_done_ns[static_cast<size_t>(next--)] = elapsed;
    }
  }
  optimizer_.assign(static_cast<size_t>(st.pp), {});
  for (int stage = 0; stage < st.pp; ++stage) {
    double params = static_cast<double>(stageParameters(stage));
    if (st.zero_stage >= 1) params /= st.dataGroup();
    // Adam on fp32 master weights: read weight, gradient, m, v (4 bytes each), write weight, m, v and
    // the bf16 copy.
    kernel(optimizer_[static_cast<size_t>(stage)], "optimizer", KernelClass::kElementwise, 0, params * 30, false);
  }
}

std::vector<LayerTraffic> CostModel::layerTraffic() {
  BlockProgram fwd, bwd;
  layerForward(fwd, false);
  layerBackward(bwd);
  std::vector<LayerTraffic> groups{{"norms", 0}, {"bias-dropout-add", 0}, {"activation", 0}, {"attention", 0}, {"GEMMs", 0}};
  for (const BlockProgram* program : {&fwd, &bwd}) {
    for (const ProgramItem& item : program->items) {
      if (item.collective) continue;
      const std::string& key = shape_keys_[item.shape];
      size_t g = 4;
      if (key.starts_with("layer_norm")) g = 0;
      else if (key == "bias_dropout_add") g = 1;
      else if (key.starts_with("gelu") || key.starts_with("swiglu")) g = 2;
      else if (key.starts_with("flash") || key.starts_with("softmax") || key == "dropout" || key == "bmm") g = 3;
      groups[g].bytes += item.hbm_bytes;
    }
  }
  return groups;
}

uint64_t CostModel::pipelineTransferBytes() const {
  const auto& st = in_.strategy;
  return static_cast<uint64_t>(st.micro_batch_size) * static_cast<uint64_t>(in_.model.sequence / st.cp) *
         static_cast<uint64_t>(in_.model.hidden) * 2 / static_cast<uint64_t>(st.tp);
}

double CostModel::p2pSeconds(uint64_t bytes, bool same_node, double nic_factor) const {
  const auto& c = in_.cluster;
  const auto size = static_cast<double>(bytes);
  if (same_node) return c.nvlink_latency_s + size / (c.gpu.nvlink_bandwidth * c.efficiency.nvlink);
  return c.network_latency_s + size / (c.nic_bandwidth * c.efficiency.network * nic_factor);
}

double CostModel::collectiveSeconds(CollectiveKind kind, uint64_t bytes, const GroupLinks& g) const {
  if (g.ranks <= 1) return 0;
  const auto& c = in_.cluster;
  const double nvlink = c.gpu.nvlink_bandwidth * c.efficiency.nvlink;
  double bandwidth = nvlink;
  double alpha = c.nvlink_latency_s;
  if (g.nodes > 1) {
    // One ring channel per GPU of a node, each through that GPU's NIC.
    int nics = std::min(g.per_node, std::max(c.nics_per_node, 1));
    bandwidth = std::min(nvlink, nics * c.nic_bandwidth * c.efficiency.network * g.nic_factor);
    alpha = c.network_latency_s;
  }
  const double data = busBytes(kind, bytes, g.ranks);
  // Small all-reduces take NCCL's tree: latency grows with log n instead of n.
  double steps = model::ringSteps(model::ncclFunction(collectiveFunc(kind)), g.ranks);
  if (kind == CollectiveKind::kAllReduce && bytes < (256u << 10)) steps = 2 * std::ceil(std::log2(g.ranks));
  return steps * alpha + data / bandwidth;
}

uint64_t CostModel::networkBytes(CollectiveKind kind, uint64_t bytes, const GroupLinks& g) const {
  if (g.nodes <= 1) return 0;
  // The ring's node-crossing hops are split over one channel per GPU of a node, each on its NIC.
  const int channels = std::min(g.per_node, std::max(in_.cluster.nics_per_node, 1));
  return static_cast<uint64_t>(busBytes(kind, bytes, g.ranks) / channels);
}

uint64_t CostModel::stageParameters(int stage) const {
  const auto& m = in_.model;
  const auto& st = in_.strategy;
  uint64_t layers = 0;
  for (int c = 0; c < st.chunks; ++c) layers += static_cast<uint64_t>(layersIn(c * st.pp + stage));
  uint64_t params = layers * m.layerParameters();
  if (stage == 0) params += m.embeddingParameters();
  if (stage == st.pp - 1) {
    if (!m.tie_embeddings) params += m.outputParameters();
    else if (st.pp > 1) params += m.embeddingParameters();  // the tied output layer's copy
  }
  return params / static_cast<uint64_t>(st.tp);
}

uint64_t CostModel::activationBytesPerLayer() const { return activationBytesOf(in_); }

uint64_t CostModel::activationBytesOf(const SimulationInputs& in) {
  const auto& m = in.model;
  const auto& st = in.strategy;
  const double s = static_cast<double>(m.sequence) / st.cp, b = st.micro_batch_size, h = m.hidden, a = m.heads;
  const double t = st.tp, kv = m.kvHidden(), f = m.ffnHidden();
  // Korthikanti et al. (2022), Table 2, per token: 10 h replicated without sequence parallelism (the
  // norms' inputs, the QKV and fc1 inputs, two dropout masks) and, split over TP, Q, K, V, the output
  // projection's input (2 h + 4 kv + 2 h) and the MLP's activations (2 f in, 2 f or 4 f gated out):
  // 10 h + 24 h / t for GPT. Flash attention keeps no s x s matrices (as selective).
  const double attention = st.usesFlashAttention() || st.recompute == Recompute::kSelective ? 0 : 5 * a * s / h;
  const double split = 4 * h + 4 * kv + 2 * f + (m.ffn_gated ? 4 : 2) * f;
  double bytes = 0;
  if (st.recompute == Recompute::kFull) {
    bytes = 2 * s * b * h / (st.sequence_parallel ? t : 1);
  } else if (st.sequence_parallel) {
    bytes = s * b / t * (10 * h + split + attention * h);
  } else {
    bytes = s * b * (10 * h + split / t + attention * h / t);
  }
  return static_cast<uint64_t>(bytes);
}

MemoryUse CostModel::memory(int stage) const {
  const auto& m = in_.model;
  const auto& st = in_.strategy;
  const uint64_t params = stageParameters(stage);
  const uint64_t dp = static_cast<uint64_t>(st.dataGroup());
  MemoryUse use;
  use.weights = params * kWeightBytes;
  use.gradients = params * kGradientBytes / (st.zero_stage >= 2 ? dp : 1);
  use.optimizer = params * 12 / (st.zero_stage >= 1 ? dp : 1);
  const int chunks_in_flight = peakActivationsInFlight(stageOrder(st, stage));
  use.activations = static_cast<uint64_t>(chunks_in_flight) * static_cast<uint64_t>(layersPerChunk()) *
                    activationBytesPerLayer();
  const double T = static_cast<double>(st.micro_batch_size) * m.sequence / st.cp;
  if (st.recompute == Recompute::kFull) {
    // The one layer being recomputed holds its full activations during its backward.
    SimulationInputs unrecomputed = in_;
    unrecomputed.strategy.recompute = Recompute::kNone;
    unrecomputed.strategy.sequence_parallel = false;
    use.activations += CostModel::activationBytesOf(unrecomputed);
  }
  if (stage == st.pp - 1) use.activations += static_cast<uint64_t>(T * m.vocabulary / st.tp * 4);
  use.workspace = kWorkspaceBytes;
  return use;
}

void CostModel::checkMemoryFits() const {
  const auto& g = in_.cluster.gpu;
  for (int stage = 0; stage < in_.strategy.pp; ++stage) {
    MemoryUse use = memory(stage);
    if (use.total() <= g.hbm_bytes) continue;
    auto gib = [](uint64_t bytes) { return static_cast<double>(bytes) / (1ull << 30); };
    throw InputError(fmt::format(
        "the strategy does not fit in memory: pipeline stage {} needs {:.1f} GiB per GPU (weights {:.1f}, "
        "gradients {:.1f}, optimizer state {:.1f}, activations {:.1f}, workspace {:.1f}) but cluster.gpu.hbm_gib "
        "is {:.1f} ({}; cluster from {}); try more pipeline or tensor parallelism, recomputation or ZeRO",
        stage, gib(use.total()), gib(use.weights), gib(use.gradients), gib(use.optimizer), gib(use.activations),
        gib(use.workspace), gib(g.hbm_bytes), g.name, in_.cluster_source));
  }
}

double CostModel::modelFlopsPerStep() const {
  const auto& m = in_.model;
  const double B = in_.strategy.globalBatch(), s = m.sequence, l = m.layers, h = m.hidden, V = m.vocabulary;
  const double kv = m.kvHidden(), f = m.ffnHidden();
  const double experts = m.isMoe() ? m.experts_per_token : 1;
  // Forward and backward (x 3) of every matrix multiply per token: QKV, output projection, the MLP's
  // two (three gated) matrices for each expert visited, attention's 2 x 2 s h, and the output layer.
  // For GPT (kv = h, f = 4 h) this is Narayanan et al.'s 72 B s l h^2 (1 + s/6h + V/12lh).
  const double per_layer = 2 * h * (h + 2 * kv) + 2 * h * h + 2 * (m.ffn_gated ? 3 : 2) * h * f * experts + 4 * s * h;
  return 3 * B * s * (l * per_layer + 2 * h * V);
}

double CostModel::hardwareFlopsPerStep() const {
  double per_replica = 0;
  for (int vs = 0; vs < virtualStages(); ++vs) per_replica += forward(vs).flops + backward(vs).flops;
  const auto& st = in_.strategy;
  return per_replica * st.tp * st.cp * st.micro_batches * st.dp;
}

}  // namespace gpuxray::simulate
