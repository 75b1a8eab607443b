#include "inject/nccl_plugin.h"

#include <pthread.h>

#include <atomic>
#include <exception>
#include <type_traits>

#include "inject/capture_window.h"

namespace gpuxray::inject {
namespace {

using nccl_abi::kSuccess;

std::atomic<NcclProfiler*> g_profiler{nullptr};
std::atomic<void (*)()> g_capture_starter{nullptr};

NcclProfiler* profilerStartingCapture() {
  NcclProfiler* profiler = g_profiler.load(std::memory_order_acquire);
  if (profiler != nullptr) return profiler;
  if (auto start = g_capture_starter.load(std::memory_order_acquire)) start();
  return g_profiler.load(std::memory_order_acquire);
}

// A forked child never feeds the parent's capture: its NCCL state is the parent's copy, and
// another thread of the parent may have held one of the profiler's locks at the fork.
void forgetProfilerInChild() {
  g_profiler.store(nullptr, std::memory_order_relaxed);
  g_capture_starter.store(nullptr, std::memory_order_relaxed);
}

// No exception may cross into NCCL (a C library): one is counted, kept for the trailer, and turns
// the plugin off for the rest of the process; NCCL goes on as without a plugin.
void disableAfterError(const char* what) {
  NcclProfiler* profiler = g_profiler.exchange(nullptr, std::memory_order_acq_rel);
  if (profiler != nullptr) profiler->noteInternalError(what);
}

template <typename Call>
nccl_abi::Result guarded(nccl_abi::Result on_error, Call&& call) noexcept {
  try {
    return call();
  } catch (const std::exception& error) {
    disableAfterError(error.what());
  } catch (...) {
    disableAfterError("an exception of unknown type");
  }
  return on_error;
}

template <size_t N>
const char* named(const char* const (&names)[N], uint8_t code, const char* unknown) {
  return code < N ? names[code] : unknown;
}

}  // namespace

// NCCL 2.23's enums (ncclFunc_t in nccl_common.h, ncclDataType_t in nccl.h, NCCL_ALGO_* and
// NCCL_PROTO_*), named as ncclFuncToString & co. name them for v2+. The one difference: v2+ call
// ncclUint8 "Unknown" (no case for it), where this gives its name; its size is 1 either way.
const char* ncclFuncName(uint8_t code) {
  static constexpr const char* kNames[] = {"Broadcast", "Reduce",   "AllGather", "ReduceScatter",
                                           "AllReduce", "SendRecv", "Send",      "Recv"};
  return named(kNames, code, "Invalid");
}

const char* ncclDatatypeName(uint8_t code) {
  static constexpr const char* kNames[] = {"ncclInt8",    "ncclUint8",    "ncclInt32",      "ncclUint32",
                                           "ncclInt64",   "ncclUint64",   "ncclFloat16",    "ncclFloat32",
                                           "ncclFloat64", "ncclBfloat16", "ncclFloat8e4m3", "ncclFloat8e5m2"};
  return named(kNames, code, "Unknown");
}

const char* ncclAlgorithmName(uint8_t code) {
  static constexpr const char* kNames[] = {"TREE",      "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS",
                                           "NVLS_TREE", "PAT"};
  return named(kNames, code, "Unknown");
}

const char* ncclProtocolName(uint8_t code) {
  static constexpr const char* kNames[] = {"LL", "LL128", "SIMPLE"};
  return named(kNames, code, "Unknown");
}

namespace nccl_plugin {

nccl_abi::Result stopEvent(void* handle) {
  return guarded(kSuccess, [&] {
    NcclProfiler* profiler = g_profiler.load(std::memory_order_acquire);
    return profiler != nullptr ? profiler->stopEvent(handle) : kSuccess;
  });
}

nccl_abi::Result recordEventState(void* handle, int state, nccl_abi::EventStateArgs* args) {
  return guarded(kSuccess, [&] {
    NcclProfiler* profiler = g_profiler.load(std::memory_order_acquire);
    return profiler != nullptr ? profiler->recordEventState(handle, state, args) : kSuccess;
  });
}

nccl_abi::Result finalize(void* context) {
  return guarded(kSuccess, [&] {
    NcclProfiler* profiler = g_profiler.load(std::memory_order_acquire);
    return profiler != nullptr ? profiler->finalize(context) : kSuccess;
  });
}

namespace {

// Events every version describes alike: groups (the parent of coll and p2p through v4), proxy
// operations and steps (one layout from v1 on), kernel channels (v3, with a GPU timer from v4).
template <typename Descr>
nccl_abi::Result startCommon(NcclProfiler& profiler, void* context, void** handle, const Descr& descr) {
  switch (descr.type) {
    case nccl_abi::kGroup:
      return profiler.startGroup(context, handle);
    case nccl_abi::kProxyOp:
      return profiler.startProxyOp(context, handle, descr.parent, descr.proxy_op);
    case nccl_abi::kProxyStep:
      return profiler.startProxyStep(context, handle, descr.parent, descr.proxy_step);
    case nccl_abi::kKernelCh:
      if constexpr (requires { descr.kernel_ch.gpu_timer; })
        return profiler.startKernelCh(context, handle, descr.parent, descr.kernel_ch);
      else if constexpr (requires { descr.kernel_ch; })
        return profiler.startKernelCh(context, handle, descr.parent, {descr.kernel_ch.channel_id, 0});
      [[fallthrough]];
    default:
      *handle = nullptr;
      return kSuccess;
  }
}

// A collective's start, in or out of a window, for steps counted by all-reduces. v1 names the
// function and datatype by code, later versions by string; v5 on nest the fields.
template <typename Coll>
void noteCollectiveFields(void* context, const Coll& c) {
  if constexpr (std::is_same_v<std::decay_t<decltype(c.func)>, uint8_t>) {
    noteNcclCollective(context, ncclFuncName(c.func), c.count, ncclDatatypeName(c.datatype));
  } else {
    noteNcclCollective(context, c.func, c.count, c.datatype);
  }
}

template <typename Descr>
void noteCollective(void* context, const Descr& descr) {
  if (descr.type != nccl_abi::kColl) return;
  if constexpr (requires { descr.coll.fields; }) {
    noteCollectiveFields(context, descr.coll.fields);
  } else {
    noteCollectiveFields(context, descr.coll);
  }
}

// Every start entry point: a null handle unless the event is recorded, and no exception out.
template <typename Descr, typename Start>
nccl_abi::Result startEvent(void* context, void** handle, Descr* descr, Start&& start) {
  *handle = nullptr;
  return guarded(kSuccess, [&] {
    if (descr != nullptr) noteCollective(context, *descr);
    NcclProfiler* profiler = g_profiler.load(std::memory_order_acquire);
    // Outside every capture window NCCL's events are not assembled: a null handle, which NCCL passes back.
    if (profiler == nullptr || descr == nullptr || context == nullptr || !captureWindowOpen()) return kSuccess;
    return start(*profiler, *descr);
  });
}

nccl_abi::Result initNamed(void** context, uint64_t comm_hash, int* mask, const char* name, int n_nodes, int n_ranks,
                           int rank, uint32_t version) {
  return guarded(nccl_abi::kInternalError, [&] {
    NcclProfiler* profiler = profilerStartingCapture();
    if (profiler == nullptr) return nccl_abi::kInternalError;
    nccl_abi::Result result = profiler->init(context, comm_hash, mask, name, n_nodes, n_ranks, rank, {version, true});
    // From v5 on, the API events tell whether an operation was captured into a CUDA graph, and
    // they and the kernel launch come before the kernel: bounds for its GPU times.
    if (result == kSuccess && version >= 5)
      *mask |= static_cast<int>(nccl_abi::kGroupApi | nccl_abi::kCollApi | nccl_abi::kP2pApi | nccl_abi::kKernelLaunch);
    return result;
  });
}

nccl_abi::Result initUnnamed(void** context, int* mask, uint32_t version) {
  return guarded(nccl_abi::kInternalError, [&] {
    NcclProfiler* profiler = profilerStartingCapture();
    if (profiler == nullptr) return nccl_abi::kInternalError;
    return profiler->initUnnamed(context, mask, {version, /*kernel_channels=*/version >= 3});
  });
}

NcclOperationSource capturedIf(void* parent) {
  NcclOperationSource source;
  source.graph_captured = NcclProfiler::isGraphCapturedApi(parent);
  return source;
}

NcclOperationSource namedBy(const char* comm_name, uint64_t comm_hash, int rank) {
  NcclOperationSource source;
  source.names_communicator = true;
  source.comm_hash = comm_hash;
  source.comm_name = comm_name;
  source.comm_rank = rank;
  return source;
}

// v2 and v3 name func, datatype, algorithm and protocol as later versions do.
template <typename Descr>
nccl_abi::Result startWithNames(NcclProfiler& profiler, void* context, void** handle, const Descr& descr) {
  if (descr.type == nccl_abi::kColl) {
    const auto& c = descr.coll;
    return profiler.startColl(context, handle,
                              {c.seq_number, c.func, c.send_buff, c.recv_buff, c.count, c.root, c.datatype,
                               c.n_max_channels, c.n_warps, c.algo, c.proto},
                              namedBy(c.comm_name, c.comm_hash, descr.rank));
  }
  if (descr.type == nccl_abi::kP2p) {
    const auto& p = descr.p2p;
    return profiler.startP2p(context, handle, {p.func, p.buff, p.datatype, p.count, p.peer, 0},
                             namedBy(p.comm_name, p.comm_hash, descr.rank));
  }
  return startCommon(profiler, context, handle, descr);
}

}  // namespace

nccl_abi::Result initV6(void** context, uint64_t comm_hash, int* mask, const char* name, int n_nodes, int n_ranks,
                        int rank, nccl_abi::Logger) {
  return initNamed(context, comm_hash, mask, name, n_nodes, n_ranks, rank, 6);
}

nccl_abi::Result initV5(void** context, uint64_t comm_hash, int* mask, const char* name, int n_nodes, int n_ranks,
                        int rank, nccl_abi::Logger) {
  return initNamed(context, comm_hash, mask, name, n_nodes, n_ranks, rank, 5);
}

nccl_abi::Result startEventV5(void* context, void** handle, nccl_abi::EventDescrV5* descr) {
  return startEvent(context, handle, descr, [&](NcclProfiler& profiler, const nccl_abi::EventDescrV5& d) {
    switch (d.type) {
      case nccl_abi::kGroupApi:
        return profiler.startApi(context, handle, d.group_api.graph_captured);
      case nccl_abi::kCollApi:
        return profiler.startApi(context, handle, d.coll_api.graph_captured);
      case nccl_abi::kP2pApi:
        return profiler.startApi(context, handle, d.p2p_api.graph_captured);
      case nccl_abi::kKernelLaunch:
        return profiler.startApi(context, handle, false);
      // An operation's parent is the API call that issued it (at capture time, for a graph replay).
      case nccl_abi::kColl:
        return profiler.startColl(context, handle, d.coll.fields, capturedIf(d.parent));
      case nccl_abi::kP2p:
        return profiler.startP2p(context, handle, d.p2p.fields, capturedIf(d.parent));
      default:
        return startCommon(profiler, context, handle, d);
    }
  });
}

nccl_abi::Result initV4(void** context, int* mask, const char* name, uint64_t comm_hash, int n_nodes, int n_ranks,
                        int rank, nccl_abi::Logger) {
  return initNamed(context, comm_hash, mask, name, n_nodes, n_ranks, rank, 4);
}

nccl_abi::Result startEventV4(void* context, void** handle, nccl_abi::EventDescrV4* descr) {
  return startEvent(context, handle, descr, [&](NcclProfiler& profiler, const nccl_abi::EventDescrV4& d) {
    if (d.type == nccl_abi::kColl) return profiler.startColl(context, handle, d.coll);
    if (d.type == nccl_abi::kP2p) return profiler.startP2p(context, handle, d.p2p);
    return startCommon(profiler, context, handle, d);
  });
}

nccl_abi::Result initV3(void** context, int* mask) {
  return initUnnamed(context, mask, 3);
}

nccl_abi::Result startEventV3(void* context, void** handle, nccl_abi::EventDescrV3* descr) {
  return startEvent(context, handle, descr, [&](NcclProfiler& profiler, const nccl_abi::EventDescrV3& d) {
    return startWithNames(profiler, context, handle, d);
  });
}

nccl_abi::Result initV2(void** context, int* mask) {
  return initUnnamed(context, mask, 2);
}

nccl_abi::Result startEventV2(void* context, void** handle, nccl_abi::EventDescrV2* descr) {
  return startEvent(context, handle, descr, [&](NcclProfiler& profiler, const nccl_abi::EventDescrV2& d) {
    return startWithNames(profiler, context, handle, d);
  });
}

nccl_abi::Result initV1(void** context, int* mask) {
  return initUnnamed(context, mask, 1);
}

nccl_abi::Result startEventV1(void* context, void** handle, nccl_abi::EventDescrV1* descr) {
  return startEvent(context, handle, descr, [&](NcclProfiler& profiler, const nccl_abi::EventDescrV1& d) {
    if (d.type == nccl_abi::kColl) {
      const auto& c = d.coll;
      return profiler.startColl(
          context, handle,
          {c.seq_number, ncclFuncName(c.func), c.send_buff, c.recv_buff, c.count, c.root, ncclDatatypeName(c.datatype),
           c.n_max_channels, c.n_warps, ncclAlgorithmName(c.algo), ncclProtocolName(c.proto)},
          namedBy(c.comm_name, c.comm_hash, d.rank));
    }
    if (d.type == nccl_abi::kP2p) {
      const auto& p = d.p2p;
      return profiler.startP2p(context, handle,
                               {ncclFuncName(p.func), p.buff, ncclDatatypeName(p.datatype), p.count, p.peer, 0},
                               namedBy(p.comm_name, p.comm_hash, d.rank));
    }
    return startCommon(profiler, context, handle, d);
  });
}

// v1-v3: a proxy operation's states carry its bytes so far; a proxy step's carry nothing.
nccl_abi::Result recordEventStateV1(void* handle, int state, nccl_abi::EventStateArgsV1* args) {
  return guarded(kSuccess, [&] {
    NcclProfiler* profiler = g_profiler.load(std::memory_order_acquire);
    if (profiler == nullptr) return kSuccess;
    if (state >= nccl_abi::kProxyOpSendPosted && state <= nccl_abi::kProxyOpRecvDone)
      return args != nullptr ? profiler->recordProxyOpBytes(handle, args->proxy_op.trans_size) : kSuccess;
    return profiler->recordEventState(handle, state, nullptr);
  });
}

}  // namespace nccl_plugin

void setNcclProfiler(NcclProfiler* profiler) {
  static const bool fork_handler = pthread_atfork(nullptr, nullptr, forgetProfilerInChild) == 0;
  (void)fork_handler;
  g_profiler.store(profiler, std::memory_order_release);
}

void setNcclCaptureStarter(void (*start_capture)()) {
  g_capture_starter.store(start_capture, std::memory_order_release);
}

}  // namespace gpuxray::inject
