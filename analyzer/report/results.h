// The typed results of the analyses as the JSON report carries them (`results`, schema version 2):
// each analysis's presenter turns its result struct (declared in the analysis's header) into one
// tree of objects, arrays, numbers and strings, so that other tools read data, not table cells.
// Numbers keep their unit in their key (`_ns`, `_bytes`, `_pct`); a value not recorded is null.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace gpuxray::report {

// A report holds one value per number it reports (10^6-10^7 for a run of many ranks: the memory
// curves), so a value is 32 bytes: its kind, its number, and its text, fields or items behind one
// pointer, allocated only for those kinds.
class ResultValue {
 public:
  enum class Kind : uint8_t { kNull, kInteger, kNumber, kText, kBool, kObject, kArray };

  ResultValue() = default;
  ResultValue(const ResultValue& other)
      : kind_(other.kind_),
        integer_(other.integer_),
        number_(other.number_),
        parts_(other.parts_ ? std::make_unique<Parts>(*other.parts_) : nullptr) {}
  ResultValue(ResultValue&&) noexcept = default;
  ResultValue& operator=(const ResultValue& other) {
    if (this != &other) *this = ResultValue(other);
    return *this;
  }
  ResultValue& operator=(ResultValue&&) noexcept = default;
  ~ResultValue() = default;

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
    v.parts().text = std::move(value);
    return v;
  }
  static ResultValue flag(bool value) {
    ResultValue v(Kind::kBool);
    v.integer_ = value ? 1 : 0;
    return v;
  }
  static ResultValue object() { return ResultValue(Kind::kObject); }
  static ResultValue array() { return ResultValue(Kind::kArray); }

  // On an object: adds a field (in the order written). Returns *this (moved from when it is a
  // temporary, so that a chain of set() on a new object moves the tree into place, not copies it).
  ResultValue& set(std::string key, ResultValue value) & {
    parts().fields.emplace_back(std::move(key), std::move(value));
    return *this;
  }
  ResultValue&& set(std::string key, ResultValue value) && { return std::move(set(std::move(key), std::move(value))); }
  // On an array: appends an element. Returns *this (as set()).
  ResultValue& push(ResultValue value) & {
    parts().items.push_back(std::move(value));
    return *this;
  }
  ResultValue&& push(ResultValue value) && { return std::move(push(std::move(value))); }

  Kind kind() const { return kind_; }
  int64_t asInteger() const { return integer_; }
  double asNumber() const { return number_; }
  bool asBool() const { return integer_ != 0; }
  const std::string& asText() const { return parts_ ? parts_->text : none().text; }
  const std::vector<std::pair<std::string, ResultValue>>& fields() const {
    return parts_ ? parts_->fields : none().fields;
  }
  const std::vector<ResultValue>& items() const { return parts_ ? parts_->items : none().items; }
  // The field named `key` of an object, or nullptr.
  const ResultValue* find(const std::string& key) const {
    for (const auto& [name, value] : fields()) {
      if (name == key) return &value;
    }
    return nullptr;
  }
  ResultValue* find(const std::string& key) {
    return const_cast<ResultValue*>(static_cast<const ResultValue&>(*this).find(key));
  }
  // An array's elements, to cut or reorder in place.
  std::vector<ResultValue>& mutableItems() { return parts().items; }

 private:
  struct Parts {
    std::string text;
    std::vector<std::pair<std::string, ResultValue>> fields;
    std::vector<ResultValue> items;
  };
  static const Parts& none();

  explicit ResultValue(Kind kind) : kind_(kind) {}
  Parts& parts() {
    if (!parts_) parts_ = std::make_unique<Parts>();
    return *parts_;
  }

  Kind kind_ = Kind::kNull;
  int64_t integer_ = 0;
  double number_ = 0;
  std::unique_ptr<Parts> parts_;
};

inline const ResultValue::Parts& ResultValue::none() {
  static const Parts parts;
  return parts;
}

}  // namespace gpuxray::report
