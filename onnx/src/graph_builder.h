#pragma once
// GraphBuilder: appends nodes, initializers and value infos to an ONNX GraphProto. The
// message classes come from protoc run on Debian's onnx.proto (see onnx/CMakeLists.txt);
// this header is private to the onnx layer so protobuf never reaches a public header.
#include <onnx/onnx.pb.h>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "qflow/core/tensor.h"

namespace qflow::onnx::detail {

/// One attribute of an ONNX node: INT, FLOAT, INTS or STRING.
struct Attr {
  Attr(std::string n, int64_t v) : name(std::move(n)), value(v) {}
  Attr(std::string n, int v) : name(std::move(n)), value(static_cast<int64_t>(v)) {}
  Attr(std::string n, float v) : name(std::move(n)), value(v) {}
  Attr(std::string n, std::vector<int64_t> v) : name(std::move(n)), value(std::move(v)) {}
  Attr(std::string n, std::string v) : name(std::move(n)), value(std::move(v)) {}
  std::string name;
  std::variant<int64_t, float, std::vector<int64_t>, std::string> value;
};

/// The ONNX TensorProto element type of a qflow dtype; throws for dtypes ONNX lacks.
int32_t onnx_elem_type(DType dtype);

/// Dimension of a value info: a fixed size or a symbolic name.
using Dim = std::variant<int64_t, std::string>;

class GraphBuilder {
 public:
  explicit GraphBuilder(::onnx::GraphProto& graph) : graph_(graph) {}

  /// Appends a node named `name` (unique within the graph; empty: the first output's name).
  void node(std::string_view op_type, const std::vector<std::string>& inputs, const std::vector<std::string>& outputs,
            const std::vector<Attr>& attrs = {}, std::string name = {});

  /// Adds `value` (any layout; copied contiguous) as an initializer. Adding the same name
  /// twice is fine for the same tensor (a weight read by several nodes) and an internal
  /// error otherwise. Returns the name.
  std::string initializer(const std::string& name, const Tensor& value);
  bool has_initializer(const std::string& name) const { return initializers_.count(name) != 0; }
  /// A 0-d initializer holding `value` in `dtype` (float32, float64, int8 or uint8).
  std::string scalar(const std::string& name, double value, DType dtype);
  /// A 1-d int64 initializer (shapes for Reshape).
  std::string int64s(const std::string& name, const std::vector<int64_t>& values);

  void input(const std::string& name, DType dtype, const std::vector<Dim>& dims, const std::string& doc);
  void output(const std::string& name, DType dtype, const std::vector<Dim>& dims, const std::string& doc);

  ::onnx::GraphProto& graph() { return graph_; }
  /// Operator types used so far, with counts.
  const std::map<std::string, int64_t>& op_counts() const { return op_counts_; }

 private:
  ::onnx::TensorProto& new_initializer(const std::string& name);

  ::onnx::GraphProto& graph_;
  std::map<std::string, const TensorImpl*> initializers_;
  std::set<std::string> node_names_;
  std::map<std::string, int64_t> op_counts_;
};

}  // namespace qflow::onnx::detail
