#include "analyzer/cli/number_list.h"

#include <fmt/core.h>

#include <stdexcept>

#include "analyzer/errors.h"

namespace gpuxray::cli {

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

}  // namespace gpuxray::cli
