#pragma once
// The quantization passes: a traced float model becomes a quantization aware model with one
// call, trains like any model, and becomes a deployable model with every parameter fixed.
//
//   auto gm  = fx::symbolic_trace(net, example);
//   quant::PassSummary summary;
//   auto qat = quant::quantization_aware_training(*gm, example, qconfig, &summary);
//   fmt::print("{}", summary.to_string());
//   ... train *qat like net ...
//   auto deploy = quant::dequantization_aware_training(*gm, *qat, example, qconfig);
//
// Per layer (Note [Per-layer passes]): 4 bits, conv1 at 8, the classifier float:
//   quant::QConfigMapping mapping(quant::QConfig{.bits = 4});
//   mapping.set_path("conv1", quant::QConfig{}).set_type("Linear", std::nullopt);
//   auto qat = quant::quantization_aware_training(*gm, example, mapping, &summary);
//   ... train ...
//   auto deploy = quant::dequantization_aware_training(*gm, *qat, example, mapping);
//
// Post-training quantization, for comparison (calibrate is in calibrate.h):
//   auto ptq = quant::prepare_ptq(*gm, example, qconfig);        // BN folded, then QConv2d/QLinear
//   quant::calibrate(*ptq, loader, 16);
//   auto deploy = quant::dequantization_aware_training(*gm, *ptq, example, qconfig);
//
// Note [QAT rewrite]
// Matching is by data flow with fx's chain matcher (Note [Chain patterns]):
//   Conv2d → BatchNorm2d (the BN the conv's only user, with running statistics) → QConvBN
//   any other Conv2d                                                            → QConv2d
//   Linear                                                                      → QLinear
// The new module takes the conv's (or linear's) place at the same dotted path, so the node
// keeps its name, state_dict keeps its order and the keys stay readable and deterministic
// (layer1.0.conv1.weight, layer1.0.conv1.bn.running_mean, layer1.0.conv1.input_observer.min_val);
// the folded BatchNorm2d's node and submodule are removed. A conv or BN module called from
// more than one node (shared weights) is not folded: all its calls keep sharing one module,
// which becomes a QConv2d (and the BN stays). Only exact types match (a subclass of Conv2d
// computes something else). Every rewritten node gets "quant.*" meta (see quant_meta.h) so
// fx::to_dot draws bits, scheme, formula, granularity and, once known, the scales.
// No pass draws from the caller's random stream. The deploy pass swaps each Q module for its D form at the same path (Note [Deployed module
// layout]); every other node and module is copied from the QAT model as trained.
//
// Note [Per-layer passes]
// Every pass takes a QConfigMapping (Note [QConfig mapping]): each Conv2d (with or without its
// BatchNorm2d) and Linear is quantized with the QConfig the mapping resolves for its path and
// type, or left float, BatchNorm2d and all, when it resolves to none. The overloads taking a
// QConfig are the shorthand for QConfigMapping(qconfig): that QConfig everywhere. The mapping's
// rules are checked against the float model first (QConfigMapping::check_layers). The passes
// take the example inputs as a list, as fx::symbolic_trace does, so a model whose forward takes
// several tensors (and returns several) goes through all of them; the single-Tensor overloads
// are the one-input case.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "qflow/fx/fuse.h"
#include "qflow/fx/graph_module.h"
#include "qflow/quant/qconfig.h"
#include "qflow/quant/qconfig_mapping.h"

namespace qflow::quant {

/// One node a pass rewrote.
struct Replacement {
  std::string node;    // graph node name ("layer1_0_conv1")
  std::string path;    // dotted path of the new module ("layer1.0.conv1")
  std::string from;    // what was there ("Conv2d + BatchNorm2d", "QConvBN")
  std::string to;      // the new module's type ("QConvBN", "DConv2d")
  std::string folded;  // path of the BatchNorm2d folded in ("layer1.0.bn1"), or empty
  std::optional<QConfig> qconfig;  // the new module's QConfig; nullopt for a layer left float
};

/// What a pass did, for printing and for tests.
struct PassSummary {
  std::string pass;  // "quantization_aware_training", "prepare_ptq", "dequantization_aware_training"
  QConfigMapping mapping{QConfig{}};
  std::vector<Replacement> replaced;  // in graph order
  /// Conv2d/Linear nodes the mapping leaves float (from = to = the float type), in graph order.
  std::vector<Replacement> left_float;
  /// Replacements by the new module's type: {"QConvBN": 20, "QLinear": 1}.
  std::map<std::string, int64_t> counts;
  int64_t batchnorm_folded = 0;  // BatchNorm2d modules folded into convs (by QConvBN or fuse_conv_bn)
  int64_t batchnorm_left = 0;    // BatchNorm2d nodes still in the result
  int64_t conv_left = 0;         // float Conv2d / Linear nodes still in the result (0 after a pass)
  int64_t linear_left = 0;
  /// dequantization_aware_training: deployed layers that run integer kernels, and one line per
  /// layer that runs the float simulation instead, with why (quant::float_layers).
  int64_t integer_layers = 0;
  std::vector<std::string> float_layers;

  /// counts[type], 0 when absent.
  int64_t count(const std::string& type) const;
  /// The pass and the mapping's global QConfig (and its rules, one per line), a table, one row
  /// per replacement and then per layer left float (node | from | to | module | qconfig, the
  /// latter "global", "float" or the layer's own QConfig), then a totals line:
  /// "20 QConvBN, 1 QLinear; 20 BatchNorm2d folded, 0 left".
  std::string to_string() const;
};

/// The QAT model of a traced float model (Note [QAT rewrite], Note [Per-layer passes]): a new
/// GraphModule with its own copies of every module and tensor (`gm` is untouched), the same
/// train/eval modes, and node shapes recorded by running `examples` (in eval mode, without side
/// effects). `summary`, when given, receives what was replaced. Throws qflow::Error for an
/// invalid mapping or when the rewritten graph does not run on `examples`.
std::shared_ptr<fx::GraphModule> quantization_aware_training(const fx::GraphModule& gm, const TensorList& examples,
                                                             const QConfigMapping& mapping, PassSummary* summary = nullptr);
std::shared_ptr<fx::GraphModule> quantization_aware_training(const fx::GraphModule& gm, const Tensor& example,
                                                             const QConfigMapping& mapping, PassSummary* summary = nullptr);
std::shared_ptr<fx::GraphModule> quantization_aware_training(const fx::GraphModule& gm, const Tensor& example,
                                                             const QConfig& qconfig, PassSummary* summary = nullptr);

/// The deployable model of a trained (or calibrated) QAT model: QConvBN → DConv2d (BN folded
/// from the running statistics), QConv2d → DConv2d, QLinear → DLinear, everything else copied
/// from `qat_gm` (`qat_gm` and `float_gm` are untouched). `float_gm` is the traced float model
/// `qat_gm` was made from: every Q module must sit where it has a Conv2d or Linear, and every
/// Q module's QConfig must equal what `mapping` resolves for it, every float Conv2d/Linear left
/// in `qat_gm` must be one the mapping leaves float (a deploy model for other numerics would be
/// a different model); all are checked with errors naming the node. Its eval outputs equal
/// `qat_gm`'s eval outputs. Throws when an observer never recorded anything (train or
/// calibrate first).
std::shared_ptr<fx::GraphModule> dequantization_aware_training(const fx::GraphModule& float_gm,
                                                               const fx::GraphModule& qat_gm, const TensorList& examples,
                                                               const QConfigMapping& mapping,
                                                               PassSummary* summary = nullptr);
std::shared_ptr<fx::GraphModule> dequantization_aware_training(const fx::GraphModule& float_gm,
                                                               const fx::GraphModule& qat_gm, const Tensor& example,
                                                               const QConfigMapping& mapping,
                                                               PassSummary* summary = nullptr);
std::shared_ptr<fx::GraphModule> dequantization_aware_training(const fx::GraphModule& float_gm,
                                                               const fx::GraphModule& qat_gm, const Tensor& example,
                                                               const QConfig& qconfig, PassSummary* summary = nullptr);

/// Post-training quantization: a copy of `gm` in eval mode with every Conv2d → BatchNorm2d
/// folded for good (fx::fuse_conv_bn, also for layers the mapping leaves float), then the QAT
/// rewrite (so only QConv2d and QLinear). Calibrate it (calibrate.h), then deploy it with
/// dequantization_aware_training.
std::shared_ptr<fx::GraphModule> prepare_ptq(const fx::GraphModule& gm, const TensorList& examples,
                                             const QConfigMapping& mapping, PassSummary* summary = nullptr);
std::shared_ptr<fx::GraphModule> prepare_ptq(const fx::GraphModule& gm, const Tensor& example,
                                             const QConfigMapping& mapping, PassSummary* summary = nullptr);
std::shared_ptr<fx::GraphModule> prepare_ptq(const fx::GraphModule& gm, const Tensor& example, const QConfig& qconfig,
                                             PassSummary* summary = nullptr);

/// Dotted path -> type_name() of every module a call_module node of `gm` runs whose exact type
/// the passes quantize (quantizable_types(): Conv2d, Linear): the layers a QConfig mapping
/// decides, in path order.
std::map<std::string, std::string> quantizable_layers(const fx::GraphModule& gm);

/// What fuse_integer_layers did.
struct IntegerFusions {
  fx::ActivationFusions activations;  // fx::fuse_activations, run first
  size_t residual_adds = 0;           // add (+ReLU) nodes made a DConv2d's post-ops
  size_t requantized = 0;             // DConv2d layers writing their successor's integer input
  size_t in_place_residuals = 0;      // of the residual adds, those summed into the dead residual
  /// "9 DConv2d+ReLU fused, ...; 8 residual adds made convolution post-ops (8 in place), 8 layers
  /// write their successor's integers".
  std::string to_string() const;
};

/// The fusions of a deploy model whose layers run integers (Note [Integer activations]), in
/// place, on top of fx::fuse_activations:
///   DConv2d → add(·, r) [→ ReLU]        the add (and ReLU) become the convolution's post-ops,
///                                       summed into r itself where r is a fresh value nothing
///                                       reads later (DConv2d::add_residual_in_place);
///   DConv2d → DConv2d / DLinear (its only user)
///                                       the first writes the second's quantized input.
/// Only layers that run integers and are called from one node are changed. Outputs equal the
/// unfused model's up to the float rounding of the scaling (a requantized value can differ by
/// one step at an exact tie).
IntegerFusions fuse_integer_layers(fx::GraphModule& gm);

}  // namespace qflow::quant
