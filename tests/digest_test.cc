// `gpuxray digest` and the analyses of digests: `analyze DIGESTS` gives the report of `analyze DIR`
// (apart from the stat that counts the digests used), whether the digests were made by one process
// or by several with a launcher's rank variables; a digest that cannot serve is read again from its
// trace, or is a one-line error naming it; digests of another version or run, and damaged ones, are
// refused naming the file; missing shards are a warning naming the ranks; `diff` takes digests as a side.

#include <fmt/format.h>
#include <zstd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <span>
#include <string>
#include <vector>

#include "analyzer/analysis/digest_file.h"
#include "analyzer/errors.h"
#include "gpuxray/version.h"
#include "proto/file_layout.h"
#include "tests/support/build_outputs.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

using gpuxray::testing::CommandResult;
using gpuxray::testing::readWholeFile;
using gpuxray::testing::runCommand;
using gpuxray::testing::TempDir;
namespace fs = std::filesystem;

namespace {

std::string gpuxray() {
  return gpuxray::testing::gpuxrayBinary();
}

// The demo (16 ranks, TP2 x PP2 x DP4 with 1F1B, NCCL operations, memory, a slow NIC), two steps.
std::string simulatedDemo(const TempDir& dir, const std::string& name = "run", const std::string& extra = "") {
  std::string run = dir / name;
  auto simulated = runCommand(gpuxray() + " simulate --preset demo --steps 2 " + extra + " -o " + run);
  INFO(simulated.err);
  REQUIRE(simulated.exit_code == 0);
  return run;
}

CommandResult succeeded(const std::string& command) {
  CommandResult result = runCommand(command);
  INFO(command << "\n" << result.err);
  REQUIRE(result.exit_code == 0);
  return result;
}

// The JSON report without its stats entry of the digests used (the one difference digests make).
std::string withoutDigestsUsed(std::string json) {
  size_t at = json.find("\"name\": \"digests_used\"");
  if (at == std::string::npos) return json;
  size_t open = json.rfind('{', at), close = json.find('}', at) + 1;
  size_t before = json.find_last_not_of(" \n", open - 1), after = json.find_first_not_of(" \n", close);
  if (json[before] == ',') {
    json.erase(before, close - before);
  } else if (json[after] == ',') {
    json.erase(open, json.find_first_not_of(" \n", after + 1) - open);
  } else {
    json.replace(before, after + 1 - before, "[]");  // the only stat
  }
  return json;
}

std::vector<uint8_t> bytesOf(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void writeBytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

TEST_CASE("digest: analyze of the digests gives the report of the traces, without reading them", "[digest]") {
  TempDir dir;
  std::string run = simulatedDemo(dir);
  std::string digests = dir / "digests";
  auto digested = succeeded(gpuxray() + " digest " + run + " -o " + digests);
  CHECK(digested.err.find("16 of 16 files digested into " + digests) != std::string::npos);
  for (int r = 0; r < 16; ++r) CHECK(fs::exists(fmt::format("{}/rank-{:05}.gpuxray.gxdigest", digests, r)));

  std::string from_traces = succeeded(gpuxray() + " analyze " + run + " --format json").out;
  fs::rename(run, dir / "away");  // the digests alone serve
  std::string from_digests = succeeded(gpuxray() + " analyze " + digests + " --format json").out;
  CHECK(from_digests.find("\"name\": \"digests_used\"") != std::string::npos);
  CHECK(from_digests.find("\"value\": 16") != std::string::npos);
  CHECK(withoutDigestsUsed(from_digests) == from_traces);

  // A digest that cannot serve (--window needs the events in the window) is read again from its
  // trace; when that is gone, a one-line error names the digest and why.
  auto gone = runCommand(gpuxray() + " analyze " + digests + " --window 0.1s:0.3s");
  CHECK(gone.exit_code == 2);
  CHECK(std::count(gone.err.begin(), gone.err.end(), '\n') == 1);
  CHECK(gone.err.find(digests + "/rank-00000.gpuxray.gxdigest: the digest cannot serve (--window), and the rank's "
                                "trace cannot be read: ") != std::string::npos);
  auto timeline = runCommand(gpuxray() + " analyze " + digests + " --perfetto " + (dir / "t.pftrace"));
  CHECK(timeline.exit_code == 2);
  CHECK(timeline.err.find(".gxdigest: this command needs the rank's events") != std::string::npos);
  fs::rename(dir / "away", run);
  std::string windowed = succeeded(gpuxray() + " analyze " + run + " --window 0.1s:0.3s --format json").out;
  CHECK(succeeded(gpuxray() + " analyze " + digests + " --window 0.1s:0.3s --format json").out == windowed);
  // Other analysis options than the digests were made with: the traces are read.
  std::string marked = succeeded(gpuxray() + " analyze " + run + " --step-marker 'no such range' --format json").out;
  CHECK(succeeded(gpuxray() + " analyze " + digests + " --step-marker 'no such range' --format json").out == marked);
  // A mix of digests and traces is one run.
  std::string mix;
  for (int r = 0; r < 16; ++r) {
    mix += r % 2 == 0 ? fmt::format(" {}/rank-{:05}.gpuxray.gxdigest", digests, r)
                      : fmt::format(" {}/rank-{:05}.gpuxray", run, r);
  }
  CHECK(withoutDigestsUsed(succeeded(gpuxray() + " analyze" + mix + " --format json").out) == from_traces);
}

TEST_CASE("digest: three processes with Slurm's rank variables give the report of one", "[digest]") {
  TempDir dir;
  std::string run = simulatedDemo(dir);
  succeeded(gpuxray() + " digest " + run + " -o " + (dir / "one"));
  // As `srun -n 3 gpuxray digest`: the three at once, each its shard.
  std::string three;
  for (int i = 0; i < 3; ++i)
    three += fmt::format("SLURM_PROCID={} SLURM_NTASKS=3 {} digest {} -o {} & ", i, gpuxray(), run, dir / "three");
  auto shards = runCommand(three + "wait");
  INFO(shards.err);
  CHECK(shards.err.find("shard 0/3 (SLURM_PROCID/SLURM_NTASKS): 6 of 6 files") != std::string::npos);
  CHECK(shards.err.find("shard 1/3 (SLURM_PROCID/SLURM_NTASKS): 5 of 5 files") != std::string::npos);
  CHECK(shards.err.find("shard 2/3 (SLURM_PROCID/SLURM_NTASKS): 5 of 5 files") != std::string::npos);
  // Shard i holds the files whose index in the sorted list is i modulo 3.
  CHECK(fs::exists(dir / "three/rank-00004.gpuxray.gxdigest"));
  auto shard1 = succeeded(gpuxray() + " digest " + run + " --shard 1/3 -o " + (dir / "shard1"));
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir / "shard1")) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::string>{"rank-00001.gpuxray.gxdigest", "rank-00004.gpuxray.gxdigest",
                                          "rank-00007.gpuxray.gxdigest", "rank-00010.gpuxray.gxdigest",
                                          "rank-00013.gpuxray.gxdigest"});
  CHECK(succeeded(gpuxray() + " analyze " + (dir / "three") + " --format json").out ==
        succeeded(gpuxray() + " analyze " + (dir / "one") + " --format json").out);
  // Open MPI's and PMI's variables, and a shard past the files.
  CHECK(succeeded("OMPI_COMM_WORLD_RANK=2 OMPI_COMM_WORLD_SIZE=4 " + gpuxray() + " digest " + run + " -o " +
                  (dir / "ompi"))
            .err.find("shard 2/4 (OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE): 4 of 4 files") != std::string::npos);
  CHECK(succeeded("PMI_RANK=20 PMI_SIZE=32 " + gpuxray() + " digest " + run + " -o " + (dir / "pmi"))
            .err.find("shard 20/32 (PMI_RANK/PMI_SIZE) has none of the 16 trace files") != std::string::npos);
  auto wrong = runCommand(gpuxray() + " digest " + run + " --shard 3/3 -o " + (dir / "x"));
  CHECK(wrong.exit_code == 1);
  CHECK(wrong.err.find("--shard '3/3': expected I/N with 0 <= I < N") != std::string::npos);
  auto wrong_env = runCommand("SLURM_PROCID=x SLURM_NTASKS=3 " + gpuxray() + " digest " + run + " -o " + (dir / "x"));
  CHECK(wrong_env.exit_code == 1);
  CHECK(wrong_env.err.find("SLURM_PROCID='x' and SLURM_NTASKS='3' name no shard") != std::string::npos);
}

TEST_CASE("digest: digests of another version or run, damaged ones and missing shards", "[digest]") {
  TempDir dir;
  std::string run = simulatedDemo(dir);
  std::string digests = dir / "digests";
  succeeded(gpuxray() + " digest " + run + " -o " + digests);
  std::string one = digests + "/rank-00002.gpuxray.gxdigest";
  std::vector<uint8_t> good = bytesOf(one);

  SECTION("another digest format version") {
    std::vector<uint8_t> bytes = good;
    bytes[8] = 99;
    writeBytes(one, bytes);
    CHECK_THROWS_WITH(gpuxray::analysis::readDigestFile(one),
                      one + ": a digest of format version 99, and this gpuxray (" + gpuxray::kToolVersion +
                          ") reads version 1: make the digests again with this gpuxray");
    auto result = succeeded(gpuxray() + " analyze " + digests);
    CHECK(result.out.find(one + ": a digest of format version 99") != std::string::npos);
    CHECK(result.out.find("1 of 16 ranks have no file (rank 2)") != std::string::npos);
  }
  SECTION("another gpuxray version") {
    // The header chunk, its version string changed in place and stored uncompressed.
    size_t at = 16;
    gpuxray::format::ChunkHeader chunk;
    REQUIRE(gpuxray::format::decodeChunkHeader(std::span<const uint8_t>(good).subspan(at, 20), &chunk) ==
            gpuxray::format::ChunkHeaderProblem::kNone);
    std::vector<uint8_t> raw(chunk.raw_size);
    REQUIRE(ZSTD_decompress(raw.data(), raw.size(), good.data() + at + 20, chunk.stored_size) == raw.size());
    std::string version = gpuxray::kToolVersion;
    auto found = std::search(raw.begin(), raw.end(), version.begin(), version.end());
    REQUIRE(found != raw.end());
    *(found + static_cast<std::ptrdiff_t>(version.size()) - 1) = '~';
    std::string other = version.substr(0, version.size() - 1) + "~";
    auto header =
        gpuxray::format::encodeChunkHeader(gpuxray::format::Codec::kNone, static_cast<uint32_t>(raw.size()), raw);
    std::vector<uint8_t> bytes(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(at));
    bytes.insert(bytes.end(), header.begin(), header.end());
    bytes.insert(bytes.end(), raw.begin(), raw.end());
    bytes.insert(bytes.end(), good.begin() + static_cast<std::ptrdiff_t>(at + 20 + chunk.stored_size), good.end());
    writeBytes(one, bytes);
    CHECK_THROWS_WITH(gpuxray::analysis::readDigestFile(one), one + ": a digest made by gpuxray " + other +
                                                                  ", not by this gpuxray (" + version +
                                                                  "): make the digests again with this gpuxray");
    // Alone, it is the error.
    auto alone = runCommand(gpuxray() + " analyze " + one);
    CHECK(alone.exit_code == 2);
    CHECK(alone.err == "gpuxray: error: " + one + ": a digest made by gpuxray " + other + ", not by this gpuxray (" +
                           version + "): make the digests again with this gpuxray\n");
  }
  SECTION("another run") {
    std::string other = simulatedDemo(dir, "other", "--run-id other-run");
    succeeded(gpuxray() + " digest " + other + "/rank-00002.gpuxray -o " + (dir / "other-digests"));
    fs::copy_file(dir / "other-digests/rank-00002.gpuxray.gxdigest", one, fs::copy_options::overwrite_existing);
    auto result = runCommand(gpuxray() + " analyze " + digests);
    CHECK(result.exit_code == 2);
    CHECK(std::count(result.err.begin(), result.err.end(), '\n') == 1);
    CHECK(result.err.find("run 'other-run' (1 file, e.g. " + one + ")") != std::string::npos);
  }
  SECTION("cut short, garbage, and missing shards") {
    writeBytes(one, std::vector<uint8_t>(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(good.size() / 2)));
    std::vector<uint8_t> garbage(3000);
    for (size_t i = 0; i < garbage.size(); ++i) garbage[i] = static_cast<uint8_t>(i * 7919 % 251);
    writeBytes(digests + "/garbage.gxdigest", garbage);
    std::vector<uint8_t> flipped = bytesOf(digests + "/rank-00009.gpuxray.gxdigest");
    flipped[flipped.size() / 2] ^= 0x40;
    writeBytes(digests + "/rank-00009.gpuxray.gxdigest", flipped);
    fs::remove(digests + "/rank-00005.gpuxray.gxdigest");
    fs::remove(digests + "/rank-00011.gpuxray.gxdigest");
    auto result = succeeded(gpuxray() + " analyze " + digests);
    CHECK(result.out.find(one + ": not a usable digest: cut short at byte " + std::to_string(good.size() / 2) +
                          "; file skipped") != std::string::npos);
    CHECK(result.out.find(digests + "/garbage.gxdigest: not a gpuxray digest (it does not start with the digest "
                                    "magic); file skipped") != std::string::npos);
    CHECK(result.out.find(digests + "/rank-00009.gpuxray.gxdigest: not a usable digest: damaged at byte ") !=
          std::string::npos);
    CHECK(result.out.find("run 'sim-demo': 4 of 16 ranks have no file (ranks 2, 5, 9, 11)") != std::string::npos);
    // Every one of them, and nothing else: the first one's line is the error.
    for (const auto& entry : fs::directory_iterator(digests)) {
      if (entry.path().filename() != "garbage.gxdigest") fs::remove(entry.path());
    }
    auto nothing = runCommand(gpuxray() + " analyze " + digests);
    CHECK(nothing.exit_code == 2);
    CHECK(nothing.err == "gpuxray: error: " + digests +
                             "/garbage.gxdigest: not a gpuxray digest (it does not start with the digest magic)\n");
  }
}

TEST_CASE("digest: diff takes digests as either side", "[digest]") {
  TempDir dir;
  std::string before = simulatedDemo(dir, "before", "--slow-link node-01:2=0.4");
  std::string after = simulatedDemo(dir, "after");
  succeeded(gpuxray() + " digest " + before + " -o " + (dir / "before-digests"));
  succeeded(gpuxray() + " digest " + after + " -o " + (dir / "after-digests"));
  auto labelled = [&](std::string text) {
    for (const char* name : {"before-digests", "after-digests"}) {
      std::string from = dir / name, to = from.substr(0, from.size() - 8);
      for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at))
        text.replace(at, from.size(), to);
    }
    return text;
  };
  std::string traces = succeeded(gpuxray() + " diff " + before + " " + after + " --format json").out;
  CHECK(labelled(succeeded(gpuxray() + " diff " + (dir / "before-digests") + " " + after + " --format json").out) ==
        traces);
  CHECK(labelled(succeeded(gpuxray() + " diff " + before + " " + (dir / "after-digests") + " --format json").out) ==
        traces);
  CHECK(labelled(succeeded(gpuxray() + " diff " + (dir / "before-digests") + " " + (dir / "after-digests")).out) ==
        succeeded(gpuxray() + " diff " + before + " " + after).out);
}
