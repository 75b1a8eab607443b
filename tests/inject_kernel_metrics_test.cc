// --kernel-metrics' configuration, built with the real libcupti's range-profiler host API (no GPU
// needed): every quantity is available on GA100, GH100 and GB100, and the pass counts are those
// docs/kernel-metrics.md states (libcupti 13.0.85). Tagged [deepbind] like inject_metrics_test.cc:
// CUPTI loads its host library with RTLD_DEEPBIND, which AddressSanitizer refuses.

#include <catch2/catch.hpp>
#include <set>
#include <string>

#include "inject/cupti_api.h"
#include "inject/kernel_metric_config.h"

namespace {

using namespace gpuxray::inject;

const KernelProfilerApi& realKernelProfilerApi() {
  static KernelProfilerApi api = [] {
    LoadedCupti cupti;
    std::string error;
    KernelProfilerApi bound;
    if (loadCupti([](const char*) -> const char* { return nullptr; }, cupti, error)) {
      if (!bindKernelProfilerApi(cupti.handle, bound).empty()) bound = KernelProfilerApi{};
    }
    return bound;
  }();
  return api;
}

}  // namespace

TEST_CASE("the kernel metric set's quantities each have their own metric and trace field", "[kernel-metrics]") {
  std::set<std::string_view> metrics;
  const auto& quantities = kernelQuantities();
  for (const auto& q : quantities) metrics.insert(q.metric);
  CHECK(quantities.size() == 13);
  CHECK(metrics.size() == 13);
  // Member pointers have no order: each field differs from every other.
  for (size_t i = 0; i < quantities.size(); ++i) {
    for (size_t j = i + 1; j < quantities.size(); ++j) CHECK(quantities[i].field != quantities[j].field);
  }
}

TEST_CASE("kernel metric configurations for GH100, GA100 and GB100 hold every quantity, in the documented passes",
          "[deepbind]") {
  const auto& api = realKernelProfilerApi();
  REQUIRE(api.hostInitialize != nullptr);
  REQUIRE(api.enable != nullptr);
  auto [chip, passes] = GENERATE(table<std::string, size_t>({{"GH100", 8}, {"GA100", 7}, {"GB100", 8}}));
  CAPTURE(chip);
  KernelMetricConfig config;
  std::string error;
  REQUIRE(buildKernelMetricConfig(api, chip, {}, config, error));
  CHECK(config.unavailable.empty());
  CHECK(config.metrics.size() == kernelQuantities().size());
  CHECK(config.passes == passes);
  CHECK(config.image.size() > 1000);
  REQUIRE(config.host != nullptr);
  releaseKernelMetricConfig(api, config);
  CHECK(config.host == nullptr);
}

TEST_CASE("a chip the range profiler does not know is named in the configuration error", "[deepbind]") {
  const auto& api = realKernelProfilerApi();
  REQUIRE(api.hostInitialize != nullptr);
  KernelMetricConfig config;
  std::string error;
  CHECK_FALSE(buildKernelMetricConfig(api, "NOSUCHCHIP", {}, config, error));
  CHECK(error.find("the profiler host API does not know chip NOSUCHCHIP: ") == 0);
  CHECK(error.find('\n') == std::string::npos);
}
