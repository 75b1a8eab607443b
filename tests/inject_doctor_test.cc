// gpuxray doctor's checks, run in-process with the capture's code against stand-ins: a libcupti of
// an accepted and of a refused API version, a libcuda playing a GPU node or a machine without one,
// libnccl.so.2 of NCCL 2.21 and 2.28, and made-up /proc/driver/nvidia files.

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "inject/doctor.h"
#include "proto/doctor_report.h"
#include "tests/support/temp_dir.h"

namespace {

using gpuxray::format::DoctorCheck;
using gpuxray::format::DoctorStatus;
using gpuxray::inject::DoctorInputs;
using gpuxray::testing::TempDir;

struct DoctorFixture {
  TempDir dir;
  std::map<std::string, std::string> variables;
  DoctorInputs inputs;

  DoctorFixture() {
    inputs.environment = [this](const char* name) -> const char* {
      auto found = variables.find(name);
      return found == variables.end() ? nullptr : found->second.c_str();
    };
    inputs.library_path = "/opt/gpuxray/lib/gpuxray/libgpuxray_inject.so";
    inputs.output_dir = dir / "traces";
    inputs.driver_library = GPUXRAY_FAKE_CUDA;
    inputs.nccl_library = GPUXRAY_FAKE_NCCL_2_28;
    inputs.nvidia_params = dir / "params";
    inputs.nvidia_version = dir / "version";
    variables["GPUXRAY_CUPTI_PATH"] = GPUXRAY_FAKE_CUPTI_ACCEPTED;
    write("params", "ResmanDebugLevel: 4294967295\nRmProfilingAdminOnly: 1\n");
    write("version", "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.65.06  Sun Jul 27 07:09:25 UTC 2025\n");
    setenv("FAKE_CUDA_MODE", "", 1);
  }
  ~DoctorFixture() { unsetenv("FAKE_CUDA_MODE"); }

  void write(const std::string& name, const std::string& text) const { std::ofstream(dir / name) << text; }

  // The checks run in a child process, so that the stand-in libraries they load (one named
  // libcuda.so.1, one libcupti.so.13) stay out of this process, which other tests share.
  std::vector<DoctorCheck> run() const {
    int pipe_ends[2];
    REQUIRE(pipe(pipe_ends) == 0);
    pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      close(pipe_ends[0]);
      std::string report = gpuxray::format::encodeDoctorReport(gpuxray::inject::runDoctorChecks(inputs));
      for (size_t written = 0; written < report.size();) {
        ssize_t n = ::write(pipe_ends[1], report.data() + written, report.size() - written);
        if (n <= 0) _exit(1);
        written += static_cast<size_t>(n);
      }
      _exit(0);
    }
    close(pipe_ends[1]);
    std::string report;
    char buffer[4096];
    for (ssize_t n; (n = read(pipe_ends[0], buffer, sizeof buffer)) > 0;) report.append(buffer, static_cast<size_t>(n));
    close(pipe_ends[0]);
    int status = 0;
    waitpid(child, &status, 0);
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == 0);
    std::vector<DoctorCheck> checks;
    std::string error;
    REQUIRE(gpuxray::format::decodeDoctorReport(report, checks, error));
    return checks;
  }

  // The checks of one name; the test fails when there is none.
  std::vector<DoctorCheck> checksNamed(const std::string& name) const {
    std::vector<DoctorCheck> found;
    for (auto& check : run()) {
      if (check.name == name) found.push_back(check);
    }
    REQUIRE_FALSE(found.empty());
    return found;
  }
  DoctorCheck check(const std::string& name) const { return checksNamed(name).front(); }
};

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("doctor: every check is there, in order, on a machine that can capture", "[doctor]") {
  DoctorFixture fixture;
  fixture.inputs.profiling_admin = true;
  std::vector<std::string> names;
  for (const auto& check : fixture.run()) {
    names.push_back(check.name);
    INFO(check.name << ": " << check.detail);
    CHECK(check.status == DoctorStatus::kOk);
    CHECK(check.fix.empty());
  }
  CHECK(names == std::vector<std::string>{"settings", "cupti", "driver", "gpus", "nccl", "pm-sampling", "other-tools",
                                          "output-directory", "launcher"});
}

TEST_CASE("doctor: the libcupti found and its API version, accepted or refused by the capture's rule", "[doctor]") {
  DoctorFixture fixture;
  auto accepted = fixture.check("cupti");
  CHECK(accepted.status == DoctorStatus::kOk);
  CHECK(contains(accepted.detail, "libcupti.so.13: CUPTI API 130001, accepted (CUDA 13.0's record layouts)"));

  fixture.variables["GPUXRAY_CUPTI_PATH"] = GPUXRAY_FAKE_CUPTI_REFUSED;
  auto refused = fixture.check("cupti");
  CHECK(refused.status == DoctorStatus::kProblem);
  CHECK(contains(refused.detail, std::string("GPUXRAY_CUPTI_PATH=") + GPUXRAY_FAKE_CUPTI_REFUSED + " is not usable"));
  CHECK(contains(refused.detail, "CUPTI API version 120000, whose record layouts this gpuxray does not know"));
  CHECK(contains(refused.fix, "GPUXRAY_CUPTI_PATH"));

  fixture.variables["GPUXRAY_CUPTI_PATH"] = GPUXRAY_FAKE_CUPTI_12_6;
  auto cuda12 = fixture.check("cupti");
  CHECK(cuda12.status == DoctorStatus::kOk);
  CHECK(contains(cuda12.detail, "libcupti.so.12: CUPTI API 24, accepted (CUDA 12.6's record layouts)"));

  fixture.variables["GPUXRAY_CUPTI_PATH"] = GPUXRAY_FAKE_CUPTI_12_9;
  auto unconfirmed = fixture.check("cupti");
  CHECK(unconfirmed.status == DoctorStatus::kProblem);
  CHECK(contains(unconfirmed.detail, "CUPTI API version 27, whose record layouts this gpuxray does not know (it reads "
                                     "22 (CUDA 12.4), 23 (CUDA 12.5), 24 (CUDA 12.6), 26 (CUDA 12.8), 28 (CUDA 12.9 "
                                     "Update 1), and 130000-130099 (CUDA 13.0))"));
}

TEST_CASE("doctor: the driver's CUDA version, its kernel module and the GPUs", "[doctor]") {
  DoctorFixture fixture;
  auto driver = fixture.check("driver");
  CHECK(driver.status == DoctorStatus::kOk);
  CHECK(contains(driver.detail, "libcuda.so.1: cuDriverGetVersion 13000 (CUDA 13.0)"));
  CHECK(contains(driver.detail, "kernel module: NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.65.06"));
  auto gpus = fixture.check("gpus");
  CHECK(gpus.status == DoctorStatus::kOk);
  CHECK(gpus.detail == "2 GPUs: 0 NVIDIA H100 80GB HBM3 sm_90; 1 NVIDIA H100 80GB HBM3 sm_90");

  setenv("FAKE_CUDA_MODE", "old", 1);
  CHECK(fixture.check("driver").status == DoctorStatus::kProblem);
  CHECK(contains(fixture.check("driver").detail, "(CUDA 12.4), older than the CUDA 13.0"));
  // A CUDA 12 libcupti needs a CUDA 12 driver only.
  fixture.variables["GPUXRAY_CUPTI_PATH"] = GPUXRAY_FAKE_CUPTI_12_6;
  CHECK(fixture.check("driver").status == DoctorStatus::kOk);
  CHECK(contains(fixture.check("driver").detail, "cuDriverGetVersion 12040 (CUDA 12.4)"));
}

TEST_CASE("doctor: the toolkit's stub libcuda, no visible GPU and no driver are problems that say which", "[doctor]") {
  DoctorFixture fixture;
  setenv("FAKE_CUDA_MODE", "stub", 1);
  auto stub = fixture.check("gpus");
  CHECK(stub.status == DoctorStatus::kProblem);
  CHECK(contains(stub.detail, "cuInit failed: CUDA_ERROR_STUB_LIBRARY (34)"));
  CHECK(contains(stub.detail, "is the CUDA toolkit's stub, not a driver"));

  setenv("FAKE_CUDA_MODE", "no-device", 1);
  fixture.variables["CUDA_VISIBLE_DEVICES"] = "7";
  auto hidden = fixture.check("gpus");
  CHECK(hidden.status == DoctorStatus::kProblem);
  CHECK(contains(hidden.detail, "CUDA_ERROR_NO_DEVICE (100): no GPU visible (CUDA_VISIBLE_DEVICES=7)"));

  fixture.inputs.driver_library = fixture.dir / "libcuda.so.1";
  auto none = fixture.checksNamed("driver");
  CHECK(none.front().status == DoctorStatus::kProblem);
  CHECK(contains(none.front().detail, "no libcuda.so.1 (the NVIDIA driver's library)"));
  CHECK(fixture.check("gpus").detail == "not known without a driver");
}

TEST_CASE("doctor: NCCL's version, the profiler table it takes, and a plugin named elsewhere", "[doctor]") {
  DoctorFixture fixture;
  auto new_nccl = fixture.check("nccl");
  CHECK(new_nccl.status == DoctorStatus::kOk);
  CHECK(contains(new_nccl.detail, "libnccl.so.2: NCCL 2.28.3, takes the plugin's ncclProfiler_v5"));

  fixture.variables["NCCL_PROFILER_PLUGIN"] = "/opt/other/libnccl-profiler.so";
  auto other = fixture.check("nccl");
  CHECK(other.status == DoctorStatus::kWarning);
  CHECK(contains(other.detail, "NCCL_PROFILER_PLUGIN=/opt/other/libnccl-profiler.so names another profiler plugin"));
  CHECK(contains(other.detail, "taken from its NVTX ranges instead"));
  CHECK(contains(other.fix, "unset NCCL_PROFILER_PLUGIN"));

  fixture.variables["GPUXRAY_CAPTURE"] = "all,-nvtx";
  CHECK(fixture.check("nccl").status == DoctorStatus::kProblem);
  fixture.variables.erase("GPUXRAY_CAPTURE");
  fixture.variables.erase("NCCL_PROFILER_PLUGIN");

  fixture.inputs.nccl_library = GPUXRAY_FAKE_NCCL;
  auto old_nccl = fixture.check("nccl");
  CHECK(old_nccl.status == DoctorStatus::kWarning);
  CHECK(contains(old_nccl.detail, "NCCL 2.21.5 (no profiler plugin ABI)"));
  CHECK(contains(old_nccl.detail, "older than 2.23.0"));

  fixture.inputs.nccl_library = fixture.dir / "libnccl.so.2";
  CHECK(fixture.check("nccl").status == DoctorStatus::kWarning);
  CHECK(contains(fixture.check("nccl").detail, "is not checked here"));
}

TEST_CASE("doctor: NCCL releases map onto the profiler tables they look up", "[doctor]") {
  using gpuxray::inject::ncclProfilerTableFor;
  CHECK(ncclProfilerTableFor(22105).empty());
  CHECK(ncclProfilerTableFor(22304) == "ncclProfiler_v1");
  CHECK(ncclProfilerTableFor(22503) == "ncclProfiler_v2");
  CHECK(ncclProfilerTableFor(22602) == "ncclProfiler_v3");
  CHECK(ncclProfilerTableFor(22703) == "ncclProfiler_v4");
  CHECK(ncclProfilerTableFor(22809) == "ncclProfiler_v5");
  CHECK(ncclProfilerTableFor(22907) == "ncclProfiler_v6");
}

TEST_CASE("doctor: PM sampling permission from the driver's RmProfilingAdminOnly", "[doctor]") {
  DoctorFixture fixture;
  fixture.inputs.profiling_admin = false;
  auto restricted = fixture.check("pm-sampling");
  CHECK(restricted.status == DoctorStatus::kWarning);
  CHECK(contains(restricted.detail, "restricted to administrators (RmProfilingAdminOnly: 1)"));
  CHECK(contains(restricted.fix, "NVreg_RestrictProfilingToAdminUsers=0"));
  fixture.variables["GPUXRAY_METRICS"] = "1";
  CHECK(fixture.check("pm-sampling").status == DoctorStatus::kProblem);

  fixture.inputs.profiling_admin = true;
  CHECK(fixture.check("pm-sampling").status == DoctorStatus::kOk);
  fixture.inputs.profiling_admin = false;
  fixture.write("params", "RmProfilingAdminOnly: 0\n");
  CHECK(fixture.check("pm-sampling").status == DoctorStatus::kOk);

  fixture.inputs.nvidia_params = fixture.dir / "absent";
  auto unknown = fixture.check("pm-sampling");
  CHECK(unknown.status == DoctorStatus::kWarning);
  CHECK(contains(unknown.detail, "not known: no " + fixture.inputs.nvidia_params));
}

TEST_CASE("doctor: another CUPTI client named by the injection variables or LD_PRELOAD", "[doctor]") {
  DoctorFixture fixture;
  fixture.variables["CUDA_INJECTION64_PATH"] = fixture.inputs.library_path;
  CHECK(fixture.check("other-tools").status == DoctorStatus::kOk);

  fixture.variables["CUDA_INJECTION64_PATH"] = "/opt/nsight-systems/target-linux-x64/libToolsInjection64.so";
  fixture.variables["LD_PRELOAD"] = "/usr/lib/libjemalloc.so.2:/opt/cuda/lib64/libcupti.so.13";
  auto others = fixture.checksNamed("other-tools");
  REQUIRE(others.size() == 2);
  CHECK(others[0].status == DoctorStatus::kProblem);
  CHECK(
      contains(others[0].detail, "CUDA_INJECTION64_PATH=/opt/nsight-systems/target-linux-x64/libToolsInjection64.so"));
  CHECK(others[1].status == DoctorStatus::kProblem);
  CHECK(contains(others[1].detail, "LD_PRELOAD loads /opt/cuda/lib64/libcupti.so.13"));
}

TEST_CASE("doctor: the output directory, writable or not, and node-local under a multi-node launcher", "[doctor]") {
  DoctorFixture fixture;
  auto fine = fixture.check("output-directory");
  CHECK(fine.status == DoctorStatus::kOk);
  CHECK(contains(fine.detail,
                 fixture.dir / "traces" + " (created at start, in " + fixture.dir.path().string() + "): writable, "));
  CHECK(contains(fine.detail, " GiB free"));

  fixture.write("file", "not a directory");
  fixture.inputs.output_dir = fixture.dir / "file/traces";
  auto blocked = fixture.check("output-directory");
  CHECK(blocked.status == DoctorStatus::kProblem);
  CHECK(contains(blocked.detail, fixture.dir / "file" + " is not a directory"));

  fixture.inputs.output_dir.clear();
  fixture.variables["GPUXRAY_OUTPUT_DIR"] = fixture.dir / "from-variable";
  CHECK(contains(fixture.check("output-directory").detail, fixture.dir / "from-variable"));
}

TEST_CASE("doctor: the launcher's rank variables, and a rank beyond the world size", "[doctor]") {
  DoctorFixture fixture;
  CHECK(contains(fixture.check("launcher").detail, "no launcher's rank variables"));
  fixture.variables = {{"GPUXRAY_CUPTI_PATH", GPUXRAY_FAKE_CUPTI_ACCEPTED},
                       {"RANK", "3"},
                       {"LOCAL_RANK", "3"},
                       {"WORLD_SIZE", "16"},
                       {"LOCAL_WORLD_SIZE", "8"},
                       {"TORCHELASTIC_RUN_ID", "job-7"}};
  auto torchrun = fixture.check("launcher");
  CHECK(torchrun.status == DoctorStatus::kOk);
  CHECK(torchrun.detail == "rank 3 (from RANK) of 16, local rank 3 of 8; run id from TORCHELASTIC_RUN_ID");
  fixture.variables["WORLD_SIZE"] = "2";
  fixture.variables["LOCAL_WORLD_SIZE"] = "1";
  CHECK(fixture.check("launcher").status == DoctorStatus::kProblem);
}

TEST_CASE("doctor: an unreadable GPUXRAY_* value is a warning of its own", "[doctor]") {
  DoctorFixture fixture;
  fixture.variables["GPUXRAY_BUFFER_LIMIT_MB"] = "lots";
  auto settings = fixture.check("settings");
  CHECK(settings.status == DoctorStatus::kWarning);
  CHECK(contains(settings.detail, "GPUXRAY_BUFFER_LIMIT_MB"));
}

TEST_CASE("doctor reports travel from the library to gpuxray as text, tabs and line breaks flattened", "[doctor]") {
  std::vector<DoctorCheck> checks = {{"cupti", DoctorStatus::kOk, "found\tit", ""},
                                     {"driver", DoctorStatus::kProblem, "two\nlines", "install\rone"}};
  std::vector<DoctorCheck> decoded;
  std::string error;
  REQUIRE(gpuxray::format::decodeDoctorReport(gpuxray::format::encodeDoctorReport(checks), decoded, error));
  CHECK(decoded == std::vector<DoctorCheck>{{"cupti", DoctorStatus::kOk, "found it", ""},
                                            {"driver", DoctorStatus::kProblem, "two lines", "install one"}});
  CHECK_FALSE(gpuxray::format::decodeDoctorReport("gpuxray-doctor 2\n", decoded, error));
  CHECK(error == "the injection library's report does not start with 'gpuxray-doctor 1'");
  CHECK_FALSE(gpuxray::format::decodeDoctorReport("gpuxray-doctor 1\ncupti\tfine\tx\t\n", decoded, error));
  CHECK(error == "line 2 of the injection library's report is not 'name, status, detail, fix'");
}
