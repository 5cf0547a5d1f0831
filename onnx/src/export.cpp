// export_model: prepares a copy of the graph (eval mode, shapes, inlined modules), converts
// every node, and serialises the ModelProto. See Note [What the exporter writes].
#include "qflow/onnx/export.h"

#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <set>

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

// The graph's input and output names: the lists when given, else the single names (one input
// or output) or the single names followed by the index.
std::vector<std::string> io_names(const std::vector<std::string>& listed, const std::string& single, size_t count,
                                  const char* what) {
  if (!listed.empty()) {
    QFLOW_CHECK(listed.size() == count, "onnx export: {} {} names given for {} {}s", listed.size(), what, count, what);
    return listed;
  }
  if (count == 1) return {single};
  std::vector<std::string> names;
  for (size_t i = 0; i < count; ++i) names.push_back(single + std::to_string(i));
  return names;
}

void check_options(const ExportOptions& o, const TensorList& examples) {
  QFLOW_CHECK(o.opset >= 13 && o.opset <= 17, "onnx export: opset {} is not supported (13 to 17)", o.opset);
  QFLOW_CHECK(!o.input_name.empty() && !o.output_name.empty() && o.input_name != o.output_name,
              "onnx export: input and output names must be non-empty and different, got '{}' and '{}'", o.input_name,
              o.output_name);
  QFLOW_CHECK(!examples.empty(), "onnx export: no example input");
  for (const Tensor& example : examples) {
    QFLOW_CHECK(example.defined() && example.is_floating_point(),
                "onnx export: the example input must be a floating point tensor");
    QFLOW_CHECK(!o.dynamic_batch || example.dim() >= 1, "onnx export: a dynamic batch needs an example with dimensions");
  }
  for (const auto& [key, value] : o.metadata)
    QFLOW_CHECK(key.rfind("qflow.", 0) != 0, "onnx export: metadata key '{}' is reserved for qflow", key);
}

/// Runs gm at the examples and, for a dynamic batch, at batch + 1; fills shapes into meta.
/// Returns each output's dims, symbolic where they follow the batch size.
std::vector<std::vector<Dim>> propagate_shapes(fx::GraphModule& gm, const TensorList& examples, const ExportOptions& o,
                                               const std::vector<std::string>& output_names) {
  std::vector<std::vector<int64_t>> other;
  if (o.dynamic_batch) {
    TensorList bigger;
    for (const Tensor& example : examples) {
      IntList sizes = example.sizes();
      sizes[0] += 1;
      bigger.push_back(zeros(sizes, example.dtype()));
    }
    try {
      for (const Tensor& out : fx::ShapeProp(gm).run(bigger)) other.push_back(out.sizes());
    } catch (const std::exception& e) {
      QFLOW_CHECK(false, "onnx export: the model does not run at batch size {} ({}); a dynamic batch dimension would "
                  "be wrong, export with dynamic_batch = false", bigger[0].sizes()[0], e.what());
    }
  }
  const TensorList out = fx::ShapeProp(gm).run(examples);
  QFLOW_CHECK(out.size() == output_names.size(), "onnx export: the model returns {} tensors but {} output names were given",
              out.size(), output_names.size());
  std::vector<std::vector<Dim>> all;
  for (size_t k = 0; k < out.size(); ++k) {
    std::vector<Dim> dims;
    const auto& here = out[k].sizes();
    QFLOW_CHECK(!o.dynamic_batch || other[k].size() == here.size(),
                "onnx export: output '{}' changes its rank with the batch size ({} vs {} dims)", output_names[k],
                here.size(), other[k].size());
    for (size_t i = 0; i < here.size(); ++i) {
      if (!o.dynamic_batch || other[k][i] == here[i]) {
        dims.emplace_back(here[i]);
      } else if (here[i] == examples[0].sizes()[0] && other[k][i] == here[i] + 1) {
        dims.emplace_back(o.batch_dim_name);
      } else {
        dims.emplace_back(fmt::format("{}_dim{}", output_names[k], i));
      }
    }
    all.push_back(std::move(dims));
  }
  return all;
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

// A deploy model has BN folded into its quantized convolutions; a BatchNormalization left
// behind a weight's DequantizeLinear is what TensorRT cannot fold, so a quantized model may
// keep a BatchNormalization only behind a float Conv (a layer its QConfig mapping left float).
void check_batch_norms(detail::GraphBuilder& builder) {
  std::map<std::string, const ::onnx::NodeProto*> producer;
  for (const auto& node : graph_nodes(builder))
    for (const std::string& out : node.output()) producer[out] = &node;
  const auto made_by = [&](const std::string& value, const char* op) {
    const auto it = producer.find(value);
    return it != producer.end() && it->second->op_type() == op;
  };
  for (const auto& node : graph_nodes(builder)) {
    if (node.op_type() != "BatchNormalization") continue;
    const auto conv = producer.find(node.input(0));
    const bool after_float_conv = conv != producer.end() && conv->second->op_type() == "Conv" &&
                                  !made_by(conv->second->input(1), "DequantizeLinear");
    QFLOW_CHECK(after_float_conv,
                "onnx export: the quantized model still holds a BatchNorm (ONNX node '{}'); fold it into its "
                "convolution before deployment (quant::dequantization_aware_training does)",
                node.name());
  }
}

void convert_node(detail::ExportContext& ctx, const fx::Node& n) {
  switch (n.op()) {
    case fx::NodeOp::Placeholder:  // bound to the graph inputs before the conversion
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
      if (it == table.end()) {
        const auto& refused = detail::refused_functions();
        if (const auto r = refused.find(n.target()); r != refused.end())
          detail::fail(n, fmt::format("op '{}' cannot be exported: {}", n.target(), r->second));
        detail::fail(n, fmt::format("no ONNX conversion for op '{}' (it has neither a converter nor a declared "
                                    "refusal; see Note [ONNX coverage])",
                                    n.target()));
      }
      it->second(ctx, n, detail::NodeArgs(n));
      return;
    }
  }
}

ExportSummary convert(const fx::GraphModule& source, const TensorList& examples, const ExportOptions& o) {
  check_options(o, examples);
  // A deep copy in eval mode: the caller's module keeps its mode, weights and graph.
  auto gm = std::dynamic_pointer_cast<fx::GraphModule>(source.clone());
  QFLOW_ASSERT(gm != nullptr, "GraphModule::clone returned another type");
  gm->eval();
  gm->graph().eliminate_dead_code();
  const std::vector<fx::Node*> placeholders = gm->graph().placeholders();
  QFLOW_CHECK(placeholders.size() == examples.size(), "onnx export: the graph has {} inputs but {} example inputs were given",
              placeholders.size(), examples.size());
  const fx::Node* out_node = gm->graph().output_node();
  QFLOW_CHECK(out_node && !out_node->args().empty(), "onnx export: the graph has no output");
  // The nodes the graph returns. Read again after inline_modules, which replaces a returned
  // module call by the nodes of its forward and erases it (Note [Erasing during a walk]).
  const auto graph_results = [out_node] {
    const fx::Argument& result_arg = out_node->args()[0];
    std::vector<const fx::Node*> results;
    if (result_arg.is_node_list()) {
      for (const fx::Node* r : result_arg.node_list()) results.push_back(r);
    } else {
      QFLOW_CHECK(result_arg.is_node(), "onnx export: the graph's output {} is not a tensor or a list of tensors",
                  fx::format_argument(result_arg));
      results.push_back(result_arg.node());
    }
    return results;
  };
  std::vector<const fx::Node*> results = graph_results();
  const std::vector<std::string> in_names = io_names(o.input_names, o.input_name, examples.size(), "input");
  const std::vector<std::string> out_names = io_names(o.output_names, o.output_name, results.size(), "output");
  std::set<std::string> reserved(in_names.begin(), in_names.end());
  for (const std::string& name : out_names)
    QFLOW_CHECK(!name.empty() && reserved.insert(name).second,
                "onnx export: graph input and output names must be non-empty and distinct, got '{}' twice", name);
  const std::vector<std::vector<Dim>> out_dims = propagate_shapes(*gm, examples, o, out_names);
  detail::inline_modules(*gm);
  results = graph_results();
  QFLOW_ASSERT(results.size() == out_names.size(), "onnx export: inlining changed the number of graph outputs");

  ::onnx::ModelProto model;
  detail::GraphBuilder builder(*model.mutable_graph());
  // A node returned twice (or a graph input returned) becomes its first output by name and the
  // others by Identity below.
  std::unordered_map<const fx::Node*, std::string> result_names;
  for (size_t k = 0; k < results.size(); ++k)
    if (results[k]->op() != fx::NodeOp::Placeholder) result_names.emplace(results[k], out_names[k]);
  detail::ExportContext ctx(builder, *gm, o, result_names, reserved);
  for (size_t i = 0; i < placeholders.size(); ++i) ctx.bind(*placeholders[i], {in_names[i]});
  for (const fx::Node* n : gm->graph()) convert_node(ctx, *n);
  if (ctx.quantized) check_batch_norms(builder);

  std::vector<std::string> in_docs, out_docs;
  std::vector<std::vector<Dim>> in_dims;
  for (size_t i = 0; i < examples.size(); ++i) {
    std::vector<Dim> dims(examples[i].sizes().begin(), examples[i].sizes().end());
    if (o.dynamic_batch) dims[0] = o.batch_dim_name;
    const std::string doc = fmt::format("{} {}: {}", fmt::format("{}", examples[i].dtype()), dims_text(dims),
                                        examples.size() == 1 ? "the model's input, laid out as qflow's (NCHW for images)"
                                                             : fmt::format("the model's input {}", i));
    builder.input(in_names[i], examples[i].dtype(), dims, doc);
    in_docs.push_back(fmt::format("Input '{}': {}.", in_names[i], doc));
    in_dims.push_back(std::move(dims));
  }
  for (size_t k = 0; k < results.size(); ++k) {
    const std::string produced = ctx.value(*results[k], *out_node);
    // The result is another node's value (an input, an eval dropout, an output already named):
    // name it with Identity.
    if (produced != out_names[k]) builder.node("Identity", {produced}, {out_names[k]});
    const std::string doc = fmt::format("{} {}: {}", fmt::format("{}", ctx.dtype(*results[k])), dims_text(out_dims[k]),
                                        results.size() == 1 ? "the model's output (logits for the zoo's classifiers)"
                                                            : fmt::format("the model's output {}", k));
    builder.output(out_names[k], ctx.dtype(*results[k]), out_dims[k], doc);
    out_docs.push_back(fmt::format("Output '{}': {}.", out_names[k], doc));
  }

  ::onnx::GraphProto& graph = *model.mutable_graph();
  graph.set_name(o.graph_name);
  graph.set_doc_string(fmt::format("Exported by qflow {}. {} {}", QFLOW_VERSION, fmt::join(in_docs, " "),
                                   fmt::join(out_docs, " ")));
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
  s.input_names = in_names;
  s.output_names = out_names;
  for (const auto& dims : in_dims) s.input_shapes.push_back(summary_dims(dims));
  for (const auto& dims : out_dims) s.output_shapes.push_back(summary_dims(dims));
  s.input_name = in_names[0];
  s.output_name = out_names[0];
  s.input_shape = s.input_shapes[0];
  s.output_shape = s.output_shapes[0];
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

std::vector<std::string> converted_ops() {
  std::vector<std::string> out;
  for (const auto& [name, convert] : detail::function_converters()) out.push_back(name);
  return out;
}

std::map<std::string, std::string> refused_ops() { return detail::refused_functions(); }

ExportSummary export_to_bytes(const fx::GraphModule& gm, const TensorList& examples, const ExportOptions& options) {
  return convert(gm, examples, options);
}

ExportSummary export_to_bytes(const fx::GraphModule& gm, const Tensor& example, const ExportOptions& options) {
  return convert(gm, TensorList{example}, options);
}

ExportSummary export_to_bytes(const std::shared_ptr<nn::Module>& module, const Tensor& example,
                              const ExportOptions& options) {
  check_options(options, TensorList{example});  // before tracing, whose errors would be less clear
  return convert(*trace_for_export(module, example), TensorList{example}, options);
}

ExportSummary export_model(const fx::GraphModule& gm, const TensorList& examples, const std::string& path,
                           const ExportOptions& options) {
  ExportSummary s = export_to_bytes(gm, examples, options);
  write_file(path, s.bytes);
  return s;
}

ExportSummary export_model(const fx::GraphModule& gm, const Tensor& example, const std::string& path,
                           const ExportOptions& options) {
  return export_model(gm, TensorList{example}, path, options);
}

ExportSummary export_model(const std::shared_ptr<nn::Module>& module, const Tensor& example, const std::string& path,
                           const ExportOptions& options) {
  ExportSummary s = export_to_bytes(module, example, options);
  write_file(path, s.bytes);
  return s;
}

}  // namespace qflow::onnx
