// QConfigMapping's JSON form (Note [QConfig mapping] in qconfig_mapping.h): the parser, strict
// about keys and value types, and the canonical writer.
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "qflow/core/error.h"
#include "qflow/quant/qconfig_mapping.h"

namespace qflow::quant {
namespace {

using Json = nlohmann::json;

// Errors of one parse: every message begins with the source and the place in the document.
struct Reader {
  const std::string& source;

  [[noreturn]] void fail(const std::string& where, const std::string& message) const {
    QFLOW_FAIL("{}: {}: {}", source, where, message);
  }

  template <class T>
  T get(const Json& j, const std::string& where, const char* key, Json::value_t type, const char* type_name) const {
    const Json& v = j.at(key);
    const bool ok = v.type() == type || (type == Json::value_t::number_float && v.is_number()) ||
                    (type == Json::value_t::number_integer && v.is_number_unsigned());
    if (!ok) fail(where, fmt::format("\"{}\" must be {}, got {}", key, type_name, v.dump()));
    return v.get<T>();
  }

  // `j` over `base`: a QConfig object naming some fields, or the string "none".
  std::optional<QConfig> qconfig(const Json& j, const QConfig& base, const std::string& where) const {
    if (j.is_string() && j.get<std::string>() == "none") return std::nullopt;
    if (!j.is_object()) fail(where, fmt::format("a QConfig must be an object or \"none\", got {}", j.dump()));
    QConfig qc = base;
    for (const auto& [key, value] : j.items()) {
      try {
        if (key == "bits") qc.bits = get<int64_t>(j, where, "bits", Json::value_t::number_integer, "an integer");
        else if (key == "activation_bits")
          qc.activation_bits = value.is_null() ? std::nullopt
                                               : std::optional(get<int64_t>(j, where, "activation_bits",
                                                                            Json::value_t::number_integer, "an integer"));
        else if (key == "scheme") qc.scheme = parse_scheme(get<std::string>(j, where, "scheme", Json::value_t::string, "a string"));
        else if (key == "formula") qc.formula = parse_formula(get<std::string>(j, where, "formula", Json::value_t::string, "a string"));
        else if (key == "per_layer") qc.per_layer = get<bool>(j, where, "per_layer", Json::value_t::boolean, "true or false");
        else if (key == "momentum") qc.momentum = get<double>(j, where, "momentum", Json::value_t::number_float, "a number");
        else if (key == "ste") qc.ste = parse_ste(get<std::string>(j, where, "ste", Json::value_t::string, "a string"));
        else if (key == "bn_fold") qc.bn_fold = parse_bn_fold(get<std::string>(j, where, "bn_fold", Json::value_t::string, "a string"));
        else if (key == "observer") qc.observer = parse_observer(get<std::string>(j, where, "observer", Json::value_t::string, "a string"));
        else if (key == "percentile") qc.percentile = get<double>(j, where, "percentile", Json::value_t::number_float, "a number");
        else if (key == "scale_init") qc.scale_init = parse_scale_init(get<std::string>(j, where, "scale_init", Json::value_t::string, "a string"));
        else if (key == "learn_zero_point") qc.learn_zero_point = get<bool>(j, where, "learn_zero_point", Json::value_t::boolean, "true or false");
        else fail(where, fmt::format("unknown QConfig field \"{}\" (expected bits, activation_bits, scheme, "
                                     "formula, per_layer, momentum, ste, bn_fold, observer, percentile, scale_init, "
                                     "learn_zero_point)", key));
      } catch (const Error& e) {
        if (e.message().rfind(source, 0) == 0) throw;
        fail(where, e.message());  // parse_scheme & co. name the word and the accepted ones
      }
    }
    try {
      qc.validate();
    } catch (const Error& e) {
      fail(where, e.message());
    }
    return qc;
  }

  void rule(const Json& j, const QConfig& base, size_t index, QConfigMapping& mapping) const {
    const std::string where = fmt::format("rules[{}]", index);
    if (!j.is_object()) fail(where, fmt::format("a rule must be an object, got {}", j.dump()));
    std::optional<RuleKind> kind;
    std::string pattern;
    for (const auto& [key, value] : j.items()) {
      if (key == "qconfig") continue;
      const std::optional<RuleKind> k = key == "type" ? RuleKind::Type
                                        : key == "path" ? RuleKind::Path
                                        : key == "path_regex" ? std::optional(RuleKind::PathRegex)
                                                              : std::nullopt;
      if (!k) fail(where, fmt::format("unknown key \"{}\" (a rule has one of type, path, path_regex, and qconfig)", key));
      if (kind) fail(where, fmt::format("a rule selects by one of type, path, path_regex; this one has both {} and {}",
                                        to_string(*kind), key));
      kind = k;
      pattern = get<std::string>(j, where, key.c_str(), Json::value_t::string, "a string");
    }
    if (!kind) fail(where, "a rule needs one of type, path, path_regex");
    if (!j.contains("qconfig")) fail(where, "a rule needs \"qconfig\" (an object, or \"none\" to keep the layers float)");
    const std::string described = fmt::format("{} ({} '{}')", where, to_string(*kind), pattern);
    const std::optional<QConfig> qc = qconfig(j.at("qconfig"), base, described);
    if (*kind == RuleKind::Type) mapping.set_type(pattern, qc);
    else if (*kind == RuleKind::Path) mapping.set_path(pattern, qc);
    else mapping.set_path_regex(pattern, qc);
  }
};

// `inherited_activation_bits`: the QConfig a parsed rule would start from (the global) has
// activation_bits set, so an unset field must be written as null to read back unset. The
// observer fields came after checkpoints recorded this text (qflow-train compares it on
// --resume): they are written only where they differ from what a reader starts from (`base`:
// the defaults for the global, the global for a rule), so older texts stay canonical.
Json to_json_value(const std::optional<QConfig>& qc, bool inherited_activation_bits = false, const QConfig& base = {}) {
  if (!qc) return "none";
  Json j{{"bits", qc->bits},           {"scheme", to_string(qc->scheme)}, {"formula", to_string(qc->formula)},
         {"per_layer", qc->per_layer}, {"momentum", qc->momentum},       {"ste", to_string(qc->ste)},
         {"bn_fold", to_string(qc->bn_fold)}};
  // Only when set: mappings written before the field existed stay byte-identical (Note [Weight
  // and activation bits]).
  if (qc->activation_bits) j["activation_bits"] = *qc->activation_bits;
  else if (inherited_activation_bits) j["activation_bits"] = nullptr;
  if (qc->observer != base.observer) j["observer"] = to_string(qc->observer);
  if (qc->percentile != base.percentile) j["percentile"] = qc->percentile;
  if (qc->scale_init != base.scale_init) j["scale_init"] = to_string(qc->scale_init);
  if (qc->learn_zero_point != base.learn_zero_point) j["learn_zero_point"] = qc->learn_zero_point;
  return j;
}

}  // namespace

std::string QConfigMapping::to_json() const {
  Json rules = Json::array();
  for (const QConfigRule& r : rules_)
    rules.push_back(Json{{std::string(to_string(r.kind)), r.pattern},
                         {"qconfig", to_json_value(r.qconfig, global_ && global_->activation_bits, global_.value_or(QConfig{}))}});
  return Json{{"global", to_json_value(global_)}, {"rules", rules}}.dump();
}

QConfigMapping QConfigMapping::from_json(std::string_view text, const QConfig& defaults, const std::string& source) {
  const Reader read{source};
  Json doc;
  try {
    doc = Json::parse(text);
  } catch (const Json::parse_error& e) {
    read.fail("not valid JSON", e.what());
  }
  if (!doc.is_object()) read.fail("top level", fmt::format("expected an object with \"global\" and \"rules\", got {}", doc.dump()));
  for (const auto& [key, value] : doc.items())
    if (key != "global" && key != "rules")
      read.fail("top level", fmt::format("unknown key \"{}\" (expected \"global\" and \"rules\")", key));
  QConfigMapping mapping(defaults);
  if (doc.contains("global")) mapping.set_global(read.qconfig(doc.at("global"), defaults, "global"));
  if (doc.contains("rules")) {
    const Json& rules = doc.at("rules");
    if (!rules.is_array()) read.fail("rules", fmt::format("must be a list of rules, got {}", rules.dump()));
    const QConfig base = mapping.global().value_or(defaults);
    for (size_t i = 0; i < rules.size(); ++i) read.rule(rules[i], base, i, mapping);
  }
  try {
    mapping.validate();
  } catch (const Error& e) {
    read.fail("rules", e.message());
  }
  return mapping;
}

QConfigMapping QConfigMapping::from_file(const std::string& path, const QConfig& defaults) {
  std::ifstream in(path);
  QFLOW_CHECK(in.good(), "QConfig mapping: cannot read '{}'", path);
  std::stringstream text;
  text << in.rdbuf();
  return from_json(text.str(), defaults, path);
}

}  // namespace qflow::quant
