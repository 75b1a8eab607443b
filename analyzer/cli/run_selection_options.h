// --ranks, --steps and --window as every command that reads a run offers them: the same names, help
// and grammar (analysis/run_selection.h), so that `analyze`, `export` and `convert` agree.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "analyzer/analysis/run_selection.h"

namespace gpuxray::cli {

struct RunSelectionText {
  std::vector<std::string> ranks;
  std::vector<std::string> steps;
  std::string window;

  // Throws UsageError naming the option.
  analysis::RunSelection parse() const { return analysis::parseRunSelection(ranks, steps, window); }
};

inline void addRunSelectionOptions(CLI::App* command, RunSelectionText& text) {
  command->add_option("--ranks", text.ranks, "Only these ranks' files, e.g. 0-7,12");
  command->add_option(
      "--steps", text.steps,
      "Only these training steps, e.g. 10-20: per-step figures over them, and a timeline of their span");
  command->add_option(
      "--window", text.window,
      "Only START:END of the run, from its first GPU activity once the clocks are aligned: s (default), "
      "ms, us or ns, either side may be empty, e.g. 10:20, 200ms:1.2s or 2s:");
}

}  // namespace gpuxray::cli
