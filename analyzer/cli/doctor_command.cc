// `gpuxray doctor [-o DIR] [--format json]`: whether capture can work on this machine. It finds the
// injection library `run` would inject, loads it and prints the checks the library runs with the
// capture's own code (inject/doctor.cc): ok, warning or problem, each warning and problem with its
// fix. Exit code 0 when nothing is a problem, 4 when something is (docs/doctor.md).

#include <fmt/core.h>

#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "analyzer/cli/capture_checks.h"
#include "analyzer/cli/commands.h"
#include "analyzer/errors.h"
#include "gpuxray/version.h"

namespace gpuxray::cli {
namespace {

using format::DoctorCheck;
using format::DoctorStatus;

struct DoctorOptions {
  std::optional<std::string> output_dir;
  std::string output_format = "text";
};

constexpr int kDoctorSchemaVersion = 1;

size_t countOf(const std::vector<DoctorCheck>& checks, DoctorStatus status) {
  return static_cast<size_t>(
      std::count_if(checks.begin(), checks.end(), [&](const DoctorCheck& c) { return c.status == status; }));
}

std::string plural(size_t n, const char* word) {
  return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s");
}

void printText(const std::vector<DoctorCheck>& checks) {
  fmt::print("gpuxray doctor: gpuxray {}, checks for capture on this machine\n", kToolVersion);
  size_t name_width = 0;
  for (const auto& check : checks) name_width = std::max(name_width, check.name.size());
  for (const auto& check : checks) {
    fmt::print("  {:<8} {:<{}}  {}\n", format::doctorStatusName(check.status), check.name, name_width, check.detail);
    if (!check.fix.empty()) fmt::print("  {:<8} {:<{}}  fix: {}\n", "", "", name_width, check.fix);
  }
  size_t problems = countOf(checks, DoctorStatus::kProblem);
  fmt::print("{} ok, {}, {}: {}\n", countOf(checks, DoctorStatus::kOk),
             plural(countOf(checks, DoctorStatus::kWarning), "warning"), plural(problems, "problem"),
             problems == 0 ? "capture can start here" : "capture cannot work fully here until the problems are fixed");
}

void printJson(const std::vector<DoctorCheck>& checks, const std::optional<std::string>& library) {
  nlohmann::ordered_json document;
  document["schema"] = "gpuxray.doctor";
  document["version"] = kDoctorSchemaVersion;
  document["gpuxray_version"] = kToolVersion;
  document["injection_library"] = library ? nlohmann::ordered_json(*library) : nlohmann::ordered_json(nullptr);
  auto& list = document["checks"] = nlohmann::ordered_json::array();
  for (const auto& check : checks) {
    list.push_back({{"name", check.name},
                    {"status", format::doctorStatusName(check.status)},
                    {"detail", check.detail},
                    {"fix", check.fix.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(check.fix)}});
  }
  document["summary"] = {{"ok", countOf(checks, DoctorStatus::kOk)},
                         {"warnings", countOf(checks, DoctorStatus::kWarning)},
                         {"problems", countOf(checks, DoctorStatus::kProblem)}};
  fmt::print("{}\n", document.dump(2));
}

ExitCode runDoctor(const DoctorOptions& options) {
  if (options.output_format != "text" && options.output_format != "json")
    throw UsageError(fmt::format("--format must be text or json, not '{}'", options.output_format));
  Environment environment = processEnvironment();
  std::vector<DoctorCheck> checks;
  std::optional<std::string> library;
  try {
    library = findInjectionLibrary(environment);
  } catch (const InputError& e) {
    checks.push_back({"library", DoctorStatus::kProblem, e.what(),
                      kBuiltWithCapture ? "set GPUXRAY_INJECT_LIBRARY to the libgpuxray_inject.so to check"
                                        : "install a release package, or build with the CUDA 13.0 toolkit"});
  }
  if (library) checks = runCaptureChecks(*library, environment, options.output_dir.value_or(""));
  if (options.output_format == "json") {
    printJson(checks, library);
  } else {
    printText(checks);
  }
  return countOf(checks, DoctorStatus::kProblem) > 0 ? ExitCode::kProblemsFound : ExitCode::kOk;
}

}  // namespace

CommandAction addDoctorCommand(CLI::App& app) {
  auto options = std::make_shared<DoctorOptions>();
  CLI::App* command = app.add_subcommand(
      "doctor", "Check whether capture can work here: CUPTI, driver and GPUs, NCCL, permissions, output directory");
  command
      ->add_option("-o,--output", options->output_dir,
                   "The output directory to check (default: GPUXRAY_OUTPUT_DIR or the capture's default)")
      ->type_name("DIR");
  command->add_option("--format", options->output_format, "text (default) or json");
  command->footer("Exit code: 0 when no check is a problem (warnings allowed), 4 when one is.");
  return [options] { return runDoctor(*options); };
}

}  // namespace gpuxray::cli
