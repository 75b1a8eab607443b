// The NCCL side of the capture: NCCL's profiler plugin calls (one context per communicator) are
// assembled here into complete operations, which the capture thread drains and writes.
//
// Event lifetimes follow NCCL: a collective's or p2p's stopEvent only means "enqueued"; its
// KernelCh children (one per channel, GPU timer start/stop) and ProxyOp children (network work,
// with ProxyStep grandchildren) arrive later, from the proxy and host-callback threads. An
// operation is complete once it was stopped and every channel's kernel stopped (NCCL before 2.26
// reports no kernel channels: there, once it was stopped); a proxy operation once it and its steps
// stopped; each is then queued for writing.
//
// Threads and memory: every context (communicator) has its own pools, locks and queues, so
// communicators never wait on each other. Operations come from one pool per context, claimed by
// the user or host-callback thread; whichever thread completes one queues a pointer to it, and the
// capture thread copies it out and gives the slot back; proxy
// operations and kernel channels from pools that only the proxy thread (and finalize) touch, under
// the context's proxy lock; a proxy operation carries its NCCL_STEPS step slots inline, so a step
// costs no claim. Pools hand out free slots first-in first-out (a slot is reused as late as
// possible: NCCL may still hold its handle), grow in chunks up to a bound, and never move or free
// a slot while the process runs. A start that finds its pool at the bound is dropped and counted,
// never blocking NCCL. An operation whose kernel channels stop reporting is written as it is after
// kStuckOperationNs, so it cannot hold its slot forever. Nothing on the event path takes a
// process-wide lock, copies a string or makes a system call besides reading the clock.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "inject/nccl_profiler_abi.h"
#include "proto/records.h"

namespace gpuxray::inject {

struct OperationEvent;
struct ProxyOpEvent;

// An operation as the capture thread receives it: the record without its string ids, and the
// strings (NCCL's static names). Its network transfers come separately (takeTransfers), naming it
// by operation_id.
struct CompletedNcclOperation {
  format::NcclOperationRecord record;
  std::string_view func;
  std::string_view datatype;
  std::string_view algorithm;
  std::string_view protocol;
  // What NCCL's order of calls guarantees about the GPU times, still on the GPU's clock, for
  // placing them on the capture clock (see NcclClockMapper):
  // - a capture-clock time before the kernel could start (0: none known): the API call or kernel
  //   launch of the operation (v5+), the start of the previous group on its communicator, or for a
  //   graph replay its own start (NCCL's host callback runs before the replayed kernel);
  uint64_t gpu_not_before_ns = 0;
  // - the largest capture-minus-GPU offset the channel reports allow: the proxy thread reports a
  //   channel's start and stop only after the GPU stamped them (INT64_MAX: no channel reported).
  int64_t max_clock_offset = INT64_MAX;
};

struct NcclProfilerStats {
  uint64_t operations = 0;
  // Events refused because their pool was at its bound.
  uint64_t dropped_events = 0;
  // Proxy operations of another process (PXN), recorded without their operation.
  uint64_t foreign_proxy_ops = 0;
  // Network transfers whose operation was not recorded (dropped, or started without one).
  uint64_t unlinked_transfers = 0;
  // Operations written before all their kernel channels reported (after kStuckOperationNs).
  uint64_t expired_operations = 0;
  // Calls after their communicator's finalize, ignored.
  uint64_t events_after_finalize = 0;
  // Internal errors (an exception inside an entry point): the plugin turned itself off.
  uint64_t internal_errors = 0;
  std::string first_internal_error;
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
  // An operation whose kernel channels have not all stopped this long after NCCL enqueued it is
  // written as it is.
  static constexpr uint64_t kStuckOperationNs = 10'000'000'000;

  // `now` is the capture clock (the one CUPTI stamps records with); `current_device` says which
  // CUDA device the calling thread uses (NCCL initializes a communicator with its device current).
  // `max_events` bounds each pool of each communicator.
  NcclProfiler(std::function<uint64_t()> now, int32_t global_rank, std::function<uint32_t()> current_device,
               size_t max_events = 65536);
  ~NcclProfiler();

  // The event types gpuxray asks NCCL for (the v5+ tables add the API-level events).
  static int activationMask();

  // The plugin entry points, version-neutral; the exported v1-v6 tables adapt to these.
  nccl_abi::Result init(void** context, uint64_t comm_hash, int* activation_mask, const char* comm_name, int n_nodes,
                        int n_ranks, int rank, NcclAbi abi);
  // For ABIs whose init names no communicator (v1-v3): its operations name it.
  nccl_abi::Result initUnnamed(void** context, int* activation_mask, NcclAbi abi);
  // A group of operations NCCL is about to start (one kernel plan): Coll and P2p events come
  // only under a group handle through v4, so the handle is never null.
  nccl_abi::Result startGroup(void* context, void** handle);
  // API-level events (GroupApi, CollApi, P2pApi, KernelLaunch; v5+), all issued before the kernel
  // is launched: their start is a bound for the clock mapping.
  nccl_abi::Result startApi(void* context, void** handle, bool graph_captured);
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

  // The handles of API-level and group events are markers, valid for the life of the process,
  // needing no slot: gpuxray reads from them only whether the call was captured into a CUDA graph
  // (NCCL names a CollApi as the parent of the operations it issues, including every replay of a
  // captured graph long after the call returned). Stopping one or recording its state does nothing.
  static void* apiEventHandle(bool graph_captured);
  static bool isGraphCapturedApi(void* parent);

  // Writes out every operation still open, as at each communicator's finalize (at the end of the
  // capture, for communicators the program never destroyed).
  void finalizeAll();

  // An exception escaped an entry point: counted and kept for the trailer.
  void noteInternalError(const char* what);

  // For the capture thread.
  std::vector<format::NcclCommunicatorRecord> takeCommunicators();
  std::vector<CompletedNcclOperation> takeCompleted();
  std::vector<format::NetTransferRecord> takeTransfers();
  NcclProfilerStats stats() const;

  struct Context;

 private:
  Context* newContext(NcclAbi abi, uint64_t comm_hash);
  void complete(Context& context, OperationEvent& op);
  void finishProxyOp(Context& context, ProxyOpEvent& proxy_op);
  void expireStuckOperations(Context& context, uint64_t now);
  void finalizeContext(Context& context);
  nccl_abi::Result startOperation(void* context, void** handle, const NcclOperationSource& source, uint8_t channels,
                                  OperationEvent*& claimed, uint64_t& now);

  std::function<uint64_t()> now_;
  int32_t global_rank_;
  std::function<uint32_t()> current_device_;
  size_t max_events_;
  // Guards the list of contexts (init, finalize and the capture thread's drains; no event).
  mutable std::mutex contexts_mutex_;
  std::vector<std::unique_ptr<Context>> contexts_;
  std::atomic<uint64_t> internal_errors_{0};
  mutable std::mutex first_error_mutex_;
  std::string first_internal_error_;
};

// Bytes of one element of an NCCL datatype name ("ncclFloat32" -> 4); 1 for names it does not
// know (NCCL 2.28 reports ncclUint8 as "Unknown").
size_t ncclTypeSize(const char* datatype);

}  // namespace gpuxray::inject
