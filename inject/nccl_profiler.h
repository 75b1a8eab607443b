// The NCCL side of the capture: NCCL's profiler plugin calls (one context per communicator) are
// assembled here into complete operations, which the capture thread drains and writes.
//
// Event lifetimes follow NCCL: a collective's or p2p's stopEvent only means "enqueued"; its
// KernelCh children (one per channel, GPU timer start/stop) and ProxyOp children (network work,
// with ProxyStep grandchildren) arrive later, from the proxy and host-callback threads. An
// operation is complete once it was stopped and every channel's kernel stopped (NCCL before 2.26
// reports no kernel channels: there, once it was stopped); a proxy operation once it and its steps
// stopped; each is then queued for writing. Events live in fixed rings per context and type, so a
// handle stays valid (NCCL may still hold it) until the ring wraps; a start that finds its slot
// still in use is dropped and counted, never blocking NCCL.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "inject/nccl_profiler_abi.h"
#include "proto/records.h"

namespace gpuxray::inject {

// An operation as the capture thread receives it: the record without its string ids, and the
// strings. Its network transfers come separately (takeTransfers), naming it by operation_id.
struct CompletedNcclOperation {
  format::NcclOperationRecord record;
  std::string func;
  std::string datatype;
  std::string algorithm;
  std::string protocol;
  // When the host saw the last kernel channel stop (capture clock; 0 if none did): the GPU times,
  // still on the GPU's clock, ended before it.
  uint64_t kernel_stop_seen_ns = 0;
};

struct NcclProfilerStats {
  uint64_t operations = 0;
  // Events refused because their ring slot was still in use.
  uint64_t dropped_events = 0;
  // Proxy operations of another process (PXN), recorded without their operation.
  uint64_t foreign_proxy_ops = 0;
};

// How a communicator's NCCL reports: the plugin ABI version it loaded, and whether each
// operation's channels report kernel events (v3+), so that an operation completes when they
// stop rather than when it is enqueued.
struct NcclAbi {
  uint32_t version = 0;
  bool kernel_channels = false;
};

// What an operation's descriptor says besides the fields every version has.
struct NcclOperationSource {
  // v1-v3 name the communicator in each operation (their init does not); the first operation
  // of each communicator hash in a context records the communicator.
  bool names_communicator = false;
  uint64_t comm_hash = 0;
  const char* comm_name = nullptr;
  int comm_rank = 0;
  // v5+: the API call that issued it was captured into a CUDA graph.
  bool graph_captured = false;
};

class NcclProfiler {
 public:
  // `now` is the capture clock (the one CUPTI stamps records with); `current_device` says which
  // CUDA device the calling thread uses (NCCL initializes a communicator with its device current).
  NcclProfiler(std::function<uint64_t()> now, int32_t global_rank, std::function<uint32_t()> current_device,
               size_t ring_slots = 4096);
  ~NcclProfiler();

  // The event types gpuxray asks NCCL for (the v5+ tables add the API-level events).
  static int activationMask();

  // The plugin entry points, version-neutral; the exported v1-v6 tables adapt to these.
  nccl_abi::Result init(void** context, uint64_t comm_hash, int* activation_mask, const char* comm_name,
                        int n_nodes, int n_ranks, int rank, NcclAbi abi);
  // For ABIs whose init names no communicator (v1-v3): its operations name it.
  nccl_abi::Result initUnnamed(void** context, int* activation_mask, NcclAbi abi);
  nccl_abi::Result startColl(void* context, void** handle, const nccl_abi::CollDescr& coll,
                             const NcclOperationSource& source = {});
  nccl_abi::Result startP2p(void* context, void** handle, const nccl_abi::P2pDescr& p2p,
                            const NcclOperationSource& source = {});
  nccl_abi::Result startProxyOp(void* context, void** handle, void* parent, const nccl_abi::ProxyOpDescr& op);
  nccl_abi::Result startProxyStep(void* context, void** handle, void* parent, const nccl_abi::ProxyStepDescr& step);
  nccl_abi::Result startKernelCh(void* context, void** handle, void* parent, const nccl_abi::KernelChDescr& channel);
  nccl_abi::Result stopEvent(void* handle);
  nccl_abi::Result recordEventState(void* handle, int state, const nccl_abi::EventStateArgs* args);
  // A proxy operation's bytes so far, as v1-v3 report them on the operation (v4+ report each
  // step's bytes through recordEventState).
  nccl_abi::Result recordProxyOpBytes(void* handle, uint64_t bytes_so_far);
  nccl_abi::Result finalize(void* context);

  // API-level events (CollApi, P2pApi; v5+). gpuxray reads one fact from them, whether the call
  // was captured into a CUDA graph, and NCCL names them as the parent of the operations they
  // issue, including every replay of a captured graph long after the call returned. So the handle
  // is that fact: one of two markers, valid for the life of the process, needing no slot; stopping
  // one or recording its state does nothing.
  static void* apiEventHandle(bool graph_captured);
  // Whether an operation's parent is the handle of a graph-captured API call.
  static bool isGraphCapturedApi(void* parent);

  // Writes out every operation still open, as at each communicator's finalize (at the end of the
  // capture, for communicators the program never destroyed).
  void finalizeAll();

  // For the capture thread.
  std::vector<format::NcclCommunicatorRecord> takeCommunicators();
  std::vector<CompletedNcclOperation> takeCompleted();
  std::vector<format::NetTransferRecord> takeTransfers();
  NcclProfilerStats stats() const;

  struct Context;
  struct Event;

 private:
  std::unique_ptr<Context> newContext(NcclAbi abi);
  void noteCommunicatorLocked(Context& context, const NcclOperationSource& source);
  Event* claim(Context& context, uint64_t type);
  void completeIfDone(Event& op);
  void finishProxyOp(Event& proxy_op);
  void finalizeLocked(Context& context);

  std::function<uint64_t()> now_;
  int32_t global_rank_;
  std::function<uint32_t()> current_device_;
  size_t ring_slots_;
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<Context>> contexts_;
  std::vector<format::NcclCommunicatorRecord> communicators_;
  std::vector<CompletedNcclOperation> completed_;
  std::vector<format::NetTransferRecord> completed_transfers_;
  uint64_t next_operation_id_ = 1;
  NcclProfilerStats stats_;
};

// Bytes of one element of an NCCL datatype name ("ncclFloat32" -> 4); 1 for names it does not
// know (NCCL 2.28 reports ncclUint8 as "Unknown").
size_t ncclTypeSize(const char* datatype);

}  // namespace gpuxray::inject
