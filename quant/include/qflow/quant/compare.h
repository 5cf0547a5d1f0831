#pragma once
// The numeric debugger: where a quantized model's numbers leave the float model's.
//
//   auto qat = quant::quantization_aware_training(*gm, example, qconfig);   // or prepare_ptq,
//   ... train or calibrate ...                                             // or the deploy model
//   quant::Comparison c = quant::compare(*gm, *qat, loader, 8);           // data::DataLoader
//   quant::Comparison c = quant::compare(*gm, *qat, std::vector<Tensor>{a, b});  // or tensors
//   fmt::print("{}", c.table(10));   // the 10 layers that lose the most on their own
//   write(c.to_csv());               // every compared node
//
// Note [Numeric debugger]
// Both models run on the same batches in eval mode without grad (their modes are restored
// after, as quant::calibrate does; eval observers record nothing). Every node's outputs are
// captured with fx::Interpreter (run_node), so any GraphModule pair works, whatever made it.
// Three runs per batch:
//   float       every node's outputs kept (copies: later ops may write in place) until the
//               batch is done — one batch of every matched node's activations in memory;
//   quantized   each node's outputs against its reference: the end-to-end error, all the
//               rounding upstream included;
//   lockstep    the quantized graph again, every node fed its inputs' float references
//               instead of the quantized values: the error the node makes on its own (a
//               QConvBN's own input and weight rounding; 0 for relu, add, pooling of exact
//               inputs). The "worst layers" are ranked by it: end to end, the error only grows
//               with depth and the last layers would always come out worst.
// Per node, accumulated over all batches as one long vector (not averaged per batch):
//   SQNR (dB)   10·log10(Σ ref² / Σ (ref − q)²)   (+inf when equal; −inf when ref is all 0)
//   cosine      Σ ref·q / √(Σ ref² · Σ q²)        (1 when equal)
//   max abs     max |ref − q|
// and, for a Q or D layer, the weight's SQNR: the float model's weight at the layer's path
// (BN folded in with fx::fuse_conv_bn_eval when the layer absorbed one) against the weight
// the quantized layer computes with (the fake-quantized weight of a QConv2d/QConvBN/QLinear,
// the dequantized integers of a DConv2d/DLinear). Against a QAT model fine-tuned from the
// float one it includes what fine-tuning moved; against the QAT model with fake quantization
// off (quant::enable_fake_quant(m, false)) as "float", the rounding alone.
//
// Matching the nodes. The passes keep names: a Q module replaces its float module at the
// same path in a node of the same name, the deploy pass swaps D for Q in place (Note [QAT
// rewrite]). So a quantized node is compared with the float node of the same name, which
// must do the same thing — the same op (call_function/call_method targets equal, call_module
// paths equal, module types equal or the float type's quantized form: Conv2d → QConv2d,
// QConvBN, DConv2d; Linear → QLinear, DLinear; QConvBN/QConv2d → DConv2d; QLinear → DLinear)
// and output sizes — or compare refuses the pair with an error naming the node. A float
// node the quantized graph dropped because it was folded into the one before (a BatchNorm2d
// into its QConvBN, or any single-input node whose only input is the matched node and that
// the quantized graph lacks) moves the reference forward: QConvBN %conv1 is compared with
// float %bn1. Nodes only on one side (the folded ones aside; e.g. the relu the deploy pass
// re-inserts after a ReLU-fused QConvBN) are listed in Comparison::skipped, as are nodes
// whose quantized outputs are integers (fuse_integer_layers' requantized activations) —
// except a Q or D layer with no float counterpart, which means the models do not belong
// together and is refused. qflow keeps observers and fake quantization inside the Q modules,
// so no observer node ever needs skipping. Placeholders, get_attr and the output are not
// rows (the inputs are the same on both sides).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "qflow/fx/graph_module.h"

namespace qflow::quant {

namespace detail {
struct CompareState;
}

/// One node's numbers (see Note [Numeric debugger]).
struct NodeComparison {
  std::string node;       // the quantized model's node ("layer1_0_conv1")
  std::string reference;  // the float node it is compared with ("layer1_0_bn1" after a BN fold)
  std::string what;       // "QConvBN (layer1.0.conv1)", "relu", "add"
  int64_t elements = 0;   // values compared, over all batches
  double sqnr_db = 0;     // end to end
  double cosine = 0;
  double max_abs_error = 0;
  double local_sqnr_db = 0;  // the node alone, fed the float model's inputs
  std::optional<double> weight_sqnr_db;  // Q and D layers only
};

struct Comparison {
  int64_t batches = 0;
  std::vector<NodeComparison> nodes;  // in the quantized graph's order
  std::vector<std::string> skipped;   // "%relu_17: only in the quantized model", ...

  /// The row of quantized node `node`; throws naming it when it is not a row.
  const NodeComparison& at(const std::string& node) const;
  /// The `n` rows with the lowest local SQNR (ties: lowest end-to-end SQNR first).
  std::vector<NodeComparison> worst(size_t n) const;
  /// Header node,reference,what,elements,sqnr_db,cosine,max_abs_error,local_sqnr_db,
  /// weight_sqnr_db, then one line per row (inf / -inf as such, an empty weight column for
  /// layers without weights).
  std::string to_csv() const;
  /// worst(n) as an aligned text table, with a line saying how many batches it covers.
  std::string table(size_t n) const;
};

/// Accumulates the comparison batch by batch (the loop of quant::compare, for callers that
/// produce their batches themselves). Checks the node matching when constructed.
class CompareSession {
 public:
  CompareSession(fx::GraphModule& float_model, fx::GraphModule& quantized_model);
  ~CompareSession();
  CompareSession(const CompareSession&) = delete;
  CompareSession& operator=(const CompareSession&) = delete;
  /// Runs one batch (one tensor per placeholder) through both models.
  void observe(const TensorList& inputs);
  int64_t batches() const;
  /// The numbers so far; throws when no batch ran.
  Comparison report() const;

 private:
  std::unique_ptr<detail::CompareState> state_;
};

/// Runs up to `max_batches` batches of `batches` (all when negative) through both models and
/// compares them node by node (Note [Numeric debugger]). `batches` is any range of Tensors,
/// of TensorLists (models with several inputs) or of structs with an `images` member
/// (data::DataLoader's batches), as for quant::calibrate. Throws for models whose nodes do
/// not correspond, naming the node, and when no batch ran.
template <class Batches>
Comparison compare(fx::GraphModule& float_model, fx::GraphModule& quantized_model, Batches&& batches,
                   int64_t max_batches = -1) {
  CompareSession session(float_model, quantized_model);
  for (auto&& b : batches) {
    if (max_batches >= 0 && session.batches() >= max_batches) break;
    if constexpr (requires { b.images; }) session.observe(TensorList{b.images});
    else if constexpr (std::is_convertible_v<decltype(b), const Tensor&>) session.observe(TensorList{b});
    else session.observe(b);
  }
  return session.report();
}

/// Colours every compared node of `quantized_model` by its end-to-end SQNR for fx::to_dot
/// ("dot.fillcolor") and captions it with the numbers ("dot.caption", after the deployed
/// kernel's). The bands and why: sqnr_legend().
void annotate_sqnr(fx::GraphModule& quantized_model, const Comparison& comparison);
/// "green >= 30 dB, yellow 20-30, orange 10-20, red < 10": the bands, for the picture's title.
std::string sqnr_legend();

}  // namespace qflow::quant
