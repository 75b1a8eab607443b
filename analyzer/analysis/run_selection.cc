#include "analyzer/analysis/run_selection.h"

#include <fmt/core.h>

#include <cmath>
#include <stdexcept>

#include "analyzer/errors.h"

namespace gpuxray::analysis {
namespace {

// One side of START:END in ns; `empty` when the side is left out.
double windowSide(const std::string& part, double empty) {
  if (part.empty()) return empty;
  size_t used = 0;
  double value = std::stod(part, &used);  // throws std::invalid_argument on no number
  std::string unit = part.substr(used);
  double scale = unit.empty() || unit == "s"         ? 1e9
                 : unit == "ms"                      ? 1e6
                 : unit == "us" || unit == "\u00b5s" ? 1e3
                 : unit == "ns"                      ? 1.0
                                                     : -1.0;
  if (scale < 0 || !std::isfinite(value) || value < 0) throw std::invalid_argument(part);
  return value * scale;
}

}  // namespace

std::vector<int64_t> parseNumberList(const std::vector<std::string>& items, const char* option) {
  std::vector<int64_t> numbers;
  for (const auto& item : items) {
    size_t start = 0;
    while (start <= item.size()) {
      size_t comma = item.find(',', start);
      std::string part = item.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      start = comma == std::string::npos ? item.size() + 1 : comma + 1;
      if (part.empty()) continue;
      try {
        size_t dash = part.find('-', 1);
        size_t used = 0;
        int64_t first = std::stoll(part.substr(0, dash), &used);
        int64_t last = dash == std::string::npos ? first : std::stoll(part.substr(dash + 1));
        if (last < first || last - first > 1'000'000) throw std::invalid_argument(part);
        for (int64_t n = first; n <= last; ++n) numbers.push_back(n);
      } catch (const std::exception&) {
        throw UsageError(fmt::format("{} '{}': expected numbers and ranges such as 0,2,4-7", option, part));
      }
    }
  }
  return numbers;
}

TimeWindow parseWindow(const std::string& text) {
  try {
    size_t colon = text.find(':');
    if (colon == std::string::npos) throw std::invalid_argument(text);
    double start = windowSide(text.substr(0, colon), 0);
    double end = windowSide(text.substr(colon + 1), static_cast<double>(TimeWindow::kOpenEnd));
    if (end <= start) throw std::invalid_argument(text);
    auto clamp = [](double ns) {
      return static_cast<int64_t>(std::llround(std::min(ns, static_cast<double>(TimeWindow::kOpenEnd))));
    };
    return {clamp(start), clamp(end), text};
  } catch (const std::exception&) {
    throw UsageError(
        fmt::format("--window '{}': expected START:END from the run's first GPU activity, in s (default), ms, us or "
                    "ns, END after START, e.g. 10:20, 200ms:1.2s or 2s:",
                    text));
  }
}

RunSelection parseRunSelection(const std::vector<std::string>& ranks, const std::vector<std::string>& steps,
                               const std::string& window) {
  RunSelection selection;
  for (int64_t rank : parseNumberList(ranks, "--ranks")) selection.ranks.push_back(static_cast<int32_t>(rank));
  selection.steps = parseNumberList(steps, "--steps");
  if (!window.empty()) selection.window = parseWindow(window);
  return selection;
}

}  // namespace gpuxray::analysis
