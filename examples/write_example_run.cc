// Writes the trace files of a small made-up training run: 2 hosts x 2 H100 GPUs, data parallel,
// a few steps of forward/backward kernels with NCCL all-reduce over a ring that crosses the hosts.
// Every file says it is generated. It gives `gpuxray info` (and the tests) a realistic run to read
// on a machine without a GPU.
//
//   write_example_run OUTPUT_DIR [--steps N]

#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "gpuxray/version.h"
#include "proto/file_layout.h"
#include "proto/trace_writer.h"

namespace {

using namespace gpuxray::format;

constexpr int kHosts = 2;
constexpr int kGpusPerHost = 2;
constexpr int kWorldSize = kHosts * kGpusPerHost;
constexpr uint64_t kStartNs = 1'764'410'400'000'000'000ull;  // 2025-11-29 10:00:00 UTC
constexpr uint32_t kComputeStream = 7;
constexpr uint32_t kNcclStream = 13;
constexpr uint64_t kDataParallelComm = 0x5eed0000c0ffee01ull;

DeviceProperties h100(uint32_t device) {
  DeviceProperties d;
  d.device_id = device;
  d.name = "NVIDIA H100 80GB HBM3";
  const char* kBusIds[] = {"0000:18:00.0", "0000:2a:00.0"};
  d.pci_bus_id = kBusIds[device % 2];
  d.compute_major = 9;
  d.sm_count = 132;
  d.max_threads_per_sm = 2048;
  d.max_warps_per_sm = 64;
  d.max_blocks_per_sm = 32;
  d.registers_per_sm = 65536;
  d.registers_per_block = 65536;
  d.shared_memory_per_sm = 233472;
  d.shared_memory_per_block = 49152;
  d.shared_memory_per_block_optin = 232448;
  d.reserved_shared_memory_per_block = 1024;
  d.memory_bytes = 85'520'809'984ull;
  d.memory_bandwidth_bytes_per_s = 3'350'000'000'000ull;
  d.core_clock_khz = 1'980'000;
  d.memory_clock_khz = 2'619'000;
  d.memory_bus_width_bits = 5120;
  d.l2_cache_bytes = 52'428'800;
  d.max_threads_per_block = 1024;
  d.warp_size = 32;
  d.max_registers_per_thread = 255;
  d.peak_bf16_flops = 989e12;
  return d;
}

FileHeader headerFor(int rank, const std::vector<std::string>& command_line) {
  FileHeader h;
  h.tool_version = gpuxray::kToolVersion;
  h.run_id = "example-dp4";
  h.run_id_source = "generated";
  h.rank = rank;
  h.local_rank = rank % kGpusPerHost;
  h.world_size = kWorldSize;
  h.local_world_size = kGpusPerHost;
  h.rank_source = "generated";
  h.hostname = "node-" + std::to_string(rank / kGpusPerHost);
  h.pid = 4000u + static_cast<uint32_t>(rank);
  h.command_line = command_line;
  h.start_time_ns = kStartNs;
  h.time_base = "generated";
  h.clock_anchors.push_back({kStartNs, kStartNs, 1'000'000'000ull, 50});
  h.devices.push_back(h100(static_cast<uint32_t>(h.local_rank)));
  Endpoint gpu{EndpointKind::kGpu, "GPU-" + std::to_string(rank), h.local_rank};
  h.links.push_back({LinkKind::kNvLink, gpu, {EndpointKind::kNvSwitch, "nvswitch-0", -1}, 4, 18, 450'000'000'000ull, {}, {}});
  h.links.push_back({LinkKind::kPcie, gpu, {EndpointKind::kPcieBridge, "0000:17:00.0", -1}, 5, 16, 64'000'000'000ull, {}, {}});
  h.nics.push_back({"mlx5_" + std::to_string(h.local_rank), 1, 50'000'000'000ull, "0000:1a:00.0", "IB", 0});
  h.capture_config.activities = {"kernel", "memcpy", "runtime", "nvtx", "nccl"};
  // Its NCCL operations are the kind the profiler plugin records.
  h.capture_config.nccl_profiler = true;
  h.nccl_version = "2.28.9";
  h.nccl_capture_source = NcclCaptureSource::kProfilerPlugin;
  h.simulated = true;
  h.simulation_inputs = R"({"generator": "examples/write_example_run", "hosts": 2, "gpus_per_host": 2, "parallelism": "DP4"})";
  return h;
}

struct KernelShape {
  const char* name;
  uint32_t grid_x, block_x, registers;
  uint64_t duration_ns;
};

const std::vector<KernelShape> kForward = {
    {"void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>", 1024, 128, 16, 9'000},
    {"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
     264, 384, 168, 410'000},
    {"void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>", 4096, 256, 40, 38'000},
    {"flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t>>", 528, 128, 255,
     620'000},
};

void writeRank(const std::filesystem::path& dir, int rank, int steps, const std::vector<std::string>& command_line) {
  auto path = (dir / traceFileName(rank, "", 0)).string();
  auto sink = std::make_unique<FileSink>(path);
  if (!sink->ok()) throw std::runtime_error(sink->error());
  TraceWriter writer(std::move(sink));
  FileHeader header = headerFor(rank, command_line);
  writer.writeHeader(header);

  StringId step_domain = writer.intern("PyTorch");
  StringId all_reduce = writer.intern("AllReduce");
  StringId float_type = writer.intern("ncclBfloat16");
  StringId ring = writer.intern("RING");
  StringId simple = writer.intern("SIMPLE");
  StringId sum = writer.intern("ncclSum");
  StringId nccl_kernel = writer.intern("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)");
  writer.defineApiFunction(ApiDomain::kRuntime, 211, "cudaLaunchKernel");
  writer.add(NcclCommunicatorRecord{kDataParallelComm, "dp", rank, kWorldSize, kHosts, rank, 0, kStartNs, 5});
  writer.add(StreamRecord{kComputeStream, 0, 1, 0, 2, 0});
  writer.add(StreamRecord{kNcclStream, 0, 1, -1, 2, 0});
  writer.add(MemoryEventRecord{kStartNs + 1000, MemoryOperation::kAllocate, 0, 0x7f0000000000ull, 24ull << 30,
                               MemoryKind::kDevice, 0, 1, false, 0});

  // Rank 3's GPU runs its kernels 15 % slower: every all-reduce waits for it.
  const double slowdown = rank == 3 ? 1.15 : 1.0;
  uint64_t now = kStartNs + 2'000'000;
  uint32_t correlation = 1;
  const uint64_t thread = 140000u + static_cast<uint64_t>(rank);
  for (int step = 0; step < steps; ++step) {
    uint64_t step_start = now;
    for (int layer = 0; layer < 24; ++layer) {
      for (const auto& shape : kForward) {
        for (int pass = 0; pass < (layer % 2 == 0 ? 1 : 2); ++pass) {
          auto duration = static_cast<uint64_t>(static_cast<double>(shape.duration_ns) * slowdown);
          writer.add(ApiCallRecord{now - 6'000, now - 2'500, ApiDomain::kRuntime, 211, thread, correlation, 0, 0});
          KernelRecord k;
          k.start_ns = now;
          k.end_ns = now + duration;
          k.stream = kComputeStream;
          k.correlation_id = correlation++;
          k.context = 1;
          k.name_id = writer.intern(shape.name);
          k.grid_x = shape.grid_x;
          k.grid_y = k.grid_z = 1;
          k.block_x = shape.block_x;
          k.block_y = k.block_z = 1;
          k.registers_per_thread = shape.registers;
          k.dynamic_shared_memory = shape.registers > 128 ? 114'688 : 0;
          k.shared_memory_optin = k.dynamic_shared_memory > 49152;
          writer.add(k);
          now += duration + 3'000;
        }
      }
    }
    // Gradient all-reduce: starts when the slowest rank gets there, so faster ranks wait.
    uint64_t slowest_compute = static_cast<uint64_t>(static_cast<double>(now - step_start) * 1.15 / slowdown);
    uint64_t enqueue = now;
    uint64_t start = step_start + slowest_compute;
    uint64_t end = start + 18'000'000;
    NcclOperationRecord op;
    op.kind = NcclOperationKind::kCollective;
    op.comm_hash = kDataParallelComm;
    op.seq = static_cast<uint64_t>(step);
    op.func_id = all_reduce;
    op.enqueue_ns = enqueue;
    op.enqueue_end_ns = enqueue + 9'000;
    op.gpu_start_ns = start;
    op.gpu_end_ns = end;
    op.count = 350'000'000;
    op.bytes = op.count * 2;
    op.datatype_id = float_type;
    op.algorithm_id = ring;
    op.protocol_id = simple;
    op.reduce_op_id = sum;
    op.channels = 16;
    op.warps = 16;
    op.stream = kNcclStream;
    op.operation_id = static_cast<uint64_t>(step) + 1;
    op.kernel_correlation_id = correlation;
    writer.add(op);
    KernelRecord nccl;
    nccl.start_ns = start;
    nccl.end_ns = end;
    nccl.stream = kNcclStream;
    nccl.correlation_id = correlation++;
    nccl.context = 1;
    nccl.name_id = nccl_kernel;
    nccl.grid_x = 16;
    nccl.grid_y = nccl.grid_z = 1;
    nccl.block_x = 512;
    nccl.block_y = nccl.block_z = 1;
    nccl.registers_per_thread = 96;
    writer.add(nccl);
    // The ring crosses hosts between ranks 1->2 and 3->0: those hops go over the network.
    int next = (rank + 1) % kWorldSize;
    if (next / kGpusPerHost != rank / kGpusPerHost) {
      for (uint32_t channel = 0; channel < 16; ++channel) {
        writer.add(NetTransferRecord{op.operation_id, next, channel, true, op.bytes * 3 / 2 / 16, start, end, 64,
                                     1'200'000, rank == 3 ? 0u : 2'500'000u, 9'000'000, kDataParallelComm});
      }
    }
    writer.add(NvtxEventRecord{NvtxEventKind::kRange, step_start, end, step_domain,
                               writer.intern("ProfilerStep#" + std::to_string(step)), thread, 0, 0, 0, 0, 0, {}, 0});
    now = end + 150'000;
  }
  Trailer trailer;
  trailer.end = CaptureEnd::kGenerated;
  trailer.end_time_ns = now;
  trailer.end_detail = "examples/write_example_run";
  if (!writer.finish(trailer)) throw std::runtime_error(writer.error());
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  if (args.size() != 2 && !(args.size() == 4 && args[2] == "--steps")) {
    std::cerr << "usage: write_example_run OUTPUT_DIR [--steps N]\n";
    return 1;
  }
  int steps = args.size() == 4 ? std::stoi(args[3]) : 5;
  try {
    std::filesystem::create_directories(args[1]);
    for (int rank = 0; rank < kWorldSize; ++rank) writeRank(args[1], rank, steps, {"python", "train.py", "--dp", "4"});
  } catch (const std::exception& e) {
    std::cerr << "write_example_run: " << e.what() << "\n";
    return 2;
  }
  std::cout << "wrote " << kWorldSize << " trace files of " << steps << " steps to " << args[1] << "\n";
  return 0;
}
