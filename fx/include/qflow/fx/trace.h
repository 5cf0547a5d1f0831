#pragma once
// symbolic_trace: turns a module's forward into a Graph by running it on proxy tensors.
//
// Note [Proxy tensors]
// A proxy is an ordinary qflow Tensor whose TensorImpl has no storage but correct sizes,
// strides and dtype, carries the tracing dispatch key (kTraceKey, above autograd) and, as its
// TensorExtension, the fx Node that produces it. Every op called on a proxy reaches the
// tracing dispatch layer first (see Note [Dispatch layers]), which
//   - records `call_function[target=<registered op name>]` with the op's arguments: proxies
//     become their nodes, the root's parameters and buffers become `get_attr` nodes (they
//     are marked with kTraceKey while tracing, so ops on them alone are recorded too), other
//     tensors become constants of the GraphModule (`_tensor_constant0`), symbolic sizes
//     become the nodes computing them, anything else is a constant argument; trailing
//     arguments equal to the schema's defaults are left out;
//   - computes the outputs' sizes and dtypes with the op's shape rule (OpDef::shape) and
//     returns new proxies: no kernel ever runs on a proxy;
//   - for an in-place op (add_, relu_), rebinds the proxy to the new node, so later reads
//     see the write in the graph's data flow as they do at run time.
// There is one road for functional calls, operators and tensor methods, so all of them are
// recorded as call_function (never call_method).
//
// Note [Symbolic sizes in fx]
// `x.size(0)` on a proxy returns a SymInt backed by a `call_function[target=sym_size]` node;
// arithmetic on it records sym_add/sym_sub/sym_mul/sym_div/sym_mod nodes; ops taking
// SymInt[] (view, reshape, expand) record the nodes as arguments. So
// `x.view({x.size(0), -1})` traces into a graph that runs at any batch size. Anything that
// turns a symbolic size into a C++ integer (`if (x.size(0) > 3)`, a size passed as int64_t)
// throws fx::TraceError instead of specialising silently. `x.sizes()` returns the trace-time
// sizes as plain integers (use it for checks only, never to build shapes).
//
// Note [Leaf modules]
// A module for which the leaf predicate holds becomes `call_module[target=<dotted path>]`
// and its forward is not recorded. Its outputs' sizes come from tracing its forward into a
// throwaway graph (no kernel runs, no state changes); if that fails (its forward reads data,
// e.g. a user leaf with data-dependent control flow), from running a deep clone of it on
// zeros of the inputs' sizes with grad mode off and the random generator restored, so the
// traced module is never modified. By default the built-in layers (Conv2d, Linear,
// BatchNorm*, activations, pooling, Dropout, Flatten, Identity) and types registered with
// register_leaf_type are leaves; containers (Sequential) and user modules are traced
// through. A module that is not a registered submodule of the root is always traced through.
//
// Tracing never modifies the root: the GraphModule shares its leaf modules, parameters and
// buffers (the same tensors, like torch.fx) and the attribute marks are removed afterwards.
// Note that branches on is_training() in traced-through code are recorded as taken while
// tracing, as in torch.fx; leaves keep following train()/eval().
#include <functional>
#include <memory>
#include <string>
#include <typeindex>
#include <vector>

#include "qflow/core/dispatch_key.h"
#include "qflow/fx/graph_module.h"
#include "qflow/fx/trace_error.h"

namespace qflow::fx {

/// The tracing layer's dispatch key (defined with the others in core's dispatch_key.h).
using ::qflow::kTraceKey;

using LeafPredicate = std::function<bool(const nn::Module& module, const std::string& path)>;

struct TraceOptions {
  /// Sizes and dtypes of forward's inputs (the proxies' sizes while tracing). Required: the
  /// shape rules need sizes. The symbolic_trace overloads taking example tensors fill it.
  std::vector<TensorMeta> inputs;
  /// Placeholder names; default "x" for one input, "x0", "x1", ... for several.
  std::vector<std::string> input_names;
  /// Which modules become call_module; default: is_default_leaf. See Note [Leaf modules].
  LeafPredicate is_leaf;
};

/// The default leaf predicate: the module's exact type is a built-in layer or was registered
/// with register_leaf_type.
bool is_default_leaf(const nn::Module& module, const std::string& path);
/// Makes modules of exactly this type leaves by default (quant registers its layers).
void register_leaf_type(std::type_index type);
template <class M>
void register_leaf_type() {
  register_leaf_type(std::type_index(typeid(M)));
}

/// Traces root->forward_list on proxies of options.inputs. See Note [Proxy tensors].
std::shared_ptr<GraphModule> symbolic_trace(std::shared_ptr<nn::Module> root, TraceOptions options);
/// Traces with proxies shaped like `example_inputs` (their values are not read).
std::shared_ptr<GraphModule> symbolic_trace(std::shared_ptr<nn::Module> root, const TensorList& example_inputs,
                                            TraceOptions options = {});
std::shared_ptr<GraphModule> symbolic_trace(std::shared_ptr<nn::Module> root, const Tensor& example_input,
                                            TraceOptions options = {});

/// True for a proxy tensor of a trace (live or finished).
bool is_proxy(const Tensor& t);

}  // namespace qflow::fx
