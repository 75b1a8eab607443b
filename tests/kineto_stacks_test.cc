// Traces from the stacks beyond CUDA + NCCL + recent PyTorch, hand-made with the names and argument
// layouts their projects write (where each fact comes from is said at each trace): RCCL's Generic
// kernel, PyTorch before 2.2 (sizes only in record_param_comms' "Input Dims"), DeepEP's expert
// all-to-all, the custom all-reduce of vLLM and TensorRT-LLM, kernels named with --comm-kernel, a
// CUDA-graph capture and its replay, and launches whose configuration the trace does not record.

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "analyzer/analysis/communicators.h"
#include "analyzer/analysis/occupancy.h"
#include "analyzer/load/kineto_collectives.h"
#include "analyzer/model/communication_kernels.h"
#include "analyzer/report/units.h"
#include "tests/support/analyzed_run.h"
#include "tests/support/build_outputs.h"
#include "tests/support/kineto_traces.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace {

using gpuxray::testing::TempDir;
using nlohmann::json;
namespace model = gpuxray::model;
namespace analysis = gpuxray::analysis;

// A Kineto kernel event; `launch` holds the launch-configuration arguments CUPTI gives ("" for a
// ROCm trace, whose kernels carry only "kind": "Dispatch Kernel", as in HTA's MI250 test trace).
json kernel(const std::string& name, double ts, double dur, int stream, int correlation, int external_id,
            bool launch = true) {
  json args = {{"External id", external_id}, {"device", 0}, {"stream", stream}, {"correlation", correlation}};
  if (launch) {
    args["registers per thread"] = 64;
    args["shared memory"] = 0;
    args["grid"] = json::array({132, 1, 1});
    args["block"] = json::array({256, 1, 1});
  } else {
    args["kind"] = "Dispatch Kernel";
  }
  return {{"ph", "X"},     {"cat", "kernel"}, {"name", name}, {"pid", 0},
          {"tid", stream}, {"ts", ts},        {"dur", dur},   {"args", args}};
}

json runtime(const std::string& name, double ts, double dur, int correlation) {
  return {{"ph", "X"},    {"cat", "cuda_runtime"},
          {"name", name}, {"pid", 7},
          {"tid", 7},     {"ts", ts},
          {"dur", dur},   {"args", {{"correlation", correlation}}}};
}

json cpuOp(const std::string& name, double ts, double dur, json args) {
  return {{"ph", "X"}, {"cat", "cpu_op"}, {"name", name}, {"pid", 7},
          {"tid", 7},  {"ts", ts},        {"dur", dur},   {"args", args}};
}

json gpuAnnotation(const std::string& name, double ts, double dur, int stream) {
  return {{"ph", "X"},  {"cat", "gpu_user_annotation"}, {"name", name}, {"pid", 0}, {"tid", stream}, {"ts", ts},
          {"dur", dur}, {"args", {{"External id", 1}}}};
}

json h100() {
  return {{"id", 0},
          {"name", "NVIDIA H100 80GB HBM3"},
          {"computeMajor", 9},
          {"computeMinor", 0},
          {"maxThreadsPerBlock", 1024},
          {"maxThreadsPerMultiprocessor", 2048},
          {"regsPerBlock", 65536},
          {"regsPerMultiprocessor", 65536},
          {"warpSize", 32},
          {"sharedMemPerBlock", 49152},
          {"sharedMemPerBlockOptin", 232448},
          {"sharedMemPerMultiprocessor", 233472},
          {"numSms", 132}};
}

// As ROCm's Kineto writes it (HTA's mi250 test trace and TraceLens' MI300X trace): warpSize 64 and
// "numSms" for the compute units.
json mi300x() {
  return {{"id", 0},
          {"name", "AMD Instinct MI300X"},
          {"computeMajor", 9},
          {"computeMinor", 4},
          {"maxThreadsPerBlock", 1024},
          {"maxThreadsPerMultiprocessor", 2048},
          {"regsPerBlock", 65536},
          {"warpSize", 64},
          {"sharedMemPerBlock", 65536},
          {"numSms", 304}};
}

std::string writeTrace(const TempDir& dir, json device, json distributed, std::vector<json> events) {
  json trace = json::object();
  trace["schemaVersion"] = 1;
  trace["deviceProperties"] = json::array({device});
  trace["traceEvents"] = events;
  if (!distributed.is_null()) trace["distributedInfo"] = distributed;
  gpuxray::testing::writeText(dir.path() / "trace" / "rank0.pt.trace.json", trace.dump());
  return (dir.path() / "trace").string();
}

// distributedInfo as PyTorch 2.2+ writes it (hta_nccl_data_rank0_of2's).
json twoRankGroup() {
  return json::parse(R"({"backend": "nccl", "rank": 0, "world_size": 2, "pg_count": 1, "pg_config": [{"pg_name": "0",
    "pg_desc": "default_pg", "backend_config": "cuda:nccl", "pg_size": 2, "ranks": [0, 1]}], "nccl_version": "2.21.5"})");
}

const gpuxray::report::Cell& breakdownCell(const gpuxray::report::Report& r, const std::string& key) {
  return gpuxray::testing::cellAt(gpuxray::testing::table(r, "time_breakdown", "ranks"), 0, key);
}

}  // namespace

TEST_CASE("stacks: the registry of communication kernels, name by name") {
  // NCCL's names before and after 2.19, and RCCL's Generic kernel (NCCL's src/device/common.h
  // declares ncclDevKernel_Generic; RCCL traces show ncclDevKernel_Generic_1 too).
  CHECK(model::communicationFamilyOf("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)")
            ->nccl);
  CHECK(model::communicationFamilyOf("ncclDevKernel_Generic_1(ncclDevKernelArgsStorage<4096ul>)")->nccl);
  // RCCL's MSCCL kernels: MSCCL_KERNEL_ENTRY_NAME(devredop, type, proto) = mscclKernel_##devredop##_##type##_##proto.
  CHECK(model::communicationFamilyOf("mscclKernel_Sum_half_Simple_false(ncclDevComm*, mscclAlgo*, mscclWork*)")->nccl);
  // DeepEP (csrc/kernels/intranode.cu, internode.cu, internode_ll.cu): namespace deep_ep::<mode>.
  CHECK(model::communicationOperationOf("void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*)") ==
        "EP dispatch");
  CHECK(model::communicationOperationOf("void deep_ep::internode::combine<8, 8, 32>(int4*, float*)") == "EP combine");
  CHECK(model::communicationOperationOf("void deep_ep::internode_ll::dispatch<true, false, 7168>(void*, void*)") ==
        "EP dispatch");
  CHECK(model::communicationOperationOf("void deep_ep::intranode::cached_notify_combine<8>(void**, int*)") ==
        "EP notify");
  CHECK(model::communicationOperationOf(
            "void deep_ep::internode_ll::clean_low_latency_buffer<256>(int*, int, int*, int)") == "EP notify");
  CHECK(model::communicationFamilyOf("void deep_ep::layout::get_dispatch_layout<256, 32, 8>(long const*, int*)") ==
        nullptr);
  // NVSHMEM's own kernels (nvshmemi_*), MSCCL++'s (they take mscclpp::DeviceHandle<...> channels).
  CHECK(model::communicationFamilyOf("void nvshmemi_proxy_quiet_entrypoint()") != nullptr);
  CHECK(model::communicationFamilyOf("void mscclpp::allreduce7<(mscclpp::Op)0, float>(float*, float*, float*, "
                                     "mscclpp::DeviceHandle<mscclpp::MemoryChannel>*)") != nullptr);
  // vLLM's (csrc/custom_all_reduce.cuh), SGLang's and aiter's copies of it, TensorRT-LLM's.
  CHECK(model::communicationOperationOf("void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, "
                                        "vllm::RankSignals, vllm::Signal*, __nv_bfloat16*, int, int)") == "AllReduce");
  CHECK(model::communicationOperationOf("aiter::cross_device_reduce_2stage<bf16,8,false>") == "AllReduce");
  CHECK(model::communicationOperationOf("void tensorrt_llm::kernels::oneShotAllReduceKernel<__nv_bfloat16, 8>("
                                        "tensorrt_llm::kernels::AllReduceParams)") == "AllReduce");
  CHECK(model::communicationFamilyOf(
            "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<int>>") == nullptr);
  CHECK(model::communicationFamilyOf("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn") == nullptr);

  SECTION("--comm-kernel adds a pattern, with its operation, before the families") {
    REQUIRE(model::addUserCommunicationKernel("moe_a2a_.*_kernel=AlltoAll").empty());
    const auto* user = model::communicationFamilyOf("void moe_a2a_send_kernel<float>(float*)");
    REQUIRE(user != nullptr);
    CHECK(user->operation == "AlltoAll");
    CHECK(user->library == "--comm-kernel moe_a2a_.*_kernel");
    CHECK_FALSE(model::addUserCommunicationKernel("a(b").empty());
    CHECK(model::addUserCommunicationKernel("") == "--comm-kernel needs a regular expression before '='");
    // A '=' inside the expression is part of it when what follows is not a plain name.
    REQUIRE(model::addUserCommunicationKernel("x=[0-9]+").empty());
    CHECK(model::communicationFamilyOf("x=42") != nullptr);
    model::clearUserCommunicationKernels();
    CHECK(model::communicationFamilyOf("void moe_a2a_send_kernel<float>(float*)") == nullptr);
  }
}

TEST_CASE("stacks: RCCL's Generic kernel takes its collective from the nccl: annotation or record_param_comms") {
  TempDir dir;
  // ROCm kernels carry no launch configuration; the record_param_comms op has a different External
  // id than the kernel (as in HTA's sampled traces) and is found around the launch, on its thread.
  std::string path =
      writeTrace(dir, mi300x(), twoRankGroup(),
                 {cpuOp("record_param_comms", 100, 50,
                        {{"External id", 11},
                         {"Collective name", "allreduce"},
                         {"In msg nelems", 262144},
                         {"Out msg nelems", 262144},
                         {"dtype", "Float"},
                         {"Group size", 2},
                         {"Process Group Name", "0"},
                         {"Process Group Description", "default_pg"},
                         {"Process Group Ranks", "[0, 1]"}}),
                  runtime("hipExtLaunchKernel", 120, 5, 21),
                  kernel("ncclDevKernel_Generic_1(ncclDevKernelArgsStorage<4096ul>)", 200, 100, 1, 21, 12, false),
                  runtime("hipExtLaunchKernel", 380, 5, 22), gpuAnnotation("nccl:broadcast", 400, 60, 1),
                  kernel("ncclDevKernel_Generic_1(ncclDevKernelArgsStorage<4096ul>)", 405, 50, 1, 22, 13, false),
                  runtime("hipLaunchKernel", 480, 5, 23),
                  kernel("void at::native::elementwise_kernel<128, 2>(int)", 500, 300, 0, 23, 14, false)});
  auto a = gpuxray::testing::analyze(path);
  const auto& rank = a.run.ranks.at(0);
  REQUIRE(rank.nccl_ops.size() == 2);
  CHECK(rank.name(rank.nccl_ops[0].func_id) == "AllReduce");
  CHECK(rank.nccl_ops[0].bytes == 262144u * 4);
  CHECK(rank.name(rank.nccl_ops[1].func_id) == "Broadcast");
  CHECK(rank.nccl_ops[1].bytes == 0);
  for (const auto& op : rank.nccl_ops) CHECK(op.comm_hash == gpuxray::load::processGroupHash("0"));
  REQUIRE(rank.communicators.size() == 1);
  CHECK(rank.communicators[0].name == "pg 0 (default_pg)");

  // The compute kernel's launch is not recorded: the table says so, and no finding is made from it.
  const auto& top = gpuxray::testing::table(a.report, "kernels", "top_kernels");
  CHECK(gpuxray::testing::cellAt(top, 0, "grid_blocks").display() == "not recorded");
  CHECK(gpuxray::testing::cellAt(top, 0, "occupancy_pct").display() == "n/a");
  for (const auto& f : a.report.findings) CHECK(f.analysis != "kernels");
  bool noted = false;
  for (const auto& note : gpuxray::testing::section(a.report, "kernels").notes)
    noted |= note.find("compute units (CUs)") != std::string::npos;
  CHECK(noted);
}

TEST_CASE("stacks: before PyTorch 2.2 the size is in record_param_comms' Input Dims, the group is the default one") {
  TempDir dir;
  // PyTorch 2.0/2.1's RECORD_PARAM_COMMS_DATA records {InputTensors, seq, pg_ptr, rank, colName,
  // inSplitSizes, outSplitSizes} (torch/csrc/distributed/c10d/ParamCommsUtils.hpp); with
  // record_shapes=True the profiler writes the first as "Input Dims" [[6144]] and "Input type"
  // "float" and the rest as Scalar or "" (HTA's sampled_rank-0: [[384], ...], "long"). No pg_config.
  std::string path = writeTrace(
      dir, h100(), json::parse(R"({"backend": "nccl", "rank": 0, "world_size": 2})"),
      {cpuOp("record_param_comms", 100, 50,
             {{"External id", 11},
              {"Ev Idx", 5},
              {"Input Dims", json::parse("[[6144], [], [], [], [], [], []]")},
              {"Input type", json::parse(R"(["float", "Scalar", "Scalar", "Scalar", "", "", ""])")}}),
       runtime("cudaLaunchKernel", 120, 5, 21),
       kernel("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", 200, 100, 20, 21, 12),
       cpuOp("record_param_comms", 400, 50,
             {{"External id", 15},
              {"Input Dims", json::parse("[[], []]")},
              {"Input type", json::parse(R"(["TensorList", "Scalar"])")}}),
       runtime("cudaLaunchKernel", 420, 5, 22),
       kernel("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", 500, 50, 20, 22, 16)});
  auto a = gpuxray::testing::analyze(path);
  const auto& rank = a.run.ranks.at(0);
  REQUIRE(rank.nccl_ops.size() == 2);
  CHECK(rank.nccl_ops[0].bytes == 6144u * 4);  // 24 KiB
  CHECK(rank.name(rank.nccl_ops[0].datatype_id) == "float");
  CHECK(rank.nccl_ops[1].bytes == 0);  // a TensorList records no shape
  REQUIRE(rank.communicators.size() == 1);
  CHECK(rank.communicators[0].name == "default group");
  CHECK(rank.communicators[0].nranks == 2);
  const auto& ops = gpuxray::testing::table(a.report, "collective_bandwidth", "operations");
  REQUIRE(!ops.rows.empty());
  CHECK(gpuxray::testing::cellAt(ops, 0, "communicator").text == "default group (data, 2 ranks)");
  CHECK(gpuxray::testing::cellAt(ops, 0, "bytes").number == 24576);
  CHECK(gpuxray::testing::cellAt(ops, 0, "algbw").number == Approx(24576 / 100e-6));
}

TEST_CASE(
    "stacks: DeepEP's dispatch and combine and custom all-reduce count as communication, not under --compat hta") {
  TempDir dir;
  std::string gemm =
      "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel";
  std::string path = writeTrace(
      dir, h100(), json(),
      {runtime("cudaLaunchKernel", 0, 2, 1), kernel(gemm, 10, 1000, 7, 1, 1), runtime("cudaLaunchKernel", 2, 2, 2),
       kernel("void deep_ep::layout::get_dispatch_layout<256, 32, 8>(long const*, int*, int*, int*, bool*, int, int, "
              "int, int)",
              1010, 90, 7, 2, 2),
       runtime("cudaLaunchKernel", 4, 2, 3),
       kernel("void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*, int*, long*, float*, int*, int*, int4 "
              "const*, "
              "float const*, long const*, float const*, bool const*, int const*, int, int, int, int, int, void**, int, "
              "int, int)",
              1100, 400, 20, 3, 3),
       runtime("cudaLaunchKernel", 6, 2, 4),
       kernel("void deep_ep::intranode::combine<__nv_bfloat16, 8, 768, 4096>(int4*, float*, int*, int*)", 1600, 400, 20,
              4, 4),
       runtime("cudaLaunchKernel", 8, 2, 5),
       kernel(
           "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, vllm::RankSignals, vllm::Signal*, "
           "__nv_bfloat16*, int, int)",
           2000, 100, 20, 5, 5),
       runtime("cudaLaunchKernel", 10, 2, 6),
       kernel("void tensorrt_llm::kernels::oneShotAllReduceKernel<__nv_bfloat16, "
              "8>(tensorrt_llm::kernels::AllReduceParams)",
              2100, 100, 20, 6, 6)});
  auto a = gpuxray::testing::analyze(path);
  const auto& rank = a.run.ranks.at(0);
  size_t communication = 0;
  for (const auto& act : rank.activities) communication += act.kind == model::ActivityKind::kCommunication;
  CHECK(communication == 4);
  CHECK(rank.nccl_ops.empty());  // no NCCL operation is made up for them: they are summed per library
  const auto& other = gpuxray::testing::table(a.report, "overlap", "other_communication");
  REQUIRE(other.rows.size() == 4);
  CHECK(gpuxray::testing::cellAt(other, 0, "library").text == "DeepEP intranode");
  CHECK(gpuxray::testing::cellAt(other, 0, "operation").text == "EP combine");
  CHECK(gpuxray::testing::cellAt(other, 1, "operation").text == "EP dispatch");
  CHECK(gpuxray::testing::cellAt(other, 1, "time").number == 400e3);
  CHECK(gpuxray::testing::cellAt(other, 2, "library").text == "custom all-reduce (TensorRT-LLM, SGLang)");
  CHECK(gpuxray::testing::cellAt(other, 3, "operation").text == "AllReduce");
  // GPU span 10..2200 µs: compute 10..1100 (1090 µs), then communication 1100..1500 and 1600..2200
  // (1000 µs), all of it exposed.
  CHECK(breakdownCell(a.report, "communication_pct").number == Approx(100.0 * 1000 / 2190));
  CHECK(breakdownCell(a.report, "compute_pct").number == Approx(100.0 * 1090 / 2190));

  // HTA's own rule is "the name contains nccl": the same kernels are computation there.
  auto hta = gpuxray::testing::runCommand(gpuxray::testing::gpuxrayBinary() + " analyze --format json --compat hta " + path);
  REQUIRE(hta.exit_code == 0);
  auto report = json::parse(hta.out);
  CHECK(report["sections"]["hta"]["tables"]["temporal_breakdown"]["rows"][0]["compute_us"] == 2090);
}

TEST_CASE("stacks: --comm-kernel REGEX[=OP] counts a library's kernels as communication") {
  TempDir dir;
  std::string path =
      writeTrace(dir, h100(), json(),
                 {runtime("cudaLaunchKernel", 0, 2, 1), kernel("void my_gemm_kernel<float>(float*)", 10, 100, 7, 1, 1),
                  runtime("cudaLaunchKernel", 2, 2, 2),
                  kernel("void fused_moe_a2a_kernel<float>(float*, int)", 110, 100, 21, 2, 2)});
  std::string gpuxray = gpuxray::testing::gpuxrayBinary();
  auto plain = gpuxray::testing::runCommand(gpuxray + " analyze " + path);
  REQUIRE(plain.exit_code == 0);
  CHECK(plain.out.find("No communication kernels in the trace") != std::string::npos);
  auto named = gpuxray::testing::runCommand(gpuxray + " analyze --comm-kernel 'moe_a2a=AlltoAll' " + path);
  INFO(named.err);
  REQUIRE(named.exit_code == 0);
  CHECK(named.out.find("No communication kernels in the trace") == std::string::npos);
  CHECK(named.out.find("--comm-kernel moe_a2a") != std::string::npos);  // the library, in the overlap section
  CHECK(named.out.find("AlltoAll") != std::string::npos);
  auto bad = gpuxray::testing::runCommand(gpuxray + " analyze --comm-kernel 'moe(' " + path);
  CHECK(bad.exit_code != 0);
  CHECK(bad.err.find("--comm-kernel 'moe(' is not a valid regular expression") != std::string::npos);
}

TEST_CASE("stacks: a CUDA-graph capture is left out of idle time, a replay's kernels are attributed to its launch") {
  TempDir dir;
  // CUDA's stream capture: launches between cudaStreamBeginCapture and cudaStreamEndCapture are
  // recorded into the graph, no kernel runs; cudaGraphLaunch's kernels carry its correlation id.
  std::string path =
      writeTrace(dir, h100(), json(),
                 {runtime("cudaLaunchKernel", 0, 2, 1), kernel("void warmup_kernel(float*)", 10, 10, 7, 1, 1),
                  runtime("cudaStreamBeginCapture", 30, 1, 2), runtime("cudaLaunchKernel", 40, 2, 3),
                  runtime("cudaLaunchKernel", 50, 2, 4), runtime("cudaStreamEndCapture", 1000, 2, 5),
                  runtime("cudaGraphInstantiateWithFlags", 1010, 50, 6), runtime("cudaGraphLaunch", 1100, 5, 7),
                  kernel("void layer_kernel(float*)", 1110, 100, 7, 7, 7),
                  kernel("void layer_kernel(float*)", 1210, 100, 7, 7, 7)});
  auto a = gpuxray::testing::analyze(path);
  // Span 10..1310 µs; the capture 30..1002 µs is all idle GPU time: 972 µs left out.
  CHECK(breakdownCell(a.report, "time").number == Approx((1300 - 972) * 1e3));
  CHECK(breakdownCell(a.report, "idle_pct").number == Approx(100.0 * (328 - 210) / 328));
  const auto& notes = gpuxray::testing::section(a.report, "time_breakdown").notes;
  bool capture = false, replay = false;
  for (const auto& note : notes) {
    capture |= note.find("inside CUDA-graph captures") != std::string::npos && note.find("972") != std::string::npos;
    replay |= note.find("2 kernels ran from CUDA-graph launches") != std::string::npos;
  }
  CHECK(capture);
  CHECK(replay);
}

TEST_CASE("stacks: names that agree with their role, and no '1 of 0 ranks'") {
  CHECK(analysis::roleNamedIn("model dp1") == analysis::CommunicatorRole::kData);
  CHECK(analysis::roleNamedIn("pg 3 (tensor_parallel)") == analysis::CommunicatorRole::kTensor);
  CHECK(analysis::roleNamedIn("pp_group") == analysis::CommunicatorRole::kPipeline);
  CHECK_FALSE(analysis::roleNamedIn("pg 0 (default_pg)").has_value());
  CHECK_FALSE(analysis::roleNamedIn("default group").has_value());
  CHECK_FALSE(analysis::roleNamedIn("dp_tp").has_value());  // names two roles: neither is trusted

  model::RunTrace run;
  model::RankTrace rank;
  rank.rank = 0;
  model::Communicator c;
  c.comm_hash = 42;
  c.name = "model dp1";
  c.nranks = 8;
  rank.communicators.push_back(c);
  model::NcclOp op;
  op.comm_hash = 42;
  op.kind = gpuxray::format::NcclOperationKind::kCollective;
  rank.nccl_ops.push_back(op);
  rank.header.hostname = "a";
  run.ranks.push_back(rank);
  run.ranks.push_back(rank);
  run.ranks[1].rank = 1;
  // A third rank on another host, not in the group: a group inside one host of several was
  // guessed "tensor", whatever its name said.
  model::RankTrace other;
  other.rank = 2;
  other.header.hostname = "b";
  run.ranks.push_back(other);
  auto comms = analysis::gatherCommunicators(run);
  CHECK(comms.at(42).label() == "model dp1 (data, 8 ranks)");
  analysis::CommunicatorInfo unsized;
  unsized.name = "default group";
  CHECK(unsized.label() == "default group (other, ranks not recorded)");

  CHECK(gpuxray::report::formatRankCount(1, 0) == "1 rank (world size not recorded)");
  CHECK(gpuxray::report::formatRankCount(2, 8) == "2 of 8 ranks");
}

TEST_CASE("stacks: a launch's configuration may be unknown; AMD's multiprocessors are CUs") {
  model::LaunchConfig none;
  CHECK_FALSE(analysis::launchRecorded(none));
  CHECK(analysis::launchRecorded({132, 1, 1, 256, 1, 1, 0, 0, 0}));
  gpuxray::format::DeviceProperties amd;
  amd.warp_size = 64;
  amd.name = "";  // TraceLens' MI300X trace names no device
  CHECK(analysis::isAmdDevice(amd));
  CHECK(std::string(analysis::multiprocessorsName(&amd)) == "CUs");
  gpuxray::format::DeviceProperties nvidia;
  nvidia.warp_size = 32;
  nvidia.name = "NVIDIA H100 80GB HBM3";
  CHECK(std::string(analysis::multiprocessorsName(&nvidia)) == "SMs");
  nvidia.sm_count = 132;
  nvidia.max_threads_per_sm = 2048;
  nvidia.registers_per_sm = 65536;
  CHECK(analysis::theoreticalOccupancy(none, nvidia).blocks_per_sm == 0);
}
