// Each subcommand lives in its own file and registers itself on the CLI11 app; main runs the one
// that was chosen.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <string>

#include "analyzer/cli/exit_codes.h"

namespace gpuxray::report {
struct Report;
}  // namespace gpuxray::report

namespace gpuxray::cli {

// Called after parsing, when its subcommand was given.
using CommandAction = std::function<ExitCode()>;

CommandAction addInfoCommand(CLI::App& app);
CommandAction addAnalyzeCommand(CLI::App& app);
CommandAction addDiffCommand(CLI::App& app);
CommandAction addDigestCommand(CLI::App& app);
CommandAction addRunCommand(CLI::App& app);
CommandAction addSimulateCommand(CLI::App& app);
CommandAction addPlanCommand(CLI::App& app);
CommandAction addConvertCommand(CLI::App& app);
CommandAction addExportCommand(CLI::App& app);
CommandAction addTriggerCommand(CLI::App& app);
CommandAction addDoctorCommand(CLI::App& app);
CommandAction addReportCommand(CLI::App& app);

// The report's HTML page (report_command.cc), as `report` and `analyze --html` write it; the page
// cuts the report it is given (pass a copy to keep the whole).
void writeHtmlReport(const std::string& path, report::Report report);

}  // namespace gpuxray::cli
