#include "inject/nvtx_payload_decoder.h"

#include <cupti.h>
#include <nvtx3/nvToolsExtPayload.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "inject/cupti_api.h"

namespace gpuxray::inject {
namespace {

// The array kind sits in bits 4-6 of an entry's flags (NVTX_PAYLOAD_ENTRY_FLAG_IS_ARRAY leaves out
// ARRAY_LENGTH_PAYLOAD_INDEX).
constexpr uint64_t kArrayKindMask = 7u << 4;
// A schema with more entries is not believed.
constexpr size_t kMaxSchemaEntries = 1024;
// Schemas and enums remembered, found or not; past this many, new ones are treated as unknown.
constexpr size_t kMaxCachedTypes = 4096;
// Longer strings are cut: a string value is interned, and the string table lives as long as the file.
constexpr size_t kMaxStringBytes = 1024;

bool isPowerOfTwo(uint64_t value) { return value != 0 && (value & (value - 1)) == 0; }

// `end` rounded up to `align`; false on overflow.
bool alignUp(uint64_t end, uint64_t align, uint64_t& aligned) {
  uint64_t remainder = end % align;
  if (remainder == 0) {
    aligned = end;
    return true;
  }
  uint64_t step = align - remainder;
  if (end > UINT64_MAX - step) return false;
  aligned = end + step;
  return true;
}

template <typename T>
T load(const uint8_t* at) {
  T value;
  std::memcpy(&value, at, sizeof value);
  return value;
}

std::optional<NvtxPayloadType> copySchema(const nvtxPayloadSchemaAttr_t& schema) {
  // Fields a client did not set are zero (NVTX clients zero-initialize the attributes), so they are
  // read without consulting fieldMask, which CUPTI's copy need not carry over.
  if (schema.numEntries > kMaxSchemaEntries || (schema.numEntries > 0 && schema.entries == nullptr)) return std::nullopt;
  NvtxPayloadType type;
  type.kind = NvtxPayloadType::Kind::kSchema;
  type.schema_type = schema.type;
  type.pack_align = schema.packAlign;
  for (size_t i = 0; i < schema.numEntries; ++i) {
    const nvtxPayloadSchemaEntry_t& from = schema.entries[i];
    type.entries.push_back({from.flags, from.type, from.name != nullptr ? from.name : "", from.arrayOrUnionDetail,
                            from.offset});
  }
  return type;
}

std::optional<NvtxPayloadType> copyEnum(const nvtxPayloadEnumAttr_t& values) {
  if (values.numEntries > kMaxSchemaEntries || (values.numEntries > 0 && values.entries == nullptr)) return std::nullopt;
  NvtxPayloadType type;
  type.kind = NvtxPayloadType::Kind::kEnum;
  type.enum_size = values.sizeOfEnum;
  for (size_t i = 0; i < values.numEntries; ++i) {
    const nvtxPayloadEnum_t& from = values.entries[i];
    type.enum_values.push_back({from.name != nullptr ? from.name : "", from.value});
  }
  return type;
}

// What CUPTI allocated for one description (as NVIDIA's CUPTI NVTX payload sample frees it).
void freeDescription(const CUpti_NvtxExtPayloadAttr& described) {
  if (described.type == CUPTI_NVTX_EXT_PAYLOAD_TYPE_SCHEMA) {
    std::free(const_cast<nvtxPayloadSchemaEntry_t*>(
        static_cast<const nvtxPayloadSchemaAttr_t*>(described.attributes)->entries));
  } else if (described.type == CUPTI_NVTX_EXT_PAYLOAD_TYPE_ENUM) {
    std::free(const_cast<nvtxPayloadEnum_t*>(static_cast<const nvtxPayloadEnumAttr_t*>(described.attributes)->entries));
  }
  std::free(described.attributes);
}

}  // namespace

NvtxPayloadTypeSource cuptiPayloadTypeSource(const CuptiApi& api, bool free_cupti_allocations) {
  NvtxPayloadTypeSource source;
  if (auto describe = api.activityGetNvtxExtPayloadAttr) {
    source.describe = [describe, free_cupti_allocations](uint32_t cupti_domain,
                                                         uint64_t schema_id) -> std::optional<NvtxPayloadType> {
      CUpti_NvtxExtPayloadAttr described{};
      if (describe(cupti_domain, schema_id, &described) != CUPTI_SUCCESS || described.attributes == nullptr)
        return std::nullopt;
      std::optional<NvtxPayloadType> type;
      if (described.type == CUPTI_NVTX_EXT_PAYLOAD_TYPE_SCHEMA) {
        type = copySchema(*static_cast<const nvtxPayloadSchemaAttr_t*>(described.attributes));
      } else if (described.type == CUPTI_NVTX_EXT_PAYLOAD_TYPE_ENUM) {
        type = copyEnum(*static_cast<const nvtxPayloadEnumAttr_t*>(described.attributes));
      }
      if (free_cupti_allocations) freeDescription(described);
      return type;
    };
  }
  if (auto type_info = api.activityGetNvtxExtPayloadEntryTypeInfo) {
    // NVTX's array: element 0 holds the array's length and the size of an element. libcupti 13.0
    // returns NULL until an NVTX client has initialized the payload extension.
    source.predefined_layouts = [type_info]() -> std::vector<NvtxTypeLayout> {
      const nvtxPayloadEntryTypeInfo_t* info = type_info();
      if (info == nullptr || info[0].align != sizeof(nvtxPayloadEntryTypeInfo_t) || info[0].size < 2 ||
          info[0].size > 256)
        return {};
      std::vector<NvtxTypeLayout> layouts(info[0].size);
      for (size_t type = 1; type < layouts.size(); ++type) layouts[type] = {info[type].size, info[type].align};
      return layouts;
    };
  }
  return source;
}

std::vector<NvtxTypeLayout> hostPredefinedLayouts() {
  std::vector<NvtxTypeLayout> layouts(NVTX_PAYLOAD_ENTRY_TYPE_INFO_ARRAY_SIZE);
  auto set = [&]<typename T>(int type, T*) {
    layouts[static_cast<size_t>(type)] = {static_cast<uint16_t>(sizeof(T)), static_cast<uint16_t>(alignof(T))};
  };
  set(NVTX_PAYLOAD_ENTRY_TYPE_CHAR, static_cast<char*>(nullptr));
  set(NVTX_PAYLOAD_ENTRY_TYPE_UCHAR, static_cast<unsigned char*>(nullptr));
  set(NVTX_PAYLOAD_ENTRY_TYPE_SHORT, static_cast<short*>(nullptr));
  set(NVTX_PAYLOAD_ENTRY_TYPE_USHORT, static_cast<unsigned short*>(nullptr));
  set(NVTX_PAYLOAD_ENTRY_TYPE_INT, static_cast<int*>(nullptr));
  set(NVTX_PAYLOAD_ENTRY_TYPE_UINT, static_cast<unsigned int*>(nullptr));
  set(NVTX_PAYLOAD_ENTRY_TYPE_LONG, static_cast<long*>(nullptr));
  set(NVTX_PAYLOAD_ENTRY_TYPE_ULONG, static_cast<unsigned long*>(nullptr));
  set(NVTX_PAYLOAD_ENTRY_TYPE_LONGLONG, static_cast<long long*>(nullptr));
  set(NVTX_PAYLOAD_ENTRY_TYPE_ULONGLONG, static_cast<unsigned long long*>(nullptr));
  set(NVTX_PAYLOAD_ENTRY_TYPE_INT8, static_cast<int8_t*>(nullptr));
  set(NVTX_PAYLOAD_ENTRY_TYPE_UINT8, static_cast<uint8_t*>(nullptr));
  set(NVTX_PAYLOAD_ENTRY_TYPE_INT16, static_cast<int16_t*>(nullptr));
  set(NVTX_PAYLOAD_ENTRY_TYPE_UINT16, static_cast<uint16_t*>(nullptr));
  set(NVTX_PAYLOAD_ENTRY_TYPE_INT32, static_cast<int32_t*>(nullptr));
  set(NVTX_PAYLOAD_ENTRY_TYPE_UINT32, static_cast<uint32_t*>(nullptr));
  set(NVTX_PAYLOAD_ENTRY_TYPE_INT64, static_cast<int64_t*>(nullptr));
  set(NVTX_PAYLOAD_ENTRY_TYPE_UINT64, static_cast<uint64_t*>(nullptr));
  set(NVTX_PAYLOAD_ENTRY_TYPE_FLOAT, static_cast<float*>(nullptr));
  set(NVTX_PAYLOAD_ENTRY_TYPE_DOUBLE, static_cast<double*>(nullptr));
  set(NVTX_PAYLOAD_ENTRY_TYPE_LONGDOUBLE, static_cast<long double*>(nullptr));
  set(NVTX_PAYLOAD_ENTRY_TYPE_SIZE, static_cast<size_t*>(nullptr));
  set(NVTX_PAYLOAD_ENTRY_TYPE_ADDRESS, static_cast<void**>(nullptr));
  set(NVTX_PAYLOAD_ENTRY_TYPE_WCHAR, static_cast<wchar_t*>(nullptr));
  set(NVTX_PAYLOAD_ENTRY_TYPE_CHAR8, static_cast<char8_t*>(nullptr));
  set(NVTX_PAYLOAD_ENTRY_TYPE_CHAR16, static_cast<char16_t*>(nullptr));
  set(NVTX_PAYLOAD_ENTRY_TYPE_CHAR32, static_cast<char32_t*>(nullptr));
  return layouts;
}

// Where an entry sits and how it is read.
struct NvtxPayloadDecoder::EntryLayout {
  enum class Read { kNone, kInt, kUint, kFloat, kEnum, kFixedString, kTerminatedString };
  Read read = Read::kNone;
  // 0: unknown (then nothing after it can be placed by alignment); a terminated string learns its
  // size when read.
  uint64_t size = 0;
  uint64_t align = 1;
  const NvtxPayloadType* enum_type = nullptr;
};

NvtxPayloadDecoder::NvtxPayloadDecoder(NvtxPayloadTypeSource source, Interner intern)
    : source_(std::move(source)), intern_(std::move(intern)), layouts_(hostPredefinedLayouts()) {}

const NvtxPayloadType* NvtxPayloadDecoder::lookup(uint32_t cupti_domain, uint64_t schema_id) {
  auto key = std::make_pair(cupti_domain, schema_id);
  if (auto known = types_.find(key); known != types_.end()) return known->second ? &*known->second : nullptr;
  if (!source_.describe || types_.size() >= kMaxCachedTypes) return nullptr;
  // Map nodes stay put, so a schema found earlier stays valid while its enums are looked up.
  auto& cached = types_[key] = source_.describe(cupti_domain, schema_id);
  return cached ? &*cached : nullptr;
}

const std::vector<NvtxTypeLayout>& NvtxPayloadDecoder::layouts() {
  if (!client_layouts_ && source_.predefined_layouts) {
    std::vector<NvtxTypeLayout> reported = source_.predefined_layouts();
    if (!reported.empty()) {
      for (size_t type = 1; type < reported.size() && type < layouts_.size(); ++type) {
        const NvtxTypeLayout& layout = reported[type];
        // An alignment that is no power of two, or a size that is no multiple of it, is not believed.
        if (layout.size == 0 || !isPowerOfTwo(layout.align) || layout.size % layout.align != 0) continue;
        layouts_[type] = layout;
      }
      client_layouts_ = true;
    }
  }
  return layouts_;
}

NvtxPayloadDecoder::EntryLayout NvtxPayloadDecoder::layoutOf(const NvtxSchemaEntry& entry, uint32_t cupti_domain) {
  using Read = EntryLayout::Read;
  const std::vector<NvtxTypeLayout>& predefined = layouts();
  auto fixed = [](uint64_t size, Read read = Read::kNone) { return EntryLayout{read, size, size, nullptr}; };
  auto table = [&](uint64_t type, Read read) {
    const NvtxTypeLayout& layout = predefined[type];
    return EntryLayout{read, layout.size, layout.align > 0 ? uint64_t{layout.align} : uint64_t{1}, nullptr};
  };
  const EntryLayout pointer = table(NVTX_PAYLOAD_ENTRY_TYPE_ADDRESS, Read::kNone);

  // A pointer into the application's memory, which may be gone by now: its size counts, not its target.
  if ((entry.flags & NVTX_PAYLOAD_ENTRY_FLAG_POINTER) != 0) return pointer;

  uint64_t array = entry.flags & kArrayKindMask;
  uint64_t length = entry.array_or_union_detail;
  switch (entry.type) {
    case NVTX_PAYLOAD_ENTRY_TYPE_CSTRING:
    case NVTX_PAYLOAD_ENTRY_TYPE_CSTRING_UTF8:
      if ((array == 0 || array == NVTX_PAYLOAD_ENTRY_FLAG_ARRAY_FIXED_SIZE) && length > 0)
        return {Read::kFixedString, length, 1, nullptr};
      if (array == NVTX_PAYLOAD_ENTRY_FLAG_ARRAY_ZERO_TERMINATED && length == 0)
        return {Read::kTerminatedString, 0, 1, nullptr};
      return {};
    case NVTX_PAYLOAD_ENTRY_TYPE_CSTRING_UTF16:
    case NVTX_PAYLOAD_ENTRY_TYPE_CSTRING_UTF32: {
      uint64_t unit = entry.type == NVTX_PAYLOAD_ENTRY_TYPE_CSTRING_UTF16 ? 2 : 4;
      if ((array == 0 || array == NVTX_PAYLOAD_ENTRY_FLAG_ARRAY_FIXED_SIZE) && length > 0 && length <= UINT64_MAX / unit)
        return {Read::kNone, length * unit, unit, nullptr};
      return {};
    }
    default: break;
  }

  EntryLayout element;
  uint64_t type = entry.type;
  if (type >= NVTX_PAYLOAD_SCHEMA_ID_STATIC_START) {
    const NvtxPayloadType* named = lookup(cupti_domain, type);
    // Nested schemas are not decoded, and their alignment is unknown.
    if (named == nullptr || named->kind != NvtxPayloadType::Kind::kEnum) return {};
    uint64_t size = named->enum_size;
    if (size != 1 && size != 2 && size != 4 && size != 8) return {};
    element = {Read::kEnum, size, size, named};
  } else {
    switch (type) {
      case NVTX_PAYLOAD_ENTRY_TYPE_CHAR:
      case NVTX_PAYLOAD_ENTRY_TYPE_SHORT:
      case NVTX_PAYLOAD_ENTRY_TYPE_INT:
      case NVTX_PAYLOAD_ENTRY_TYPE_LONG:
      case NVTX_PAYLOAD_ENTRY_TYPE_LONGLONG:
      case NVTX_PAYLOAD_ENTRY_TYPE_INT8:
      case NVTX_PAYLOAD_ENTRY_TYPE_INT16:
      case NVTX_PAYLOAD_ENTRY_TYPE_INT32:
      case NVTX_PAYLOAD_ENTRY_TYPE_INT64: element = table(type, Read::kInt); break;
      case NVTX_PAYLOAD_ENTRY_TYPE_UCHAR:
      case NVTX_PAYLOAD_ENTRY_TYPE_USHORT:
      case NVTX_PAYLOAD_ENTRY_TYPE_UINT:
      case NVTX_PAYLOAD_ENTRY_TYPE_ULONG:
      case NVTX_PAYLOAD_ENTRY_TYPE_ULONGLONG:
      case NVTX_PAYLOAD_ENTRY_TYPE_UINT8:
      case NVTX_PAYLOAD_ENTRY_TYPE_UINT16:
      case NVTX_PAYLOAD_ENTRY_TYPE_UINT32:
      case NVTX_PAYLOAD_ENTRY_TYPE_UINT64:
      case NVTX_PAYLOAD_ENTRY_TYPE_SIZE:
      case NVTX_PAYLOAD_ENTRY_TYPE_ADDRESS:
      case NVTX_PAYLOAD_ENTRY_TYPE_WCHAR:
      case NVTX_PAYLOAD_ENTRY_TYPE_CHAR8:
      case NVTX_PAYLOAD_ENTRY_TYPE_CHAR16:
      case NVTX_PAYLOAD_ENTRY_TYPE_CHAR32: element = table(type, Read::kUint); break;
      case NVTX_PAYLOAD_ENTRY_TYPE_FLOAT:
      case NVTX_PAYLOAD_ENTRY_TYPE_DOUBLE: element = table(type, Read::kFloat); break;
      case NVTX_PAYLOAD_ENTRY_TYPE_LONGDOUBLE: element = table(type, Read::kNone); break;
      // Types outside NVTX's size table: sizes from their names, aligned like standard types of that size.
      case NVTX_PAYLOAD_ENTRY_TYPE_BYTE: element = fixed(1, Read::kUint); break;
      case NVTX_PAYLOAD_ENTRY_TYPE_FLOAT16:
      case NVTX_PAYLOAD_ENTRY_TYPE_BF16: element = fixed(2); break;
      case NVTX_PAYLOAD_ENTRY_TYPE_TF32: element = fixed(4); break;
      case NVTX_PAYLOAD_ENTRY_TYPE_FLOAT32: element = fixed(4, Read::kFloat); break;
      case NVTX_PAYLOAD_ENTRY_TYPE_FLOAT64: element = fixed(8, Read::kFloat); break;
      case NVTX_PAYLOAD_ENTRY_TYPE_INT128:
      case NVTX_PAYLOAD_ENTRY_TYPE_UINT128:
      case NVTX_PAYLOAD_ENTRY_TYPE_FLOAT128: element = fixed(16); break;
      case NVTX_PAYLOAD_ENTRY_TYPE_CATEGORY:
      case NVTX_PAYLOAD_ENTRY_TYPE_COLOR_ARGB:
      case NVTX_PAYLOAD_ENTRY_TYPE_PID_UINT32:
      case NVTX_PAYLOAD_ENTRY_TYPE_TID_UINT32: element = fixed(4, Read::kUint); break;
      case NVTX_PAYLOAD_ENTRY_TYPE_SCOPE_ID:
      case NVTX_PAYLOAD_ENTRY_TYPE_PID_UINT64:
      case NVTX_PAYLOAD_ENTRY_TYPE_TID_UINT64: element = fixed(8, Read::kUint); break;
      // A handle from nvtxDomainRegisterString, whose text only the NVTX client knows.
      case NVTX_PAYLOAD_ENTRY_TYPE_NVTX_REGISTERED_STRING_HANDLE: element = pointer; break;
      default: return {};
    }
  }
  if (element.size == 0) return {};
  if (array == 0) return element;
  // Arrays of numbers keep their place in the layout but are not decoded.
  if (array == NVTX_PAYLOAD_ENTRY_FLAG_ARRAY_FIXED_SIZE && length > 0 && length <= UINT64_MAX / element.size)
    return {Read::kNone, length * element.size, element.align, nullptr};
  return {};
}

bool NvtxPayloadDecoder::read(const NvtxSchemaEntry& entry, const EntryLayout& layout, const uint8_t* data,
                              size_t size, size_t offset, size_t index, std::vector<format::PayloadField>& fields) {
  using Read = EntryLayout::Read;
  using Type = format::PayloadField::Type;
  const uint8_t* at = data + offset;
  format::PayloadField field;

  auto unsignedValue = [&](uint64_t bytes, uint64_t& value) {
    switch (bytes) {
      case 1: value = load<uint8_t>(at); return true;
      case 2: value = load<uint16_t>(at); return true;
      case 4: value = load<uint32_t>(at); return true;
      case 8: value = load<uint64_t>(at); return true;
      default: return false;
    }
  };
  switch (layout.read) {
    case Read::kInt:
      field.type = Type::kInt;
      switch (layout.size) {
        case 1: field.int_value = load<int8_t>(at); break;
        case 2: field.int_value = load<int16_t>(at); break;
        case 4: field.int_value = load<int32_t>(at); break;
        case 8: field.int_value = load<int64_t>(at); break;
        default: return false;
      }
      break;
    case Read::kUint:
      field.type = Type::kUint;
      if (!unsignedValue(layout.size, field.uint_value)) return false;
      break;
    case Read::kFloat:
      field.type = Type::kDouble;
      if (layout.size == sizeof(float)) {
        field.double_value = static_cast<double>(load<float>(at));
      } else if (layout.size == sizeof(double)) {
        field.double_value = load<double>(at);
      } else {
        return false;
      }
      break;
    case Read::kEnum: {
      uint64_t value = 0;
      if (!unsignedValue(layout.size, value)) return false;
      field.type = Type::kUint;
      field.uint_value = value;
      for (const NvtxEnumValue& named : layout.enum_type->enum_values) {
        if (named.value == value && !named.name.empty()) {
          field.type = Type::kString;
          field.uint_value = 0;
          field.string_id = intern_(named.name);
          break;
        }
      }
      break;
    }
    case Read::kFixedString:
    case Read::kTerminatedString: {
      // The bytes up to the first NUL within the entry (a fixed array) or within the payload.
      size_t available = layout.read == Read::kFixedString ? static_cast<size_t>(layout.size) : size - offset;
      const void* nul = std::memchr(at, 0, available);
      if (nul == nullptr && layout.read == Read::kTerminatedString) return false;
      size_t length = nul != nullptr ? static_cast<size_t>(static_cast<const uint8_t*>(nul) - at) : available;
      field.type = Type::kString;
      field.string_id =
          intern_(std::string_view(reinterpret_cast<const char*>(at), std::min(length, kMaxStringBytes)));
      break;
    }
    case Read::kNone: return false;
  }
  field.name_id = intern_(entry.name.empty() ? "entry " + std::to_string(index) : entry.name);
  fields.push_back(field);
  return true;
}

std::vector<format::PayloadField> NvtxPayloadDecoder::decode(uint32_t cupti_domain, uint64_t schema_id,
                                                             const void* data, size_t size) {
  std::vector<format::PayloadField> fields;
  // SIZE_MAX is NVTX's "size unknown": the bytes that exist cannot be told apart from those that don't.
  const NvtxPayloadType* schema = data != nullptr && size != SIZE_MAX ? lookup(cupti_domain, schema_id) : nullptr;
  if (schema == nullptr || schema->kind != NvtxPayloadType::Kind::kSchema ||
      (schema->schema_type != NVTX_PAYLOAD_SCHEMA_TYPE_STATIC && schema->schema_type != NVTX_PAYLOAD_SCHEMA_TYPE_DYNAMIC)) {
    ++stats_.undecoded_payloads;
    return fields;
  }
  const auto* bytes = static_cast<const uint8_t*>(data);
  // Where the previous entry ended, for an entry placed by alignment; unknown after an entry of
  // unknown size, until an entry with an explicit offset.
  uint64_t previous_end = 0;
  bool previous_end_known = true;
  for (size_t index = 0; index < schema->entries.size(); ++index) {
    const NvtxSchemaEntry& entry = schema->entries[index];
    EntryLayout layout = layoutOf(entry, cupti_domain);
    uint64_t offset = entry.offset;
    if (index > 0 && entry.offset == 0) {
      uint64_t align = layout.align;
      if (schema->pack_align > 0 && isPowerOfTwo(schema->pack_align)) align = std::min(align, schema->pack_align);
      bool sized = layout.size > 0 || layout.read == EntryLayout::Read::kTerminatedString;
      if (!previous_end_known || !sized || !isPowerOfTwo(align) || !alignUp(previous_end, align, offset)) {
        ++stats_.skipped_entries;
        previous_end_known = false;
        continue;
      }
    }
    if (layout.read == EntryLayout::Read::kTerminatedString) {
      // Its size is where its NUL is.
      previous_end_known = false;
      if (offset < size && read(entry, layout, bytes, size, static_cast<size_t>(offset), index, fields)) {
        ++stats_.decoded_fields;
        const void* nul = std::memchr(bytes + offset, 0, size - static_cast<size_t>(offset));
        previous_end = static_cast<uint64_t>(static_cast<const uint8_t*>(nul) - bytes) + 1;
        previous_end_known = true;
      } else {
        ++stats_.skipped_entries;
      }
      continue;
    }
    previous_end_known = layout.size > 0 && offset <= UINT64_MAX - layout.size;
    if (previous_end_known) previous_end = offset + layout.size;
    bool inside = layout.size > 0 && offset <= size && layout.size <= size - offset;
    if (inside && read(entry, layout, bytes, size, static_cast<size_t>(offset), index, fields)) {
      ++stats_.decoded_fields;
    } else {
      ++stats_.skipped_entries;
    }
  }
  return fields;
}

}  // namespace gpuxray::inject
