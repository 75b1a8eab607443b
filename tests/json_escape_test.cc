// The one JSON string escaper, which the JSON report and the Chrome trace-event export both write
// their names through: whatever bytes a trace's name holds, the document stays valid JSON and says
// the same text.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "analyzer/report/json_writer.h"

using gpuxray::report::jsonEscape;
using gpuxray::report::JsonWriter;

TEST_CASE("json escape: quotes, backslashes and control characters, each the way JSON spells it") {
  CHECK(jsonEscape("a\"b\\c") == "a\\\"b\\\\c");
  CHECK(jsonEscape("line\nfeed\rtab\t") == "line\\nfeed\\rtab\\t");
  CHECK(jsonEscape(std::string("nul\0bell\a", 9)) == "nul\\u0000bell\\u0007");
  CHECK(jsonEscape("\x1f") == "\\u001f");
  // Printable ASCII and valid UTF-8 (two-, three- and four-byte sequences) pass through unchanged.
  CHECK(jsonEscape("gemm<128, 64> µs → 🙂") == "gemm<128, 64> µs → 🙂");
}

TEST_CASE("json escape: bytes that are not UTF-8 become U+FFFD, so a damaged name still parses") {
  // A lone continuation byte, a truncated three-byte sequence, and an overlong encoding of '/'.
  std::string damaged =
      "k\x80"
      "a\xe2\x82"
      "b\xc0\xaf";
  std::string document;
  JsonWriter(document).beginObject().field("name", damaged).endObject();
  nlohmann::json parsed = nlohmann::json::parse(document);
  std::string name = parsed["name"];
  CHECK(name.find("\xef\xbf\xbd") != std::string::npos);
  CHECK(name.front() == 'k');
  CHECK(name.find('a') != std::string::npos);
  CHECK(name.find('b') != std::string::npos);
  // Nothing of the damaged bytes is left.
  CHECK(name.find('\x80') == std::string::npos);
  CHECK(name.find('\xc0') == std::string::npos);
}

TEST_CASE("json escape: any string round-trips through the writer and a JSON parser") {
  std::string every_byte;
  for (int c = 0; c < 128; ++c) every_byte += static_cast<char>(c);
  std::string document;
  JsonWriter(document).beginArray().value(every_byte).endArray();
  CHECK(nlohmann::json::parse(document)[0] == every_byte);
}
