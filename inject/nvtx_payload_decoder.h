// Decodes NVTX extended payloads (an nvtxPayloadData_t: a schema id and bytes) into named trace
// fields, by the schema the NVTX client registered in its domain. NCCL, for instance, registers
// one per API in domain "NCCL" ({communicator id, message size, reduction operation} for
// ncclAllReduce) and older NCCL the same ids without the communicator: the layout always comes from
// the registered schema, never from what a payload is expected to hold.
//
// Schemas (and the enums their entries may name) are asked for once per (CUPTI domain id, schema
// id) and cached. What cannot be decoded is skipped and counted, never guessed: an entry of a type
// or with flags this decoder does not read (arrays, pointers, nested schemas, 128-bit numbers), an
// entry lying partly or wholly past the payload's end, a payload whose schema is unknown. No byte
// outside [data, data + size) is ever read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "proto/records.h"

namespace gpuxray::inject {

struct CuptiApi;

// One entry of a registered schema (nvtxPayloadSchemaEntry_t).
struct NvtxSchemaEntry {
  uint64_t flags = 0;  // NVTX_PAYLOAD_ENTRY_FLAG_*
  // NVTX_PAYLOAD_ENTRY_TYPE_*, or the id of another schema or enum of the same domain.
  uint64_t type = 0;
  std::string name;
  // For string types: the length of a char array embedded in the payload.
  uint64_t array_or_union_detail = 0;
  // Bytes from the payload's start. 0 on any entry but the first means "not given": the entry then
  // follows the previous one at its natural alignment (NVTX's rule).
  uint64_t offset = 0;
};

struct NvtxEnumValue {
  std::string name;
  uint64_t value = 0;
};

// A payload schema or an enum as registered in one domain.
struct NvtxPayloadType {
  enum class Kind { kSchema, kEnum };
  Kind kind = Kind::kSchema;
  // Schemas: NVTX_PAYLOAD_SCHEMA_TYPE_*, the packing alignment (0: natural alignment) and the entries.
  uint64_t schema_type = 0;
  uint64_t pack_align = 0;
  std::vector<NvtxSchemaEntry> entries;
  // Enums: the size of a value in bytes and the named values.
  uint64_t enum_size = 0;
  std::vector<NvtxEnumValue> enum_values;
};

// Size and alignment in bytes of one of NVTX's predefined entry types.
struct NvtxTypeLayout {
  uint16_t size = 0;
  uint16_t align = 0;
};

// Where the decoder learns schemas: CUPTI in a capture, hand-built ones in tests.
struct NvtxPayloadTypeSource {
  // The schema or enum registered as `schema_id` in the CUPTI domain; nullopt if unknown. Null
  // when there is no way to ask: every extended payload then stays undecoded.
  std::function<std::optional<NvtxPayloadType>(uint32_t cupti_domain, uint64_t schema_id)> describe;
  // The sizes and alignments of the predefined types CHAR (1) .. CHAR32 (27), indexed by type, as
  // the NVTX client reported them; empty while unknown. May be null.
  std::function<std::vector<NvtxTypeLayout>()> predefined_layouts;
};

// Asks libcupti (cuptiActivityGetNvtxExtPayloadAttr and cuptiActivityGetNvtxExtPayloadEntryTypeInfo);
// `describe` is null when the libcupti lacks them. With free_cupti_allocations, each description's
// attributes and entries, which CUPTI malloc'ed, are freed once copied.
NvtxPayloadTypeSource cuptiPayloadTypeSource(const CuptiApi& api, bool free_cupti_allocations);

// The predefined types' layouts in this build, which NVTX clients built for the same platform share;
// used until (or unless) the source reports the client's.
std::vector<NvtxTypeLayout> hostPredefinedLayouts();

struct NvtxPayloadStats {
  uint64_t decoded_fields = 0;
  // Schema entries not decoded (unsupported type or flags, or not inside the payload).
  uint64_t skipped_entries = 0;
  // Payloads without a usable schema: unknown to the source, no source, a union schema, no data.
  uint64_t undecoded_payloads = 0;
};

class NvtxPayloadDecoder {
 public:
  using Interner = std::function<format::StringId(std::string_view text)>;

  NvtxPayloadDecoder(NvtxPayloadTypeSource source, Interner intern);

  // The fields of the `size` bytes at `data`, laid out by schema `schema_id` of the CUPTI domain,
  // in the schema's order; names and string values are interned.
  std::vector<format::PayloadField> decode(uint32_t cupti_domain, uint64_t schema_id, const void* data, size_t size);

  const NvtxPayloadStats& stats() const { return stats_; }

 private:
  struct EntryLayout;

  const NvtxPayloadType* lookup(uint32_t cupti_domain, uint64_t schema_id);
  const std::vector<NvtxTypeLayout>& layouts();
  EntryLayout layoutOf(const NvtxSchemaEntry& entry, uint32_t cupti_domain);
  // Reads one entry at `offset`, which layoutOf() placed inside the payload; false if not decoded.
  bool read(const NvtxSchemaEntry& entry, const EntryLayout& layout, const uint8_t* data, size_t size,
            size_t offset, size_t index, std::vector<format::PayloadField>& fields);

  NvtxPayloadTypeSource source_;
  Interner intern_;
  NvtxPayloadStats stats_;
  std::map<std::pair<uint32_t, uint64_t>, std::optional<NvtxPayloadType>> types_;
  std::vector<NvtxTypeLayout> layouts_;
  bool client_layouts_ = false;
};

}  // namespace gpuxray::inject
