// The grammar of capture windows, shared by `gpuxray run` (which refuses a bad value with an error)
// and the injection library (which warns and keeps the default): one home for the rule. Also how
// a window's edges are named in the file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gpuxray::format {

// "10s", "500ms", "250us", "100ns", "2m", "1h", "1.5s"; a bare number is seconds. nullopt for
// anything else (negative, empty, unknown unit, overflow).
std::optional<uint64_t> parseDurationNs(std::string_view text);

struct CaptureRange {
  // kTrigger: only `gpuxray trigger` opens windows.
  enum class Kind { kNone, kProfilerApi, kNvtx, kTrigger };
  Kind kind = Kind::kNone;
  // kNvtx: the range's message, and its domain ("" = NVTX's default domain).
  std::string nvtx_name;
  std::string nvtx_domain;
};

// "cudaProfilerApi", "nvtx:NAME[@DOMAIN]" or "trigger"; on failure returns what was expected.
std::optional<std::string> parseCaptureRange(std::string_view text, CaptureRange& out);

// "A-B" with 0 <= A <= B, or "A" (one step); on failure returns what was wrong.
std::optional<std::string> parseStepRange(std::string_view text, int64_t& first, int64_t& last);

// `gpuxray trigger` and a capturing process talk through files in the output directory, named by
// the process's pid: the process keeps a live marker while it captures ("rank=R\nhost=H\n"); the
// trigger writes a request (the window's duration in ns, as text), which the process takes within
// about 50 ms and answers with one line in the acknowledgement file.
std::string liveMarkerName(uint32_t pid);
std::string triggerRequestName(uint32_t pid);
std::string triggerAckName(uint32_t pid);
// The pid of a live marker's file name, or 0.
uint32_t pidOfLiveMarker(std::string_view file_name);

}  // namespace gpuxray::format
