#include "analyzer/model/kernel_names.h"

#include <cxxabi.h>

#include <cstdlib>
#include <memory>

namespace gpuxray::model {

std::string demangledKernelName(std::string_view name) {
  if (!name.starts_with("_Z")) return {};
  std::string symbol(name);
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> text(abi::__cxa_demangle(symbol.c_str(), nullptr, nullptr, &status),
                                                   &std::free);
  return status == 0 && text != nullptr ? std::string(text.get()) : std::string();
}

}  // namespace gpuxray::model
