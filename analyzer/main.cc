#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "analyzer/cli/commands.h"
#include "analyzer/errors.h"
#include "gpuxray/version.h"

namespace {

using gpuxray::cli::ExitCode;

int run(const gpuxray::cli::CommandAction& action) {
  try {
    return static_cast<int>(action());
  } catch (const gpuxray::UsageError& e) {
    fmt::print(stderr, "gpuxray: {}\n", e.what());
    return static_cast<int>(ExitCode::kUsage);
  } catch (const gpuxray::InputError& e) {
    fmt::print(stderr, "gpuxray: error: {}\n", e.what());
    return static_cast<int>(ExitCode::kBadInput);
  } catch (const std::exception& e) {
    fmt::print(stderr, "gpuxray: error: {}\n", e.what());
    return static_cast<int>(ExitCode::kBadInput);
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"gpuxray: finds why a multi-GPU training job is slower than it should be.", "gpuxray"};
  app.set_version_flag("--version", fmt::format("gpuxray {}", gpuxray::kToolVersion));
  app.require_subcommand(1);

  std::vector<std::pair<std::string, gpuxray::cli::CommandAction>> commands;
  commands.emplace_back("info", gpuxray::cli::addInfoCommand(app));
  commands.emplace_back("analyze", gpuxray::cli::addAnalyzeCommand(app));
  commands.emplace_back("diff", gpuxray::cli::addDiffCommand(app));
  commands.emplace_back("digest", gpuxray::cli::addDigestCommand(app));
  commands.emplace_back("report", gpuxray::cli::addReportCommand(app));
  commands.emplace_back("run", gpuxray::cli::addRunCommand(app));
  commands.emplace_back("simulate", gpuxray::cli::addSimulateCommand(app));
  commands.emplace_back("plan", gpuxray::cli::addPlanCommand(app));
  commands.emplace_back("convert", gpuxray::cli::addConvertCommand(app));
  commands.emplace_back("export", gpuxray::cli::addExportCommand(app));
  commands.emplace_back("trigger", gpuxray::cli::addTriggerCommand(app));
  commands.emplace_back("doctor", gpuxray::cli::addDoctorCommand(app));

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : static_cast<int>(ExitCode::kUsage);
  }
  for (const auto& [name, action] : commands) {
    if (app.got_subcommand(name)) return run(action);
  }
  return static_cast<int>(ExitCode::kUsage);
}
