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

}  // namespace pass_test
