// Reads PyTorch-profiler (Kineto) JSON traces, *.json or *.json.gz, one per rank, into the model the
// native format fills (docs/analyses.md, "PyTorch-profiler traces"): kernels, copies, memsets and
// cuda_sync events on their streams; runtime and driver calls as launches; record_function ranges
// and ProfilerStep#N as NVTX-like ranges; NCCL kernels with their collective arguments as NCCL
// operations; distributedInfo's process groups as communicators; deviceProperties as devices.
//
// The text is streamed: it is inflated and cut into runs of events block by block, and each run is
// parsed with simdjson's on-demand parser, so neither the whole text nor a document tree is held.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "analyzer/load/kineto_event.h"
#include "analyzer/model/run_trace.h"

namespace gpuxray::load {

struct KinetoImportStats {
  uint64_t file_bytes = 0;  // on disk (compressed or not)
  uint64_t json_bytes = 0;  // the JSON text
  uint64_t events = 0;
  // Events per category (KinetoCategory), of those that were read.
  std::array<uint64_t, static_cast<size_t>(KinetoCategory::kUnknown) + 1> by_category{};
  uint64_t flows = 0;
  uint64_t malformed = 0;       // events that are not valid JSON objects
  uint64_t missing_fields = 0;  // events without a field gpuxray needs (ts, dur, stream)
  bool truncated = false;       // the text or its compressed stream ended early
};

const char* kinetoCategoryName(KinetoCategory category);

// Whether a file name is that of a PyTorch-profiler trace: *.json or *.json.gz.
bool isKinetoTraceName(const std::string& path);

// One trace file. Problems inside it (malformed or truncated JSON, events missing fields, unknown
// categories, no distributedInfo) are counted and reported in `warnings`, one line each naming the
// file, and whatever is intact is used. Throws InputError when the file holds no usable trace.
// The rank comes from distributedInfo (-1 without it: loadRun assigns one).
model::RankTrace importKinetoTrace(const std::string& path, std::vector<std::string>& warnings,
                                   KinetoImportStats* stats = nullptr);

}  // namespace gpuxray::load
