// QConfigMapping's rules and their resolution. See Note [QConfig mapping] in qconfig_mapping.h.
#include "qflow/quant/qconfig_mapping.h"

#include <algorithm>
#include <regex>
#include <set>

#include "qflow/core/error.h"

namespace qflow::quant {
namespace {

// True when `path` is `prefix` or lies below it ("layer1" covers "layer1.0.conv1", not "layer10").
bool covers(const std::string& prefix, const std::string& path) {
  return path == prefix || (path.size() > prefix.size() && path.compare(0, prefix.size(), prefix) == 0 &&
                            path[prefix.size()] == '.');
}

std::string describe(const QConfigRule& r) { return fmt::format("{} '{}'", to_string(r.kind), r.pattern); }

// The rule that decides (path, type), or null for the global QConfig.
const QConfigRule* deciding(const std::vector<QConfigRule>& rules, const std::string& path, const std::string& type) {
  const QConfigRule* best_path = nullptr;
  const QConfigRule* first_regex = nullptr;
  const QConfigRule* by_type = nullptr;
  for (const QConfigRule& r : rules) {
    switch (r.kind) {
      case RuleKind::Path:
        if (covers(r.pattern, path) && (best_path == nullptr || r.pattern.size() > best_path->pattern.size()))
          best_path = &r;
        break;
      case RuleKind::PathRegex:
        if (first_regex == nullptr && std::regex_match(path, std::regex(r.pattern))) first_regex = &r;
        break;
      case RuleKind::Type:
        if (r.pattern == type) by_type = &r;
        break;
    }
  }
  if (best_path) return best_path;
  if (first_regex) return first_regex;
  return by_type;
}

}  // namespace

QConfigMapping::QConfigMapping(std::optional<QConfig> global) : global_(std::move(global)) {}

QConfigMapping& QConfigMapping::set_global(std::optional<QConfig> qconfig) {
  global_ = std::move(qconfig);
  return *this;
}

QConfigMapping& QConfigMapping::set_type(std::string type, std::optional<QConfig> qconfig) {
  rules_.push_back({RuleKind::Type, std::move(type), std::move(qconfig)});
  return *this;
}

QConfigMapping& QConfigMapping::set_path(std::string path, std::optional<QConfig> qconfig) {
  rules_.push_back({RuleKind::Path, std::move(path), std::move(qconfig)});
  return *this;
}

QConfigMapping& QConfigMapping::set_path_regex(std::string regex, std::optional<QConfig> qconfig) {
  rules_.push_back({RuleKind::PathRegex, std::move(regex), std::move(qconfig)});
  return *this;
}

std::optional<QConfig> QConfigMapping::resolve(const std::string& path, const std::string& type) const {
  const QConfigRule* r = deciding(rules_, path, type);
  return r ? r->qconfig : global_;
}

std::string QConfigMapping::deciding_rule(const std::string& path, const std::string& type) const {
  const QConfigRule* r = deciding(rules_, path, type);
  return r ? describe(*r) : "global";
}

void QConfigMapping::validate() const {
  if (global_) {
    try {
      global_->validate();
    } catch (const Error& e) {
      QFLOW_FAIL("QConfigMapping: the global {}", e.message());
    }
  }
  std::set<std::pair<RuleKind, std::string>> seen;
  for (const QConfigRule& r : rules_) {
    QFLOW_CHECK(!r.pattern.empty(), "QConfigMapping: a {} rule with an empty {}", to_string(r.kind), to_string(r.kind));
    if (r.qconfig) {
      try {
        r.qconfig->validate();
      } catch (const Error& e) {
        QFLOW_FAIL("QConfigMapping: rule {}: {}", describe(r), e.message());
      }
    }
    if (r.kind == RuleKind::Type) {
      const auto& types = quantizable_types();
      QFLOW_CHECK(std::find(types.begin(), types.end(), r.pattern) != types.end(),
                  "QConfigMapping: rule {}: unknown type; the passes quantize {}", describe(r),
                  fmt::join(types, " and "));
    }
    if (r.kind == RuleKind::PathRegex) {
      try {
        (void)std::regex(r.pattern);
      } catch (const std::regex_error& e) {
        QFLOW_FAIL("QConfigMapping: rule {}: not a valid regular expression: {}", describe(r), e.what());
      }
    }
    QFLOW_CHECK(r.kind == RuleKind::PathRegex || seen.insert({r.kind, r.pattern}).second,
                "QConfigMapping: two rules for {}; give each type and path one rule", describe(r));
  }
}

void QConfigMapping::check_layers(const std::map<std::string, std::string>& layers, std::string_view who) const {
  validate();
  for (const QConfigRule& r : rules_) {
    if (r.kind == RuleKind::Type) continue;  // a type absent from a model is no typo
    const std::regex re = r.kind == RuleKind::PathRegex ? std::regex(r.pattern) : std::regex();
    const bool selects = std::any_of(layers.begin(), layers.end(), [&](const auto& layer) {
      return r.kind == RuleKind::Path ? covers(r.pattern, layer.first) : std::regex_match(layer.first, re);
    });
    if (selects) continue;
    std::vector<std::string> some;
    for (const auto& [path, type] : layers) {
      if (some.size() == 6) break;
      some.push_back(fmt::format("{} ({})", path, type));
    }
    QFLOW_FAIL("{}: the QConfig mapping's rule {} selects no layer the pass quantizes; the {} such layers include {}",
               who, describe(r), layers.size(), some.empty() ? std::string("none") : fmt::format("{}", fmt::join(some, ", ")));
  }
}

const std::vector<std::string>& quantizable_types() {
  static const std::vector<std::string> types{"Conv2d", "Linear"};
  return types;
}

std::string_view to_string(RuleKind kind) {
  switch (kind) {
    case RuleKind::Type: return "type";
    case RuleKind::Path: return "path";
    case RuleKind::PathRegex: return "path_regex";
  }
  return "?";
}

std::string to_string(const std::optional<QConfig>& qconfig) { return qconfig ? qconfig->to_string() : "float"; }

}  // namespace qflow::quant
