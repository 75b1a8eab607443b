// NCCL's profiler-plugin ABI, declared here from NCCL's published interface (NVIDIA/nccl
// src/include/plugin/profiler/profiler_v4.h, _v5.h and _v6.h: NCCL 2.27, 2.28 and 2.29+), as NCCL
// asks plugins to carry their own copy. Only the layout matters: NCCL finds the table by its
// symbol name. (v1-v3, NCCL 2.23-2.26, pass no communicator to init and are not covered yet.)
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

// Event states (ncclProfilerEventState_t) that gpuxray reads.
enum EventState : int {
  kProxyStepSendGpuWait = 8,
  kProxyStepSendWait = 9,
  kProxyStepRecvWait = 10,
  kProxyStepRecvFlushWait = 11,
  kProxyStepRecvGpuWait = 12,
  kProxyStepSendPeerWait = 20,
  kKernelChStop = 22,
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

}  // namespace gpuxray::inject::nccl_abi
