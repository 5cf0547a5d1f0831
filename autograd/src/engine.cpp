// The backward engine. See engine.h.
#include "qflow/autograd/engine.h"

#include <algorithm>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "anomaly_check.h"
#include "qflow/autograd/anomaly_mode.h"
#include "qflow/autograd/autograd_meta.h"
#include "qflow/autograd/grad_mode.h"
#include "qflow/core/factory.h"
#include "qflow/core/ops.h"

namespace qflow::autograd {

namespace {

// Gradients arriving at one node, summed per forward output.
struct InputBuffer {
  std::vector<Tensor> grads;
  void add(size_t i, Tensor g) {
    if (grads.size() <= i) grads.resize(i + 1);
    if (!g.defined()) return;
    grads[i] = grads[i].defined() ? grads[i] + g : std::move(g);
  }
};

struct ReadyOrder {
  bool operator()(const Node* a, const Node* b) const { return a->sequence_nr() < b->sequence_nr(); }
};

// Counts, for every node reachable from the roots, how many edges point at it.
std::unordered_map<Node*, int> count_dependencies(const std::vector<Edge>& roots) {
  std::unordered_map<Node*, int> deps;
  std::unordered_set<Node*> seen;
  std::vector<Node*> stack;
  for (const Edge& e : roots)
    if (e.node && seen.insert(e.node.get()).second) stack.push_back(e.node.get());
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next_edges()) {
      if (!e.node) continue;
      ++deps[e.node.get()];
      if (seen.insert(e.node.get()).second) stack.push_back(e.node.get());
    }
  }
  return deps;
}

// Runs the graph. `capture` (optional) receives gradients for the given edges instead of
// letting them reach AccumulateGrad (used by autograd::grad).
void execute(const std::vector<Edge>& roots, const TensorList& root_grads, bool retain_graph,
             std::unordered_map<Node*, std::vector<std::pair<uint32_t, size_t>>>* capture, TensorList* captured) {
  NoGradGuard no_grad;
  const bool anomaly = is_anomaly_enabled();  // one setting for the whole pass
  if (anomaly)
    for (size_t i = 0; i < root_grads.size(); ++i) detail::check_root_gradient(i, root_grads[i]);
  auto deps = count_dependencies(roots);
  std::unordered_map<Node*, InputBuffer> buffers;
  std::priority_queue<Node*, std::vector<Node*>, ReadyOrder> ready;
  std::unordered_map<Node*, std::shared_ptr<Node>> keep_alive;
  for (size_t i = 0; i < roots.size(); ++i) {
    Node* n = roots[i].node.get();
    buffers[n].add(roots[i].input_nr, root_grads[i]);
    keep_alive[n] = roots[i].node;
  }
  for (const Edge& e : roots)
    if (deps[e.node.get()] == 0 && keep_alive.count(e.node.get())) {
      ready.push(e.node.get());
      deps[e.node.get()] = -1;  // queued
    }

  while (!ready.empty()) {
    Node* node = ready.top();
    ready.pop();
    InputBuffer buf = std::move(buffers[node]);
    buffers.erase(node);
    std::vector<Tensor> grads = std::move(buf.grads);
    grads.resize(node->num_outputs());
    for (auto& [nr, weak] : node->retained())
      if (auto m = weak.lock(); m && nr < grads.size() && grads[nr].defined())
        m->grad = m->grad.defined() ? m->grad + grads[nr] : grads[nr].clone();
    if (capture) {
      if (auto it = capture->find(node); it != capture->end()) {
        for (auto [nr, slot] : it->second)
          if (nr < grads.size()) (*captured)[slot] = grads[nr];
      }
      if (dynamic_cast<AccumulateGrad*>(node)) continue;  // grad() never touches .grad
    }
    bool any = false;
    for (size_t i = 0; i < grads.size(); ++i) {
      if (grads[i].defined()) {
        any = true;
      } else {
        const TensorMeta m = node->output_meta(i);
        grads[i] = zeros(m.sizes, is_floating(m.dtype) ? m.dtype : DType::Float32, m.device);
      }
    }
    std::vector<Tensor> out;
    if (any) out = node->apply(std::move(grads));
    if (anomaly) detail::check_backward_outputs(*node, out);
    if (!retain_graph) node->release_saved();
    const auto& edges = node->next_edges();
    for (size_t i = 0; i < edges.size(); ++i) {
      const Edge& e = edges[i];
      if (!e.node) continue;
      Node* next = e.node.get();
      keep_alive.try_emplace(next, e.node);
      buffers[next].add(e.input_nr, i < out.size() ? out[i] : Tensor());
      if (--deps[next] == 0) ready.push(next);
    }
  }
}

std::vector<Edge> root_edges(const TensorList& roots) {
  std::vector<Edge> edges;
  for (size_t i = 0; i < roots.size(); ++i) {
    QFLOW_CHECK(roots[i].defined(), "backward: root {} is an undefined tensor", i);
    Edge e = gradient_edge(roots[i]);
    QFLOW_CHECK(e.valid(), "backward: element {} of tensors does not require grad and does not have a grad_fn", i);
    edges.push_back(std::move(e));
  }
  return edges;
}

TensorList root_gradients(const TensorList& roots, const TensorList& grads) {
  QFLOW_CHECK(grads.empty() || grads.size() == roots.size(), "backward: got {} gradients for {} tensors", grads.size(),
              roots.size());
  TensorList out;
  for (size_t i = 0; i < roots.size(); ++i) {
    if (!grads.empty() && grads[i].defined()) {
      QFLOW_CHECK(grads[i].sizes() == roots[i].sizes(), "backward: gradient of shape {} for a tensor of shape {}",
                  grads[i].sizes(), roots[i].sizes());
      out.push_back(grads[i].detach());
    } else {
      QFLOW_CHECK(roots[i].numel() == 1,
                  "backward: grad can be implicitly created only for scalar outputs (got shape {}); pass a gradient",
                  roots[i].sizes());
      out.push_back(ones(roots[i].sizes(), roots[i].dtype(), roots[i].device()));
    }
  }
  return out;
}

}  // namespace

void backward(const TensorList& roots, const TensorList& grads, bool retain_graph) {
  const auto edges = root_edges(roots);
  execute(edges, root_gradients(roots, grads), retain_graph, nullptr, nullptr);
}

TensorList grad(const TensorList& outputs, const TensorList& inputs, const TensorList& grad_outputs, bool retain_graph,
                bool allow_unused) {
  const auto edges = root_edges(outputs);
  std::unordered_map<Node*, std::vector<std::pair<uint32_t, size_t>>> capture;
  std::vector<std::shared_ptr<Node>> hold;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Edge e = gradient_edge(inputs[i]);
    QFLOW_CHECK(e.valid(), "grad: input {} does not require grad", i);
    capture[e.node.get()].emplace_back(e.input_nr, i);
    hold.push_back(e.node);
  }
  TensorList captured(inputs.size());
  execute(edges, root_gradients(outputs, grad_outputs), retain_graph, &capture, &captured);
  for (size_t i = 0; i < captured.size(); ++i)
    QFLOW_CHECK(allow_unused || captured[i].defined(),
                "grad: input {} was not used in the graph (pass allow_unused=true to get an undefined gradient)", i);
  return captured;
}

}  // namespace qflow::autograd
