// Plays NCCL's part against the built injection library, in the order NCCL's own source makes its
// calls (src/plugin/profiler.cc, src/enqueue.cc, src/group.cc, src/transport/net.cc and
// src/transport/profiler.cc of v2.23.4 ... v2.29.7): it opens the library as NCCL opens a profiler
// plugin (dlopen RTLD_NOW|RTLD_LOCAL), checks that it exports every table from ncclProfiler_v1 to
// _v6, and drives one communicator through ncclProfiler_vVERSION as the NCCL release that picks
// that table would (v1: 2.23, v2: 2.24-2.25, v3: 2.26, v4: 2.27, v5: 2.28, v6: 2.29).
//
// Each operation, on the user thread: (v5+) GroupApi start, CollApi or P2pApi start and stop; the
// kernel launch ((v5+) inside a KernelLaunch event), after which the simulated GPU starts the
// kernel 2 µs later; then, as ncclLaunchKernelAfter_NoCuda calls hostStreamPlanTask, the Group
// start and, only under a non-null group handle (v1-v4's guards), the Coll/P2p start; the proxy
// upload; the Coll/P2p and Group stops. So the kernel starts 1-7 µs before the Coll start (one
// operation: 204 µs, the user thread "preempted"). On the proxy thread: each channel's KernelCh
// start once the GPU stamped it (v3+; with the GPU timer from v4), one send ProxyOp per channel
// whose 8 steps (NCCL_STEPS) are all posted (SendGPUWait, then SendWait with transSize as net.cc
// sets it: v4+ on the step, v1-v3 as the operation's running total) and complete one by one, then
// each channel's KernelCh stop. The GPU's %globaltimer runs --gpu-behind-s seconds behind the
// host's clock (CLOCK_REALTIME, the capture clock without CUPTI). With v5+ also an all-to-all
// (a send and a receive per peer) and two replays of a graph-captured all-reduce, from a host
// callback thread; every version also a PXN proxy operation of another process.
//
//   nccl_harness LIBRARY VERSION [--host NAME] [--rank R] [--ranks N] [--ops N] [--step-us US]
//                [--truth FILE] [--recreate] [--events-after-finalize]
//
// --host NAME   runs as host NAME: a UTS namespace of its own (needs root) with that hostname, so
//               two harness processes are two hosts to the library and the analyzer.
// --step-us US  how long one network step takes on this rank's NIC (a slow NIC: a larger value).
// --truth FILE  writes "seq gpu_start gpu_end" per all-reduce, true times on the host clock.
// --recreate    finalizes the communicator, dlcloses the library as NCCL does after the last
//               communicator, opens it again and plays a second communicator (hash + 1).
// --events-after-finalize  NCCL's proxy thread may still report a proxy operation's step after the
//               communicator's finalize: played once.
// Exit codes: 0 ok, 2 usage, 3 dlopen, 4 a table missing, 5 init refused, 6 namespace, 7 a call failed.

#include <dlfcn.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "inject/nccl_profiler_abi.h"

namespace abi = gpuxray::inject::nccl_abi;

namespace {

struct Options {
  const char* library = nullptr;
  int version = 0;
  std::string host;
  int rank = 0;
  int ranks = 4;
  int ops = 40;
  int step_us = 20;
  std::string truth;
  bool recreate = false;
  bool events_after_finalize = false;
  uint64_t gpu_behind_ns = 7'300'000'000;
};

Options g_options;

uint64_t hostClock() {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(now.tv_nsec);
}

// The GPU's %globaltimer as the harness plays it: a clock of its own, seconds behind the host's.
uint64_t gpuClock() {
  return hostClock() - g_options.gpu_behind_ns;
}

void spinFor(uint64_t ns) {
  uint64_t until = hostClock() + ns;
  while (hostClock() < until) {
  }
}

void waitForGpu(uint64_t gpu_time) {
  while (gpuClock() < gpu_time) std::this_thread::sleep_for(std::chrono::microseconds(20));
}

constexpr const char* kCommName = "harness";
constexpr uint64_t kCommHash = 0x5eed;

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
constexpr const char* kFuncs[] = {"Broadcast", "Reduce",   "AllGather", "ReduceScatter",
                                  "AllReduce", "SendRecv", "Send",      "Recv"};
constexpr const char* kTypes[] = {"ncclInt8",   "ncclUint8",   "ncclInt32",   "ncclUint32",  "ncclInt64",
                                  "ncclUint64", "ncclFloat16", "ncclFloat32", "ncclFloat64", "ncclBfloat16"};
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
template <>
struct Abi<6> {
  using Table = abi::ProfilerV6;
  using Descr = abi::EventDescrV5;
  using Args = abi::EventStateArgs;
};

constexpr int kNcclSteps = 8;
constexpr size_t kStepBytes = 1 << 17;

// One communicator, as NCCL of the release that uses profiler ABI version V drives it.
template <int V>
class Communicator {
 public:
  using Table = typename Abi<V>::Table;
  using Descr = typename Abi<V>::Descr;
  using Args = typename Abi<V>::Args;

  Communicator(const Table* table, uint64_t comm_hash) : table_(table), comm_hash_(comm_hash) {}

  // Whether init succeeded and asked for everything the scenarios need.
  bool init() {
    int mask = 0;
    abi::Result result;
    const int rank = g_options.rank, ranks = g_options.ranks;
    if constexpr (V <= 3)
      result = table_->init(&context_, &mask);
    else if constexpr (V == 4)
      result = table_->init(&context_, &mask, kCommName, comm_hash_, 1, ranks, rank, nullptr);
    else
      result = table_->init(&context_, comm_hash_, &mask, kCommName, 1, ranks, rank, nullptr);
    mask_ = static_cast<uint64_t>(mask);
    return result == abi::kSuccess && (mask_ & abi::kColl) != 0 && (mask_ & abi::kProxyStep) != 0 &&
           (V < 3 || (mask_ & abi::kKernelCh) != 0) && (V < 5 || (mask_ & abi::kCollApi) != 0);
  }

  // `count` all-reduces of 2 channels, each sending 8 network steps per channel.
  void allReduces(int count, std::vector<std::string>& truth) {
    for (int i = 0; i < count; ++i) {
      uint64_t lead_ns = 1'000 + static_cast<uint64_t>(i % 6) * 1'000;
      if (i == count / 2) lead_ns = 204'000;  // the user thread preempted once
      Coll c{static_cast<uint64_t>(i),
             "AllReduce",
             2 * kNcclSteps * kStepBytes / 4,
             "ncclFloat32",
             2,
             16,
             "RING",
             "SIMPLE"};
      Plan plan = enqueueColl(c, lead_ns, false);
      runOnProxy(plan, /*network=*/true);
      truth.push_back(std::to_string(c.seq) + " " + std::to_string(plan.gpu_start + g_options.gpu_behind_ns) + " " +
                      std::to_string(plan.gpu_stop + g_options.gpu_behind_ns));
    }
  }

  void allGatherAndSendRecv() {
    Plan plan = enqueueColl({1, "AllGather", 4096, "ncclInt8", 1, 8, "RING", "LL"}, 2'000, false);
    runOnProxy(plan, false);
    Plan pair = enqueueP2p({{"Send", 1000, "ncclBfloat16", 1, 1}, {"Recv", 1000, "ncclBfloat16", 1, 1}});
    runOnProxy(pair, false);
  }

  // A proxy operation of another process (PXN): its parent is not ours to read.
  void pxnProxyOp() {
    auto pxn = child(abi::kProxyOp, reinterpret_cast<void*>(0x10));
    pxn.proxy_op = {getpid() + 1, 5, 1, 1, 4096, 0};
    stop(start(pxn));
  }

  // NCCL 2.28 issues an all-to-all as a send and a receive per peer under the AlltoAll API event.
  void allToAll() {
    std::vector<P2p> ops;
    for (int peer = 0; peer < g_options.ranks; ++peer) {
      for (const char* func : {"Send", "Recv"}) ops.push_back({func, 3000, "ncclFloat16", peer, 1});
    }
    Plan plan = enqueueP2p(ops, "AlltoAll");
    runOnProxy(plan, false);
  }

  // A captured all-reduce: at capture, only its API event. At each replay NCCL's host callback
  // (hostStreamPlanCallback) starts the group and the coll, whose parent is still the API event of
  // the capture, before the replayed kernel starts (it waits for the callback).
  void graphCapturedAllReduce(int replays) {
    void* group_api = apiEvent(abi::kGroupApi, nullptr, "", 0, "", true);
    void* call = apiEvent(abi::kCollApi, group_api, "AllReduce", 1024, "ncclFloat32", true);
    stop(call);
    stop(group_api);
    for (int replay = 0; replay < replays; ++replay) {
      Plan plan;
      std::thread host_callback([&] {
        plan.group = start(child(abi::kGroup, nullptr));
        if (plan.group != nullptr) {
          plan.ops.push_back(
              start(coll({2u + static_cast<uint64_t>(replay), "AllReduce", 1024, "ncclFloat32", 1, 8, "RING", "LL"},
                         call, plan.group)));
          plan.channels.push_back(1);
        }
        for (void* op : plan.ops) stop(op);
        stop(plan.group);
      });
      host_callback.join();
      plan.gpu_start = gpuClock() + 2'000;
      runOnProxy(plan, false);
    }
  }

  void finalize() { check(table_->finalize(context_)); }

  // NCCL's proxy thread still reporting a step of an operation after the finalize.
  void stepAfterFinalize() {
    if (late_step_ == nullptr) return;
    Args args{};
    if constexpr (V >= 4) args.proxy_step.trans_size = kStepBytes;
    state(late_step_, abi::kProxyStepSendWait, V >= 4 ? &args : nullptr);
    stop(late_step_);
    stop(late_proxy_op_);
  }

  // Leaves one proxy operation open with a step in flight, for stepAfterFinalize.
  void openProxyOpForLateSteps() {
    Plan plan = enqueueColl({999, "AllReduce", 1024, "ncclFloat32", 1, 8, "RING", "LL"}, 1'000, false);
    if (plan.ops.empty() || plan.ops[0] == nullptr) return;
    auto descr = child(abi::kProxyOp, plan.ops[0]);
    descr.proxy_op = {getpid(), 0, (g_options.rank + 1) % g_options.ranks, 1, 1 << 17, 1};
    late_proxy_op_ = start(descr);
    auto step = child(abi::kProxyStep, late_proxy_op_);
    step.proxy_step = {0};
    late_step_ = start(step);
    state(late_step_, abi::kProxyStepSendGpuWait, nullptr);
  }

  int failures() const { return failures_; }

 private:
  // One kernel plan: its group, operations and channels, and when the GPU ran it.
  struct Plan {
    void* group = nullptr;
    std::vector<void*> ops;
    std::vector<uint8_t> channels;
    uint64_t gpu_start = 0;  // GPU clock
    uint64_t gpu_stop = 0;
  };

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
    d.rank = g_options.rank;
    return d;
  }

  // v1-v4: the coll's parent is the group; v5+: the API call, the group in parentGroup.
  Descr coll(const Coll& c, void* api, void* group) {
    Descr d = child(abi::kColl, V >= 5 ? api : group);
    if constexpr (V == 1)
      d.coll = {kCommName, comm_hash_, c.seq,   code(kFuncs, c.func),     nullptr,
                nullptr,   c.count,    0,       code(kTypes, c.datatype), 0,
                0,         c.channels, c.warps, code(kAlgos, c.algo),     code(kProtos, c.proto),
                0,         0};
    else if constexpr (V == 2)
      d.coll = {kCommName, comm_hash_, c.seq, c.func,     nullptr, nullptr, c.count,
                0,         c.datatype, 0,     c.channels, c.warps, c.algo,  c.proto};
    else if constexpr (V == 3)
      d.coll = {kCommName, comm_hash_, c.seq,      c.func,  nullptr, nullptr, c.count,
                0,         c.datatype, c.channels, c.warps, c.algo,  c.proto};
    else if constexpr (V == 4)
      d.coll = {c.seq, c.func, nullptr, nullptr, c.count, 0, c.datatype, c.channels, c.warps, c.algo, c.proto};
    else
      d.coll = {{c.seq, c.func, nullptr, nullptr, c.count, 0, c.datatype, c.channels, c.warps, c.algo, c.proto}, group};
    return d;
  }

  Descr p2p(const P2p& p, void* api, void* group) {
    Descr d = child(abi::kP2p, V >= 5 ? api : group);
    if constexpr (V == 1)
      d.p2p = {kCommName, comm_hash_, code(kFuncs, p.func), nullptr, code(kTypes, p.datatype), p.count, p.peer};
    else if constexpr (V <= 3)
      d.p2p = {kCommName, comm_hash_, p.func, nullptr, p.datatype, p.count, p.peer};
    else if constexpr (V == 4)
      d.p2p = {p.func, nullptr, p.datatype, p.count, p.peer, p.channels};
    else
      d.p2p = {{p.func, nullptr, p.datatype, p.count, p.peer, p.channels}, group};
    return d;
  }

  // An API-level event (v5+; none before).
  void* apiEvent(uint64_t type, void* parent, const char* func, size_t count, const char* datatype,
                 bool graph_captured) {
    if constexpr (V >= 5) {
      Descr d = child(type, parent);
      if (type == abi::kGroupApi)
        d.group_api = {graph_captured, 1};
      else if (type == abi::kCollApi)
        d.coll_api = {func, count, datatype, 0, nullptr, graph_captured};
      else if (type == abi::kP2pApi)
        d.p2p_api = {func, count, datatype, nullptr, graph_captured};
      else
        d.kernel_launch = {nullptr};
      return start(d);
    } else {
      (void)type, (void)parent, (void)func, (void)count, (void)datatype, (void)graph_captured;
      return nullptr;
    }
  }

  // ncclLaunchKernel (inside a KernelLaunch event from v5): the GPU starts the kernel 2 µs later.
  uint64_t launchKernel(void* group_api) {
    void* launch = apiEvent(abi::kKernelLaunch, group_api, "", 0, "", false);
    uint64_t gpu_start = gpuClock() + 2'000;
    stop(launch);
    return gpu_start;
  }

  Plan enqueueColl(const Coll& c, uint64_t lead_ns, bool graph_captured) {
    void* group_api = apiEvent(abi::kGroupApi, nullptr, "", 0, "", graph_captured);
    void* call = apiEvent(abi::kCollApi, group_api, c.func, c.count, c.datatype, graph_captured);
    stop(call);
    Plan plan;
    plan.gpu_start = launchKernel(group_api);
    spinFor(lead_ns);
    // hostStreamPlanTask: ncclProfilerStartGroupEvent, then the task events under a group handle.
    plan.group = start(child(abi::kGroup, nullptr));
    if (plan.group != nullptr) {
      plan.ops.push_back(start(coll(c, call, plan.group)));
      plan.channels.push_back(c.channels);
    }
    for (void* op : plan.ops) stop(op);
    stop(plan.group);
    stop(group_api);
    return plan;
  }

  Plan enqueueP2p(const std::vector<P2p>& ops, const char* api_func = nullptr) {
    void* group_api = apiEvent(abi::kGroupApi, nullptr, "", 0, "", false);
    std::vector<void*> calls;
    for (const P2p& p : ops)
      calls.push_back(apiEvent(abi::kP2pApi, group_api, api_func ? api_func : p.func, p.count, p.datatype, false));
    for (void* call : calls) stop(call);
    Plan plan;
    plan.gpu_start = launchKernel(group_api);
    spinFor(3'000);
    plan.group = start(child(abi::kGroup, nullptr));
    if (plan.group != nullptr) {
      for (size_t i = 0; i < ops.size(); ++i) {
        plan.ops.push_back(start(p2p(ops[i], calls[i], plan.group)));
        plan.channels.push_back(ops[i].channels);
      }
    }
    for (void* op : plan.ops) stop(op);
    stop(plan.group);
    stop(group_api);
    return plan;
  }

  // The proxy thread's part of a plan, then the user thread waits for the GPU (a stream sync).
  void runOnProxy(Plan& plan, bool network) {
    std::thread proxy([&] {
      waitForGpu(plan.gpu_start);
      std::vector<std::vector<void*>> channels(plan.ops.size());
      for (size_t o = 0; o < plan.ops.size(); ++o) {
        for (uint8_t ch = 0; ch < plan.channels[o]; ++ch)
          channels[o].push_back(kernelChannelStart(plan.ops[o], ch, plan.gpu_start + ch));
      }
      if (network) {
        for (size_t o = 0; o < plan.ops.size(); ++o) {
          for (uint8_t ch = 0; ch < plan.channels[o]; ++ch) networkSend(plan.ops[o], ch);
        }
      }
      plan.gpu_stop = std::max(gpuClock(), plan.gpu_start + 30'000);
      waitForGpu(plan.gpu_stop + 1);
      for (size_t o = 0; o < plan.ops.size(); ++o) {
        for (void* kernel : channels[o]) kernelChannelStop(kernel, plan.gpu_stop);
      }
    });
    proxy.join();
  }

  // One send ProxyOp of a channel: all NCCL_STEPS steps posted, each waiting for the GPU, then on
  // the network, completing one by one (--step-us apart) as the NIC moves them.
  void networkSend(void* op, uint8_t channel) {
    auto descr = child(abi::kProxyOp, op);
    descr.proxy_op = {getpid(), channel, (g_options.rank + 1) % g_options.ranks, kNcclSteps, 1 << 17, 1};
    void* proxy_op = start(descr);
    void* steps[kNcclSteps];
    for (int s = 0; s < kNcclSteps; ++s) {
      auto step = child(abi::kProxyStep, proxy_op);
      step.proxy_step = {s};
      steps[s] = start(step);
      state(steps[s], abi::kProxyStepSendGpuWait, nullptr);
    }
    for (int s = 0; s < kNcclSteps; ++s) {
      Args sent{};
      if constexpr (V <= 3) {
        state(steps[s], abi::kProxyStepSendWait, nullptr);
        sent.proxy_op = {static_cast<size_t>(s + 1) * kStepBytes, 1};
        state(proxy_op, abi::kProxyOpSendTransmitted, &sent);
      } else {
        sent.proxy_step.trans_size = kStepBytes;
        state(steps[s], abi::kProxyStepSendWait, &sent);
      }
    }
    for (int s = 0; s < kNcclSteps; ++s) {
      spinFor(static_cast<uint64_t>(g_options.step_us) * 1000);
      stop(steps[s]);
    }
    if constexpr (V <= 3) {
      Args done{};
      done.proxy_op = {kNcclSteps * kStepBytes, 1};
      state(proxy_op, abi::kProxyOpSendDone, &done);
    }
    stop(proxy_op);
  }

  // A kernel channel of `op` (v3+), started once the GPU stamped its start (the GPU timer from v4).
  void* kernelChannelStart(void* op, uint8_t channel, uint64_t gpu_start) {
    if constexpr (V >= 3) {
      auto descr = child(abi::kKernelCh, op);
      if constexpr (V == 3)
        descr.kernel_ch = {channel};
      else
        descr.kernel_ch = {channel, gpu_start};
      return start(descr);
    } else {
      (void)op, (void)channel, (void)gpu_start;
      return nullptr;
    }
  }

  void kernelChannelStop(void* kernel, uint64_t gpu_stop) {
    if constexpr (V >= 4) {
      Args stopped{};
      stopped.kernel_ch.gpu_timer = gpu_stop;
      state(kernel, abi::kKernelChStop, &stopped);
    }
    stop(kernel);
  }

  const Table* table_;
  uint64_t comm_hash_;
  void* context_ = nullptr;
  uint64_t mask_ = 0;
  void* late_proxy_op_ = nullptr;
  void* late_step_ = nullptr;
  std::atomic<int> failures_{0};
};

void* openLibrary() {
  void* library = dlopen(g_options.library, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) std::fprintf(stderr, "dlopen: %s\n", dlerror());
  return library;
}

template <int V>
int playCommunicator(void* library, uint64_t comm_hash, std::vector<std::string>& truth, bool last) {
  std::string symbol = "ncclProfiler_v" + std::to_string(V);
  auto* table = static_cast<const typename Abi<V>::Table*>(dlsym(library, symbol.c_str()));
  if (table == nullptr) return 4;
  Communicator<V> comm(table, comm_hash);
  if (!comm.init()) return 5;
  comm.allReduces(g_options.ops, truth);
  comm.allGatherAndSendRecv();
  comm.pxnProxyOp();
  if constexpr (V >= 5) {
    comm.allToAll();
    comm.graphCapturedAllReduce(2);
  }
  if (last && g_options.events_after_finalize) comm.openProxyOpForLateSteps();
  comm.finalize();
  if (last && g_options.events_after_finalize) comm.stepAfterFinalize();
  return comm.failures() == 0 ? 0 : 7;
}

template <int V>
int run() {
  void* library = openLibrary();
  if (library == nullptr) return 3;
  std::vector<std::string> truth;
  int result = playCommunicator<V>(library, kCommHash, truth, !g_options.recreate);
  if (result == 0 && g_options.recreate) {
    // ncclProfilerPluginUnload after the last communicator's finalize, then a new communicator.
    dlclose(library);
    library = openLibrary();
    if (library == nullptr) return 3;
    result = playCommunicator<V>(library, kCommHash + 1, truth, true);
  }
  if (!g_options.truth.empty()) {
    std::ofstream out(g_options.truth);
    for (const auto& line : truth) out << line << "\n";
  }
  return result;
}

bool becomeHost(const std::string& name) {
  if (unshare(CLONE_NEWUTS) != 0 || sethostname(name.data(), name.size()) != 0) {
    std::perror("nccl_harness: a UTS namespace of its own (needs root)");
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  g_options.library = argv[1];
  g_options.version = std::atoi(argv[2]);
  for (int i = 3; i < argc; ++i) {
    std::string flag = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : ""; };
    if (flag == "--host")
      g_options.host = value();
    else if (flag == "--rank")
      g_options.rank = std::atoi(value());
    else if (flag == "--ranks")
      g_options.ranks = std::atoi(value());
    else if (flag == "--ops")
      g_options.ops = std::atoi(value());
    else if (flag == "--step-us")
      g_options.step_us = std::atoi(value());
    else if (flag == "--truth")
      g_options.truth = value();
    else if (flag == "--recreate")
      g_options.recreate = true;
    else if (flag == "--events-after-finalize")
      g_options.events_after_finalize = true;
    else
      return 2;
  }
  if (!g_options.host.empty() && !becomeHost(g_options.host)) return 6;
  {
    void* probe = openLibrary();
    if (probe == nullptr) return 3;
    for (int version = 1; version <= 6; ++version) {
      if (dlsym(probe, ("ncclProfiler_v" + std::to_string(version)).c_str()) == nullptr) return 4;
    }
    dlclose(probe);
  }
  switch (g_options.version) {
    case 1:
      return run<1>();
    case 2:
      return run<2>();
    case 3:
      return run<3>();
    case 4:
      return run<4>();
    case 5:
      return run<5>();
    case 6:
      return run<6>();
    default:
      return 2;
  }
}
