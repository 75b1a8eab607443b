// `gpuxray digest RUN` and `gpuxray analyze DIGESTS` against one `gpuxray analyze RUN`, the real binary
// timed as child processes (wall time, CPU time and peak memory from wait4()); the digests' size per
// rank; and N processes with Slurm's rank variables against one, which must give the same report.
//
//   digest_benchmark RUN [--jobs N] [--shards N] [--repeat N]
//
// RUN is any run directory: `gpuxray simulate --preset demo -o DIR`, or the 64-rank runs of 1 million
// records per rank that `analyze_benchmark --dir DIR --keep` leaves.
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "tests/benchmarks/measured_child.h"

namespace {

namespace fs = std::filesystem;
using gpuxray::benchmarks::ChildRun;
using gpuxray::benchmarks::ChildStderr;
using gpuxray::benchmarks::runMeasured;

// `gpuxray ARGS > out`, its output kept (runMeasured discards it).
std::string outputOf(const std::vector<std::string>& args, const fs::path& out) {
  std::string command = GPUXRAY_BINARY;
  for (const auto& arg : args) command += " '" + arg + "'";
  command += " > '" + out.string() + "'";
  if (std::system(command.c_str()) != 0) fmt::print(stderr, "digest_benchmark: failed: {}\n", command);
  std::ifstream in(out);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The report's digests_used count, and the report with that count blanked: ranks whose digest lacks
// the lanes of the step the overview shows (a shard's lowest rank chose another) are read again from
// their traces, which changes that count and nothing else.
std::pair<std::string, std::string> digestsUsed(std::string json) {
  size_t at = json.find("\"name\": \"digests_used\"");
  if (at == std::string::npos) return {"0", json};
  size_t value = json.find("\"value\": ", at) + 9, end = json.find_first_of(",\n}", value);
  std::string count = json.substr(value, end - value);
  json.replace(value, end - value, "N");
  return {count, json};
}

void print(const char* what, const ChildRun& run) {
  fmt::print("  {:<28} {:8.2f} s wall {:8.2f} s CPU {:8.1f} MiB peak{}\n", what, run.seconds, run.cpu_seconds,
             static_cast<double>(run.peak_bytes) / (1 << 20), run.exit_code == 0 ? "" : "  (failed)");
}

}  // namespace

int main(int argc, char** argv) {
  std::string run_dir, jobs = "0";
  int shards = 3, repeat = 3;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--jobs" && i + 1 < argc)
      jobs = argv[++i];
    else if (arg == "--shards" && i + 1 < argc)
      shards = std::max(1, std::stoi(argv[++i]));
    else if (arg == "--repeat" && i + 1 < argc)
      repeat = std::max(1, std::stoi(argv[++i]));
    else
      run_dir = arg;
  }
  if (run_dir.empty()) {
    fmt::print(stderr, "usage: digest_benchmark RUN [--jobs N] [--shards N] [--repeat N]\n");
    return 1;
  }
  fs::path scratch = fs::temp_directory_path() / fmt::format("gpuxray-digest-benchmark-{}", getpid());
  fs::create_directories(scratch);
  fs::path digests = scratch / "digests";

  // The best of `repeat` runs of each, alternating, so that all see the same machine load.
  ChildRun analyze{1e30}, digest{1e30}, analyze_digests{1e30};
  auto best = [](ChildRun& kept, const ChildRun& run) {
    if (run.seconds < kept.seconds) kept = run;
  };
  for (int i = 0; i < repeat; ++i) {
    best(analyze,
         runMeasured({GPUXRAY_BINARY, "analyze", run_dir, "--format", "json", "-j", jobs}, ChildStderr::kKept));
    fs::remove_all(digests);
    best(digest,
         runMeasured({GPUXRAY_BINARY, "digest", run_dir, "-o", digests.string(), "-j", jobs}, ChildStderr::kDiscarded));
    best(analyze_digests, runMeasured({GPUXRAY_BINARY, "analyze", digests.string(), "--format", "json", "-j", jobs},
                                      ChildStderr::kKept));
  }
  uint64_t total = 0, largest = 0, files = 0, traces = 0;
  for (const auto& entry : fs::directory_iterator(digests)) {
    uint64_t size = fs::file_size(entry.path());
    total += size, largest = std::max(largest, size), ++files;
  }
  for (const auto& entry : fs::directory_iterator(run_dir)) {
    if (entry.path().extension() == ".gpuxray") traces += fs::file_size(entry.path());
  }
  fmt::print("{}: {} ranks, traces {:.1f} MiB, -j {}\n", run_dir, files, static_cast<double>(traces) / (1 << 20), jobs);
  print("analyze RUN", analyze);
  print("digest RUN", digest);
  print("analyze DIGESTS", analyze_digests);
  fmt::print(
      "  digest / analyze RUN: {:.2f}x; analyze DIGESTS / analyze RUN: {:.3f}x; digest + analyze DIGESTS / "
      "analyze RUN: {:.2f}x\n",
      digest.seconds / analyze.seconds, analyze_digests.seconds / analyze.seconds,
      (digest.seconds + analyze_digests.seconds) / analyze.seconds);
  fmt::print("  digests: {:.1f} KiB per rank on average, {:.1f} KiB the largest, {:.2f} % of the traces\n",
             static_cast<double>(total) / static_cast<double>(std::max<uint64_t>(files, 1)) / 1024,
             static_cast<double>(largest) / 1024, 100.0 * static_cast<double>(total) / static_cast<double>(traces));

  // N processes at once, each its shard by Slurm's variables, against the one-process digests.
  fs::path sharded = scratch / "sharded";
  auto started = std::chrono::steady_clock::now();
  std::vector<pid_t> children;
  for (int i = 0; i < shards; ++i) {
    pid_t child = fork();
    if (child == 0) {
      setenv("SLURM_PROCID", std::to_string(i).c_str(), 1);
      setenv("SLURM_NTASKS", std::to_string(shards).c_str(), 1);
      std::string output = sharded.string();
      execl(GPUXRAY_BINARY, GPUXRAY_BINARY, "digest", run_dir.c_str(), "-o", output.c_str(), "-j", "1",
            static_cast<char*>(nullptr));
      _exit(127);
    }
    children.push_back(child);
  }
  bool all_ok = true;
  for (pid_t child : children) {
    int status = 0;
    waitpid(child, &status, 0);
    all_ok = all_ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  double sharded_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  auto [one_used, one] = digestsUsed(outputOf({"analyze", digests.string(), "--format", "json"}, scratch / "one.json"));
  auto [many_used, many] =
      digestsUsed(outputOf({"analyze", sharded.string(), "--format", "json"}, scratch / "many.json"));
  fmt::print(
      "  {} processes (SLURM_PROCID/SLURM_NTASKS, -j 1 each): {:.2f} s wall, {}; the report of their digests "
      "{} that of one process's ({} bytes of JSON) but for digests_used: {} of one process's digests used, {} "
      "of theirs (the others' traces read again)\n",
      shards, sharded_s, all_ok ? "all exited 0" : "SOME FAILED", one == many ? "is byte for byte" : "DIFFERS FROM",
      one.size(), one_used, many_used);
  fs::remove_all(scratch);
  return one == many && all_ok ? 0 : 1;
}
