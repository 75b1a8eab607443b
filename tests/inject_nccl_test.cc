// The NCCL profiler plugin, driven the way NCCL drives it: through the v5 table (and v1-v4, v6),
// with operations enqueued on the user thread (or, for graph replays, a host-callback thread),
// proxy work on the proxy thread and kernel channels on another thread.

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <set>
#include <catch2/catch.hpp>
#include <string>
#include <thread>
#include <vector>

#include "inject/capture_window.h"
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
  // Groups too: through v4 NCCL starts Coll and P2p events only under a group handle.
  CHECK(NcclProfiler::activationMask() == (nccl_abi::kGroup | nccl_abi::kColl | nccl_abi::kP2p | nccl_abi::kProxyOp |
                                           nccl_abi::kProxyStep | nccl_abi::kKernelCh));
  // From v5 on, also the API calls and kernel launches: whether an operation was captured into a
  // CUDA graph, and host times before its kernel.
  CHECK(plugin.mask ==
        (NcclProfiler::activationMask() |
         static_cast<int>(nccl_abi::kGroupApi | nccl_abi::kCollApi | nccl_abi::kP2pApi | nccl_abi::kKernelLaunch)));
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

TEST_CASE("nccl: when the event pool is at its bound, new events are dropped and counted, never blocking") {
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

TEST_CASE("nccl: --steps without step ranges: the plugin's all-reduces count the steps, and only the window's are assembled") {
  PluginFixture plugin;
  inject::WindowPlan plan;
  plan.steps = std::pair<int64_t, int64_t>{3, 3};
  std::atomic<uint64_t> clock{0};
  CaptureWindows windows(plan, 0);
  windows.countStepsByCollectives([&clock] { return clock.load(); });
  std::vector<bool> assembled;
  uint64_t seq = 0;
  for (uint64_t step = 0; step < 6; ++step) {
    uint64_t at = 1000 * step + 400;
    for (size_t bucket : {1u << 18, 25u << 18, 5u << 18}) {
      clock = at;
      at += 100;
      void* op = plugin.start(coll("AllReduce", seq++, bucket, "ncclFloat32", 2));
      assembled.push_back(op != nullptr);
      if (op != nullptr) plugin.stop(op);
    }
    // A broadcast is not an all-reduce: it neither counts nor breaks the pattern.
    void* other = plugin.start(coll("Broadcast", seq++, 64, "ncclInt8", 1));
    if (other != nullptr) plugin.stop(other);
  }
  CHECK(plugin.failed_calls == 0);
  // Steps 0-2 pass before the pattern is known; step 3's three all-reduces, the first of which
  // opens the window, are assembled; step 4's first closes it.
  std::vector<bool> expected(18, false);
  expected[9] = expected[10] = expected[11] = true;
  CHECK(assembled == expected);
  auto closed = windows.takeClosed();
  REQUIRE(closed.size() == 1);
  CHECK(closed[0].start_ns == 3400);
  CHECK(closed[0].end_ns == 4400);
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

namespace {

// A profiler with a counting clock, global rank 2 on device 3, installed as the tables' target.
struct BareProfiler {
  std::atomic<uint64_t> ticks{0};
  NcclProfiler profiler{[this] { return ticks += 10; }, 2, [] { return 3u; }};
  BareProfiler() { setNcclProfiler(&profiler); }
  ~BareProfiler() { setNcclProfiler(nullptr); }
};

template <typename Table, typename Descr>
void* startWith(const Table& table, void* context, Descr descr) {
  void* handle = nullptr;
  REQUIRE(table.start_event(context, &handle, &descr) == nccl_abi::kSuccess);
  return handle;
}

}  // namespace

TEST_CASE("nccl: v1 gives NCCL 2.23's enum values, named as later versions name them") {
  // ncclFunc_t, ncclDataType_t (nccl.h), NCCL_ALGO_*, NCCL_PROTO_*.
  CHECK(std::string(ncclFuncName(0)) == "Broadcast");
  CHECK(std::string(ncclFuncName(2)) == "AllGather");
  CHECK(std::string(ncclFuncName(4)) == "AllReduce");
  CHECK(std::string(ncclFuncName(6)) == "Send");
  CHECK(std::string(ncclFuncName(7)) == "Recv");
  CHECK(std::string(ncclFuncName(8)) == "Invalid");
  CHECK(std::string(ncclDatatypeName(7)) == "ncclFloat32");
  CHECK(std::string(ncclDatatypeName(9)) == "ncclBfloat16");
  CHECK(std::string(ncclDatatypeName(11)) == "ncclFloat8e5m2");
  CHECK(std::string(ncclDatatypeName(12)) == "Unknown");
  // Every datatype name is one ncclTypeSize knows, with nccl.h's sizes.
  const size_t sizes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  for (uint8_t code = 0; code < 12; ++code) {
    INFO("ncclDataType_t " << int(code) << " = " << ncclDatatypeName(code));
    CHECK(ncclTypeSize(ncclDatatypeName(code)) == sizes[code]);
  }
  CHECK(std::string(ncclAlgorithmName(0)) == "TREE");
  CHECK(std::string(ncclAlgorithmName(1)) == "RING");
  CHECK(std::string(ncclAlgorithmName(6)) == "PAT");
  CHECK(std::string(ncclAlgorithmName(7)) == "Unknown");
  CHECK(std::string(ncclProtocolName(0)) == "LL");
  CHECK(std::string(ncclProtocolName(1)) == "LL128");
  CHECK(std::string(ncclProtocolName(2)) == "SIMPLE");
  CHECK(std::string(ncclProtocolName(3)) == "Unknown");
}

TEST_CASE("nccl: the v1 table (NCCL 2.23) records an operation and learns its communicator from it") {
  constexpr nccl_abi::ProfilerV1 v1 = profilerV1Table();
  BareProfiler bare;
  NcclProfiler& profiler = bare.profiler;
  void* context = nullptr;
  int mask = 0;
  REQUIRE(v1.init(&context, &mask) == nccl_abi::kSuccess);
  CHECK(mask == NcclProfiler::activationMask());
  CHECK(profiler.takeCommunicators().empty());  // init names no communicator

  nccl_abi::EventDescrV1 coll{};
  coll.type = nccl_abi::kColl;
  coll.rank = 5;
  // ReduceScatter (3) of bfloat16 (9), PAT (6), LL128 (1).
  coll.coll = {"dp", 0xD1, 11, 3, nullptr, nullptr, 1000, 0, 9, 0, 8000, 4, 8, 6, 1, 0, 0};
  void* op = startWith(v1, context, coll);
  REQUIRE(op != nullptr);

  // A network send: the proxy operation reports its bytes so far, its step only its states.
  nccl_abi::EventDescrV1 proxy_descr{};
  proxy_descr.type = nccl_abi::kProxyOp;
  proxy_descr.parent = op;
  proxy_descr.proxy_op = {getpid(), 1, 6, 2, 1024, 1};
  void* proxy_op = startWith(v1, context, proxy_descr);
  nccl_abi::EventDescrV1 step_descr{};
  step_descr.type = nccl_abi::kProxyStep;
  step_descr.parent = proxy_op;
  void* step = startWith(v1, context, step_descr);
  nccl_abi::EventStateArgsV1 progress{};
  progress.proxy_op = {0, 1};
  CHECK(v1.record_event_state(proxy_op, nccl_abi::kProxyOpSendPosted, &progress) == nccl_abi::kSuccess);
  CHECK(v1.record_event_state(step, nccl_abi::kProxyStepSendGpuWait, nullptr) == nccl_abi::kSuccess);
  CHECK(v1.record_event_state(step, nccl_abi::kProxyStepSendWait, nullptr) == nccl_abi::kSuccess);
  progress.proxy_op = {1500, 1};
  CHECK(v1.record_event_state(proxy_op, nccl_abi::kProxyOpSendTransmitted, &progress) == nccl_abi::kSuccess);
  CHECK(v1.stop_event(step) == nccl_abi::kSuccess);
  progress.proxy_op = {3000, 2};
  CHECK(v1.record_event_state(proxy_op, nccl_abi::kProxyOpSendDone, &progress) == nccl_abi::kSuccess);
  CHECK(v1.stop_event(proxy_op) == nccl_abi::kSuccess);
  // Without kernel channels before v3, a stopped (enqueued) operation is complete.
  CHECK(v1.stop_event(op) == nccl_abi::kSuccess);

  nccl_abi::EventDescrV1 recv{};
  recv.type = nccl_abi::kP2p;
  recv.rank = 5;
  recv.p2p = {"dp", 0xD1, 7, nullptr, 1, 300, 2};  // Recv of uint8
  CHECK(v1.stop_event(startWith(v1, context, recv)) == nccl_abi::kSuccess);

  auto done = profiler.takeCompleted();
  REQUIRE(done.size() == 2);
  const auto& r = done[0].record;
  CHECK(r.kind == format::NcclOperationKind::kCollective);
  CHECK(r.comm_hash == 0xD1);
  CHECK(r.seq == 11);
  CHECK(r.count == 1000);
  CHECK(r.bytes == 2000);
  CHECK(r.channels == 4);
  CHECK(r.warps == 8);
  CHECK(r.device == 3);
  CHECK(r.gpu_start_ns == 0);
  CHECK(done[0].func == "ReduceScatter");
  CHECK(done[0].datatype == "ncclBfloat16");
  CHECK(done[0].algorithm == "PAT");
  CHECK(done[0].protocol == "LL128");
  CHECK(done[1].record.kind == format::NcclOperationKind::kRecv);
  CHECK(done[1].func == "Recv");
  CHECK(done[1].datatype == "ncclUint8");
  CHECK(done[1].record.bytes == 300);
  CHECK(done[1].record.peer == 2);
  CHECK(done[1].record.comm_hash == 0xD1);

  auto transfers = profiler.takeTransfers();
  REQUIRE(transfers.size() == 1);
  CHECK(transfers[0].operation_id == r.operation_id);
  CHECK(transfers[0].comm_hash == 0xD1);
  CHECK(transfers[0].bytes == 3000);
  CHECK(transfers[0].steps == 1);
  CHECK(transfers[0].wait_gpu_ns > 0);
  CHECK(transfers[0].wait_network_ns > 0);

  // One communicator, recorded once, with what v1 says of it.
  auto comms = profiler.takeCommunicators();
  REQUIRE(comms.size() == 1);
  CHECK(comms[0].comm_hash == 0xD1);
  CHECK(comms[0].name == "dp");
  CHECK(comms[0].comm_rank == 5);
  CHECK(comms[0].nranks == 0);
  CHECK(comms[0].nnodes == 0);
  CHECK(comms[0].global_rank == 2);
  CHECK(comms[0].device == 3);
  CHECK(comms[0].init_ns > 0);
  CHECK(comms[0].profiler_version == 1);
  REQUIRE(v1.finalize(context) == nccl_abi::kSuccess);
}

TEST_CASE("nccl: the v2 table (NCCL 2.24-2.25) records each communicator hash its operations name, once") {
  constexpr nccl_abi::ProfilerV2 v2 = profilerV2Table();
  BareProfiler bare;
  void* context = nullptr;
  int mask = 0;
  REQUIRE(v2.init(&context, &mask) == nccl_abi::kSuccess);
  for (uint64_t seq : {1u, 2u}) {
    nccl_abi::EventDescrV2 coll{};
    coll.type = nccl_abi::kColl;
    coll.rank = 1;
    // traffic_bytes (here 999) is NCCL's estimate of the wire traffic, not the operation's size.
    coll.coll = {"tp", 0xA, seq, "AllReduce", nullptr, nullptr, 64, 0, "ncclFloat64", 999, 2, 8, "TREE", "LL"};
    CHECK(v2.stop_event(startWith(v2, context, coll)) == nccl_abi::kSuccess);
  }
  nccl_abi::EventDescrV2 send{};
  send.type = nccl_abi::kP2p;
  send.rank = 0;
  send.p2p = {"pp", 0xB, "Send", nullptr, "ncclInt32", 10, 3};
  CHECK(v2.stop_event(startWith(v2, context, send)) == nccl_abi::kSuccess);

  auto done = bare.profiler.takeCompleted();
  REQUIRE(done.size() == 3);
  CHECK(done[0].record.bytes == 512);
  CHECK(done[0].record.comm_hash == 0xA);
  CHECK(done[0].algorithm == "TREE");
  CHECK(done[0].protocol == "LL");
  CHECK(done[0].datatype == "ncclFloat64");
  CHECK(done[1].record.seq == 2);
  CHECK(done[2].record.kind == format::NcclOperationKind::kSend);
  CHECK(done[2].record.bytes == 40);
  CHECK(done[2].record.comm_hash == 0xB);
  auto comms = bare.profiler.takeCommunicators();
  REQUIRE(comms.size() == 2);
  CHECK(comms[0].comm_hash == 0xA);
  CHECK(comms[0].name == "tp");
  CHECK(comms[0].comm_rank == 1);
  CHECK(comms[1].comm_hash == 0xB);
  CHECK(comms[1].name == "pp");
  for (const auto& comm : comms) CHECK(comm.profiler_version == 2);
}

TEST_CASE("nccl: the v3 table (NCCL 2.26): an operation completes when its untimed kernel channels stop") {
  constexpr nccl_abi::ProfilerV3 v3 = profilerV3Table();
  BareProfiler bare;
  void* context = nullptr;
  int mask = 0;
  REQUIRE(v3.init(&context, &mask) == nccl_abi::kSuccess);
  CHECK((static_cast<uint64_t>(mask) & nccl_abi::kKernelCh) != 0);
  nccl_abi::EventDescrV3 coll{};
  coll.type = nccl_abi::kColl;
  coll.coll = {"ep", 0xE3, 4, "AllGather", nullptr, nullptr, 4096, 0, "ncclInt8", 2, 16, "RING", "SIMPLE"};
  void* op = startWith(v3, context, coll);
  REQUIRE(v3.stop_event(op) == nccl_abi::kSuccess);
  CHECK(bare.profiler.takeCompleted().empty());  // enqueued, its 2 channels still to run

  std::atomic<int> failed_calls{0};
  std::thread kernel([&] {
    for (uint8_t channel = 0; channel < 2; ++channel) {
      nccl_abi::EventDescrV3 descr{};
      descr.type = nccl_abi::kKernelCh;
      descr.parent = op;
      descr.kernel_ch.channel_id = channel;
      void* handle = nullptr;
      if (v3.start_event(context, &handle, &descr) != nccl_abi::kSuccess || handle == nullptr) ++failed_calls;
      if (v3.stop_event(handle) != nccl_abi::kSuccess) ++failed_calls;
    }
  });
  kernel.join();
  CHECK(failed_calls == 0);
  auto done = bare.profiler.takeCompleted();
  REQUIRE(done.size() == 1);
  CHECK(done[0].record.bytes == 4096);
  CHECK(done[0].record.comm_hash == 0xE3);
  CHECK(done[0].record.gpu_start_ns == 0);
  CHECK(done[0].record.gpu_end_ns == 0);
  CHECK(bare.profiler.takeCommunicators().at(0).profiler_version == 3);

  // A v3 p2p names no channel count: it is complete once enqueued.
  nccl_abi::EventDescrV3 recv{};
  recv.type = nccl_abi::kP2p;
  recv.p2p = {"ep", 0xE3, "Recv", nullptr, "ncclFloat32", 8, 1};
  CHECK(v3.stop_event(startWith(v3, context, recv)) == nccl_abi::kSuccess);
  CHECK(bare.profiler.takeCompleted().size() == 1);
  CHECK(bare.profiler.stats().dropped_events == 0);
}

TEST_CASE("nccl: an all-to-all (NCCL 2.28) is one send and one receive per peer, recorded so") {
  PluginFixture plugin;
  auto api = child(nccl_abi::kCollApi, nullptr);
  api.coll_api = {"AlltoAll", 500, "ncclFloat32", 0, nullptr, false};
  void* call = plugin.start(api);
  CHECK(call != nullptr);
  // 2.28 issues it as a grouped send and receive per peer (itself included), with no coll event.
  constexpr int kRanks = 8;
  std::vector<void*> ops;
  for (int peer = 0; peer < kRanks; ++peer) {
    for (const char* func : {"Send", "Recv"}) {
      auto descr = p2p(func, peer, 500);
      descr.p2p.fields.datatype = "ncclFloat32";
      ops.push_back(plugin.start(descr));
    }
  }
  for (void* op : ops) plugin.stop(op);
  plugin.stop(call);
  CHECK(plugin.profiler.takeCompleted().empty());  // each waits for its channel's kernel

  std::thread kernel([&] {
    for (size_t i = 0; i < ops.size(); ++i) {
      auto descr = child(nccl_abi::kKernelCh, ops[i]);
      descr.kernel_ch = {0, 100 + i};
      void* channel = plugin.start(descr);
      nccl_abi::EventStateArgs stopped{};
      stopped.kernel_ch.gpu_timer = 200 + i;
      plugin.state(channel, nccl_abi::kKernelChStop, stopped);
      plugin.stop(channel);
    }
  });
  kernel.join();
  CHECK(plugin.failed_calls == 0);

  auto done = plugin.profiler.takeCompleted();
  REQUIRE(done.size() == 2 * kRanks);
  for (int peer = 0; peer < kRanks; ++peer) {
    for (auto kind : {format::NcclOperationKind::kSend, format::NcclOperationKind::kRecv}) {
      INFO("peer " << peer << (kind == format::NcclOperationKind::kSend ? " send" : " recv"));
      auto matches = std::count_if(done.begin(), done.end(), [&](const CompletedNcclOperation& op) {
        return op.record.peer == peer && op.record.kind == kind && op.record.bytes == 2000 &&
               op.record.gpu_end_ns == op.record.gpu_start_ns + 100 && !op.record.graph_captured;
      });
      CHECK(matches == 1);
    }
  }
}

TEST_CASE("nccl: graph replays (NCCL 2.28) come from a host callback long after the capture, each marked captured") {
  PluginFixture plugin(4);
  auto api = child(nccl_abi::kCollApi, nullptr);
  api.coll_api = {"AllReduce", 256, "ncclFloat32", 0, nullptr, true};
  void* captured_call = plugin.start(api);
  plugin.stop(captured_call);
  // API calls take no ring slot: many more than the ring holds.
  api.coll_api.graph_captured = false;
  void* eager_call = nullptr;
  for (int i = 0; i < 10; ++i) {
    eager_call = plugin.start(api);
    plugin.stop(eager_call);
  }
  CHECK(plugin.profiler.stats().dropped_events == 0);

  // Each replay: the host callback starts and stops the coll, its parent still the API event of the
  // capture; its kernel channel follows on the proxy thread, after the coll's stop. More replays
  // than pool slots, so slots are reused in between (each given back when the capture thread
  // takes what completed).
  constexpr int kReplays = 6;
  std::vector<CompletedNcclOperation> done;
  for (int replay = 0; replay < kReplays; ++replay) {
    void* op = nullptr;
    std::thread host_callback([&] {
      auto descr = coll("AllReduce", static_cast<uint64_t>(replay), 256, "ncclFloat32", 1);
      descr.parent = captured_call;
      op = plugin.start(descr);
      plugin.stop(op);
    });
    host_callback.join();
    std::thread proxy([&] {
      auto descr = child(nccl_abi::kKernelCh, op);
      descr.kernel_ch = {0, 1000u * static_cast<uint64_t>(replay + 1)};
      void* channel = plugin.start(descr);
      nccl_abi::EventStateArgs stopped{};
      stopped.kernel_ch.gpu_timer = 1000u * static_cast<uint64_t>(replay + 1) + 500;
      plugin.state(channel, nccl_abi::kKernelChStop, stopped);
      plugin.stop(channel);
    });
    proxy.join();
    for (auto& completed : plugin.profiler.takeCompleted()) done.push_back(std::move(completed));
  }
  auto eager = coll("AllReduce", 99, 256, "ncclFloat32", 0);
  eager.parent = eager_call;
  plugin.stop(plugin.start(eager));
  CHECK(plugin.failed_calls == 0);

  for (auto& op : plugin.profiler.takeCompleted()) done.push_back(std::move(op));
  REQUIRE(done.size() == kReplays + 1);
  for (int replay = 0; replay < kReplays; ++replay) {
    const auto& r = done[static_cast<size_t>(replay)].record;
    CHECK(r.seq == static_cast<uint64_t>(replay));
    CHECK(r.graph_captured);
    CHECK(r.gpu_start_ns == 1000u * static_cast<uint64_t>(replay + 1));
    CHECK(r.gpu_end_ns == r.gpu_start_ns + 500);
  }
  CHECK(done.back().record.seq == 99);
  CHECK_FALSE(done.back().record.graph_captured);
  CHECK(plugin.profiler.stats().dropped_events == 0);
}

TEST_CASE("nccl: without a capture, the v1-v3 inits refuse too") {
  setNcclProfiler(nullptr);
  void* context = nullptr;
  int mask = 0;
  constexpr nccl_abi::ProfilerV1 v1 = profilerV1Table();
  constexpr nccl_abi::ProfilerV2 v2 = profilerV2Table();
  constexpr nccl_abi::ProfilerV3 v3 = profilerV3Table();
  CHECK(v1.init(&context, &mask) != nccl_abi::kSuccess);
  CHECK(v2.init(&context, &mask) != nccl_abi::kSuccess);
  CHECK(v3.init(&context, &mask) != nccl_abi::kSuccess);
  // Every other call succeeds, whatever it is given.
  nccl_abi::EventStateArgsV1 args{};
  CHECK(v1.record_event_state(nullptr, nccl_abi::kProxyOpSendDone, &args) == nccl_abi::kSuccess);
  CHECK(v1.stop_event(nullptr) == nccl_abi::kSuccess);
}

TEST_CASE("nccl: group events get a handle that is never null, as v1-v4 need to start operations under it") {
  for (int version : {1, 2, 3, 4, 5}) {
    INFO("v" << version);
    NcclProfiler profiler([] { return 5u; }, 0, [] { return 0u; });
    setNcclProfiler(&profiler);
    void* context = nullptr;
    int mask = 0;
    void* group = nullptr;
    if (version == 1) {
      REQUIRE(profilerV1Table().init(&context, &mask) == nccl_abi::kSuccess);
      nccl_abi::EventDescrV1 d{};
      d.type = nccl_abi::kGroup;
      REQUIRE(profilerV1Table().start_event(context, &group, &d) == nccl_abi::kSuccess);
    } else if (version <= 3) {
      nccl_abi::EventDescrV3 d{};
      d.type = nccl_abi::kGroup;
      REQUIRE(profilerV3Table().init(&context, &mask) == nccl_abi::kSuccess);
      REQUIRE(profilerV3Table().start_event(context, &group, &d) == nccl_abi::kSuccess);
    } else if (version == 4) {
      nccl_abi::EventDescrV4 d{};
      d.type = nccl_abi::kGroup;
      REQUIRE(kNcclProfilerV4.init(&context, &mask, "g", 1, 1, 1, 0, nullptr) == nccl_abi::kSuccess);
      REQUIRE(kNcclProfilerV4.start_event(context, &group, &d) == nccl_abi::kSuccess);
    } else {
      nccl_abi::EventDescrV5 d{};
      d.type = nccl_abi::kGroup;
      REQUIRE(kNcclProfilerV5.init(&context, 1, &mask, "g", 1, 1, 0, nullptr) == nccl_abi::kSuccess);
      REQUIRE(kNcclProfilerV5.start_event(context, &group, &d) == nccl_abi::kSuccess);
    }
    CHECK((static_cast<uint64_t>(mask) & nccl_abi::kGroup) != 0);
    CHECK(group != nullptr);
    CHECK(profilerV5Table().stop_event(group) == nccl_abi::kSuccess);
    setNcclProfiler(nullptr);
  }
}

TEST_CASE("nccl: a busy slot never costs a later event its place: free slots are used first, the pool grows") {
  PluginFixture plugin(20'000);
  // One operation whose kernel channel never reports keeps its slot...
  void* stuck = plugin.start(coll("AllReduce", 0, 8, "ncclFloat32", 1));
  plugin.stop(stuck);
  void* channel = plugin.start(child(nccl_abi::kKernelCh, stuck));
  REQUIRE(channel != nullptr);
  // ...and a burst of 6,000 operations ahead of the GPU, then 10,000 fast ones, all fit.
  std::vector<void*> burst;
  for (uint64_t i = 0; i < 6000; ++i) burst.push_back(plugin.start(coll("AllReduce", 1 + i, 8, "ncclFloat32", 0)));
  for (void* op : burst) plugin.stop(op);
  for (uint64_t i = 0; i < 10'000; ++i) plugin.stop(plugin.start(coll("AllGather", i, 8, "ncclInt8", 0)));
  CHECK(plugin.profiler.stats().dropped_events == 0);
  CHECK(plugin.profiler.takeCompleted().size() == 16'000);
  CHECK(plugin.failed_calls == 0);
}

TEST_CASE("nccl: an operation whose channel never reports is written after a while, and its late channel is ignored") {
  PluginFixture plugin;
  void* stuck = plugin.start(coll("AllReduce", 7, 8, "ncclFloat32", 2));
  plugin.stop(stuck);
  void* first = plugin.start(child(nccl_abi::kKernelCh, stuck));
  plugin.ticks += NcclProfiler::kStuckOperationNs + 1;
  // The proxy thread's next channel start looks for stuck operations.
  void* other = plugin.start(coll("AllReduce", 8, 8, "ncclFloat32", 1));
  plugin.stop(other);
  void* second = plugin.start(child(nccl_abi::kKernelCh, other));
  auto written = plugin.profiler.takeCompleted();
  REQUIRE(written.size() == 1);
  CHECK(written[0].record.seq == 7);
  CHECK(plugin.profiler.stats().expired_operations == 1);
  plugin.stop(first);  // too late: changes nothing
  plugin.stop(second);
  written = plugin.profiler.takeCompleted();
  REQUIRE(written.size() == 1);
  CHECK(written[0].record.seq == 8);
}

TEST_CASE("nccl: proxy events after the finalize never write a transfer twice") {
  PluginFixture plugin;
  void* op = plugin.start(coll("AllReduce", 1, 8, "ncclFloat32", 0));
  plugin.stop(op);
  auto descr = child(nccl_abi::kProxyOp, op);
  descr.proxy_op = {getpid(), 0, 1, 1, 4096, 1};
  void* proxy_op = plugin.start(descr);
  auto step_descr = child(nccl_abi::kProxyStep, proxy_op);
  void* step = plugin.start(step_descr);
  REQUIRE(kNcclProfilerV5.finalize(plugin.context) == nccl_abi::kSuccess);
  plugin.state(step, nccl_abi::kProxyStepSendWait);
  plugin.stop(step);
  plugin.stop(proxy_op);
  plugin.stop(plugin.start(descr));
  auto transfers = plugin.profiler.takeTransfers();
  REQUIRE(transfers.size() == 1);
  CHECK(transfers[0].operation_id != 0);
  // The step's state and stop, the operation's stop and a new operation's start.
  CHECK(plugin.profiler.stats().events_after_finalize == 4);
}

TEST_CASE("nccl: a proxy operation's network time counts its concurrent steps once: the union of their waits") {
  PluginFixture plugin;
  auto descr = child(nccl_abi::kProxyOp, nullptr);
  descr.proxy_op = {getpid(), 0, 1, 8, 4096, 1};
  void* proxy_op = plugin.start(descr);
  // 8 steps posted at once (ticks advance 10 per clock read), completing one by one.
  std::vector<void*> steps;
  for (int s = 0; s < 8; ++s) {
    auto step = child(nccl_abi::kProxyStep, proxy_op);
    step.proxy_step = {s};
    steps.push_back(plugin.start(step));
  }
  uint64_t first_wait = plugin.ticks + 10;
  for (void* step : steps) plugin.state(step, nccl_abi::kProxyStepSendWait, {.proxy_step = {100}});
  for (void* step : steps) {
    plugin.ticks += 1000;
    plugin.stop(step);
  }
  uint64_t last_stop = plugin.ticks;
  plugin.stop(proxy_op);
  auto transfers = plugin.profiler.takeTransfers();
  REQUIRE(transfers.size() == 1);
  CHECK(transfers[0].bytes == 800);
  CHECK(transfers[0].steps == 8);
  // From the first step entering the wait to the last leaving it, not the sum (about 4.5x more).
  CHECK(transfers[0].wait_network_ns == last_stop - first_wait);
  CHECK(plugin.profiler.stats().unlinked_transfers == 1);
}

TEST_CASE("nccl: the GPU bounds NCCL guarantees come with each operation: the previous group, the API call") {
  PluginFixture plugin;
  auto group = child(nccl_abi::kGroup, nullptr);
  auto api = child(nccl_abi::kCollApi, nullptr);
  plugin.stop(plugin.start(api));
  uint64_t api_start = plugin.ticks;
  plugin.start(group);
  void* op = plugin.start(coll("AllReduce", 1, 8, "ncclFloat32", 1));
  plugin.stop(op);
  void* channel_descr_op = op;
  nccl_abi::EventDescrV5 channel_descr = child(nccl_abi::kKernelCh, channel_descr_op);
  channel_descr.kernel_ch = {0, 1'000'000};
  void* channel = plugin.start(channel_descr);
  uint64_t start_seen = plugin.ticks;
  plugin.state(channel, nccl_abi::kKernelChStop, {.kernel_ch = {1'000'500}});
  uint64_t stop_seen = plugin.ticks;
  plugin.stop(channel);
  auto written = plugin.profiler.takeCompleted();
  REQUIRE(written.size() == 1);
  CHECK(written[0].gpu_not_before_ns == api_start);
  CHECK(written[0].max_clock_offset ==
        std::min(static_cast<int64_t>(start_seen) - 1'000'000, static_cast<int64_t>(stop_seen) - 1'000'500));
}

TEST_CASE("nccl: a forked child never feeds the parent's capture") {
  PluginFixture plugin;
  pid_t child_pid = fork();
  if (child_pid == 0) {
    void* handle = reinterpret_cast<void*>(1);
    nccl_abi::EventDescrV5 d = coll("AllReduce", 1, 8, "ncclFloat32", 0);
    kNcclProfilerV5.start_event(plugin.context, &handle, &d);
    _exit(handle == nullptr ? 0 : 1);
  }
  int status = 0;
  REQUIRE(waitpid(child_pid, &status, 0) == child_pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  void* op = plugin.start(coll("AllReduce", 1, 8, "ncclFloat32", 0));
  CHECK(op != nullptr);
}
