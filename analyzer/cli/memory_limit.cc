#include "analyzer/cli/memory_limit.h"

#include <fmt/core.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cctype>
#include <limits>

#include "analyzer/errors.h"

#if defined(__SANITIZE_ADDRESS__)
#define GPUXRAY_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GPUXRAY_ASAN 1
#endif
#endif

namespace gpuxray::cli {

uint64_t parseMemorySize(const std::string& text, const std::string& option) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  std::string unit = text.substr(digits);
  int shift = unit.empty() ? 0 : -1;
  if (unit.size() == 1 || (unit.size() == 2 && (unit[1] == 'B' || unit[1] == 'b')) ||
      (unit.size() == 3 && unit.substr(1) == "iB")) {
    switch (std::toupper(static_cast<unsigned char>(unit[0]))) {
      case 'K':
        shift = 10;
        break;
      case 'M':
        shift = 20;
        break;
      case 'G':
        shift = 30;
        break;
      case 'T':
        shift = 40;
        break;
      default:
        break;
    }
  }
  if (digits == 0 || digits > 15 || shift < 0)
    throw UsageError(fmt::format("{} '{}': expected a size such as 8G, 512M or 0 (no limit)", option, text));
  return std::stoull(text.substr(0, digits)) << shift;
}

uint64_t defaultMemoryLimit() {
  long pages = sysconf(_SC_PHYS_PAGES);
  long page_size = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) return 0;
  return static_cast<uint64_t>(pages) / 4 * 3 * static_cast<uint64_t>(page_size);
}

bool limitMemory(uint64_t bytes) {
#ifdef GPUXRAY_ASAN
  (void)bytes;
  return false;
#else
  if (bytes == 0) return false;
  rlimit limit{};
  if (getrlimit(RLIMIT_DATA, &limit) != 0) return false;
  rlim_t wanted = bytes > std::numeric_limits<rlim_t>::max() ? RLIM_INFINITY : static_cast<rlim_t>(bytes);
  if (limit.rlim_max != RLIM_INFINITY && wanted > limit.rlim_max) wanted = limit.rlim_max;
  limit.rlim_cur = wanted;
  return setrlimit(RLIMIT_DATA, &limit) == 0;
#endif
}

void addMaxMemoryOption(CLI::App* command, std::string& max_memory) {
  command->add_option("--max-memory", max_memory,
                      "Stop with an error rather than use more memory than this, e.g. 16G (default: 3/4 of RAM; 0: no "
                      "limit)");
}

std::string memorySizeText(uint64_t bytes) {
  if (bytes >= (uint64_t{1} << 30)) return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / (1u << 30));
  return fmt::format("{} MiB", bytes >> 20);
}

}  // namespace gpuxray::cli
