// A protobuf wire-format encoder for the few messages the writer emits, so that the injection library
// needs no libprotobuf. Field writers skip proto3 default values, as libprotobuf does; tests decode
// the output with the generated classes to prove the bytes are the same messages.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gpuxray::format {

class WireEncoder {
 public:
  enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

  void clear() { size_ = 0; }
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  std::span<const uint8_t> bytes() const { return {buffer_.data(), size_}; }

  void varint(uint64_t value) {
    uint8_t* out = reserve(10);
    while (value >= 0x80) {
      *out++ = static_cast<uint8_t>(value) | 0x80;
      value >>= 7;
    }
    *out++ = static_cast<uint8_t>(value);
    size_ = static_cast<size_t>(out - buffer_.data());
  }
  void zigzag(int64_t value) {
    varint((static_cast<uint64_t>(value) << 1) ^ static_cast<uint64_t>(value >> 63));
  }
  void tag(uint32_t field, WireType type) { varint((static_cast<uint64_t>(field) << 3) | type); }
  void raw(std::span<const uint8_t> bytes) {
    if (bytes.empty()) return;
    std::memcpy(reserve(bytes.size()), bytes.data(), bytes.size());
    size_ += bytes.size();
  }

  // Unsigned integers, enums and bools.
  void uintField(uint32_t field, uint64_t value) {
    if (value == 0) return;
    tag(field, kVarint);
    varint(value);
  }
  // int32 fields: negative values take ten bytes, as in protobuf.
  void intField(uint32_t field, int64_t value) { uintField(field, static_cast<uint64_t>(value)); }
  void sintField(uint32_t field, int64_t value) {
    if (value == 0) return;
    tag(field, kVarint);
    zigzag(value);
  }
  void fixed64Field(uint32_t field, uint64_t value) {
    if (value == 0) return;
    tag(field, kFixed64);
    uint8_t* out = reserve(8);
    for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(value >> (8 * i));
    size_ += 8;
  }
  void doubleField(uint32_t field, double value) {
    uint64_t bits;
    std::memcpy(&bits, &value, sizeof bits);
    fixed64Field(field, bits);  // +0.0 is the default; -0.0 has bits and is kept
  }
  // A proto3 `optional double`: written whenever set, zero included (its presence is the point).
  void optionalDoubleField(uint32_t field, const std::optional<double>& value) {
    if (!value) return;
    uint64_t bits;
    std::memcpy(&bits, &*value, sizeof bits);
    tag(field, kFixed64);
    uint8_t* out = reserve(8);
    for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(bits >> (8 * i));
    size_ += 8;
  }
  // `string` fields must hold valid UTF-8: parsers reject the whole message (and so the chunk)
  // otherwise. Command lines and names from the application may be any bytes, so each byte that is
  // not part of a valid UTF-8 sequence is written as U+FFFD.
  void stringField(uint32_t field, std::string_view value) {
    if (value.empty()) return;
    repeatedStringElement(field, value);
  }
  // An element of a repeated string field is written even when empty.
  void repeatedStringElement(uint32_t field, std::string_view value) {
    if (validUtf8Prefix(value) == value.size()) {
      bytesElement(field, value);
    } else {
      bytesElement(field, withValidUtf8(value));
    }
  }
  // `bytes` fields: written as they are.
  void bytesField(uint32_t field, std::string_view value) {
    if (value.empty()) return;
    bytesElement(field, value);
  }
  void bytesElement(uint32_t field, std::string_view value) {
    tag(field, kLengthDelimited);
    varint(value.size());
    raw({reinterpret_cast<const uint8_t*>(value.data()), value.size()});
  }
  // A packed repeated field from an encoder that holds only its varints.
  void packedField(uint32_t field, const WireEncoder& values) {
    if (values.empty()) return;
    tag(field, kLengthDelimited);
    varint(values.size());
    raw(values.bytes());
  }
  template <typename Range>
  void packedUintField(uint32_t field, const Range& values) {
    if (values.empty()) return;
    WireEncoder packed;
    for (auto v : values) packed.varint(v);
    packedField(field, packed);
  }

  // A nested message: writes the tag, runs `body` to encode the message into this encoder, then
  // inserts the length in front of it. Always written, also when the body is empty.
  template <typename Body>
  void message(uint32_t field, Body&& body) {
    tag(field, kLengthDelimited);
    size_t length_at = size_;
    reserve(1);
    size_ += 1;
    body(*this);
    size_t length = size_ - length_at - 1;
    size_t length_bytes = varintSize(length);
    if (length_bytes > 1) {
      reserve(length_bytes - 1);
      std::memmove(buffer_.data() + length_at + length_bytes, buffer_.data() + length_at + 1, length);
      size_ += length_bytes - 1;
    }
    uint8_t* out = buffer_.data() + length_at;
    while (length >= 0x80) {
      *out++ = static_cast<uint8_t>(length) | 0x80;
      length >>= 7;
    }
    *out = static_cast<uint8_t>(length);
  }

  // The length of the valid UTF-8 sequence that starts at `text[at]`, 0 if none does (RFC 3629: no
  // overlong forms, no surrogates, nothing above U+10FFFF).
  static size_t utf8SequenceLength(std::string_view text, size_t at) {
    auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
    const uint8_t lead = byte(at);
    if (lead < 0x80) return 1;
    size_t length = 0;
    uint8_t low = 0x80, high = 0xbf;  // the range of the second byte
    if (lead >= 0xc2 && lead <= 0xdf) {
      length = 2;
    } else if (lead >= 0xe0 && lead <= 0xef) {
      length = 3;
      if (lead == 0xe0) low = 0xa0;
      if (lead == 0xed) high = 0x9f;
    } else if (lead >= 0xf0 && lead <= 0xf4) {
      length = 4;
      if (lead == 0xf0) low = 0x90;
      if (lead == 0xf4) high = 0x8f;
    } else {
      return 0;
    }
    if (text.size() - at < length || byte(at + 1) < low || byte(at + 1) > high) return 0;
    for (size_t i = 2; i < length; ++i) {
      if (byte(at + i) < 0x80 || byte(at + i) > 0xbf) return 0;
    }
    return length;
  }
  static size_t validUtf8Prefix(std::string_view text) {
    size_t at = 0;
    while (at < text.size()) {
      size_t length = utf8SequenceLength(text, at);
      if (length == 0) break;
      at += length;
    }
    return at;
  }
  static std::string withValidUtf8(std::string_view text) {
    std::string out;
    out.reserve(text.size() + 8);
    size_t at = 0;
    while (at < text.size()) {
      size_t length = utf8SequenceLength(text, at);
      if (length == 0) {
        out += "\xef\xbf\xbd";  // U+FFFD
        at += 1;
      } else {
        out.append(text.substr(at, length));
        at += length;
      }
    }
    return out;
  }

  static size_t varintSize(uint64_t value) {
    size_t n = 1;
    while (value >= 0x80) {
      value >>= 7;
      ++n;
    }
    return n;
  }

 private:
  // Makes room for `n` more bytes and returns where they go; the caller advances size_.
  uint8_t* reserve(size_t n) {
    if (size_ + n > buffer_.size()) buffer_.resize(std::max<size_t>(buffer_.size() * 2, size_ + n + 256));
    return buffer_.data() + size_;
  }

  std::vector<uint8_t> buffer_;
  size_t size_ = 0;
};

}  // namespace gpuxray::format
