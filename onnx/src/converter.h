#pragma once
// The conversion of an fx graph into ONNX nodes: ExportContext holds what converters share
// (the builder, the module, the ONNX value of every converted node); converters are plain
// functions looked up by op name (call_function) or by module type (call_module).
#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <typeindex>
#include <unordered_map>
#include <vector>

#include "graph_builder.h"
#include "qflow/fx/graph_module.h"
#include "qflow/nn/layers/conv.h"
#include "qflow/onnx/export.h"

namespace qflow::onnx::detail {

/// Throws the exporter's error for `node`:
/// "onnx export: node %add (call_function[target=add]): <message>".
[[noreturn]] void fail(const fx::Node& node, const std::string& message);

#define QFLOW_ONNX_CHECK(cond, node, ...)                                          \
  do {                                                                             \
    if (!(cond)) [[unlikely]]                                                      \
      ::qflow::onnx::detail::fail((node), ::fmt::format(__VA_ARGS__));             \
  } while (0)

class NodeArgs;

class ExportContext {
 public:
  /// `results`: the graph's result nodes with the names of the graph outputs they become
  /// (a node returned twice is named once); `reserved`: every graph input and output name.
  ExportContext(GraphBuilder& builder, fx::GraphModule& gm, const ExportOptions& options,
                std::unordered_map<const fx::Node*, std::string> results, std::set<std::string> reserved)
      : builder(builder), gm(gm), options(options), results_(std::move(results)), reserved_(std::move(reserved)) {}

  GraphBuilder& builder;
  fx::GraphModule& gm;
  const ExportOptions& options;
  /// Set by converters of quantized nodes (Q/DQ): the model's stage is then "deploy".
  bool quantized = false;
  /// QConfig::to_string() of every deployed module converted (metadata "qflow.qconfig").
  std::set<std::string> qconfigs;

  /// Records the ONNX values of `node`'s outputs ("" for an output ONNX has no value for).
  void bind(const fx::Node& node, std::vector<std::string> values);
  /// The ONNX value of output `index` of `node`. get_attr nodes become initializers named by
  /// their target on first use. Throws naming `user` when the node has no such value.
  std::string value(const fx::Node& node, const fx::Node& user, size_t index = 0);
  /// The ONNX value of a tensor argument of `user`; `what` names the argument in errors.
  std::string tensor_arg(const fx::Node& user, const fx::Argument& arg, std::string_view what);
  /// The ONNX value of tensor argument `name` of a call_function node.
  std::string input(const NodeArgs& a, std::string_view name);

  /// The name of `node`'s (first) output value: the graph output's name for a result.
  std::string out_name(const fx::Node& node) const;
  /// A name for an intermediate value or constant of `node`'s conversion: "node/suffix".
  static std::string tmp(const fx::Node& node, std::string_view suffix) { return node.name() + "/" + std::string(suffix); }
  /// Appends one ONNX node computing `node`'s single output and binds it.
  void emit(const fx::Node& node, std::string_view op_type, const std::vector<std::string>& inputs,
            const std::vector<Attr>& attrs = {});
  /// Makes `node` stand for the same value as `source` (identity ops: eval dropout, contiguous).
  void alias(const fx::Node& node, const fx::Argument& source);

  /// Output 0's sizes and dtype as ShapeProp recorded them.
  const std::vector<int64_t>& shape(const fx::Node& node) const;
  DType dtype(const fx::Node& node) const;

 private:
  std::unordered_map<const fx::Node*, std::string> results_;
  std::set<std::string> reserved_;
  std::unordered_map<const fx::Node*, std::vector<std::string>> values_;
};

// Note [Converters read arguments by name]
// A converter reads its node's arguments by the names of the op's schema (`a["padding"]`),
// never by position: the schema string is the one place that fixes the order, and a converter
// cannot silently read the wrong argument after the schema changes. NodeArgs puts the node's
// positional and keyword arguments, and the defaults tracing left out, under those names; a
// name the schema does not have is an exporter bug, reported naming the node, the name and
// the schema's arguments.
class NodeArgs {
 public:
  /// `node` must call a registered op.
  explicit NodeArgs(const fx::Node& node);
  const fx::Node& node() const { return *node_; }
  /// The argument called `name` in the op's schema.
  const fx::Argument& operator[](std::string_view name) const;
  /// The node computing tensor argument `name` (whose shape ShapeProp recorded).
  const fx::Node& producer(std::string_view name) const;

 private:
  const fx::Node* node_;
  const OpSchema* schema_;
  fx::Arguments args_;  // in schema order, every argument present
};

/// An int[2]-style argument as exactly two values ([k] means [k, k]); `fallback` when empty.
std::vector<int64_t> pair_arg(const NodeArgs& a, std::string_view name, const std::vector<int64_t>& fallback = {});
/// A number argument (int, float or bool) as a double.
double scalar_arg(const NodeArgs& a, std::string_view name);

/// The single tensor argument of a call_module node.
std::string module_input(ExportContext& c, const fx::Node& node);
/// Conv's kernel_shape, strides, pads ("same" resolved as PyTorch does), dilations, group.
std::vector<Attr> conv_attrs(const fx::Node& node, const nn::Conv2dOptions& options,
                             const std::vector<int64_t>& weight_shape);

using FunctionConverter = std::function<void(ExportContext&, const fx::Node&, const NodeArgs&)>;
using ModuleConverter = std::function<void(ExportContext&, const fx::Node&, nn::Module&)>;

/// Converters of registered ops, by op name ("relu", "conv2d", "add.Scalar", ...).
const std::map<std::string, FunctionConverter>& function_converters();
/// Ops the exporter refuses, by op name, with the reason its error gives (Note [ONNX coverage]).
const std::map<std::string, std::string>& refused_functions();
/// Converters of module types (exact type); a call_module of any other type is inlined
/// (see inline_modules) before conversion.
const std::unordered_map<std::type_index, ModuleConverter>& module_converters();

// Tables filled per file, gathered by the functions above: explicit calls, nothing that
// static-library linking could drop. The ops' converters and refusals are declared with the ops
// (`onnx`, `onnx_arg`, `no_onnx`; Note [One declaration per op]) and registered by
// add_*_declared, which gen-ops writes into float_ops.cpp and quant_ops.cpp.
void add_float_ops_declared(std::map<std::string, FunctionConverter>& converters,
                            std::map<std::string, std::string>& refusals);
void add_quant_ops_declared(std::map<std::string, FunctionConverter>& converters,
                            std::map<std::string, std::string>& refusals);
void add_float_module_converters(std::unordered_map<std::type_index, ModuleConverter>& table);
void add_quant_module_converters(std::unordered_map<std::type_index, ModuleConverter>& table);

// The reasons many ops' declarations give for their refusal (`no_onnx = "kBackwardOp"`).
inline constexpr const char* kBackwardOp =
    "a backward op; ONNX export writes the eval-mode forward computation";
inline constexpr const char* kInPlaceOp =
    "an in-place op; ONNX values cannot be overwritten (use the out-of-place op in the model's forward)";
inline constexpr const char* kRandomDraw =
    "a random draw; the exported graph must compute the same values every run";
inline constexpr const char* kTensorFactory =
    "a tensor factory; a model's constants reach the exported graph as buffers (initializers)";
inline constexpr const char* kSymbolicArithmetic =
    "arithmetic on symbolic sizes; ONNX export supports symbolic sizes only as view/reshape dimensions";
inline constexpr const char* kTrainingLoss =
    "a training loss; export the model without its loss";
inline constexpr const char* kTrainingExtras =
    "returns training-time extras (batch statistics, argmax indices) the exported graph has no use for; "
    "the eval-mode model calls batch_norm / max_pool2d";
inline constexpr const char* kFusedKernel =
    "a fused kernel that qflow's inference passes create; export the model before fusing, where "
    "add/conv2d/batch_norm and relu are separate ops";
inline constexpr const char* kNoComputation =
    "no computation for ONNX to express (autograd bookkeeping or a host scalar)";
// The ops no exported model has needed yet: a converter added for one must match the op
// exactly, checked against ONNX Runtime (tests/onnx/export_ops_test.cpp).
inline constexpr const char* kNoConverterYet =
    "no ONNX converter has been written for it yet (no exported model has needed one)";
inline constexpr const char* kDeployedIntegerKernel =
    "an integer kernel of deployed layers; the exporter writes deployed layers (DConv2d, DLinear) as "
    "QuantizeLinear/DequantizeLinear around float Conv/Gemm (Note [Q/DQ export])";

}  // namespace qflow::onnx::detail
