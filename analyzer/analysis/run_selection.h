// The part of a run a command reads, as every command that reads a run spells it: --ranks, --steps
// and --window have one grammar and one origin (docs/analyses.md, "Choosing part of a run").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpuxray::analysis {

// --window START:END, in ns from the run's origin: the first GPU activity of any rank once the
// clocks are aligned (as recorded with --no-align).
struct TimeWindow {
  int64_t from_ns = 0;
  int64_t to_ns = 0;  // kOpenEnd when END was left empty
  std::string text;   // as given, for messages
  static constexpr int64_t kOpenEnd = 9'000'000'000'000'000'000;
};

struct RunSelection {
  std::vector<int32_t> ranks;        // empty: all
  std::vector<int64_t> steps;        // empty: all
  std::optional<TimeWindow> window;  // unset: the whole run
};

// "0,2,4-7" -> {0, 2, 4, 5, 6, 7}; each item may hold several. Throws UsageError naming `option`.
std::vector<int64_t> parseNumberList(const std::vector<std::string>& items, const char* option);

// "10:20", "1.5:4", "200ms:1.2s", "2s:", ":500us": a number with a unit (ns, us, µs, ms, s) or none
// (seconds) on either side of the colon, either side may be empty, END after START. Throws
// UsageError.
TimeWindow parseWindow(const std::string& text);

// The three options as the command line gives them. Throws UsageError naming the option.
RunSelection parseRunSelection(const std::vector<std::string>& ranks, const std::vector<std::string>& steps,
                               const std::string& window);

}  // namespace gpuxray::analysis
