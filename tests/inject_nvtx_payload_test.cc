// NVTX extended payloads decoded by their registered schemas: NCCL's schemas as NCCL 2.25+ and
// older NCCL register them (built here as NVTX attribute structs and described through the fake
// CUPTI, which hands out malloc'ed copies like libcupti), natural alignment and packing, strings,
// and everything the decoder must skip and count rather than misread.

#include <catch2/catch.hpp>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <nvtx3/nvToolsExtPayload.h>
#include <string>
#include <vector>

#include "inject/cupti_api.h"
#include "inject/nvtx_payload_decoder.h"
#include "tests/support/fake_cupti.h"
#include "tests/support/nccl_nvtx_schemas.h"

namespace {

using gpuxray::format::PayloadField;
using gpuxray::format::StringId;
using gpuxray::inject::NvtxPayloadDecoder;
using gpuxray::inject::NvtxPayloadType;
using gpuxray::inject::NvtxPayloadTypeSource;
using gpuxray::inject::NvtxSchemaEntry;
using gpuxray::inject::NvtxTypeLayout;
using gpuxray::testing::FakeCupti;

constexpr uint32_t kNcclDomain = 3;
using namespace gpuxray::testing::nccl_nvtx;

// A field as text: "name=value", with "u", "i", "d" or "s" before the value for its type.
class Decoding {
 public:
  explicit Decoding(NvtxPayloadTypeSource source)
      : decoder_(std::move(source), [this](std::string_view text) { return intern(text); }) {}

  template <typename Payload>
  std::vector<std::string> decode(uint64_t schema_id, const Payload& payload, uint32_t domain = kNcclDomain) {
    return decodeBytes(schema_id, &payload, sizeof payload, domain);
  }

  std::vector<std::string> decodeBytes(uint64_t schema_id, const void* data, size_t size,
                                       uint32_t domain = kNcclDomain) {
    std::vector<std::string> text;
    for (const PayloadField& field : decoder_.decode(domain, schema_id, data, size)) {
      std::string value;
      switch (field.type) {
        case PayloadField::Type::kInt: value = "i" + std::to_string(field.int_value); break;
        case PayloadField::Type::kUint: value = "u" + std::to_string(field.uint_value); break;
        case PayloadField::Type::kDouble: value = "d" + std::to_string(field.double_value); break;
        case PayloadField::Type::kString: value = "s" + strings_.at(field.string_id); break;
      }
      text.push_back(strings_.at(field.name_id) + "=" + value);
    }
    return text;
  }

  const gpuxray::inject::NvtxPayloadStats& stats() const { return decoder_.stats(); }

 private:
  StringId intern(std::string_view text) {
    auto [it, inserted] = ids_.try_emplace(std::string(text), static_cast<StringId>(strings_.size()));
    if (inserted) strings_.emplace_back(text);
    return it->second;
  }

  std::map<std::string, StringId> ids_{{"", 0}};
  std::vector<std::string> strings_{""};
  NvtxPayloadDecoder decoder_;
};

// The fake CUPTI with NCCL 2.28's schemas registered in kNcclDomain.
NvtxPayloadTypeSource ncclRegistry() {
  auto& fake = FakeCupti::instance();
  fake.reset();
  registerSchemas(fake, kNcclDomain);
  return gpuxray::inject::cuptiPayloadTypeSource(fake.api(), /*free_cupti_allocations=*/true);
}

// A registry of hand-built schemas, counting its lookups.
struct HandRegistry {
  std::map<uint64_t, NvtxPayloadType> types;
  std::vector<NvtxTypeLayout> layouts;
  int lookups = 0;

  NvtxPayloadTypeSource source() {
    NvtxPayloadTypeSource source;
    source.describe = [this](uint32_t, uint64_t id) -> std::optional<NvtxPayloadType> {
      ++lookups;
      auto it = types.find(id);
      if (it == types.end()) return std::nullopt;
      return it->second;
    };
    source.predefined_layouts = [this] { return layouts; };
    return source;
  }

  void add(uint64_t id, std::vector<NvtxSchemaEntry> entries, uint64_t pack_align = 0) {
    NvtxPayloadType type;
    type.schema_type = NVTX_PAYLOAD_SCHEMA_TYPE_STATIC;
    type.pack_align = pack_align;
    type.entries = std::move(entries);
    types[id] = type;
  }
};

NvtxSchemaEntry entry(uint64_t type, const char* name, uint64_t offset = 0, uint64_t flags = 0, uint64_t detail = 0) {
  return {flags, type, name, detail, offset};
}

}  // namespace

TEST_CASE("nvtx payload: NCCL 2.25+ collectives and p2p decode into named fields, the op by its registered enum") {
  Decoding decoding(ncclRegistry());
  AllReduce all_reduce{0x5eed'0000'0000'0042ull, 4u << 20, RedOp::kMax};
  CHECK(decoding.decode(kAllReduceSchema, all_reduce) ==
        std::vector<std::string>{"NCCL communicator ID=u" + std::to_string(0x5eed'0000'0000'0042ull),
                                 "Message size [bytes]=u4194304", "Reduction operation=sMax"});
  SendRecv send{7, 1024, -1};
  CHECK(decoding.decode(kSendSchema, send) ==
        std::vector<std::string>{"NCCL communicator ID=u7", "Message size [bytes]=u1024", "Peer rank=i-1"});
  // An op the enum does not name keeps its number.
  all_reduce.op = static_cast<RedOp>(17);
  CHECK(decoding.decode(kAllReduceSchema, all_reduce).back() == "Reduction operation=u17");

  // Each schema and the enum are asked for once.
  decoding.decode(kSendSchema, send);
  CHECK(FakeCupti::instance().payload_descriptions == 3);
  CHECK(decoding.stats().decoded_fields == 12);
  CHECK(decoding.stats().skipped_entries == 0);
  CHECK(decoding.stats().undecoded_payloads == 0);
}

TEST_CASE("nvtx payload: pre-2.25 NCCL payloads without the communicator decode by their own schemas") {
  auto& fake = FakeCupti::instance();
  fake.reset();
  // Registered under the same schema ids as 2.25+'s.
  const uint32_t domain = 1;
  registerOldSchemas(fake, domain);
  Decoding decoding(gpuxray::inject::cuptiPayloadTypeSource(fake.api(), true));

  OldAllReduce old_all_reduce{65536, RedOp::kSum};
  CHECK(decoding.decode(kAllReduceSchema, old_all_reduce, domain) ==
        std::vector<std::string>{"Message size [bytes]=u65536", "Reduction operation=sSum"});
  // root's offset is not given: it follows bytes at int's natural alignment (offset 8).
  OldBroadcast old_broadcast{};
  std::memset(&old_broadcast, 0xee, sizeof old_broadcast);  // padding bytes must not matter
  old_broadcast.bytes = 3;
  old_broadcast.root = 2;
  CHECK(decoding.decode(kBroadcastSchema, old_broadcast, domain) ==
        std::vector<std::string>{"Message size [bytes]=u3", "Root=i2"});
  CHECK(decoding.stats().skipped_entries == 0);
}

TEST_CASE("nvtx payload: offsets left out follow natural alignment, or the schema's packing") {
  HandRegistry registry;
  registry.add(kStaticStart + 1, {entry(NVTX_PAYLOAD_ENTRY_TYPE_UINT8, "a"), entry(NVTX_PAYLOAD_ENTRY_TYPE_INT32, "b"),
                                  entry(NVTX_PAYLOAD_ENTRY_TYPE_UINT16, "c"), entry(NVTX_PAYLOAD_ENTRY_TYPE_DOUBLE, "d"),
                                  entry(NVTX_PAYLOAD_ENTRY_TYPE_FLOAT, "e"), entry(NVTX_PAYLOAD_ENTRY_TYPE_CHAR, "f")});
  registry.add(kStaticStart + 2,
               {entry(NVTX_PAYLOAD_ENTRY_TYPE_UINT8, "a"), entry(NVTX_PAYLOAD_ENTRY_TYPE_INT32, "b"),
                entry(NVTX_PAYLOAD_ENTRY_TYPE_UINT16, "c"), entry(NVTX_PAYLOAD_ENTRY_TYPE_INT64, "d")},
               /*pack_align=*/1);
  Decoding decoding(registry.source());

  struct Natural {
    uint8_t a;
    int32_t b;
    uint16_t c;
    double d;
    float e;
    char f;
  };
  Natural natural{};
  std::memset(&natural, 0xab, sizeof natural);
  natural = {200, -70000, 65000, 2.5, 0.25f, -5};
  CHECK(decoding.decode(kStaticStart + 1, natural) ==
        std::vector<std::string>{"a=u200", "b=i-70000", "c=u65000", "d=d2.500000", "e=d0.250000", "f=i-5"});

  // Packed to 1 byte: a at 0, b at 1, c at 5, d at 7.
  uint8_t packed[15] = {};
  packed[0] = 9;
  int32_t b = -2;
  uint16_t c = 513;
  int64_t d = -(1ll << 40);
  std::memcpy(packed + 1, &b, 4);
  std::memcpy(packed + 5, &c, 2);
  std::memcpy(packed + 7, &d, 8);
  CHECK(decoding.decode(kStaticStart + 2, packed) ==
        std::vector<std::string>{"a=u9", "b=i-2", "c=u513", "d=i" + std::to_string(-(1ll << 40))});
}

TEST_CASE("nvtx payload: a truncated payload gives the entries inside it and never reads past its end") {
  Decoding decoding(ncclRegistry());
  AllReduce full{42, 1000, RedOp::kMin};
  // A heap copy of exactly the first 12 bytes (under AddressSanitizer any read beyond fails the test).
  std::vector<uint8_t> cut(reinterpret_cast<const uint8_t*>(&full), reinterpret_cast<const uint8_t*>(&full) + 12);
  auto* exact = new uint8_t[cut.size()];
  std::memcpy(exact, cut.data(), cut.size());
  CHECK(decoding.decodeBytes(kAllReduceSchema, exact, cut.size()) == std::vector<std::string>{"NCCL communicator ID=u42"});
  delete[] exact;
  CHECK(decoding.stats().skipped_entries == 2);

  // Nothing at all, or a size NVTX calls unknown: nothing decoded.
  CHECK(decoding.decodeBytes(kAllReduceSchema, &full, 0).empty());
  CHECK(decoding.decodeBytes(kAllReduceSchema, &full, SIZE_MAX).empty());
  CHECK(decoding.decodeBytes(kAllReduceSchema, nullptr, sizeof full).empty());
  CHECK(decoding.stats().skipped_entries == 5);
  CHECK(decoding.stats().undecoded_payloads == 2);
}

TEST_CASE("nvtx payload: unknown types, nested schemas, arrays and pointers are skipped, the layout kept where it can be") {
  HandRegistry registry;
  registry.add(kStaticStart + 1, {
      entry(NVTX_PAYLOAD_ENTRY_TYPE_UINT32, "first"),
      // A type NVTX does not define: its size is unknown, so "lost" cannot be placed...
      entry(60, "unknown type"),
      entry(NVTX_PAYLOAD_ENTRY_TYPE_UINT32, "lost"),
      // ...but an entry with its own offset can.
      entry(NVTX_PAYLOAD_ENTRY_TYPE_UINT32, "explicit", 12),
      // Known sizes, not decoded: a pointer, a fixed array of 3 ints, a 128-bit integer.
      entry(NVTX_PAYLOAD_ENTRY_TYPE_INT32, "pointer", 0, NVTX_PAYLOAD_ENTRY_FLAG_POINTER),
      entry(NVTX_PAYLOAD_ENTRY_TYPE_INT32, "array", 0, NVTX_PAYLOAD_ENTRY_FLAG_ARRAY_FIXED_SIZE, 3),
      entry(NVTX_PAYLOAD_ENTRY_TYPE_UINT128, "wide"),
      entry(NVTX_PAYLOAD_ENTRY_TYPE_UINT16, "after them"),
      // A nested schema (kStaticStart + 2 is a schema, not an enum) and a schema nobody registered.
      entry(kStaticStart + 2, "nested", 80),
      entry(kStaticStart + 99, "unregistered", 88),
      entry(NVTX_PAYLOAD_ENTRY_TYPE_UINT8, "last", 96),
      // Offsets past the payload's end, one of them at the edge of overflow.
      entry(NVTX_PAYLOAD_ENTRY_TYPE_UINT8, "outside", 100000),
      entry(NVTX_PAYLOAD_ENTRY_TYPE_UINT64, "overflowing", UINT64_MAX - 3),
  });
  registry.add(kStaticStart + 2, {entry(NVTX_PAYLOAD_ENTRY_TYPE_UINT8, "inner")});
  Decoding decoding(registry.source());

  uint8_t payload[97] = {};
  uint32_t first = 11, explicit_value = 12;
  uint16_t after = 13;
  std::memcpy(payload + 0, &first, 4);
  std::memcpy(payload + 12, &explicit_value, 4);
  // pointer at 16 (8 bytes), array at 24 (12 bytes), wide at 48 (16 bytes), "after them" at 64.
  std::memcpy(payload + 64, &after, 2);
  payload[96] = 14;
  CHECK(decoding.decode(kStaticStart + 1, payload) ==
        std::vector<std::string>{"first=u11", "explicit=u12", "after them=u13", "last=u14"});
  CHECK(decoding.stats().skipped_entries == 9);
}

TEST_CASE("nvtx payload: strings embedded as char arrays, cut at their NUL; pointers to strings are skipped") {
  HandRegistry registry;
  registry.add(kStaticStart + 1, {
      entry(NVTX_PAYLOAD_ENTRY_TYPE_CSTRING, "fixed", 0, 0, 8),
      entry(NVTX_PAYLOAD_ENTRY_TYPE_CSTRING_UTF8, "full", 0, NVTX_PAYLOAD_ENTRY_FLAG_ARRAY_FIXED_SIZE, 4),
      entry(NVTX_PAYLOAD_ENTRY_TYPE_CSTRING, "pointer", 0, NVTX_PAYLOAD_ENTRY_FLAG_POINTER),
      entry(NVTX_PAYLOAD_ENTRY_TYPE_CSTRING_UTF8, "rest", 0, NVTX_PAYLOAD_ENTRY_FLAG_ARRAY_ZERO_TERMINATED),
      entry(NVTX_PAYLOAD_ENTRY_TYPE_UINT8, "after the NUL"),
  });
  registry.add(kStaticStart + 2, {
      entry(NVTX_PAYLOAD_ENTRY_TYPE_UINT8, "x"),
      entry(NVTX_PAYLOAD_ENTRY_TYPE_CSTRING_UTF8, "unterminated", 0, NVTX_PAYLOAD_ENTRY_FLAG_ARRAY_ZERO_TERMINATED),
  });
  Decoding decoding(registry.source());

  uint8_t payload[32] = {};
  std::memcpy(payload, "ring\0zzz", 8);
  std::memcpy(payload + 8, "LL12", 4);
  // The pointer at 16 (8 bytes), then "tree\0" at 24 and a byte after it.
  std::memcpy(payload + 24, "tree", 5);
  payload[29] = 77;
  CHECK(decoding.decode(kStaticStart + 1, payload) ==
        std::vector<std::string>{"fixed=sring", "full=sLL12", "rest=stree", "after the NUL=u77"});

  uint8_t unterminated[4] = {1, 'a', 'b', 'c'};
  CHECK(decoding.decode(kStaticStart + 2, unterminated) == std::vector<std::string>{"x=u1"});
  CHECK(decoding.stats().skipped_entries == 2);
}

TEST_CASE("nvtx payload: unknown schemas, unions and missing lookups leave the payload undecoded, asked once") {
  HandRegistry registry;
  registry.add(kStaticStart + 1, {entry(NVTX_PAYLOAD_ENTRY_TYPE_UINT8, "a")});
  registry.types[kStaticStart + 1].schema_type = NVTX_PAYLOAD_SCHEMA_TYPE_UNION;
  Decoding decoding(registry.source());
  uint64_t payload = 5;
  for (int i = 0; i < 3; ++i) {
    CHECK(decoding.decode(kStaticStart + 1, payload).empty());
    CHECK(decoding.decode(kStaticStart + 7, payload).empty());
  }
  CHECK(registry.lookups == 2);
  CHECK(decoding.stats().undecoded_payloads == 6);

  Decoding without_source(NvtxPayloadTypeSource{});
  CHECK(without_source.decode(kStaticStart + 1, payload).empty());
  CHECK(without_source.stats().undecoded_payloads == 1);

  // A libcupti without the two functions: no lookup at all.
  FakeCupti::instance().reset();
  FakeCupti::instance().describes_payloads = false;
  auto source = gpuxray::inject::cuptiPayloadTypeSource(FakeCupti::instance().api(), true);
  CHECK(!source.describe);
  CHECK(!source.predefined_layouts);
}

TEST_CASE("nvtx payload: type sizes come from the NVTX client once reported, this build's until then") {
  HandRegistry registry;
  registry.add(kStaticStart + 1, {entry(NVTX_PAYLOAD_ENTRY_TYPE_LONG, "long"), entry(NVTX_PAYLOAD_ENTRY_TYPE_INT, "int")});
  Decoding decoding(registry.source());
  int64_t host_layout[2] = {-9, 3};
  CHECK(decoding.decode(kStaticStart + 1, host_layout) == std::vector<std::string>{"long=i-9", "int=i3"});

  // A client whose long is 4 bytes (as on an ILP32 platform): its table wins from then on.
  registry.layouts = gpuxray::inject::hostPredefinedLayouts();
  registry.layouts[NVTX_PAYLOAD_ENTRY_TYPE_LONG] = {4, 4};
  int32_t client_layout[2] = {-9, 3};
  CHECK(decoding.decode(kStaticStart + 1, client_layout) == std::vector<std::string>{"long=i-9", "int=i3"});
}

TEST_CASE("nvtx payload: the real libcupti exports the two undeclared functions, harmless without a GPU", "[deepbind]") {
  gpuxray::inject::LoadedCupti cupti;
  std::string error;
  REQUIRE(gpuxray::inject::loadCupti([](const char*) -> const char* { return nullptr; }, cupti, error));
  REQUIRE(cupti.api.activityGetNvtxExtPayloadAttr != nullptr);
  REQUIRE(cupti.api.activityGetNvtxExtPayloadEntryTypeInfo != nullptr);
  // No NVTX client has registered anything: no description, no type table, nothing to free.
  auto source = gpuxray::inject::cuptiPayloadTypeSource(cupti.api, true);
  CHECK(!source.describe(1, kAllReduceSchema).has_value());
  CHECK(source.predefined_layouts().empty());
}
