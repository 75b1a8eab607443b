// `gpuxray doctor` and the start checks of `gpuxray run`, through the real binary: with the built
// injection library and a folder of stand-ins on LD_LIBRARY_PATH (a libcuda.so.1 playing a GPU node
// or the toolkit's stub, a libnccl.so.2 of NCCL 2.28) and a stand-in libcupti; and in an
// analyzer-only build, without the library.

#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "gpuxray/version.h"
#include "tests/support/build_outputs.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace {

using gpuxray::testing::CommandResult;
using gpuxray::testing::runCommand;
using gpuxray::testing::TempDir;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

size_t countLines(const std::string& text, const std::string& start) {
  size_t count = 0;
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    if (text.compare(at, start.size(), start) == 0) ++count;
    at = end + 1;
  }
  return count;
}

// gpuxray started from a clean capture environment in `dir`, plus `exports`.
CommandResult runGpuxray(const TempDir& dir, const std::string& args, const std::string& exports) {
  return runCommand("cd '" + dir.path().string() +
                    "' && unset CUDA_INJECTION64_PATH NVTX_INJECTION64_PATH NCCL_PROFILER_PLUGIN LD_PRELOAD "
                    "GPUXRAY_OUTPUT_DIR GPUXRAY_CAPTURE GPUXRAY_METRICS GPUXRAY_RUN_CHECKS RANK WORLD_SIZE && " +
                    exports + " exec " + gpuxray::testing::gpuxrayBinary() + " " + args);
}

#ifdef GPUXRAY_INJECT_LIBRARY
// The stand-ins of a GPU node, as the library would find them.
std::string gpuNode(const std::string& cuda_mode) {
  std::string fake_dir = std::filesystem::path(GPUXRAY_FAKE_CUDA).parent_path().string();
  return "export GPUXRAY_INJECT_LIBRARY='" GPUXRAY_INJECT_LIBRARY "' GPUXRAY_CUPTI_PATH='" GPUXRAY_FAKE_CUPTI_ACCEPTED
         "' LD_LIBRARY_PATH='" +
         fake_dir + "' FAKE_CUDA_MODE=" + cuda_mode + " &&";
}
#endif

}  // namespace

#ifdef GPUXRAY_INJECT_LIBRARY

TEST_CASE("doctor: on a GPU node every check answers and nothing is a problem (exit 0)", "[doctor][cli]") {
  TempDir dir;
  auto result = runGpuxray(dir, "doctor -o traces", gpuNode("gpu"));
  INFO(result.out << result.err);
  CHECK(result.exit_code == 0);
  CHECK(result.err.empty());
  CHECK(contains(result.out, "gpuxray doctor: gpuxray " + std::string(gpuxray::kToolVersion)));
  CHECK(contains(result.out, std::string("  ok       library           ") + GPUXRAY_INJECT_LIBRARY + "\n"));
  CHECK(
      contains(result.out, "  ok       cupti             " GPUXRAY_FAKE_CUPTI_ACCEPTED ": CUPTI API 130001, accepted"));
  CHECK(contains(result.out, "  ok       gpus              2 GPUs: 0 NVIDIA H100 80GB HBM3 sm_90; 1 NVIDIA H100"));
  CHECK(contains(result.out, "NCCL 2.28.3, takes the plugin's ncclProfiler_v5"));
  CHECK(contains(result.out, "0 problems: capture can start here\n"));
  CHECK(countLines(result.out, "  problem") == 0);
}

TEST_CASE("doctor --format json: the versioned schema, one object per check", "[doctor][cli]") {
  TempDir dir;
  auto result = runGpuxray(dir, "doctor --format json", gpuNode("stub"));
  INFO(result.out << result.err);
  CHECK(result.exit_code == 4);
  auto document = nlohmann::json::parse(result.out);
  CHECK(document["schema"] == "gpuxray.doctor");
  CHECK(document["version"] == 1);
  CHECK(document["injection_library"] == GPUXRAY_INJECT_LIBRARY);
  size_t problems = 0;
  for (const auto& check : document["checks"]) {
    CHECK(check["detail"].is_string());
    if (check["status"] == "ok") {
      CHECK(check["fix"].is_null());
    } else {
      CHECK(check["fix"].is_string());
    }
    if (check["status"] == "problem") ++problems;
    if (check["name"] == "gpus") {
      CHECK(check["status"] == "problem");
      CHECK(contains(check["detail"], "CUDA_ERROR_STUB_LIBRARY (34)"));
    }
  }
  CHECK(problems >= 1);
  CHECK(document["summary"]["problems"] == problems);
}

TEST_CASE("doctor: problems exit 4 with their fix; a file that is not the library is one", "[doctor][cli]") {
  TempDir dir;
  auto stub = runGpuxray(dir, "doctor", gpuNode("stub"));
  CHECK(stub.exit_code == 4);
  CHECK(contains(stub.out, "  problem  gpus              cuInit failed: CUDA_ERROR_STUB_LIBRARY (34)"));
  CHECK(contains(stub.out, "                             fix: capture needs a machine with an NVIDIA GPU"));

  std::ofstream(dir / "libgpuxray_inject.so") << "not a library";
  auto broken = runGpuxray(dir, "doctor", "export GPUXRAY_INJECT_LIBRARY='" + dir / "libgpuxray_inject.so" + "' &&");
  CHECK(broken.exit_code == 4);
  CHECK(contains(broken.out, "  problem  library  " + dir / "libgpuxray_inject.so" + ": cannot be loaded: "));
}

TEST_CASE("run: the doctor's problems, one line each, before the command runs anyway", "[doctor][cli][run]") {
  TempDir dir;
  auto result = runGpuxray(dir, "run -o out -- sh -c 'exit 3'", gpuNode("stub"));
  INFO(result.err);
  CHECK(result.exit_code == 3);
  CHECK(countLines(result.err, "gpuxray: problem: ") == 1);
  CHECK(contains(result.err, "gpuxray: problem: gpus: cuInit failed: CUDA_ERROR_STUB_LIBRARY (34): "));
  CHECK(contains(result.err, "; fix: capture needs a machine with an NVIDIA GPU"));
  CHECK(countLines(result.err, "gpuxray: warning") == 0);

  auto quiet = runGpuxray(dir, "run -o out -- true", gpuNode("stub") + " export GPUXRAY_RUN_CHECKS=0 &&");
  CHECK(quiet.exit_code == 0);
  CHECK(countLines(quiet.err, "gpuxray: problem: ") == 0);

  auto fine = runGpuxray(dir, "run -o out -- true", gpuNode("gpu"));
  CHECK(countLines(fine.err, "gpuxray: problem: ") == 0);
}

#else

TEST_CASE("doctor and run in an analyzer-only build say that capture is not built and how to get it", "[doctor][cli]") {
  TempDir dir;
  auto doctor = runGpuxray(dir, "doctor", "unset GPUXRAY_INJECT_LIBRARY &&");
  CHECK(doctor.exit_code == 4);
  CHECK(contains(doctor.out, "  problem  library  this gpuxray was built without the CUDA toolkit"));
  auto run = runGpuxray(dir, "run -- true", "unset GPUXRAY_INJECT_LIBRARY &&");
  CHECK(run.exit_code == 2);
  CHECK(run.err ==
        "gpuxray: error: this gpuxray was built without the CUDA toolkit and has no capture library: install a "
        "release package (README, \"Install\"), rebuild with the CUDA 13.0 toolkit (CUDAToolkit_ROOT=...), or set "
        "GPUXRAY_INJECT_LIBRARY\n");
}

#endif
