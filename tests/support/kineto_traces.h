// Hand-made PyTorch-profiler (Kineto) traces for the importer's tests, and the real ones in
// ../shared/traces (next to the project; absent there, the tests that need them are skipped, and
// fail when the environment variable CI is set: CI must not pass by skipping them).
#pragma once

#include <fmt/format.h>
#include <zlib.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

namespace gpuxray::testing {

inline void writeText(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

// Gzip members, one per part (concatenated, as `cat a.gz b.gz` gives).
inline void writeGzip(const std::filesystem::path& path, const std::vector<std::string>& parts) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary);
  for (const auto& part : parts) {
    z_stream z{};
    deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
    std::string compressed(deflateBound(&z, part.size()) + 64, '\0');
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(part.data()));
    z.avail_in = static_cast<uInt>(part.size());
    z.next_out = reinterpret_cast<Bytef*>(compressed.data());
    z.avail_out = static_cast<uInt>(compressed.size());
    deflate(&z, Z_FINISH);
    compressed.resize(z.total_out);
    deflateEnd(&z);
    out << compressed;
  }
}

inline std::string kernelEvent(const std::string& name, const std::string& ts, const std::string& dur, int stream,
                               int correlation, const std::string& extra_args = "") {
  return fmt::format(R"({{"ph": "X", "cat": "kernel", "name": "{}", "pid": 0, "tid": {}, "ts": {}, "dur": {},
  "args": {{"External id": {}, "device": 0, "stream": {}, "correlation": {}, "registers per thread": 32,
  "shared memory": 1024, "grid": [108, 1, 1], "block": [256, 1, 1]{}}}}})",
                     name, stream, ts, dur, correlation, stream, correlation, extra_args);
}

inline std::string launchEvent(const std::string& ts, int correlation, const std::string& name = "cudaLaunchKernel") {
  return fmt::format(R"({{"ph": "X", "cat": "cuda_runtime", "name": "{}", "pid": 7, "tid": 7, "ts": {}, "dur": 4,
  "args": {{"cbid": 211, "correlation": {}}}}})",
                     name, ts, correlation);
}

inline std::filesystem::path sharedTracesRoot() {
  return std::filesystem::path(GPUXRAY_SOURCE_DIR).parent_path() / "shared" / "traces";
}

// The shared real traces: <source>/../shared/traces/<name>. When it is not there the test is
// skipped with a warning (nullopt), or fails when CI is set. Every test that reads them asks here.
inline std::optional<std::filesystem::path> sharedTraces(const std::string& name) {
  auto dir = sharedTracesRoot() / name;
  if (std::filesystem::is_directory(dir)) return dir;
  if (std::getenv("CI") != nullptr) FAIL("../shared/traces/" << name << " is not next to the project, and CI is set");
  WARN("skipped: ../shared/traces/" << name << " is not next to the project");
  return std::nullopt;
}

}  // namespace gpuxray::testing
