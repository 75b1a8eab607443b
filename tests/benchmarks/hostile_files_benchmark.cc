// The hostile trace files of tests/support/hostile_traces.h through `gpuxray info` and `analyze`:
// exit status, wall time and peak memory of each, for this build and, with --peer-binary, another
// (e.g. a build from before the reader was hardened), which runs under --peer-memory of address
// space and --timeout seconds so that it cannot take the machine down.
//
//   hostile_files_benchmark [--peer-binary PATH] [--peer-memory GiB] [--timeout S] [--dir DIR] [--keep]
#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/benchmarks/measured_child.h"
#include "tests/support/hostile_traces.h"

namespace {

namespace fs = std::filesystem;

struct Outcome {
  std::string result;
  double seconds = 0;
  double peak_mib = 0;
};

Outcome run(const std::string& binary, const std::string& command, const fs::path& path, uint64_t address_space,
            double timeout_s) {
  gpuxray::benchmarks::ChildRun child = gpuxray::benchmarks::runMeasured(
      {binary, command, path.string()}, gpuxray::benchmarks::ChildStderr::kDiscarded, {address_space, timeout_s});
  Outcome o;
  o.seconds = child.seconds;
  o.peak_mib = static_cast<double>(child.peak_bytes) / (1024.0 * 1024.0);
  o.result = child.timed_out      ? fmt::format("killed after {:.0f} s", timeout_s)
             : child.term_signal ? fmt::format("signal {} ({})", child.term_signal, strsignal(child.term_signal))
                                 : fmt::format("exit {}", child.exit_code);
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  std::string peer;
  double peer_gib = 4;
  double timeout_s = 10;
  fs::path dir = fs::temp_directory_path() / "gpuxray-hostile-files-benchmark";
  bool keep = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--peer-binary")
      peer = value();
    else if (arg == "--peer-memory")
      peer_gib = std::stod(value());
    else if (arg == "--timeout")
      timeout_s = std::stod(value());
    else if (arg == "--dir")
      dir = value();
    else if (arg == "--keep")
      keep = true;
    else
      throw std::invalid_argument("unknown option " + arg);
  }
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto traces = gpuxray::testing::writeHostileTraces(dir);
  fs::path valid = dir / "valid.gpuxray";
  gpuxray::testing::writeValidTrace(valid);
  traces.insert(traces.begin(), {"(valid trace: the baseline)", valid});
  auto cell = [](const Outcome& o) { return fmt::format("{}, {:.3f} s, {:.0f} MiB", o.result, o.seconds, o.peak_mib); };
  for (const std::string command : {"info", "analyze"}) {
    fmt::print("\ngpuxray {}\n| file | size | {}this build |\n|---|---|{}---|\n", command,
               peer.empty() ? "" : fmt::format("peer ({} GiB, {} s limit) | ", peer_gib, timeout_s),
               peer.empty() ? "" : "---|");
    for (const auto& trace : traces) {
      std::error_code ignored;
      std::string size =
          fs::is_regular_file(trace.path, ignored) ? fmt::format("{} B", fs::file_size(trace.path)) : "-";
      std::string peer_cell;
      if (!peer.empty())
        peer_cell =
            cell(run(peer, command, trace.path, static_cast<uint64_t>(peer_gib * (1ull << 30)), timeout_s)) + " | ";
      fmt::print("| {} | {} | {}{} |\n", trace.name, size, peer_cell,
                 cell(run(GPUXRAY_BINARY, command, trace.path, 0, timeout_s)));
      std::fflush(stdout);
    }
  }
  if (!keep) fs::remove_all(dir);
  return 0;
}
