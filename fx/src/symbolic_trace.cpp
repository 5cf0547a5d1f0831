// symbolic_trace: sets up a trace of a root module and builds its GraphModule.
#include <mutex>
#include <set>

#include "qflow/nn/container.h"
#include "qflow/nn/layers.h"
#include "tracer.h"

namespace qflow::fx {

namespace {

struct LeafTypes {
  std::mutex mutex;
  std::set<std::type_index> types{
      typeid(nn::Conv2d),     typeid(nn::Linear),    typeid(nn::BatchNorm1d), typeid(nn::BatchNorm2d),
      typeid(nn::ReLU),       typeid(nn::ReLU6),     typeid(nn::Hardswish),   typeid(nn::Sigmoid),
      typeid(nn::Tanh),       typeid(nn::Identity),  typeid(nn::Flatten),     typeid(nn::Dropout),
      typeid(nn::MaxPool2d),  typeid(nn::AvgPool2d), typeid(nn::AdaptiveAvgPool2d), typeid(nn::SiLU),
      typeid(nn::Hardsigmoid)};
};

LeafTypes& leaf_types() {
  static LeafTypes t;
  return t;
}

// Marks the root's parameters and buffers with the tracing key for the trace, so ops that
// read only them are recorded too (as get_attr); unmarks them afterwards, even on errors.
class AttributeMarks {
 public:
  AttributeMarks(nn::Module& root, detail::TraceContext& context) {
    auto mark = [&](const std::string& path, const Tensor& t) {
      context.attributes.emplace(t.impl(), path);
      if (!t.impl()->keys().has(kTraceKey)) {
        t.impl()->add_key(kTraceKey);
        marked_.push_back(t.impl_ptr());
      }
    };
    for (const auto& [path, t] : root.named_parameters()) mark(path, t);
    for (const auto& [path, t] : root.named_buffers()) mark(path, t);
  }
  ~AttributeMarks() {
    for (const auto& impl : marked_) impl->remove_key(kTraceKey);
  }
  AttributeMarks(const AttributeMarks&) = delete;
  AttributeMarks& operator=(const AttributeMarks&) = delete;

 private:
  std::vector<std::shared_ptr<TensorImpl>> marked_;
};

std::vector<std::string> placeholder_names(const TraceOptions& options) {
  const size_t n = options.inputs.size();
  if (!options.input_names.empty()) {
    QFLOW_CHECK(options.input_names.size() == n, "symbolic_trace: {} input names for {} inputs", options.input_names.size(), n);
    return options.input_names;
  }
  if (n == 1) return {"x"};
  std::vector<std::string> names;
  for (size_t i = 0; i < n; ++i) names.push_back(fmt::format("x{}", i));
  return names;
}

}  // namespace

bool is_default_leaf(const nn::Module& module, const std::string& /*path*/) {
  auto& t = leaf_types();
  std::lock_guard lock(t.mutex);
  return t.types.count(std::type_index(typeid(module))) > 0;
}

void register_leaf_type(std::type_index type) {
  auto& t = leaf_types();
  std::lock_guard lock(t.mutex);
  t.types.insert(type);
}

bool is_proxy(const Tensor& t) {
  return t.defined() && dynamic_cast<const detail::ProxyExtension*>(t.impl()->extension()) != nullptr;
}

std::shared_ptr<GraphModule> symbolic_trace(std::shared_ptr<nn::Module> root, TraceOptions options) {
  QFLOW_CHECK(root != nullptr, "symbolic_trace: the module is null");
  QFLOW_CHECK(!options.inputs.empty(),
              "symbolic_trace: TraceOptions::inputs is empty; give the sizes and dtypes of forward's inputs (or pass "
              "example inputs) so the proxy tensors have shapes");
  QFLOW_CHECK(detail::current_tracer() == nullptr,
              "symbolic_trace: cannot start a trace inside the forward of a module being traced");
  const std::vector<std::string> names = placeholder_names(options);

  detail::TraceContext context;
  context.is_leaf = options.is_leaf ? options.is_leaf : LeafPredicate(is_default_leaf);
  for (const auto& [path, m] : root->named_modules()) context.module_paths.emplace(m.get(), path);
  auto graph = std::make_unique<Graph>();
  std::map<std::string, Tensor> constants;
  {
    AttributeMarks marks(*root, context);
    detail::Tracer tracer(*graph, context, /*scratch=*/false);
    detail::ActiveTracerGuard active(&tracer);
    TensorList proxies;
    for (size_t i = 0; i < names.size(); ++i) proxies.push_back(tracer.placeholder(names[i], options.inputs[i]));
    // The root's own forward is always traced (even when its type is a leaf type).
    tracer.output(root->forward_list(proxies));
    constants = tracer.take_constants();
  }
  return std::make_shared<GraphModule>(*root, std::move(graph), std::move(constants));
}

std::shared_ptr<GraphModule> symbolic_trace(std::shared_ptr<nn::Module> root, const TensorList& example_inputs,
                                            TraceOptions options) {
  options.inputs.clear();
  for (const Tensor& t : example_inputs) {
    QFLOW_CHECK(t.defined(), "symbolic_trace: an example input is undefined");
    options.inputs.push_back(TensorMeta{t.sizes(), t.dtype()});
  }
  return symbolic_trace(std::move(root), std::move(options));
}

std::shared_ptr<GraphModule> symbolic_trace(std::shared_ptr<nn::Module> root, const Tensor& example_input,
                                            TraceOptions options) {
  return symbolic_trace(std::move(root), TensorList{example_input}, std::move(options));
}

}  // namespace qflow::fx
