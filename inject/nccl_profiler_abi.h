// NCCL's profiler-plugin ABI, declared here from NCCL's published interface (NVIDIA/nccl
// src/include/plugin/profiler/profiler_v1.h ... _v6.h and plugin/nccl_profiler.h), as NCCL asks
// plugins to carry their own copy. Only the layout matters: NCCL finds a table by its symbol name.
//
//   v1  NCCL 2.23       init names no communicator; coll/p2p carry it (name, commHash) and give
//                       func/datatype/algorithm/protocol as enum codes
//   v2  NCCL 2.24-2.25  those become strings
//   v3  NCCL 2.26       kernel-channel events, without timestamps
//   v4  NCCL 2.27       init names the communicator; kernel channels carry GPU timers; a proxy
//                       step's bytes replace the proxy operation's running total
//   v5  NCCL 2.28       API-level events (CollApi, P2pApi, ...) as parents of coll/p2p
//   v6  NCCL 2.29+      v5 plus copy-engine events
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace gpuxray::inject::nccl_abi {

// ncclResult_t: plugins return success (0) for everything but a refused init.
using Result = int;
inline constexpr Result kSuccess = 0;
inline constexpr Result kInternalError = 3;

// ncclDebugLogger_t; unused by gpuxray, kept as an opaque pointer.
using Logger = void (*)();

// Event types (also the bits of the activation mask).
enum EventType : uint64_t {
  kGroup = 1 << 0,
  kColl = 1 << 1,
  kP2p = 1 << 2,
  kProxyOp = 1 << 3,
  kProxyStep = 1 << 4,
  kProxyCtrl = 1 << 5,
  kKernelCh = 1 << 6,
  kNetPlugin = 1 << 7,
  kGroupApi = 1 << 8,
  kCollApi = 1 << 9,
  kP2pApi = 1 << 10,
  kKernelLaunch = 1 << 11,
};

// Event states (ncclProfilerEventState_t) that gpuxray reads; one numbering for all versions.
enum EventState : int {
  // v1-v3 only: a proxy operation's progress, with its bytes so far (EventStateArgsV1).
  kProxyOpSendPosted = 0,
  kProxyOpSendRemFifoWait = 1,
  kProxyOpSendTransmitted = 2,
  kProxyOpSendDone = 3,
  kProxyOpRecvPosted = 4,
  kProxyOpRecvReceived = 5,
  kProxyOpRecvTransmitted = 6,
  kProxyOpRecvDone = 7,
  kProxyStepSendGpuWait = 8,
  kProxyStepSendWait = 9,
  kProxyStepRecvWait = 10,
  kProxyStepRecvFlushWait = 11,
  kProxyStepRecvGpuWait = 12,
  kProxyStepSendPeerWait = 20,  // v4+
  kKernelChStop = 22,  // v4+, with the GPU timer at the channel's stop
};

struct CollDescr {
  uint64_t seq_number;
  const char* func;
  const void* send_buff;
  void* recv_buff;
  size_t count;
  int root;
  const char* datatype;
  uint8_t n_channels;
  uint8_t n_warps;
  const char* algo;
  const char* proto;
};

struct P2pDescr {
  const char* func;
  void* buff;
  const char* datatype;
  size_t count;
  int peer;
  uint8_t n_channels;
};

struct ProxyOpDescr {
  pid_t pid;
  uint8_t channel_id;
  int peer;
  int n_steps;
  int chunk_size;
  int is_send;
};

struct ProxyStepDescr {
  int step;
};

struct KernelChDescr {
  uint8_t channel_id;
  uint64_t gpu_timer;  // %globaltimer at the channel's start
};

// v5 added API-level events in front and a parent link in coll/p2p; the shared members keep their
// layout otherwise.
struct EventDescrV5 {
  uint64_t type;
  void* parent;
  int rank;
  union {
    struct {
      bool graph_captured;
      int group_depth;
    } group_api;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      int root;
      void* stream;
      bool graph_captured;
    } coll_api;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      void* stream;
      bool graph_captured;
    } p2p_api;
    struct {
      void* stream;
    } kernel_launch;
    struct {
      CollDescr fields;
      void* parent_group;
    } coll;
    struct {
      P2pDescr fields;
      void* parent_group;
    } p2p;
    ProxyOpDescr proxy_op;
    ProxyStepDescr proxy_step;
    KernelChDescr kernel_ch;
    struct {
      int64_t id;
      void* data;
    } net_plugin;
  };
};

struct EventDescrV4 {
  uint8_t type;
  void* parent;
  int rank;
  union {
    CollDescr coll;
    P2pDescr p2p;
    ProxyOpDescr proxy_op;
    ProxyStepDescr proxy_step;
    KernelChDescr kernel_ch;
    struct {
      int64_t id;
      void* data;
    } net_plugin;
  };
};

union EventStateArgs {
  struct {
    size_t trans_size;
  } proxy_step;
  struct {
    int appended_proxy_ops;
  } proxy_ctrl;
  struct {
    void* data;
  } net_plugin;
  struct {
    uint64_t gpu_timer;  // %globaltimer at the channel's stop
  } kernel_ch;
};

struct ProfilerV5 {
  const char* name;
  Result (*init)(void** context, uint64_t comm_hash, int* activation_mask, const char* comm_name, int n_nodes,
                 int n_ranks, int rank, Logger log);
  Result (*start_event)(void* context, void** handle, EventDescrV5* descr);
  Result (*stop_event)(void* handle);
  Result (*record_event_state)(void* handle, int state, EventStateArgs* args);
  Result (*finalize)(void* context);
};

// v6 (NCCL 2.29+) keeps v5's table and descriptor, adding copy-engine event types to the union;
// those are never asked for (they are not in the activation mask), and every member read here
// sits where v5 has it.
using ProfilerV6 = ProfilerV5;

struct ProfilerV4 {
  const char* name;
  Result (*init)(void** context, int* activation_mask, const char* comm_name, uint64_t comm_hash, int n_nodes,
                 int n_ranks, int rank, Logger log);
  Result (*start_event)(void* context, void** handle, EventDescrV4* descr);
  Result (*stop_event)(void* handle);
  Result (*record_event_state)(void* handle, int state, EventStateArgs* args);
  Result (*finalize)(void* context);
};

// v1-v3. Each coll and p2p names its communicator, since init does not.
struct CollDescrV1 {
  const char* comm_name;
  uint64_t comm_hash;
  uint64_t seq_number;
  uint8_t func;  // ncclFunc_t
  const void* send_buff;
  void* recv_buff;
  size_t count;
  int root;
  uint8_t datatype;  // ncclDataType_t
  uint32_t reduce_op;
  size_t traffic_bytes;
  uint8_t n_max_channels;
  uint8_t n_warps;
  uint8_t algo;   // NCCL_ALGO_*
  uint8_t proto;  // NCCL_PROTO_*
  int is_collnet;
  int is_nvls;
};

struct P2pDescrV1 {
  const char* comm_name;
  uint64_t comm_hash;
  uint8_t func;
  void* buff;
  uint8_t datatype;
  size_t count;
  int peer;
};

// v2 turns v1's codes into strings and drops reduce_op, is_collnet and is_nvls.
struct CollDescrV2 {
  const char* comm_name;
  uint64_t comm_hash;
  uint64_t seq_number;
  const char* func;
  const void* send_buff;
  void* recv_buff;
  size_t count;
  int root;
  const char* datatype;
  size_t traffic_bytes;
  uint8_t n_max_channels;
  uint8_t n_warps;
  const char* algo;
  const char* proto;
};

// v3 drops traffic_bytes.
struct CollDescrV3 {
  const char* comm_name;
  uint64_t comm_hash;
  uint64_t seq_number;
  const char* func;
  const void* send_buff;
  void* recv_buff;
  size_t count;
  int root;
  const char* datatype;
  uint8_t n_max_channels;
  uint8_t n_warps;
  const char* algo;
  const char* proto;
};

// Also v3's.
struct P2pDescrV2 {
  const char* comm_name;
  uint64_t comm_hash;
  const char* func;
  void* buff;
  const char* datatype;
  size_t count;
  int peer;
};

struct EventDescrV1 {
  uint8_t type;
  void* parent;
  int rank;
  union {
    CollDescrV1 coll;
    P2pDescrV1 p2p;
    ProxyOpDescr proxy_op;
    ProxyStepDescr proxy_step;
  };
};

struct EventDescrV2 {
  uint8_t type;
  void* parent;
  int rank;
  union {
    CollDescrV2 coll;
    P2pDescrV2 p2p;
    ProxyOpDescr proxy_op;
    ProxyStepDescr proxy_step;
  };
};

struct EventDescrV3 {
  uint8_t type;
  void* parent;
  int rank;
  union {
    CollDescrV3 coll;
    P2pDescrV2 p2p;
    ProxyOpDescr proxy_op;
    ProxyStepDescr proxy_step;
    struct {
      uint8_t channel_id;  // no GPU timer before v4
    } kernel_ch;
    struct {
      int64_t id;
      void* data;
    } net_plugin;
  };
};

// v1-v3 state arguments: a proxy operation reports its bytes so far; proxy steps report none.
union EventStateArgsV1 {
  struct {
    size_t trans_size;
    int steps;
  } proxy_op;
  struct {
    int appended_proxy_ops;
  } proxy_ctrl;
};

// The v1, v2 and v3 tables differ only in their descriptor.
template <typename Descr>
struct ProfilerV1Layout {
  const char* name;
  Result (*init)(void** context, int* activation_mask);
  Result (*start_event)(void* context, void** handle, Descr* descr);
  Result (*stop_event)(void* handle);
  Result (*record_event_state)(void* handle, int state, EventStateArgsV1* args);
  Result (*finalize)(void* context);
};
using ProfilerV1 = ProfilerV1Layout<EventDescrV1>;
using ProfilerV2 = ProfilerV1Layout<EventDescrV2>;
using ProfilerV3 = ProfilerV1Layout<EventDescrV3>;

}  // namespace gpuxray::inject::nccl_abi
