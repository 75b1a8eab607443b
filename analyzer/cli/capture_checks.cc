#include "analyzer/cli/capture_checks.h"

#include <dlfcn.h>
#include <fmt/core.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <system_error>

#include "analyzer/errors.h"
#include "gpuxray/version.h"

extern char** environ;  // NOLINT: POSIX declares it nowhere else.

namespace gpuxray::cli {
namespace {

namespace fs = std::filesystem;
using format::DoctorCheck;
using format::DoctorStatus;

// The library's entry point (inject/entry_points.cc); the result is malloc'ed.
using DoctorReport = char* (*)(const char* const* environment, const char* output_dir);
constexpr const char* kDoctorEntryPoint = "gpuxray_doctor_report_v1";

fs::path executableDir() {
  std::error_code error;
  fs::path executable = fs::read_symlink("/proc/self/exe", error);
  return error ? fs::current_path() : executable.parent_path();
}

DoctorCheck libraryProblem(const std::string& library, const std::string& why) {
  return {"library", DoctorStatus::kProblem, library + ": " + why,
          "reinstall gpuxray, or point GPUXRAY_INJECT_LIBRARY at a libgpuxray_inject.so of the same release"};
}

}  // namespace

Environment processEnvironment() {
  Environment environment;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) environment.emplace_back(*entry);
  return environment;
}

std::string findInjectionLibrary(const Environment& environment) {
  std::optional<std::string> chosen = lookupVariable(environment, "GPUXRAY_INJECT_LIBRARY");
  auto candidates = injectionLibraryCandidates(chosen, executableDir(), fs::current_path());
  std::string looked_in;
  for (const fs::path& candidate : candidates) {
    std::error_code error;
    if (fs::is_regular_file(candidate, error)) return candidate.string();
    looked_in += (looked_in.empty() ? "" : ", ") + candidate.string();
  }
  if (!kBuiltWithCapture && !chosen) {
    throw InputError(
        "this gpuxray was built without the CUDA toolkit and has no capture library: install a release package "
        "(README, \"Install\"), rebuild with the CUDA 13.0 toolkit (CUDAToolkit_ROOT=...), or set "
        "GPUXRAY_INJECT_LIBRARY");
  }
  throw InputError(fmt::format(
      "cannot find libgpuxray_inject.so (looked in: {}); build it or set GPUXRAY_INJECT_LIBRARY", looked_in));
}

std::vector<DoctorCheck> runCaptureChecks(const std::string& library, const Environment& job_environment,
                                          const std::string& output_dir) {
  // Kept loaded: the library's constructor has run, and unloading it gains nothing here.
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return {libraryProblem(library, std::string("cannot be loaded: ") + (why != nullptr ? why : "unknown error"))};
  }
  auto report = reinterpret_cast<DoctorReport>(dlsym(handle, kDoctorEntryPoint));
  if (report == nullptr)
    return {libraryProblem(library, std::string("has no ") + kDoctorEntryPoint + " (from another gpuxray release?)")};
  std::vector<const char*> entries;
  for (const auto& entry : job_environment) entries.push_back(entry.c_str());
  entries.push_back(nullptr);
  char* text = report(entries.data(), output_dir.c_str());
  if (text == nullptr) return {libraryProblem(library, "its checks returned nothing")};
  std::vector<DoctorCheck> checks;
  std::string error;
  bool decoded = format::decodeDoctorReport(text, checks, error);
  std::free(text);
  if (!decoded) return {libraryProblem(library, error)};
  checks.insert(checks.begin(), DoctorCheck{"library", DoctorStatus::kOk, library, ""});
  return checks;
}

}  // namespace gpuxray::cli
