// What the NCCL profiler plugin costs NCCL per event, called through the exported v5 table as NCCL
// 2.28 calls it, with the capture's clock (CLOCK_REALTIME, as without CUPTI) behind a
// std::function as in the capture. The peer: one read of that clock, which any event that records
// a time must make; each figure is also given as a multiple of it.
//
//   nccl_plugin_benchmark [--events N] [--threads N]
//
// Cases: ProxyStep start+stop; ProxyStep start + SendWait state + stop; Coll start+stop (no
// kernel channels, so it completes at its stop and is queued for writing); and the same Coll and
// ProxyStep pairs on --threads threads at once, each on a communicator of its own. Times are each
// thread's CPU time, so that other programs on a shared machine do not count. Targets
// (reported, not enforced): ProxyStep start+stop <= 50 ns, Coll start+stop <= 200 ns.
//
// The program uses only the plugin's tables and NcclProfiler's constructor, so the same source
// builds against an earlier version of the plugin for a before/after comparison.

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "inject/nccl_plugin.h"
#include "inject/nccl_profiler.h"

namespace {

using namespace gpuxray::inject;
// The calling thread's CPU time: on a shared machine, wall time would count other programs' turns.
struct Clock {
  using duration = std::chrono::nanoseconds;
  static duration now() {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return duration(static_cast<int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec);
  }
};

constexpr nccl_abi::ProfilerV5 kV5 = profilerV5Table();
constexpr int kBatch = 2048;  // events between drains, as the capture thread drains every flush

uint64_t realtimeNs() {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(now.tv_nsec);
}

double seconds(Clock::duration d) {
  return static_cast<double>(d.count()) * 1e-9;
}

nccl_abi::EventDescrV5 event(uint64_t type, void* parent) {
  nccl_abi::EventDescrV5 d{};
  d.type = type;
  d.parent = parent;
  return d;
}

void* initCommunicator(uint64_t hash) {
  void* context = nullptr;
  int mask = 0;
  if (kV5.init(&context, hash, &mask, "bench", 1, 8, 0, nullptr) != nccl_abi::kSuccess) {
    std::fprintf(stderr, "nccl_plugin_benchmark: init refused\n");
    std::exit(1);
  }
  return context;
}

// ns per pair of calls: ProxyStep start+stop under one proxy operation (NCCL_STEPS at a time).
double proxySteps(void* context, size_t events, bool with_state) {
  auto descr = event(nccl_abi::kProxyOp, nullptr);
  descr.proxy_op = {getpid(), 0, 1, 8, 1 << 17, 1};
  Clock::duration timed{};
  nccl_abi::EventStateArgs args{};
  args.proxy_step.trans_size = 1 << 17;
  for (size_t done = 0; done < events; done += kBatch) {
    void* proxy_op = nullptr;
    kV5.start_event(context, &proxy_op, &descr);
    auto begin = Clock::now();
    for (int i = 0; i < kBatch; ++i) {
      auto step = event(nccl_abi::kProxyStep, proxy_op);
      step.proxy_step = {i};
      void* handle = nullptr;
      kV5.start_event(context, &handle, &step);
      if (with_state) kV5.record_event_state(handle, nccl_abi::kProxyStepSendWait, &args);
      kV5.stop_event(handle);
    }
    timed += Clock::now() - begin;
    kV5.stop_event(proxy_op);
  }
  return seconds(timed) * 1e9 / static_cast<double>(events);
}

// ns per Coll start+stop (each completes at its stop: no kernel channels asked for).
double collectives(NcclProfiler& profiler, void* context, size_t events, bool drain) {
  Clock::duration timed{};
  for (size_t done = 0; done < events; done += kBatch) {
    auto begin = Clock::now();
    for (int i = 0; i < kBatch; ++i) {
      auto coll = event(nccl_abi::kColl, nullptr);
      coll.coll.fields = {done + static_cast<size_t>(i),
                          "AllReduce",
                          nullptr,
                          nullptr,
                          1 << 20,
                          0,
                          "ncclFloat32",
                          0,
                          16,
                          "RING",
                          "SIMPLE"};
      void* handle = nullptr;
      kV5.start_event(context, &handle, &coll);
      kV5.stop_event(handle);
    }
    timed += Clock::now() - begin;
    if (drain) profiler.takeCompleted();
  }
  return seconds(timed) * 1e9 / static_cast<double>(events);
}

}  // namespace

int main(int argc, char** argv) {
  size_t events = 2'000'000;
  int threads = 8;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--events") == 0) events = std::strtoull(argv[i + 1], nullptr, 10);
    if (std::strcmp(argv[i], "--threads") == 0) threads = std::atoi(argv[i + 1]);
  }
  events = std::max<size_t>(kBatch, events / kBatch * kBatch);

  std::function<uint64_t()> now = realtimeNs;
  auto begin = Clock::now();
  uint64_t sink = 0;
  for (size_t i = 0; i < events; ++i) sink += now();
  double clock_ns = seconds(Clock::now() - begin) * 1e9 / static_cast<double>(events);

  NcclProfiler profiler(now, 0, [] { return 0u; });
  setNcclProfiler(&profiler);
  void* context = initCommunicator(1);
  proxySteps(context, events / 10, false);  // warm the pools
  double step = proxySteps(context, events, false);
  double step_state = proxySteps(context, events, true);
  profiler.takeTransfers();
  double coll = collectives(profiler, context, events, true);

  std::vector<double> coll_mt(static_cast<size_t>(threads)), step_mt(static_cast<size_t>(threads));
  std::vector<void*> contexts;
  for (int t = 0; t < threads; ++t) contexts.push_back(initCommunicator(100 + static_cast<uint64_t>(t)));
  std::atomic<bool> go{false};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      while (!go.load()) {
      }
      coll_mt[static_cast<size_t>(t)] = collectives(profiler, contexts[static_cast<size_t>(t)], events / 4, true);
      step_mt[static_cast<size_t>(t)] = proxySteps(contexts[static_cast<size_t>(t)], events / 4, false);
    });
  }
  // The capture thread drains every communicator once a millisecond meanwhile.
  std::atomic<bool> done{false};
  std::thread capture([&] {
    while (!done.load()) {
      profiler.takeCompleted();
      profiler.takeTransfers();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  go.store(true);
  for (auto& worker : workers) worker.join();
  done.store(true);
  capture.join();
  double coll_worst = *std::max_element(coll_mt.begin(), coll_mt.end());
  double step_worst = *std::max_element(step_mt.begin(), step_mt.end());
  setNcclProfiler(nullptr);

  std::printf("peer: one capture-clock read          %7.1f ns\n", clock_ns);
  std::printf("ProxyStep start+stop                 %7.1f ns  (%.1fx the clock read; target <= 50 ns)\n", step,
              step / clock_ns);
  std::printf("ProxyStep start+SendWait+stop        %7.1f ns  (%.1fx)\n", step_state, step_state / clock_ns);
  std::printf("Coll start+stop                      %7.1f ns  (%.1fx; target <= 200 ns)\n", coll, coll / clock_ns);
  std::printf(
      "%d threads, %d communicators: Coll start+stop %7.1f ns, ProxyStep start+stop %7.1f ns (slowest thread)\n",
      threads, threads, coll_worst, step_worst);
  std::printf("(%zu events per case; dropped %llu; checksum %llu)\n", events,
              static_cast<unsigned long long>(profiler.stats().dropped_events),
              static_cast<unsigned long long>(sink % 7));
  return 0;
}
