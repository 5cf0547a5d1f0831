#pragma once
// Helpers of the ONNX export tests: the official checker (Debian's python3-onnx, through
// tests/onnx/check_onnx.py, which also reports the file's structure as JSON) and ONNX Runtime
// (npm's onnxruntime-node, through tools/onnxruntime/run_onnx.js), both run as processes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "qflow/autograd/grad_mode.h"
#include "qflow/onnx/export.h"
#include "qflow/fx/fx.h"
#include "qflow/qflow.h"
#include "compare.h"
#include "error_of.h"

namespace onnx_test {

using qflow::Tensor;
using json = nlohmann::json;

struct ProcessRun {
  int status = -1;
  std::string out, err;
};

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// Runs a shell command, capturing stdout and stderr separately.
inline ProcessRun run_process(const std::string& cmd, const std::filesystem::path& dir) {
  const auto out = dir / "cmd.out", err = dir / "cmd.err";
  const int raw = std::system((cmd + " > " + out.string() + " 2> " + err.string()).c_str());
  ProcessRun r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.out = read_file(out);
  r.err = read_file(err);
  return r;
}

using ::qflow::testing_util::error_of;  // tests/error_of.h

// max |got − want| / max |want|, +Inf on NaN or Inf on either side (tests/compare.h).
using ::qflow::testing_util::relative_error;

/// The module's eval-mode output without gradients (on a copy: the caller's mode stays).
inline Tensor eval_output(const std::shared_ptr<qflow::nn::Module>& module, const Tensor& x) {
  qflow::NoGradGuard no_grad;
  auto copy = module->clone();
  copy->eval();
  return (*copy)(x);
}

using namespace qflow;

/// Non-trivial BatchNorm statistics (fresh ones are the identity, which folds to nothing).
inline void randomize_batch_norms(nn::Module& model) {
  NoGradGuard no_grad;
  for (const auto& [name, m] : model.named_modules()) {
    auto* bn = dynamic_cast<nn::BatchNorm2d*>(m.get());
    if (!bn) continue;
    const int64_t c = bn->options().features;
    bn->running_mean.copy_(randn({c}) * 0.1);
    bn->running_var.copy_(rand({c}) + 0.5);
    bn->weight.copy_(rand({c}) + 0.5);
    bn->bias.copy_(randn({c}) * 0.1);
  }
}

/// The deploy model of `name` after QAT conversion and calibration on two random batches.
inline std::shared_ptr<qflow::fx::GraphModule> deploy_model(const std::string& name, const quant::QConfig& qc,
                                              const models::ModelOptions& options = {}) {
  manual_seed(5);
  auto model = models::create(name, options);
  randomize_batch_norms(*model);
  const IntList batch{4, options.in_channels, options.image_size, options.image_size};
  const Tensor example = randn({1, batch[1], batch[2], batch[3]});
  auto float_gm = fx::symbolic_trace(model, example);
  auto qat = quant::quantization_aware_training(*float_gm, example, qc);
  quant::calibrate(*qat, std::vector<Tensor>{randn(batch), randn(batch)});
  return quant::dequantization_aware_training(*float_gm, *qat, example, qc);
}

/// A fresh directory per test; removed afterwards.
class OnnxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = std::string(info->test_suite_name()) + "_" + info->name();
    std::replace(name.begin(), name.end(), '/', '_');  // parameterised names hold slashes
    dir_ = std::filesystem::temp_directory_path() / ("qflow_onnx_" + std::to_string(::getpid()) + "_" + name);
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  /// The official checker with full_check; returns the file's structure (null on failure,
  /// with a test failure carrying the checker's message).
  json check(const std::string& model) const {
    const ProcessRun r = run_process("/usr/bin/python3 " + std::string(QFLOW_SOURCE_DIR) + "/tests/onnx/check_onnx.py " + model, dir_);
    if (r.status != 0) {
      ADD_FAILURE() << "onnx.checker rejected " << model << ":\n" << r.err << r.out;
      return json();
    }
    return json::parse(r.out);
  }

  /// Runs the model in ONNX Runtime on `input` (float32); returns its output.
  Tensor run_ort(const std::string& model, const Tensor& input) const {
    const Tensor x = input.to(qflow::DType::Float32).contiguous();
    const auto in_path = dir_ / "ort_in.bin", out_path = dir_ / "ort_out.bin";
    {
      std::ofstream f(in_path, std::ios::binary);
      f.write(static_cast<const char*>(x.raw_data()), static_cast<std::streamsize>(x.nbytes()));
    }
    std::string dims;
    for (int64_t d : x.sizes()) {
      if (!dims.empty()) dims += ',';
      dims += std::to_string(d);
    }
    const ProcessRun r = run_process("node " + std::string(QFLOW_SOURCE_DIR) + "/tools/onnxruntime/run_onnx.js " + model + " " +
                          in_path.string() + " " + dims + " " + out_path.string(),
                      dir_);
    if (r.status != 0) {
      ADD_FAILURE() << "ONNX Runtime failed on " << model << ":\n" << r.err << r.out;
      return Tensor();
    }
    const json info = json::parse(r.out);
    std::vector<int64_t> out_dims = info["dims"].get<std::vector<int64_t>>();
    const std::string bytes = read_file(out_path);
    std::vector<float> values(bytes.size() / sizeof(float));
    std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
    return qflow::from_vector<float>(values, out_dims);
  }

  /// Runs a model with several inputs in ONNX Runtime (tests/onnx/run_all_outputs.js); returns
  /// every graph output, in order (float32 outputs only).
  TensorList run_ort_all(const std::string& model, const TensorList& inputs) const {
    std::string args;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Tensor x = inputs[i].to(qflow::DType::Float32).contiguous();
      const auto in_path = dir_ / fmt::format("ort_in{}.bin", i);
      std::ofstream f(in_path, std::ios::binary);
      f.write(static_cast<const char*>(x.raw_data()), static_cast<std::streamsize>(x.nbytes()));
      args += " " + in_path.string() + " " + fmt::format("{}", fmt::join(x.sizes(), ","));
    }
    const ProcessRun r = run_process(
        "node " + std::string(QFLOW_SOURCE_DIR) + "/tests/onnx/run_all_outputs.js " + model + args + " " + dir_.string(), dir_);
    if (r.status != 0) {
      ADD_FAILURE() << "ONNX Runtime failed on " << model << ":\n" << r.err << r.out;
      return {};
    }
    TensorList outputs;
    for (const auto& out : json::parse(r.out)) {
      EXPECT_EQ(out["type"], "float32") << out["name"];
      const std::string bytes = read_file(out["file"].get<std::string>());
      std::vector<float> values(bytes.size() / sizeof(float));
      std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
      outputs.push_back(qflow::from_vector<float>(values, out["dims"].get<std::vector<int64_t>>()));
    }
    return outputs;
  }

  std::filesystem::path dir_;
};

/// ONNX operator types of a checked model with their counts.
inline std::map<std::string, int> op_counts(const json& model) {
  std::map<std::string, int> counts;
  for (const auto& n : model["nodes"]) ++counts[n["op"].get<std::string>()];
  return counts;
}

}  // namespace onnx_test
