#pragma once
// The seed corpora of the fuzz targets, built by the tests' own file generators
// (tests/data/test_files.h) and by the nn layer's writers. One list per fuzz target.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace qflow::fuzz {

/// (file name, bytes) pairs.
using Seeds = std::vector<std::pair<std::string, std::vector<uint8_t>>>;

Seeds idx_seeds();
Seeds png_seeds();
Seeds tar_seeds();
Seeds cifar10_batch_seeds();
Seeds cifar10_archive_seeds();
Seeds safetensors_seeds();
Seeds checkpoint_seeds();

}  // namespace qflow::fuzz
