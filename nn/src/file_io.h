#pragma once
// Whole-file reads and atomic writes for checkpoints. See Note [Checkpoint files].
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace qflow::nn::detail {

/// The whole file at `path`, read with reads bounded by its size at open time. `op` prefixes
/// error messages ("load").
std::vector<uint8_t> read_whole_file(const std::string& path, const char* op);

/// Replaces `path` with the concatenation of `chunks`: written to a temporary file in the same
/// directory, fsync'ed, renamed over `path`, directory fsync'ed. On failure the temporary file
/// is removed, `path` is untouched, and a qflow::Error names the path, the bytes written of
/// the total and the errno text. A success also removes the temporaries of `path` that killed
/// processes left behind; see Note [Interrupted writes] in file_io.cpp.
void write_file_atomically(const std::string& path, std::span<const std::span<const uint8_t>> chunks, const char* op);

}  // namespace qflow::nn::detail
