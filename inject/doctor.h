// `gpuxray doctor`: whether capture can work on this machine, checked with the capture's own code
// (the libcupti search and version rule of cupti_api, the driver queries of device_query, NCCL's
// source choice of nccl_capture_source, the launcher variables of process_identity, the settings
// of capture_config). The library exports the checks as gpuxray_doctor_report_v1 (entry_points.cc).
#pragma once

#include <string>
#include <vector>

#include "inject/process_identity.h"
#include "proto/doctor_report.h"

namespace gpuxray::inject {

// Where each check looks; the defaults are the real machine's, tests point them at stand-ins.
struct DoctorInputs {
  // The environment the job gets (for `gpuxray run`, the one it builds for the command).
  EnvironmentLookup environment;
  // This library's path: injection and plugin variables naming it are ours.
  std::string library_path;
  // Where trace files would go; empty: GPUXRAY_OUTPUT_DIR or the capture's default.
  std::string output_dir;
  std::string driver_library = "libcuda.so.1";
  std::string nccl_library = "libnccl.so.2";
  std::string nvidia_params = "/proc/driver/nvidia/params";
  std::string nvidia_version = "/proc/driver/nvidia/version";
  // Root or CAP_SYS_ADMIN, which the driver's profiling restriction lets through.
  bool profiling_admin = false;
};

// The real machine's inputs for `environment`.
DoctorInputs machineDoctorInputs(EnvironmentLookup environment, std::string library_path, std::string output_dir);

// In order: settings, cupti, driver, gpus, nccl, pm-sampling, other-tools, output-directory, launcher.
std::vector<format::DoctorCheck> runDoctorChecks(const DoctorInputs& inputs);

// The NCCL profiler table NCCL of `version` (ncclGetVersion's code) takes from the library, as
// "ncclProfiler_v5"; empty for an NCCL older than the plugin.
std::string ncclProfilerTableFor(int version);

}  // namespace gpuxray::inject
