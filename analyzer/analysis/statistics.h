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

// The nearest-rank percentile (0 < p <= 100); 0 for none.
template <typename T>
T percentile(std::vector<T> values, double p) {
  if (values.empty()) return T{};
  size_t rank = static_cast<size_t>(p / 100.0 * static_cast<double>(values.size()) + 0.999999);
  auto at = values.begin() + static_cast<std::ptrdiff_t>(std::clamp<size_t>(rank, 1, values.size()) - 1);
  std::nth_element(values.begin(), at, values.end());
  return *at;
}

template <typename T>
T maximum(const std::vector<T>& values) {
  return values.empty() ? T{} : *std::max_element(values.begin(), values.end());
}

}  // namespace gpuxray::analysis
