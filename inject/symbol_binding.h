// Binding a typed function pointer to a symbol of a library opened with dlopen.
#pragma once

#include <dlfcn.h>

#include <string>

namespace gpuxray::inject {

// Sets `slot` to `symbol` in `library` (null if absent) and appends the names of absent symbols to
// `missing`, comma-separated.
template <typename Function>
void bindSymbol(void* library, const char* symbol, Function& slot, std::string& missing) {
  slot = reinterpret_cast<Function>(dlsym(library, symbol));
  if (slot == nullptr) missing += (missing.empty() ? "" : ", ") + std::string(symbol);
}

}  // namespace gpuxray::inject
