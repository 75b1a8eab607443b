#include "inject/nccl_profiler.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <string_view>

namespace gpuxray::inject {

using nccl_abi::kSuccess;

struct NcclProfiler::Event {
  uint64_t type = 0;
  bool in_use = false;
  Context* context = nullptr;

  // Collectives and p2p operations.
  CompletedNcclOperation op;
  bool host_stopped = false;
  int channels_expected = 0;
  int channels_done = 0;

  // Proxy operations: the network transfer they account for, and their open steps.
  format::NetTransferRecord transfer;
  int open_steps = 0;
  bool stopped = false;

  // Proxy steps: the proxy operation they belong to and their current state.
  Event* proxy_op = nullptr;
  int state = 0;
  uint64_t state_since = 0;

  // Kernel channels: the operation they belong to and the GPU timer at their start.
  Event* operation = nullptr;
  uint64_t gpu_start = 0;
};

struct NcclProfiler::Context {
  NcclAbi abi;
  uint64_t init_ns = 0;
  uint32_t device = 0;
  // The communicator's hash: from init (v4+), or from its first operation (v1-v3).
  uint64_t comm_hash = 0;
  // v1-v3: the communicator hashes its operations named, each recorded once.
  std::vector<uint64_t> named_hashes;
  // One ring per event type, indexed by a running counter.
  struct Ring {
    std::vector<Event> slots;
    size_t next = 0;
  };
  Ring operations;
  Ring proxy_ops;
  Ring proxy_steps;
  Ring kernel_channels;
};

namespace {

// The API-event markers (see apiEventHandle): [0] an eager call, [1] a graph-captured one.
char g_api_event_markers[2];

bool isApiEventHandle(const void* handle) {
  return handle == &g_api_event_markers[0] || handle == &g_api_event_markers[1];
}

}  // namespace

size_t ncclTypeSize(const char* datatype) {
  if (datatype == nullptr) return 1;
  std::string_view name(datatype);
  for (auto [type, size] : {std::pair<std::string_view, size_t>{"ncclInt8", 1}, {"ncclChar", 1}, {"ncclUint8", 1},
                            {"ncclInt32", 4}, {"ncclInt", 4}, {"ncclUint32", 4}, {"ncclInt64", 8}, {"ncclUint64", 8},
                            {"ncclFloat16", 2}, {"ncclHalf", 2}, {"ncclFloat32", 4}, {"ncclFloat", 4},
                            {"ncclFloat64", 8}, {"ncclDouble", 8}, {"ncclBfloat16", 2}, {"ncclFloat8e4m3", 1},
                            {"ncclFloat8e5m2", 1}}) {
    if (name == type) return size;
  }
  return 1;
}

NcclProfiler::NcclProfiler(std::function<uint64_t()> now, int32_t global_rank,
                           std::function<uint32_t()> current_device, size_t ring_slots)
    : now_(std::move(now)),
      global_rank_(global_rank),
      current_device_(std::move(current_device)),
      ring_slots_(ring_slots) {}

NcclProfiler::~NcclProfiler() = default;

int NcclProfiler::activationMask() {
  return static_cast<int>(nccl_abi::kColl | nccl_abi::kP2p | nccl_abi::kProxyOp | nccl_abi::kProxyStep |
                          nccl_abi::kKernelCh);
}

void* NcclProfiler::apiEventHandle(bool graph_captured) { return &g_api_event_markers[graph_captured ? 1 : 0]; }

bool NcclProfiler::isGraphCapturedApi(void* parent) { return parent == &g_api_event_markers[1]; }

// Called on the thread initializing the communicator, which has its device current.
std::unique_ptr<NcclProfiler::Context> NcclProfiler::newContext(NcclAbi abi) {
  auto created = std::make_unique<Context>();
  created->abi = abi;
  created->init_ns = now_();
  created->device = current_device_();
  for (auto* ring : {&created->operations, &created->proxy_ops, &created->proxy_steps, &created->kernel_channels}) {
    ring->slots.resize(ring_slots_);
    for (Event& slot : ring->slots) slot.context = created.get();
  }
  return created;
}

nccl_abi::Result NcclProfiler::init(void** context, uint64_t comm_hash, int* activation_mask, const char* comm_name,
                                    int n_nodes, int n_ranks, int rank, NcclAbi abi) {
  auto created = newContext(abi);
  created->comm_hash = comm_hash;
  *activation_mask = activationMask();
  *context = created.get();
  std::lock_guard<std::mutex> lock(mutex_);
  communicators_.push_back({comm_hash, comm_name != nullptr ? comm_name : "", rank, n_ranks, n_nodes, global_rank_,
                            created->device, created->init_ns, abi.version});
  contexts_.push_back(std::move(created));
  return kSuccess;
}

nccl_abi::Result NcclProfiler::initUnnamed(void** context, int* activation_mask, NcclAbi abi) {
  auto created = newContext(abi);
  *activation_mask = activationMask();
  *context = created.get();
  std::lock_guard<std::mutex> lock(mutex_);
  contexts_.push_back(std::move(created));
  return kSuccess;
}

// Records a communicator that an operation names (v1-v3), the first time its hash shows up in
// the context. What those versions never say (ranks, nodes) stays 0. Called with mutex_ held.
void NcclProfiler::noteCommunicatorLocked(Context& context, const NcclOperationSource& source) {
  if (!source.names_communicator) return;
  auto& named = context.named_hashes;
  if (std::find(named.begin(), named.end(), source.comm_hash) != named.end()) return;
  if (named.empty()) context.comm_hash = source.comm_hash;
  named.push_back(source.comm_hash);
  communicators_.push_back({source.comm_hash, source.comm_name != nullptr ? source.comm_name : "", source.comm_rank,
                            0, 0, global_rank_, context.device, context.init_ns, context.abi.version});
}

// A free slot of the context's ring for `type`, or nullptr (counted) if the ring caught up with
// events still in flight. Called with mutex_ held.
NcclProfiler::Event* NcclProfiler::claim(Context& context, uint64_t type) {
  Context::Ring& ring = type == nccl_abi::kProxyOp     ? context.proxy_ops
                        : type == nccl_abi::kProxyStep ? context.proxy_steps
                        : type == nccl_abi::kKernelCh  ? context.kernel_channels
                                                       : context.operations;
  Event& slot = ring.slots[ring.next++ % ring.slots.size()];
  if (slot.in_use) {
    ++stats_.dropped_events;
    return nullptr;
  }
  Context* owner = slot.context;
  slot = Event{};
  slot.context = owner;
  slot.type = type;
  slot.in_use = true;
  return &slot;
}

nccl_abi::Result NcclProfiler::startColl(void* context, void** handle, const nccl_abi::CollDescr& coll,
                                         const NcclOperationSource& source) {
  uint64_t now = now_();
  std::lock_guard<std::mutex> lock(mutex_);
  auto& owner = *static_cast<Context*>(context);
  noteCommunicatorLocked(owner, source);
  Event* event = claim(owner, nccl_abi::kColl);
  *handle = event;
  if (event == nullptr) return kSuccess;
  auto& r = event->op.record;
  r.kind = format::NcclOperationKind::kCollective;
  r.comm_hash = source.names_communicator ? source.comm_hash : owner.comm_hash;
  r.graph_captured = source.graph_captured;
  r.seq = coll.seq_number;
  r.enqueue_ns = now;
  r.count = coll.count;
  // AllGather and Broadcast report count in bytes with an int8 type, so this is bytes for all.
  r.bytes = coll.count * ncclTypeSize(coll.datatype);
  r.root = coll.root;
  r.channels = coll.n_channels;
  r.warps = coll.n_warps;
  r.device = event->context->device;
  r.operation_id = next_operation_id_++;
  event->op.func = coll.func != nullptr ? coll.func : "";
  event->op.datatype = coll.datatype != nullptr ? coll.datatype : "";
  event->op.algorithm = coll.algo != nullptr ? coll.algo : "";
  event->op.protocol = coll.proto != nullptr ? coll.proto : "";
  event->channels_expected = owner.abi.kernel_channels ? coll.n_channels : 0;
  return kSuccess;
}

nccl_abi::Result NcclProfiler::startP2p(void* context, void** handle, const nccl_abi::P2pDescr& p2p,
                                        const NcclOperationSource& source) {
  uint64_t now = now_();
  std::lock_guard<std::mutex> lock(mutex_);
  auto& owner = *static_cast<Context*>(context);
  noteCommunicatorLocked(owner, source);
  Event* event = claim(owner, nccl_abi::kP2p);
  *handle = event;
  if (event == nullptr) return kSuccess;
  std::string_view func = p2p.func != nullptr ? p2p.func : "";
  auto& r = event->op.record;
  r.kind = func == "Recv" ? format::NcclOperationKind::kRecv : format::NcclOperationKind::kSend;
  r.comm_hash = source.names_communicator ? source.comm_hash : owner.comm_hash;
  r.graph_captured = source.graph_captured;
  r.enqueue_ns = now;
  r.count = p2p.count;
  r.bytes = p2p.count * ncclTypeSize(p2p.datatype);
  r.peer = p2p.peer;
  r.channels = p2p.n_channels;
  r.device = event->context->device;
  r.operation_id = next_operation_id_++;
  event->op.func = std::string(func);
  event->op.datatype = p2p.datatype != nullptr ? p2p.datatype : "";
  event->channels_expected = owner.abi.kernel_channels ? p2p.n_channels : 0;
  return kSuccess;
}

nccl_abi::Result NcclProfiler::startProxyOp(void* context, void** handle, void* parent,
                                            const nccl_abi::ProxyOpDescr& op) {
  uint64_t now = now_();
  std::lock_guard<std::mutex> lock(mutex_);
  Event* event = claim(*static_cast<Context*>(context), nccl_abi::kProxyOp);
  *handle = event;
  if (event == nullptr) return kSuccess;
  auto& t = event->transfer;
  t.peer = op.peer;
  t.channel = op.channel_id;
  t.is_send = op.is_send != 0;
  t.start_ns = now;
  t.comm_hash = event->context->comm_hash;
  // With PXN the operation may belong to another process: its parent pointer is not ours to read.
  if (op.pid != ::getpid()) {
    ++stats_.foreign_proxy_ops;
  } else if (parent != nullptr && !isApiEventHandle(parent)) {
    const auto& operation = static_cast<Event*>(parent)->op.record;
    t.operation_id = operation.operation_id;
    t.comm_hash = operation.comm_hash;
  }
  return kSuccess;
}

nccl_abi::Result NcclProfiler::startProxyStep(void* context, void** handle, void* parent,
                                              const nccl_abi::ProxyStepDescr&) {
  std::lock_guard<std::mutex> lock(mutex_);
  Event* event = claim(*static_cast<Context*>(context), nccl_abi::kProxyStep);
  *handle = event;
  if (event == nullptr) return kSuccess;
  auto* proxy_op = isApiEventHandle(parent) ? nullptr : static_cast<Event*>(parent);
  if (proxy_op != nullptr && proxy_op->in_use && proxy_op->type == nccl_abi::kProxyOp) {
    event->proxy_op = proxy_op;
    ++proxy_op->open_steps;
    ++proxy_op->transfer.steps;
  }
  return kSuccess;
}

nccl_abi::Result NcclProfiler::startKernelCh(void* context, void** handle, void* parent,
                                             const nccl_abi::KernelChDescr& channel) {
  std::lock_guard<std::mutex> lock(mutex_);
  Event* event = claim(*static_cast<Context*>(context), nccl_abi::kKernelCh);
  *handle = event;
  if (event == nullptr) return kSuccess;
  auto* operation = isApiEventHandle(parent) ? nullptr : static_cast<Event*>(parent);
  if (operation != nullptr && operation->in_use && (operation->type == nccl_abi::kColl || operation->type == nccl_abi::kP2p))
    event->operation = operation;
  event->gpu_start = channel.gpu_timer;
  return kSuccess;
}

namespace {

using WaitField = uint64_t format::NetTransferRecord::*;

// Which wait a proxy step's state is: for the GPU, for the peer, or for the network.
WaitField waitOf(int state) {
  switch (state) {
    case nccl_abi::kProxyStepSendGpuWait:
    case nccl_abi::kProxyStepRecvGpuWait: return &format::NetTransferRecord::wait_gpu_ns;
    case nccl_abi::kProxyStepSendPeerWait: return &format::NetTransferRecord::wait_peer_ns;
    case nccl_abi::kProxyStepSendWait:
    case nccl_abi::kProxyStepRecvWait:
    case nccl_abi::kProxyStepRecvFlushWait: return &format::NetTransferRecord::wait_network_ns;
    default: return nullptr;
  }
}

}  // namespace

nccl_abi::Result NcclProfiler::recordEventState(void* handle, int state, const nccl_abi::EventStateArgs* args) {
  if (handle == nullptr || isApiEventHandle(handle)) return kSuccess;
  uint64_t now = now_();
  std::lock_guard<std::mutex> lock(mutex_);
  auto& event = *static_cast<Event*>(handle);
  if (!event.in_use) return kSuccess;
  if (event.type == nccl_abi::kProxyStep && event.proxy_op != nullptr) {
    auto& transfer = event.proxy_op->transfer;
    if (auto wait = waitOf(event.state); wait != nullptr && event.state_since != 0)
      transfer.*wait += now - event.state_since;
    event.state = state;
    event.state_since = now;
    // The bytes on the wire: counted once per step, when the send is posted or the receive flushed.
    if (args != nullptr && (state == nccl_abi::kProxyStepSendWait || state == nccl_abi::kProxyStepRecvFlushWait))
      transfer.bytes += args->proxy_step.trans_size;
  } else if (event.type == nccl_abi::kKernelCh && state == nccl_abi::kKernelChStop && args != nullptr &&
             event.operation != nullptr) {
    auto& r = event.operation->op.record;
    uint64_t start = event.gpu_start;
    uint64_t stop = args->kernel_ch.gpu_timer;
    r.gpu_start_ns = r.gpu_start_ns == 0 ? start : std::min(r.gpu_start_ns, start);
    r.gpu_end_ns = std::max(r.gpu_end_ns, stop);
    event.operation->op.kernel_stop_seen_ns = std::max(event.operation->op.kernel_stop_seen_ns, now);
  }
  return kSuccess;
}

nccl_abi::Result NcclProfiler::recordProxyOpBytes(void* handle, uint64_t bytes_so_far) {
  if (handle == nullptr || isApiEventHandle(handle)) return kSuccess;
  std::lock_guard<std::mutex> lock(mutex_);
  auto& event = *static_cast<Event*>(handle);
  if (event.in_use && event.type == nccl_abi::kProxyOp)
    event.transfer.bytes = std::max<uint64_t>(event.transfer.bytes, bytes_so_far);
  return kSuccess;
}

void NcclProfiler::completeIfDone(Event& op) {
  if (!op.host_stopped || op.channels_done < op.channels_expected) return;
  completed_.push_back(std::move(op.op));
  ++stats_.operations;
  op.in_use = false;
}

void NcclProfiler::finishProxyOp(Event& proxy_op) {
  if (!proxy_op.stopped || proxy_op.open_steps > 0) return;
  completed_transfers_.push_back(proxy_op.transfer);
  proxy_op.in_use = false;
}

nccl_abi::Result NcclProfiler::stopEvent(void* handle) {
  if (handle == nullptr || isApiEventHandle(handle)) return kSuccess;
  uint64_t now = now_();
  std::lock_guard<std::mutex> lock(mutex_);
  auto& event = *static_cast<Event*>(handle);
  if (!event.in_use) return kSuccess;
  switch (event.type) {
    case nccl_abi::kColl:
    case nccl_abi::kP2p:
      event.host_stopped = true;
      event.op.record.enqueue_end_ns = now;
      completeIfDone(event);
      break;
    case nccl_abi::kProxyOp:
      event.stopped = true;
      event.transfer.end_ns = now;
      finishProxyOp(event);
      break;
    case nccl_abi::kProxyStep:
      if (event.proxy_op != nullptr) {
        if (auto wait = waitOf(event.state); wait != nullptr && event.state_since != 0)
          event.proxy_op->transfer.*wait += now - event.state_since;
        --event.proxy_op->open_steps;
        finishProxyOp(*event.proxy_op);
      }
      event.in_use = false;
      break;
    case nccl_abi::kKernelCh:
      if (event.operation != nullptr) {
        ++event.operation->channels_done;
        completeIfDone(*event.operation);
      }
      event.in_use = false;
      break;
    default:
      event.in_use = false;
  }
  return kSuccess;
}

nccl_abi::Result NcclProfiler::finalize(void* context) {
  std::lock_guard<std::mutex> lock(mutex_);
  finalizeLocked(*static_cast<Context*>(context));
  return kSuccess;
}

void NcclProfiler::finalizeAll() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& context : contexts_) finalizeLocked(*context);
}

void NcclProfiler::finalizeLocked(Context& finished) {
  // Whatever is still open will not complete any more: write it as it is.
  for (Event& op : finished.operations.slots) {
    if (!op.in_use) continue;
    op.host_stopped = true;
    op.channels_done = op.channels_expected;
    completeIfDone(op);
  }
  for (Event& proxy_op : finished.proxy_ops.slots) {
    if (!proxy_op.in_use) continue;
    proxy_op.stopped = true;
    proxy_op.open_steps = 0;
    finishProxyOp(proxy_op);
  }
  // The context itself stays allocated: NCCL may still hold handles into it.
}

std::vector<format::NcclCommunicatorRecord> NcclProfiler::takeCommunicators() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<format::NcclCommunicatorRecord> taken;
  taken.swap(communicators_);
  return taken;
}

std::vector<CompletedNcclOperation> NcclProfiler::takeCompleted() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<CompletedNcclOperation> taken;
  taken.swap(completed_);
  return taken;
}

std::vector<format::NetTransferRecord> NcclProfiler::takeTransfers() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<format::NetTransferRecord> taken;
  taken.swap(completed_transfers_);
  return taken;
}

NcclProfilerStats NcclProfiler::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

}  // namespace gpuxray::inject
