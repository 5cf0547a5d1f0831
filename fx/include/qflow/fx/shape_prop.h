#pragma once
// ShapeProp: runs a GraphModule on example inputs and records each node's output sizes and
// dtypes in node.meta().outputs (torch.fx's ShapeProp).
//
//   fx::ShapeProp(*gm).run(randn({8, 3, 32, 32}));
//   gm->graph().node("conv1").meta().shape();   // {8, 64, 32, 32}
//
// The run has no side effects: grad mode is off, and the buffers (BatchNorm running
// statistics in train mode) and the random generator are restored afterwards.
#include "qflow/fx/interpreter.h"

namespace qflow::fx {

class ShapeProp : public Interpreter {
 public:
  explicit ShapeProp(GraphModule& module) : Interpreter(module) {}

  /// Runs the graph and fills every node's meta; returns the graph's outputs.
  TensorList run(const TensorList& inputs);
  TensorList run(const Tensor& input) { return run(TensorList{input}); }

 protected:
  Stack run_node(Node& node) override;
};

}  // namespace qflow::fx
