// One description per record: gpuxray.proto is the table the rest is checked against. The writer's
// field numbers are generated from it (proto/field_numbers.h), the reader decodes with its generated
// classes, and the native loader's use of every field is listed in analyzer/load/record_fields.cc,
// which these tests hold to the schema's descriptors.
#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "analyzer/load/record_fields.h"
#include "proto/field_numbers.h"
#include "proto/gpuxray.pb.h"

namespace {

using google::protobuf::Descriptor;
namespace pb = gpuxray::format::pb;

std::set<std::string> words(std::string_view text) {
  std::set<std::string> result;
  std::istringstream in{std::string(text)};
  for (std::string word; in >> word;) result.insert(word);
  return result;
}

// What is wrong between the schema (every message reachable from `root`) and the loader's table,
// one line per problem; empty when they agree.
std::vector<std::string> tableProblems(const Descriptor* root, std::span<const gpuxray::load::MessageFields> table) {
  std::vector<std::string> problems;
  std::set<const Descriptor*> seen;
  std::vector<const Descriptor*> pending{root};
  std::set<std::string> listed_messages;
  while (!pending.empty()) {
    const Descriptor* message = pending.back();
    pending.pop_back();
    if (!seen.insert(message).second) continue;
    std::set<std::string> fields;
    for (int i = 0; i < message->field_count(); ++i) {
      fields.insert(std::string(message->field(i)->name()));
      if (message->field(i)->message_type() != nullptr) pending.push_back(message->field(i)->message_type());
    }
    const std::string name(message->name());
    const gpuxray::load::MessageFields* row = nullptr;
    for (const auto& entry : table) {
      if (entry.message == name) row = &entry;
    }
    if (row == nullptr) {
      problems.push_back(name + ": not in analyzer/load/record_fields.cc");
      continue;
    }
    listed_messages.insert(name);
    std::set<std::string> loaded = row->loaded == "*" ? fields : words(row->loaded);
    std::set<std::string> not_loaded = words(row->not_loaded);
    for (const auto& field : fields) {
      if (!loaded.contains(field) && !not_loaded.contains(field))
        problems.push_back(name + "." + field + ": neither loaded nor listed as not loaded");
      if (loaded.contains(field) && not_loaded.contains(field))
        problems.push_back(name + "." + field + ": listed as loaded and as not loaded");
    }
    for (const auto& listed : loaded) {
      if (!fields.contains(listed)) problems.push_back(name + "." + listed + ": listed but not in the schema");
    }
    for (const auto& listed : not_loaded) {
      if (!fields.contains(listed)) problems.push_back(name + "." + listed + ": listed but not in the schema");
    }
    if (!not_loaded.empty() && row->why.empty()) problems.push_back(name + ": fields not loaded, and no reason why");
  }
  for (const auto& entry : table) {
    if (!listed_messages.contains(std::string(entry.message)))
      problems.push_back(std::string(entry.message) + ": listed but not in the schema");
  }
  std::sort(problems.begin(), problems.end());
  return problems;
}

}  // namespace

TEST_CASE("schema: every field of gpuxray.proto is loaded by the native loader or listed as not loaded",
          "[format][schema]") {
  CHECK(tableProblems(pb::Chunk::descriptor(), gpuxray::load::loadedRecordFields()) == std::vector<std::string>{});
}

TEST_CASE("schema: a field added to gpuxray.proto and not handled is named by the check", "[format][schema]") {
  // The schema as it is, plus one field in Memcpy and one new message in EventBatch.
  google::protobuf::FileDescriptorProto file;
  pb::Chunk::descriptor()->file()->CopyTo(&file);
  for (auto& message : *file.mutable_message_type()) {
    if (message.name() == "Memcpy") {
      auto* field = message.add_field();
      field->set_name("peer_access");
      field->set_number(99);
      field->set_type(google::protobuf::FieldDescriptorProto::TYPE_BOOL);
      field->set_label(google::protobuf::FieldDescriptorProto::LABEL_OPTIONAL);
    }
    if (message.name() == "EventBatch") {
      auto* field = message.add_field();
      field->set_name("graph_launches");
      field->set_number(99);
      field->set_type(google::protobuf::FieldDescriptorProto::TYPE_MESSAGE);
      field->set_type_name(".gpuxray.format.pb.GraphLaunch");
      field->set_label(google::protobuf::FieldDescriptorProto::LABEL_REPEATED);
    }
  }
  auto* added = file.add_message_type();
  added->set_name("GraphLaunch");
  auto* id = added->add_field();
  id->set_name("graph_id");
  id->set_number(1);
  id->set_type(google::protobuf::FieldDescriptorProto::TYPE_UINT32);
  id->set_label(google::protobuf::FieldDescriptorProto::LABEL_OPTIONAL);
  google::protobuf::DescriptorPool pool;
  const google::protobuf::FileDescriptor* extended = pool.BuildFile(file);
  REQUIRE(extended != nullptr);
  CHECK(tableProblems(extended->FindMessageTypeByName("Chunk"), gpuxray::load::loadedRecordFields()) ==
        std::vector<std::string>{"EventBatch.graph_launches: neither loaded nor listed as not loaded",
                                 "GraphLaunch: not in analyzer/load/record_fields.cc",
                                 "Memcpy.peer_access: neither loaded nor listed as not loaded"});
}

TEST_CASE("schema: the generated field numbers are the schema's", "[format][schema]") {
  namespace field = gpuxray::format::field;
  CHECK(field::Chunk::batch == pb::Chunk::kBatchFieldNumber);
  CHECK(field::EventBatch::capture_windows == pb::EventBatch::kCaptureWindowsFieldNumber);
  CHECK(field::NcclOperation::gpu_clock_unmapped == pb::NcclOperation::kGpuClockUnmappedFieldNumber);
  CHECK(field::KernelConfig::max_active_clusters == pb::KernelConfig::kMaxActiveClustersFieldNumber);
  CHECK(field::DeviceProperties::peak_bf16_flops == pb::DeviceProperties::kPeakBf16FlopsFieldNumber);
}

TEST_CASE("schema: the writer states no field number of its own", "[format][schema]") {
  std::ifstream in(std::filesystem::path(GPUXRAY_SOURCE_DIR) / "proto" / "trace_writer.cc");
  std::stringstream text;
  text << in.rdbuf();
  REQUIRE(!text.str().empty());
  const std::regex literal(R"(\b(uintField|intField|sintField|fixed64Field|doubleField|stringField|bytesField|)"
                           R"(repeatedStringElement|packedField|packedUintField|message|tag)\(\s*[0-9])");
  std::vector<std::string> found;
  std::string source = text.str();
  for (auto it = std::sregex_iterator(source.begin(), source.end(), literal); it != std::sregex_iterator(); ++it)
    found.push_back(it->str());
  CHECK(found == std::vector<std::string>{});
}
