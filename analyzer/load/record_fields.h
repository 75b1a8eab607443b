// Which fields of each gpuxray.proto message the native loader (run_loader.cc) carries into the
// model, and which it deliberately leaves out, in one table. tests/format_schema_test.cc checks the
// table against protoc's descriptors of the schema: a field added to gpuxray.proto fails there until
// it is listed here, as loaded (then run_loader.cc maps it, and rank_writer.cc writes it back where
// the model keeps it) or as not loaded.
#pragma once

#include <span>
#include <string_view>

namespace gpuxray::load {

struct MessageFields {
  std::string_view message;     // as named in gpuxray.proto
  std::string_view loaded;      // field names, space-separated; "*": every field (kept whole)
  std::string_view not_loaded;  // field names, space-separated
  std::string_view why;         // why those are not loaded
};

std::span<const MessageFields> loadedRecordFields();

}  // namespace gpuxray::load
