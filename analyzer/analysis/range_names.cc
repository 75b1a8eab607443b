#include "analyzer/analysis/range_names.h"

#include <algorithm>
#include <array>

namespace gpuxray::analysis {
namespace {

// emit_nvtx appends these to the op's name, in this order, each only when it has a value
// (torch/csrc/profiler/util.cpp, getNvtxStr).
constexpr std::array<std::string_view, 4> kDecorations = {", seq = ", ", op_id = ", ", sizes = ", ", input_op_ids = "};

bool digitsOnly(std::string_view text) {
  if (text.empty()) return false;
  for (char c : text)
    if (c < '0' || c > '9') return false;
  return true;
}

}  // namespace

RangeName splitRangeName(std::string_view recorded) {
  // The op name ends at the first decoration; a name that merely contains ", seq = " is an op
  // name only when what follows is emit_nvtx's grammar (a number after seq or op_id).
  size_t first = std::string_view::npos;
  for (std::string_view d : kDecorations) first = std::min(first, recorded.find(d));
  if (first == std::string_view::npos || first == 0) return {recorded, {}};
  RangeName split{recorded.substr(0, first), {}};
  std::string_view rest = recorded.substr(first);
  for (size_t i = 0; i < kDecorations.size() && !rest.empty(); ++i) {
    if (!rest.starts_with(kDecorations[i])) continue;
    rest.remove_prefix(kDecorations[i].size());
    size_t end = rest.size();
    for (size_t next = i + 1; next < kDecorations.size(); ++next) end = std::min(end, rest.find(kDecorations[next]));
    std::string_view value = rest.substr(0, end);
    if (i < 2 && !digitsOnly(value)) return {recorded, {}};
    if (i == 2) split.sizes = value;
    rest.remove_prefix(end);
  }
  return rest.empty() ? split : RangeName{recorded, {}};
}

std::string foldedRangeName(std::string_view recorded) {
  std::string_view name = splitRangeName(recorded).op;
  size_t end = name.size();
  while (end > 0 && name[end - 1] >= '0' && name[end - 1] <= '9') --end;
  return end < name.size() && end > 0 ? std::string(name.substr(0, end)) + "N" : std::string(name);
}

}  // namespace gpuxray::analysis
