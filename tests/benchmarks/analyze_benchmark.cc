// Load + analyze throughput and peak memory of `gpuxray analyze` on a generated run (64 ranks of
// 1 million records each by default), with one worker and with two, and the split of one worker's
// time between the two phases (per rank: reading and digesting; across ranks: alignment, steps and
// the analyses on the digests).
//
//   analyze_benchmark [--ranks N] [--events N] [--dir DIR] [--keep] [--no-phases] [--jobs N,N]
//                     [--generate-only] [--help]
//
// --generate-only writes the run into --dir (kept) and stops, for measuring other commands on it.
// Each measurement of the command runs the real gpuxray binary as a child process (its report goes
// to /dev/null), timing it and reading its peak resident memory from wait4(); the phase split runs
// the same session in this process. Targets (reported, not enforced): >= 20 million events/s per
// core in the per-rank phase, the cross-rank phase <= 10 % of the time, two workers >= 1.8x one;
// peak memory does not grow with the rank count (compare two runs).
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "analyzer/analysis/session.h"
#include "proto/file_layout.h"
#include "proto/trace_writer.h"
#include "tests/benchmarks/measured_child.h"

namespace {

using namespace gpuxray::format;

constexpr uint64_t kStartNs = 1'764'410'400'000'000'000ull;
constexpr uint64_t kComm = 0xbe7c'0000'0000'0001ull;
constexpr int kKernelsPerStep = 990;

struct Options {
  int ranks = 64;
  uint64_t events = 1'000'000;
  std::filesystem::path dir = std::filesystem::temp_directory_path() / "gpuxray-analyze-benchmark";
  bool keep = false;
  bool phases = true;
  bool generate_only = false;
  std::vector<unsigned> jobs{1, 2};
};

uint64_t kernelNs(int rank, int k) {
  return 15'000 + static_cast<uint64_t>((k * 7919 + rank * 13) % 10'000);
}
uint64_t arrivalSkewNs(int rank) {
  return static_cast<uint64_t>((rank * 37) % 50) * 1000;
}

// How long after a step began the last rank of `world` enters the all-reduce (rank r starts the
// first step r microseconds late, the others together).
uint64_t lastArrivalNs(int world, bool first_step) {
  uint64_t last = 0;
  for (int r = 0; r < world; ++r) {
    uint64_t at = (first_step ? static_cast<uint64_t>(r) * 1000 : 0) + 4 * 4'000 + arrivalSkewNs(r);
    for (int k = 0; k < kKernelsPerStep; ++k) at += kernelNs(r, k) + 2'000;
    last = std::max(last, at);
  }
  return last;
}

// One rank of a data-parallel run: steps of ~1000 kernels with their launches, a few copies, a
// gradient all-reduce (kernel + NCCL operation), a ProfilerStep range and memory churn. Returns the
// records written. Every rank's all-reduce ends at the same time (`last_arrival` after the step
// began, of the first step and of the others, plus the transfer), as a real one does, so one clock serves all hosts.
uint64_t writeRank(const std::filesystem::path& dir, int rank, int world, uint64_t events,
                   std::pair<uint64_t, uint64_t> last_arrival) {
  TraceWriter writer(std::make_unique<FileSink>((dir / traceFileName(rank, "", 0)).string()));
  FileHeader h;
  h.run_id = "benchmark";
  h.rank = rank;
  h.world_size = world;
  h.local_rank = rank % 8;
  h.hostname = "node-" + std::to_string(rank / 8);
  h.time_base = "generated";
  h.simulated = true;
  DeviceProperties d;
  d.device_id = static_cast<uint32_t>(h.local_rank);
  d.sm_count = 132;
  d.max_threads_per_sm = 2048;
  d.registers_per_sm = 65536;
  d.registers_per_block = 65536;
  d.shared_memory_per_sm = 233472;
  d.shared_memory_per_block = 49152;
  d.shared_memory_per_block_optin = 232448;
  d.memory_bytes = 80ull << 30;
  h.devices.push_back(d);
  writer.writeHeader(h);
  writer.add(NcclCommunicatorRecord{kComm, "dp", rank, world, world / 8, rank, d.device_id, kStartNs, 5});

  std::vector<StringId> names;
  for (int i = 0; i < 20; ++i) names.push_back(writer.intern(fmt::format("kernel_{}_gemm_bf16_tile{}", i, 64 << (i % 3))));
  StringId nccl_kernel = writer.intern("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)");
  StringId all_reduce = writer.intern("AllReduce");
  StringId step_name_domain = writer.intern("PyTorch");

  uint64_t written = 1;
  uint64_t step_begun = kStartNs;  // when the step began on the earliest rank
  uint64_t now = step_begun + static_cast<uint64_t>(rank) * 1000;
  uint32_t correlation = 1;
  const uint64_t records_per_step = 2 * kKernelsPerStep + 4 + 3 + 1 + 2;
  const uint64_t steps = std::max<uint64_t>(1, events / records_per_step);
  for (uint64_t step = 0; step < steps; ++step) {
    uint64_t step_start = now;
    for (int k = 0; k < kKernelsPerStep; ++k) {
      uint64_t duration = kernelNs(rank, k);
      writer.add(ApiCallRecord{now - 8'000, now - 5'000, ApiDomain::kRuntime, 211, 1, correlation, 0, 0});
      KernelRecord kernel;
      kernel.start_ns = now;
      kernel.end_ns = now + duration;
      kernel.device = d.device_id;
      kernel.stream = 7;
      kernel.correlation_id = correlation++;
      kernel.name_id = names[static_cast<size_t>(k) % names.size()];
      kernel.grid_x = 132u * (1u + static_cast<uint32_t>(k % 5));
      kernel.grid_y = kernel.grid_z = 1;
      kernel.block_x = 128u << (k % 3);
      kernel.block_y = kernel.block_z = 1;
      kernel.registers_per_thread = 32u + 16u * static_cast<uint32_t>(k % 4);
      writer.add(kernel);
      now += duration + 2'000;
      written += 2;
    }
    for (int c = 0; c < 4; ++c) {
      MemcpyRecord copy;
      copy.start_ns = now;
      copy.end_ns = now + 3'000;
      copy.device = d.device_id;
      copy.stream = 9;
      copy.copy_kind = CopyKind::kHtoD;
      copy.bytes = 1 << 20;
      copy.correlation_id = correlation++;
      writer.add(copy);
      now += 4'000;
      ++written;
    }
    uint64_t start = now + arrivalSkewNs(rank);
    uint64_t end = step_begun + (step == 0 ? last_arrival.first : last_arrival.second) + 1'000'000 + 50'000;
    writer.add(ApiCallRecord{now - 5'000, now - 2'000, ApiDomain::kRuntime, 211, 1, correlation, 0, 0});
    KernelRecord nccl;
    nccl.start_ns = start;
    nccl.end_ns = end;
    nccl.device = d.device_id;
    nccl.stream = 13;
    nccl.correlation_id = correlation++;
    nccl.name_id = nccl_kernel;
    nccl.grid_x = 16, nccl.grid_y = nccl.grid_z = 1, nccl.block_x = 512, nccl.block_y = nccl.block_z = 1;
    writer.add(nccl);
    NcclOperationRecord op;
    op.kind = NcclOperationKind::kCollective;
    op.comm_hash = kComm;
    op.seq = step;
    op.func_id = all_reduce;
    op.enqueue_ns = now - 5'000;
    op.gpu_start_ns = start;
    op.gpu_end_ns = end;
    op.bytes = 256ull << 20;
    op.count = op.bytes / 2;
    op.channels = 16;
    op.device = d.device_id;
    op.operation_id = step + 1;
    writer.add(op);
    now = end + 10'000;
    step_begun = now;
    NvtxEventRecord range;
    range.kind = NvtxEventKind::kRange;
    range.start_ns = step_start;
    range.end_ns = now;
    range.domain_id = step_name_domain;
    range.name_id = writer.intern("ProfilerStep#" + std::to_string(step));
    writer.add(range);
    writer.add(MemoryEventRecord{step_start, MemoryOperation::kAllocate, d.device_id, 0x7f00'0000'0000ull + step, 1ull << 30,
                                 MemoryKind::kDevice, 7, 0, false, 0});
    writer.add(MemoryEventRecord{now, MemoryOperation::kRelease, d.device_id, 0x7f00'0000'0000ull + step, 1ull << 30,
                                 MemoryKind::kDevice, 7, 0, false, 0});
    written += 7;
  }
  Trailer trailer;
  trailer.end = CaptureEnd::kGenerated;
  if (!writer.finish(trailer)) throw std::runtime_error("cannot write " + dir.string() + ": " + writer.error());
  return written;
}

using Measurement = gpuxray::benchmarks::ChildRun;

Measurement runAnalyze(const std::string& binary, const std::filesystem::path& dir, unsigned jobs) {
  return gpuxray::benchmarks::runMeasured(
      {binary, "analyze", "-j", std::to_string(jobs), "--format", "json", dir.string()},
      gpuxray::benchmarks::ChildStderr::kKept);
}

}  // namespace

constexpr const char* kUsage = R"(usage: analyze_benchmark [options]
  --ranks N        ranks to generate (default 64)
  --events N       records per rank, about (default 1000000; ~2000 make a step)
  --dir DIR        where the run is written (default $TMPDIR/gpuxray-analyze-benchmark; emptied first)
  --keep           keep the run after measuring
  --generate-only  write the run into --dir, keep it and stop (to measure other commands on it)
  --jobs N,N       the worker counts to measure `gpuxray analyze -j N --format json` with (default 1,2)
  --no-phases      leave out the in-process split of one worker's time between the two phases
  --help           this text
)";

int main(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--ranks") options.ranks = std::stoi(value());
    else if (arg == "--events") options.events = std::stoull(value());
    else if (arg == "--dir") options.dir = value();
    else if (arg == "--keep") options.keep = true;
    else if (arg == "--no-phases") options.phases = false;
    else if (arg == "--generate-only") options.generate_only = true;
    else if (arg == "--help") {
      fmt::print("{}", kUsage);
      return 0;
    } else if (arg == "--jobs") {
      options.jobs.clear();
      std::string list = value();
      for (size_t at = 0; at <= list.size();) {
        size_t comma = std::min(list.find(',', at), list.size());
        options.jobs.push_back(static_cast<unsigned>(std::stoul(list.substr(at, comma - at))));
        at = comma + 1;
      }
    } else {
      fmt::print(stderr, "analyze_benchmark: unknown option '{}'\n{}", arg, kUsage);
      return 2;
    }
  }
  std::filesystem::remove_all(options.dir);
  std::filesystem::create_directories(options.dir);
  auto generation_start = std::chrono::steady_clock::now();
  std::atomic<int> next{0};
  std::atomic<uint64_t> records{0};
  const std::pair<uint64_t, uint64_t> last_arrival{lastArrivalNs(options.ranks, true),
                                                   lastArrivalNs(options.ranks, false)};
  std::vector<std::thread> writers;
  unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned w = 0; w < cores; ++w) {
    writers.emplace_back([&] {
      for (int r = next++; r < options.ranks; r = next++) records += writeRank(options.dir, r, options.ranks, options.events, last_arrival);
    });
  }
  for (auto& w : writers) w.join();
  uint64_t bytes_on_disk = 0;
  for (const auto& entry : std::filesystem::directory_iterator(options.dir)) bytes_on_disk += entry.file_size();
  fmt::print("generated {} ranks x ~{} records = {} records ({:.1f} MB on disk) in {:.1f} s\n", options.ranks,
             options.events, records.load(), static_cast<double>(bytes_on_disk) / 1e6,
             std::chrono::duration<double>(std::chrono::steady_clock::now() - generation_start).count());
  if (options.generate_only) {
    fmt::print("kept in {}\n", options.dir.string());
    return 0;
  }

  const std::string binary = GPUXRAY_BINARY;
  fmt::print("{:>6}  {:>9}  {:>9}  {:>16}  {:>16}  {:>12}  {:>12}\n", "jobs", "seconds", "CPU s", "events/s",
             "events/CPU-s", "peak memory", "bytes/event");
  bool failed = false;
  double one_worker = 0;
  for (unsigned jobs : options.jobs) {
    Measurement m = runAnalyze(binary, options.dir, jobs);
    if (m.exit_code != 0) {
      fmt::print(stderr, "gpuxray analyze -j {} exited with {}\n", jobs, m.exit_code);
      failed = true;
      continue;
    }
    double rate = static_cast<double>(records.load()) / m.seconds;
    if (jobs == 1) one_worker = m.seconds;
    fmt::print("{:>6}  {:>9.2f}  {:>9.2f}  {:>16.3e}  {:>16.3e}  {:>9.0f} MB  {:>12.1f}{}\n", jobs, m.seconds,
               m.cpu_seconds, rate, static_cast<double>(records.load()) / m.cpu_seconds,
               static_cast<double>(m.peak_bytes) / 1e6, static_cast<double>(m.peak_bytes) / static_cast<double>(records.load()),
               jobs > 1 && one_worker > 0 ? fmt::format("  ({:.2f}x one worker)", one_worker / m.seconds) : "");
  }
  if (options.phases) {
    // The two phases of one worker, in this process.
    gpuxray::analysis::SessionOptions session_options;
    session_options.paths = {options.dir.string()};
    session_options.jobs = 1;
    session_options.keep_events = false;
    auto started = std::chrono::steady_clock::now();
    gpuxray::analysis::Session session(session_options);
    gpuxray::report::Report report = session.analyze();
    double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    const auto& phases = session.phaseTimes();
    fmt::print("one worker in-process: {:.2f} s; per-rank phase {:.2f} s, {:.2f} CPU-s ({:.3e} events/CPU-s), "
               "cross-rank phase {:.2f} s, {:.2f} CPU-s ({:.1f} % of the CPU time); {} of {} ranks read again; digests "
               "{:.1f} kB per rank\n",
               total, phases.per_rank_s, phases.per_rank_cpu_s,
               static_cast<double>(records.load()) / phases.per_rank_cpu_s, phases.cross_rank_s, phases.cross_rank_cpu_s,
               100.0 * phases.cross_rank_cpu_s / (phases.per_rank_cpu_s + phases.cross_rank_cpu_s),
               phases.ranks_read_again, report.run.ranks.size(), static_cast<double>(phases.digest_bytes) / 1e3 / options.ranks);
  }
  fmt::print("targets: >= 2.0e+07 events/s per core in the per-rank phase, cross-rank phase <= 10 % of the total, "
             "two workers >= 1.8x one, peak memory flat in the rank count\n");
  if (!options.keep) std::filesystem::remove_all(options.dir);
  return failed ? 1 : 0;
}
