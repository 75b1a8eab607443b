// The "loading trace files: 12/64" line the commands that load a run show on a terminal.
#pragma once

#include <fmt/core.h>
#include <unistd.h>

#include "analyzer/analysis/session.h"

namespace gpuxray::cli {

// Sets `options.progress` when stderr is a terminal and the run has a few files or more.
inline void showLoadProgressOnTerminal(analysis::SessionOptions& options) {
  if (!isatty(STDERR_FILENO)) return;
  options.progress = [](size_t done, size_t total) {
    if (total >= 4) fmt::print(stderr, "\rloading trace files: {}/{}{}", done, total, done == total ? "\n" : "");
  };
}

}  // namespace gpuxray::cli
