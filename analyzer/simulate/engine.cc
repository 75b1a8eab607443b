#include "analyzer/simulate/engine.h"

#include <algorithm>
#include <stdexcept>

namespace gpuxray::simulate {
namespace {

uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

struct Bucket {
  int chunk = 0;
  int lowest_layer = 0;  // the bucket is complete once this layer's backward is done
  uint64_t parameters = 0;
};

// Gradient buckets of a stage in the order backward fills them: chunks last to first, layers last
// to first, each bucket closed once it holds bucket_bytes of gradients.
std::vector<Bucket> bucketsOf(const CostModel& cost, int stage) {
  const auto& st = cost.inputs().strategy;
  const uint64_t capacity = std::max<uint64_t>(1, st.bucket_bytes / CostModel::kGradientBytes);
  std::vector<Bucket> buckets;
  for (int chunk = st.chunks - 1; chunk >= 0; --chunk) {
    const BlockProgram& bwd = cost.backward(chunk * st.pp + stage);
    Bucket open{chunk, 0, 0};
    for (int layer = static_cast<int>(bwd.layer_parameters.size()) - 1; layer >= 0; --layer) {
      open.parameters += bwd.layer_parameters[static_cast<size_t>(layer)];
      open.lowest_layer = layer;
      if (open.parameters >= capacity || layer == 0) {
        buckets.push_back(open);
        open = {chunk, 0, 0};
      }
    }
  }
  return buckets;
}

}  // namespace

Timeline::Timeline(const CostModel& cost, const Layout& layout) : cost_(cost), layout_(layout) {
  const SimulationInputs& in = cost.inputs();
  const auto& st = in.strategy;
  const auto& p = in.perturbations;
  uniform_ = p.slow_links.empty() && p.stragglers.empty() && p.jitter_pct == 0;
  sim_tp_ = uniform_ ? 1 : st.tp;
  sim_dp_ = uniform_ ? 1 : st.dataGroup();
  jitter_ = p.jitter_pct / 100;
  for (int stage = 0; stage < st.pp; ++stage) orders_.push_back(stageOrder(st, stage));
  steps_.resize(static_cast<size_t>(in.steps));
  std::vector<int64_t> starts(static_cast<size_t>(sim_tp_ * sim_dp_ * st.pp), 0);
  for (int step = 0; step < in.steps; ++step) {
    simulateStep(step, starts);
    for (size_t i = 0; i < starts.size(); ++i) starts[i] = steps_[static_cast<size_t>(step)][i].end;
  }
}

size_t Timeline::simulatedIndex(int rank) const {
  const RankPlace& p = layout_.place(rank);
  return static_cast<size_t>(p.tp % sim_tp_ + sim_tp_ * (p.dp % sim_dp_ + sim_dp_ * p.stage));
}

int Timeline::simulatedRank(size_t index) const {
  const int i = static_cast<int>(index);
  return layout_.rankOf(i % sim_tp_, (i / sim_tp_) % sim_dp_, i / (sim_tp_ * sim_dp_));
}

int64_t Timeline::kernelNs(const ProgramItem& item, int rank, int step, size_t block, size_t item_index) const {
  double ns = static_cast<double>(item.duration_ns) * layout_.timeFactor(rank);
  if (jitter_ > 0) {
    uint64_t h = splitmix(cost_.inputs().seed ^ (static_cast<uint64_t>(rank) << 40));
    h = splitmix(h ^ (static_cast<uint64_t>(step) << 32) ^ (static_cast<uint64_t>(block) << 20) ^ item_index);
    double u = static_cast<double>(h >> 11) * 0x1.0p-53;
    ns *= 1 + jitter_ * (2 * u - 1);
  }
  return std::max<int64_t>(1, static_cast<int64_t>(ns));
}

void Timeline::simulateStep(int step, const std::vector<int64_t>& starts) {
  const auto& st = cost_.inputs().strategy;
  const int pp = st.pp;
  const int vstages = cost_.virtualStages();
  const int m = st.micro_batches;
  const int layers = cost_.layersPerChunk();
  const size_t n = starts.size();
  std::vector<RankStep>& out = steps_[static_cast<size_t>(step)];
  out.assign(n, {});
  std::vector<int64_t> ready = starts;
  for (size_t i = 0; i < n; ++i) out[i].start = starts[i];
  std::vector<std::vector<int64_t>> layer_ready(n, std::vector<int64_t>(static_cast<size_t>(st.chunks * layers), 0));
  // End of each (replica, virtual stage, micro-batch, direction) per member; -1 until simulated.
  auto doneIndex = [&](int d, int vs, int mb, bool forward) {
    return static_cast<size_t>(((d * vstages + vs) * m + mb) * 2 + (forward ? 0 : 1));
  };
  std::vector<int64_t> done(static_cast<size_t>(sim_dp_ * vstages * m * 2 * sim_tp_), -1);
  const uint64_t transfer_bytes = cost_.pipelineTransferBytes();

  std::vector<size_t> cursor(static_cast<size_t>(sim_dp_ * pp), 0);
  std::vector<size_t> index(static_cast<size_t>(sim_tp_));
  std::vector<int> rank(static_cast<size_t>(sim_tp_));
  std::vector<int64_t> t(static_cast<size_t>(sim_tp_));
  size_t remaining = 0;
  for (int s = 0; s < pp; ++s) remaining += orders_[static_cast<size_t>(s)].size() * static_cast<size_t>(sim_dp_);
  while (remaining > 0) {
    bool progress = false;
    for (int s = 0; s < pp; ++s) {
      const auto& order = orders_[static_cast<size_t>(s)];
      for (int d = 0; d < sim_dp_; ++d) {
        size_t& c = cursor[static_cast<size_t>(d + sim_dp_ * s)];
        for (int i = 0; i < sim_tp_; ++i) {
          index[static_cast<size_t>(i)] = static_cast<size_t>(i + sim_tp_ * (d + sim_dp_ * s));
          rank[static_cast<size_t>(i)] = simulatedRank(index[static_cast<size_t>(i)]);
        }
        while (c < order.size()) {
          const PipelineBlock& block = order[c];
          const int vs = block.virtualStage(s, pp);
          int producer = -1;
          if (block.forward && vs > 0) producer = vs - 1;
          if (!block.forward && vs < vstages - 1) producer = vs + 1;
          const size_t producer_done = producer >= 0 ? doneIndex(d, producer, block.micro_batch, block.forward) : 0;
          if (producer >= 0 && done[producer_done * static_cast<size_t>(sim_tp_)] < 0) break;
          for (int i = 0; i < sim_tp_; ++i) {
            const size_t me = index[static_cast<size_t>(i)];
            int64_t begin = ready[me];
            if (producer >= 0) {
              const int ps = producer % pp;
              const size_t sender = static_cast<size_t>(i + sim_tp_ * (d + sim_dp_ * ps));
              const int sender_rank = simulatedRank(sender);
              const double nic = std::min(layout_.nicFactor(sender_rank), layout_.nicFactor(rank[static_cast<size_t>(i)]));
              const auto duration = static_cast<int64_t>(
                  cost_.p2pSeconds(transfer_bytes, layout_.sameNode(sender_rank, rank[static_cast<size_t>(i)]), nic) * 1e9);
              const int64_t sent = done[producer_done * static_cast<size_t>(sim_tp_) + static_cast<size_t>(i)];
              // The transfer starts once the sender has the data and the receiver has posted its
              // receive (when its previous block ended).
              int64_t start = std::max(sent, ready[me]);
              int64_t end = start + duration;
              out[sender].p2p.push_back({true, s, sent, start, end, transfer_bytes});
              out[me].p2p.push_back({false, ps, ready[me], start, end, transfer_bytes});
              begin = std::max(begin, end);
            }
            t[static_cast<size_t>(i)] = begin;
            out[me].block_begin.push_back(begin);
          }
          const BlockProgram& program = block.forward ? cost_.forward(vs) : cost_.backward(vs);
          const bool last_backward = !block.forward && block.micro_batch == m - 1;
          int next_layer = static_cast<int>(program.layer_done_item.size()) - 1;
          if (uniform_) {
            // Identical members and no jitter: the block's time is its programme's.
            if (last_backward) {
              for (int l = 0; l < static_cast<int>(program.layer_done_ns.size()); ++l)
                layer_ready[index[0]][static_cast<size_t>(block.chunk * layers + l)] = t[0] + program.layer_done_ns[static_cast<size_t>(l)];
            }
            t[0] += program.duration_ns;
            next_layer = -1;
          }
          for (size_t k = 0; !uniform_ && k < program.items.size(); ++k) {
            const ProgramItem& item = program.items[k];
            if (item.collective) {
              int64_t start = *std::max_element(t.begin(), t.end());
              for (int i = 0; i < sim_tp_; ++i) {
                out[index[static_cast<size_t>(i)]].collective_start.push_back(start);
                t[static_cast<size_t>(i)] = start + item.duration_ns;
              }
            } else {
              for (int i = 0; i < sim_tp_; ++i) t[static_cast<size_t>(i)] += kernelNs(item, rank[static_cast<size_t>(i)], step, c, k);
            }
            while (last_backward && next_layer >= 0 && program.layer_done_item[static_cast<size_t>(next_layer)] == k) {
              for (int i = 0; i < sim_tp_; ++i)
                layer_ready[index[static_cast<size_t>(i)]][static_cast<size_t>(block.chunk * layers + next_layer)] =
                    t[static_cast<size_t>(i)];
              --next_layer;
            }
          }
          const size_t mine = doneIndex(d, vs, block.micro_batch, block.forward) * static_cast<size_t>(sim_tp_);
          for (int i = 0; i < sim_tp_; ++i) {
            const size_t me = index[static_cast<size_t>(i)];
            done[mine + static_cast<size_t>(i)] = ready[me] = t[static_cast<size_t>(i)];
            out[me].block_end.push_back(t[static_cast<size_t>(i)]);
          }
          ++c;
          --remaining;
          progress = true;
        }
      }
    }
    if (!progress) throw std::logic_error("simulate: the pipeline schedule deadlocked");
  }

  // Gradient reduction over the data-parallel group, bucket by bucket.
  const int dp = st.dataGroup();
  std::vector<int64_t> stream_free = ready;
  for (int s = 0; s < pp; ++s) {
    const std::vector<Bucket> buckets = dp > 1 ? bucketsOf(cost_, s) : std::vector<Bucket>{};
    for (int i = 0; i < sim_tp_; ++i) {
      const GroupLinks links = layout_.links(CommunicatorKind::kData, layout_.rankOf(i, 0, s));
      for (const Bucket& bucket : buckets) {
        CollectiveOp op;
        op.kind = st.zero_stage >= 1 ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce;
        op.bytes = bucket.parameters * CostModel::kGradientBytes / (st.zero_stage >= 1 ? static_cast<uint64_t>(dp) : 1);
        op.start = 0;
        for (int d = 0; d < sim_dp_; ++d) {
          const size_t me = static_cast<size_t>(i + sim_tp_ * (d + sim_dp_ * s));
          int64_t produced = st.overlap_grad_reduce ? layer_ready[me][static_cast<size_t>(bucket.chunk * layers + bucket.lowest_layer)]
                                                    : ready[me];
          op.start = std::max({op.start, produced, stream_free[me]});
        }
        op.end = op.start + static_cast<int64_t>(cost_.collectiveSeconds(op.kind, op.bytes, links) * 1e9);
        for (int d = 0; d < sim_dp_; ++d) {
          const size_t me = static_cast<size_t>(i + sim_tp_ * (d + sim_dp_ * s));
          int64_t produced = st.overlap_grad_reduce ? layer_ready[me][static_cast<size_t>(bucket.chunk * layers + bucket.lowest_layer)]
                                                    : ready[me];
          op.arrive = std::max(produced, stream_free[me]);
          out[me].gradient_ops.push_back(op);
          stream_free[me] = op.end;
        }
      }
    }
  }

  // Gradient norm over each replica's model-parallel group, then the optimizer step.
  for (int d = 0; d < sim_dp_; ++d) {
    CollectiveOp norm;
    norm.kind = CollectiveKind::kAllReduce;
    norm.bytes = 4;
    for (int s = 0; s < pp; ++s)
      for (int i = 0; i < sim_tp_; ++i) {
        const size_t me = static_cast<size_t>(i + sim_tp_ * (d + sim_dp_ * s));
        norm.start = std::max({norm.start, ready[me], stream_free[me]});
      }
    const GroupLinks links = layout_.links(CommunicatorKind::kModel, layout_.rankOf(0, d, 0));
    norm.end = norm.start + static_cast<int64_t>(cost_.collectiveSeconds(norm.kind, norm.bytes, links) * 1e9);
    for (int s = 0; s < pp; ++s) {
      const ProgramItem& optimizer = cost_.optimizerStep(s).items.front();
      for (int i = 0; i < sim_tp_; ++i) {
        const size_t me = static_cast<size_t>(i + sim_tp_ * (d + sim_dp_ * s));
        out[me].grad_norm = norm;
        out[me].grad_norm.arrive = std::max(ready[me], stream_free[me]);
        out[me].optimizer_start = norm.end;
        out[me].optimizer_end = norm.end + kernelNs(optimizer, simulatedRank(me), step, orders_[static_cast<size_t>(s)].size(), 0);
        out[me].end = out[me].optimizer_end;
      }
    }
  }

  // ZeRO: the updated weight shards gathered back, bucket by bucket.
  if (st.zero_stage >= 1 && dp > 1) {
    for (int s = 0; s < pp; ++s) {
      const std::vector<Bucket> buckets = bucketsOf(cost_, s);
      for (int i = 0; i < sim_tp_; ++i) {
        const GroupLinks links = layout_.links(CommunicatorKind::kData, layout_.rankOf(i, 0, s));
        std::vector<int64_t> free(static_cast<size_t>(sim_dp_));
        for (int d = 0; d < sim_dp_; ++d) free[static_cast<size_t>(d)] = out[static_cast<size_t>(i + sim_tp_ * (d + sim_dp_ * s))].optimizer_end;
        for (const Bucket& bucket : buckets) {
          CollectiveOp op;
          op.kind = CollectiveKind::kAllGather;
          op.bytes = bucket.parameters * CostModel::kWeightBytes / static_cast<uint64_t>(dp);
          op.start = *std::max_element(free.begin(), free.end());
          op.end = op.start + static_cast<int64_t>(cost_.collectiveSeconds(op.kind, op.bytes, links) * 1e9);
          for (int d = 0; d < sim_dp_; ++d) {
            auto& rs = out[static_cast<size_t>(i + sim_tp_ * (d + sim_dp_ * s))];
            op.arrive = free[static_cast<size_t>(d)];
            rs.gather_ops.push_back(op);
            rs.end = std::max(rs.end, op.end);
            free[static_cast<size_t>(d)] = op.end;
          }
        }
      }
    }
  }
}

Prediction Timeline::predict() const {
  const SimulationInputs& in = cost_.inputs();
  const auto& st = in.strategy;
  const auto& c = in.cluster;
  Prediction p;
  double step_total = 0, bubble_total = 0, exposed_worst = 0, nic_bytes = 0, nvlink_bytes = 0;
  double exposed_worst_tp = 0, exposed_worst_dp = 0;
  for (const auto& ranks : steps_) {
    int64_t first = ranks.front().start, last = ranks.front().end;
    for (const auto& r : ranks) first = std::min(first, r.start), last = std::max(last, r.end);
    const double step = static_cast<double>(last - first);
    step_total += step;
    // Pipeline bubble: idle of each stage between the pipeline's first block and its last.
    int64_t window_start = ranks.front().block_begin.front(), window_end = ranks.front().block_end.back();
    for (const auto& r : ranks) {
      window_start = std::min(window_start, r.block_begin.front());
      window_end = std::max(window_end, r.block_end.back());
    }
    double idle = 0;
    for (int s = 0; s < st.pp; ++s) {
      const RankStep& r = ranks[static_cast<size_t>(sim_tp_ * sim_dp_ * s)];
      int64_t busy = 0;
      for (size_t b = 0; b < r.block_begin.size(); ++b) busy += r.block_end[b] - r.block_begin[b];
      idle += static_cast<double>(window_end - window_start - busy);
    }
    bubble_total += idle / st.pp / step;
    for (size_t index = 0; index < ranks.size(); ++index) {
      const RankStep& r = ranks[index];
      const int stage = static_cast<int>(index) / (sim_tp_ * sim_dp_);
      const auto& order = orders_[static_cast<size_t>(stage)];
      int64_t tensor_exposed = 0;
      for (const auto& block : order) {
        const int vs = block.virtualStage(stage, st.pp);
        tensor_exposed += block.forward ? cost_.forward(vs).communication_ns : cost_.backward(vs).communication_ns;
      }
      const int64_t data_exposed = (r.optimizer_start - r.block_end.back()) + (r.end - r.optimizer_end);
      if (static_cast<double>(tensor_exposed + data_exposed) / step > exposed_worst) {
        exposed_worst = static_cast<double>(tensor_exposed + data_exposed) / step;
        exposed_worst_tp = static_cast<double>(tensor_exposed) / step;
        exposed_worst_dp = static_cast<double>(data_exposed) / step;
      }
      // Bytes through this rank's NIC (the busier direction) and NVLink.
      const int real = simulatedRank(index);
      uint64_t sent = 0, received = 0;
      for (const auto& op : r.p2p) {
        const int peer = layout_.rankOf(layout_.place(real).tp, layout_.place(real).dp, op.peer_stage);
        if (layout_.sameNode(real, peer)) continue;
        (op.send ? sent : received) += op.bytes;
      }
      const GroupLinks data = layout_.links(CommunicatorKind::kData, real);
      uint64_t collective_bytes = 0;
      for (const auto& op : r.gradient_ops) collective_bytes += cost_.networkBytes(op.kind, op.bytes, data);
      for (const auto& op : r.gather_ops) collective_bytes += cost_.networkBytes(op.kind, op.bytes, data);
      nic_bytes = std::max(nic_bytes, static_cast<double>(std::max(sent, received) + collective_bytes) / step);
      uint64_t tensor_bytes = 0;
      for (const auto& block : order) {
        const int vs = block.virtualStage(stage, st.pp);
        const BlockProgram& prog = block.forward ? cost_.forward(vs) : cost_.backward(vs);
        for (const auto& item : prog.items) {
          if (item.collective) {
            tensor_bytes += static_cast<uint64_t>(busBytes(item.kind, item.bytes, st.tp));
          }
        }
      }
      nvlink_bytes = std::max(nvlink_bytes, static_cast<double>(tensor_bytes) / step);
    }
  }
  const double steps = static_cast<double>(steps_.size());
  p.step_seconds = step_total / steps / 1e9;
  p.tokens_per_second = static_cast<double>(st.globalBatch()) * in.model.sequence / p.step_seconds;
  const double world = st.world();
  p.model_tflops_per_gpu = cost_.modelFlopsPerStep() / p.step_seconds / world / 1e12;
  p.mfu_pct = 100 * cost_.modelFlopsPerStep() / (p.step_seconds * world * c.gpu.peak_bf16_flops);
  p.bubble_pct = 100 * bubble_total / steps;
  p.exposed_comm_pct = 100 * exposed_worst;
  p.exposed_tp_pct = 100 * exposed_worst_tp;
  p.exposed_dp_pct = 100 * exposed_worst_dp;
  for (int s = 0; s < st.pp; ++s) p.memory_per_gpu = std::max(p.memory_per_gpu, cost_.memory(s).total());
  // Per ns of step: bytes/ns = GB/s.
  const double nic_util = c.nic_bandwidth > 0 ? 100 * nic_bytes * 1e9 / c.nic_bandwidth : 0;
  const double nvlink_util = 100 * nvlink_bytes * 1e9 / c.gpu.nvlink_bandwidth;
  p.hottest_link_pct = std::max(nic_util, nvlink_util);
  p.hottest_link = nic_util >= nvlink_util && nic_util > 0 ? "NIC" : "NVLink";
  return p;
}

}  // namespace gpuxray::simulate
