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

std::string reportedKernelName(std::string_view name, size_t most) {
  // The parameter list: the first '(' outside brackets that follows a name directly, when its ')'
  // ends the signature (" const" aside); a lambda's "f(int)::{lambda()#1}" is not one.
  int depth = 0;
  constexpr std::string_view kAnonymous = "(anonymous namespace)";
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    if (name.substr(i).starts_with(kAnonymous)) {
      i += kAnonymous.size() - 1;
      continue;
    }
    if (c == '(' && depth == 0 && i > 0 && name[i - 1] != ' ') {
      int inner = 0;
      size_t close = i;
      for (; close < name.size(); ++close) {
        if (name[close] == '(') ++inner;
        if (name[close] == ')' && --inner == 0) break;
      }
      std::string_view rest = close < name.size() ? name.substr(close + 1) : std::string_view("?");
      if (rest.empty() || rest == " const") name = name.substr(0, i);
      break;
    }
    if (c == '<' || c == '(' || c == '[' || c == '{') ++depth;
    if ((c == '>' || c == ')' || c == ']' || c == '}') && depth > 0) --depth;
  }
  while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
  return name.size() <= most ? std::string(name) : std::string(name.substr(0, most - 3)) + "...";
}

}  // namespace gpuxray::model
