// Readable text for the trace format's structs, so that a failed CHECK(actual == expected) shows
// every field of both sides instead of "{?} == {?}". Doubles are printed with their bit pattern's
// sign and in hex, so -0.0 and 0.0 (which compare equal) print differently.
#pragma once

#include <catch2/catch.hpp>
#include <algorithm>
#include <string>
#include <vector>

#include "proto/records.h"

namespace gpuxray::testing {

std::string describe(const format::ClockAnchor& v);
std::string describe(const format::DeviceProperties& v);
std::string describe(const format::Endpoint& v);
std::string describe(const format::Link& v);
std::string describe(const format::NetworkInterface& v);
std::string describe(const format::CaptureConfig& v);
std::string describe(const format::FileHeader& v);
std::string describe(const format::KernelRecord& v);
std::string describe(const format::ApiCallRecord& v);
std::string describe(const format::ApiFunction& v);
std::string describe(const format::MemcpyRecord& v);
std::string describe(const format::MemsetRecord& v);
std::string describe(const format::MemoryEventRecord& v);
std::string describe(const format::PayloadField& v);
std::string describe(const format::NvtxEventRecord& v);
std::string describe(const format::SynchronizationRecord& v);
std::string describe(const format::NcclCommunicatorRecord& v);
std::string describe(const format::NcclOperationRecord& v);
std::string describe(const format::NetTransferRecord& v);
std::string describe(const format::MetricSampleRecord& v);
std::string describe(const format::KernelMetricsRecord& v);
std::string describe(const format::ExternalCorrelationRecord& v);
std::string describe(const format::OverheadRecord& v);
std::string describe(const format::ResourceNameRecord& v);
std::string describe(const format::StreamRecord& v);
std::string describe(const format::CategoryCount& v);
std::string describe(const format::Trailer& v);
// Only the number of records per list (batches can be large); compare lists to see the records.
std::string describe(const format::EventBatch& v);

}  // namespace gpuxray::testing

#define GPUXRAY_TESTING_STRING_MAKER(Type)                                                          \
  template <>                                                                                     \
  struct Catch::StringMaker<gpuxray::format::Type> {                                              \
    static std::string convert(const gpuxray::format::Type& v) { return gpuxray::testing::describe(v); } \
  };

GPUXRAY_TESTING_STRING_MAKER(ClockAnchor)
GPUXRAY_TESTING_STRING_MAKER(DeviceProperties)
GPUXRAY_TESTING_STRING_MAKER(Endpoint)
GPUXRAY_TESTING_STRING_MAKER(Link)
GPUXRAY_TESTING_STRING_MAKER(NetworkInterface)
GPUXRAY_TESTING_STRING_MAKER(CaptureConfig)
GPUXRAY_TESTING_STRING_MAKER(FileHeader)
GPUXRAY_TESTING_STRING_MAKER(KernelRecord)
GPUXRAY_TESTING_STRING_MAKER(ApiCallRecord)
GPUXRAY_TESTING_STRING_MAKER(ApiFunction)
GPUXRAY_TESTING_STRING_MAKER(MemcpyRecord)
GPUXRAY_TESTING_STRING_MAKER(MemsetRecord)
GPUXRAY_TESTING_STRING_MAKER(MemoryEventRecord)
GPUXRAY_TESTING_STRING_MAKER(PayloadField)
GPUXRAY_TESTING_STRING_MAKER(NvtxEventRecord)
GPUXRAY_TESTING_STRING_MAKER(SynchronizationRecord)
GPUXRAY_TESTING_STRING_MAKER(NcclCommunicatorRecord)
GPUXRAY_TESTING_STRING_MAKER(NcclOperationRecord)
GPUXRAY_TESTING_STRING_MAKER(NetTransferRecord)
GPUXRAY_TESTING_STRING_MAKER(MetricSampleRecord)
GPUXRAY_TESTING_STRING_MAKER(KernelMetricsRecord)
GPUXRAY_TESTING_STRING_MAKER(ExternalCorrelationRecord)
GPUXRAY_TESTING_STRING_MAKER(OverheadRecord)
GPUXRAY_TESTING_STRING_MAKER(ResourceNameRecord)
GPUXRAY_TESTING_STRING_MAKER(StreamRecord)
GPUXRAY_TESTING_STRING_MAKER(CategoryCount)
GPUXRAY_TESTING_STRING_MAKER(Trailer)
GPUXRAY_TESTING_STRING_MAKER(EventBatch)

#undef GPUXRAY_TESTING_STRING_MAKER

namespace gpuxray::testing {

// Checks two record lists element by element; on a difference it reports the first differing index
// with both records in full. Short lists are also compared as text, which tells -0.0 from 0.0.
template <typename T>
void checkSameRecords(const std::vector<T>& actual, const std::vector<T>& expected) {
  CHECK(actual.size() == expected.size());
  const size_t n = std::min(actual.size(), expected.size());
  const bool compare_text = n <= 1000;
  for (size_t i = 0; i < n; ++i) {
    if (!(actual[i] == expected[i]) || (compare_text && describe(actual[i]) != describe(expected[i]))) {
      INFO("first difference at index " << i << " of " << n);
      CHECK(describe(actual[i]) == describe(expected[i]));
      CHECK(actual[i] == expected[i]);
      return;
    }
  }
}

// Every list of the batch through checkSameRecords.
void checkSameBatch(const format::EventBatch& actual, const format::EventBatch& expected);

}  // namespace gpuxray::testing
