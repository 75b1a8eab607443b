// A batch's kernel and API-call columns decoded from their bytes straight into records, one pass over
// each packed column. Parsed by libprotobuf into its repeated fields first and then copied into the
// records, every value was written and read twice more (a fifth of reading a native trace).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "proto/id_map.h"
#include "proto/records.h"

namespace gpuxray::format {

enum class ColumnsDecoded {
  kOk,
  // A non-empty column holds another number of values than the start column: no records.
  kLengthsDiffer,
  // A column comes twice, unpacked or with a malformed value: what it holds is libprotobuf's to say.
  kUnusual,
};

struct ColumnsRead {
  ColumnsDecoded outcome = ColumnsDecoded::kOk;
  uint64_t records = 0;  // the start column's values (the records, when the columns decode)
};

// `configured`: by the file's configuration id, a kernel with that configuration's fields set. A kernel
// whose id is not there gets none and counts in `unresolved` (only when the columns decode).
ColumnsRead decodeKernelColumns(std::span<const uint8_t> columns, const IdMap<KernelRecord>& configured,
                                std::vector<KernelRecord>& kernels, uint64_t& unresolved);
ColumnsRead decodeApiCallColumns(std::span<const uint8_t> columns, std::vector<ApiCallRecord>& calls);

// A chunk that holds a batch alone, split so that libprotobuf parses all of it but the columns: `rest`
// is the batch's other fields. False when the chunk holds anything else, or the columns more than once.
struct SplitBatch {
  std::vector<uint8_t> rest;
  std::span<const uint8_t> kernels;
  std::span<const uint8_t> api_calls;
};
bool splitBatch(std::span<const uint8_t> chunk, SplitBatch& split);

}  // namespace gpuxray::format
