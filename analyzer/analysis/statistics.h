// Small order statistics for per-step figures.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace gpuxray::analysis {

// The median (the lower middle for an even count); 0 for none.
template <typename T>
T median(std::vector<T> values) {
  if (values.empty()) return T{};
  auto middle = values.begin() + static_cast<std::ptrdiff_t>((values.size() - 1) / 2);
  std::nth_element(values.begin(), middle, values.end());
  return *middle;
}

template <typename T>
T maximum(const std::vector<T>& values) {
  return values.empty() ? T{} : *std::max_element(values.begin(), values.end());
}

}  // namespace gpuxray::analysis
