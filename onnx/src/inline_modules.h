#pragma once
// Inlining of modules the exporter has no converter for (ReLU, MaxPool2d, Dropout, user
// modules registered as leaves, ...): their forward is traced into ops, which have converters.
#include "qflow/fx/graph_module.h"

namespace qflow::onnx::detail {

/// Replaces every call_module node whose module type has no converter (see
/// module_converters) by the nodes its forward records (fx::symbolic_trace on the input
/// shapes; modules with converters inside it stay call_module at their full path). The
/// copied nodes carry meta "onnx.inlined_from" = the module's path, which errors name.
/// Input nodes need shape meta (run ShapeProp first). Validates gm afterwards (recompile).
void inline_modules(fx::GraphModule& gm);

}  // namespace qflow::onnx::detail
