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

std::string binary() {
  return gpuxray::testing::gpuxrayBinary();
}

// The demo on one node (8 ranks, TP2 x PP2 x DP2 with 1F1B: NCCL operations, sends and receives,
// memory, links), two steps.
std::string simulatedDemo(const TempDir& dir, const std::string& name = "run", const std::string& extra = "") {
  std::string run = dir / name;
  auto simulated = runCommand(binary() + " simulate --preset demo --nodes 1 --dp 2 --steps 2 " + extra + " -o " + run);
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

// A run and its digests, made by one `gpuxray digest`.
struct Digested {
  TempDir dir;
  std::string run = simulatedDemo(dir);
  std::string digests = dir / "digests";
  std::string digest_output = succeeded(binary() + " digest " + run + " -o " + digests).err;
  std::string digestOf(int rank) const { return fmt::format("{}/rank-{:05}.gpuxray.gxdigest", digests, rank); }
};

}  // namespace

TEST_CASE("digest: analyze of the digests gives the report of the traces, without reading them", "[digest]") {
  Digested run;
  CHECK(run.digest_output.find("8 of 8 files digested into " + run.digests) != std::string::npos);
  for (int r = 0; r < 8; ++r) CHECK(fs::exists(run.digestOf(r)));
  std::string from_traces = succeeded(binary() + " analyze " + run.run + " --format json").out;
  REQUIRE(from_traces.find("\"pipeline_bubbles\"") != std::string::npos);
  fs::rename(run.run, run.dir / "away");  // the digests alone serve
  std::string from_digests = succeeded(binary() + " analyze " + run.digests + " --format json").out;
  CHECK(from_digests.find("\"name\": \"digests_used\"") != std::string::npos);
  CHECK(from_digests.find("\"value\": 8") != std::string::npos);
  CHECK(withoutDigestsUsed(from_digests) == from_traces);
  fs::rename(run.dir / "away", run.run);
  // A mix of digests and traces is one run.
  std::string mix;
  for (int r = 0; r < 8; ++r)
    mix += r % 2 == 0 ? " " + run.digestOf(r) : fmt::format(" {}/rank-{:05}.gpuxray", run.run, r);
  CHECK(withoutDigestsUsed(succeeded(binary() + " analyze" + mix + " --format json").out) == from_traces);
}

TEST_CASE("digest: a digest that cannot serve, its trace gone, is a one-line error naming it", "[digest]") {
  Digested run;
  fs::rename(run.run, run.dir / "away");
  // --window needs the events in the window.
  auto windowed = runCommand(binary() + " analyze " + run.digests + " --window 0.1s:0.3s");
  CHECK(windowed.exit_code == 2);
  // One line, naming a digest (the ranks are read again at once: any of them may be the first).
  CHECK(std::count(windowed.err.begin(), windowed.err.end(), '\n') == 1);
  CHECK(windowed.err.starts_with("gpuxray: error: " + run.digests + "/rank-"));
  CHECK(windowed.err.find(".gpuxray.gxdigest: the digest cannot serve (--window), and the rank's trace cannot be "
                          "read: " +
                          run.run + "/rank-") != std::string::npos);
  CHECK(windowed.err.ends_with(".gpuxray: cannot open: No such file or directory\n"));
  // A timeline needs every event.
  auto timeline = runCommand(binary() + " analyze " + run.digests + " --perfetto " + (run.dir / "t.pftrace"));
  CHECK(timeline.exit_code == 2);
  CHECK(std::count(timeline.err.begin(), timeline.err.end(), '\n') == 1);
  CHECK(timeline.err.find(".gxdigest: this command needs the rank's events (a timeline, --critical-path on one "
                          "rank), and its trace cannot be read: ") != std::string::npos);
  // The critical path across ranks reads the ranks' step graphs, which digest files do not hold.
  auto path = runCommand(binary() + " analyze " + run.digests + " --critical-path");
  CHECK(path.exit_code == 2);
  CHECK(std::count(path.err.begin(), path.err.end(), '\n') == 1);
  CHECK(path.err.find(".gxdigest: the digest cannot serve (--critical-path: its steps' graphs are not in digest "
                      "files), and the rank's trace cannot be read: ") != std::string::npos);
}

TEST_CASE("digest: a digest that cannot serve has its trace read again", "[digest]") {
  Digested run;
  // --window, other analysis options than the digests were made with, the critical path's step graphs.
  for (std::string options : {" --window 0.1s:0.3s", " --step-marker 'no such range'", " --critical-path"}) {
    INFO(options);
    CHECK(succeeded(binary() + " analyze " + run.digests + options + " --format json").out ==
          succeeded(binary() + " analyze " + run.run + options + " --format json").out);
  }
}

TEST_CASE("digest: three processes with Slurm's rank variables give the report of one", "[digest]") {
  Digested run;
  // As `srun -n 3 gpuxray digest`: the three at once, each its shard.
  std::string three;
  for (int i = 0; i < 3; ++i)
    three +=
        fmt::format("SLURM_PROCID={} SLURM_NTASKS=3 {} digest {} -o {} & ", i, binary(), run.run, run.dir / "three");
  auto shards = runCommand("(" + three + "wait)");
  INFO(shards.err);
  CHECK(shards.err.find("shard 0/3 (SLURM_PROCID/SLURM_NTASKS): 3 of 3 files") != std::string::npos);
  CHECK(shards.err.find("shard 1/3 (SLURM_PROCID/SLURM_NTASKS): 3 of 3 files") != std::string::npos);
  CHECK(shards.err.find("shard 2/3 (SLURM_PROCID/SLURM_NTASKS): 2 of 2 files") != std::string::npos);
  CHECK(succeeded(binary() + " analyze " + (run.dir / "three") + " --format json").out ==
        succeeded(binary() + " analyze " + run.digests + " --format json").out);
}

TEST_CASE("digest: shard I of N holds the files whose index in the sorted list is I modulo N", "[digest]") {
  TempDir dir;
  std::string run = simulatedDemo(dir);
  succeeded(binary() + " digest " + run + " --shard 1/3 -o " + (dir / "shard1"));
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir / "shard1")) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::string>{"rank-00001.gpuxray.gxdigest", "rank-00004.gpuxray.gxdigest",
                                          "rank-00007.gpuxray.gxdigest"});
  // Open MPI's and PMI's variables, and a shard past the files.
  CHECK(succeeded("OMPI_COMM_WORLD_RANK=2 OMPI_COMM_WORLD_SIZE=4 " + binary() + " digest " + run + " -o " +
                  (dir / "ompi"))
            .err.find("shard 2/4 (OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE): 2 of 2 files") != std::string::npos);
  CHECK(fs::exists(dir / "ompi/rank-00006.gpuxray.gxdigest"));
  CHECK(succeeded("PMI_RANK=20 PMI_SIZE=32 " + binary() + " digest " + run + " -o " + (dir / "pmi"))
            .err.find("shard 20/32 (PMI_RANK/PMI_SIZE) has none of the 8 trace files") != std::string::npos);
  auto wrong = runCommand(binary() + " digest " + run + " --shard 3/3 -o " + (dir / "x"));
  CHECK(wrong.exit_code == 1);
  CHECK(wrong.err.find("--shard '3/3': expected I/N with 0 <= I < N") != std::string::npos);
  auto wrong_env = runCommand("SLURM_PROCID=x SLURM_NTASKS=3 " + binary() + " digest " + run + " -o " + (dir / "x"));
  CHECK(wrong_env.exit_code == 1);
  CHECK(wrong_env.err.find("SLURM_PROCID='x' and SLURM_NTASKS='3' name no shard") != std::string::npos);
  auto among = runCommand(binary() + " digest " + run + " -o " + run);
  CHECK(among.exit_code == 1);
  CHECK(among.err.find("the digests go to a directory of their own, not among the traces") != std::string::npos);
}

TEST_CASE("digest: a digest of another digest format version is refused naming it", "[digest]") {
  Digested run;
  std::string one = run.digestOf(2);
  std::vector<uint8_t> bytes = bytesOf(one);
  // Version 3 held every time point's launch, where version 4 holds only those unlike their gap's.
  bytes[8] = 3;
  writeBytes(one, bytes);
  CHECK_THROWS_WITH(gpuxray::analysis::readDigestFile(one),
                    one + ": a digest of format version 3, and this gpuxray (" + gpuxray::kToolVersion +
                        ") reads version 4: make the digests again with this gpuxray");
  bytes[8] = 99;
  writeBytes(one, bytes);
  CHECK_THROWS_WITH(gpuxray::analysis::readDigestFile(one),
                    one + ": a digest of format version 99, and this gpuxray (" + gpuxray::kToolVersion +
                        ") reads version 4: make the digests again with this gpuxray");
  auto result = succeeded(binary() + " analyze " + run.digests);
  CHECK(result.out.find(one + ": a digest of format version 99") != std::string::npos);
  CHECK(result.out.find("1 of 8 ranks have no file (rank 2)") != std::string::npos);
}

TEST_CASE("digest: a digest of another gpuxray version is refused naming it", "[digest]") {
  Digested run;
  std::string one = run.digestOf(2);
  std::vector<uint8_t> good = bytesOf(one);
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
  std::string message = one + ": a digest made by gpuxray " + other + ", not by this gpuxray (" + version +
                        "): make the digests again with this gpuxray";
  CHECK_THROWS_WITH(gpuxray::analysis::readDigestFile(one), message);
  // Alone, it is the error; beside others, a warning and its rank missing.
  auto alone = runCommand(binary() + " analyze " + one);
  CHECK(alone.exit_code == 2);
  CHECK(alone.err == "gpuxray: error: " + message + "\n");
  auto result = succeeded(binary() + " analyze " + run.digests);
  CHECK(result.out.find(message + "; file skipped") != std::string::npos);
}

TEST_CASE("digest: a digest of another run is refused naming it", "[digest]") {
  Digested run;
  std::string other = simulatedDemo(run.dir, "other", "--run-id other-run");
  succeeded(binary() + " digest " + other + "/rank-00002.gpuxray -o " + (run.dir / "other-digests"));
  fs::copy_file(run.dir / "other-digests/rank-00002.gpuxray.gxdigest", run.digestOf(2),
                fs::copy_options::overwrite_existing);
  auto result = runCommand(binary() + " analyze " + run.digests);
  CHECK(result.exit_code == 2);
  CHECK(std::count(result.err.begin(), result.err.end(), '\n') == 1);
  CHECK(result.err.find("run 'other-run' (1 file, e.g. " + run.digestOf(2) + ")") != std::string::npos);
}

TEST_CASE("digest: damaged digests are skipped naming them, missing shards a warning naming the ranks", "[digest]") {
  Digested run;
  std::string one = run.digestOf(2);
  std::vector<uint8_t> good = bytesOf(one);
  writeBytes(one, std::vector<uint8_t>(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(good.size() / 2)));
  std::vector<uint8_t> garbage(3000);
  for (size_t i = 0; i < garbage.size(); ++i) garbage[i] = static_cast<uint8_t>(i * 7919 % 251);
  writeBytes(run.digests + "/garbage.gxdigest", garbage);
  std::vector<uint8_t> flipped = bytesOf(run.digestOf(6));
  flipped[flipped.size() / 2] ^= 0x40;
  writeBytes(run.digestOf(6), flipped);
  fs::remove(run.digestOf(5));
  fs::remove(run.digestOf(7));
  auto result = succeeded(binary() + " analyze " + run.digests);
  CHECK(result.out.find(one + ": not a usable digest: cut short at byte " + std::to_string(good.size() / 2) +
                        "; file skipped") != std::string::npos);
  CHECK(result.out.find(run.digests +
                        "/garbage.gxdigest: not a gpuxray digest (it does not start with the digest magic); file "
                        "skipped") != std::string::npos);
  CHECK(result.out.find(run.digestOf(6) + ": not a usable digest: damaged at byte ") != std::string::npos);
  CHECK(result.out.find("run 'sim-demo': 4 of 8 ranks have no file (ranks 2, 5-7)") != std::string::npos);
  // Nothing else: the first one's line is the error.
  for (const auto& entry : fs::directory_iterator(run.digests)) {
    if (entry.path().filename() != "garbage.gxdigest") fs::remove(entry.path());
  }
  auto nothing = runCommand(binary() + " analyze " + run.digests);
  CHECK(nothing.exit_code == 2);
  CHECK(nothing.err == "gpuxray: error: " + run.digests +
                           "/garbage.gxdigest: not a gpuxray digest (it does not start with the digest magic)\n");
}

TEST_CASE("digest: diff takes digests as either side", "[digest]") {
  TempDir dir;
  std::string before = simulatedDemo(dir, "before", "--straggler 3=1.3");
  std::string after = simulatedDemo(dir, "after");
  succeeded(binary() + " digest " + before + " -o " + (dir / "before-digests"));
  succeeded(binary() + " digest " + after + " -o " + (dir / "after-digests"));
  // The sides' labels are the paths given.
  auto labelled = [&](std::string text) {
    for (const char* name : {"before-digests", "after-digests"}) {
      std::string from = dir / name, to = from.substr(0, from.size() - 8);
      for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at))
        text.replace(at, from.size(), to);
    }
    return text;
  };
  std::string traces = succeeded(binary() + " diff " + before + " " + after + " --format json").out;
  REQUIRE(traces.find("\"resolved\"") != std::string::npos);
  CHECK(labelled(succeeded(binary() + " diff " + (dir / "before-digests") + " " + after + " --format json").out) ==
        traces);
  CHECK(labelled(
            succeeded(binary() + " diff " + (dir / "before-digests") + " " + (dir / "after-digests") + " --format json")
                .out) == traces);
}
