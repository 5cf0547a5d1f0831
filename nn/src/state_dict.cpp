#include "qflow/nn/state_dict.h"

namespace qflow::nn {

StateDict::StateDict(std::initializer_list<Item> items) {
  for (const auto& [key, value] : items) insert(key, value);
}

void StateDict::insert(std::string key, Tensor value) {
  QFLOW_CHECK(!contains(key), "StateDict: duplicate key '{}'", key);
  index_.emplace(key, items_.size());
  items_.emplace_back(std::move(key), std::move(value));
}

void StateDict::insert_or_assign(std::string key, Tensor value) {
  auto it = index_.find(key);
  if (it != index_.end()) {
    items_[it->second].second = std::move(value);
    return;
  }
  insert(std::move(key), std::move(value));
}

bool StateDict::erase(const std::string& key) {
  auto it = index_.find(key);
  if (it == index_.end()) return false;
  const size_t pos = it->second;
  index_.erase(it);
  items_.erase(items_.begin() + static_cast<std::ptrdiff_t>(pos));
  // Later items moved down by one.
  for (size_t i = pos; i < items_.size(); ++i) index_[items_[i].first] = i;
  return true;
}

const Tensor& StateDict::at(const std::string& key) const {
  const Tensor* t = find(key);
  QFLOW_CHECK(t != nullptr, "StateDict: no key '{}' ({} keys)", key, items_.size());
  return *t;
}

const Tensor* StateDict::find(const std::string& key) const {
  auto it = index_.find(key);
  return it == index_.end() ? nullptr : &items_[it->second].second;
}

std::vector<std::string> StateDict::keys() const {
  std::vector<std::string> out;
  out.reserve(items_.size());
  for (const auto& item : items_) out.push_back(item.first);
  return out;
}

}  // namespace qflow::nn
