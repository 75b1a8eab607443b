// Plays NCCL's part against the built injection library: opens it as NCCL opens a profiler plugin,
// looks up ncclProfiler_v5, and drives one communicator through an all-reduce over 2 channels
// (proxy network work on a proxy thread, kernel channels on a host-callback thread), an
// all-gather, a grouped send/recv pair and a PXN proxy operation of another process, then
// finalizes it and exits (the library finishes the trace file at exit).
//
//   nccl_harness LIBRARY

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <thread>

#include "inject/nccl_profiler_abi.h"

namespace abi = gpuxray::inject::nccl_abi;

namespace {

const abi::ProfilerV5* g_plugin = nullptr;
void* g_context = nullptr;
int g_failures = 0;

void check(abi::Result result) {
  if (result != abi::kSuccess) ++g_failures;
}

void* start(abi::EventDescrV5 descr) {
  void* handle = nullptr;
  check(g_plugin->start_event(g_context, &handle, &descr));
  return handle;
}

void state(void* handle, int state_value, abi::EventStateArgs args = {}) {
  check(g_plugin->record_event_state(handle, state_value, &args));
}

abi::EventDescrV5 child(uint64_t type, void* parent) {
  abi::EventDescrV5 d{};
  d.type = type;
  d.parent = parent;
  return d;
}

void allReduceOverTwoChannels() {
  abi::EventDescrV5 coll{};
  coll.type = abi::kColl;
  coll.coll.fields = {1, "AllReduce", nullptr, nullptr, 262144, 0, "ncclFloat32", 2, 16, "RING", "SIMPLE"};
  void* op = start(coll);
  check(g_plugin->stop_event(op));
  std::thread proxy([op] {
    for (uint8_t channel = 0; channel < 2; ++channel) {
      auto descr = child(abi::kProxyOp, op);
      descr.proxy_op = {getpid(), channel, 1, 1, 1 << 19, 1};
      void* proxy_op = start(descr);
      void* step = start(child(abi::kProxyStep, proxy_op));
      state(step, abi::kProxyStepSendGpuWait);
      abi::EventStateArgs sent{};
      sent.proxy_step.trans_size = 1 << 19;
      state(step, abi::kProxyStepSendWait, sent);
      check(g_plugin->stop_event(step));
      check(g_plugin->stop_event(proxy_op));
    }
  });
  std::thread host_callback([op] {
    for (uint8_t channel = 0; channel < 2; ++channel) {
      auto descr = child(abi::kKernelCh, op);
      descr.kernel_ch = {channel, 1'000'000u + channel};
      void* kernel = start(descr);
      abi::EventStateArgs stopped{};
      stopped.kernel_ch.gpu_timer = 2'000'000u + channel;
      state(kernel, abi::kKernelChStop, stopped);
      check(g_plugin->stop_event(kernel));
    }
  });
  proxy.join();
  host_callback.join();
}

void allGatherSendRecvAndPxn() {
  abi::EventDescrV5 gather{};
  gather.type = abi::kColl;
  gather.coll.fields = {1, "AllGather", nullptr, nullptr, 4096, 0, "ncclInt8", 0, 8, "RING", "LL"};
  check(g_plugin->stop_event(start(gather)));
  for (const char* func : {"Send", "Recv"}) {
    abi::EventDescrV5 p2p{};
    p2p.type = abi::kP2p;
    p2p.p2p.fields = {func, nullptr, "ncclBfloat16", 1000, 1, 0};
    check(g_plugin->stop_event(start(p2p)));
  }
  auto pxn = child(abi::kProxyOp, reinterpret_cast<void*>(0x10));
  pxn.proxy_op = {getpid() + 1, 5, 1, 1, 4096, 0};
  check(g_plugin->stop_event(start(pxn)));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  void* library = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    std::fprintf(stderr, "dlopen: %s\n", dlerror());
    return 3;
  }
  g_plugin = static_cast<const abi::ProfilerV5*>(dlsym(library, "ncclProfiler_v5"));
  if (g_plugin == nullptr || dlsym(library, "ncclProfiler_v4") == nullptr) return 4;
  int mask = 0;
  if (g_plugin->init(&g_context, 0x5eed, &mask, "harness", 1, 2, 0, nullptr) != abi::kSuccess) return 5;
  auto active = static_cast<uint64_t>(mask);
  if ((active & abi::kKernelCh) == 0 || (active & abi::kProxyStep) == 0) return 6;
  allReduceOverTwoChannels();
  allGatherSendRecvAndPxn();
  check(g_plugin->finalize(g_context));
  return g_failures == 0 ? 0 : 7;
}
