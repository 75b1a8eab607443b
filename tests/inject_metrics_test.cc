// GPU metric sampling's configuration, built with the real libcupti's host API (which needs no
// GPU), and its one-line explanations when sampling cannot run. Tagged [deepbind]: CUPTI loads its
// profiler host library with RTLD_DEEPBIND, which AddressSanitizer refuses, so these run in the
// normal build only (scripts/test.sh runs both builds).

#include <catch2/catch.hpp>
#include <string>

#include "inject/cupti_api.h"
#include "inject/metric_sampler.h"

namespace {

using namespace gpuxray::inject;

const PmSamplingApi& realPmSamplingApi() {
  static PmSamplingApi api = [] {
    LoadedCupti cupti;
    std::string error;
    PmSamplingApi bound;
    if (loadCupti([](const char*) -> const char* { return nullptr; }, cupti, error)) {
      if (!bindPmSamplingApi(cupti.handle, bound).empty()) bound = PmSamplingApi{};
    }
    return bound;
  }();
  return api;
}

}  // namespace

TEST_CASE("on H100/H200 (GH100) every wanted metric fits in one PM sampling pass", "[deepbind]") {
  const auto& api = realPmSamplingApi();
  REQUIRE(api.hostInitialize != nullptr);
  SamplingConfig config;
  std::string error;
  REQUIRE(buildSamplingConfig(api, "GH100", {}, config, error));
  CHECK(config.metrics == wantedMetrics());
  CHECK(config.metrics.size() == 10);
  CHECK(config.image.size() > 1000);
  CHECK(config.host != nullptr);
  releaseSamplingConfig(api, config);
  CHECK(config.host == nullptr);
}

TEST_CASE("on A100 (GA100) optional metric groups are dropped until one pass is left", "[deepbind]") {
  const auto& api = realPmSamplingApi();
  REQUIRE(api.hostInitialize != nullptr);
  SamplingConfig config;
  std::string error;
  REQUIRE(buildSamplingConfig(api, "GA100", {}, config, error));
  CHECK(config.metrics.size() >= 5);
  CHECK(config.metrics.size() < wantedMetrics().size());
  CHECK(config.metrics[0] == "gr__cycles_active.avg");
  releaseSamplingConfig(api, config);
}

TEST_CASE("a chip the profiler does not know is named in the error", "[deepbind]") {
  const auto& api = realPmSamplingApi();
  REQUIRE(api.hostInitialize != nullptr);
  SamplingConfig config;
  std::string error;
  CHECK_FALSE(buildSamplingConfig(api, "NOSUCHCHIP", {}, config, error));
  CHECK(error.find("the profiler host API does not know chip NOSUCHCHIP: ") == 0);
}

TEST_CASE("without a GPU, starting metric sampling fails with one line and no crash", "[deepbind]") {
  const auto& api = realPmSamplingApi();
  REQUIRE(api.enable != nullptr);
  MetricSampler sampler(api, 0, 1000, 1000);
  std::string error;
  CHECK_FALSE(sampler.start(error));
  CHECK(error.find("GPU metric sampling on device 0 is off: ") == 0);
  CHECK(error.find('\n') == std::string::npos);
  std::vector<MetricSample> samples;
  sampler.collect(samples);
  CHECK(samples.empty());
}
