// Timelines of pipeline-parallel steps for the analyzer's golden tests, worked out from the
// dependencies rather than written by hand. Each stage runs a program of compute items and groups
// of point-to-point transfers, as Megatron-LM issues them for GPipe and 1F1B; a transfer completes
// when both its sender and its receiver have posted it (NCCL's rendezvous), and a stage's GPU runs
// its program in order.
//
//   PipelineStep step{PipelineScheduleKind::kOneFOneB, 4, 4, {1000, 1000, 1500, 1000}, {2000, 2000, 3000, 2000}};
//   PipelineTimeline timeline = simulatePipeline(step);
#pragma once

#include <algorithm>
#include <map>
#include <stdexcept>
#include <tuple>
#include <vector>

namespace gpuxray::testing {

enum class PipelineScheduleKind { kGPipe, kOneFOneB };

struct PipelineStep {
  PipelineScheduleKind kind = PipelineScheduleKind::kOneFOneB;
  int stages = 0;
  int micro_batches = 0;
  std::vector<double> forward_us;   // per stage, per micro-batch
  std::vector<double> backward_us;  // per stage, per micro-batch
  double start_us = 0;
  // (stage, forward?, micro-batch): the host launches that compute this long after the GPU could
  // have started it (a host-bound gap); every other item is launched early.
  std::map<std::tuple<int, bool, int>, double> launch_delays_us;
};

struct PipelineTimeline {
  struct Compute {
    bool forward;
    int micro_batch;
    double start_us, end_us, launch_us;
  };
  struct Transfer {
    bool send;
    int peer;  // stage
    bool forward;
    int micro_batch;
    double start_us, end_us, enqueue_us;
  };
  std::vector<std::vector<Compute>> compute;     // per stage, in order
  std::vector<std::vector<Transfer>> transfers;  // per stage, in order
  double end_us = 0;                             // when the last stage finished
};

namespace pipeline_detail {

struct Message {
  int from, to;
  bool forward;
  int micro_batch;
  auto key() const { return std::make_tuple(from, to, forward, micro_batch); }
};

struct Item {
  bool compute = false;
  bool forward = false;
  int micro_batch = 0;
  std::vector<Message> group;  // when not compute
};

// Megatron-LM's order of work on stage s (schedules.py, forward_backward_pipelining_without_interleaving).
inline std::vector<Item> programOf(const PipelineStep& step, int s) {
  int p = step.stages, m = step.micro_batches;
  std::vector<Item> program;
  auto compute = [&](bool forward, int i) { program.push_back({true, forward, i, {}}); };
  auto group = [&](std::vector<Message> messages) {
    std::erase_if(messages, [p](const Message& x) { return x.from < 0 || x.to < 0 || x.from >= p || x.to >= p; });
    if (!messages.empty()) program.push_back({false, false, 0, std::move(messages)});
  };
  auto recvForward = [&](int i) { return Message{s - 1, s, true, i}; };
  auto sendForward = [&](int i) { return Message{s, s + 1, true, i}; };
  auto recvBackward = [&](int i) { return Message{s + 1, s, false, i}; };
  auto sendBackward = [&](int i) { return Message{s, s - 1, false, i}; };
  if (step.kind == PipelineScheduleKind::kGPipe) {
    for (int i = 0; i < m; ++i) group({recvForward(i)}), compute(true, i), group({sendForward(i)});
    for (int i = 0; i < m; ++i) group({recvBackward(i)}), compute(false, i), group({sendBackward(i)});
    return program;
  }
  int warmup = std::min(p - 1 - s, m), steady = m - warmup;
  for (int i = 0; i < warmup; ++i) group({recvForward(i)}), compute(true, i), group({sendForward(i)});
  if (steady > 0) group({recvForward(warmup)});
  for (int i = 0; i < steady; ++i) {
    compute(true, warmup + i);
    group({sendForward(warmup + i), recvBackward(i)});
    compute(false, i);
    if (i == steady - 1) {
      group({sendBackward(i)});
    } else {
      group({sendBackward(i), recvForward(warmup + i + 1)});
    }
  }
  for (int i = 0; i < warmup; ++i)
    group({recvBackward(steady + i)}), compute(false, steady + i), group({sendBackward(steady + i)});
  return program;
}

}  // namespace pipeline_detail

inline PipelineTimeline simulatePipeline(const PipelineStep& step) {
  using pipeline_detail::Item;
  auto p = static_cast<size_t>(step.stages);
  std::vector<std::vector<Item>> programs;
  for (size_t s = 0; s < p; ++s) programs.push_back(pipeline_detail::programOf(step, static_cast<int>(s)));
  PipelineTimeline timeline;
  timeline.compute.resize(p);
  timeline.transfers.resize(p);
  std::vector<size_t> next(p, 0);
  std::vector<double> gpu_free(p, step.start_us);
  // Post time of each message on its sender's and its receiver's side (-1: not yet).
  std::map<std::tuple<int, int, bool, int>, std::pair<double, double>> posted;
  auto done = [&] {
    for (size_t s = 0; s < p; ++s) {
      if (next[s] < programs[s].size()) return false;
    }
    return true;
  };
  while (!done()) {
    bool progress = false;
    for (size_t s = 0; s < p; ++s) {
      if (next[s] >= programs[s].size()) continue;
      const Item& item = programs[s][next[s]];
      auto stage = static_cast<int>(s);
      double launch = step.start_us + static_cast<double>(next[s]);
      if (item.compute) {
        auto delay = step.launch_delays_us.find({stage, item.forward, item.micro_batch});
        double start = gpu_free[s];
        if (delay != step.launch_delays_us.end()) {
          start += delay->second;
          launch = start - 5;
        }
        double length = (item.forward ? step.forward_us : step.backward_us)[s];
        timeline.compute[s].push_back({item.forward, item.micro_batch, start, start + length, launch});
        gpu_free[s] = start + length;
        ++next[s];
        progress = true;
        continue;
      }
      bool ready = true;
      for (const auto& message : item.group) {
        auto& post = posted.try_emplace(message.key(), -1.0, -1.0).first->second;
        double& mine = message.from == stage ? post.first : post.second;
        if (mine < 0) mine = gpu_free[s];
        if (post.first < 0 || post.second < 0) ready = false;
      }
      if (!ready) continue;
      double completion = gpu_free[s];
      for (const auto& message : item.group) {
        const auto& post = posted[message.key()];
        completion = std::max(completion, std::max(post.first, post.second));
      }
      for (const auto& message : item.group) {
        bool send = message.from == stage;
        timeline.transfers[s].push_back({send, send ? message.to : message.from, message.forward, message.micro_batch,
                                         gpu_free[s], completion, launch});
      }
      gpu_free[s] = completion;
      ++next[s];
      progress = true;
    }
    if (!progress) throw std::logic_error("pipeline schedule deadlocks");
  }
  timeline.end_us = *std::max_element(gpu_free.begin(), gpu_free.end());
  return timeline;
}

}  // namespace gpuxray::testing
