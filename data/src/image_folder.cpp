// ImageFolder: class folders of PNG files.
#include "qflow/data/image_folder.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "qflow/core/error.h"

namespace qflow::data {

namespace fs = std::filesystem;

namespace {

bool is_png_name(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext == ".png";
}

bool is_hidden(const fs::path& p) { return !p.filename().empty() && p.filename().string()[0] == '.'; }

}  // namespace

ImageFolder::ImageFolder(const std::string& root, ImageFolderOptions options) : options_(options) {
  QFLOW_CHECK(fs::is_directory(root), "ImageFolder: {} is not a directory", root);
  for (const auto& entry : fs::directory_iterator(root))
    if (entry.is_directory() && !is_hidden(entry.path())) classes_.push_back(entry.path().filename().string());
  std::sort(classes_.begin(), classes_.end());
  QFLOW_CHECK(!classes_.empty(), "ImageFolder: {} has no class sub-folders", root);

  std::vector<std::string> empty;
  for (size_t label = 0; label < classes_.size(); ++label) {
    std::vector<std::string> files;
    const auto opts = fs::directory_options::follow_directory_symlink | fs::directory_options::skip_permission_denied;
    for (auto it = fs::recursive_directory_iterator(fs::path(root) / classes_[label], opts);
         it != fs::recursive_directory_iterator(); ++it) {
      if (is_hidden(it->path())) {
        if (it->is_directory()) it.disable_recursion_pending();
        continue;
      }
      if (it->is_regular_file() && is_png_name(it->path())) files.push_back(it->path().string());
    }
    std::sort(files.begin(), files.end());
    if (files.empty()) empty.push_back(classes_[label]);
    for (std::string& f : files) samples_.push_back({std::move(f), static_cast<int64_t>(label)});
  }
  QFLOW_CHECK(empty.empty(), "ImageFolder: no .png files for class(es) {} in {}", empty, root);
}

Example ImageFolder::get(int64_t index) const {
  detail::check_index("ImageFolder", index, size());
  const Sample& s = samples_[static_cast<size_t>(index)];
  return {read_png(s.path, options_.channels), s.label};
}

}  // namespace qflow::data
