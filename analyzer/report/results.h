// The typed results of the analyses as the JSON report carries them (`results`, schema version 2):
// each analysis's presenter turns its result struct (declared in the analysis's header) into one
// tree of objects, arrays, numbers and strings, so that other tools read data, not table cells.
// Numbers keep their unit in their key (`_ns`, `_bytes`, `_pct`); a value not recorded is null.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace gpuxray::report {

class ResultValue {
 public:
  enum class Kind { kNull, kInteger, kNumber, kText, kBool, kObject, kArray };

  ResultValue() = default;
  static ResultValue integer(int64_t value) {
    ResultValue v(Kind::kInteger);
    v.integer_ = value;
    return v;
  }
  // NaN or an infinity is "not recorded": null.
  static ResultValue number(double value) {
    if (!std::isfinite(value)) return {};
    ResultValue v(Kind::kNumber);
    v.number_ = value;
    return v;
  }
  static ResultValue text(std::string value) {
    ResultValue v(Kind::kText);
    v.text_ = std::move(value);
    return v;
  }
  static ResultValue flag(bool value) {
    ResultValue v(Kind::kBool);
    v.integer_ = value ? 1 : 0;
    return v;
  }
  static ResultValue object() { return ResultValue(Kind::kObject); }
  static ResultValue array() { return ResultValue(Kind::kArray); }

  // On an object: adds a field (in the order written). Returns *this.
  ResultValue& set(std::string key, ResultValue value) {
    fields_.emplace_back(std::move(key), std::move(value));
    return *this;
  }
  // On an array: appends an element. Returns *this.
  ResultValue& push(ResultValue value) {
    items_.push_back(std::move(value));
    return *this;
  }

  Kind kind() const { return kind_; }
  int64_t asInteger() const { return integer_; }
  double asNumber() const { return number_; }
  bool asBool() const { return integer_ != 0; }
  const std::string& asText() const { return text_; }
  const std::vector<std::pair<std::string, ResultValue>>& fields() const { return fields_; }
  const std::vector<ResultValue>& items() const { return items_; }
  // The field named `key` of an object, or nullptr.
  const ResultValue* find(const std::string& key) const {
    for (const auto& [name, value] : fields_) {
      if (name == key) return &value;
    }
    return nullptr;
  }

 private:
  explicit ResultValue(Kind kind) : kind_(kind) {}

  Kind kind_ = Kind::kNull;
  int64_t integer_ = 0;
  double number_ = 0;
  std::string text_;
  std::vector<std::pair<std::string, ResultValue>> fields_;
  std::vector<ResultValue> items_;
};

}  // namespace gpuxray::report
