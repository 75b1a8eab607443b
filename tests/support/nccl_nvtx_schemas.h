// NCCL's NVTX payloads as NCCL lays them out and registers their schemas (domain "NCCL"), for the
// tests: NCCL 2.25+ (src/include/nvtx_payload_schemas.h: the communicator first, explicit offsets)
// and older NCCL (collectives.cc: no communicator, offsets partly left to natural alignment), and
// the MARKER_DATA record through which CUPTI delivers such a payload.
#pragma once

#include <cupti.h>
#include <nvtx3/nvToolsExtPayload.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>

#include "tests/support/fake_cupti.h"

namespace gpuxray::testing::nccl_nvtx {

constexpr uint64_t kStaticStart = NVTX_PAYLOAD_SCHEMA_ID_STATIC_START;
// NCCL's schema ids (NVTX_SID_*): the same ids in every version, with different layouts.
constexpr uint64_t kAllReduceSchema = kStaticStart + 5;
constexpr uint64_t kBroadcastSchema = kStaticStart + 6;
constexpr uint64_t kSendSchema = kStaticStart + 9;
// The reduction operation enum's id moved from 11 (up to 2.26) to 24 (2.28).
constexpr uint64_t kRedOpEnum = kStaticStart + 24;
constexpr uint64_t kOldRedOpEnum = kStaticStart + 11;

// ncclRedOp_t: a 4-byte enum, its names registered as a payload enum.
enum class RedOp : int32_t { kSum = 0, kProd = 1, kMax = 2, kMin = 3, kAvg = 4 };
inline constexpr nvtxPayloadEnum_t kRedOpNames[] = {
    {"Sum", 0, 0}, {"Product", 1, 0}, {"Max", 2, 0}, {"Min", 3, 0}, {"Avg", 4, 0}};

// NCCL 2.25+.
struct AllReduce {
  uint64_t comm;
  size_t bytes;
  RedOp op;
};
inline const nvtxPayloadSchemaEntry_t kAllReduceEntries[] = {
    {0, NVTX_PAYLOAD_ENTRY_TYPE_UINT64, "NCCL communicator ID", nullptr, 0, offsetof(AllReduce, comm), nullptr, nullptr},
    {0, NVTX_PAYLOAD_ENTRY_TYPE_SIZE, "Message size [bytes]", nullptr, 0, offsetof(AllReduce, bytes), nullptr, nullptr},
    {0, kRedOpEnum, "Reduction operation", nullptr, 0, offsetof(AllReduce, op), nullptr, nullptr},
};
struct SendRecv {
  uint64_t comm;
  size_t bytes;
  int peer;
};
inline const nvtxPayloadSchemaEntry_t kSendRecvEntries[] = {
    {0, NVTX_PAYLOAD_ENTRY_TYPE_UINT64, "NCCL communicator ID", nullptr, 0, offsetof(SendRecv, comm), nullptr, nullptr},
    {0, NVTX_PAYLOAD_ENTRY_TYPE_SIZE, "Message size [bytes]", nullptr, 0, offsetof(SendRecv, bytes), nullptr, nullptr},
    {0, NVTX_PAYLOAD_ENTRY_TYPE_INT, "Peer rank", nullptr, 0, offsetof(SendRecv, peer), nullptr, nullptr},
};

// Before 2.25: the first entry's offset left at 0; AllReduce gives op's, Broadcast leaves root's out.
struct OldAllReduce {
  size_t bytes;
  RedOp op;
};
inline const nvtxPayloadSchemaEntry_t kOldAllReduceEntries[] = {
    {0, NVTX_PAYLOAD_ENTRY_TYPE_SIZE, "Message size [bytes]", nullptr, 0, 0, nullptr, nullptr},
    {0, kOldRedOpEnum, "Reduction operation", nullptr, 0, offsetof(OldAllReduce, op), nullptr, nullptr},
};
struct OldBroadcast {
  size_t bytes;
  int root;
};
inline const nvtxPayloadSchemaEntry_t kOldBroadcastEntries[] = {
    {0, NVTX_PAYLOAD_ENTRY_TYPE_SIZE, "Message size [bytes]", nullptr, 0, 0, nullptr, nullptr},
    {0, NVTX_PAYLOAD_ENTRY_TYPE_INT, "Root", nullptr, 0, 0, nullptr, nullptr},
};

// The attributes NCCL passes to nvtxPayloadSchemaRegister (2.28 gives the static size; older, 0).
template <size_t N>
nvtxPayloadSchemaAttr_t schemaOf(const nvtxPayloadSchemaEntry_t (&entries)[N], uint64_t id, size_t static_size = 0) {
  nvtxPayloadSchemaAttr_t attributes{};
  attributes.fieldMask = NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_TYPE | NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_ENTRIES |
                         NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_NUM_ENTRIES | NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_STATIC_SIZE |
                         NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_SCHEMA_ID;
  attributes.type = NVTX_PAYLOAD_SCHEMA_TYPE_STATIC;
  attributes.entries = entries;
  attributes.numEntries = N;
  attributes.payloadStaticSize = static_size;
  attributes.schemaId = id;
  return attributes;
}

inline nvtxPayloadEnumAttr_t redOpEnum(uint64_t id) {
  nvtxPayloadEnumAttr_t attributes{};
  attributes.fieldMask = NVTX_PAYLOAD_ENUM_ATTR_FIELD_ENTRIES | NVTX_PAYLOAD_ENUM_ATTR_FIELD_NUM_ENTRIES |
                         NVTX_PAYLOAD_ENUM_ATTR_FIELD_SIZE | NVTX_PAYLOAD_ENUM_ATTR_FIELD_SCHEMA_ID;
  attributes.entries = kRedOpNames;
  attributes.numEntries = std::size(kRedOpNames);
  attributes.sizeOfEnum = sizeof(RedOp);
  attributes.schemaId = id;
  return attributes;
}

// NCCL 2.28's AllReduce and Send schemas and its op enum, registered in one CUPTI domain.
inline void registerSchemas(FakeCupti& fake, uint32_t cupti_domain) {
  static const auto all_reduce = schemaOf(kAllReduceEntries, kAllReduceSchema, sizeof(AllReduce));
  static const auto send = schemaOf(kSendRecvEntries, kSendSchema, sizeof(SendRecv));
  static const auto ops = redOpEnum(kRedOpEnum);
  fake.registerPayloadSchema(cupti_domain, kAllReduceSchema, all_reduce);
  fake.registerPayloadSchema(cupti_domain, kSendSchema, send);
  fake.registerPayloadEnum(cupti_domain, kRedOpEnum, ops);
}

// The pre-2.25 AllReduce and Broadcast schemas and the op enum under its old id.
inline void registerOldSchemas(FakeCupti& fake, uint32_t cupti_domain) {
  static const auto all_reduce = schemaOf(kOldAllReduceEntries, kAllReduceSchema);
  static const auto broadcast = schemaOf(kOldBroadcastEntries, kBroadcastSchema);
  static const auto ops = redOpEnum(kOldRedOpEnum);
  fake.registerPayloadSchema(cupti_domain, kAllReduceSchema, all_reduce);
  fake.registerPayloadSchema(cupti_domain, kBroadcastSchema, broadcast);
  fake.registerPayloadEnum(cupti_domain, kOldRedOpEnum, ops);
}

// A MARKER_DATA record with an extended payload as libcupti delivers it: the nvtxPayloadData_t and
// a copy of the payload's bytes malloc'ed, for the capture to free.
template <typename Payload>
CUpti_ActivityMarkerData2 extendedPayloadData(uint32_t marker_id, uint64_t schema, const Payload& bytes,
                                              uint32_t cupti_domain) {
  auto* data = static_cast<nvtxPayloadData_t*>(std::malloc(sizeof(nvtxPayloadData_t)));
  void* copy = std::malloc(sizeof bytes);
  std::memcpy(copy, &bytes, sizeof bytes);
  *data = {schema, sizeof bytes, copy};
  CUpti_ActivityMarkerData2 record{};
  record.kind = CUPTI_ACTIVITY_KIND_MARKER_DATA;
  record.id = marker_id;
  record.payloadKind = CUPTI_METRIC_VALUE_KIND_NVTX_EXTENDED_PAYLOAD;
  record.payload.metricValueNvtxExtendedPayload = reinterpret_cast<uintptr_t>(data);
  record.cuptiDomainId = cupti_domain;
  return record;
}

}  // namespace gpuxray::testing::nccl_nvtx
