// Builds small multi-rank runs for the analyzer's golden tests, written with the real proto/
// writer. Times are given in microseconds from the run's start (and stored as nanoseconds on each
// rank's own clock: `clock_skew_us` shifts a whole rank, as an unsynchronized host would, and
// `clock_drift_ppm` makes its clock run fast by that many parts per million).
//
//   RunBuilder run("golden-dp", 4);
//   auto& r0 = run.rank(0, "node-0");
//   r0.kernel("gemm", 0, 900);                    // compute on stream 7
//   r0.allReduce(comm, /*seq=*/1, 900, 1200, 64 << 20);   // NCCL kernel + operation on stream 13
//   run.write(dir);
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "proto/file_layout.h"
#include "proto/trace_writer.h"

namespace gpuxray::testing {

inline constexpr uint64_t kRunStartNs = 1'764'410'400'000'000'000ull;
inline constexpr uint32_t kComputeStream = 7;
inline constexpr uint32_t kCommStream = 13;

struct RankBuilder {
  format::FileHeader header;
  int64_t clock_skew_us = 0;
  double clock_drift_ppm = 0;
  // What the file's clock anchor says: CLOCK_REALTIME = capture clock + this.
  int64_t anchor_realtime_minus_capture_us = 0;
  // The CPU thread that launches the kernels (cudaLaunchKernel) and opens the NVTX ranges.
  uint64_t thread_id = 0;
  std::vector<std::string> strings;  // interned at write time, by name
  struct Kernel {
    std::string name;
    double start_us, end_us;
    uint32_t stream;
    uint32_t correlation;
    format::KernelRecord shape;  // launch configuration fields (grid, block, registers, ...)
  };
  struct Launch {
    double start_us, end_us;
    uint32_t correlation;
  };
  struct Op {
    format::NcclOperationRecord record;
    std::string func;
    std::string algorithm;
    double enqueue_us, start_us, end_us;
  };
  struct Range {
    std::string name;
    double start_us, end_us;
  };
  struct Transfer {
    format::NetTransferRecord record;
    double start_us, end_us;
  };
  struct Metric {
    std::string name;
    double time_us;
    double value;
  };
  std::vector<Kernel> kernels;
  std::vector<Launch> launches;
  std::vector<Op> ops;
  std::vector<Range> ranges;
  std::vector<format::NcclCommunicatorRecord> communicators;
  std::vector<Transfer> transfers;
  std::vector<format::MemoryEventRecord> memory;
  // Links reported during capture (as CUPTI's NVLink and PCIe records are), besides header.links.
  std::vector<format::Link> link_records;
  std::vector<Metric> metrics;
  // Counters of --kernel-metrics, each naming its launch by correlation id.
  std::vector<format::KernelMetricsRecord> kernel_metrics;
  uint32_t next_correlation = 1;

  uint64_t ns(double us) const {
    return kRunStartNs + static_cast<uint64_t>(static_cast<int64_t>(us * 1000.0) + clock_skew_us * 1000 +
                                               static_cast<int64_t>(us * clock_drift_ppm / 1000.0));
  }

  // A compute kernel, launched by the host `launch_lead_us` before it starts (no launch record
  // when negative).
  RankBuilder& kernel(const std::string& name, double start_us, double end_us, uint32_t stream = kComputeStream,
                      double launch_lead_us = 5) {
    uint32_t correlation = next_correlation++;
    format::KernelRecord shape;
    shape.grid_x = 132, shape.grid_y = shape.grid_z = 1;
    shape.block_x = 256, shape.block_y = shape.block_z = 1;
    shape.registers_per_thread = 32;
    kernels.push_back({name, start_us, end_us, stream, correlation, shape});
    if (launch_lead_us >= 0) launches.push_back({start_us - launch_lead_us, start_us - launch_lead_us + 3, correlation});
    return *this;
  }

  RankBuilder& communicator(uint64_t hash, const std::string& name, int comm_rank, int nranks, int nnodes) {
    communicators.push_back({hash, name, comm_rank, nranks, nnodes, header.rank, 0, ns(0), 5});
    return *this;
  }

  // An NCCL collective: its kernel on the communication stream (launched when it is enqueued) and
  // its operation record.
  RankBuilder& collective(uint64_t comm, const std::string& func, uint64_t seq, double start_us, double end_us,
                          uint64_t bytes, double enqueue_us = -1) {
    if (enqueue_us < 0) enqueue_us = start_us - 5;
    kernel("ncclDevKernel_" + func + "_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", start_us, end_us,
           kCommStream, start_us - enqueue_us);
    Op op;
    op.record.kind = format::NcclOperationKind::kCollective;
    op.record.comm_hash = comm;
    op.record.seq = seq;
    op.record.bytes = bytes;
    op.record.count = bytes / 2;
    op.record.channels = 2;
    op.record.operation_id = ops.size() + 1;
    op.func = func;
    op.algorithm = "RING";
    op.enqueue_us = enqueue_us;
    op.start_us = start_us;
    op.end_us = end_us;
    ops.push_back(op);
    return *this;
  }

  // A send or receive to/from `peer` (communicator rank) of `bytes`.
  RankBuilder& p2p(uint64_t comm, bool send, int peer, double start_us, double end_us, uint64_t bytes,
                   double enqueue_us = -1) {
    if (enqueue_us < 0) enqueue_us = start_us - 5;
    kernel(std::string("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"), start_us, end_us, kCommStream,
           start_us - enqueue_us);
    Op op;
    op.record.kind = send ? format::NcclOperationKind::kSend : format::NcclOperationKind::kRecv;
    op.record.comm_hash = comm;
    op.record.peer = peer;
    op.record.bytes = bytes;
    op.record.count = bytes;
    op.record.channels = 1;
    op.record.operation_id = ops.size() + 1;
    op.func = send ? "Send" : "Recv";
    op.enqueue_us = enqueue_us;
    op.start_us = start_us;
    op.end_us = end_us;
    ops.push_back(op);
    return *this;
  }

  // Bytes NCCL's proxy moved over the network for operation `operation_id` of this rank, to
  // (`send`) or from communicator rank `peer`.
  RankBuilder& netTransfer(uint64_t comm, uint64_t operation_id, bool send, int peer, uint32_t channel, double start_us,
                           double end_us, uint64_t bytes) {
    format::NetTransferRecord t;
    t.operation_id = operation_id;
    t.comm_hash = comm;
    t.peer = peer;
    t.channel = channel;
    t.is_send = send;
    t.bytes = bytes;
    t.steps = 8;
    transfers.push_back({t, start_us, end_us});
    return *this;
  }

  // A network transfer of the operation added last, on channel 0.
  RankBuilder& transfer(uint64_t comm, bool send, int peer, double start_us, double end_us, uint64_t bytes) {
    return netTransfer(comm, ops.size(), send, peer, 0, start_us, end_us, bytes);
  }

  // A NIC of this rank's host.
  RankBuilder& nic(const std::string& name, uint64_t bytes_per_s) {
    header.nics.push_back({name, 1, bytes_per_s, "", "IB", 0});
    return *this;
  }

  RankBuilder& range(const std::string& name, double start_us, double end_us) {
    ranges.push_back({name, start_us, end_us});
    return *this;
  }

  // Device memory allocated (positive) or released at `time_us`, of the block at `address` (0: none).
  RankBuilder& memoryChange(double time_us, int64_t bytes, uint64_t address = 0) {
    format::MemoryEventRecord m;
    m.address = address;
    m.timestamp_ns = ns(time_us);
    m.operation = bytes >= 0 ? format::MemoryOperation::kAllocate : format::MemoryOperation::kRelease;
    m.bytes = static_cast<uint64_t>(bytes >= 0 ? bytes : -bytes);
    m.memory_kind = format::MemoryKind::kDevice;
    memory.push_back(m);
    return *this;
  }

  // A network transfer of NCCL's proxy to communicator rank `peer`, of no operation in particular.
  RankBuilder& netTransfer(uint64_t comm, int peer, bool send, double start_us, double end_us, uint64_t bytes) {
    return netTransfer(comm, 0, send, peer, 0, start_us, end_us, bytes);
  }

  // Counters measured for the kernel added last (which --kernel-metrics replayed).
  RankBuilder& measured(format::KernelMetricsRecord counters) {
    counters.correlation_id = kernels.back().correlation;
    kernel_metrics.push_back(counters);
    return *this;
  }

  RankBuilder& metric(const std::string& name, double time_us, double value) {
    metrics.push_back({name, time_us, value});
    return *this;
  }

  void write(const std::filesystem::path& dir) const {
    auto sink = std::make_unique<format::FileSink>((dir / format::traceFileName(header.rank, "", 0)).string());
    format::TraceWriter writer(std::move(sink));
    format::FileHeader h = header;
    h.start_time_ns = ns(0);
    h.clock_anchors.push_back(
        {ns(0), ns(0) + static_cast<uint64_t>(anchor_realtime_minus_capture_us * 1000), 1'000'000'000ull, 50});
    writer.writeHeader(h);
    // One chunk per kind of record, so that a file cut short loses only its later kinds.
    for (const auto& c : communicators) writer.add(c);
    for (const auto& k : kernels) {
      format::KernelRecord r = k.shape;
      r.start_ns = ns(k.start_us);
      r.end_ns = ns(k.end_us);
      r.stream = k.stream;
      r.correlation_id = k.correlation;
      r.name_id = writer.intern(k.name);
      writer.add(r);
    }
    writer.flush();
    if (!launches.empty()) writer.defineApiFunction(format::ApiDomain::kRuntime, 211, "cudaLaunchKernel");
    for (const auto& l : launches) {
      format::ApiCallRecord call;
      call.thread_id = thread_id;
      call.start_ns = ns(l.start_us);
      call.end_ns = ns(l.end_us);
      call.domain = format::ApiDomain::kRuntime;
      call.cbid = 211;
      call.correlation_id = l.correlation;
      writer.add(call);
    }
    writer.flush();
    for (const auto& o : ops) {
      format::NcclOperationRecord r = o.record;
      r.func_id = writer.intern(o.func);
      r.algorithm_id = o.algorithm.empty() ? 0 : writer.intern(o.algorithm);
      r.enqueue_ns = ns(o.enqueue_us);
      r.gpu_start_ns = ns(o.start_us);
      r.gpu_end_ns = ns(o.end_us);
      writer.add(r);
    }
    writer.flush();
    for (const auto& t : transfers) {
      format::NetTransferRecord r = t.record;
      r.start_ns = ns(t.start_us);
      r.end_ns = ns(t.end_us);
      writer.add(r);
    }
    for (const auto& l : link_records) writer.add(l);
    for (const auto& m : memory) writer.add(m);
    for (const auto& range : ranges) {
      format::NvtxEventRecord r;
      r.kind = format::NvtxEventKind::kRange;
      r.start_ns = ns(range.start_us);
      r.end_ns = ns(range.end_us);
      r.name_id = writer.intern(range.name);
      r.domain_id = writer.intern("PyTorch");
      r.thread_id = thread_id;
      writer.add(r);
    }
    for (const auto& m : metrics) {
      format::MetricSampleRecord r;
      r.timestamp_ns = ns(m.time_us);
      r.metric_id = writer.intern(m.name);
      r.value = m.value;
      writer.add(r);
    }
    for (const auto& k : kernel_metrics) writer.add(k);
    format::Trailer trailer;
    trailer.end = format::CaptureEnd::kGenerated;
    writer.finish(trailer);
  }
};

class RunBuilder {
 public:
  RunBuilder(std::string run_id, int world_size) : run_id_(std::move(run_id)), world_size_(world_size) {}

  RankBuilder& rank(int rank, const std::string& host, int local_rank = -1) {
    RankBuilder& r = ranks_[rank];
    r.header.run_id = run_id_;
    r.header.rank = rank;
    r.header.world_size = world_size_;
    r.header.local_rank = local_rank;
    r.header.hostname = host;
    r.header.time_base = "generated";
    r.header.simulated = true;
    r.thread_id = 7000 + static_cast<uint64_t>(rank);
    return r;
  }

  void write(const std::filesystem::path& dir) const {
    std::filesystem::create_directories(dir);
    for (const auto& [rank, builder] : ranks_) builder.write(dir);
  }

 private:
  std::string run_id_;
  int world_size_;
  std::map<int, RankBuilder> ranks_;
};

}  // namespace gpuxray::testing
