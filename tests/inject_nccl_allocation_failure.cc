// No exception crosses into NCCL: with every allocation the plugin makes failing in turn, each
// entry point still returns to its caller, the plugin turns itself off after the first failure and
// says why, and NCCL's later calls (with whatever handles it holds) are harmless. Built as a program
// of its own (nccl_plugin_allocation_failure_tests), whose operator new fails on demand.

#include <unistd.h>

#include <catch2/catch.hpp>

#include "inject/nccl_plugin.h"
#include "inject/nccl_profiler.h"
#include "tests/support/failing_allocator.h"

using namespace gpuxray;
using namespace gpuxray::inject;

namespace {

constexpr nccl_abi::ProfilerV5 kV5 = profilerV5Table();

nccl_abi::EventDescrV5 event(uint64_t type, void* parent) {
  nccl_abi::EventDescrV5 d{};
  d.type = type;
  d.parent = parent;
  return d;
}

// A communicator's life as NCCL 2.28 plays it: 300 all-reduces (enough to grow every pool), each
// with a kernel channel and a proxy operation of two steps, then the finalize.
void playCommunicator() {
  void* context = nullptr;
  int mask = 0;
  if (kV5.init(&context, 42, &mask, "comm", 1, 2, 0, nullptr) != nccl_abi::kSuccess) return;
  for (uint64_t i = 0; i < 300; ++i) {
    void* handle = nullptr;
    auto api = event(nccl_abi::kCollApi, nullptr);
    kV5.start_event(context, &handle, &api);
    void* call = handle;
    auto group_descr = event(nccl_abi::kGroup, nullptr);
    kV5.start_event(context, &handle, &group_descr);
    void* group = handle;
    auto coll = event(nccl_abi::kColl, call);
    coll.coll.fields = {i, "AllReduce", nullptr, nullptr, 1024, 0, "ncclFloat32", 1, 8, "RING", "LL"};
    coll.coll.parent_group = group;
    kV5.start_event(context, &handle, &coll);
    void* op = handle;
    kV5.stop_event(op);
    kV5.stop_event(group);
    kV5.stop_event(call);
    auto proxy = event(nccl_abi::kProxyOp, op);
    proxy.proxy_op = {getpid(), 0, 1, 2, 4096, 1};
    kV5.start_event(context, &handle, &proxy);
    void* proxy_op = handle;
    for (int s = 0; s < 2; ++s) {
      auto step = event(nccl_abi::kProxyStep, proxy_op);
      step.proxy_step = {s};
      kV5.start_event(context, &handle, &step);
      nccl_abi::EventStateArgs args{};
      args.proxy_step.trans_size = 2048;
      kV5.record_event_state(handle, nccl_abi::kProxyStepSendWait, &args);
      kV5.stop_event(handle);
    }
    kV5.stop_event(proxy_op);
    auto channel = event(nccl_abi::kKernelCh, op);
    channel.kernel_ch = {0, 1000 + i};
    kV5.start_event(context, &handle, &channel);
    nccl_abi::EventStateArgs stopped{};
    stopped.kernel_ch.gpu_timer = 2000 + i;
    kV5.record_event_state(handle, nccl_abi::kKernelChStop, &stopped);
    kV5.stop_event(handle);
  }
  kV5.finalize(context);
}

}  // namespace

TEST_CASE("nccl: an allocation failing anywhere in the plugin turns it off; nothing throws into NCCL") {
  uint64_t ticks = 0;
  int failures_seen = 0;
  for (int64_t after = 0;; ++after) {
    NcclProfiler profiler([&] { return ticks += 10; }, 0, [] { return 0u; });
    setNcclProfiler(&profiler);
    testing::failAllocationAfter(after);
    playCommunicator();  // an exception out of an entry point would end the test program here
    bool failed = testing::allocationFailed();
    testing::failAllocationAfter(-1);
    NcclProfilerStats stats = profiler.stats();
    setNcclProfiler(nullptr);
    if (!failed) {
      CHECK(stats.internal_errors == 0);
      CHECK(profiler.takeCompleted().size() == 300);
      break;
    }
    ++failures_seen;
    INFO("allocation " << after << " failed");
    CHECK(stats.internal_errors <= 1);
    if (stats.internal_errors == 1) CHECK(stats.first_internal_error.find("bad_alloc") != std::string::npos);
  }
  // The plugin allocates in init, when its pools grow and when its queues grow.
  CHECK(failures_seen >= 5);
}
