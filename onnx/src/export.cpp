// export_model: prepares a copy of the graph (eval mode, shapes, inlined modules), converts
// every node, and serialises the ModelProto. See Note [What the exporter writes].
#include "qflow/onnx/export.h"

#include <fmt/format.h>

#include <cstdio>
#include <fstream>

#include "converter.h"
#include "inline_modules.h"
#include "qflow/core/error.h"
#include "qflow/core/factory.h"
#include "qflow/fx/shape_prop.h"
#include "qflow/fx/trace.h"

#ifndef QFLOW_VERSION
#error "QFLOW_VERSION is set by onnx/CMakeLists.txt"
#endif

namespace qflow::onnx {
namespace {

using detail::Dim;

void check_options(const ExportOptions& o, const Tensor& example) {
  QFLOW_CHECK(o.opset >= 13 && o.opset <= 17, "onnx export: opset {} is not supported (13 to 17)", o.opset);
  QFLOW_CHECK(!o.input_name.empty() && !o.output_name.empty() && o.input_name != o.output_name,
              "onnx export: input and output names must be non-empty and different, got '{}' and '{}'", o.input_name,
              o.output_name);
  QFLOW_CHECK(example.defined() && example.is_floating_point(),
              "onnx export: the example input must be a floating point tensor");
  QFLOW_CHECK(!o.dynamic_batch || example.dim() >= 1, "onnx export: a dynamic batch needs an example with dimensions");
  for (const auto& [key, value] : o.metadata)
    QFLOW_CHECK(key.rfind("qflow.", 0) != 0, "onnx export: metadata key '{}' is reserved for qflow", key);
}

/// Runs gm at the example and, for a dynamic batch, at batch + 1; fills shapes into meta.
/// Returns the output dims, symbolic where they follow the batch size.
std::vector<Dim> propagate_shapes(fx::GraphModule& gm, const Tensor& example, const ExportOptions& o) {
  std::vector<int64_t> other;
  if (o.dynamic_batch) {
    IntList sizes = example.sizes();
    sizes[0] += 1;
    try {
      const TensorList out = fx::ShapeProp(gm).run(zeros(sizes, example.dtype()));
      if (!out.empty()) other = out[0].sizes();
    } catch (const std::exception& e) {
      QFLOW_CHECK(false, "onnx export: the model does not run at batch size {} ({}); a dynamic batch dimension would "
                  "be wrong, export with dynamic_batch = false", sizes[0], e.what());
    }
  }
  const TensorList out = fx::ShapeProp(gm).run(example);
  QFLOW_CHECK(out.size() == 1, "onnx export: the model returns {} tensors; one output is supported", out.size());
  std::vector<Dim> dims;
  const auto& here = out[0].sizes();
  QFLOW_CHECK(!o.dynamic_batch || other.size() == here.size(),
              "onnx export: the output's rank changes with the batch size ({} vs {} dims)", here.size(), other.size());
  for (size_t i = 0; i < here.size(); ++i) {
    if (!o.dynamic_batch || other[i] == here[i]) {
      dims.emplace_back(here[i]);
    } else if (here[i] == example.sizes()[0] && other[i] == here[i] + 1) {
      dims.emplace_back(o.batch_dim_name);
    } else {
      dims.emplace_back(fmt::format("{}_dim{}", o.output_name, i));
    }
  }
  return dims;
}

std::string dims_text(const std::vector<Dim>& dims) {
  std::vector<std::string> parts;
  for (const Dim& d : dims)
    parts.push_back(std::holds_alternative<int64_t>(d) ? std::to_string(std::get<int64_t>(d)) : std::get<std::string>(d));
  return fmt::format("[{}]", fmt::join(parts, ", "));
}

std::vector<int64_t> summary_dims(const std::vector<Dim>& dims) {
  std::vector<int64_t> out;
  for (const Dim& d : dims) out.push_back(std::holds_alternative<int64_t>(d) ? std::get<int64_t>(d) : -1);
  return out;
}

const auto& graph_nodes(detail::GraphBuilder& b) { return b.graph().node(); }

void convert_node(detail::ExportContext& ctx, const fx::Node& n) {
  switch (n.op()) {
    case fx::NodeOp::Placeholder: ctx.bind(n, {ctx.options.input_name}); return;
    case fx::NodeOp::GetAttr:  // initializers are made on first use (ExportContext::value)
    case fx::NodeOp::Output: return;
    case fx::NodeOp::CallModule: {
      nn::ModulePtr m = ctx.gm.get_submodule(n.target());
      const auto& table = detail::module_converters();
      const auto it = table.find(std::type_index(typeid(*m)));
      if (it == table.end()) detail::fail(n, fmt::format("no ONNX conversion for module type {}", m->type_name()));
      it->second(ctx, n, *m);
      return;
    }
    case fx::NodeOp::CallFunction:
    case fx::NodeOp::CallMethod: {
      if (n.target() == "getitem") {
        QFLOW_ONNX_CHECK(n.args().size() == 2 && n.args()[0].is_node(), n, "getitem expects (node, index)");
        ctx.bind(n, {ctx.value(*n.args()[0].node(), n, static_cast<size_t>(n.args()[1].to_int()))});
        return;
      }
      const auto& table = detail::function_converters();
      const auto it = table.find(n.target());
      if (it == table.end()) detail::fail(n, fmt::format("no ONNX conversion for op '{}'", n.target()));
      it->second(ctx, n, detail::full_args(n));
      return;
    }
  }
}

ExportSummary convert(const fx::GraphModule& source, const Tensor& example, const ExportOptions& o) {
  check_options(o, example);
  // A deep copy in eval mode: the caller's module keeps its mode, weights and graph.
  auto gm = std::dynamic_pointer_cast<fx::GraphModule>(source.clone());
  QFLOW_ASSERT(gm != nullptr, "GraphModule::clone returned another type");
  gm->eval();
  gm->graph().eliminate_dead_code();
  QFLOW_CHECK(gm->graph().placeholders().size() == 1, "onnx export: the graph has {} inputs; one input is supported",
              gm->graph().placeholders().size());
  const std::vector<Dim> out_dims = propagate_shapes(*gm, example, o);
  detail::inline_modules(*gm);

  const fx::Node* out_node = gm->graph().output_node();
  QFLOW_CHECK(out_node && !out_node->args().empty(), "onnx export: the graph has no output");
  fx::Argument result_arg = out_node->args()[0];
  if (result_arg.is_node_list() && result_arg.node_list().size() == 1) result_arg = result_arg.node_list()[0];
  QFLOW_CHECK(result_arg.is_node(), "onnx export: the graph's output {} is not one tensor",
              fx::format_argument(result_arg));
  const fx::Node* result = result_arg.node();

  ::onnx::ModelProto model;
  detail::GraphBuilder builder(*model.mutable_graph());
  detail::ExportContext ctx(builder, *gm, o, result);
  for (const fx::Node* n : gm->graph()) convert_node(ctx, *n);
  if (ctx.quantized) {
    // A deploy model has BN folded into its convolutions; a BatchNormalization left behind a
    // weight's DequantizeLinear is what TensorRT cannot fold, so it is refused here.
    for (const auto& node : graph_nodes(builder))
      QFLOW_CHECK(node.op_type() != "BatchNormalization",
                  "onnx export: the quantized model still holds a BatchNorm (ONNX node '{}'); fold it into its "
                  "convolution before deployment (quant::dequantization_aware_training does)",
                  node.name());
  }
  const std::string produced = ctx.value(*result, *out_node);
  // The result is another node's value (an input, an eval dropout): name it with Identity.
  if (produced != o.output_name) builder.node("Identity", {produced}, {o.output_name});

  std::vector<Dim> in_dims(example.sizes().begin(), example.sizes().end());
  if (o.dynamic_batch) in_dims[0] = o.batch_dim_name;
  const std::string dtype_name = fmt::format("{}", example.dtype());
  const std::string in_doc = fmt::format("{} {}: the model's input, laid out as qflow's (NCHW for images)",
                                         dtype_name, dims_text(in_dims));
  const std::string out_doc = fmt::format("{} {}: the model's output (logits for the zoo's classifiers)",
                                          fmt::format("{}", ctx.dtype(*result)), dims_text(out_dims));
  builder.input(o.input_name, example.dtype(), in_dims, in_doc);
  builder.output(o.output_name, ctx.dtype(*result), out_dims, out_doc);

  ::onnx::GraphProto& graph = *model.mutable_graph();
  graph.set_name(o.graph_name);
  graph.set_doc_string(fmt::format("Exported by qflow {}. Input '{}': {}. Output '{}': {}.", QFLOW_VERSION, o.input_name,
                                   in_doc, o.output_name, out_doc));
  // IR 7 is the version of opset 13 (ONNX 1.8); IR 8 came with opsets 14 and 15.
  model.set_ir_version(o.opset == 13 ? 7 : 8);
  model.set_producer_name("qflow");
  model.set_producer_version(QFLOW_VERSION);
  ::onnx::OperatorSetIdProto& opset = *model.add_opset_import();
  opset.set_domain("");
  opset.set_version(o.opset);
  auto meta = [&](const std::string& key, const std::string& value) {
    ::onnx::StringStringEntryProto& e = *model.add_metadata_props();
    e.set_key(key);
    e.set_value(value);
  };
  meta("qflow.version", QFLOW_VERSION);
  meta("qflow.stage", ctx.quantized ? "deploy" : "float");
  if (!ctx.qconfigs.empty()) meta("qflow.qconfig", fmt::format("{}", fmt::join(ctx.qconfigs, "; ")));
  for (const auto& [key, value] : o.metadata) meta(key, value);

  ExportSummary s;
  s.input_name = o.input_name;
  s.output_name = o.output_name;
  s.input_shape = summary_dims(in_dims);
  s.output_shape = summary_dims(out_dims);
  s.op_counts = builder.op_counts();
  s.num_nodes = graph.node_size();
  s.num_initializers = graph.initializer_size();
  QFLOW_CHECK(model.SerializeToString(&s.bytes), "onnx export: protobuf could not serialise the model");
  return s;
}

void write_file(const std::string& path, const std::string& bytes) {
  // Temporary file then rename: a reader never sees half a model, an old file survives a failure.
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    QFLOW_CHECK(f.good(), "onnx export: cannot write '{}'", tmp);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    f.close();
    QFLOW_CHECK(f.good(), "onnx export: writing '{}' failed", tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    QFLOW_CHECK(false, "onnx export: cannot move '{}' to '{}'", tmp, path);
  }
}

std::shared_ptr<fx::GraphModule> trace_for_export(const std::shared_ptr<nn::Module>& module, const Tensor& example) {
  QFLOW_CHECK(module != nullptr, "onnx export: null module");
  if (auto gm = std::dynamic_pointer_cast<fx::GraphModule>(module)) return gm;
  // Traced from an eval-mode copy: traced-through code that branches on is_training()
  // records its inference branch, and the caller's module keeps its mode.
  nn::ModulePtr copy = module->clone();
  copy->eval();
  return fx::symbolic_trace(copy, example);
}

}  // namespace

std::string qflow_version() { return QFLOW_VERSION; }

ExportSummary export_to_bytes(const fx::GraphModule& gm, const Tensor& example, const ExportOptions& options) {
  return convert(gm, example, options);
}

ExportSummary export_to_bytes(const std::shared_ptr<nn::Module>& module, const Tensor& example,
                              const ExportOptions& options) {
  check_options(options, example);  // before tracing, whose errors would be less clear
  return convert(*trace_for_export(module, example), example, options);
}

ExportSummary export_model(const fx::GraphModule& gm, const Tensor& example, const std::string& path,
                           const ExportOptions& options) {
  ExportSummary s = export_to_bytes(gm, example, options);
  write_file(path, s.bytes);
  return s;
}

ExportSummary export_model(const std::shared_ptr<nn::Module>& module, const Tensor& example, const std::string& path,
                           const ExportOptions& options) {
  ExportSummary s = export_to_bytes(module, example, options);
  write_file(path, s.bytes);
  return s;
}

}  // namespace qflow::onnx
