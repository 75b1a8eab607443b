// Loads the trace files of one run into a RunTrace, one file per worker thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "analyzer/model/run_trace.h"

namespace gpuxray::load {

struct LoadOptions {
  bool allow_mixed_runs = false;
  // Worker threads; 0 = one per core.
  unsigned threads = 0;
  // Load only these ranks (empty: all).
  std::vector<int32_t> ranks;
  // Called after each file with (files done, files in all), from the worker that finished it.
  std::function<void(size_t, size_t)> progress;
  // Called by the worker that loaded a file, on the rank it keeps (with the stats its loading
  // counted), before that worker reads another file: the per-rank phase (analysis::Session digests
  // the rank and leaves its skeleton), so that at most `threads` ranks' events are in memory at once; a session that
  // keeps every event only weighs the rank against its memory budget there. A std::bad_alloc it throws ends the load
  // as running out of memory does. `file` is the file's place in the order the files are taken up (0, the first in
  // name order, is taken up first).
  std::function<void(model::RankTrace& rank, size_t file)> reduce;
  // Called by the worker that took up file `file` once it is done with it, whatever came of it (kept,
  // left out by `ranks`, or not a readable trace): a reduce that waits for file 0 waits for this.
  std::function<void(size_t file)> file_done;
  // Reads a digest file (kDigestFileExtension) into the rank it stands for, already reduced (the
  // session's: analysis/digest_file.h); `reduce` is not called on it. Without it a digest is skipped
  // as a file this command cannot read.
  std::function<model::RankTrace(const std::string& path, std::vector<std::string>& warnings)> read_digest;
};

// Reads every trace file under `paths` (files, or directories of *.gpuxray files and digests or of
// PyTorch-profiler traces). A file that is not a readable trace is skipped with a warning naming it; damage inside a
// file (torn tail, bad chunks, malformed JSON) and missing ranks are warnings, and whatever is intact
// is used. Files of different runs (unless allowed), a rank in two gpuxray files, or nothing usable at
// all make an InputError (of two PyTorch-profiler traces of one rank, the first is used).
model::RunTrace loadRun(const std::vector<std::string>& paths, const LoadOptions& options);

// One gpuxray or PyTorch-profiler file, on its own clock, as loadRun reads it (a PyTorch-profiler
// trace without a rank has rank -1). Throws when it is not a readable trace.
model::RankTrace loadTraceFile(const std::string& path, std::vector<std::string>& warnings);

// One file, on its own clock. Throws format::FormatError when it is not a readable trace.
model::RankTrace loadRankTrace(const std::string& path, std::vector<std::string>& warnings);

// CUPTI's synchronization kinds by the names the PyTorch profiler gives its cuda_sync events
// ("Stream Sync", "Event Sync", "Stream Wait Event", "Context Sync"), and back.
std::string_view synchronizationName(format::SynchronizationKind kind);
format::SynchronizationKind synchronizationKindNamed(std::string_view name);
// CUPTI's stream id for a synchronization that waits on no stream (event or context).
inline constexpr uint32_t kNoSynchronizationStream = 0xffffffffu;

}  // namespace gpuxray::load
