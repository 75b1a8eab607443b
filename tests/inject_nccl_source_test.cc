// Which source a capture takes NCCL's operations from (the profiler plugin, NCCL's NVTX ranges, or
// none), from the environment and the NCCL already loaded, and how that NCCL's version is found.

#include <dlfcn.h>

#include <catch2/catch.hpp>
#include <string>

#include "inject/nccl_capture_source.h"

namespace {

using gpuxray::format::NcclCaptureSource;
using gpuxray::inject::chooseNcclCaptureSource;
using gpuxray::inject::NcclCaptureInputs;

constexpr const char* kSelf = "/opt/gpuxray/lib/libgpuxray_inject.so";

// What the library's constructor leaves: both variables pointing at itself, NVTX captured.
NcclCaptureInputs preloaded() {
  NcclCaptureInputs inputs;
  inputs.profiler_plugin = kSelf;
  inputs.nvtx_injection = kSelf;
  inputs.library_path = kSelf;
  inputs.nvtx_configured = true;
  inputs.cupti_active = true;
  return inputs;
}

}  // namespace

TEST_CASE("nccl source: the profiler plugin when NCCL_PROFILER_PLUGIN is unset or names this library") {
  NcclCaptureInputs inputs = preloaded();
  auto choice = chooseNcclCaptureSource(inputs);
  CHECK(choice.source == NcclCaptureSource::kProfilerPlugin);
  CHECK(choice.note.empty());
  inputs.profiler_plugin = nullptr;
  CHECK(chooseNcclCaptureSource(inputs).source == NcclCaptureSource::kProfilerPlugin);
  inputs.profiler_plugin = "";
  CHECK(chooseNcclCaptureSource(inputs).source == NcclCaptureSource::kProfilerPlugin);
  // NCCL 2.23, the first with the v1 interface, and anything newer.
  inputs.nccl_version = 22300;
  CHECK(chooseNcclCaptureSource(inputs).source == NcclCaptureSource::kProfilerPlugin);
  inputs.nccl_version = 22809;
  CHECK(chooseNcclCaptureSource(inputs).source == NcclCaptureSource::kProfilerPlugin);
  // Even without NVTX: the plugin does not need it.
  inputs.nvtx_configured = false;
  inputs.cupti_active = false;
  CHECK(chooseNcclCaptureSource(inputs).source == NcclCaptureSource::kProfilerPlugin);
}

TEST_CASE("nccl source: NVTX ranges when another plugin is named, plugins are off, or NCCL is too old") {
  NcclCaptureInputs inputs = preloaded();
  inputs.profiler_plugin = "/opt/other/libnccl-profiler.so";
  auto other = chooseNcclCaptureSource(inputs);
  CHECK(other.source == NcclCaptureSource::kNvtx);
  CHECK(other.note ==
        "NCCL_PROFILER_PLUGIN=/opt/other/libnccl-profiler.so names another profiler plugin, and NCCL loads only one: "
        "NCCL's operations are taken from its NVTX ranges instead (operation, bytes, root or peer, communicator; no "
        "algorithm, protocol or channels)");

  inputs.profiler_plugin = "none";
  auto none = chooseNcclCaptureSource(inputs);
  CHECK(none.source == NcclCaptureSource::kNvtx);
  CHECK(none.note.starts_with("NCCL_PROFILER_PLUGIN=none turns NCCL's profiler plugins off: "));

  inputs.profiler_plugin = kSelf;
  inputs.nccl_version = 22105;
  auto old = chooseNcclCaptureSource(inputs);
  CHECK(old.source == NcclCaptureSource::kNvtx);
  CHECK(old.note.starts_with("NCCL 2.21.5 is older than 2.23.0, the oldest that can load gpuxray's profiler plugin: "));
  inputs.nccl_version = 2708;  // 2.7.8, coded the pre-2.9 way
  CHECK(chooseNcclCaptureSource(inputs).note.starts_with("NCCL 2.7.8 is older than 2.23.0"));

  // NVTX reaching CUPTI directly (libcupti as the injection) counts too.
  inputs.nvtx_injection = "/usr/local/cuda/lib64/libcupti.so.13";
  CHECK(chooseNcclCaptureSource(inputs).source == NcclCaptureSource::kNvtx);
  inputs.nvtx_injection = nullptr;
  CHECK(chooseNcclCaptureSource(inputs).source == NcclCaptureSource::kNvtx);
  inputs.nccl_nvtx_disable = "0";
  CHECK(chooseNcclCaptureSource(inputs).source == NcclCaptureSource::kNvtx);
}

TEST_CASE("nccl source: none when neither the plugin nor NCCL's NVTX ranges reach the capture, saying why") {
  NcclCaptureInputs inputs = preloaded();
  inputs.profiler_plugin = "/opt/other/libnccl-profiler.so";
  const std::string plugin = "NCCL_PROFILER_PLUGIN=/opt/other/libnccl-profiler.so names another profiler plugin, and "
                             "NCCL loads only one, and ";
  const std::string end = ": NCCL's operations are not captured";

  NcclCaptureInputs no_nvtx = inputs;
  no_nvtx.nvtx_configured = false;
  auto choice = chooseNcclCaptureSource(no_nvtx);
  CHECK(choice.source == NcclCaptureSource::kNone);
  CHECK(choice.note == plugin + "NVTX is not captured (GPUXRAY_CAPTURE leaves it out)" + end);

  NcclCaptureInputs no_cupti = inputs;
  no_cupti.cupti_active = false;
  CHECK(chooseNcclCaptureSource(no_cupti).note == plugin + "NVTX cannot be captured without CUPTI" + end);

  NcclCaptureInputs disabled = inputs;
  disabled.nccl_nvtx_disable = "1";
  CHECK(chooseNcclCaptureSource(disabled).note == plugin + "NCCL_NVTX_DISABLE=1 turns NCCL's NVTX ranges off" + end);

  NcclCaptureInputs elsewhere = inputs;
  elsewhere.nvtx_injection = "/opt/nsight/libToolsInjection64.so";
  CHECK(chooseNcclCaptureSource(elsewhere).note ==
        plugin + "NVTX_INJECTION64_PATH=/opt/nsight/libToolsInjection64.so sends NVTX ranges to another tool" + end);
}

TEST_CASE("nccl source: version codes as text") {
  using gpuxray::inject::ncclVersionText;
  CHECK(ncclVersionText(22809) == "2.28.9");
  CHECK(ncclVersionText(22700) == "2.27.0");
  CHECK(ncclVersionText(20906) == "2.9.6");
  CHECK(ncclVersionText(2804) == "2.8.4");
  CHECK(ncclVersionText(0).empty());
}

TEST_CASE("nccl source: the version of an NCCL loaded privately is found through its ncclGetVersion") {
  // This test process has no NCCL until the stand-in is loaded (RTLD_LOCAL, so not in the global scope).
  CHECK(gpuxray::inject::loadedNcclVersion() == 0);
  void* nccl = dlopen(GPUXRAY_FAKE_NCCL, RTLD_NOW | RTLD_LOCAL);
  REQUIRE(nccl != nullptr);
  CHECK(gpuxray::inject::loadedNcclVersion() == 22105);
  dlclose(nccl);
  CHECK(gpuxray::inject::loadedNcclVersion() == 0);
}
