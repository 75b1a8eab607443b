// Plays NCCL's part against the built injection library: opens it as NCCL opens a profiler plugin,
// checks that it exports every table from ncclProfiler_v1 to _v6, and drives one communicator
// through ncclProfiler_vVERSION as the NCCL release that picks that table would (v1: 2.23, v2:
// 2.24-2.25, v3: 2.26, v4: 2.27, v5: 2.28): an all-reduce over 2 channels (network proxy work on a
// proxy thread, kernel channels from v3 on on another), an all-gather, a grouped send/recv pair and
// a PXN proxy operation of another process (GPU stamps come from a clock 3 s behind the host's, so
// the library must map them); with v5 also an all-to-all (a send and a receive per
// peer, as 2.28 issues it) and two replays of a graph-captured all-reduce. It then finalizes the
// communicator and exits (the library finishes the trace file at exit).
//
//   nccl_harness LIBRARY VERSION

#include <dlfcn.h>
#include <unistd.h>

#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "inject/nccl_profiler_abi.h"

namespace abi = gpuxray::inject::nccl_abi;

namespace {

// The GPU's %globaltimer as the harness plays it: a clock of its own, 3 s behind the host's.
uint64_t gpuClock() {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(now.tv_nsec) - 3'000'000'000u;
}

constexpr uint64_t kCommHash = 0x5eed;
constexpr const char* kCommName = "harness";
constexpr int kRank = 0;
constexpr int kRanks = 4;

// An operation as every version can describe it.
struct Coll {
  uint64_t seq;
  const char* func;
  size_t count;
  const char* datatype;
  uint8_t channels;
  uint8_t warps;
  const char* algo;
  const char* proto;
};

struct P2p {
  const char* func;
  size_t count;
  const char* datatype;
  int peer;
  uint8_t channels;
};

// v1 passes NCCL 2.23's enum values instead of names: their positions in these lists.
constexpr const char* kFuncs[] = {"Broadcast", "Reduce", "AllGather", "ReduceScatter",
                                  "AllReduce", "SendRecv", "Send",    "Recv"};
constexpr const char* kTypes[] = {"ncclInt8",    "ncclUint8",   "ncclInt32",   "ncclUint32",
                                  "ncclInt64",   "ncclUint64",  "ncclFloat16", "ncclFloat32",
                                  "ncclFloat64", "ncclBfloat16"};
constexpr const char* kAlgos[] = {"TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT"};
constexpr const char* kProtos[] = {"LL", "LL128", "SIMPLE"};

template <size_t N>
uint8_t code(const char* const (&names)[N], const char* name) {
  for (size_t i = 0; i < N; ++i) {
    if (std::strcmp(names[i], name) == 0) return static_cast<uint8_t>(i);
  }
  std::abort();
}

template <int V>
struct Abi;
template <>
struct Abi<1> {
  using Table = abi::ProfilerV1;
  using Descr = abi::EventDescrV1;
  using Args = abi::EventStateArgsV1;
};
template <>
struct Abi<2> {
  using Table = abi::ProfilerV2;
  using Descr = abi::EventDescrV2;
  using Args = abi::EventStateArgsV1;
};
template <>
struct Abi<3> {
  using Table = abi::ProfilerV3;
  using Descr = abi::EventDescrV3;
  using Args = abi::EventStateArgsV1;
};
template <>
struct Abi<4> {
  using Table = abi::ProfilerV4;
  using Descr = abi::EventDescrV4;
  using Args = abi::EventStateArgs;
};
template <>
struct Abi<5> {
  using Table = abi::ProfilerV5;
  using Descr = abi::EventDescrV5;
  using Args = abi::EventStateArgs;
};

// One communicator, as NCCL of the release that uses profiler ABI version V drives it.
template <int V>
class Communicator {
 public:
  using Table = typename Abi<V>::Table;
  using Descr = typename Abi<V>::Descr;
  using Args = typename Abi<V>::Args;

  explicit Communicator(const Table* table) : table_(table) {}

  // Whether init succeeded and asked for everything the scenarios need.
  bool init() {
    int mask = 0;
    abi::Result result;
    if constexpr (V <= 3)
      result = table_->init(&context_, &mask);
    else if constexpr (V == 4)
      result = table_->init(&context_, &mask, kCommName, kCommHash, 1, kRanks, kRank, nullptr);
    else
      result = table_->init(&context_, kCommHash, &mask, kCommName, 1, kRanks, kRank, nullptr);
    auto active = static_cast<uint64_t>(mask);
    return result == abi::kSuccess && (active & abi::kColl) != 0 && (active & abi::kProxyStep) != 0 &&
           (V < 3 || (active & abi::kKernelCh) != 0) && (V < 5 || (active & abi::kCollApi) != 0);
  }

  void allReduceOverTwoChannels() {
    void* call = apiCall("AllReduce", 262144, "ncclFloat32", false);
    void* op = start(coll({1, "AllReduce", 262144, "ncclFloat32", 2, 16, "RING", "SIMPLE"}, call));
    stop(op);
    stop(call);
    std::thread proxy([this, op] {
      for (uint8_t channel = 0; channel < 2; ++channel) {
        auto descr = child(abi::kProxyOp, op);
        descr.proxy_op = {getpid(), channel, 1, 1, 1 << 19, 1};
        void* proxy_op = start(descr);
        networkSend(proxy_op, 1 << 19);
        stop(proxy_op);
      }
    });
    std::thread kernel([this, op, base = gpuClock()] {
      for (uint8_t channel = 0; channel < 2; ++channel)
        kernelChannel(op, channel, base + channel, base + 1'000'000u + channel);
    });
    proxy.join();
    kernel.join();
  }

  void allGatherSendRecvAndPxn() {
    stop(start(coll({1, "AllGather", 4096, "ncclInt8", 0, 8, "RING", "LL"})));
    for (const char* func : {"Send", "Recv"}) stop(start(p2p({func, 1000, "ncclBfloat16", 1, 0})));
    auto pxn = child(abi::kProxyOp, reinterpret_cast<void*>(0x10));
    pxn.proxy_op = {getpid() + 1, 5, 1, 1, 4096, 0};
    stop(start(pxn));
  }

  // NCCL 2.28 issues an all-to-all as a send and a receive per peer (itself included) under the
  // AlltoAll API event, with no coll event.
  void allToAll() {
    void* call = apiCall("AlltoAll", 3000, "ncclFloat16", false);
    std::vector<void*> ops;
    for (int peer = 0; peer < kRanks; ++peer) {
      for (const char* func : {"Send", "Recv"}) ops.push_back(start(p2p({func, 3000, "ncclFloat16", peer, 1})));
    }
    for (void* op : ops) stop(op);
    stop(call);
    std::thread kernel([this, &ops, base = gpuClock()] {
      for (size_t i = 0; i < ops.size(); ++i) kernelChannel(ops[i], 0, base + 10 * i, base + 10 * i + 5);
    });
    kernel.join();
  }

  // A captured all-reduce: at capture, only its API event. At each replay a CUDA host callback
  // starts and stops the coll, whose parent is still the API event of the capture, and the kernel
  // channel follows from the proxy thread.
  void graphCapturedAllReduce(int replays) {
    void* call = apiCall("AllReduce", 1024, "ncclFloat32", true);
    stop(call);
    for (int replay = 0; replay < replays; ++replay) {
      void* op = nullptr;
      std::thread host_callback([&] {
        op = start(coll({2u + static_cast<uint64_t>(replay), "AllReduce", 1024, "ncclFloat32", 1, 8, "RING", "LL"},
                        call));
        stop(op);
      });
      host_callback.join();
      uint64_t base = gpuClock();
      std::thread proxy([&] { kernelChannel(op, 0, base, base + 50'000u); });
      proxy.join();
    }
  }

  void finalize() { check(table_->finalize(context_)); }
  int failures() const { return failures_; }

 private:
  void check(abi::Result result) {
    if (result != abi::kSuccess) ++failures_;
  }
  void* start(Descr descr) {
    void* handle = nullptr;
    check(table_->start_event(context_, &handle, &descr));
    return handle;
  }
  void stop(void* handle) {
    if (handle != nullptr) check(table_->stop_event(handle));
  }
  void state(void* handle, int state_value, Args* args) {
    if (handle != nullptr) check(table_->record_event_state(handle, state_value, args));
  }

  Descr child(uint64_t type, void* parent) {
    Descr d{};
    d.type = static_cast<decltype(d.type)>(type);
    d.parent = parent;
    d.rank = kRank;
    return d;
  }

  Descr coll(const Coll& c, void* parent = nullptr) {
    Descr d = child(abi::kColl, parent);
    if constexpr (V == 1)
      d.coll = {kCommName, kCommHash, c.seq, code(kFuncs, c.func), nullptr, nullptr, c.count, 0,
                code(kTypes, c.datatype), 0, 0, c.channels, c.warps, code(kAlgos, c.algo), code(kProtos, c.proto),
                0, 0};
    else if constexpr (V == 2)
      d.coll = {kCommName, kCommHash, c.seq, c.func, nullptr, nullptr, c.count, 0, c.datatype, 0, c.channels, c.warps,
                c.algo, c.proto};
    else if constexpr (V == 3)
      d.coll = {kCommName, kCommHash, c.seq, c.func, nullptr, nullptr, c.count, 0, c.datatype, c.channels, c.warps,
                c.algo, c.proto};
    else if constexpr (V == 4)
      d.coll = {c.seq, c.func, nullptr, nullptr, c.count, 0, c.datatype, c.channels, c.warps, c.algo, c.proto};
    else
      d.coll.fields = {c.seq, c.func, nullptr, nullptr, c.count, 0, c.datatype, c.channels, c.warps, c.algo, c.proto};
    return d;
  }

  Descr p2p(const P2p& p, void* parent = nullptr) {
    Descr d = child(abi::kP2p, parent);
    if constexpr (V == 1)
      d.p2p = {kCommName, kCommHash, code(kFuncs, p.func), nullptr, code(kTypes, p.datatype), p.count, p.peer};
    else if constexpr (V <= 3)
      d.p2p = {kCommName, kCommHash, p.func, nullptr, p.datatype, p.count, p.peer};
    else if constexpr (V == 4)
      d.p2p = {p.func, nullptr, p.datatype, p.count, p.peer, p.channels};
    else
      d.p2p.fields = {p.func, nullptr, p.datatype, p.count, p.peer, p.channels};
    return d;
  }

  // The API event of a call (v5+; none before).
  void* apiCall(const char* func, size_t count, const char* datatype, bool graph_captured) {
    if constexpr (V >= 5) {
      Descr d = child(abi::kCollApi, nullptr);
      d.coll_api = {func, count, datatype, 0, nullptr, graph_captured};
      return start(d);
    } else {
      (void)func, (void)count, (void)datatype, (void)graph_captured;
      return nullptr;
    }
  }

  // One step of a proxy operation sending `bytes` over the network. v1-v3 report the bytes as
  // the operation's running total, v4+ on the step.
  void networkSend(void* proxy_op, size_t bytes) {
    void* step = start(child(abi::kProxyStep, proxy_op));
    state(step, abi::kProxyStepSendGpuWait, nullptr);
    Args sent{};
    if constexpr (V <= 3) {
      sent.proxy_op = {0, 0};
      state(proxy_op, abi::kProxyOpSendTransmitted, &sent);
      state(step, abi::kProxyStepSendWait, nullptr);
      stop(step);
      sent.proxy_op = {bytes, 1};
      state(proxy_op, abi::kProxyOpSendDone, &sent);
    } else {
      sent.proxy_step.trans_size = bytes;
      state(step, abi::kProxyStepSendWait, &sent);
      stop(step);
    }
  }

  // A kernel channel of `op` (v3+), with its %globaltimer start and stop (v4+). The stop is
  // reported only once the GPU clock has passed it, as the proxy thread would see it.
  void kernelChannel(void* op, uint8_t channel, uint64_t gpu_start, uint64_t gpu_stop) {
    if constexpr (V >= 3) {
      auto descr = child(abi::kKernelCh, op);
      if constexpr (V == 3)
        descr.kernel_ch = {channel};
      else
        descr.kernel_ch = {channel, gpu_start};
      void* kernel = start(descr);
      if constexpr (V >= 4) {
        while (gpuClock() <= gpu_stop) std::this_thread::sleep_for(std::chrono::microseconds(50));
        Args stopped{};
        stopped.kernel_ch.gpu_timer = gpu_stop;
        state(kernel, abi::kKernelChStop, &stopped);
      }
      stop(kernel);
    } else {
      (void)op, (void)channel, (void)gpu_start, (void)gpu_stop;
    }
  }

  const Table* table_;
  void* context_ = nullptr;
  std::atomic<int> failures_{0};
};

template <int V>
int run(void* library) {
  std::string symbol = "ncclProfiler_v" + std::to_string(V);
  auto* table = static_cast<const typename Abi<V>::Table*>(dlsym(library, symbol.c_str()));
  if (table == nullptr) return 4;
  Communicator<V> comm(table);
  if (!comm.init()) return 5;
  comm.allReduceOverTwoChannels();
  comm.allGatherSendRecvAndPxn();
  if constexpr (V >= 5) {
    comm.allToAll();
    comm.graphCapturedAllReduce(2);
  }
  comm.finalize();
  return comm.failures() == 0 ? 0 : 7;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  void* library = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    std::fprintf(stderr, "dlopen: %s\n", dlerror());
    return 3;
  }
  for (int version = 1; version <= 6; ++version) {
    if (dlsym(library, ("ncclProfiler_v" + std::to_string(version)).c_str()) == nullptr) return 4;
  }
  switch (std::atoi(argv[2])) {
    case 1: return run<1>(library);
    case 2: return run<2>(library);
    case 3: return run<3>(library);
    case 4: return run<4>(library);
    case 5: return run<5>(library);
    default: return 2;
  }
}
