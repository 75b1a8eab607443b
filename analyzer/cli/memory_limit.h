// `--max-memory`: the most memory a command may take, so that a run (or a hostile file) too large for
// the machine ends with a clear error instead of the kernel's out-of-memory killer.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <new>
#include <string>

#include "analyzer/errors.h"

namespace gpuxray::cli {

// "8G", "512M", "64k" or bytes; "0" is no limit. Throws UsageError naming `option`.
uint64_t parseMemorySize(const std::string& text, const std::string& option);
// Three quarters of the machine's physical memory.
uint64_t defaultMemoryLimit();
// Caps the process's heap (RLIMIT_DATA) at `bytes`, after which allocations fail with std::bad_alloc;
// false (and nothing set) under AddressSanitizer, whose shadow memory the limit would count.
bool limitMemory(uint64_t bytes);
std::string memorySizeText(uint64_t bytes);

// The option, on a command that reads a run.
void addMaxMemoryOption(CLI::App* command, std::string& max_memory);

// Runs `command(limit)` within --max-memory (`max_memory` as given; empty: the default; the limit in
// bytes, 0: none, for its session's budget): past it allocations fail, and running out, or a
// session's MemoryBudgetError, ends the command with an InputError that says so.
template <typename Command>
auto withinMemoryLimit(const std::string& max_memory, Command command) {
  uint64_t limit = max_memory.empty() ? defaultMemoryLimit() : parseMemorySize(max_memory, "--max-memory");
  limitMemory(limit);
  try {
    return command(limit);
  } catch (const MemoryBudgetError& e) {
    throw InputError(e.what());
  } catch (const std::bad_alloc&) {
    throw InputError("the run needs more than " + memorySizeText(limit) +
                     " of memory (--max-memory); give a larger limit, or analyze part of it with --ranks or --window");
  }
}

}  // namespace gpuxray::cli
