#include "analyzer/simulate/trace_generation.h"

#include <fmt/core.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <map>
#include <memory>

#include "analyzer/errors.h"
#include "analyzer/workers.h"
#include "gpuxray/version.h"
#include "proto/file_layout.h"
#include "proto/trace_writer.h"

namespace gpuxray::simulate {
namespace {

using namespace gpuxray::format;

constexpr uint32_t kComputeStream = 7;
constexpr uint32_t kTensorStream = 13;
constexpr uint32_t kPipelineStream = 17;
constexpr uint32_t kDataStream = 21;
constexpr uint32_t kLaunchCbid = 211;  // cudaLaunchKernel
// Work starts a little after the process: CUDA and NCCL initialization.
constexpr uint64_t kStartupNs = 20'000'000;
constexpr uint64_t kLaunchNs = 3'000;
// The model's weights are copied to the GPU this long before the first step.
constexpr int64_t kParametersBeforeStepNs = 1'000'000;

using model::MemoryCategory;

DeviceProperties deviceOf(const GpuSpec& g, int local_rank) {
  DeviceProperties d;
  d.device_id = static_cast<uint32_t>(local_rank);
  d.name = g.name;
  d.pci_bus_id = fmt::format("0000:{:02x}:00.0", 0x18 + 0x10 * local_rank);
  d.compute_major = g.compute_major;
  d.compute_minor = g.compute_minor;
  d.sm_count = g.sm_count;
  d.max_threads_per_sm = 2048;
  d.max_warps_per_sm = 64;
  d.max_blocks_per_sm = 32;
  d.registers_per_sm = 65536;
  d.registers_per_block = 65536;
  const bool hopper = g.compute_major >= 9;
  d.shared_memory_per_sm = hopper ? 233472 : 167936;
  d.shared_memory_per_block = 49152;
  d.shared_memory_per_block_optin = hopper ? 232448 : 166912;
  d.reserved_shared_memory_per_block = 1024;
  d.memory_bytes = g.hbm_bytes;
  d.memory_bandwidth_bytes_per_s = static_cast<uint64_t>(g.hbm_bandwidth);
  d.core_clock_khz = hopper ? 1'980'000 : 1'410'000;
  d.l2_cache_bytes = hopper ? 52'428'800 : 41'943'040;
  d.max_threads_per_block = 1024;
  d.warp_size = 32;
  d.max_registers_per_thread = 255;
  d.peak_bf16_flops = g.peak_bf16_flops;
  return d;
}

FileHeader headerOf(const CostModel& cost, const Layout& layout, int rank, const GenerationOptions& options) {
  const SimulationInputs& in = cost.inputs();
  const auto& c = in.cluster;
  const RankPlace& p = layout.place(rank);
  FileHeader h;
  h.tool_version = kToolVersion;
  h.run_id = in.run_id;
  h.run_id_source = "simulated";
  h.rank = rank;
  h.local_rank = p.local_rank;
  h.world_size = layout.world();
  h.local_world_size = std::min(c.gpus_per_node, layout.world());
  h.rank_source = "simulated";
  h.hostname = hostName(p.node);
  h.pid = 10'000u + static_cast<uint32_t>(p.local_rank);
  h.command_line = options.command_line;
  h.start_time_ns = kSimulatedEpochNs;
  h.time_base = "simulated";
  h.clock_anchors.push_back({kSimulatedEpochNs, kSimulatedEpochNs, 1'000'000'000ull, 0});
  h.devices.push_back(deviceOf(c.gpu, p.local_rank));
  Endpoint gpu{EndpointKind::kGpu, fmt::format("GPU-{}", p.local_rank), p.local_rank};
  h.links.push_back({LinkKind::kNvLink,
                     gpu,
                     {EndpointKind::kNvSwitch, "nvswitch", -1},
                     c.gpu.compute_major >= 9 ? 4u : 3u,
                     c.gpu.compute_major >= 9 ? 18u : 12u,
                     static_cast<uint64_t>(c.gpu.nvlink_bandwidth),
                     {},
                     {}});
  if (c.nics_per_node > 0) {
    Endpoint nic{EndpointKind::kNic, fmt::format("mlx5_{}", p.nic), -1};
    h.links.push_back({LinkKind::kPcie, gpu, nic, 5, 16, 64'000'000'000ull, {}, {}});
    h.links.push_back({LinkKind::kNetwork,
                       nic,
                       {EndpointKind::kUnknown, "leaf-switch", -1},
                       0,
                       1,
                       static_cast<uint64_t>(c.nic_bandwidth),
                       {},
                       {}});
    for (int n = 0; n < c.nics_per_node; ++n) {
      h.nics.push_back({fmt::format("mlx5_{}", n), 1, static_cast<uint64_t>(c.nic_bandwidth),
                        fmt::format("0000:{:02x}:00.0", 0x1a + 0x10 * n), "IB", n * 2 / std::max(1, c.nics_per_node)});
    }
  }
  h.capture_config.activities = {"kernel", "runtime", "memory", "nvtx", "nccl"};
  h.capture_config.nccl_profiler = true;
  h.capture_config.nvtx = true;
  h.simulated = true;
  h.simulation_inputs = in.toJson();
  h.nccl_version = "2.28.9";
  return h;
}

// Writes one rank's file, walking its simulated steps in order.
class RankWriter {
 public:
  RankWriter(const CostModel& cost, const Layout& layout, const Timeline& timeline, int rank, TraceWriter& writer,
             std::function<void(int, uint64_t, MemoryCategory)> allocation_category)
      : cost_(cost),
        layout_(layout),
        timeline_(timeline),
        rank_(rank),
        place_(layout.place(rank)),
        w_(writer),
        allocation_category_(std::move(allocation_category)) {
    device_ = static_cast<uint32_t>(place_.local_rank);
    thread_ = 140'000u + static_cast<uint64_t>(rank);
    domain_ = w_.intern("PyTorch");
    algorithm_ring_ = w_.intern("RING");
    protocol_simple_ = w_.intern("SIMPLE");
    datatype_ = w_.intern("ncclBfloat16");
    sum_ = w_.intern("ncclSum");
    for (const auto& shape : cost_.shapes()) shape_names_.push_back(w_.intern(shape.name));
    w_.defineApiFunction(ApiDomain::kRuntime, kLaunchCbid, "cudaLaunchKernel");
  }

  void write() {
    for (auto kind : {CommunicatorKind::kTensor, CommunicatorKind::kPipeline, CommunicatorKind::kData,
                      CommunicatorKind::kModel, CommunicatorKind::kContext}) {
      CommunicatorInfo info = layout_.communicator(kind, rank_);
      comms_[static_cast<int>(kind)] = info;
      if (info.nranks > 1)
        w_.add(NcclCommunicatorRecord{info.hash, info.name, info.comm_rank, info.nranks, info.nnodes, rank_, device_,
                                      u(0) - 1'000'000, 5});
    }
    for (uint32_t s : {kComputeStream, kTensorStream, kPipelineStream, kDataStream})
      w_.add(StreamRecord{s, device_, 1, s == kComputeStream ? 0 : -1, 1, 0});
    use_ = cost_.memory(place_.stage);
    // The model is on the GPU before the first step; gradients, optimizer state and the GEMMs'
    // workspace appear when first needed and are kept (writeStep).
    allocate(-kParametersBeforeStepNs, use_.weights, MemoryCategory::kParameters);
    recompute_bytes_ = recomputedLayerBytes();
    for (int step = 0; step < cost_.inputs().steps; ++step) writeStep(step);
  }

 private:
  int64_t at(int64_t ns) const { return static_cast<int64_t>(kSimulatedEpochNs + kStartupNs) + ns; }
  uint64_t u(int64_t ns) const { return static_cast<uint64_t>(at(ns)); }

  // Addresses are never reused, so each allocation is its own block.
  uint64_t allocate(int64_t time, uint64_t bytes, MemoryCategory category) {
    uint64_t address = 0x7f00'0000'0000ull + next_address_;
    next_address_ += (bytes + 0xfffff) & ~uint64_t{0xfffff};
    w_.add(MemoryEventRecord{u(time), MemoryOperation::kAllocate, device_, address, bytes, MemoryKind::kDevice,
                             kComputeStream, 0, false, 0});
    if (allocation_category_) allocation_category_(rank_, address, category);
    return address;
  }

  // What recomputing one layer in backward holds until that layer's backward is done: its full
  // activations (full recomputation) or the attention core's (selective).
  uint64_t recomputedLayerBytes() const {
    SimulationInputs unrecomputed = cost_.inputs();
    unrecomputed.strategy.recompute = Recompute::kNone;
    switch (cost_.inputs().strategy.recompute) {
      case Recompute::kNone:
        return 0;
      case Recompute::kFull:
        unrecomputed.strategy.sequence_parallel = false;
        return CostModel::activationBytesOf(unrecomputed);
      case Recompute::kSelective:
        return CostModel::activationBytesOf(unrecomputed) -
               std::min(CostModel::activationBytesOf(unrecomputed), cost_.activationBytesPerLayer());
    }
    return 0;
  }
  void release(int64_t time, uint64_t address, uint64_t bytes) {
    w_.add(MemoryEventRecord{u(time), MemoryOperation::kRelease, device_, address, bytes, MemoryKind::kDevice,
                             kComputeStream, 0, false, 0});
  }

  // A launch on the host thread. The host issues a step's kernels in program order from the step's
  // start, as fast as it can, and never after the kernel starts: it runs ahead of the GPU, as
  // training loops do. Compute kernels and the tensor-parallel collectives between them are written
  // in that order; NCCL operations written after the blocks (pipeline transfers, gradient buckets)
  // are launched where the program issues them, just before the first compute kernel that starts
  // at or after them. Each call's end is kept for the range it is in (takeCalls).
  uint32_t launch(int64_t start, bool in_order = true) {
    uint32_t correlation = next_correlation_++;
    uint64_t begin = callAt(start);
    if (in_order) {
      host_free_ = begin + kLaunchNs;
      launched_.emplace_back(u(start), begin);
    } else {
      auto next = std::lower_bound(launched_.begin(), launched_.end(), std::pair<uint64_t, uint64_t>{u(start), 0});
      if (next != launched_.end()) begin = std::min(begin, next->second);
    }
    w_.add(ApiCallRecord{begin, begin + kLaunchNs, ApiDomain::kRuntime, kLaunchCbid, thread_, correlation, 0, 0});
    calls_end_ = std::max(calls_end_, begin + kLaunchNs);
    return correlation;
  }

  // When the host calls an in-order launch of a kernel starting at `start`: once the previous call
  // is done, or earlier if the kernel starts sooner, and not before the step began on the host
  // unless the kernel starts before it.
  uint64_t callAt(int64_t start) const {
    return std::max(std::min(host_free_, u(start) - kLaunchNs), std::min(host_step_start_, u(start)));
  }

  // When the last of the launch calls made since the previous takeCalls ended (as `at` takes).
  int64_t takeCalls() {
    const int64_t end = static_cast<int64_t>(calls_end_) - at(0);
    calls_end_ = 0;
    return end;
  }

  void kernel(uint16_t shape_index, int64_t start, int64_t end, uint32_t stream) {
    const KernelShape& shape = cost_.shapes()[shape_index];
    KernelRecord k;
    k.start_ns = u(start);
    k.end_ns = u(end);
    k.device = device_;
    k.stream = stream;
    k.correlation_id = launch(start);
    k.context = 1;
    k.name_id = shape_names_[shape_index];
    k.grid_x = shape.grid_x, k.grid_y = shape.grid_y, k.grid_z = 1;
    k.block_x = shape.block_x, k.block_y = k.block_z = 1;
    k.registers_per_thread = shape.registers;
    k.dynamic_shared_memory = shape.shared_bytes;
    k.shared_memory_optin = shape.shared_bytes > 49152;
    w_.add(k);
  }

  StringId ncclKernelName(const std::string& func) {
    auto it = nccl_kernels_.find(func);
    if (it != nccl_kernels_.end()) return it->second;
    std::string name = func == "SendRecv" ? "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"
                       : func == "AllGather" || func == "AlltoAll"
                           ? fmt::format("ncclDevKernel_{}_RING_LL(ncclDevKernelArgsStorage<4096ul>)", func)
                           : fmt::format("ncclDevKernel_{}_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", func);
    return nccl_kernels_[func] = w_.intern(name);
  }

  // An NCCL operation: its kernel (from this rank's arrival to the end) and its record.
  uint64_t ncclOp(CommunicatorKind comm, NcclOperationKind kind, const std::string& func, uint64_t bytes, int peer,
                  int64_t arrive, int64_t end, uint32_t stream, bool in_order = false) {
    const CommunicatorInfo& info = comms_[static_cast<int>(comm)];
    KernelRecord k;
    k.start_ns = u(arrive);
    k.end_ns = u(end);
    k.device = device_;
    k.stream = stream;
    k.correlation_id = launch(arrive, in_order);
    k.context = 1;
    k.name_id = ncclKernelName(kind == NcclOperationKind::kCollective ? func : "SendRecv");
    k.grid_x = kind == NcclOperationKind::kCollective ? 16 : 2, k.grid_y = k.grid_z = 1;
    k.block_x = 640, k.block_y = k.block_z = 1;
    k.registers_per_thread = 96;
    w_.add(k);
    NcclOperationRecord op;
    op.kind = kind;
    op.comm_hash = info.hash;
    op.seq = seq_[static_cast<int>(comm)]++;
    op.func_id = w_.intern(func);
    op.enqueue_ns = u(arrive) - 20'000;
    op.enqueue_end_ns = op.enqueue_ns + 4'000;
    op.gpu_start_ns = u(arrive);
    op.gpu_end_ns = u(end);
    op.bytes = bytes;
    op.count = func == "Send" || func == "Recv" ? bytes : bytes / 2;
    op.datatype_id = datatype_;
    op.peer = peer;
    if (kind == NcclOperationKind::kCollective) {
      op.algorithm_id = algorithm_ring_;
      op.protocol_id = protocol_simple_;
      if (func != "AllGather" && func != "AlltoAll") op.reduce_op_id = sum_;
    }
    op.channels = kind == NcclOperationKind::kCollective ? 16 : 2;
    op.warps = 20;
    op.stream = stream;
    op.device = device_;
    op.operation_id = ++operation_id_;
    op.kernel_correlation_id = k.correlation_id;
    w_.add(op);
    return op.operation_id;
  }

  // What this rank's NIC carried for an operation: `bytes` to or from comm rank `peer` between
  // start and end, of which the NIC itself needed bytes / (its bandwidth); the rest was waiting on
  // the peer.
  void netTransfer(uint64_t operation, CommunicatorKind comm, int peer, bool send, uint64_t bytes, int64_t start,
                   int64_t end) {
    const auto& c = cost_.inputs().cluster;
    const double rate = c.nic_bandwidth * c.efficiency.network * layout_.nicFactor(rank_);
    const auto network = std::min<uint64_t>(static_cast<uint64_t>(end - start),
                                            static_cast<uint64_t>(static_cast<double>(bytes) / rate * 1e9));
    NetTransferRecord t;
    t.operation_id = operation;
    t.peer = peer;
    t.channel = 0;
    t.is_send = send;
    t.bytes = bytes;
    t.start_ns = u(start);
    t.end_ns = u(end);
    t.steps = static_cast<uint32_t>(std::max<uint64_t>(1, bytes >> 19));
    t.wait_gpu_ns = 0;
    t.wait_network_ns = network;
    t.wait_peer_ns = static_cast<uint64_t>(end - start) - network;
    t.comm_hash = comms_[static_cast<int>(comm)].hash;
    w_.add(t);
  }

  void dataOps(const std::vector<CollectiveOp>& ops) {
    const GroupLinks links = layout_.links(CommunicatorKind::kData, rank_);
    const CommunicatorInfo& info = comms_[static_cast<int>(CommunicatorKind::kData)];
    for (const auto& op : ops) {
      uint64_t id = ncclOp(CommunicatorKind::kData, NcclOperationKind::kCollective, collectiveFunc(op.kind), op.bytes,
                           0, op.arrive, op.end, kDataStream);
      uint64_t wire = cost_.networkBytes(op.kind, op.bytes, links);
      if (wire == 0) continue;
      // Ring: to the next member, from the previous one (on other nodes when the group spans nodes).
      netTransfer(id, CommunicatorKind::kData, (info.comm_rank + 1) % info.nranks, true, wire, op.start, op.end);
      netTransfer(id, CommunicatorKind::kData, (info.comm_rank + info.nranks - 1) % info.nranks, false, wire, op.start,
                  op.end);
    }
  }

  void range(const std::string& name, int64_t start, int64_t end, uint32_t depth) {
    NvtxEventRecord r;
    r.kind = NvtxEventKind::kRange;
    r.start_ns = u(start);
    r.end_ns = u(end);
    r.domain_id = domain_;
    r.name_id = w_.intern(name);
    r.thread_id = thread_;
    r.depth = depth;
    w_.add(r);
  }

  // The run-clock time (as `at` takes) at which the host calls the next in-order launch, of a
  // kernel starting at `start`.
  int64_t hostAt(int64_t start) const { return static_cast<int64_t>(callAt(start)) - at(0); }

  // The ranges are the host's, as NVTX and record_function ranges are: each block's covers the
  // calls that launched its kernels, and its allocations and releases are made then. The host
  // waits for the GPU at the end of every step, so a step's range is the step on both clocks.
  void writeStep(int step) {
    const RankStep& rs = timeline_.step(rank_, step);
    const int stage = place_.stage;
    const int pp = cost_.inputs().strategy.pp;
    const auto& order = timeline_.orders()[static_cast<size_t>(stage)];
    range(fmt::format("ProfilerStep#{}", step), rs.start, rs.end, 0);
    host_free_ = std::max(host_free_, u(rs.start));
    host_step_start_ = u(rs.start);
    launched_.clear();
    const uint64_t chunk_activations = cost_.activationBytesPerLayer() * static_cast<uint64_t>(cost_.layersPerChunk());
    size_t collective = 0;
    for (size_t b = 0; b < order.size(); ++b) {
      const PipelineBlock& block = order[b];
      const int vs = block.virtualStage(stage, pp);
      const BlockProgram& program = block.forward ? cost_.forward(vs) : cost_.backward(vs);
      int64_t t = rs.block_begin[b];
      const int64_t block_start = hostAt(t);
      int64_t last_call_end = block_start;  // the block's launches are all in order
      const uint64_t key = static_cast<uint64_t>(block.micro_batch) * 64 + static_cast<uint64_t>(block.chunk);
      if (block.forward) live_[key] = allocate(block_start, chunk_activations, MemoryCategory::kActivations);
      std::vector<std::pair<int64_t, int64_t>> recomputes;  // a run of recomputed items becomes one range
      int64_t recompute_start = -1;
      uint64_t recomputed = 0;  // the recomputed layer's activations, freed when the next one starts
      for (size_t k = 0; k < program.items.size(); ++k) {
        const ProgramItem& item = program.items[k];
        const int64_t call = hostAt(t);
        if (item.recompute && recompute_start < 0) {
          recompute_start = call;
          if (recomputed != 0) release(call, recomputed, recompute_bytes_);
          recomputed = recompute_bytes_ > 0 ? allocate(call, recompute_bytes_, MemoryCategory::kActivations) : 0;
        }
        if (!item.recompute && recompute_start >= 0) {
          // Closed before this call begins: a call at a range's last instant is still in it.
          recomputes.emplace_back(recompute_start, std::min(last_call_end, call - 1));
          recompute_start = -1;
        }
        if (!block.forward && !item.recompute && !gradients_allocated_) {
          allocate(call, use_.gradients, MemoryCategory::kGradients);
          gradients_allocated_ = true;
        }
        if (!item.collective && !workspace_allocated_) {
          allocate(call, use_.workspace, MemoryCategory::kOther);  // cuBLAS's workspace, kept
          workspace_allocated_ = true;
        }
        if (item.collective) {
          // Uniform runs keep no collective starts: every member arrives together.
          int64_t start = timeline_.uniform() ? t : rs.collective_start[collective++];
          // An overlapped collective goes on beside the GEMM that follows it.
          ncclOp(CommunicatorKind::kTensor, NcclOperationKind::kCollective, collectiveFunc(item.kind), item.bytes, 0, t,
                 start + item.duration_ns + item.hidden_ns, kTensorStream, true);
          t = start + item.duration_ns;
        } else {
          int64_t duration = timeline_.kernelNs(item, rank_, step, b, k);
          kernel(item.shape, t, t + duration, kComputeStream);
          t += duration;
        }
        last_call_end = call + static_cast<int64_t>(kLaunchNs);
      }
      // The block's last call ends it, unless the host is behind and the next block's first begins sooner.
      const int64_t next_start = b + 1 < order.size() ? rs.block_begin[b + 1] : rs.optimizer_start;
      const int64_t block_end = std::min(last_call_end, hostAt(next_start));
      if (recompute_start >= 0) recomputes.emplace_back(recompute_start, block_end);
      range(fmt::format("{}#{}", block.forward ? "forward" : "backward", block.micro_batch), block_start, block_end, 1);
      for (const auto& [start, end] : recomputes) range("recompute", start, end, 2);
      // Freed as the block's last act, just before its range closes: the next range opens without them.
      if (recomputed != 0) release(block_end - 1, recomputed, recompute_bytes_);
      if (auto it = live_.find(key); !block.forward && it != live_.end()) {
        release(block_end - 1, it->second, chunk_activations);
        live_.erase(it);
      }
    }
    for (const auto& op : rs.p2p) {
      const int peer_rank = layout_.rankOf(place_.tp, place_.dp, op.peer_stage);
      uint64_t id = ncclOp(CommunicatorKind::kPipeline, op.send ? NcclOperationKind::kSend : NcclOperationKind::kRecv,
                           op.send ? "Send" : "Recv", op.bytes, op.peer_stage, op.posted, op.end, kPipelineStream);
      if (!layout_.sameNode(rank_, peer_rank))
        netTransfer(id, CommunicatorKind::kPipeline, op.peer_stage, op.send, op.bytes, op.start, op.end);
    }
    dataOps(rs.gradient_ops);
    if (comms_[static_cast<int>(CommunicatorKind::kModel)].nranks > 1)
      ncclOp(CommunicatorKind::kModel, NcclOperationKind::kCollective, "AllReduce", rs.grad_norm.bytes, 0,
             rs.grad_norm.arrive, rs.grad_norm.end, kDataStream);
    // The optimizer's range: from its kernel's launch to the last parameter gather's.
    const int64_t optimizer_call = hostAt(rs.optimizer_start);
    takeCalls();
    if (step == 0) allocate(optimizer_call, use_.optimizer, MemoryCategory::kOptimizerState);  // Adam's, lazily
    const ProgramItem& optimizer = cost_.optimizerStep(stage).items.front();
    kernel(optimizer.shape, rs.optimizer_start, rs.optimizer_end, kComputeStream);
    dataOps(rs.gather_ops);
    range("optimizer", optimizer_call, takeCalls(), 1);
  }

  const CostModel& cost_;
  const Layout& layout_;
  const Timeline& timeline_;
  const int rank_;
  const RankPlace& place_;
  TraceWriter& w_;
  uint32_t device_ = 0;
  uint64_t thread_ = 0;
  StringId domain_ = 0, algorithm_ring_ = 0, protocol_simple_ = 0, datatype_ = 0, sum_ = 0;
  std::vector<StringId> shape_names_;
  std::map<std::string, StringId> nccl_kernels_;
  CommunicatorInfo comms_[5];
  uint64_t seq_[4] = {0, 0, 0, 0};
  uint64_t operation_id_ = 0;
  uint32_t next_correlation_ = 1;
  uint64_t next_address_ = 0;
  uint64_t host_free_ = 0;
  uint64_t host_step_start_ = 0;
  uint64_t calls_end_ = 0;                               // the end of the latest launch call since takeCalls
  std::vector<std::pair<uint64_t, uint64_t>> launched_;  // this step's in-order launches: (kernel start, call)
  std::map<uint64_t, uint64_t> live_;
  MemoryUse use_;
  uint64_t recompute_bytes_ = 0;
  bool gradients_allocated_ = false, workspace_allocated_ = false;
  std::function<void(int, uint64_t, MemoryCategory)> allocation_category_;
};

}  // namespace

GenerationResult writeTraces(const CostModel& cost, const Layout& layout, const Timeline& timeline,
                             const GenerationOptions& options) {
  std::error_code error;
  std::filesystem::create_directories(options.directory, error);
  if (error) throw InputError(fmt::format("{}: cannot create the directory: {}", options.directory, error.message()));
  std::vector<int> ranks = options.ranks;
  if (ranks.empty()) {
    for (int rank = 0; rank < layout.world(); ++rank) ranks.push_back(rank);
    // Files of another run left in the directory would be read as part of this one.
    for (const auto& entry : std::filesystem::directory_iterator(options.directory, error)) {
      const std::string name = entry.path().filename().string();
      if (entry.path().extension() != ".gpuxray") continue;
      bool ours = false;
      for (int rank = 0; rank < layout.world() && !ours; ++rank) ours = name == traceFileName(rank, "", 0);
      if (!ours)
        throw InputError(
            fmt::format("{}: holds {}, which this run of {} ranks would not overwrite; write into an empty "
                        "directory",
                        options.directory, name, layout.world()));
    }
  }
  for (int rank : ranks)
    if (rank < 0 || rank >= layout.world())
      throw InputError(fmt::format("rank {} is not in the run (ranks 0..{})", rank, layout.world() - 1));
  std::atomic<size_t> done{0};
  std::atomic<uint64_t> records{0}, bytes{0};
  std::vector<std::string> errors(ranks.size());
  onWorkers(ranks.size(), options.threads, [&](size_t index) {
    const int rank = ranks[index];
    std::string path = (std::filesystem::path(options.directory) / traceFileName(rank, "", 0)).string();
    auto sink = std::make_unique<FileSink>(path);
    if (!sink->ok()) {
      errors[index] = fmt::format("{}: cannot write: {}", path, sink->error());
      return;
    }
    TraceWriter writer(std::move(sink));
    writer.writeHeader(headerOf(cost, layout, rank, options));
    RankWriter(cost, layout, timeline, rank, writer, options.allocation_category).write();
    Trailer trailer;
    trailer.end = CaptureEnd::kGenerated;
    trailer.end_time_ns =
        kSimulatedEpochNs + kStartupNs + static_cast<uint64_t>(timeline.step(rank, cost.inputs().steps - 1).end);
    trailer.end_detail = "gpuxray simulate";
    if (!writer.finish(trailer)) {
      errors[index] = fmt::format("{}: {}", path, writer.error());
      return;
    }
    uint64_t n = 0;
    for (uint32_t c = 0; c < kCategoryCount; ++c) n += writer.written(static_cast<Category>(c));
    records += n;
    bytes += writer.bytesWritten();
    if (options.progress) options.progress(++done, ranks.size());
  });
  for (const auto& e : errors)
    if (!e.empty()) throw InputError(e);
  return {ranks.size(), records.load(), bytes.load()};
}

}  // namespace gpuxray::simulate
