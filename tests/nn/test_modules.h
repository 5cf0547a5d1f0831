#pragma once
// Small modules shared by the nn module-system tests.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "qflow/nn/nn.h"
#include "qflow/qflow.h"
#include "error_of.h"

namespace qflow::nn::testing {

/// y = x * weight + bias. Registers from stored options in reset(), like libtorch layers
/// (clone path 1 of Note [Module cloning]).
struct Affine : Cloneable<Affine> {
  explicit Affine(int64_t n) : n_(n) { reset(); }
  void reset() {
    weight = register_parameter("weight", ones({n_}));
    bias = register_parameter("bias", zeros({n_}));
    calls = register_buffer("calls", zeros({1}, DType::Int64));
  }
  Tensor forward(const Tensor& x) override { return x * weight + bias; }
  std::string extra_repr() const override { return std::to_string(n_); }

  int64_t n_;
  Tensor weight, bias, calls;
};

/// Two Affines in a row, written with in-class initializers (clone path 2).
struct Block : Cloneable<Block> {
  std::shared_ptr<Affine> a1 = register_module("a1", Affine(3));
  std::shared_ptr<Affine> a2 = register_module("a2", std::make_shared<Affine>(3));
  Tensor forward(const Tensor& x) override { return (*a2)((*a1)(x)); }
};

/// The §7-style model: members initialized by registration.
struct Net : Cloneable<Net> {
  std::shared_ptr<Affine> stem = register_module("stem", Affine(3));
  std::shared_ptr<Sequential> layer1 = register_module("layer1", Sequential(Block(), Block()));
  Tensor scale = register_parameter("scale", full({1}, 2.0));
  Tensor forward(const Tensor& x) override { return (*layer1)((*stem)(x)) * scale; }
};

/// Sets every element of `t` (float32) to `v` without recording history.
inline void fill(const Tensor& t, float v) {
  NoGradGuard no_grad;
  Tensor h = t;
  h.fill_(v);
}

using ::qflow::testing_util::error_of;  // tests/error_of.h

}  // namespace qflow::nn::testing
