// Which GPU kernels move data between GPUs: NCCL's and RCCL's kernels, and the communication
// libraries that launch kernels of their own (DeepEP, NVSHMEM, MSCCL++, the custom all-reduce of
// vLLM, SGLang and TensorRT-LLM). One home for the rule; docs/analyses.md gives the evidence for
// each name. `--compat hta` does not use it: it keeps HTA's own rule (hta_compat.cc).
#pragma once

#include <string>
#include <string_view>

namespace gpuxray::model {

struct CommunicationKernelFamily {
  std::string_view library;  // "NCCL / RCCL", "DeepEP intranode", ...
  // The operation every kernel of the family performs ("AllReduce", "dispatch"...); empty when the
  // kernel's own name tells it (NCCL's) or only its caller does (RCCL's Generic kernel, MSCCL).
  std::string_view operation;
  // Whether the family's kernels are NCCL's or RCCL's, which the importer turns into NCCL operations.
  bool nccl = false;
};

// The family of a kernel name; nullptr when it is not a communication kernel gpuxray knows.
const CommunicationKernelFamily* communicationFamilyOf(std::string_view kernel_name);

// The operation a communication kernel performs, as far as its name tells: the family's, or for
// DeepEP the phase in the name (dispatch, combine, notify). Empty when only the caller knows it.
std::string communicationOperationOf(std::string_view kernel_name);

// `--comm-kernel REGEX[=OP]`: kernels whose name the expression finds count as communication
// (performing OP, when given), before the families above. Added before the traces are loaded;
// "REGEX[=OP]" is split at the last '=' followed by a plain name (letters, digits, '_', '-', ' ').
// Returns an error message for an invalid expression, else "".
std::string addUserCommunicationKernel(const std::string& text);
void clearUserCommunicationKernels();

}  // namespace gpuxray::model
