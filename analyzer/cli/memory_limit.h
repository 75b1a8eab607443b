// `--max-memory`: the most memory a command may take, so that a run (or a hostile file) too large for
// the machine ends with a clear error instead of the kernel's out-of-memory killer.
#pragma once

#include <cstdint>
#include <string>

namespace gpuxray::cli {

// "8G", "512M", "64k" or bytes; "0" is no limit. Throws UsageError naming `option`.
uint64_t parseMemorySize(const std::string& text, const std::string& option);
// Three quarters of the machine's physical memory.
uint64_t defaultMemoryLimit();
// Caps the process's heap (RLIMIT_DATA) at `bytes`, after which allocations fail with std::bad_alloc;
// false (and nothing set) under AddressSanitizer, whose shadow memory the limit would count.
bool limitMemory(uint64_t bytes);
std::string memorySizeText(uint64_t bytes);

}  // namespace gpuxray::cli
