// Import speed and peak memory of the PyTorch-profiler importer, and the whole `gpuxray analyze
// --compat hta` run, on the shared real traces and on a large trace generated from a real one.
//
//   kineto_benchmark [--traces DIR] [--size-mb N] [--dir DIR] [--no-gzip] [--keep]
//
// --traces: the shared traces (default: ../shared/traces next to the source). The large trace
// repeats hta_nccl_data_rank0_of2's events, shifted in time and with fresh correlation ids, until
// its JSON reaches --size-mb (default 1024), written plain and gzipped (level 1).
// Import speed is measured in this process (best of 3): MB of JSON per second of wall time and per
// second of CPU time (the importer inflates gzip on a second thread), and events per second. Peak
// memory is that of `gpuxray info FILE` (which imports the file fully) as a child process, as a
// multiple of the JSON's size. Targets (reported, not enforced): >= 200 MB/s of JSON per core, peak
// memory <= 1x the JSON, and --compat hta on a shared set >= 20x faster than HTA's 0.6 s.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>
#include <cctype>
#include <string>
#include <vector>

#include "analyzer/load/byte_input.h"
#include "analyzer/load/json_event_splitter.h"
#include "analyzer/load/kineto_importer.h"
#include "tests/benchmarks/measured_child.h"

namespace {

namespace fs = std::filesystem;
using gpuxray::load::ByteInput;
using gpuxray::load::JsonEventSplitter;

struct Options {
  fs::path traces = fs::path(GPUXRAY_SOURCE_DIR).parent_path() / "shared" / "traces";
  uint64_t size_mb = 1024;
  fs::path dir = fs::temp_directory_path() / "gpuxray-kineto-benchmark";
  bool gzip = true;
  bool keep = false;
};

double cpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

struct Import {
  double wall = 1e30, cpu = 1e30;
  uint64_t json_bytes = 0, file_bytes = 0, events = 0;
};

Import importBest(const std::vector<fs::path>& files, int repeats) {
  Import best;
  for (int r = 0; r < repeats; ++r) {
    Import run;
    auto started = std::chrono::steady_clock::now();
    double cpu_started = cpuSeconds();
    for (const auto& file : files) {
      std::vector<std::string> warnings;
      gpuxray::load::KinetoImportStats stats;
      gpuxray::load::importKinetoTrace(file.string(), warnings, &stats);
      run.json_bytes += stats.json_bytes;
      run.file_bytes += stats.file_bytes;
      run.events += stats.events;
    }
    run.wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    run.cpu = cpuSeconds() - cpu_started;
    if (run.wall < best.wall) best = run;
  }
  return best;
}

using Child = gpuxray::benchmarks::ChildRun;

Child runGpuxray(const std::vector<std::string>& args) {
  std::vector<std::string> argv{GPUXRAY_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  return gpuxray::benchmarks::runMeasured(std::move(argv), gpuxray::benchmarks::ChildStderr::kDiscarded);
}

std::vector<fs::path> traceFiles(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (gpuxray::load::isKinetoTraceName(entry.path().string())) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// Adds `shift` to the number after `"key": ` in an event's text (keeping three decimals for times).
void shiftNumber(std::string& event, std::string_view key, double shift, bool time) {
  size_t at = event.find(key);
  if (at == std::string::npos) return;
  size_t start = at + key.size();
  while (start < event.size() && event[start] == ' ') ++start;
  size_t end = start;
  while (end < event.size() && (std::isdigit(static_cast<unsigned char>(event[end])) || event[end] == '.' || event[end] == '-')) ++end;
  if (end == start) return;
  double value = std::stod(event.substr(start, end - start)) + shift;
  event.replace(start, end - start, time ? fmt::format("{:.3f}", value) : fmt::format("{}", static_cast<int64_t>(value)));
}

// The large trace: the source's members, then its events again and again.
uint64_t generate(const fs::path& source, const fs::path& out, uint64_t target_bytes) {
  std::string head = "{";
  std::vector<std::string> events;
  double first = 1e300, last = 0;
  {
    ByteInput input(source.string());
    JsonEventSplitter splitter(input);
    JsonEventSplitter::Piece piece;
    while (splitter.next(piece)) {
      if (piece.kind == JsonEventSplitter::Piece::Kind::kMember) {
        head += fmt::format("\"{}\": {}, ", piece.key, std::string(piece.begin, piece.end));
        continue;
      }
      for (const auto& [from, to] : piece.events) {
        events.emplace_back(piece.begin + from, to - from);
        const std::string& e = events.back();
        size_t at = e.find("\"ts\": ");
        if (at != std::string::npos) {
          double ts = std::stod(e.substr(at + 6, 24));
          first = std::min(first, ts), last = std::max(last, ts);
        }
      }
    }
  }
  std::ofstream file(out, std::ios::binary);
  file << head << "\"traceEvents\": [\n";
  uint64_t written = head.size() + 20;
  double period = last - first + 1000;
  for (int copy = 0; written < target_bytes; ++copy) {
    for (const auto& original : events) {
      std::string e = original;
      if (copy > 0) {
        shiftNumber(e, "\"ts\":", period * copy, true);
        shiftNumber(e, "\"correlation\":", 1e7 * copy, false);
        shiftNumber(e, "\"External id\":", 1e7 * copy, false);
        if (e.find("\"ac2g\"") != std::string::npos) shiftNumber(e, "\"id\":", 1e7 * copy, false);
      }
      file << (written > head.size() + 20 ? ",\n  " : "  ") << e;
      written += e.size() + 4;
      if (written >= target_bytes) break;
    }
  }
  file << "\n]}\n";
  return written;
}

void gzipFile(const fs::path& in, const fs::path& out) {
  std::ifstream source(in, std::ios::binary);
  gzFile zipped = gzopen(out.c_str(), "wb1");
  std::vector<char> buffer(1 << 20);
  while (source) {
    source.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    if (source.gcount() > 0) gzwrite(zipped, buffer.data(), static_cast<unsigned>(source.gcount()));
  }
  gzclose(zipped);
}

void reportImport(const std::string& label, const Import& i, const Child& peak) {
  double mb = static_cast<double>(i.json_bytes) / 1e6;
  fmt::print("{:<34} {:>9.1f} MB JSON {:>8.1f} MB file  {:>7.0f} MB/s  {:>7.0f} MB/s/CPU  {:>6.2f} M events/s  "
             "peak {:>7.1f} MB = {:.2f}x JSON\n",
             label, mb, static_cast<double>(i.file_bytes) / 1e6, mb / i.wall, mb / i.cpu,
             static_cast<double>(i.events) / i.wall / 1e6, static_cast<double>(peak.peak_bytes) / 1e6,
             static_cast<double>(peak.peak_bytes) / static_cast<double>(i.json_bytes));
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
    if (arg == "--traces") options.traces = value();
    else if (arg == "--size-mb") options.size_mb = std::stoull(value());
    else if (arg == "--dir") options.dir = value();
    else if (arg == "--no-gzip") options.gzip = false;
    else if (arg == "--keep") options.keep = true;
    else throw std::invalid_argument("unknown option " + arg);
  }
  fmt::print("kineto_benchmark: {} cores; build {}\n", std::thread::hardware_concurrency(), GPUXRAY_BUILD_TYPE);
  const std::vector<std::string> sets = {"hta_sampled_2rank", "hta_nccl_data_rank0_of2", "tracelens_b200_rank0_of8"};
  for (const auto& set : sets) {
    fs::path dir = options.traces / set;
    if (!fs::is_directory(dir)) {
      fmt::print("{}: not found, skipped\n", dir.string());
      continue;
    }
    auto files = traceFiles(dir);
    Import imported = importBest(files, 5);
    std::vector<std::string> info_args = {"info"};
    for (const auto& f : files) info_args.push_back(f.string());
    reportImport(set + " (gzip)", imported, runGpuxray(info_args));
    double best = 1e30;
    for (int r = 0; r < 5; ++r) best = std::min(best, runGpuxray({"analyze", "--compat", "hta", dir.string()}).seconds);
    fmt::print("{:<34} analyze --compat hta: {:.3f} s (best of 5, whole process) = {:.0f}x faster than HTA's 0.6 s\n", "",
               best, 0.6 / best);
  }

  fs::path source = options.traces / "hta_nccl_data_rank0_of2" / "nccl_data.json.gz";
  if (!fs::exists(source)) return 0;
  fs::create_directories(options.dir);
  fs::path plain = options.dir / "large_rank-0.json";
  auto started = std::chrono::steady_clock::now();
  uint64_t bytes = generate(source, plain, options.size_mb << 20);
  fmt::print("generated {} ({:.0f} MB) in {:.1f} s\n", plain.string(), static_cast<double>(bytes) / 1e6,
             std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  reportImport("large (plain JSON)", importBest({plain}, 2), runGpuxray({"info", plain.string()}));
  if (options.gzip) {
    fs::path zipped = options.dir / "large_rank-0.json.gz";
    gzipFile(plain, zipped);
    reportImport("large (gzip level 1)", importBest({zipped}, 2), runGpuxray({"info", zipped.string()}));
  }
  if (!options.keep) fs::remove_all(options.dir);
  return 0;
}
