#include "analyzer/model/communication_kernels.h"

#include <array>
#include <deque>
#include <regex>
#include <string>

namespace gpuxray::model {
namespace {

bool contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

constexpr CommunicationKernelFamily kNccl{"NCCL / RCCL", "", true};
constexpr CommunicationKernelFamily kMsccl{"MSCCL (RCCL)", "", true};
constexpr CommunicationKernelFamily kDeepEpIntranode{"DeepEP intranode", "", false};
constexpr CommunicationKernelFamily kDeepEpInternode{"DeepEP internode", "", false};
constexpr CommunicationKernelFamily kDeepEpLowLatency{"DeepEP low-latency", "", false};
constexpr CommunicationKernelFamily kNvshmem{"NVSHMEM", "", false};
constexpr CommunicationKernelFamily kMscclpp{"MSCCL++", "", false};
constexpr CommunicationKernelFamily kCustomAllReduce{"custom all-reduce (vLLM, SGLang, aiter)", "AllReduce", false};
constexpr CommunicationKernelFamily kTrtAllReduce{"custom all-reduce (TensorRT-LLM, SGLang)", "AllReduce", false};
constexpr CommunicationKernelFamily kSymmetricMemory{"PyTorch symmetric memory", "AllReduce", false};

struct NamePart {
  std::string_view part;
  const CommunicationKernelFamily* family;
};

// In the order they are tried; each part is looked for anywhere in the (demangled) kernel name.
constexpr std::array kNameParts{
    NamePart{"ncclKernel", &kNccl},
    NamePart{"ncclDevKernel", &kNccl},
    NamePart{"mscclKernel_", &kMsccl},
    NamePart{"deep_ep::intranode::", &kDeepEpIntranode},
    NamePart{"deep_ep::internode_ll::", &kDeepEpLowLatency},
    NamePart{"deep_ep::internode::", &kDeepEpInternode},
    NamePart{"nvshmem", &kNvshmem},
    NamePart{"mscclpp::", &kMscclpp},
    NamePart{"cross_device_reduce_1stage", &kCustomAllReduce},
    NamePart{"cross_device_reduce_2stage", &kCustomAllReduce},
    NamePart{"oneShotAllReduceKernel", &kTrtAllReduce},
    NamePart{"twoShotAllReduceKernel", &kTrtAllReduce},
    NamePart{"multimem_all_reduce_kernel", &kSymmetricMemory},
};

bool isPlainName(std::string_view text) {
  if (text.empty()) return false;
  for (char c : text) {
    bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == ' ';
    if (!ok) return false;
  }
  return true;
}

struct UserFamily {
  std::regex expression;
  std::string library, operation;
  CommunicationKernelFamily family;
};

// A deque: the families' string views point into its elements, which never move.
std::deque<UserFamily>& userFamilies() {
  static std::deque<UserFamily> families;
  return families;
}

}  // namespace

const CommunicationKernelFamily* communicationFamilyOf(std::string_view name) {
  for (const UserFamily& user : userFamilies()) {
    if (std::regex_search(name.begin(), name.end(), user.expression)) return &user.family;
  }
  if (name.starts_with("nccl")) return &kNccl;  // NCCL's own names before 2.19 and RCCL's
  for (const NamePart& p : kNameParts) {
    if (contains(name, p.part)) return p.family;
  }
  return nullptr;
}

std::string communicationOperationOf(std::string_view name) {
  const CommunicationKernelFamily* family = communicationFamilyOf(name);
  if (family == nullptr) return {};
  if (family == &kDeepEpIntranode || family == &kDeepEpInternode || family == &kDeepEpLowLatency) {
    // deep_ep::intranode::dispatch<...>, cached_notify_combine, internode_ll::clean_low_latency_buffer...
    std::string_view function = name.substr(name.find("deep_ep::"));
    function = function.substr(0, function.find_first_of("<("));
    if (contains(function, "notify") || contains(function, "clean")) return "EP notify";
    if (contains(function, "dispatch")) return "EP dispatch";
    if (contains(function, "combine")) return "EP combine";
    return {};
  }
  return std::string(family->operation);
}

std::string addUserCommunicationKernel(const std::string& text) {
  std::string pattern = text, operation;
  size_t equals = text.rfind('=');
  if (equals != std::string::npos && equals > 0 && isPlainName(std::string_view(text).substr(equals + 1))) {
    pattern = text.substr(0, equals);
    operation = text.substr(equals + 1);
  }
  if (pattern.empty()) return "--comm-kernel needs a regular expression before '='";
  try {
    UserFamily& user = userFamilies().emplace_back();
    user.expression = std::regex(pattern, std::regex::ECMAScript | std::regex::optimize);
    user.library = "--comm-kernel " + pattern;
    user.operation = operation;
    user.family = {user.library, user.operation, false};
  } catch (const std::regex_error& e) {
    userFamilies().pop_back();
    return "--comm-kernel '" + pattern + "' is not a valid regular expression (" + e.what() + ")";
  }
  return {};
}

void clearUserCommunicationKernels() {
  userFamilies().clear();
}

}  // namespace gpuxray::model
