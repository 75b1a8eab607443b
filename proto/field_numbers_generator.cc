// Writes gpuxray/proto/field_numbers.h from the descriptors protoc generated for gpuxray.proto: one
// namespace per message, one constant per field, named as in the schema. The writer encodes with
// these constants, so its field numbers come from the schema without it including libprotobuf; a
// field renamed or removed in the schema stops the writer from compiling.
//
//   field_numbers_generator OUTPUT
#include <fstream>
#include <iostream>
#include <set>
#include <string>

#include "proto/gpuxray.pb.h"

namespace {

using google::protobuf::Descriptor;

void writeMessage(std::ostream& out, const Descriptor* message, std::set<const Descriptor*>& done) {
  if (!done.insert(message).second) return;
  out << "namespace " << message->name() << " {\n";
  for (int i = 0; i < message->field_count(); ++i) {
    const auto* field = message->field(i);
    out << "inline constexpr uint32_t " << field->name() << " = " << field->number() << ";\n";
  }
  out << "}  // namespace " << message->name() << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: field_numbers_generator OUTPUT\n";
    return 2;
  }
  const auto* file = gpuxray::format::pb::Chunk::descriptor()->file();
  std::ofstream out(argv[1]);
  out << "// Generated from " << file->name() << " by proto/field_numbers_generator.cc: do not edit.\n"
      << "#pragma once\n\n#include <cstdint>\n\nnamespace gpuxray::format::field {\n\n";
  std::set<const Descriptor*> done;
  for (int i = 0; i < file->message_type_count(); ++i) writeMessage(out, file->message_type(i), done);
  out << "\n}  // namespace gpuxray::format::field\n";
  out.close();
  if (!out) {
    std::cerr << argv[1] << ": cannot write\n";
    return 1;
  }
  return 0;
}
