#include "analyzer/report/json_writer.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <iterator>

#include "proto/wire_encoder.h"

namespace gpuxray::report {

void appendJsonEscaped(std::string& out, std::string_view text) {
  std::string repaired;
  if (format::WireEncoder::validUtf8Prefix(text) != text.size()) {
    repaired = format::WireEncoder::withValidUtf8(text);
    text = repaired;
  }
  // Runs of characters that need no escape are appended whole.
  size_t plain = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (static_cast<unsigned char>(c) >= 0x20 && c != '"' && c != '\\') continue;
    out.append(text.data() + plain, i - plain);
    plain = i + 1;
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        fmt::format_to(std::back_inserter(out), "\\u{:04x}", static_cast<unsigned>(static_cast<unsigned char>(c)));
    }
  }
  out.append(text.data() + plain, text.size() - plain);
}

std::string jsonEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  appendJsonEscaped(out, text);
  return out;
}

template <typename Integer>
void JsonWriter::appendNumber(Integer number) {
  char digits[24];
  out_.append(digits, std::to_chars(digits, digits + sizeof digits, number).ptr);
}

void JsonWriter::newline() {
  if (spill_ && out_.size() > spill_bytes_) {
    spill_(out_);
    out_.clear();
  }
  out_ += '\n';
  out_.append(2 * has_element_.size(), ' ');
}

void JsonWriter::beforeValue() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!has_element_.empty()) {
    if (has_element_.back()) out_ += ',';
    has_element_.back() = true;
    newline();
  }
}

JsonWriter& JsonWriter::beginObject() {
  beforeValue();
  out_ += '{';
  has_element_.push_back(false);
  return *this;
}

JsonWriter& JsonWriter::endObject() {
  bool had = has_element_.back();
  has_element_.pop_back();
  if (had) newline();
  out_ += '}';
  if (has_element_.empty()) out_ += '\n';
  return *this;
}

JsonWriter& JsonWriter::beginArray() {
  beforeValue();
  out_ += '[';
  has_element_.push_back(false);
  return *this;
}

JsonWriter& JsonWriter::endArray() {
  bool had = has_element_.back();
  has_element_.pop_back();
  if (had) newline();
  out_ += ']';
  return *this;
}

JsonWriter& JsonWriter::key(std::string_view name) {
  beforeValue();
  out_ += '"';
  appendJsonEscaped(out_, name);
  out_ += "\": ";
  after_key_ = true;
  return *this;
}

JsonWriter& JsonWriter::value(std::string_view text) {
  beforeValue();
  out_ += '"';
  appendJsonEscaped(out_, text);
  out_ += '"';
  return *this;
}

JsonWriter& JsonWriter::value(bool flag) {
  beforeValue();
  out_ += flag ? "true" : "false";
  return *this;
}

JsonWriter& JsonWriter::value(int64_t number) {
  beforeValue();
  appendNumber(number);
  return *this;
}

JsonWriter& JsonWriter::value(uint64_t number) {
  beforeValue();
  appendNumber(number);
  return *this;
}

JsonWriter& JsonWriter::value(double number) {
  if (!std::isfinite(number)) return null();
  beforeValue();
  fmt::format_to(std::back_inserter(out_), "{}", number);
  return *this;
}

JsonWriter& JsonWriter::null() {
  beforeValue();
  out_ += "null";
  return *this;
}

}  // namespace gpuxray::report
