// The NCCL profiler plugin, driven the way NCCL drives it: through the v5 (and v4) tables, with
// operations enqueued on the user thread, proxy work on the proxy thread and kernel channels on
// a host-callback thread.

#include <unistd.h>

#include <atomic>
#include <set>
#include <catch2/catch.hpp>
#include <thread>

#include "inject/nccl_plugin.h"
#include "inject/nccl_profiler.h"

namespace {

using namespace gpuxray;
using namespace gpuxray::inject;

constexpr nccl_abi::ProfilerV5 kNcclProfilerV5 = profilerV5Table();
constexpr nccl_abi::ProfilerV4 kNcclProfilerV4 = profilerV4Table();

// A plugin session: a profiler with a counting clock, installed as the tables' target. Its calls
// run on NCCL-like threads too, where Catch's assertions are not allowed: failed calls are counted
// and checked on the test's thread.
struct PluginFixture {
  std::atomic<uint64_t> ticks{1000};
  std::atomic<int> failed_calls{0};
  NcclProfiler profiler;
  void* context = nullptr;
  int mask = 0;

  explicit PluginFixture(size_t ring_slots = 64) : profiler([this] { return ticks += 10; }, 3, [] { return 1u; }, ring_slots) {
    setNcclProfiler(&profiler);
    REQUIRE(kNcclProfilerV5.init(&context, 0xC0FFEE, &mask, "dp", 2, 8, 3, nullptr) == nccl_abi::kSuccess);
  }
  ~PluginFixture() { setNcclProfiler(nullptr); }

  void* start(nccl_abi::EventDescrV5 descr) {
    void* handle = nullptr;
    count(kNcclProfilerV5.start_event(context, &handle, &descr));
    return handle;
  }
  void state(void* handle, int state, nccl_abi::EventStateArgs args = {}) {
    count(kNcclProfilerV5.record_event_state(handle, state, &args));
  }
  void stop(void* handle) { count(kNcclProfilerV5.stop_event(handle)); }
  void count(nccl_abi::Result result) {
    if (result != nccl_abi::kSuccess) ++failed_calls;
  }
};

nccl_abi::EventDescrV5 coll(const char* func, uint64_t seq, size_t count, const char* type, uint8_t channels) {
  nccl_abi::EventDescrV5 d{};
  d.type = nccl_abi::kColl;
  d.coll.fields = {seq, func, nullptr, nullptr, count, 0, type, channels, 16, "RING", "SIMPLE"};
  return d;
}

nccl_abi::EventDescrV5 p2p(const char* func, int peer, size_t count) {
  nccl_abi::EventDescrV5 d{};
  d.type = nccl_abi::kP2p;
  d.p2p.fields = {func, nullptr, "ncclBfloat16", count, peer, 1};
  return d;
}

nccl_abi::EventDescrV5 child(uint64_t type, void* parent) {
  nccl_abi::EventDescrV5 d{};
  d.type = type;
  d.parent = parent;
  return d;
}

}  // namespace

TEST_CASE("nccl: the plugin asks for operations, proxy work and kernel channels, and records the communicator") {
  PluginFixture plugin;
  CHECK(NcclProfiler::activationMask() == (nccl_abi::kColl | nccl_abi::kP2p | nccl_abi::kProxyOp |
                                           nccl_abi::kProxyStep | nccl_abi::kKernelCh));
  // From v5 on, also the API calls, for whether an operation was captured into a CUDA graph.
  CHECK(plugin.mask == (NcclProfiler::activationMask() | static_cast<int>(nccl_abi::kCollApi | nccl_abi::kP2pApi)));
  auto comms = plugin.profiler.takeCommunicators();
  REQUIRE(comms.size() == 1);
  CHECK(comms[0].comm_hash == 0xC0FFEE);
  CHECK(comms[0].name == "dp");
  CHECK(comms[0].comm_rank == 3);
  CHECK(comms[0].nranks == 8);
  CHECK(comms[0].nnodes == 2);
  CHECK(comms[0].global_rank == 3);
  CHECK(comms[0].device == 1);
  CHECK(comms[0].profiler_version == 5);
}

TEST_CASE("nccl: an all-reduce over 2 channels with network proxy work, from NCCL's three threads") {
  PluginFixture plugin;
  void* op = plugin.start(coll("AllReduce", 7, 1 << 20, "ncclFloat32", 2));
  REQUIRE(op != nullptr);
  plugin.stop(op);  // enqueued: not complete until both channels' kernels stop
  CHECK(plugin.profiler.takeCompleted().empty());

  std::thread proxy([&] {
    for (uint8_t channel = 0; channel < 2; ++channel) {
      auto descr = child(nccl_abi::kProxyOp, op);
      descr.proxy_op = {getpid(), channel, 4, 2, 1 << 19, 1};
      void* proxy_op = plugin.start(descr);
      for (int step = 0; step < 2; ++step) {
        auto step_descr = child(nccl_abi::kProxyStep, proxy_op);
        step_descr.proxy_step.step = step;
        void* s = plugin.start(step_descr);
        plugin.state(s, nccl_abi::kProxyStepSendGpuWait);
        plugin.state(s, nccl_abi::kProxyStepSendPeerWait);
        nccl_abi::EventStateArgs sent{};
        sent.proxy_step.trans_size = 1 << 19;
        plugin.state(s, nccl_abi::kProxyStepSendWait, sent);
        plugin.stop(s);
      }
      plugin.stop(proxy_op);
    }
  });
  std::thread host_callback([&] {
    for (uint8_t channel = 0; channel < 2; ++channel) {
      auto descr = child(nccl_abi::kKernelCh, op);
      descr.kernel_ch = {channel, 5'000'000u + channel * 100u};
      void* kernel = plugin.start(descr);
      nccl_abi::EventStateArgs stopped{};
      stopped.kernel_ch.gpu_timer = 5'900'000u + channel * 50u;
      plugin.state(kernel, nccl_abi::kKernelChStop, stopped);
      plugin.stop(kernel);
    }
  });
  proxy.join();
  host_callback.join();
  CHECK(plugin.failed_calls == 0);

  auto done = plugin.profiler.takeCompleted();
  REQUIRE(done.size() == 1);
  const auto& r = done[0].record;
  CHECK(r.kind == format::NcclOperationKind::kCollective);
  CHECK(r.comm_hash == 0xC0FFEE);
  CHECK(r.seq == 7);
  CHECK(r.count == (1u << 20));
  CHECK(r.bytes == (4u << 20));
  CHECK(r.channels == 2);
  CHECK(r.warps == 16);
  CHECK(r.device == 1);
  CHECK(r.gpu_start_ns == 5'000'000);
  CHECK(r.gpu_end_ns == 5'900'050);
  CHECK(r.enqueue_ns > 0);
  CHECK(r.enqueue_end_ns > r.enqueue_ns);
  CHECK(done[0].func == "AllReduce");
  CHECK(done[0].datatype == "ncclFloat32");
  CHECK(done[0].algorithm == "RING");
  CHECK(done[0].protocol == "SIMPLE");

  auto transfers = plugin.profiler.takeTransfers();
  REQUIRE(transfers.size() == 2);
  for (const auto& t : transfers) {
    CHECK(t.operation_id == r.operation_id);
    CHECK(t.comm_hash == 0xC0FFEE);
    CHECK(t.peer == 4);
    CHECK(t.is_send);
    CHECK(t.steps == 2);
    CHECK(t.bytes == (1u << 20));
    // Each of the two steps spent at least one tick (10 ns; more when the other thread read the
    // clock in between) in each wait: GPU, peer, network.
    CHECK(t.wait_gpu_ns >= 20);
    CHECK(t.wait_peer_ns >= 20);
    CHECK(t.wait_network_ns >= 20);
    CHECK(t.wait_gpu_ns + t.wait_peer_ns + t.wait_network_ns <= t.end_ns - t.start_ns);
    CHECK(t.end_ns > t.start_ns);
  }
  CHECK(transfers[0].channel != transfers[1].channel);
  CHECK(plugin.profiler.stats().dropped_events == 0);
}

TEST_CASE("nccl: an all-gather's count is already in bytes (int8), grouped send/recv become p2p records") {
  PluginFixture plugin;
  void* gather = plugin.start(coll("AllGather", 1, 3000, "ncclInt8", 0));
  void* send = plugin.start(p2p("Send", 5, 100));
  void* recv = plugin.start(p2p("Recv", 6, 200));
  for (void* h : {gather, send, recv}) plugin.stop(h);
  // No kernel channels were announced for the p2p ops (1 channel each): they finish at finalize.
  CHECK(plugin.profiler.takeCompleted().size() == 1);
  REQUIRE(kNcclProfilerV5.finalize(plugin.context) == nccl_abi::kSuccess);
  auto rest = plugin.profiler.takeCompleted();
  REQUIRE(rest.size() == 2);
  CHECK(rest[0].record.kind == format::NcclOperationKind::kSend);
  CHECK(rest[0].record.peer == 5);
  CHECK(rest[0].record.bytes == 200);
  CHECK(rest[1].record.kind == format::NcclOperationKind::kRecv);
  CHECK(rest[1].record.peer == 6);
  CHECK(rest[1].record.bytes == 400);
  CHECK(rest[0].record.gpu_start_ns == 0);
}

TEST_CASE("nccl: a PXN proxy operation of another process never touches its parent") {
  PluginFixture plugin;
  auto descr = child(nccl_abi::kProxyOp, reinterpret_cast<void*>(0x1));  // not ours to read
  descr.proxy_op = {getpid() + 1, 3, 2, 1, 4096, 0};
  void* proxy_op = plugin.start(descr);
  REQUIRE(proxy_op != nullptr);
  plugin.stop(proxy_op);
  auto transfers = plugin.profiler.takeTransfers();
  REQUIRE(transfers.size() == 1);
  CHECK(transfers[0].operation_id == 0);
  CHECK(transfers[0].channel == 3);
  CHECK_FALSE(transfers[0].is_send);
  CHECK(plugin.profiler.stats().foreign_proxy_ops == 1);
}

TEST_CASE("nccl: when the event ring is full, new events are dropped and counted, never blocking") {
  PluginFixture plugin(4);
  std::vector<void*> handles;
  for (int i = 0; i < 5; ++i) handles.push_back(plugin.start(coll("AllReduce", static_cast<uint64_t>(i), 8, "ncclFloat32", 1)));
  CHECK(handles[3] != nullptr);
  CHECK(handles[4] == nullptr);
  CHECK(plugin.profiler.stats().dropped_events == 1);
  // NCCL goes on calling with the null handle.
  plugin.state(handles[4], nccl_abi::kKernelChStop);
  plugin.stop(handles[4]);
  REQUIRE(kNcclProfilerV5.finalize(plugin.context) == nccl_abi::kSuccess);
  CHECK(plugin.profiler.takeCompleted().size() == 4);
}

TEST_CASE("nccl: without a capture, init refuses, which turns NCCL's profiling off for the communicator") {
  setNcclProfiler(nullptr);
  void* context = nullptr;
  int mask = 0;
  CHECK(kNcclProfilerV5.init(&context, 1, &mask, nullptr, 1, 1, 0, nullptr) != nccl_abi::kSuccess);
  CHECK(kNcclProfilerV4.init(&context, &mask, nullptr, 1, 1, 1, 0, nullptr) != nccl_abi::kSuccess);
}

TEST_CASE("nccl: the v4 table (NCCL 2.27) records the same operation") {
  std::atomic<uint64_t> ticks{0};
  NcclProfiler profiler([&] { return ticks += 10; }, 0, [] { return 0u; });
  setNcclProfiler(&profiler);
  void* context = nullptr;
  int mask = 0;
  REQUIRE(kNcclProfilerV4.init(&context, &mask, "tp", 0xBEEF, 1, 2, 0, nullptr) == nccl_abi::kSuccess);
  nccl_abi::EventDescrV4 descr{};
  descr.type = nccl_abi::kColl;
  descr.coll = {42, "ReduceScatter", nullptr, nullptr, 1000, 0, "ncclBfloat16", 0, 8, "RING", "LL128"};
  void* op = nullptr;
  REQUIRE(kNcclProfilerV4.start_event(context, &op, &descr) == nccl_abi::kSuccess);
  REQUIRE(kNcclProfilerV4.stop_event(op) == nccl_abi::kSuccess);
  auto done = profiler.takeCompleted();
  REQUIRE(done.size() == 1);
  CHECK(done[0].record.comm_hash == 0xBEEF);
  CHECK(done[0].record.seq == 42);
  CHECK(done[0].record.bytes == 2000);
  CHECK(done[0].protocol == "LL128");
  CHECK(profiler.takeCommunicators().at(0).profiler_version == 4);
  setNcclProfiler(nullptr);
}

TEST_CASE("nccl: the v6 table (NCCL 2.29+) reads v5's descriptors and says which version NCCL picked") {
  constexpr nccl_abi::ProfilerV6 v6 = profilerV6Table();
  std::atomic<uint64_t> ticks{0};
  NcclProfiler profiler([&] { return ticks += 10; }, 0, [] { return 0u; });
  setNcclProfiler(&profiler);
  void* context = nullptr;
  int mask = 0;
  REQUIRE(v6.init(&context, 0xF00D, &mask, nullptr, 1, 1, 0, nullptr) == nccl_abi::kSuccess);
  nccl_abi::EventDescrV5 descr = coll("Broadcast", 9, 512, "ncclInt8", 0);
  void* op = nullptr;
  REQUIRE(v6.start_event(context, &op, &descr) == nccl_abi::kSuccess);
  REQUIRE(v6.stop_event(op) == nccl_abi::kSuccess);
  auto done = profiler.takeCompleted();
  REQUIRE(done.size() == 1);
  CHECK(done[0].func == "Broadcast");
  CHECK(done[0].record.bytes == 512);
  CHECK(profiler.takeCommunicators().at(0).profiler_version == 6);
  setNcclProfiler(nullptr);
}

TEST_CASE("nccl: datatype sizes follow NCCL's names") {
  CHECK(ncclTypeSize("ncclFloat32") == 4);
  CHECK(ncclTypeSize("ncclBfloat16") == 2);
  CHECK(ncclTypeSize("ncclInt64") == 8);
  CHECK(ncclTypeSize("Unknown") == 1);
  CHECK(ncclTypeSize(nullptr) == 1);
}

TEST_CASE("nccl: operations from several threads at once are all recorded, each once") {
  PluginFixture plugin(4096);
  constexpr int kThreads = 4;
  constexpr int kOperationsPerThread = 200;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&plugin, t] {
      for (int i = 0; i < kOperationsPerThread; ++i) {
        void* op = plugin.start(coll("AllReduce", static_cast<uint64_t>(t * kOperationsPerThread + i), 256,
                                     "ncclFloat32", 1));
        plugin.stop(op);
        auto descr = child(nccl_abi::kKernelCh, op);
        descr.kernel_ch = {0, 100};
        void* kernel = plugin.start(descr);
        nccl_abi::EventStateArgs stopped{};
        stopped.kernel_ch.gpu_timer = 200;
        plugin.state(kernel, nccl_abi::kKernelChStop, stopped);
        plugin.stop(kernel);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  CHECK(plugin.failed_calls == 0);
  auto done = plugin.profiler.takeCompleted();
  REQUIRE(done.size() == kThreads * kOperationsPerThread);
  std::set<uint64_t> seqs;
  for (const auto& op : done) {
    seqs.insert(op.record.seq);
    CHECK(op.record.gpu_end_ns == 200);
  }
  CHECK(seqs.size() == done.size());
  CHECK(plugin.profiler.stats().dropped_events == 0);
}
