#include "inject/nccl_plugin.h"

#include <atomic>

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

}  // namespace

namespace nccl_plugin {

nccl_abi::Result stopEvent(void* handle) {
  NcclProfiler* profiler = g_profiler.load(std::memory_order_acquire);
  return profiler != nullptr ? profiler->stopEvent(handle) : kSuccess;
}

nccl_abi::Result recordEventState(void* handle, int state, nccl_abi::EventStateArgs* args) {
  NcclProfiler* profiler = g_profiler.load(std::memory_order_acquire);
  return profiler != nullptr ? profiler->recordEventState(handle, state, args) : kSuccess;
}

nccl_abi::Result finalize(void* context) {
  NcclProfiler* profiler = g_profiler.load(std::memory_order_acquire);
  return profiler != nullptr ? profiler->finalize(context) : kSuccess;
}

namespace {

// v4 and v5 share the child descriptors; they differ in the type's width and in coll/p2p.
template <typename Descr>
nccl_abi::Result startChild(NcclProfiler& profiler, void* context, void** handle, const Descr& descr) {
  switch (descr.type) {
    case nccl_abi::kProxyOp: return profiler.startProxyOp(context, handle, descr.parent, descr.proxy_op);
    case nccl_abi::kProxyStep: return profiler.startProxyStep(context, handle, descr.parent, descr.proxy_step);
    case nccl_abi::kKernelCh: return profiler.startKernelCh(context, handle, descr.parent, descr.kernel_ch);
    default: *handle = nullptr; return kSuccess;
  }
}

}  // namespace

nccl_abi::Result initV5(void** context, uint64_t comm_hash, int* mask, const char* name, int n_nodes, int n_ranks,
                        int rank, nccl_abi::Logger) {
  NcclProfiler* profiler = profilerStartingCapture();
  if (profiler == nullptr) return nccl_abi::kInternalError;
  return profiler->init(context, comm_hash, mask, name, n_nodes, n_ranks, rank, 5);
}

nccl_abi::Result startEventV5(void* context, void** handle, nccl_abi::EventDescrV5* descr) {
  *handle = nullptr;
  NcclProfiler* profiler = g_profiler.load(std::memory_order_acquire);
  if (profiler == nullptr || descr == nullptr) return kSuccess;
  if (descr->type == nccl_abi::kColl) return profiler->startColl(context, handle, descr->coll.fields);
  if (descr->type == nccl_abi::kP2p) return profiler->startP2p(context, handle, descr->p2p.fields);
  return startChild(*profiler, context, handle, *descr);
}

nccl_abi::Result initV6(void** context, uint64_t comm_hash, int* mask, const char* name, int n_nodes, int n_ranks,
                        int rank, nccl_abi::Logger) {
  NcclProfiler* profiler = profilerStartingCapture();
  if (profiler == nullptr) return nccl_abi::kInternalError;
  return profiler->init(context, comm_hash, mask, name, n_nodes, n_ranks, rank, 6);
}

nccl_abi::Result initV4(void** context, int* mask, const char* name, uint64_t comm_hash, int n_nodes, int n_ranks,
                        int rank, nccl_abi::Logger) {
  NcclProfiler* profiler = profilerStartingCapture();
  if (profiler == nullptr) return nccl_abi::kInternalError;
  return profiler->init(context, comm_hash, mask, name, n_nodes, n_ranks, rank, 4);
}

nccl_abi::Result startEventV4(void* context, void** handle, nccl_abi::EventDescrV4* descr) {
  *handle = nullptr;
  NcclProfiler* profiler = g_profiler.load(std::memory_order_acquire);
  if (profiler == nullptr || descr == nullptr) return kSuccess;
  if (descr->type == nccl_abi::kColl) return profiler->startColl(context, handle, descr->coll);
  if (descr->type == nccl_abi::kP2p) return profiler->startP2p(context, handle, descr->p2p);
  return startChild(*profiler, context, handle, *descr);
}

}  // namespace nccl_plugin

void setNcclProfiler(NcclProfiler* profiler) { g_profiler.store(profiler, std::memory_order_release); }

void setNcclCaptureStarter(void (*start_capture)()) {
  g_capture_starter.store(start_capture, std::memory_order_release);
}

}  // namespace gpuxray::inject
