#include "analyzer/model/nccl_conventions.h"

namespace gpuxray::model {

NcclFunction ncclFunction(std::string_view name) {
  if (name == "AllReduce") return NcclFunction::kAllReduce;
  if (name == "AllGather") return NcclFunction::kAllGather;
  if (name == "ReduceScatter") return NcclFunction::kReduceScatter;
  if (name == "Broadcast") return NcclFunction::kBroadcast;
  if (name == "Reduce") return NcclFunction::kReduce;
  if (name == "AlltoAll" || name == "AllToAll") return NcclFunction::kAlltoAll;
  if (name == "Gather") return NcclFunction::kGather;
  if (name == "Scatter") return NcclFunction::kScatter;
  if (name == "Send") return NcclFunction::kSend;
  if (name == "Recv") return NcclFunction::kRecv;
  if (name == "SendRecv") return NcclFunction::kSendRecv;
  return NcclFunction::kOther;
}

std::optional<BusBandwidthRule> busBandwidthRule(NcclFunction function, uint64_t bytes, int32_t nranks) {
  if (nranks < 1) return std::nullopt;
  const double size = static_cast<double>(bytes);
  const double n = nranks;
  const double spread = (n - 1) / n;
  switch (function) {
    case NcclFunction::kAllReduce:
      return BusBandwidthRule{size, 2 * spread};
    case NcclFunction::kAllGather:
    case NcclFunction::kReduceScatter:
    case NcclFunction::kGather:
    case NcclFunction::kScatter:
      return BusBandwidthRule{size * n, spread};
    case NcclFunction::kAlltoAll:
      return BusBandwidthRule{size, spread};
    case NcclFunction::kBroadcast:
    case NcclFunction::kReduce:
    case NcclFunction::kSend:
    case NcclFunction::kRecv:
    case NcclFunction::kSendRecv:
    case NcclFunction::kOther:
      break;
  }
  return BusBandwidthRule{size, 1};
}

std::optional<double> ringBytesPerLink(NcclFunction function, uint64_t bytes, int32_t nranks) {
  switch (function) {
    case NcclFunction::kAllReduce:
    case NcclFunction::kAllGather:
    case NcclFunction::kReduceScatter:
    case NcclFunction::kBroadcast:
    case NcclFunction::kReduce: {
      auto rule = busBandwidthRule(function, bytes, nranks);
      if (!rule) return std::nullopt;
      return rule->busBytes();
    }
    default:
      return std::nullopt;
  }
}

double ringSteps(NcclFunction function, int32_t nranks) {
  const double hops = nranks > 1 ? nranks - 1 : 0;
  return function == NcclFunction::kAllReduce ? 2 * hops : hops;
}

}  // namespace gpuxray::model
