// `gpuxray info` and the CLI's exit codes, through the real binary.

#include <algorithm>
#include <catch2/catch.hpp>
#include <fstream>
#include <string>

#include "proto/trace_writer.h"
#include "tests/support/build_outputs.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace {

using namespace gpuxray::format;
using gpuxray::testing::CommandResult;
using gpuxray::testing::runCommand;
using gpuxray::testing::TempDir;

struct RankFile {
  std::string run_id = "run-a";
  int rank = 0;
  int world_size = 2;
  int kernels = 10;
  bool finish = true;
  std::string nccl_version = "";
  NcclCaptureSource nccl_capture_source = NcclCaptureSource::kUnknown;
};

void writeRankFile(const std::string& path, const RankFile& spec) {
  TraceWriter writer(std::make_unique<FileSink>(path));
  FileHeader header;
  header.tool_version = "0.1.0";
  header.run_id = spec.run_id;
  header.run_id_source = "GPUXRAY_RUN_ID";
  header.rank = spec.rank;
  header.world_size = spec.world_size;
  header.rank_source = "RANK";
  header.hostname = "node-7";
  header.pid = 1234;
  header.devices.push_back({});
  header.devices.back().name = "NVIDIA H200";
  header.devices.back().sm_count = 132;
  header.nccl_version = spec.nccl_version;
  header.nccl_capture_source = spec.nccl_capture_source;
  REQUIRE(writer.writeHeader(header));
  StringId name = writer.intern("gemm_kernel");
  for (int i = 0; i < spec.kernels; ++i) {
    KernelRecord kernel;
    kernel.start_ns = 1000 + 100 * static_cast<uint64_t>(i);
    kernel.end_ns = kernel.start_ns + 50;
    kernel.name_id = name;
    writer.add(kernel);
  }
  if (spec.finish) {
    Trailer trailer;
    trailer.end = CaptureEnd::kProcessExit;
    trailer.counts.push_back({Category::kKernel, 0, 3});
    REQUIRE(writer.finish(trailer));
  } else {
    REQUIRE(writer.flush());
  }
}

CommandResult runGpuxray(const std::string& args) {
  return runCommand(gpuxray::testing::gpuxrayBinary() + " " + args);
}

}  // namespace

TEST_CASE("gpuxray --version and --help exit 0, a missing subcommand is a usage error") {
  auto version = runGpuxray("--version");
  CHECK(version.exit_code == 0);
  CHECK(version.out.rfind("gpuxray ", 0) == 0);

  auto help = runGpuxray("--help");
  CHECK(help.exit_code == 0);
  CHECK(help.out.find("info") != std::string::npos);

  auto none = runGpuxray("");
  CHECK(none.exit_code == 1);
  CHECK(none.err.find("A subcommand is required") != std::string::npos);

  auto bad_option = runGpuxray("info --no-such-option x");
  CHECK(bad_option.exit_code == 1);
}

TEST_CASE("info shows header, counts and drops of each file in a run directory") {
  TempDir dir;
  writeRankFile(dir / "rank-00000.gpuxray", {.rank = 0, .kernels = 10});
  writeRankFile(dir / "rank-00001.gpuxray", {.rank = 1, .kernels = 12});

  auto result = runGpuxray("info " + dir.path().string());
  INFO(result.out << result.err);
  CHECK(result.exit_code == 0);
  CHECK(result.err.empty());
  CHECK(result.out.find("rank      0 of 2, from RANK") != std::string::npos);
  CHECK(result.out.find("rank      1 of 2, from RANK") != std::string::npos);
  CHECK(result.out.find("run       run-a (from GPUXRAY_RUN_ID)") != std::string::npos);
  CHECK(result.out.find("device    GPU 0: NVIDIA H200, 132 SMs") != std::string::npos);
  CHECK(result.out.find("events    kernel 12") != std::string::npos);
  CHECK(result.out.find("dropped   kernel 3") != std::string::npos);
  CHECK(result.out.find("ended     process exit") != std::string::npos);
}

TEST_CASE("info --format json holds the same numbers") {
  TempDir dir;
  writeRankFile(dir / "rank-00000.gpuxray", {.rank = 0, .world_size = 1, .kernels = 7});
  auto result = runGpuxray("info --format json " + dir.path().string());
  INFO(result.out << result.err);
  CHECK(result.exit_code == 0);
  CHECK(result.out.find("\"schema\": \"gpuxray.info\"") != std::string::npos);
  CHECK(result.out.find("\"kernel\": 7") != std::string::npos);
  CHECK(result.out.find("\"hostname\": \"node-7\"") != std::string::npos);
  CHECK(result.out.find("\"errors\": []") != std::string::npos);

  auto bad = runGpuxray("info --format yaml " + dir.path().string());
  CHECK(bad.exit_code == 1);
  CHECK(bad.err == "gpuxray: --format must be text or json, not 'yaml'\n");
}

TEST_CASE("info says which source NCCL's operations come from, and nothing for files without one") {
  TempDir dir;
  writeRankFile(dir / "rank-00000.gpuxray",
                {.rank = 0, .nccl_version = "2.21.5", .nccl_capture_source = NcclCaptureSource::kNvtx});
  writeRankFile(dir / "rank-00001.gpuxray", {.rank = 1, .nccl_capture_source = NcclCaptureSource::kProfilerPlugin});

  auto text = runGpuxray("info " + (dir / "rank-00000.gpuxray"));
  INFO(text.out << text.err);
  CHECK(text.exit_code == 0);
  CHECK(text.out.find("  nccl      2.21.5, captured through nvtx\n") != std::string::npos);
  auto plugin = runGpuxray("info " + (dir / "rank-00001.gpuxray"));
  CHECK(plugin.out.find("  nccl      captured through profiler-plugin\n") != std::string::npos);

  auto json = runGpuxray("info --format json " + dir.path().string());
  INFO(json.out);
  CHECK(json.out.find("\"nccl_version\": \"2.21.5\"") != std::string::npos);
  CHECK(json.out.find("\"nccl_capture_source\": \"nvtx\"") != std::string::npos);
  CHECK(json.out.find("\"nccl_capture_source\": \"profiler-plugin\"") != std::string::npos);

  TempDir older;
  writeRankFile(older / "rank-00000.gpuxray", {.rank = 0});
  auto without = runGpuxray("info " + older.path().string());
  CHECK(without.out.find("  nccl") == std::string::npos);
  auto without_json = runGpuxray("info --format json " + older.path().string());
  CHECK(without_json.out.find("\"nccl_capture_source\": \"unknown\"") != std::string::npos);
}

TEST_CASE("files of different runs in one directory are an error unless --allow-mixed") {
  TempDir dir;
  writeRankFile(dir / "a.gpuxray", {.run_id = "run-a", .rank = 0, .world_size = 1});
  writeRankFile(dir / "b.gpuxray", {.run_id = "run-b", .rank = 0, .world_size = 1});

  auto mixed = runGpuxray("info " + dir.path().string());
  CHECK(mixed.exit_code == 2);
  CHECK(mixed.err == "gpuxray: error: the files come from 2 different runs: run 'run-a' (1 file, e.g. " +
                         (dir / "a.gpuxray") + "), run 'run-b' (1 file, e.g. " + (dir / "b.gpuxray") +
                         "); pass --allow-mixed to read them together\n");
  CHECK(mixed.out.find("run       run-b") != std::string::npos);

  auto allowed = runGpuxray("info --allow-mixed " + dir.path().string());
  CHECK(allowed.exit_code == 0);
}

TEST_CASE("a rank that appears twice is an error naming both files") {
  TempDir dir;
  writeRankFile(dir / "first.gpuxray", {.rank = 1});
  writeRankFile(dir / "second.gpuxray", {.rank = 1});
  auto result = runGpuxray("info " + dir.path().string());
  CHECK(result.exit_code == 2);
  CHECK(result.err.find("gpuxray: error: rank 1 appears twice: in " + (dir / "first.gpuxray") + " and in " +
                        (dir / "second.gpuxray") + "\n") != std::string::npos);
  CHECK(result.err.find("gpuxray: warning: run 'run-a': 1 of 2 ranks have no file (rank 0)\n") != std::string::npos);
}

TEST_CASE("an unreadable file is an error, and the good files beside it are still shown") {
  TempDir dir;
  writeRankFile(dir / "rank-00000.gpuxray", {.rank = 0, .world_size = 1});
  std::ofstream(dir / "junk.gpuxray") << "this is not a trace";
  auto result = runGpuxray("info " + dir.path().string());
  CHECK(result.exit_code == 2);
  CHECK(result.err ==
        "gpuxray: error: " + (dir / "junk.gpuxray") + ": not a gpuxray trace (no GPUXRAY signature at the start)\n");
  CHECK(result.out.find("rank-00000.gpuxray") != std::string::npos);
}

TEST_CASE("a torn file is read up to its last complete chunk, with a warning") {
  TempDir dir;
  std::string path = dir / "rank-00000.gpuxray";
  writeRankFile(path, {.rank = 0, .world_size = 1, .kernels = 5, .finish = false});
  std::ofstream(path, std::ios::app | std::ios::binary) << "GXCK\x10\x00";
  auto result = runGpuxray("info " + path);
  INFO(result.out << result.err);
  CHECK(result.exit_code == 0);
  CHECK(result.out.find("events    kernel 5") != std::string::npos);
  CHECK(result.out.find("warning: " + path + ": torn tail at byte offset") != std::string::npos);
  CHECK(result.out.find("no trailer") != std::string::npos);
}

TEST_CASE("paths that do not exist or hold no traces are errors") {
  TempDir dir;
  auto missing = runGpuxray("info " + (dir / "nothing-here"));
  CHECK(missing.exit_code == 2);
  CHECK(missing.err == "gpuxray: error: " + (dir / "nothing-here") + ": no such file or directory\n");

  auto empty = runGpuxray("info " + dir.path().string());
  CHECK(empty.exit_code == 2);
  CHECK(empty.err ==
        "gpuxray: error: " + dir.path().string() +
            ": no trace files in this directory (gpuxray's *.gpuxray, its digests *.gxdigest, or PyTorch-profiler "
            "*.json / *.json.gz)\n");
}

TEST_CASE("info on digests: who made each, of which trace, with which options, and what it keeps") {
  TempDir dir;
  writeRankFile(dir / "rank-00000.gpuxray", {.rank = 0, .kernels = 10});
  writeRankFile(dir / "rank-00001.gpuxray", {.rank = 1, .kernels = 12});
  std::string digests = dir / "digests";
  auto made = runGpuxray("digest " + dir.path().string() + " -o " + digests);
  INFO(made.err);
  REQUIRE(made.exit_code == 0);

  auto text = runGpuxray("info " + digests);
  INFO(text.out << text.err);
  CHECK(text.exit_code == 0);
  CHECK(text.err.empty());
  CHECK(text.out.find("rank-00001.gpuxray.gxdigest\n  digest    format ") != std::string::npos);
  CHECK(text.out.find("  of        " + (dir / "rank-00001.gpuxray")) != std::string::npos);
  CHECK(text.out.find("  run       run-a\n") != std::string::npos);
  CHECK(text.out.find("  rank      1 of 2, from RANK") != std::string::npos);
  CHECK(text.out.find("12 records read, 1 steps") != std::string::npos);
  CHECK(text.out.find("1 distinct kernel launches") != std::string::npos);

  auto json = runGpuxray("info --format json " + digests);
  CHECK(json.exit_code == 0);
  CHECK(json.out.find("\"kind\": \"digest\"") != std::string::npos);
  CHECK(json.out.find("\"source_path\": \"" + (dir / "rank-00000.gpuxray") + "\"") != std::string::npos);

  // A damaged digest is one error line naming it (its rank then has no file: a warning); the other
  // is still shown.
  std::string damaged = digests + "/rank-00000.gpuxray.gxdigest";
  std::ofstream(damaged, std::ios::binary | std::ios::trunc) << "GXDIGST\n";
  auto bad = runGpuxray("info " + digests);
  INFO(bad.err);
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("gpuxray: error: " + damaged + ": not a gpuxray digest") != std::string::npos);
  CHECK(bad.err.find("gpuxray: warning: run 'run-a': 1 of 2 ranks have no file (rank 0)\n") != std::string::npos);
  CHECK(std::count(bad.err.begin(), bad.err.end(), '\n') == 2);
  CHECK(bad.out.find("rank-00001.gpuxray.gxdigest") != std::string::npos);
}
