#pragma once

namespace gpuxray::cli {

enum class ExitCode : int {
  kOk = 0,
  kUsage = 1,
  // A file or directory could not be used (not a trace, unreadable, inconsistent run).
  kBadInput = 2,
  // An analysis threshold given with --fail-on was exceeded.
  kThresholdExceeded = 3,
  // gpuxray doctor found a problem that stops or limits capture here.
  kProblemsFound = 4,
};

}  // namespace gpuxray::cli
