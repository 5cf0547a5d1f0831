// CIFAR-10 binary batches from a directory or a tar(.gz) archive.
#include "qflow/data/cifar10.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <numeric>

#include "qflow/core/error.h"
#include "qflow/data/byte_reader.h"
#include "qflow/data/tar_reader.h"
#include "tensor_alloc.h"

namespace qflow::data {

namespace fs = std::filesystem;

namespace {

constexpr int64_t kImage = CIFAR10::kImageBytes;
constexpr int64_t kRecord = CIFAR10::kRecordBytes;
// The official files hold 10,000 records; a million (3 GB) is no CIFAR batch file.
constexpr uint64_t kOfficialRecordsPerFile = 10'000;
constexpr uint64_t kMaxRecordsPerFile = 1'000'000;
constexpr uint64_t kMaxMetaBytes = 1 << 16;
constexpr const char* kArchiveName = "cifar-10-binary.tar.gz";
constexpr const char* kArchiveFolder = "cifar-10-batches-bin";
constexpr const char* kMetaName = "batches.meta.txt";

std::vector<std::string> batch_names(bool train) {
  if (!train) return {"test_batch.bin"};
  std::vector<std::string> names;
  for (int i = 1; i <= 5; ++i) names.push_back("data_batch_" + std::to_string(i) + ".bin");
  return names;
}

// Splits records into the image buffer and the label list while checking every label.
class RecordParser {
 public:
  // A directory's split size is known from its files (`expected_records`) and allocated once.
  // An archive's members arrive one by one (`expected_records` = 0): the first batch member's
  // declared size, capped at the official 10,000 records, is reserved for each of the split's
  // `files` — one allocation for the official archive, a small one for a small archive, never
  // more than the official split whatever a header claims.
  RecordParser(uint64_t expected_records, uint64_t files) : files_(files) {
    images_.reserve(static_cast<size_t>(std::min(expected_records, kMaxRecordsPerFile * 5) * kImage));
  }

  // Reads all records of `in`, which holds `size` bytes; returns the number of records.
  int64_t append(ByteReader& in, uint64_t size) {
    const uint64_t records = size / kRecord;
    QFLOW_CHECK(size % kRecord == 0,
                "{}: wrongly sized: {} bytes is not a whole number of {}-byte records (record {} at offset {} is cut "
                "short)",
                in.name(), size, kRecord, records, records * kRecord);
    QFLOW_CHECK(records > 0, "{}: wrongly sized: the file holds no records", in.name());
    QFLOW_CHECK(records <= kMaxRecordsPerFile, "{}: oversized: {} bytes would be {} records, more than the {} a CIFAR-10 "
                "batch file may hold", in.name(), size, records, kMaxRecordsPerFile);
    if (images_.capacity() == 0)
      images_.reserve(static_cast<size_t>(std::min(records, kOfficialRecordsPerFile) * files_ * kImage));
    constexpr uint64_t kChunk = 256;  // records per read
    std::vector<uint8_t> staging(static_cast<size_t>(std::min(records, kChunk) * kRecord));
    for (uint64_t first = 0; first < records; first += kChunk) {
      const uint64_t count = std::min(kChunk, records - first);
      in.read_exact(staging.data(), static_cast<size_t>(count * kRecord), fmt::format("record {}", first));
      // Grow with the data actually read (see Note [Streaming readers]).
      const size_t old = images_.size();
      images_.resize(old + static_cast<size_t>(count * kImage));
      for (uint64_t r = 0; r < count; ++r) {
        const uint8_t* rec = staging.data() + r * kRecord;
        QFLOW_CHECK(rec[0] < CIFAR10::kNumClasses, "{}: label {} out of range [0, {}) in record {} (offset {})",
                    in.name(), int{rec[0]}, CIFAR10::kNumClasses, first + r, (first + r) * kRecord);
        labels_.push_back(rec[0]);
        std::copy(rec + 1, rec + kRecord, images_.begin() + static_cast<std::ptrdiff_t>(old + r * kImage));
      }
    }
    return static_cast<int64_t>(records);
  }

  detail::ByteBuffer take_images() {
    // The archive path reserves for the official sizes; give back what a smaller split left.
    if (images_.capacity() > images_.size() + images_.size() / 8) images_.shrink_to_fit();
    return std::move(images_);
  }
  const std::vector<int64_t>& labels() const { return labels_; }

 private:
  uint64_t files_;
  detail::ByteBuffer images_;
  std::vector<int64_t> labels_;
};

// batches.meta.txt: one class name per line, blank lines ignored.
std::vector<std::string> parse_class_names(const std::string& text, const std::string& name) {
  std::vector<std::string> names;
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(begin, end - begin);
    const size_t first = line.find_first_not_of(" \t\r");
    if (first != std::string::npos) names.push_back(line.substr(first, line.find_last_not_of(" \t\r") - first + 1));
    begin = end + 1;
  }
  QFLOW_CHECK(static_cast<int64_t>(names.size()) == CIFAR10::kNumClasses,
              "{}: expected {} class names, one per line, found {}", name, CIFAR10::kNumClasses, names.size());
  return names;
}

std::string read_text(ByteReader& in, uint64_t size) {
  QFLOW_CHECK(size <= kMaxMetaBytes, "{}: oversized: {} bytes for a class-name list", in.name(), size);
  std::string text(static_cast<size_t>(size), '\0');
  in.read_exact(text.data(), text.size(), "class names");
  return text;
}

std::string base_name(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

const std::vector<std::string>& CIFAR10::default_class_names() {
  static const std::vector<std::string> names = {"airplane", "automobile", "bird",  "cat",  "deer",
                                                 "dog",      "frog",       "horse", "ship", "truck"};
  return names;
}

CIFAR10::CIFAR10(const std::string& root, bool train) : classes_(default_class_names()) {
  const fs::path p(root);
  const std::string first = batch_names(train).front();
  if (fs::is_regular_file(p)) {
    // A batch file given by itself would otherwise fail as "bad tar header at offset 0".
    QFLOW_CHECK(p.extension() != ".bin", "CIFAR10: {} is a batch file; pass the directory that holds the batch files",
                root);
    load_archive(root, train);
  } else if (fs::is_directory(p) && fs::exists(p / first)) {
    load_directory(root, train);
  } else if (fs::is_directory(p) && fs::exists(p / kArchiveFolder / first)) {
    load_directory((p / kArchiveFolder).string(), train);
  } else if (fs::is_directory(p) && fs::exists(p / kArchiveName)) {
    load_archive((p / kArchiveName).string(), train);
  } else {
    QFLOW_CHECK(fs::exists(p), "CIFAR10: {} does not exist", root);
    QFLOW_FAIL("CIFAR10: no CIFAR-10 binary data in {}: expected {} (directly or in {}/) or {}", root, first,
               kArchiveFolder, kArchiveName);
  }
}

void CIFAR10::load_directory(const std::string& dir, bool train) {
  source_ = dir;
  const std::vector<std::string> names = batch_names(train);
  std::vector<std::unique_ptr<FileReader>> files;
  uint64_t total = 0;
  for (const std::string& name : names) {
    const fs::path path = fs::path(dir) / name;
    QFLOW_CHECK(fs::exists(path), "CIFAR10: {} is missing from {}", name, dir);
    files.push_back(std::make_unique<FileReader>(path.string()));
    total += *files.back()->size();
  }
  // Sizes are known up front, so the whole split is allocated once.
  RecordParser parser(total / kRecord, names.size());
  for (auto& file : files) parser.append(*file, *file->size());
  labels_ = parser.labels();
  images_ = detail::wrap_bytes(parser.take_images(), {size(), 3, 32, 32});

  const fs::path meta = fs::path(dir) / kMetaName;
  if (fs::exists(meta)) {
    FileReader in(meta.string());
    classes_ = parse_class_names(read_text(in, *in.size()), meta.string());
  }
}

// Note [CIFAR-10 archive order]
// The members of the official archive are not stored in batch order (data_batch_2.bin comes
// last), and a .tar.gz can only be read front to back. Records are therefore appended in
// archive order and samples map to records through record_of_sample_ — no second buffer and
// no reordering copy, while sample i is still torchvision's sample i.
void CIFAR10::load_archive(const std::string& path, bool train) {
  source_ = path;
  const std::vector<std::string> names = batch_names(train);
  auto archive = open_file(path);
  TarReader tar(*archive);
  RecordParser parser(0, names.size());
  // batch position in `names` -> (first record, record count)
  std::map<size_t, std::pair<int64_t, int64_t>> found;
  int64_t records = 0;
  bool have_meta = false;
  while (auto entry = tar.next()) {
    if (!entry->is_file()) continue;
    const std::string base = base_name(entry->path);
    if (base == kMetaName) {
      QFLOW_CHECK(!have_meta, "{}: duplicate member {}", path, entry->path);
      classes_ = parse_class_names(read_text(tar.member(), entry->size), tar.member().name());
      have_meta = true;
      continue;
    }
    const auto it = std::find(names.begin(), names.end(), base);
    if (it == names.end()) continue;
    const size_t k = static_cast<size_t>(it - names.begin());
    QFLOW_CHECK(!found.count(k), "{}: duplicate member {}", path, entry->path);
    const int64_t n = parser.append(tar.member(), entry->size);
    found[k] = {records, n};
    records += n;
  }
  for (size_t k = 0; k < names.size(); ++k)
    QFLOW_CHECK(found.count(k), "CIFAR10: {} has no member {}", path, names[k]);

  const std::vector<int64_t>& record_labels = parser.labels();
  labels_.reserve(record_labels.size());
  bool in_order = true;
  for (const auto& [k, span] : found) {  // std::map iterates in batch order
    in_order = in_order && span.first == static_cast<int64_t>(labels_.size());
    for (int64_t r = span.first; r < span.first + span.second; ++r) {
      record_of_sample_.push_back(r);
      labels_.push_back(record_labels[static_cast<size_t>(r)]);
    }
  }
  if (in_order) record_of_sample_.clear();
  images_ = detail::wrap_bytes(parser.take_images(), {records, 3, 32, 32});
}

Example CIFAR10::get(int64_t index) const {
  detail::check_index("CIFAR10", index, size());
  const int64_t record = record_of_sample_.empty() ? index : record_of_sample_[static_cast<size_t>(index)];
  return {detail::view_into(images_, {3, 32, 32}, record * kImage), labels_[static_cast<size_t>(index)]};
}

}  // namespace qflow::data
