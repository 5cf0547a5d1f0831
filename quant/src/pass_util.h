#pragma once
// What the quantization passes (qat_pass.cpp, deploy_pass.cpp, ptq.cpp) share.
#include <memory>
#include <string>

#include "qflow/core/generator.h"
#include "qflow/fx/graph_module.h"
#include "qflow/quant/passes.h"

namespace qflow::quant::detail {

/// New modules draw a random initialisation that the copied float values then overwrite;
/// drawing it from a scratch generator keeps a pass from moving the caller's random stream
/// (as fx::fuse_conv_bn does), so a run is the same with or without a pass in the middle.
struct ScratchGenerator {
  Generator scratch;
  GeneratorGuard guard{&scratch};
};

/// A deep copy of gm (every module and tensor its own), so a pass leaves its input untouched.
std::shared_ptr<fx::GraphModule> copy_graph_module(const fx::GraphModule& gm);

/// Nodes that use the module at `path`: call_module of it, or call_module/get_attr below it.
int64_t uses_of(const fx::Graph& graph, const std::string& path);

/// The rewrite of Note [QAT rewrite], in place; appends to summary.replaced/counts.
void quantize_in_place(fx::GraphModule& gm, const QConfig& qconfig, PassSummary& summary);

/// Ends a pass: recompile (lint), rows in graph order, leftover counts, node shapes from a
/// side-effect-free eval run of `example` (fx::ShapeProp) and the quant meta.
void finish_pass(fx::GraphModule& gm, const Tensor& example, PassSummary& summary);

}  // namespace qflow::quant::detail
