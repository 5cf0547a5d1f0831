#include "graph_builder.h"

#include <cstring>

#include "qflow/core/error.h"

namespace qflow::onnx::detail {

int32_t onnx_elem_type(DType dtype) {
  switch (dtype) {
    case DType::Float32: return ::onnx::TensorProto::FLOAT;
    case DType::Float64: return ::onnx::TensorProto::DOUBLE;
    case DType::Int8: return ::onnx::TensorProto::INT8;
    case DType::UInt8: return ::onnx::TensorProto::UINT8;
    case DType::Int32: return ::onnx::TensorProto::INT32;
    case DType::Int64: return ::onnx::TensorProto::INT64;
    case DType::Bool: return ::onnx::TensorProto::BOOL;
  }
  QFLOW_ASSERT(false, "onnx export: unknown dtype");
  return 0;
}

void GraphBuilder::node(std::string_view op_type, const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs, const std::vector<Attr>& attrs, std::string name) {
  QFLOW_ASSERT(!outputs.empty(), "onnx export: {} node without outputs", op_type);
  if (name.empty()) name = outputs.front();
  QFLOW_ASSERT(node_names_.insert(name).second, "onnx export: node name '{}' used twice", name);
  ::onnx::NodeProto& n = *graph_.add_node();
  n.set_op_type(std::string(op_type));
  n.set_name(name);
  for (const auto& in : inputs) n.add_input(in);
  for (const auto& out : outputs) n.add_output(out);
  for (const Attr& a : attrs) {
    ::onnx::AttributeProto& p = *n.add_attribute();
    p.set_name(a.name);
    if (const auto* i = std::get_if<int64_t>(&a.value)) {
      p.set_type(::onnx::AttributeProto::INT);
      p.set_i(*i);
    } else if (const auto* f = std::get_if<float>(&a.value)) {
      p.set_type(::onnx::AttributeProto::FLOAT);
      p.set_f(*f);
    } else if (const auto* l = std::get_if<std::vector<int64_t>>(&a.value)) {
      p.set_type(::onnx::AttributeProto::INTS);
      for (int64_t v : *l) p.add_ints(v);
    } else {
      p.set_type(::onnx::AttributeProto::STRING);
      p.set_s(std::get<std::string>(a.value));
    }
  }
  ++op_counts_[std::string(op_type)];
}

::onnx::TensorProto& GraphBuilder::new_initializer(const std::string& name) {
  ::onnx::TensorProto& t = *graph_.add_initializer();
  t.set_name(name);
  return t;
}

std::string GraphBuilder::initializer(const std::string& name, const Tensor& value) {
  QFLOW_ASSERT(value.defined(), "onnx export: undefined tensor for initializer '{}'", name);
  auto it = initializers_.find(name);
  if (it != initializers_.end()) {
    QFLOW_ASSERT(it->second == value.impl(), "onnx export: two different tensors named '{}'", name);
    return name;
  }
  initializers_.emplace(name, value.impl());
  const Tensor c = value.detach().contiguous();
  ::onnx::TensorProto& t = new_initializer(name);
  t.set_data_type(onnx_elem_type(c.dtype()));
  for (int64_t d : c.sizes()) t.add_dims(d);
  // raw_data is little-endian, which is this machine's order (x86-64, AArch64).
  t.set_raw_data(std::string(static_cast<const char*>(c.raw_data()), c.nbytes()));
  return name;
}

std::string GraphBuilder::scalar(const std::string& name, double value, DType dtype) {
  QFLOW_ASSERT(initializers_.emplace(name, nullptr).second, "onnx export: initializer '{}' defined twice", name);
  ::onnx::TensorProto& t = new_initializer(name);
  t.set_data_type(onnx_elem_type(dtype));
  switch (dtype) {
    case DType::Float32: t.add_float_data(static_cast<float>(value)); break;
    case DType::Float64: t.add_double_data(value); break;
    // int8/uint8 values travel in int32_data, one element per entry (onnx.proto's rule).
    case DType::Int8:
    case DType::UInt8: t.add_int32_data(static_cast<int32_t>(value)); break;
    default: QFLOW_ASSERT(false, "onnx export: no scalar initializer of dtype {}", dtype);
  }
  return name;
}

std::string GraphBuilder::int64s(const std::string& name, const std::vector<int64_t>& values) {
  QFLOW_ASSERT(initializers_.emplace(name, nullptr).second, "onnx export: initializer '{}' defined twice", name);
  ::onnx::TensorProto& t = new_initializer(name);
  t.set_data_type(::onnx::TensorProto::INT64);
  t.add_dims(static_cast<int64_t>(values.size()));
  for (int64_t v : values) t.add_int64_data(v);
  return name;
}

namespace {
void fill_value_info(::onnx::ValueInfoProto& info, const std::string& name, DType dtype, const std::vector<Dim>& dims,
                     const std::string& doc) {
  info.set_name(name);
  info.set_doc_string(doc);
  ::onnx::TypeProto_Tensor& tensor = *info.mutable_type()->mutable_tensor_type();
  tensor.set_elem_type(onnx_elem_type(dtype));
  ::onnx::TensorShapeProto& shape = *tensor.mutable_shape();
  for (const Dim& d : dims) {
    ::onnx::TensorShapeProto_Dimension& dim = *shape.add_dim();
    if (const auto* v = std::get_if<int64_t>(&d)) {
      dim.set_dim_value(*v);
    } else {
      dim.set_dim_param(std::get<std::string>(d));
    }
  }
}
}  // namespace

void GraphBuilder::input(const std::string& name, DType dtype, const std::vector<Dim>& dims, const std::string& doc) {
  fill_value_info(*graph_.add_input(), name, dtype, dims, doc);
}

void GraphBuilder::output(const std::string& name, DType dtype, const std::vector<Dim>& dims, const std::string& doc) {
  fill_value_info(*graph_.add_output(), name, dtype, dims, doc);
}

}  // namespace qflow::onnx::detail
