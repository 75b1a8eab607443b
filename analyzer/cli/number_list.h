// Lists of numbers and ranges on the command line (--ranks, --steps).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gpuxray::cli {

// "0,2,4-7" -> {0, 2, 4, 5, 6, 7}; each item of `items` may hold several. Throws UsageError naming
// `option` for anything else.
std::vector<int64_t> parseNumberList(const std::vector<std::string>& items, const char* option);

}  // namespace gpuxray::cli
