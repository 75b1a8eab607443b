// Golden tests for the link analysis: a data-parallel all-reduce over 2 hosts x 2 GPUs whose
// network bytes NCCL's proxy reported, with the answers worked out by hand.

#include <fmt/core.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <string>

#include "analyzer/analysis/link_hotspots.h"
#include "tests/support/analyzed_run.h"
#include "tests/support/build_outputs.h"
#include "tests/support/run_builder.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace {

using gpuxray::testing::analyze;
using gpuxray::testing::cell;
using gpuxray::testing::RunBuilder;
using gpuxray::testing::table;
using gpuxray::testing::TempDir;
using gpuxray::testing::text;
namespace format = gpuxray::format;

constexpr uint64_t kDp = 0xD000000000000002ull;
constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kAllReduceBytes = 256 * kMiB;
constexpr uint64_t kNicBytesPerSecond = 50'000'000'000;
constexpr uint64_t kNvLinkBytesPerSecond = 900'000'000'000;

std::string rawUuid(int rank) {
  return std::string(16, static_cast<char>(0xa0 + rank));
}

// As CUPTI's link records name a GPU: "GPU-a0a0a0a0-a0a0-a0a0-a0a0-a0a0a0a0a0a0".
std::string uuidText(int rank) {
  std::string byte = fmt::format("{:02x}", 0xa0 + rank);
  auto bytes = [&](int n) {
    std::string s;
    for (int i = 0; i < n; ++i) s += byte;
    return s;
  };
  return "GPU-" + bytes(4) + "-" + bytes(2) + "-" + bytes(2) + "-" + bytes(2) + "-" + bytes(6);
}

// Ranks 0, 1 on node-0 and 2, 3 on node-1, one GPU each, every GPU linked to its host's NVSwitch,
// two 50 GB/s NICs per host. Two 10 ms steps: compute 0-4 ms, a 256 MiB ring all-reduce 4-9 ms.
// Per step, the network bytes NCCL's proxy reported (communicator rank = global rank):
//   0 -> 2: 64 MiB, 2 -> 0: 64 MiB, 0 -> 3: 32 MiB, 3 -> 0: 32 MiB, 1 -> 3: 96 MiB, 3 -> 1: 96 MiB
// so with one NIC per local rank (mlx5_0 for local rank 0, mlx5_1 for 1), each NIC carries
//   node-0: mlx5_0 (rank 0) 64+64+32+32 = 192 MiB, mlx5_1 (rank 1) 96+96 = 192 MiB: balanced;
//   node-1: mlx5_0 (rank 2) 64+64 = 128 MiB, mlx5_1 (rank 3) 96+96+32+32 = 256 MiB:
//           256 / mean(128, 256) = 2 / 1.5 = 1.33x.
// Inside each host the ring's hop (0 -> 1, 2 -> 3) is estimated: 2(n-1)/n x 256 MiB = 384 MiB on
// the sender's and on the receiver's NVLink. The ring's hops across hosts (1 -> 2, 3 -> 0) are
// measured by the proxy, so they are not estimated again.
void writeRun(const std::filesystem::path& dir) {
  RunBuilder run("golden-links", 4);
  for (int r = 0; r < 4; ++r) {
    auto& rank = run.rank(r, r < 2 ? "node-0" : "node-1", r % 2);
    format::DeviceProperties device;
    device.device_id = 0;
    device.uuid = rawUuid(r);
    device.name = "NVIDIA H200";
    rank.header.devices.push_back(device);
    format::Link nvlink;
    nvlink.kind = format::LinkKind::kNvLink;
    nvlink.a = {format::EndpointKind::kGpu, uuidText(r), 0};
    nvlink.b = {format::EndpointKind::kNvSwitch, "nvswitch", -1};
    nvlink.version = 4;
    nvlink.width = 18;
    nvlink.bandwidth_bytes_per_s = kNvLinkBytesPerSecond;
    // node-0's ranks list their link in the header, node-1's report it during capture, as CUPTI does.
    (r < 2 ? rank.header.links : rank.link_records).push_back(nvlink);
    for (int n = 0; n < 2; ++n) {
      format::NetworkInterface nic;
      nic.name = "mlx5_" + std::to_string(n);
      nic.bandwidth_bytes_per_s = kNicBytesPerSecond;
      nic.transport = "IB";
      rank.header.nics.push_back(nic);
    }
    rank.communicator(kDp, "dp", r, 4, 2);
  }
  struct Flow {
    int from, to;
    uint64_t mib;
  };
  const Flow flows[] = {{0, 2, 64}, {2, 0, 64}, {0, 3, 32}, {3, 0, 32}, {1, 3, 96}, {3, 1, 96}};
  for (int step = 0; step < 2; ++step) {
    double t = step * 10'000.0;
    for (int r = 0; r < 4; ++r) {
      auto& rank = run.rank(r, r < 2 ? "node-0" : "node-1", r % 2);
      rank.range("ProfilerStep#" + std::to_string(step), t, t + 10'000);
      rank.kernel("gemm", t, t + 4'000);
      rank.collective(kDp, "AllReduce", static_cast<uint64_t>(step + 1), t + 4'000, t + 9'000, kAllReduceBytes);
      uint64_t op = rank.ops.back().record.operation_id;
      for (const Flow& f : flows) {
        if (f.from == r) rank.netTransfer(kDp, op, true, f.to, 0, t + 4'000, t + 9'000, f.mib * kMiB);
        if (f.to == r) rank.netTransfer(kDp, op, false, f.from, 0, t + 4'000, t + 9'000, f.mib * kMiB);
      }
    }
  }
  run.write(dir);
}

const gpuxray::analysis::LinkLoadResult& linkNamed(const gpuxray::analysis::LinkHotspotsResult& result,
                                                   const std::string& label, size_t* index = nullptr) {
  for (size_t l = 0; l < result.links.size(); ++l) {
    if (result.links[l].label() == label) {
      if (index != nullptr) *index = l;
      return result.links[l];
    }
  }
  FAIL("no link " << label);
  throw;
}

const gpuxray::analysis::LinkUse* useOf(const gpuxray::analysis::LinkLoadResult& link, int from, int to) {
  for (const auto& use : link.uses) {
    if (use.from_rank == from && use.to_rank == to) return &use;
  }
  return nullptr;
}

size_t rowOf(const gpuxray::report::Table& t, const std::string& key, const std::string& value) {
  for (size_t row = 0; row < t.rows.size(); ++row) {
    if (text(t, row, key) == value) return row;
  }
  FAIL("no row with " << key << " = " << value);
  return 0;
}

}  // namespace

TEST_CASE("analyze: link load from network transfers and ring estimates, with the NIC imbalance named") {
  TempDir dir;
  writeRun(dir.path());
  auto a = analyze(dir.path().string());

  const auto& links = table(a.report, "link_hotspots", "links");
  REQUIRE(links.rows.size() == 8);
  // The busiest: node-1's mlx5_1, 128 MiB each way per step over 10 ms of 50 GB/s, in 5 ms transfers.
  CHECK(text(links, 0, "link") == "node-1 NIC mlx5_1");
  CHECK(text(links, 0, "kind") == "NIC");
  CHECK(text(links, 0, "source") == "measured");
  CHECK(cell(links, 0, "bytes_per_step") == Approx(256.0 * kMiB));
  CHECK(cell(links, 0, "utilization_pct") == Approx(100.0 * 128 * kMiB / (0.010 * kNicBytesPerSecond)));
  CHECK(cell(links, 0, "busy_bandwidth_pct") == Approx(100.0 * 128 * kMiB / (0.005 * kNicBytesPerSecond)));
  CHECK(cell(links, 0, "capacity") == Approx(kNicBytesPerSecond));
  size_t nic = rowOf(links, "link", "node-1 NIC mlx5_0");
  CHECK(cell(links, nic, "bytes_per_step") == Approx(128.0 * kMiB));
  nic = rowOf(links, "link", "node-0 NIC mlx5_1");
  CHECK(cell(links, nic, "bytes_per_step") == Approx(192.0 * kMiB));
  size_t nvlink = rowOf(links, "link", "node-0 NVLink GPU0 ↔ NVSwitch");
  CHECK(text(links, nvlink, "source") == "estimated");
  CHECK(cell(links, nvlink, "bytes_per_step") == Approx(384.0 * kMiB));
  CHECK(cell(links, nvlink, "utilization_pct") == Approx(100.0 * 384 * kMiB / (0.010 * kNvLinkBytesPerSecond)));
  nvlink = rowOf(links, "link", "node-1 NVLink GPU1 ↔ NVSwitch");
  CHECK(cell(links, nvlink, "bytes_per_step") == Approx(384.0 * kMiB));

  const auto& groups = table(a.report, "link_hotspots", "groups");
  REQUIRE(groups.rows.size() == 4);
  for (size_t row = 0; row < groups.rows.size(); ++row) {
    INFO(text(groups, row, "host") << " " << text(groups, row, "links"));
    bool hot = text(groups, row, "host") == "node-1" && text(groups, row, "links") == "NICs";
    CHECK(cell(groups, row, "imbalance") == Approx(hot ? 4.0 / 3.0 : 1.0));
  }

  REQUIRE(a.report.metric("link_imbalance") != nullptr);
  CHECK(a.report.metric("link_imbalance")->value == Approx(4.0 / 3.0));
  REQUIRE(a.report.metric("link_utilization_pct") != nullptr);
  CHECK(a.report.metric("link_utilization_pct")->value == Approx(100.0 * 128 * kMiB / (0.010 * kNicBytesPerSecond)));
  const gpuxray::report::Finding* finding = nullptr;
  for (const auto& f : a.report.findings) {
    if (f.analysis == "link_hotspots") finding = &f;
  }
  REQUIRE(finding != nullptr);
  CHECK(finding->summary == "node-1's NIC mlx5_1 carries 1.33x the mean of its host's NICs");

  // The same as data: the topology, every link with its bytes in all and its users, the groups.
  auto result = gpuxray::analysis::computeLinkHotspots(a.session->input());
  CHECK(result.steps == 2);
  CHECK(result.step_seconds == Approx(0.010));
  CHECK(result.nics_assumed);
  REQUIRE(result.hosts.size() == 2);
  CHECK(result.hosts[0].host == "node-0");
  REQUIRE(result.hosts[0].gpus.size() == 2);
  CHECK(result.hosts[0].gpus[1].rank == 1);
  CHECK(result.hosts[0].gpus[1].name == "GPU1");
  CHECK(result.hosts[0].gpus[1].id == uuidText(1));
  CHECK(result.hosts[0].links.size() == 4);  // two NVLinks, two NICs
  size_t mlx5_1 = 0;
  linkNamed(result, "node-0 NIC mlx5_1", &mlx5_1);
  CHECK(result.hosts[0].gpus[1].nic == mlx5_1);
  const auto& hot = linkNamed(result, "node-1 NIC mlx5_1");
  CHECK(hot.forward_bytes == 2 * (96 + 32) * kMiB);  // sent by rank 3 over both steps
  CHECK(hot.backward_bytes == 2 * (96 + 32) * kMiB);
  CHECK(hot.capacity_bytes_per_s == Approx(kNicBytesPerSecond));
  CHECK(hot.network_bytes == 2 * 256 * kMiB);
  CHECK(hot.busy_ns == 2 * 5'000'000);
  CHECK(hot.measured);
  CHECK_FALSE(hot.estimated);
  const auto* to_rank_1 = useOf(hot, 3, 1);
  REQUIRE(to_rank_1 != nullptr);
  CHECK(to_rank_1->bytes == 2 * 96 * kMiB);
  CHECK(to_rank_1->operation == "AllReduce");
  CHECK(to_rank_1->comm_hash == kDp);
  CHECK(to_rank_1->measured);
  REQUIRE(useOf(hot, 0, 3) != nullptr);
  CHECK(useOf(hot, 0, 3)->bytes == 2 * 32 * kMiB);
  const auto& nvlink_gpu0 = linkNamed(result, "node-0 NVLink GPU0 ↔ NVSwitch");
  CHECK(nvlink_gpu0.estimated);
  REQUIRE(nvlink_gpu0.uses.size() == 1);
  CHECK(nvlink_gpu0.uses[0].from_rank == 0);
  CHECK(nvlink_gpu0.uses[0].to_rank == 1);
  CHECK(nvlink_gpu0.uses[0].bytes == 2 * 384 * kMiB);
  CHECK_FALSE(nvlink_gpu0.uses[0].measured);
  CHECK(std::isnan(nvlink_gpu0.achieved_bytes_per_s));  // no proxy transfers on an NVLink
  REQUIRE(result.worst_group.has_value());
  const auto& worst = result.groups[*result.worst_group];
  CHECK(worst.host == "node-1");
  CHECK(worst.group == "NICs");
  CHECK(result.links[worst.busiest].label() == "node-1 NIC mlx5_1");
  CHECK(worst.imbalance == Approx(4.0 / 3.0));
  CHECK(result.imbalance_flagged);
  // The transfers record no time waiting on the network: no NIC's bandwidth is known, none is compared.
  CHECK(hot.network_wait_ns == 0);
  CHECK(std::isnan(hot.achieved_bytes_per_s));
  CHECK(result.nics_compared.empty());
  CHECK_FALSE(result.slowest_nic.has_value());
}

TEST_CASE("analyze: the CLI names the hot NIC in text and JSON") {
  TempDir dir;
  writeRun(dir.path() / "run");
  std::string gpuxray = gpuxray::testing::gpuxrayBinary() + " analyze " + (dir / "run");
  auto result = gpuxray::testing::runCommand(gpuxray);
  INFO(result.err);
  REQUIRE(result.exit_code == 0);
  CHECK(result.out.find("[warning] node-1's NIC mlx5_1 carries 1.33x the mean of its host's NICs") !=
        std::string::npos);
  size_t metric = result.out.find("\n  link_imbalance ");
  REQUIRE(metric != std::string::npos);
  CHECK(result.out.substr(metric, result.out.find('\n', metric + 1) - metric).find(" 1.33x  ") != std::string::npos);

  auto json = gpuxray::testing::runCommand(gpuxray + " --format json");
  REQUIRE(json.exit_code == 0);
  CHECK(json.out.find("\"link_imbalance\": {\n      \"value\": 1.333") != std::string::npos);
  CHECK(json.out.find("\"summary\": \"node-1's NIC mlx5_1 carries 1.33x the mean of its host's NICs\"") !=
        std::string::npos);
}

TEST_CASE("analyze: the simulated demo's half-speed NIC is named as a slow link, and the bubbles as the pipeline's") {
  TempDir dir;
  std::string run = dir / "demo";
  auto simulated =
      gpuxray::testing::runCommand(gpuxray::testing::gpuxrayBinary() + " simulate --preset demo -o " + run);
  INFO(simulated.err);
  REQUIRE(simulated.exit_code == 0);
  auto a = gpuxray::testing::analyzeRun(run);
  const auto& nics = table(a.report, "link_hotspots", "nic_bandwidth");
  REQUIRE(nics.rows.size() >= 2);
  // The planted NIC (node-00's fourth) moves data at half the others' speed.
  CHECK(nics.rows[0][0].text == "node-00 NIC mlx5_3");
  CHECK(cell(nics, 0, "vs_median") == Approx(0.5).margin(0.02));
  CHECK(cell(nics, 1, "vs_median") == Approx(1.0).margin(0.02));
  REQUIRE(a.report.metric("slow_link_ratio") != nullptr);
  CHECK(a.report.metric("slow_link_ratio")->value == Approx(2.0).margin(0.05));
  bool named_nic = false, named_bubbles = false;
  for (const auto& f : a.report.findings) {
    named_nic = named_nic || f.summary.starts_with("slow link: node-00's NIC mlx5_3 moves data at");
    named_bubbles = named_bubbles || (f.analysis == "pipeline_bubbles" && f.summary.find("pipeline stage") == 0);
  }
  CHECK(named_nic);
  CHECK(named_bubbles);

  // results.link_hotspots: the slow NIC flagged, its seven siblings on node-00 not.
  const gpuxray::report::ResultValue* links_result = nullptr;
  for (const auto& [id, value] : a.report.results) {
    if (id == "link_hotspots") links_result = &value;
  }
  REQUIRE(links_result != nullptr);
  const auto* slowest = links_result->find("slowest_nic");
  REQUIRE(slowest != nullptr);
  REQUIRE(slowest->kind() == gpuxray::report::ResultValue::Kind::kObject);
  CHECK(slowest->find("slow")->asBool());
  CHECK(slowest->find("severity")->asText() == "critical");
  CHECK(slowest->find("ratio")->asNumber() == Approx(2.0).margin(0.05));
  const auto& all_links = links_result->find("links")->items();
  auto slow_link = static_cast<size_t>(slowest->find("link")->asInteger());
  REQUIRE(slow_link < all_links.size());
  CHECK(all_links[slow_link].find("host")->asText() == "node-00");
  CHECK(all_links[slow_link].find("name")->asText() == "NIC mlx5_3");
  size_t siblings = 0;
  for (size_t l = 0; l < all_links.size(); ++l) {
    const auto& link = all_links[l];
    if (link.find("host")->asText() != "node-00" || link.find("kind")->asText() != "NIC") continue;
    CHECK(link.find("slow")->asBool() == (l == slow_link));
    const auto* network = link.find("network");
    REQUIRE(network->kind() == gpuxray::report::ResultValue::Kind::kObject);
    CHECK(network->find("vs_median")->asNumber() == Approx(l == slow_link ? 0.5 : 1.0).margin(0.05));
    CHECK(!link.find("uses")->items().empty());
    siblings += l != slow_link;
  }
  CHECK(siblings == 7);  // node-00's other NICs

  // results.pipeline_bubbles: p = 2, m = 8, stage 0 waiting on stage 1 (the slower one).
  const gpuxray::report::ResultValue* pipeline_result = nullptr;
  for (const auto& [id, value] : a.report.results) {
    if (id == "pipeline_bubbles") pipeline_result = &value;
  }
  REQUIRE(pipeline_result != nullptr);
  const auto& pipelines = pipeline_result->find("pipelines")->items();
  REQUIRE(!pipelines.empty());
  CHECK(pipelines[0].find("stages_count")->asInteger() == 2);
  CHECK(pipelines[0].find("micro_batches")->asInteger() == 8);
  CHECK(!pipelines[0].find("messages")->items().empty());
  const auto* verdict = pipeline_result->find("verdict");
  REQUIRE(verdict->kind() == gpuxray::report::ResultValue::Kind::kObject);
  CHECK(verdict->find("main_cause")->asText() == "waiting on stage 1");
  const auto& summaries = pipeline_result->find("stage_summaries")->items();
  const auto& worst = summaries.at(static_cast<size_t>(verdict->find("worst")->asInteger()));
  CHECK(worst.find("stage")->asInteger() == 0);
  CHECK(worst.find("waits_on_stage")->asInteger() == 1);
  CHECK(summaries.at(static_cast<size_t>(verdict->find("slowest")->asInteger())).find("stage")->asInteger() == 1);
  // Each stage and step keeps its 32 longest bubbles; with the rest counted they add up to its bubble time.
  for (const auto& stage : pipelines[0].find("stages")->items()) {
    for (const auto& step : stage.find("steps")->items()) {
      const auto& bubbles = step.find("bubbles")->items();
      CHECK(bubbles.size() <= 32);
      int64_t kept = 0;
      for (const auto& bubble : bubbles) {
        const auto& span = bubble.find("span_ns")->items();
        kept += span[1].asInteger() - span[0].asInteger();
      }
      CHECK(kept + step.find("bubbles_left_out_ns")->asInteger() == step.find("bubble_ns")->asInteger());
    }
  }
}

// A tensor-parallel group of four ranks on one host whose headers name no GPU UUIDs, each rank seeing
// its GPU as device 0 and listing its NVLink to the NVSwitch with an id that is no UUID ("GPU-0").
// One 10 ms step holds a 256 MiB AllReduce: each rank sends its ring successor 2(4-1)/4 x 256 MiB =
// 384 MiB through its own NVLink and receives as much from its predecessor through it, so every NVLink
// carries 768 MiB, and none of the bytes is left on a "no link records" GPU.
// Two processes on one GPU (as the H200 check ran NCCL's two ranks on its one device): one GPU, named
// once, whatever the ranks' local indices.
TEST_CASE("analyze: two ranks on the same GPU are one GPU of the topology") {
  TempDir dir;
  RunBuilder run("one-gpu", 2);
  for (int r = 0; r < 2; ++r) {
    auto& rank = run.rank(r, "node-0", r);
    format::DeviceProperties device;
    device.device_id = 0;
    device.uuid = rawUuid(0);
    rank.header.devices.push_back(device);
    rank.communicator(kDp, "dp", r, 2, 1);
    rank.range("ProfilerStep#0", 0, 10'000);
    rank.kernel("gemm", 0, 4'000);
    rank.collective(kDp, "AllReduce", 1, 4'000, 9'000, kAllReduceBytes);
  }
  run.write(dir.path() / "run");
  auto a = analyze(dir / "run");
  auto result = gpuxray::analysis::computeLinkHotspots(a.session->input());
  REQUIRE(result.hosts.size() == 1);
  REQUIRE(result.hosts[0].gpus.size() == 2);
  for (const auto& gpu : result.hosts[0].gpus) {
    INFO("rank " << gpu.rank);
    CHECK(gpu.name == "GPU0");
    CHECK(gpu.id == uuidText(0));
  }
}

TEST_CASE("analyze: a tensor-parallel all-reduce loads each GPU's NVLink when the headers list no UUIDs") {
  TempDir dir;
  constexpr uint64_t kTp = 0x7000000000000004ull;
  RunBuilder run("tp-nvlinks", 4);
  for (int r = 0; r < 4; ++r) {
    auto& rank = run.rank(r, "node-0", r);
    format::Link nvlink;
    nvlink.kind = format::LinkKind::kNvLink;
    nvlink.a = {format::EndpointKind::kGpu, "GPU-0", 0};
    nvlink.b = {format::EndpointKind::kNvSwitch, "nvswitch", -1};
    nvlink.bandwidth_bytes_per_s = kNvLinkBytesPerSecond;
    rank.header.links.push_back(nvlink);
    rank.communicator(kTp, "tp", r, 4, 1);
    rank.range("ProfilerStep#0", 0, 10'000);
    rank.kernel("gemm", 0, 4'000);
    rank.collective(kTp, "AllReduce", 1, 4'000, 9'000, kAllReduceBytes);
  }
  run.write(dir.path() / "run");
  auto a = analyze(dir / "run");
  auto result = gpuxray::analysis::computeLinkHotspots(a.session->input());
  size_t nvlinks = 0;
  for (const auto& link : result.links) {
    INFO(link.label());
    if (link.kind == "network") continue;  // the host lists no NIC: its network, with no bytes here
    CHECK(link.kind == "NVLink");
    CHECK(link.bytes() == 2 * 384 * kMiB);
    CHECK(link.forward_bytes == 384 * kMiB);
    CHECK(link.estimated);
    nvlinks += link.kind == "NVLink" ? 1u : 0u;
  }
  CHECK(nvlinks == 4);
  const auto& gpu2 = linkNamed(result, "node-0 NVLink GPU2 ↔ NVSwitch");
  REQUIRE(useOf(gpu2, 2, 3) != nullptr);
  CHECK(useOf(gpu2, 2, 3)->bytes == 384 * kMiB);
  REQUIRE(useOf(gpu2, 1, 2) != nullptr);
  CHECK(useOf(gpu2, 1, 2)->bytes == 384 * kMiB);
}

// The simulator's TP8 x DP2 run: the tensor group's all-reduces inside each node load the NVLinks.
TEST_CASE("analyze: a simulated TP8 run puts its intra-node collectives on the NVLinks") {
  TempDir dir;
  std::string run = dir / "tp8";
  auto simulated = gpuxray::testing::runCommand(gpuxray::testing::gpuxrayBinary() +
                                                " simulate --model gpt-1.3b --cluster dgx-a100 --nodes 2 --tp 8 "
                                                "--dp 2 --steps 2 -o " +
                                                run);
  INFO(simulated.err);
  REQUIRE(simulated.exit_code == 0);
  auto a = gpuxray::testing::analyzeRun(run);
  auto result = gpuxray::analysis::computeLinkHotspots(a.session->input());
  size_t nvlinks = 0;
  uint64_t first = 0;
  for (const auto& link : result.links) {
    INFO(link.label());
    CHECK(link.kind != "GPU");  // every GPU's bytes found its link records
    if (link.kind != "NVLink") continue;
    ++nvlinks;
    CHECK(link.bytes() > 0);
    CHECK(link.estimated);
    if (first == 0) first = link.bytes();
    CHECK(link.bytes() == first);  // one ring per node, every GPU in it alike
  }
  CHECK(nvlinks == 16);
}
