#pragma once
// Nodes of the backward graph. A Node maps the gradients of a forward op's outputs to the
// gradients of its inputs; `next_edges` point at the nodes of those inputs.
#include <memory>
#include <string>
#include <vector>

#include "qflow/core/op_registry.h"
#include "qflow/core/tensor.h"

namespace qflow::autograd {

class Node;
struct AutogradMeta;

/// Where a gradient goes: input `input_nr` of `node` (null node: nowhere).
struct Edge {
  std::shared_ptr<Node> node;
  uint32_t input_nr = 0;
  bool valid() const { return node != nullptr; }
};

class Node {
 public:
  Node();
  virtual ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  /// "MulBackward", "AccumulateGrad", ...
  virtual std::string name() const = 0;
  /// grads[i] is the gradient of forward output i (never undefined: zeros are filled in).
  /// Returns one gradient per next edge (undefined = no gradient).
  virtual std::vector<Tensor> apply(std::vector<Tensor>&& grads) = 0;
  /// Frees saved tensors once backward has used them (unless retain_graph).
  virtual void release_saved() {}
  /// Shapes and dtypes of the forward outputs (to make zero gradients).
  virtual size_t num_outputs() const { return 1; }
  virtual TensorMeta output_meta(size_t i) const = 0;

  const std::vector<Edge>& next_edges() const { return next_edges_; }
  std::vector<Edge>& mutable_next_edges() { return next_edges_; }
  /// Creation order; later nodes run first when several are ready.
  uint64_t sequence_nr() const { return sequence_nr_; }

  /// The AnomalyScope active when the node was created ("module 'fc1' (Linear)"), recorded
  /// only while anomaly detection is on; see Note [Anomaly detection].
  const std::string& anomaly_scope() const { return anomaly_scope_; }

  /// Non-leaf tensors that asked for retain_grad(), by output index.
  std::vector<std::pair<uint32_t, std::weak_ptr<AutogradMeta>>>& retained() { return retained_; }

 private:
  std::vector<Edge> next_edges_;
  std::vector<std::pair<uint32_t, std::weak_ptr<AutogradMeta>>> retained_;
  uint64_t sequence_nr_;
  std::string anomaly_scope_;
};

/// The sink of a leaf: adds incoming gradients into the leaf's `.grad`.
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(Tensor leaf) : leaf_(std::move(leaf)) {}
  std::string name() const override { return "AccumulateGrad"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;
  TensorMeta output_meta(size_t) const override { return {leaf_.sizes(), leaf_.dtype(), leaf_.device()}; }
  const Tensor& leaf() const { return leaf_; }

 private:
  Tensor leaf_;
};

}  // namespace qflow::autograd
