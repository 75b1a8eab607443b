#include "analyzer/simulate/schedule.h"

#include <algorithm>

namespace gpuxray::simulate {

std::vector<PipelineBlock> stageOrder(const StrategySpec& s, int stage) {
  std::vector<PipelineBlock> order;
  const int m = s.micro_batches;
  const int p = s.pp;
  if (s.schedule == Schedule::kGpipe) {
    for (int mb = 0; mb < m; ++mb) order.push_back({true, mb, 0});
    for (int mb = 0; mb < m; ++mb) order.push_back({false, mb, 0});
    return order;
  }
  const int v = s.schedule == Schedule::kInterleaved ? s.chunks : 1;
  const int total = m * v;
  // Unit k of the forward (or backward) sequence: micro-batches go in groups of p through chunk 0,
  // then the same group through chunk 1, ...; backwards visit the chunks in reverse.
  auto unit = [&](int k, bool forward) {
    int group = k / (p * v);
    int chunk = (k / p) % v;
    int mb = group * p + k % p;
    if (v == 1) mb = k, chunk = 0;
    return PipelineBlock{forward, mb, forward ? chunk : v - 1 - chunk};
  };
  int warmup = v == 1 ? std::min(p - stage - 1, m) : std::min((p - stage - 1) * 2 + (v - 1) * p, total);
  int forwards = 0, backwards = 0;
  for (; forwards < warmup; ++forwards) order.push_back(unit(forwards, true));
  while (forwards < total) {
    order.push_back(unit(forwards++, true));
    order.push_back(unit(backwards++, false));
  }
  while (backwards < total) order.push_back(unit(backwards++, false));
  return order;
}

int peakActivationsInFlight(const std::vector<PipelineBlock>& order) {
  int live = 0, peak = 0;
  for (const auto& block : order) {
    live += block.forward ? 1 : -1;
    peak = std::max(peak, live);
  }
  return peak;
}

}  // namespace gpuxray::simulate
