#pragma once
// QConfigMapping: which QConfig each layer of a model is quantized with, or whether it stays
// float — per-layer quantization in the spirit of PyTorch's QConfigMapping.
//
// Note [QConfig mapping]
// A mapping is a global QConfig (or none) and a list of rules. A rule selects layers by
//   type        the float module's type_name(): "Conv2d" or "Linear" (the types the passes
//               quantize, Note [QAT rewrite]; a Conv2d folded with its BatchNorm2d counts as
//               a Conv2d);
//   path        a dotted module path: the layer at that path and every layer below it
//               ("layer1" covers "layer1.0.conv1"); the longest such path wins;
//   path_regex  an ECMAScript regular expression that must match the whole dotted path
//               (std::regex_match: "layer1\\..*", not "layer1"); of several matching regexes
//               the first listed wins, as in PyTorch's QConfigMapping;
// and gives a QConfig, or none: the layers it selects stay float (no observers, no fake
// quantization, no deployed module — their float Conv2d/Linear and BatchNorm2d are kept as
// they are). The most specific rule wins: path > path_regex > type > global. A type or path
// may have one rule only (a second would be ambiguous).
// Activations: a Q module quantizes its own input with its input observer (Note [QAT module
// layout]), so an activation takes the QConfig of the layer it feeds, and the input of a
// float layer is not quantized. Outputs are never quantized by their producer, so nothing
// needs a QConfig of the layer an activation follows.
// Bits may differ per layer. What runs where: a deployed layer runs the integer kernels when
// its own QConfig allows (2..8-bit symmetric grids: their integers fit int8; Note [Integer
// activations] in deploy.h), the float simulation otherwise; ONNX export writes 8-bit layers
// as Q/DQ, float layers as float, and refuses other widths naming the node (Note [Q/DQ
// export]).
// Checks: validate() refuses an invalid QConfig, a type the passes do not quantize, a regex
// std::regex cannot compile (naming it and the error) and a repeated type or path;
// check_layers() — every pass runs it on the float model — also refuses a path or regex that
// selects no quantizable layer (PyTorch ignores those silently; here a typo would quietly
// leave a layer at the global QConfig), naming it and listing some valid paths.
// JSON (from_json / to_json, what --qconfig FILE.json of the tools holds):
//   {"global": {"bits": 4},
//    "rules": [{"path": "conv1", "qconfig": {"bits": 8}},
//              {"path": "linear", "qconfig": {"bits": 8}},
//              {"path_regex": "layer4\\..*", "qconfig": "none"},
//              {"type": "Linear", "qconfig": {"per_layer": false}}]}
// A QConfig object names any of QConfig's fields (bits, scheme, formula, per_layer, momentum,
// ste, bn_fold, observer, percentile, scale_init, learn_zero_point) with the words of
// QConfig::to_string; "global" starts from the caller's
// defaults (the tools' --bits, --scheme, ... flags) and a rule's from the global (from the
// defaults when the global is "none"). Both keys are optional ("global" absent: the defaults);
// any other key is refused. to_json writes the canonical form — every field of every QConfig
// spelled out (the observer fields only when not the default, so texts recorded before they
// existed stay canonical), rules in order — which qflow-train records in its checkpoints and compares on
// --resume.
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "qflow/quant/qconfig.h"

namespace qflow::quant {

/// How a rule selects layers (Note [QConfig mapping]).
enum class RuleKind { Type, Path, PathRegex };

struct QConfigRule {
  RuleKind kind;
  std::string pattern;            // "Conv2d"; "layer1.0.conv1"; "layer1\\..*"
  std::optional<QConfig> qconfig;  // nullopt: the selected layers stay float
  bool operator==(const QConfigRule&) const = default;
};

class QConfigMapping {
 public:
  /// Every layer with `global` (nullopt: every layer float) until rules say otherwise. There is
  /// no default constructor, so `{}` at a pass's QConfig argument still means QConfig{}.
  explicit QConfigMapping(std::optional<QConfig> global);

  QConfigMapping& set_global(std::optional<QConfig> qconfig);
  /// Adds a rule (the setters append; a repeated type or path is refused by validate()).
  QConfigMapping& set_type(std::string type, std::optional<QConfig> qconfig);
  QConfigMapping& set_path(std::string path, std::optional<QConfig> qconfig);
  QConfigMapping& set_path_regex(std::string regex, std::optional<QConfig> qconfig);

  const std::optional<QConfig>& global() const { return global_; }
  const std::vector<QConfigRule>& rules() const { return rules_; }

  /// The QConfig of the layer at `path` whose float module's type_name() is `type`; nullopt
  /// when it stays float.
  std::optional<QConfig> resolve(const std::string& path, const std::string& type) const;
  /// The rule that decides `path`/`type` ("path 'conv1'", "path_regex 'layer1\\..*'",
  /// "type Conv2d", "global").
  std::string deciding_rule(const std::string& path, const std::string& type) const;

  /// Throws qflow::Error for an invalid QConfig, an unknown type, a bad regex or a repeated
  /// type or path rule, naming the rule.
  void validate() const;
  /// validate(), then throws when a path or path_regex rule selects none of `layers` (dotted
  /// path -> float type of every layer the pass could quantize), naming it and listing some
  /// valid paths. `who` begins the message ("quantization_aware_training").
  void check_layers(const std::map<std::string, std::string>& layers, std::string_view who) const;

  /// The canonical JSON text (Note [QConfig mapping]): one line, keys sorted, every QConfig
  /// field written.
  std::string to_json() const;
  /// Parses the JSON of Note [QConfig mapping]; QConfig objects start from `defaults`. Errors
  /// begin with `source` (a file name) and name the offending key, rule or value.
  static QConfigMapping from_json(std::string_view text, const QConfig& defaults = {},
                                  const std::string& source = "qconfig mapping");
  /// from_json of a file's contents; throws naming the file when it cannot be read.
  static QConfigMapping from_file(const std::string& path, const QConfig& defaults = {});

  bool operator==(const QConfigMapping&) const = default;

 private:
  std::optional<QConfig> global_;
  std::vector<QConfigRule> rules_;
};

/// The types a type rule may name: the float layers the passes quantize.
const std::vector<std::string>& quantizable_types();
/// "type", "path", "path_regex": the JSON key of a rule kind.
std::string_view to_string(RuleKind kind);
/// qconfig->to_string(), or "float" for nullopt.
std::string to_string(const std::optional<QConfig>& qconfig);

}  // namespace qflow::quant
