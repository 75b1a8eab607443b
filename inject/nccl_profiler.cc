#include "inject/nccl_profiler.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <type_traits>

namespace gpuxray::inject {

using nccl_abi::kSuccess;

namespace {

// NCCL keeps at most NCCL_STEPS (8) steps of a proxy operation in flight, in slots indexed by the
// step number modulo 8 (net.cc's sub->pHandles[step % NCCL_STEPS]).
constexpr int kNcclSteps = 8;
constexpr size_t kFirstChunk = 256;
// How often the proxy thread looks for operations whose channels stopped reporting.
constexpr uint64_t kExpiryScanIntervalNs = 1'000'000'000;

// What a handle points at: the first byte of every event, and the markers' only byte.
enum class Kind : uint8_t { kApiEager, kApiGraph, kGroup, kOperation, kProxyOp, kProxyStep, kKernelChannel };

struct EventHeader {
  Kind kind;
};

EventHeader g_markers[] = {{Kind::kApiEager}, {Kind::kApiGraph}, {Kind::kGroup}};

Kind kindOf(const void* handle) {
  return static_cast<const EventHeader*>(handle)->kind;
}
bool isMarker(const void* handle) {
  return kindOf(handle) <= Kind::kGroup;
}

// A lock held for a few instructions: an uncontended lock and unlock cost two atomic operations
// and never enter the kernel.
class SpinLock {
 public:
  void lock() {
    while (locked_.exchange(true, std::memory_order_acquire)) {
      while (locked_.load(std::memory_order_relaxed)) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
      }
    }
  }
  void unlock() {
    locked_.store(false, std::memory_order_release);
  }

 private:
  std::atomic<bool> locked_{false};
};

using Guard = std::lock_guard<SpinLock>;

// Slots that never move, handed out first-in first-out. The caller holds the lock that guards it.
template <typename T>
class EventPool {
 public:
  explicit EventPool(size_t bound) : bound_(std::max<size_t>(bound, 1)) {}

  T* claim() {
    if (free_ == 0 && !grow()) return nullptr;
    T* slot = ring_[head_];
    head_ = (head_ + 1) & (ring_.size() - 1);
    --free_;
    return slot;
  }
  void release(T* slot) {
    ring_[(head_ + free_) & (ring_.size() - 1)] = slot;
    ++free_;
  }
  template <typename F>
  void forEach(F&& visit) {
    for (auto& chunk : chunks_) {
      for (size_t i = 0; i < chunk.size; ++i) visit(chunk.slots[i]);
    }
  }

 private:
  // Called only when no slot is free, so the ring holds nothing to keep.
  bool grow() {
    if (capacity_ >= bound_) return false;
    size_t added = std::min(std::max(capacity_, std::min(kFirstChunk, bound_)), bound_ - capacity_);
    auto slots = std::make_unique<T[]>(added);
    std::vector<T*> ring(std::bit_ceil(capacity_ + added));
    for (size_t i = 0; i < added; ++i) ring[i] = &slots[i];
    chunks_.push_back({std::move(slots), added});
    ring_.swap(ring);
    head_ = 0;
    free_ = added;
    capacity_ += added;
    return true;
  }

  struct Chunk {
    std::unique_ptr<T[]> slots;
    size_t size = 0;
  };
  size_t bound_;
  size_t capacity_ = 0;
  std::vector<Chunk> chunks_;
  std::vector<T*> ring_;
  size_t head_ = 0;
  size_t free_ = 0;
};

// The time a proxy operation spends in each kind of wait, counted once however many of its steps
// wait at the same time (NCCL keeps up to 8 in flight): the union of their wait intervals.
struct WaitUnion {
  uint32_t open = 0;
  uint64_t since = 0;
};

enum WaitKind { kWaitGpu, kWaitPeer, kWaitNetwork, kWaitKinds, kNoWait = kWaitKinds };

WaitKind waitOf(int state) {
  switch (state) {
    case nccl_abi::kProxyStepSendGpuWait:
    case nccl_abi::kProxyStepRecvGpuWait:
      return kWaitGpu;
    case nccl_abi::kProxyStepSendPeerWait:
      return kWaitPeer;
    case nccl_abi::kProxyStepSendWait:
    case nccl_abi::kProxyStepRecvWait:
    case nccl_abi::kProxyStepRecvFlushWait:
      return kWaitNetwork;
    default:
      return kNoWait;
  }
}

constexpr uint64_t format::NetTransferRecord::*kWaitFields[] = {&format::NetTransferRecord::wait_gpu_ns,
                                                                &format::NetTransferRecord::wait_peer_ns,
                                                                &format::NetTransferRecord::wait_network_ns};

int64_t difference(uint64_t a, uint64_t b) {
  return static_cast<int64_t>(a - b);
}

// This process's id, read once and again in a forked child: NCCL names the process of each proxy
// operation, and a system call per operation would cost more than the rest of the event.
std::atomic<pid_t> g_pid{0};

pid_t processId() {
  pid_t pid = g_pid.load(std::memory_order_relaxed);
  if (pid != 0) return pid;
  static const bool registered = [] { return pthread_atfork(nullptr, nullptr, [] { g_pid.store(0); }) == 0; }();
  (void)registered;
  pid = ::getpid();
  g_pid.store(pid, std::memory_order_relaxed);
  return pid;
}

}  // namespace

struct OperationEvent {
  EventHeader header{Kind::kOperation};
  NcclProfiler::Context* context = nullptr;
  // The host's stop plus each expected channel's: 0 when the slot is free. Whoever takes it to 0
  // writes the operation.
  std::atomic<uint32_t> pending{0};
  std::atomic<bool> host_stopped{false};
  std::atomic<uint64_t> host_stop_ns{0};
  // What a proxy operation started under it links to (read by the proxy thread).
  std::atomic<uint64_t> operation_id{0};
  std::atomic<uint64_t> comm_hash{0};
  uint32_t channels_expected = 0;
  uint32_t channels_started = 0;  // proxy thread only
  CompletedNcclOperation op;
};

struct ProxyOpEvent;

struct StepEvent {
  EventHeader header{Kind::kProxyStep};
  ProxyOpEvent* owner = nullptr;
  bool in_use = false;
  int state = -1;
};

struct ProxyOpEvent {
  EventHeader header{Kind::kProxyOp};
  NcclProfiler::Context* context = nullptr;
  bool in_use = false;
  bool stopped = false;
  int open_steps = 0;
  bool foreign = false;
  format::NetTransferRecord transfer;
  WaitUnion waits[kWaitKinds];
  StepEvent steps[kNcclSteps];
};

struct KernelChannelEvent {
  EventHeader header{Kind::kKernelChannel};
  NcclProfiler::Context* context = nullptr;
  bool in_use = false;
  OperationEvent* operation = nullptr;
  uint64_t gpu_start = 0;
  uint64_t start_seen_ns = 0;
};

static_assert(std::is_standard_layout_v<OperationEvent> && std::is_standard_layout_v<StepEvent> &&
              std::is_standard_layout_v<ProxyOpEvent> && std::is_standard_layout_v<KernelChannelEvent>);

struct NcclProfiler::Context {
  explicit Context(size_t max_events) : operations(max_events), proxy_ops(max_events), channels(max_events) {}

  NcclAbi abi;
  uint64_t init_ns = 0;
  uint32_t device = 0;
  // The communicator's hash: from init (v4+), or from its first operation (v1-v3).
  std::atomic<uint64_t> comm_hash{0};
  std::atomic<bool> finalized{false};
  // Clock-mapping bounds: when the last API-level event (v5+) and the last group started, and the
  // bound for the operations of the current group.
  std::atomic<uint64_t> last_api_start_ns{0};
  std::atomic<uint64_t> last_group_start_ns{0};
  std::atomic<uint64_t> group_not_before_ns{0};

  // The operation pool and everything the capture thread takes.
  SpinLock shared;
  EventPool<OperationEvent> operations;
  // Written operations, still in their slots until the capture thread copies them out (the hot
  // path queues a pointer), and the capture thread's own vector it swaps in.
  std::vector<OperationEvent*> completed;
  std::vector<OperationEvent*> drained;
  std::vector<format::NetTransferRecord> transfers;
  std::vector<format::NcclCommunicatorRecord> communicators;
  std::vector<uint64_t> named_hashes;  // v1-v3: the hashes its operations named, each recorded once

  // The proxy thread's events (and finalize). Taken before `shared` when both are needed.
  SpinLock proxy;
  EventPool<ProxyOpEvent> proxy_ops;
  EventPool<KernelChannelEvent> channels;
  uint64_t last_expiry_scan_ns = 0;

  // Operation ids: unique in the file, counted per communicator.
  uint64_t id_base = 0;
  std::atomic<uint64_t> next_id{1};
  std::atomic<uint64_t> operations_written{0};
  std::atomic<uint64_t> dropped{0};
  std::atomic<uint64_t> foreign{0};
  std::atomic<uint64_t> unlinked{0};
  std::atomic<uint64_t> expired{0};
  std::atomic<uint64_t> after_finalize{0};
};

namespace {

// A call on an event its communicator's finalize already wrote out: counted, nothing else.
nccl_abi::Result ignoredAfterFinalize(NcclProfiler::Context& context) {
  if (context.finalized.load(std::memory_order_relaxed)) context.after_finalize.fetch_add(1, std::memory_order_relaxed);
  return kSuccess;
}

}  // namespace

size_t ncclTypeSize(const char* datatype) {
  if (datatype == nullptr) return 1;
  // NCCL names datatypes with static strings: the last one asked for is likely asked for again.
  thread_local const char* last_name = nullptr;
  thread_local size_t last_size = 1;
  if (datatype == last_name) return last_size;
  std::string_view name(datatype);
  size_t size = 1;
  for (auto [type, bytes] : {std::pair<std::string_view, size_t>{"ncclInt8", 1},
                             {"ncclChar", 1},
                             {"ncclUint8", 1},
                             {"ncclInt32", 4},
                             {"ncclInt", 4},
                             {"ncclUint32", 4},
                             {"ncclInt64", 8},
                             {"ncclUint64", 8},
                             {"ncclFloat16", 2},
                             {"ncclHalf", 2},
                             {"ncclFloat32", 4},
                             {"ncclFloat", 4},
                             {"ncclFloat64", 8},
                             {"ncclDouble", 8},
                             {"ncclBfloat16", 2},
                             {"ncclFloat8e4m3", 1},
                             {"ncclFloat8e5m2", 1}}) {
    if (name == type) {
      size = bytes;
      break;
    }
  }
  last_name = datatype;
  last_size = size;
  return size;
}

NcclProfiler::NcclProfiler(std::function<uint64_t()> now, int32_t global_rank, std::function<uint32_t()> current_device,
                           size_t max_events)
    : now_(std::move(now)),
      global_rank_(global_rank),
      current_device_(std::move(current_device)),
      max_events_(max_events) {}

NcclProfiler::~NcclProfiler() = default;

int NcclProfiler::activationMask() {
  return static_cast<int>(nccl_abi::kGroup | nccl_abi::kColl | nccl_abi::kP2p | nccl_abi::kProxyOp |
                          nccl_abi::kProxyStep | nccl_abi::kKernelCh);
}

void* NcclProfiler::apiEventHandle(bool graph_captured) {
  return &g_markers[graph_captured ? 1 : 0];
}

bool NcclProfiler::isGraphCapturedApi(void* parent) {
  return parent == &g_markers[1];
}

// Called on the thread initializing the communicator, which has its device current.
NcclProfiler::Context* NcclProfiler::newContext(NcclAbi abi, uint64_t comm_hash) {
  auto created = std::make_unique<Context>(max_events_);
  created->abi = abi;
  created->init_ns = now_();
  created->device = current_device_();
  created->comm_hash.store(comm_hash, std::memory_order_relaxed);
  Context* context = created.get();
  std::lock_guard<std::mutex> lock(contexts_mutex_);
  context->id_base = static_cast<uint64_t>(contexts_.size()) << 40;
  contexts_.push_back(std::move(created));
  return context;
}

nccl_abi::Result NcclProfiler::init(void** context, uint64_t comm_hash, int* activation_mask, const char* comm_name,
                                    int n_nodes, int n_ranks, int rank, NcclAbi abi) {
  Context* created = newContext(abi, comm_hash);
  {
    Guard lock(created->shared);
    created->communicators.push_back({comm_hash, comm_name != nullptr ? comm_name : "", rank, n_ranks, n_nodes,
                                      global_rank_, created->device, created->init_ns, abi.version});
  }
  *activation_mask = activationMask();
  *context = created;
  return kSuccess;
}

nccl_abi::Result NcclProfiler::initUnnamed(void** context, int* activation_mask, NcclAbi abi) {
  *context = newContext(abi, 0);
  *activation_mask = activationMask();
  return kSuccess;
}

nccl_abi::Result NcclProfiler::startGroup(void* context, void** handle) {
  *handle = &g_markers[2];
  auto& owner = *static_cast<Context*>(context);
  uint64_t now = now_();
  // The operations of this group launched their kernel after the previous group started (NCCL
  // starts a group's events after launching its kernel, and before the caller's next call) and
  // after their own API calls.
  uint64_t bound = std::max(owner.last_group_start_ns.load(std::memory_order_relaxed),
                            owner.last_api_start_ns.load(std::memory_order_relaxed));
  owner.group_not_before_ns.store(bound, std::memory_order_relaxed);
  owner.last_group_start_ns.store(now, std::memory_order_relaxed);
  return kSuccess;
}

nccl_abi::Result NcclProfiler::startApi(void* context, void** handle, bool graph_captured) {
  *handle = apiEventHandle(graph_captured);
  if (!graph_captured) static_cast<Context*>(context)->last_api_start_ns.store(now_(), std::memory_order_relaxed);
  return kSuccess;
}

// Claims an operation slot and fills what collectives and p2p operations share.
nccl_abi::Result NcclProfiler::startOperation(void* context, void** handle, const NcclOperationSource& source,
                                              uint8_t channels, OperationEvent*& claimed, uint64_t& now) {
  *handle = nullptr;
  claimed = nullptr;
  auto& owner = *static_cast<Context*>(context);
  if (owner.finalized.load(std::memory_order_relaxed)) {
    owner.after_finalize.fetch_add(1, std::memory_order_relaxed);
    return kSuccess;
  }
  now = now_();
  uint32_t expected = owner.abi.kernel_channels ? channels : 0;
  OperationEvent* event = nullptr;
  {
    Guard lock(owner.shared);
    if (source.names_communicator && source.comm_hash != owner.comm_hash.load(std::memory_order_relaxed) &&
        std::find(owner.named_hashes.begin(), owner.named_hashes.end(), source.comm_hash) == owner.named_hashes.end()) {
      // v1-v3: what those versions never say (ranks, nodes) stays 0.
      if (owner.named_hashes.empty()) owner.comm_hash.store(source.comm_hash, std::memory_order_relaxed);
      owner.named_hashes.push_back(source.comm_hash);
      owner.communicators.push_back({source.comm_hash, source.comm_name != nullptr ? source.comm_name : "",
                                     source.comm_rank, 0, 0, global_rank_, owner.device, owner.init_ns,
                                     owner.abi.version});
    }
    event = owner.operations.claim();
    if (event == nullptr) {
      owner.dropped.fetch_add(1, std::memory_order_relaxed);
      return kSuccess;
    }
    event->pending.store(1 + expected, std::memory_order_relaxed);
  }
  event->context = &owner;
  event->host_stopped.store(false, std::memory_order_relaxed);
  event->channels_expected = expected;
  event->channels_started = 0;
  event->op = CompletedNcclOperation{};
  auto& r = event->op.record;
  r.comm_hash = source.names_communicator ? source.comm_hash : owner.comm_hash.load(std::memory_order_relaxed);
  r.graph_captured = source.graph_captured;
  r.enqueue_ns = now;
  r.device = owner.device;
  r.operation_id = owner.id_base + owner.next_id.fetch_add(1, std::memory_order_relaxed);
  r.channels = channels;
  // A graph replay's events come from NCCL's host callback, which the replayed kernel waits for.
  event->op.gpu_not_before_ns = source.graph_captured ? now : owner.group_not_before_ns.load(std::memory_order_relaxed);
  event->operation_id.store(r.operation_id, std::memory_order_relaxed);
  event->comm_hash.store(r.comm_hash, std::memory_order_relaxed);
  claimed = event;
  *handle = event;
  return kSuccess;
}

nccl_abi::Result NcclProfiler::startColl(void* context, void** handle, const nccl_abi::CollDescr& coll,
                                         const NcclOperationSource& source) {
  OperationEvent* event = nullptr;
  uint64_t now = 0;
  nccl_abi::Result result = startOperation(context, handle, source, coll.n_channels, event, now);
  if (event == nullptr) return result;
  auto& r = event->op.record;
  r.kind = format::NcclOperationKind::kCollective;
  r.seq = coll.seq_number;
  r.count = coll.count;
  // AllGather and Broadcast report count in bytes with an int8 type, so this is bytes for all.
  r.bytes = coll.count * ncclTypeSize(coll.datatype);
  r.root = coll.root;
  r.warps = coll.n_warps;
  event->op.func = coll.func != nullptr ? coll.func : "";
  event->op.datatype = coll.datatype != nullptr ? coll.datatype : "";
  event->op.algorithm = coll.algo != nullptr ? coll.algo : "";
  event->op.protocol = coll.proto != nullptr ? coll.proto : "";
  return result;
}

nccl_abi::Result NcclProfiler::startP2p(void* context, void** handle, const nccl_abi::P2pDescr& p2p,
                                        const NcclOperationSource& source) {
  OperationEvent* event = nullptr;
  uint64_t now = 0;
  nccl_abi::Result result = startOperation(context, handle, source, p2p.n_channels, event, now);
  if (event == nullptr) return result;
  std::string_view func = p2p.func != nullptr ? p2p.func : "";
  auto& r = event->op.record;
  r.kind = func == "Recv" ? format::NcclOperationKind::kRecv : format::NcclOperationKind::kSend;
  r.count = p2p.count;
  r.bytes = p2p.count * ncclTypeSize(p2p.datatype);
  r.peer = p2p.peer;
  event->op.func = func;
  event->op.datatype = p2p.datatype != nullptr ? p2p.datatype : "";
  return result;
}

nccl_abi::Result NcclProfiler::startProxyOp(void* context, void** handle, void* parent,
                                            const nccl_abi::ProxyOpDescr& op) {
  *handle = nullptr;
  auto& owner = *static_cast<Context*>(context);
  uint64_t now = now_();
  Guard lock(owner.proxy);
  if (owner.finalized.load(std::memory_order_relaxed)) {
    owner.after_finalize.fetch_add(1, std::memory_order_relaxed);
    return kSuccess;
  }
  ProxyOpEvent* event = owner.proxy_ops.claim();
  if (event == nullptr) {
    owner.dropped.fetch_add(1, std::memory_order_relaxed);
    return kSuccess;
  }
  event->context = &owner;
  event->in_use = true;
  event->stopped = false;
  event->open_steps = 0;
  for (auto& wait : event->waits) wait = {};
  for (auto& step : event->steps) step.owner = event, step.in_use = false, step.state = -1;
  auto& t = event->transfer;
  t = {};
  t.peer = op.peer;
  t.channel = op.channel_id;
  t.is_send = op.is_send != 0;
  t.start_ns = now;
  t.comm_hash = owner.comm_hash.load(std::memory_order_relaxed);
  // With PXN the operation may belong to another process: its parent pointer is not ours to read.
  event->foreign = op.pid != processId();
  if (event->foreign) {
    owner.foreign.fetch_add(1, std::memory_order_relaxed);
  } else if (parent != nullptr && kindOf(parent) == Kind::kOperation) {
    auto* operation = static_cast<OperationEvent*>(parent);
    t.operation_id = operation->operation_id.load(std::memory_order_relaxed);
    t.comm_hash = operation->comm_hash.load(std::memory_order_relaxed);
  }
  *handle = event;
  return kSuccess;
}

nccl_abi::Result NcclProfiler::startProxyStep(void* context, void** handle, void* parent,
                                              const nccl_abi::ProxyStepDescr& step) {
  *handle = nullptr;
  auto& owner = *static_cast<Context*>(context);
  if (parent == nullptr || kindOf(parent) != Kind::kProxyOp) return kSuccess;
  auto* proxy_op = static_cast<ProxyOpEvent*>(parent);
  Guard lock(owner.proxy);
  if (!proxy_op->in_use) return kSuccess;
  StepEvent& slot = proxy_op->steps[static_cast<unsigned>(step.step) % kNcclSteps];
  if (slot.in_use) {
    owner.dropped.fetch_add(1, std::memory_order_relaxed);
    return kSuccess;
  }
  slot.in_use = true;
  slot.state = -1;
  ++proxy_op->open_steps;
  ++proxy_op->transfer.steps;
  *handle = &slot;
  return kSuccess;
}

nccl_abi::Result NcclProfiler::startKernelCh(void* context, void** handle, void* parent,
                                             const nccl_abi::KernelChDescr& channel) {
  *handle = nullptr;
  auto& owner = *static_cast<Context*>(context);
  uint64_t now = now_();
  Guard lock(owner.proxy);
  if (owner.finalized.load(std::memory_order_relaxed)) {
    owner.after_finalize.fetch_add(1, std::memory_order_relaxed);
    return kSuccess;
  }
  if (now - owner.last_expiry_scan_ns >= kExpiryScanIntervalNs) {
    owner.last_expiry_scan_ns = now;
    expireStuckOperations(owner, now);
  }
  KernelChannelEvent* event = owner.channels.claim();
  if (event == nullptr) {
    owner.dropped.fetch_add(1, std::memory_order_relaxed);
    return kSuccess;
  }
  event->context = &owner;
  event->in_use = true;
  event->operation = nullptr;
  event->gpu_start = channel.gpu_timer;
  event->start_seen_ns = now;
  if (parent != nullptr && kindOf(parent) == Kind::kOperation) {
    auto* operation = static_cast<OperationEvent*>(parent);
    // A channel more than the operation said it would use cannot count toward its completion.
    if (operation->pending.load(std::memory_order_acquire) > 0 &&
        operation->channels_started < operation->channels_expected) {
      ++operation->channels_started;
      event->operation = operation;
    }
  }
  *handle = event;
  return kSuccess;
}

nccl_abi::Result NcclProfiler::recordEventState(void* handle, int state, const nccl_abi::EventStateArgs* args) {
  if (handle == nullptr || isMarker(handle)) return kSuccess;
  Kind kind = kindOf(handle);
  if (kind == Kind::kProxyStep) {
    auto& step = *static_cast<StepEvent*>(handle);
    ProxyOpEvent& proxy_op = *step.owner;
    Context& owner = *proxy_op.context;
    uint64_t now = now_();
    Guard lock(owner.proxy);
    if (!step.in_use || !proxy_op.in_use) return ignoredAfterFinalize(owner);
    WaitKind before = waitOf(step.state), after = waitOf(state);
    if (before != after) {
      if (before != kNoWait && --proxy_op.waits[before].open == 0) {
        proxy_op.transfer.*kWaitFields[before] += now - proxy_op.waits[before].since;
      }
      if (after != kNoWait && proxy_op.waits[after].open++ == 0) proxy_op.waits[after].since = now;
    }
    step.state = state;
    // The bytes on the wire: counted once per step, when the send is posted or the receive flushed.
    if (args != nullptr && (state == nccl_abi::kProxyStepSendWait || state == nccl_abi::kProxyStepRecvFlushWait))
      proxy_op.transfer.bytes += args->proxy_step.trans_size;
  } else if (kind == Kind::kKernelChannel && state == nccl_abi::kKernelChStop && args != nullptr) {
    auto& channel = *static_cast<KernelChannelEvent*>(handle);
    Context& owner = *channel.context;
    uint64_t now = now_();
    Guard lock(owner.proxy);
    if (!channel.in_use || channel.operation == nullptr || channel.gpu_start == 0) return kSuccess;
    CompletedNcclOperation& op = channel.operation->op;
    uint64_t stop = args->kernel_ch.gpu_timer;
    op.record.gpu_start_ns =
        op.record.gpu_start_ns == 0 ? channel.gpu_start : std::min(op.record.gpu_start_ns, channel.gpu_start);
    op.record.gpu_end_ns = std::max(op.record.gpu_end_ns, stop);
    op.max_clock_offset =
        std::min({op.max_clock_offset, difference(channel.start_seen_ns, channel.gpu_start), difference(now, stop)});
  }
  return kSuccess;
}

nccl_abi::Result NcclProfiler::recordProxyOpBytes(void* handle, uint64_t bytes_so_far) {
  if (handle == nullptr || kindOf(handle) != Kind::kProxyOp) return kSuccess;
  auto& event = *static_cast<ProxyOpEvent*>(handle);
  Guard lock(event.context->proxy);
  if (event.in_use) event.transfer.bytes = std::max<uint64_t>(event.transfer.bytes, bytes_so_far);
  return kSuccess;
}

// Called by the thread that took the operation's pending count to 0.
void NcclProfiler::complete(Context& context, OperationEvent& op) {
  Guard lock(context.shared);
  context.completed.push_back(&op);
  context.operations_written.fetch_add(1, std::memory_order_relaxed);
}

// With the proxy lock held.
void NcclProfiler::finishProxyOp(Context& context, ProxyOpEvent& proxy_op) {
  if (!proxy_op.stopped || proxy_op.open_steps > 0) return;
  if (proxy_op.transfer.operation_id == 0 && !proxy_op.foreign)
    context.unlinked.fetch_add(1, std::memory_order_relaxed);
  proxy_op.in_use = false;
  {
    Guard lock(context.shared);
    context.transfers.push_back(proxy_op.transfer);
  }
  context.proxy_ops.release(&proxy_op);
}

nccl_abi::Result NcclProfiler::stopEvent(void* handle) {
  if (handle == nullptr || isMarker(handle)) return kSuccess;
  switch (kindOf(handle)) {
    case Kind::kOperation: {
      auto& event = *static_cast<OperationEvent*>(handle);
      if (event.pending.load(std::memory_order_acquire) == 0 || event.host_stopped.load(std::memory_order_relaxed))
        return kSuccess;
      uint64_t now = now_();
      event.op.record.enqueue_end_ns = now;
      event.host_stop_ns.store(now, std::memory_order_relaxed);
      event.host_stopped.store(true, std::memory_order_release);
      if (event.pending.fetch_sub(1, std::memory_order_acq_rel) == 1) complete(*event.context, event);
      break;
    }
    case Kind::kProxyOp: {
      auto& event = *static_cast<ProxyOpEvent*>(handle);
      uint64_t now = now_();
      Guard lock(event.context->proxy);
      if (!event.in_use || event.stopped) return ignoredAfterFinalize(*event.context);
      event.stopped = true;
      event.transfer.end_ns = now;
      finishProxyOp(*event.context, event);
      break;
    }
    case Kind::kProxyStep: {
      auto& step = *static_cast<StepEvent*>(handle);
      ProxyOpEvent& proxy_op = *step.owner;
      uint64_t now = now_();
      Guard lock(proxy_op.context->proxy);
      if (!step.in_use || !proxy_op.in_use) return ignoredAfterFinalize(*proxy_op.context);
      if (WaitKind wait = waitOf(step.state); wait != kNoWait && --proxy_op.waits[wait].open == 0) {
        proxy_op.transfer.*kWaitFields[wait] += now - proxy_op.waits[wait].since;
      }
      step.in_use = false;
      --proxy_op.open_steps;
      finishProxyOp(*proxy_op.context, proxy_op);
      break;
    }
    case Kind::kKernelChannel: {
      auto& channel = *static_cast<KernelChannelEvent*>(handle);
      Context& owner = *channel.context;
      OperationEvent* operation = nullptr;
      {
        Guard lock(owner.proxy);
        if (!channel.in_use) return ignoredAfterFinalize(owner);
        operation = channel.operation;
        channel.in_use = false;
        channel.operation = nullptr;
        owner.channels.release(&channel);
      }
      if (operation != nullptr && operation->pending.fetch_sub(1, std::memory_order_acq_rel) == 1)
        complete(owner, *operation);
      break;
    }
    default:
      break;
  }
  return kSuccess;
}

// With the proxy lock held: operations enqueued long ago whose channels stopped reporting are
// written as they are, and their channels still open forget them.
void NcclProfiler::expireStuckOperations(Context& context, uint64_t now) {
  std::vector<OperationEvent*> stuck;
  {
    Guard lock(context.shared);
    context.operations.forEach([&](OperationEvent& op) {
      uint32_t pending = op.pending.load(std::memory_order_acquire);
      if (pending == 0 || !op.host_stopped.load(std::memory_order_acquire)) return;
      if (now - op.host_stop_ns.load(std::memory_order_relaxed) < kStuckOperationNs) return;
      if (op.pending.compare_exchange_strong(pending, 0, std::memory_order_acq_rel)) stuck.push_back(&op);
    });
  }
  if (stuck.empty()) return;
  context.channels.forEach([&](KernelChannelEvent& channel) {
    if (channel.in_use && std::find(stuck.begin(), stuck.end(), channel.operation) != stuck.end())
      channel.operation = nullptr;
  });
  for (OperationEvent* op : stuck) {
    context.expired.fetch_add(1, std::memory_order_relaxed);
    complete(context, *op);
  }
}

nccl_abi::Result NcclProfiler::finalize(void* context) {
  finalizeContext(*static_cast<Context*>(context));
  return kSuccess;
}

void NcclProfiler::finalizeAll() {
  std::vector<Context*> contexts;
  {
    std::lock_guard<std::mutex> lock(contexts_mutex_);
    for (const auto& context : contexts_) contexts.push_back(context.get());
  }
  for (Context* context : contexts) finalizeContext(*context);
}

// Whatever is still open will not complete any more: write it as it is. The context stays
// allocated (NCCL may still hold handles into it) and ignores what comes later.
void NcclProfiler::finalizeContext(Context& finished) {
  uint64_t now = now_();
  Guard proxy_lock(finished.proxy);
  finished.finalized.store(true, std::memory_order_relaxed);
  finished.proxy_ops.forEach([&](ProxyOpEvent& proxy_op) {
    if (!proxy_op.in_use) return;
    for (WaitKind wait : {kWaitGpu, kWaitPeer, kWaitNetwork}) {
      if (proxy_op.waits[wait].open > 0) proxy_op.transfer.*kWaitFields[wait] += now - proxy_op.waits[wait].since;
      proxy_op.waits[wait] = {};
    }
    if (proxy_op.transfer.end_ns == 0) proxy_op.transfer.end_ns = now;
    for (auto& step : proxy_op.steps) step.in_use = false;
    proxy_op.open_steps = 0;
    proxy_op.stopped = true;
    finishProxyOp(finished, proxy_op);
  });
  finished.channels.forEach([&](KernelChannelEvent& channel) {
    if (!channel.in_use) return;
    channel.in_use = false;
    channel.operation = nullptr;
    finished.channels.release(&channel);
  });
  std::vector<OperationEvent*> open;
  {
    Guard lock(finished.shared);
    finished.operations.forEach([&](OperationEvent& op) {
      uint32_t pending = op.pending.load(std::memory_order_acquire);
      if (pending > 0 && op.pending.compare_exchange_strong(pending, 0, std::memory_order_acq_rel)) open.push_back(&op);
    });
  }
  for (OperationEvent* op : open) complete(finished, *op);
}

void NcclProfiler::noteInternalError(const char* what) {
  internal_errors_.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(first_error_mutex_);
  if (first_internal_error_.empty()) first_internal_error_ = what != nullptr && *what != '\0' ? what : "unknown";
}

namespace {

template <typename T>
void moveInto(std::vector<T>& from, std::vector<T>& to) {
  if (to.empty()) {
    to.swap(from);
  } else {
    std::move(from.begin(), from.end(), std::back_inserter(to));
    from.clear();
  }
}

}  // namespace

std::vector<format::NcclCommunicatorRecord> NcclProfiler::takeCommunicators() {
  std::vector<format::NcclCommunicatorRecord> taken;
  std::lock_guard<std::mutex> lock(contexts_mutex_);
  for (const auto& context : contexts_) {
    Guard shared(context->shared);
    moveInto(context->communicators, taken);
  }
  return taken;
}

std::vector<CompletedNcclOperation> NcclProfiler::takeCompleted() {
  std::vector<CompletedNcclOperation> taken;
  std::lock_guard<std::mutex> lock(contexts_mutex_);
  for (const auto& context : contexts_) {
    std::vector<OperationEvent*>& grabbed = context->drained;
    {
      Guard shared(context->shared);
      grabbed.swap(context->completed);
    }
    // The slots are nobody else's until released: copied out without the lock.
    for (OperationEvent* op : grabbed) taken.push_back(std::move(op->op));
    {
      Guard shared(context->shared);
      for (OperationEvent* op : grabbed) context->operations.release(op);
    }
    grabbed.clear();
  }
  return taken;
}

std::vector<format::NetTransferRecord> NcclProfiler::takeTransfers() {
  std::vector<format::NetTransferRecord> taken;
  std::lock_guard<std::mutex> lock(contexts_mutex_);
  for (const auto& context : contexts_) {
    Guard shared(context->shared);
    moveInto(context->transfers, taken);
  }
  return taken;
}

NcclProfilerStats NcclProfiler::stats() const {
  NcclProfilerStats stats;
  {
    std::lock_guard<std::mutex> lock(contexts_mutex_);
    for (const auto& context : contexts_) {
      stats.operations += context->operations_written.load(std::memory_order_relaxed);
      stats.dropped_events += context->dropped.load(std::memory_order_relaxed);
      stats.foreign_proxy_ops += context->foreign.load(std::memory_order_relaxed);
      stats.unlinked_transfers += context->unlinked.load(std::memory_order_relaxed);
      stats.expired_operations += context->expired.load(std::memory_order_relaxed);
      stats.events_after_finalize += context->after_finalize.load(std::memory_order_relaxed);
    }
  }
  stats.internal_errors = internal_errors_.load(std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(first_error_mutex_);
  stats.first_internal_error = first_internal_error_;
  return stats;
}

}  // namespace gpuxray::inject
