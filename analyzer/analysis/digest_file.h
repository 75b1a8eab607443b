// A rank's digest as a file (`gpuxray digest`, docs/digest-format.md): what the per-rank phase keeps
// of one trace file (its RankDigest and its skeleton, the rank trace without its events, with the
// stats its loading counted), so that the cross-rank phase can run on the digests of a run without
// reading its traces again.
//
//   preamble (16 bytes): "GXDIGST\n", u32 digest format version, u32 reserved (0)
//   chunk*             : trace files' chunk framing (proto/file_layout.h: sync word, sizes, codec,
//                        CRC-32C); the first chunk holds the header, the others the body, cut in pieces
//
// The header says who made the digest (gpuxray's version), of which run, rank and file, with which
// analysis options, and how long the body is; a reader refuses a digest of another format or
// gpuxray version, one whose body does not add up, and one damaged anywhere.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "analyzer/analysis/analysis_input.h"
#include "analyzer/analysis/rank_digest.h"
#include "analyzer/load/run_files.h"
#include "analyzer/model/run_trace.h"

namespace gpuxray::analysis {

using load::kDigestFileExtension;  // ".gxdigest"
// Raised with every change to what a digest holds or how it is laid out.
inline constexpr uint32_t kDigestFormatVersion = 4;

struct DigestFileHeader {
  uint32_t format_version = kDigestFormatVersion;
  std::string gpuxray_version;
  std::string run_id;
  int32_t rank = -1;
  int32_t world_size = 0;
  std::string source_path;           // the trace file, as it was named to `gpuxray digest`
  std::string source_absolute_path;  // the same, absolute: where the trace is read again from
  // The analysis options the digest was made with (digestOptionsText); a session with others reads
  // the trace again.
  std::string options;
  uint64_t body_bytes = 0;
};

struct DigestFile {
  DigestFileHeader header;
  model::RankTrace skeleton;  // with its loading stats (and their warning lines)
  RankDigest digest;
};

// The analysis options a digest depends on, as one line: the step markers, --comm-kernel's
// patterns, --compat hta and --include-last-step, --steps.
std::string digestOptionsText(const AnalysisOptions& options, const std::vector<std::string>& comm_kernels);

// `<trace file name>.gxdigest`: the digests of a directory sort as its traces do.
std::string digestFileName(const std::string& source_path);
bool isDigestFileName(std::string_view path);

// Writes the digest of `skeleton` (whose path is the source trace) under `path`. Throws InputError
// naming the file when it cannot be written.
void writeDigestFile(const std::string& path, const model::RankTrace& skeleton, const RankDigest& digest,
                     const std::string& options);

// Reads a digest. Throws InputError (one line, naming the file) when it is not a digest, is
// damaged or cut short, or was made by another gpuxray or digest format version.
DigestFile readDigestFile(const std::string& path);

}  // namespace gpuxray::analysis
