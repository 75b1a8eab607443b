// What `gpuxray analyze` does with input that is not a clean run: a file cut short, files of two
// runs.

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "proto/file_layout.h"
#include "tests/support/build_outputs.h"
#include "tests/support/run_builder.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace {

using gpuxray::testing::RunBuilder;
using gpuxray::testing::TempDir;

constexpr uint64_t kDp = 0xD000000000000001ull;

void writeRun(const std::filesystem::path& dir, const std::string& run_id) {
  RunBuilder run(run_id, 4);
  for (int r = 0; r < 4; ++r) {
    auto& rank = run.rank(r, r < 2 ? "node-a" : "node-b", r % 2);
    rank.communicator(kDp, "dp", r, 4, 2);
    for (int step = 0; step < 6; ++step) {
      double t = step * 1000.0;
      rank.range("ProfilerStep#" + std::to_string(step), t, t + 1000);
      rank.kernel("gemm", t, t + (r == 2 ? 800 : 600));
      rank.collective(kDp, "AllReduce", static_cast<uint64_t>(step + 1), t + (r == 2 ? 800 : 600), t + 900, 64 << 20);
    }
  }
  run.write(dir);
}

std::string analyze(const std::string& arguments) {
  return gpuxray::testing::gpuxrayBinary() + " analyze " + arguments;
}

}  // namespace

TEST_CASE("analyze: a rank's file cut off in the middle is used as far as it goes, with a warning naming it") {
  TempDir dir;
  writeRun(dir.path() / "run", "golden-torn");
  std::filesystem::path torn = dir.path() / "run" / gpuxray::format::traceFileName(3, "", 0);
  std::filesystem::resize_file(torn, std::filesystem::file_size(torn) / 2);

  auto text = gpuxray::testing::runCommand(analyze(dir / "run"));
  INFO(text.out << text.err);
  REQUIRE(text.exit_code == 0);
  CHECK(text.err.empty());
  CHECK(text.out.find("4 of 4 ranks on 2 hosts") != std::string::npos);
  CHECK(text.out.find("  " + torn.string() + ": torn tail at ") != std::string::npos);
  CHECK(text.out.find("  " + torn.string() + ": no trailer") != std::string::npos);
  // The intact ranks still show rank 2 arriving 200 µs late.
  CHECK(text.out.find("rank 2 is the straggler: last into 6 of 6 collectives") != std::string::npos);

  auto json = gpuxray::testing::runCommand(analyze("--format json " + (dir / "run")));
  CHECK(json.exit_code == 0);
  CHECK(json.out.find(torn.string() + ": torn tail at ") != std::string::npos);
}

TEST_CASE("analyze: files of two runs are refused in one line naming both, unless --allow-mixed") {
  TempDir dir;
  writeRun(dir.path() / "a", "run-alpha");
  writeRun(dir.path() / "b", "run-beta");
  auto mixed = gpuxray::testing::runCommand(analyze((dir / "a") + " " + (dir / "b")));
  CHECK(mixed.exit_code == 2);
  CHECK(mixed.out.empty());
  CHECK(std::count(mixed.err.begin(), mixed.err.end(), '\n') == 1);
  CHECK(mixed.err.find("run 'run-alpha'") != std::string::npos);
  CHECK(mixed.err.find("run 'run-beta'") != std::string::npos);
  CHECK(mixed.err.find("--allow-mixed") != std::string::npos);

  auto allowed = gpuxray::testing::runCommand(analyze("--allow-mixed " + (dir / "a") + " " + (dir / "b")));
  INFO(allowed.err);
  CHECK(allowed.exit_code == 0);
  CHECK(allowed.out.find("gpuxray analyze: run run-alpha, 8 of 4 ranks") != std::string::npos);
}

TEST_CASE("analyze: kernels named by their symbols, as CUPTI names them, are read demangled") {
  TempDir dir;
  RunBuilder run("golden-mangled", 1);
  auto& rank = run.rank(0, "node-a", 0);
  for (int step = 0; step < 3; ++step) {
    double t = step * 1000.0;
    rank.range("ProfilerStep#" + std::to_string(step), t, t + 1000);
    rank.kernel("_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_", t,
                t + 500);
    rank.kernel("_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE", t + 500, t + 900,
                gpuxray::testing::kCommStream);
  }
  run.write(dir.path() / "run");

  auto text = gpuxray::testing::runCommand(analyze(dir / "run"));
  INFO(text.out << text.err);
  REQUIRE(text.exit_code == 0);
  CHECK(text.out.find("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>") !=
        std::string::npos);
  CHECK(text.out.find("_ZN2at6native") == std::string::npos);
  // NCCL's kernel is communication by its name, mangled or not: the step's 400 µs of it are exposed.
  CHECK(text.out.find("No communication kernels in the trace") == std::string::npos);
  CHECK(text.out.find("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)") != std::string::npos);
  CHECK(text.out.find("_Z39ncclDevKernel") == std::string::npos);
}
