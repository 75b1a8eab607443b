// What a host range is called across its instances. A range's recorded name can carry what changes
// from one call to the next: a trailing number ("ProfilerStep#12", "forward#3"), or, from PyTorch's
// `torch.autograd.profiler.emit_nvtx`, the call's decorations ("aten::linear, seq = 954, op_id = 12,
// sizes = [[8, 512], [512, 512], []], input_op_ids = [(11, 0)]"). The analyses that merge ranges by
// name (the op tree, the memory phases, the activity totals) merge by these folded names.
#pragma once

#include <string>
#include <string_view>

namespace gpuxray::analysis {

// An emit_nvtx range's op name and its input shapes (`sizes`, present with record_shapes); a
// name without emit_nvtx's decorations is its own op name, with no sizes.
struct RangeName {
  std::string_view op;
  std::string_view sizes;
};
RangeName splitRangeName(std::string_view recorded);

// The op name with a trailing number folded: "ProfilerStep#12" -> "ProfilerStep#N",
// "aten::linear, seq = 954, op_id = 12" -> "aten::linear".
std::string foldedRangeName(std::string_view recorded);

}  // namespace gpuxray::analysis
