// Finding the trace files of a run and checking that they belong together.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "analyzer/model/run_trace.h"
#include "proto/records.h"

namespace gpuxray::load {

// A rank's digest (`gpuxray digest`, analysis/digest_file.h): found with the traces, read by the
// session's LoadOptions::read_digest.
inline constexpr std::string_view kDigestFileExtension = ".gxdigest";

struct TraceFileSet {
  std::vector<std::string> files;
  // A directory was named: it is expected to hold the whole run, so missing ranks are reported.
  bool from_directory = false;
  // Entries of a directory that look like traces but cannot be read (symlink loops, FIFOs, devices).
  std::vector<std::string> warnings;
  report::Stats stats;  // the warnings' stats
};

// Files as given; directories contribute their *.gpuxray and *.gxdigest files (not recursively),
// sorted by name, or when they hold none, their PyTorch-profiler traces (*.json, *.json.gz); entries
// that are not regular files are skipped with a warning. Throws InputError for a path that does not exist or a
// directory without trace files.
TraceFileSet discoverTraceFiles(const std::vector<std::string>& paths);

// What a file holds: a gpuxray trace (it starts with the format's magic), else a PyTorch-profiler
// trace when its name says so (*.json, *.json.gz). Anything else is taken as a (damaged) gpuxray file.
model::SourceFormat traceFileFormat(const std::string& path);

struct RankedFile {
  std::string path;
  const format::FileHeader* header;
};

struct RunProblems {
  // The files cannot be analyzed as one run: several run ids (unless allowed), a rank twice.
  std::vector<std::string> errors;
  // They can, with gaps: ranks missing from the world.
  std::vector<std::string> warnings;
  report::Stats stats;  // the warnings' stats
};

RunProblems checkRunMembership(const std::vector<RankedFile>& files, bool allow_mixed_runs, bool report_missing_ranks);

}  // namespace gpuxray::load
