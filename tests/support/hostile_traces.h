// Hand-made trace files of the kinds a hostile user would try on `gpuxray` (issue 22): interned ids
// of 2^32 - 1 or 2^26 - 1, sizes and times that overflow, chunks that decompress to gigabytes, runs
// of false chunk headers, a world of 2^31 - 1 ranks, FIFOs and symlink loops. Each is made when asked
// for, not stored.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace gpuxray::testing {

struct HostileTrace {
  std::string name;
  // What gpuxray is given: a file, or a directory holding a valid rank beside the hostile entry.
  std::filesystem::path path;
};

// Writes every hostile trace under `dir` (which must exist), each in a directory or file of its name.
std::vector<HostileTrace> writeHostileTraces(const std::filesystem::path& dir);

// A small valid trace (20 kernels) of run "hostile": what the hostile ones are measured against.
void writeValidTrace(const std::filesystem::path& file, int rank = 0, int world_size = 1);

}  // namespace gpuxray::testing
