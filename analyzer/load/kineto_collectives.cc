#include "analyzer/load/kineto_collectives.h"

#include <algorithm>
#include <cctype>

namespace gpuxray::load {
namespace {

std::string lowercaseWithoutSeparators(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '_' || c == ' ' || c == ':') continue;
    out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  return out;
}

bool contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

}  // namespace

NcclKernelName parseNcclKernelName(std::string_view name) {
  NcclKernelName parsed;
  for (std::string_view prefix : {"ncclKernel_", "ncclDevKernel_"}) {
    size_t at = name.find(prefix);
    if (at == std::string_view::npos) continue;
    std::string_view rest = name.substr(at + prefix.size());
    rest = rest.substr(0, rest.find('('));
    std::vector<std::string_view> tokens;
    while (!rest.empty()) {
      size_t underscore = rest.find('_');
      tokens.push_back(rest.substr(0, underscore));
      rest = underscore == std::string_view::npos ? std::string_view() : rest.substr(underscore + 1);
    }
    if (tokens.empty()) return parsed;
    parsed.function = tokens[0];
    // The algorithm follows the function (ncclKernel_AllReduce_RING_LL_Sum_float) or the reduction and
    // type (ncclDevKernel_AllReduce_Sum_f32_RING_LL); the protocol follows the algorithm.
    static constexpr std::string_view kAlgorithms[] = {"COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS_TREE", "RING",
                                                       "TREE", "NVLS", "PAT", "COLLNET"};
    for (size_t i = 1; i < tokens.size() && parsed.algorithm.empty(); ++i) {
      for (std::string_view algorithm : kAlgorithms) {
        bool two_tokens = algorithm.find('_') != std::string_view::npos;
        if (two_tokens && i + 1 >= tokens.size()) continue;
        std::string candidate(tokens[i]);
        if (two_tokens) candidate += "_" + std::string(tokens[i + 1]);
        if (candidate != algorithm) continue;
        parsed.algorithm = algorithm;
        size_t next = i + (two_tokens ? 2 : 1);
        if (next < tokens.size() && (tokens[next] == "LL" || tokens[next] == "LL128" || tokens[next] == "SIMPLE"))
          parsed.protocol = tokens[next];
        break;
      }
    }
    return parsed;
  }
  return parsed;
}

std::string_view ncclFunctionOfCollective(std::string_view collective) {
  std::string c = lowercaseWithoutSeparators(collective);
  if (contains(c, "allreduce")) return "AllReduce";
  if (contains(c, "reducescatter")) return "ReduceScatter";
  if (contains(c, "allgather")) return "AllGather";
  if (contains(c, "alltoall")) return "AlltoAll";
  if (contains(c, "broadcast")) return "Broadcast";
  if (contains(c, "barrier")) return "AllReduce";  // c10d's barrier is a one-element all-reduce
  if (c == "reduce") return "Reduce";
  if (contains(c, "gather")) return "Gather";
  if (contains(c, "scatter")) return "Scatter";
  if (contains(c, "send")) return "Send";
  if (contains(c, "recv")) return "Recv";
  return {};
}

uint32_t dtypeSize(std::string_view dtype) {
  std::string d = lowercaseWithoutSeparators(dtype);
  if (d.starts_with("c10")) d = d.substr(3);
  if (d.starts_with("torch.")) d = d.substr(6);
  struct Size {
    std::string_view name;
    uint32_t bytes;
  };
  // Longest names first, so that "float8e4m3fn" is not read as "float".
  static constexpr Size kSizes[] = {
      {"complexdouble", 16}, {"complexfloat", 8}, {"complexhalf", 4}, {"bfloat16", 2}, {"float16", 2},
      {"float64", 8}, {"float32", 4}, {"float8", 1}, {"double", 8}, {"float", 4}, {"half", 2},
      {"uint64", 8}, {"uint32", 4}, {"uint16", 2}, {"uint8", 1}, {"int64", 8}, {"int32", 4}, {"int16", 2},
      {"int8", 1}, {"long", 8}, {"int", 4}, {"short", 2}, {"byte", 1}, {"char", 1}, {"bool", 1},
      {"qint8", 1}, {"quint8", 1}, {"qint32", 4}, {"unsignedchar", 1},
  };
  for (const Size& size : kSizes) {
    if (d.starts_with(size.name)) return size.bytes;
  }
  return 0;
}

std::vector<int32_t> parseRankList(std::string_view text) {
  std::vector<int32_t> ranks;
  int64_t value = 0;
  bool in_number = false;
  for (char c : text) {
    if (c >= '0' && c <= '9') {
      value = std::min<int64_t>(value * 10 + (c - '0'), INT32_MAX);
      in_number = true;
    } else if (in_number) {
      ranks.push_back(static_cast<int32_t>(value));
      value = 0;
      in_number = false;
    }
  }
  if (in_number) ranks.push_back(static_cast<int32_t>(value));
  return ranks;
}

uint64_t processGroupHash(std::string_view group_name) {
  uint64_t h = 1469598103934665603ull;
  for (char c : std::string_view("pytorch-process-group:")) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  for (char c : group_name) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return h;
}

}  // namespace gpuxray::load
