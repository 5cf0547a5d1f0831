// Module boundaries while tracing: leaves become call_module nodes. See Note [Leaf modules].
#include "qflow/autograd/grad_mode.h"
#include "qflow/core/factory.h"
#include "qflow/core/generator.h"
#include "tracer.h"

namespace qflow::fx::detail {

namespace {

std::vector<TensorMeta> metas_of(const TensorList& outputs, const std::string& path) {
  std::vector<TensorMeta> metas;
  for (const Tensor& t : outputs) {
    QFLOW_CHECK(t.defined(), "symbolic_trace: leaf module '{}' returned an undefined tensor", path);
    metas.push_back(meta_of(t));
  }
  return metas;
}

// Leaves the current random generator as it was (a Dropout leaf run on zeros draws numbers).
class GeneratorStateGuard {
 public:
  GeneratorStateGuard() : gen_(current_generator()), seed_(gen_.seed()), offset_(gen_.offset()) {}
  ~GeneratorStateGuard() { gen_.set_state(seed_, offset_); }
  GeneratorStateGuard(const GeneratorStateGuard&) = delete;
  GeneratorStateGuard& operator=(const GeneratorStateGuard&) = delete;

 private:
  Generator& gen_;
  uint64_t seed_, offset_;
};

// Runs a deep copy of `module` on zeros shaped like `inputs`: nothing of the traced model
// (buffers, random stream, autograd graph) is touched.
std::vector<TensorMeta> run_copy_on_zeros(nn::Module& module, const std::string& path, const TensorList& inputs) {
  ExcludeKeyGuard no_trace(kTraceKey);
  NoGradGuard no_grad;
  nn::ModuleCallHookGuard no_hook(nullptr);
  GeneratorStateGuard keep_rng;
  nn::ModulePtr copy = module.clone();
  TensorList zs;
  for (const Tensor& t : inputs) zs.push_back(t.defined() ? zeros(t.sizes(), t.dtype()) : Tensor());
  return metas_of(copy->call(zs), path);
}

}  // namespace

TensorList Tracer::call(nn::Module& module, const TensorList& inputs, const Forward& run_forward) {
  if (scratch_) return run_forward(inputs);
  auto it = context_.module_paths.find(&module);
  if (it == context_.module_paths.end() || it->second.empty() || !context_.is_leaf(module, it->second)) {
    return run_forward(inputs);
  }
  return record_leaf(module, it->second, inputs, run_forward);
}

TensorList Tracer::record_leaf(nn::Module& module, const std::string& path, const TensorList& inputs,
                               const Forward& run_forward) {
  Arguments args;
  for (const Tensor& t : inputs) {
    if (t.defined()) args.emplace_back(node_of(t, path));
    else args.emplace_back();
  }
  const std::vector<TensorMeta> metas = leaf_output_metas(module, path, inputs, run_forward);
  Node* node = graph_.call_module(path, std::move(args));
  node->meta().outputs = metas;
  if (grad_mode_dropped()) node->meta().set("no_grad", 1.0);
  if (metas.size() == 1) return {make_proxy(node, metas[0])};
  TensorList out;
  for (size_t i = 0; i < metas.size(); ++i) out.push_back(make_proxy(getitem(node, static_cast<int64_t>(i), metas[i]), metas[i]));
  return out;
}

std::vector<TensorMeta> Tracer::leaf_output_metas(nn::Module& module, const std::string& path, const TensorList& inputs,
                                                  const Forward& run_forward) {
  std::string traced_error;
  try {
    Graph scratch;
    Tracer sub(scratch, context_, /*scratch=*/true);
    TensorList outputs;
    {
      ActiveTracerGuard active(&sub);
      TensorList proxies;
      for (size_t i = 0; i < inputs.size(); ++i) {
        proxies.push_back(inputs[i].defined() ? sub.placeholder(fmt::format("input{}", i), meta_of(inputs[i])) : Tensor());
      }
      outputs = run_forward(proxies);
    }
    return metas_of(outputs, path);
  } catch (const Error& e) {
    traced_error = e.message();
  }
  try {
    return run_copy_on_zeros(module, path, inputs);
  } catch (const Error& e) {
    QFLOW_TRACE_FAIL("symbolic_trace: cannot tell the output sizes of leaf module '{}' ({}): tracing its forward failed "
                     "({}), and so did running a copy of it on zeros ({})",
                     path, module.type_name(), traced_error, e.message());
  }
}

}  // namespace qflow::fx::detail
