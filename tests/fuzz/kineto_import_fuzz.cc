// libFuzzer target for the PyTorch-profiler importer: any bytes (plain or gzip) must give a trace or
// an InputError naming the file, never a crash, a hang or a sanitizer report.
//
//   scripts/fuzz.sh [SECONDS]     builds it with clang (ASan, UBSan) and runs it on tests/fuzz/corpus
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "analyzer/errors.h"
#include "analyzer/load/kineto_importer.h"

namespace {

// The importer reads files: each input goes through one, in memory where /dev/shm allows.
const std::string& scratchPath() {
  static const std::string path = [] {
    std::string dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    return dir + "/gpuxray-fuzz-" + std::to_string(getpid()) + ".json";
  }();
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FILE* file = std::fopen(scratchPath().c_str(), "wb");
  if (file == nullptr) return 0;
  std::fwrite(data, 1, size, file);
  std::fclose(file);
  std::vector<std::string> warnings;
  try {
    gpuxray::model::RankTrace rank = gpuxray::load::importKinetoTrace(scratchPath(), warnings);
    // What the analyses rely on: activities by start, launches by correlation, valid indices.
    for (size_t i = 1; i < rank.activities.size(); ++i) {
      if (rank.activities[i].start_ns < rank.activities[i - 1].start_ns) std::abort();
    }
    for (const auto& a : rank.activities) {
      if (a.stream >= rank.streams.size() || a.name_id >= rank.strings.size() || a.end_ns < a.start_ns) std::abort();
    }
    for (size_t i = 1; i < rank.host_calls.size(); ++i) {
      if (rank.host_calls[i].correlation_id < rank.host_calls[i - 1].correlation_id) std::abort();
    }
  } catch (const gpuxray::InputError&) {
  }
  return 0;
}
