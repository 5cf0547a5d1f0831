#pragma once
// ONNX export: writes a model (an nn::Module or a traced fx::GraphModule) as an ONNX file
// that ONNX Runtime, TensorRT and friends can load.
//
//   auto net = models::create("resnet18");
//   onnx::export_model(net, randn({1, 3, 32, 32}), "resnet18.onnx");
//
// Note [What the exporter writes]
// - The eval-mode computation: the model is deep-copied and put in eval() first (the
//   caller's model is never modified), as torch.onnx.export does by default.
// - One graph input per example input, named options.input_name (default "input") for a
//   single one and options.input_names (default input_name + "0", "1", ...) for several,
//   float, shaped like its example with dimension 0 symbolic ("batch") when
//   options.dynamic_batch; one graph output per tensor the model returns, named likewise
//   from output_name/output_names, whose batch dimension is symbolic too. The batch
//   dimensions are found by running the graph at two batch sizes (every input's dimension 0
//   one larger), so a model that cannot run at another batch size is refused instead of being
//   exported with a wrong promise. All are described in the graph's doc_string and the value
//   infos.
// - Parameters and buffers as initializers named by their state_dict keys ("conv1.weight",
//   "bn1.running_var"): a reader of the file finds each weight under the name it has in the
//   checkpoint. Other values are named after the fx nodes that compute them.
// - Opset options.opset of the default domain (13 unless asked otherwise; 13..17 are
//   accepted, the range Debian's onnx checker knows), IR version 7 for opset 13 and 8 above.
// - metadata_props: "qflow.version", "qflow.stage" ("float", or "deploy" when the graph holds
//   quantized layers), "qflow.qconfig" (the deployed layers' QConfigs) and every entry of
//   options.metadata (the caller's).
// - Serialisation by protobuf with classes generated from the official onnx.proto.
// Each fx node becomes the ONNX operators listed in the converters (see onnx/src/): Conv,
// Gemm/MatMul, Relu, Clip, HardSwish (HardSigmoid·Mul at opset 13), HardSigmoid, SiLU (Sigmoid·Mul), Sigmoid, Tanh,
// LeakyRelu, Add/Sub/Mul, MaxPool, AveragePool, GlobalAveragePool, ReduceMean, Flatten,
// Reshape, Transpose, BatchNormalization, Concat; deployed quantized layers (quant::DConv2d,
// quant::DLinear) and fake_quantize nodes become QuantizeLinear/DequantizeLinear pairs with
// int8/uint8 weight initializers (see Note [Q/DQ export] in onnx/src/quant_ops.cpp), and a
// quantized model that still holds a BatchNorm is refused, unless it follows a float
// convolution (a layer a QConfig mapping left float, Note [QConfig mapping]). Built-in layers without parameters
// (ReLU, MaxPool2d, Dropout, Flatten, ...) are exported through the ops their forward
// calls. A node the exporter cannot express exactly is refused with a qflow::Error naming
// the node (`onnx export: node %foo (call_function[target=foo]) ...`); nothing is written.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "qflow/core/tensor.h"
#include "qflow/fx/graph_module.h"
#include "qflow/nn/module.h"

namespace qflow::onnx {

struct ExportOptions {
  /// ONNX opset of the default domain.
  int64_t opset = 13;
  std::string input_name = "input";
  std::string output_name = "output";
  /// Names of the graph inputs and outputs of a model with several (empty: input_name and
  /// output_name followed by the index). A model with one input (output) uses input_name
  /// (output_name) unless the list names it.
  std::vector<std::string> input_names = {};
  std::vector<std::string> output_names = {};
  /// Name of the symbolic batch dimension; with dynamic_batch = false every dimension is
  /// fixed to the example's sizes.
  bool dynamic_batch = true;
  std::string batch_dim_name = "batch";
  /// The ONNX graph's name.
  std::string graph_name = "qflow";
  /// Extra model metadata_props (added after qflow's own keys; may not redefine them).
  std::map<std::string, std::string> metadata = {};
};

/// What was written, for tools and tests.
struct ExportSummary {
  std::string input_name, output_name;  // the first graph input and output
  /// Sizes of the first graph input and output as exported; -1 marks the symbolic batch dimension.
  std::vector<int64_t> input_shape, output_shape;
  /// Every graph input and output, in order, with its sizes as above.
  std::vector<std::string> input_names, output_names;
  std::vector<std::vector<int64_t>> input_shapes, output_shapes;
  /// ONNX operator types used, with their counts, sorted by type.
  std::map<std::string, int64_t> op_counts;
  int64_t num_nodes = 0;
  int64_t num_initializers = 0;
  /// The serialised ModelProto (what export_model writes to the file).
  std::string bytes;
};

/// Exports `module` traced with fx::symbolic_trace on `example` (a deep copy of it, in eval
/// mode). See Note [What the exporter writes]. Writes `path` atomically (temporary file, then
/// rename). Throws qflow::Error on an unsupported node, a bad option or an I/O failure.
ExportSummary export_model(const std::shared_ptr<nn::Module>& module, const Tensor& example, const std::string& path,
                           const ExportOptions& options = {});
/// Exports an already traced (possibly rewritten) graph; `gm` is copied, not modified.
ExportSummary export_model(const fx::GraphModule& gm, const Tensor& example, const std::string& path,
                           const ExportOptions& options = {});
/// A graph with several inputs, one example each (as fx::symbolic_trace takes them).
ExportSummary export_model(const fx::GraphModule& gm, const TensorList& examples, const std::string& path,
                           const ExportOptions& options = {});

/// The same conversions without writing a file (summary.bytes holds the model).
ExportSummary export_to_bytes(const std::shared_ptr<nn::Module>& module, const Tensor& example,
                              const ExportOptions& options = {});
ExportSummary export_to_bytes(const fx::GraphModule& gm, const Tensor& example, const ExportOptions& options = {});
ExportSummary export_to_bytes(const fx::GraphModule& gm, const TensorList& examples, const ExportOptions& options = {});

/// The qflow version recorded in metadata ("0.1.0").
std::string qflow_version();

// Note [ONNX coverage]
// Every registered op either has a converter or is refused with its reason, both declared with
// the op (`onnx = "converter"` or `no_onnx = "why"` in its table, Note [One declaration per op]:
// an op that says neither fails the build), and the exporter's error for a refused node quotes
// that reason. The converters are functions of onnx/src/float_ops.cpp and quant_ops.cpp, which
// end with the generated tables. tests/onnx/op_coverage_test.cpp checks again at run time that
// each registered op is in exactly one of the two, that neither names an op that does not
// exist, and likewise that each op has a derivative or a declaration in autograd (Note
// [Derivatives read arguments by name]).

/// The registered ops the exporter converts (call_function targets), sorted.
std::vector<std::string> converted_ops();
/// The ops the exporter refuses, with the reason its error gives.
std::map<std::string, std::string> refused_ops();

}  // namespace qflow::onnx
