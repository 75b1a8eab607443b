// Speed and size of the timeline export on a generated run model (in memory, no trace files): the
// Perfetto protobuf writer and the Chrome JSON writer, each alone, on one core.
//
//   export_benchmark [--ranks N] [--kernels N] [--reps N] [--dir DIR]
//
// Each rank runs steps of ~1000 kernels (realistic, mostly mangled C++ names), each launched by a
// cudaLaunchKernel on the main thread, inside ProfilerStep# NVTX ranges, with a gradient all-reduce
// per step (NCCL kernel and operation), device memory churn and launch configurations for the
// occupancy counter. Figures: events written per second (slices, instants and counter values), and
// bytes per kernel slice in each format, for the full timeline and for kernels alone. Targets
// (reported, not enforced): >= 5 million events/s, protobuf <= 1/5 of the JSON's size.
// --dir also writes both files there, to open them.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "analyzer/export/chrome_json_writer.h"
#include "analyzer/export/perfetto_writer.h"
#include "analyzer/export/timeline_export.h"
#include "proto/trace_writer.h"

namespace {

using namespace gpuxray;
using Clock = std::chrono::steady_clock;

constexpr int64_t kStartNs = 1'764'410'400'000'000'000;
constexpr uint64_t kComm = 0xbe7c'0000'0000'0001ull;
constexpr double kTargetEventsPerSecond = 5e6;
constexpr double kTargetRatio = 0.2;

// Kernel names as CUPTI reports them, from a bf16 transformer training step.
constexpr const char* kKernelNames[] = {
    "ampere_bf16_s16816gemm_bf16_128x256_ldg8_f2f_stages_64x3_tn",
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_"
    "cublas",
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_nt_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_"
    "cublas",
    "triton_poi_fused_add_0",
    "triton_red_fused_native_layer_norm_1",
    "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_15CUDAFunctor_addIN3c108BFloat16EEENS_"
    "6detail5ArrayIPcLi3EEEEEviT0_T1_",
    "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_13BinaryFunctorIfffNS0_15binary_internal10MulFunctorIfEEEENS_"
    "6detail5ArrayIPcLi3EEEEEviT0_T1_",
    "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_15GeluCUDAFunctorIN3c108BFloat16EEENS_"
    "6detail5ArrayIPcLi2EEEEEviT0_T1_",
    "_ZN2at6native13reduce_kernelILi512ELi1ENS0_8ReduceOpIfNS0_11sum_functorIfffEEjfLi4EEEEEvT1_",
    "_ZN2at6native12_GLOBAL__N_128vectorized_layer_norm_kernelIN3c108BFloat16EfEEviT0_PKT_S8_S8_PS5_S9_PS6_",
    "_ZN2at6native43_GLOBAL__N__2b6e8dbf_13_SoftMax_cu_9f978f6323cunn_SoftMaxForwardSmemILi8EN3c108BFloat16EffNS1_"
    "22SoftMaxForwardEpilogueEEEvPT2_PKT0_l",
    "_ZN13pytorch_flash16flash_fwd_kernelINS_23Flash_fwd_kernel_"
    "traitsILi128ELi128ELi64ELi4ELb0ELb0EN7cutlass10bfloat16_tENS_19Flash_kernel_traitsILi128ELi128ELi64ELi4ES3_"
    "EEEELb0ELb1ELb0ELb0ELb0ELb1ELb0ELb0EEEvNS_16Flash_fwd_paramsE",
    "_ZN2at6native12_GLOBAL__N_124fused_dropout_kernel_vecIN3c108BFloat16EfjLi1ELi4EhEEvNS_4cuda6detail10TensorInfoIKT_"
    "T1_EENS6_IS7_S9_EENS6_IT4_S9_EES9_T0_NS_15PhiloxCudaStateE",
    "_ZN2at6native12_GLOBAL__N_125multi_tensor_apply_kernelINS1_18TensorListMetadataILi4EEENS1_"
    "20FusedAdamMathFunctorIfLi4ELNS1_9ADAM_MODEE0ELb0EEEJPfddddddbPKfS9_EEEvT_T0_DpT1_",
    "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_12copy_functorIfN3c108BFloat16EEENS_"
    "6detail5ArrayIPcLi2EEEEEviT0_T1_",
};
constexpr const char* kNcclKernel = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)";

struct Options {
  int ranks = 8;
  uint64_t kernels = 1'000'000;  // per rank
  int reps = 3;
  std::string dir;
};

// SplitMix64, for the same run on every platform.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  uint32_t below(uint32_t n) { return static_cast<uint32_t>(next() % n); }

 private:
  uint64_t state_;
};

model::RankTrace makeRank(int rank, int world, uint64_t kernels, bool kernels_only) {
  Rng rng(static_cast<uint64_t>(rank) * 7919 + 1);
  model::RankTrace r;
  r.rank = rank;
  r.path = fmt::format("rank-{:05}.gpuxray", rank);
  r.header.rank = rank;
  r.header.world_size = world;
  r.header.hostname = fmt::format("node-{}", rank / 8);
  format::DeviceProperties d;
  d.device_id = static_cast<uint32_t>(rank % 8);
  d.sm_count = 132;
  d.max_threads_per_sm = 2048;
  d.registers_per_sm = 65536;
  d.registers_per_block = 65536;
  d.shared_memory_per_sm = 233472;
  d.shared_memory_per_block = 49152;
  d.shared_memory_per_block_optin = 232448;
  d.compute_major = 9;
  r.header.devices.push_back(d);
  std::vector<uint32_t> names;
  for (const char* name : kKernelNames) {
    names.push_back(static_cast<uint32_t>(r.strings.size()));
    r.strings.emplace_back(name);
  }
  auto intern = [&](const char* text) {
    r.strings.emplace_back(text);
    return static_cast<uint32_t>(r.strings.size() - 1);
  };
  uint32_t nccl_kernel = intern(kNcclKernel), all_reduce = intern("AllReduce"), ring = intern("RING");
  uint32_t launch = intern("cudaLaunchKernel"), domain = intern("PyTorch");
  r.api_functions.push_back(launch);
  r.threads.push_back(140'000 + static_cast<uint64_t>(rank));
  for (uint32_t grid : {132u, 264u, 1056u, 4096u, 16u}) {
    for (uint32_t block : {128u, 256u, 512u})
      r.launch_configs.push_back({grid, 1, 1, block, 1, 1, 32 + grid % 64, 0, 0});
  }
  r.streams = {{d.device_id, 7}, {d.device_id, 13}};
  if (!kernels_only) r.communicators.push_back({kComm, "dp", rank, world, std::max(1, world / 8), rank, d.device_id});

  int64_t now = kStartNs + rank * 1'000;
  uint32_t correlation = 1;
  int64_t step_start = now;
  uint64_t step = 0;
  for (uint64_t k = 0; k < kernels; ++k) {
    bool step_end = k % 1000 == 999;
    model::GpuActivity a;
    a.start_ns = now;
    a.end_ns = now + 2'000 + rng.below(40'000);
    a.correlation_id = correlation++;
    a.device = static_cast<uint8_t>(d.device_id);
    if (step_end) {
      a.name_id = nccl_kernel;
      a.kind = model::ActivityKind::kCommunication;
      a.stream = 1;
    } else {
      a.name_id = names[rng.below(static_cast<uint32_t>(names.size()))];
      a.stream = 0;
    }
    a.detail = rng.below(static_cast<uint32_t>(r.launch_configs.size()));
    r.activities.push_back(a);
    if (!kernels_only) {
      r.host_calls.push_back({a.start_ns - 4'000, a.start_ns - 1'000, a.correlation_id, 0, 1});
      if (step_end) {
        model::NcclOp op;
        op.kind = format::NcclOperationKind::kCollective;
        op.comm_hash = kComm;
        op.seq = step + 1;
        op.func_id = all_reduce;
        op.algorithm_id = ring;
        op.enqueue_ns = a.start_ns - 4'000;
        op.gpu_start_ns = a.start_ns;
        op.gpu_end_ns = a.end_ns;
        op.bytes = 256ull << 20;
        op.channels = 16;
        r.nccl_ops.push_back(op);
        r.memory.push_back({a.start_ns, 1 << 30, d.device_id});
        r.memory.push_back({a.end_ns, -(1 << 30), d.device_id});
        r.nvtx.push_back(
            {step_start, a.end_ns, intern(fmt::format("ProfilerStep#{}", step).c_str()), domain, r.threads.front(), 0});
        ++step;
        step_start = a.end_ns + 1'000;
      }
    }
    now = a.end_ns + 500 + rng.below(3'000);
  }
  return r;
}

// Counts what it is given and keeps nothing.
class CountingSink final : public format::ByteSink {
 public:
  bool append(std::span<const uint8_t> first, std::span<const uint8_t> second) override {
    bytes += first.size() + second.size();
    return true;
  }
  std::string error() const override { return {}; }
  uint64_t bytes = 0;
};

struct Result {
  double seconds = 0;
  uint64_t bytes = 0;
  timeline::ExportSummary summary;
};

template <typename Sink>
Result measure(const model::RunTrace& run, int reps) {
  report::Report report;
  Result best;
  for (int rep = 0; rep < reps; ++rep) {
    CountingSink bytes;
    Sink sink(bytes);
    auto start = Clock::now();
    timeline::ExportSummary summary = timeline::exportTimeline(run, report, {}, sink);
    double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (rep == 0 || seconds < best.seconds) best = {seconds, bytes.bytes, summary};
  }
  return best;
}

model::RunTrace makeRun(const Options& options, bool kernels_only) {
  model::RunTrace run;
  run.run_id = "export-benchmark";
  run.world_size = options.ranks;
  for (int r = 0; r < options.ranks; ++r)
    run.ranks.push_back(makeRank(r, options.ranks, options.kernels, kernels_only));
  return run;
}

void writeFiles(const model::RunTrace& run, const std::string& dir) {
  report::Report report;
  format::FileSink perfetto_file(dir + "/export_benchmark.pftrace"), json_file(dir + "/export_benchmark.json");
  if (!perfetto_file.ok() || !json_file.ok()) {
    fmt::print(stderr, "export_benchmark: cannot write into {}\n", dir);
    std::exit(1);
  }
  timeline::PerfettoSink perfetto(perfetto_file);
  timeline::ChromeJsonSink json(json_file);
  timeline::TeeSink both({&perfetto, &json});
  timeline::exportTimeline(run, report, {}, both);
  fmt::print("wrote {0}/export_benchmark.pftrace and {0}/export_benchmark.json\n", dir);
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        fmt::print(stderr, "export_benchmark: {} needs a value\n", arg);
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--ranks") {
      options.ranks = std::stoi(value());
    } else if (arg == "--kernels") {
      options.kernels = std::stoull(value());
    } else if (arg == "--reps") {
      options.reps = std::stoi(value());
    } else if (arg == "--dir") {
      options.dir = value();
    } else {
      fmt::print(stderr, "usage: export_benchmark [--ranks N] [--kernels N per rank] [--reps N] [--dir DIR]\n");
      return 2;
    }
  }

  fmt::print("export_benchmark: {} ranks x {} kernels, best of {} runs, one thread\n", options.ranks, options.kernels,
             options.reps);
  for (bool kernels_only : {false, true}) {
    model::RunTrace run = makeRun(options, kernels_only);
    Result perfetto = measure<timeline::PerfettoSink>(run, options.reps);
    Result json = measure<timeline::ChromeJsonSink>(run, options.reps);
    uint64_t kernels = 0;
    for (const auto& rank : run.ranks) kernels += rank.activities.size();
    auto events = static_cast<double>(perfetto.summary.events());
    fmt::print("\n{}: {:.1f} M events ({:.1f} M kernel slices), {:.1f} M flows\n",
               kernels_only ? "kernels only" : "full timeline (kernels, launches, NVTX, NCCL, counters, flows)",
               events / 1e6, static_cast<double>(kernels) / 1e6, static_cast<double>(perfetto.summary.flows) / 1e6);
    auto line = [&](const char* format_name, const Result& r) {
      fmt::print("  {:<12} {:6.2f} M events/s  {:8.1f} MB  {:6.1f} bytes per kernel slice\n", format_name,
                 events / r.seconds / 1e6, static_cast<double>(r.bytes) / 1e6,
                 static_cast<double>(r.bytes) / static_cast<double>(kernels));
    };
    line("perfetto", perfetto);
    line("chrome json", json);
    double ratio = static_cast<double>(perfetto.bytes) / static_cast<double>(json.bytes);
    fmt::print("  protobuf / JSON size: {:.3f} (1/{:.1f}); target <= {:.2f}: {}\n", ratio, 1 / ratio, kTargetRatio,
               ratio <= kTargetRatio ? "met" : "NOT met");
    fmt::print("  protobuf speed target >= {:.0f} M events/s: {}\n", kTargetEventsPerSecond / 1e6,
               events / perfetto.seconds >= kTargetEventsPerSecond ? "met" : "NOT met");
    if (!kernels_only && !options.dir.empty()) writeFiles(run, options.dir);
  }
  return 0;
}
