// What `gpuxray doctor` and `gpuxray run` share: finding the injection library they would use, and
// running the capture's own checks by loading that library (it exports gpuxray_doctor_report_v1,
// which runs them with the capture's code; see ARCHITECTURE.md, "gpuxray doctor").
#pragma once

#include <string>
#include <vector>

#include "analyzer/cli/run_environment.h"
#include "proto/doctor_report.h"

namespace gpuxray::cli {

// This process's environment, as `environ` holds it.
Environment processEnvironment();

// The libgpuxray_inject.so that `run` would inject (injectionLibraryCandidates' order); throws
// InputError saying where it looked, or that this gpuxray was built without capture.
std::string findInjectionLibrary(const Environment& environment);

// Loads `library` and runs its checks for a job with `job_environment` writing into `output_dir`
// (empty: the job's GPUXRAY_OUTPUT_DIR). A library that cannot be loaded or lacks the checks gives
// one problem named "library".
std::vector<format::DoctorCheck> runCaptureChecks(const std::string& library, const Environment& job_environment,
                                                  const std::string& output_dir);

}  // namespace gpuxray::cli
