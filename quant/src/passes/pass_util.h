#pragma once
// What the quantization passes (qat_pass.cpp, deploy_pass.cpp, ptq.cpp) share; defined in
// pass_util.cpp.
#include <map>
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

/// Starts a pass's summary: its name and the mapping, after checking the mapping's rules against
/// the float model `gm` (QConfigMapping::check_layers on quant::quantizable_layers(gm)).
PassSummary begin_pass(const char* pass, const fx::GraphModule& gm, const QConfigMapping& mapping);

/// The rewrite of Note [QAT rewrite] with each layer's QConfig from summary.mapping (Note
/// [Per-layer passes]), in place; appends to summary.replaced/left_float/counts.
void quantize_in_place(fx::GraphModule& gm, PassSummary& summary);

/// Ends a pass: recompile (lint), rows in graph order, leftover counts, node shapes from a
/// side-effect-free eval run of `examples` (fx::ShapeProp) and the quant meta.
void finish_pass(fx::GraphModule& gm, const TensorList& examples, PassSummary& summary);

}  // namespace qflow::quant::detail
