// A small streaming JSON writer for machine-readable reports: keys in the order written, numbers
// as given (doubles with up to 17 significant digits; NaN and infinities become null).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace gpuxray::report {

class JsonWriter {
 public:
  explicit JsonWriter(std::string& out) : out_(out) {}
  // Hands `out` to `write` and empties it whenever it holds more than `bytes`, between two elements,
  // so that a large document is written as it is made, not held whole. The caller writes what is
  // left at the end.
  void spillTo(std::function<void(std::string_view)> write, size_t bytes) {
    spill_ = std::move(write);
    spill_bytes_ = bytes;
  }

  JsonWriter& beginObject();
  JsonWriter& endObject();
  JsonWriter& beginArray();
  JsonWriter& endArray();
  JsonWriter& key(std::string_view name);

  JsonWriter& value(std::string_view text);
  JsonWriter& value(const char* text) { return value(std::string_view(text)); }
  JsonWriter& value(const std::string& text) { return value(std::string_view(text)); }
  JsonWriter& value(bool flag);
  JsonWriter& value(int64_t number);
  JsonWriter& value(uint64_t number);
  JsonWriter& value(int32_t number) { return value(static_cast<int64_t>(number)); }
  JsonWriter& value(uint32_t number) { return value(static_cast<uint64_t>(number)); }
  JsonWriter& value(double number);
  JsonWriter& null();

  template <typename T>
  JsonWriter& field(std::string_view name, const T& v) {
    key(name);
    return value(v);
  }

 private:
  void beforeValue();
  void newline();
  template <typename Integer>
  void appendNumber(Integer number);

  std::string& out_;
  std::function<void(std::string_view)> spill_;
  size_t spill_bytes_ = 0;
  // One entry per open container: whether it has an element yet.
  std::vector<bool> has_element_;
  bool after_key_ = false;
};

// `text` as a JSON string's contents: quotes, backslashes and control characters escaped, and bytes
// that are not UTF-8 replaced (U+FFFD), so that a name read from a damaged trace still gives valid JSON.
void appendJsonEscaped(std::string& out, std::string_view text);
std::string jsonEscape(std::string_view text);

}  // namespace gpuxray::report
