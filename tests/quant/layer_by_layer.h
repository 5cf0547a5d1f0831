#pragma once
// Layer by layer, the integers every deployed layer of a model takes as its input, in the
// integer model against the float simulation (Note [Integer activations]).
//
// The two run the same graph (quant::set_integer switches it). The simulation runs first and
// every node's value is kept; then the integer model runs with each DConv2d/DLinear fed the
// simulation's inputs (its activation and residual), so what reaches the next layer — the
// integers a requantizing layer wrote, or its float output passed through ReLU, pooling,
// reshapes — carries one layer's rounding alone, not the drift of all the layers before it.
// There, the integers the next layer computes with (the ones it was given, or quantize of its
// float input with its frozen qparams) are compared with quantize of the simulation's value.
// The integer sums are exact and the simulation's float32 sums are not, so the two may differ
// where the simulation's value sits within float rounding of a rounding boundary (x.5 steps
// of the grid); tie_distance says how close the differing ones sat. A simulation value that
// is NaN or Inf counts as an integer that differs by more than one, at an infinite tie
// distance: a broken layer cannot pass for one whose integers agree (tests/compare.h).
#include <string>
#include <vector>

#include "qflow/fx/fx.h"

namespace pass_test {

/// One layer's quantized input, the integer model's against the simulation's.
struct LayerInputIntegers {
  std::string node;      // the layer's graph node
  bool integer = false;  // the layer itself runs the integer kernel
  int64_t elements = 0;  // integers compared
  int64_t differ = 0;    // how many differ
  int64_t differ_by_more_than_one = 0;
  // Among the differing ones, the largest distance of the simulation's value from the
  // rounding midpoint between the two integers, in steps of the layer's input grid (0 = an
  // exact tie; a value that rounded to a wrong integer by a real error is ~0.5 away).
  double tie_distance = 0;
};

/// Runs `deploy` (a deploy model, fused or not) on x both ways and compares, for every
/// DConv2d and DLinear in graph order, its quantized input. Leaves the layers running integers.
std::vector<LayerInputIntegers> compare_layer_inputs(qflow::fx::GraphModule& deploy, const qflow::Tensor& x);

/// The same comparison with the integer model run end to end on its own values (not fed the
/// simulation's). Up to the first layer whose input integers differ, both models computed from
/// the same integers, so that layer's differences can only be ties; past it a flipped integer
/// propagates, and the later layers may differ anywhere.
std::vector<LayerInputIntegers> compare_layer_inputs_end_to_end(qflow::fx::GraphModule& deploy, const qflow::Tensor& x);

/// "Except at exact ties": the simulation's value of an integer that differs sits this close to
/// the midpoint between the two integers, in steps of the grid. Its float32 sums carry relative
/// errors near 1e-6, and a grid has at most 255 steps: well under 1e-3 of a step (measured:
/// 1e-5 at most). An integer wrong for any other reason (a wrong scale, bias or rounding) comes
/// from a value anywhere in its step, nearly always farther from the midpoint than that.
constexpr double kTieSteps = 1e-3;

/// The first layer whose input integers differ, or null when none does.
const LayerInputIntegers* first_difference(const std::vector<LayerInputIntegers>& layers);

/// What the design guarantees of a deploy model running integers end to end, whatever the
/// CPU's summation order (gtest assertions): the first layer whose input integers differ from
/// the simulation's differs at ties only, and at most one in 100,000 of them; when no layer's
/// input differs, the outputs agree to float32 rounding (1e-5 of their scale) with the same
/// argmax. Past a tie a flipped integer propagates, and how far it moves the outputs is the
/// network's business: nothing is asserted there. Leaves the layers running integers.
void expect_end_to_end_agreement(qflow::fx::GraphModule& deploy, const qflow::Tensor& x);

}  // namespace pass_test
