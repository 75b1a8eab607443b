// `gpuxray analyze` on a directory of 3,000 small trace files of which half are damaged (bad magic,
// a cut-off header, a flipped byte in a chunk, random bytes, an empty file), against the peer: the
// same directory with only its 1,500 intact files. Reports the best of --repeat runs of each, their
// ratio and peak memory, with one worker (-j 1) and one per core.
//
//   damaged_directory_benchmark [--files N] [--repeat N] [--peer-binary PATH] [--dir DIR] [--keep]
//
// --peer-binary also times another gpuxray (e.g. an older build) on the damaged directory.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/benchmarks/measured_child.h"
#include "tests/support/hostile_traces.h"

namespace {

namespace fs = std::filesystem;

struct Options {
  int files = 3000;
  int repeat = 5;
  std::string peer_binary;
  fs::path dir = fs::temp_directory_path() / "gpuxray-damaged-directory-benchmark";
  bool keep = false;
};

std::string readBytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void writeBytes(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Damage of five kinds, in turn.
std::string damaged(std::string bytes, int kind, std::mt19937& random) {
  switch (kind % 5) {
    case 0:
      bytes[0] = 'X';
      break;  // not a gpuxray trace
    case 1:
      bytes.resize(30);
      break;  // cut off in the header chunk
    case 2:
      bytes[bytes.size() / 2] ^= 0x40;
      break;  // one chunk fails its checksum
    case 3:
      for (char& c : bytes) c = static_cast<char>(random());  // noise
      break;
    default:
      bytes.clear();
      break;  // empty
  }
  return bytes;
}

using Measurement = gpuxray::benchmarks::ChildRun;

Measurement runAnalyze(const std::string& binary, const fs::path& dir, const std::string& jobs) {
  return gpuxray::benchmarks::runMeasured({binary, "analyze", "-j", jobs, dir.string()},
                                          gpuxray::benchmarks::ChildStderr::kDiscarded);
}

Measurement best(const std::string& binary, const fs::path& dir, const std::string& jobs, int repeat) {
  Measurement fastest;
  for (int i = 0; i < repeat; ++i) {
    Measurement m = runAnalyze(binary, dir, jobs);
    if (i == 0 || m.seconds < fastest.seconds) fastest = m;
  }
  return fastest;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--files")
      options.files = std::stoi(value());
    else if (arg == "--repeat")
      options.repeat = std::stoi(value());
    else if (arg == "--peer-binary")
      options.peer_binary = value();
    else if (arg == "--dir")
      options.dir = value();
    else if (arg == "--keep")
      options.keep = true;
    else
      throw std::invalid_argument("unknown option " + arg);
  }
  fs::path mixed = options.dir / "half-damaged";
  fs::path intact = options.dir / "intact-only";
  fs::remove_all(options.dir);
  fs::create_directories(mixed);
  fs::create_directories(intact);
  std::mt19937 random(22);
  int intact_files = 0;
  for (int rank = 0; rank < options.files; ++rank) {
    std::string name = fmt::format("rank-{:05}.gpuxray", rank);
    gpuxray::testing::writeValidTrace(mixed / name, rank, options.files);
    if (rank % 2 == 1) {
      writeBytes(mixed / name, damaged(readBytes(mixed / name), rank / 2, random));
    } else {
      fs::copy_file(mixed / name, intact / name);
      ++intact_files;
    }
  }
  fmt::print("{} files, {} intact, {} damaged (5 kinds); best of {} runs\n", options.files, intact_files,
             options.files - intact_files, options.repeat);
  for (const std::string jobs : {"1", "0"}) {
    Measurement damaged_run = best(GPUXRAY_BINARY, mixed, jobs, options.repeat);
    Measurement intact_run = best(GPUXRAY_BINARY, intact, jobs, options.repeat);
    fmt::print(
        "-j {:<2} half damaged: {:.3f} s, {:.0f} MiB peak (exit {}) | intact half only (peer): {:.3f} s, "
        "{:.0f} MiB | ratio {:.2f}\n",
        jobs == "0" ? "all" : jobs, damaged_run.seconds, static_cast<double>(damaged_run.peak_bytes) / 1048576.0,
        damaged_run.exit_code, intact_run.seconds, static_cast<double>(intact_run.peak_bytes) / 1048576.0,
        damaged_run.seconds / intact_run.seconds);
    if (!options.peer_binary.empty()) {
      Measurement peer = best(options.peer_binary, mixed, jobs, options.repeat);
      fmt::print("      {} on the half-damaged directory: {:.3f} s, {:.0f} MiB (exit {}) | ratio {:.2f}\n",
                 options.peer_binary, peer.seconds, static_cast<double>(peer.peak_bytes) / 1048576.0, peer.exit_code,
                 damaged_run.seconds / peer.seconds);
    }
  }
  if (!options.keep) fs::remove_all(options.dir);
  return 0;
}
