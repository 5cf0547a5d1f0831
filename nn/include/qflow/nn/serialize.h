#pragma once
// Checkpoints in the safetensors format (https://github.com/huggingface/safetensors):
//
//   8 bytes   N, little-endian u64: the header length
//   N bytes   JSON: {"__metadata__": {"k": "v"}, "name": {"dtype": "F32", "shape": [2, 3],
//                    "data_offsets": [begin, end]}, ...}, padded with spaces to 8 bytes
//   rest      the tensors' bytes (little-endian, row-major), exactly covered by the ranges
//
// Note [Checkpoint files]
// Writing follows the Python library byte for byte: tensors are laid out by descending dtype
// (safetensors' enum order: I64, F64, F32, I32, I8, U8, BOOL) and then by name, the header
// lists `__metadata__` first and the tensors in layout order, compact JSON. (Metadata keys are
// sorted; Python prints them in hash order, which any reader accepts.) The file is written to
// a temporary file in the same directory, fsync'ed and renamed over the target, and the
// directory is fsync'ed: a crash or a full disk leaves either the old file or the new one,
// never a mixture. A failed write names the file, the bytes written of the total and the
// system's reason ("File too large", "No space left on device"); a process killed mid-write
// leaves only its temporary file, which the next successful save of that path removes. Reading trusts nothing: the header length, the JSON, every dtype, shape
// and range are validated, the ranges must tile the data buffer exactly (no overlap, gap or
// trailing bytes, as the Python library requires), and every failure is a qflow::Error that
// names the file and the problem. The file is read with one bounded read, so a malformed
// header can never cause a read outside it.
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "qflow/nn/state_dict.h"

namespace qflow::nn {

/// Free-form string pairs stored under "__metadata__".
using CheckpointMetadata = std::map<std::string, std::string>;

/// Writes `tensors` (any layout, all 7 dtypes) to `path` atomically. Keys must be valid UTF-8
/// and not "__metadata__"; metadata is written only when non-empty.
void save(const StateDict& tensors, const std::string& path, const CheckpointMetadata& metadata = {});

/// Removes the temporary files that processes killed while saving `path` left behind (those
/// whose writer no longer runs). save() does this after every success; a program that resumes
/// from a directory calls it at start-up. Returns how many files were removed.
int64_t remove_abandoned_temporaries(const std::string& path);

/// Reads a safetensors file; keys come back sorted (as Python's load_file gives them).
/// `metadata`, when given, receives the "__metadata__" entries.
StateDict load(const std::string& path, CheckpointMetadata* metadata = nullptr);

/// The file contents save() would write.
std::vector<uint8_t> to_safetensors_bytes(const StateDict& tensors, const CheckpointMetadata& metadata = {});
/// Parses safetensors bytes; `source` names them in error messages (usually the path).
StateDict from_safetensors_bytes(std::span<const uint8_t> bytes, const std::string& source,
                                 CheckpointMetadata* metadata = nullptr);

}  // namespace qflow::nn
