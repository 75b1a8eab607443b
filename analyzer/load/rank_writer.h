// Writes one rank of the model as a gpuxray trace file (what `gpuxray convert` does with PyTorch-
// profiler traces): every record the model keeps, so that loading the file gives the same rank back
// and every analysis, --compat hta included, the same figures. Much smaller and faster to load
// than the JSON it came from.
#pragma once

#include <cstdint>
#include <string>

#include "analyzer/model/run_trace.h"

namespace gpuxray::load {

struct WrittenFile {
  uint64_t bytes = 0;
  uint64_t records = 0;
};

// Throws InputError when the file cannot be written.
WrittenFile writeRankTrace(const model::RankTrace& rank, const std::string& path, const std::string& converted_from);

}  // namespace gpuxray::load
