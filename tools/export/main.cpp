// qflow-export: write a zoo model (float, or its deployable quantized form) as an ONNX file
// for ONNX Runtime or TensorRT. See onnx::export_model for what the file holds.
#include <filesystem>
#include <fstream>

#include <fmt/ranges.h>

#include "build_model.h"
#include "export_options.h"
#include "qflow/qflow.h"

namespace qflow::tools {
namespace {

std::string dims_text(const std::vector<int64_t>& dims, const std::string& batch) {
  std::vector<std::string> parts;
  for (int64_t d : dims) parts.push_back(d < 0 ? batch : std::to_string(d));
  return fmt::format("[{}]", fmt::join(parts, ", "));
}

void write_floats(const std::filesystem::path& path, const Tensor& t) {
  const Tensor c = t.to(DType::Float32).contiguous();
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(static_cast<const char*>(c.raw_data()), static_cast<std::streamsize>(c.nbytes()));
  QFLOW_CHECK(f.good(), "cannot write {}", path.string());
}

/// --save-example: a seeded batch and qflow's output on it, for checking the file elsewhere. A
/// deploy model answers with its float simulation, the function its Q/DQ graph describes (Note
/// [Q/DQ export]); its integer kernels sum exactly and can land one step away at rounding ties.
void save_example(const ExportCliOptions& o, fx::GraphModule& gm, const std::string& onnx_file) {
  const std::filesystem::path dir = o.save_example;
  std::filesystem::create_directories(dir);
  manual_seed(o.seed + 1);
  const Tensor x = randn({o.batch, o.in_channels, o.image_size, o.image_size});
  Tensor y;
  {
    NoGradGuard no_grad;
    gm.eval();
    const bool simulated = quant::set_integer(gm, false) > 0;
    y = gm(x);
    if (simulated) quant::set_integer(gm, true);
  }
  write_floats(dir / "input.bin", x);
  write_floats(dir / "expected.bin", y);
  fmt::print("qflow-export: example input {} and qflow's output {} in {}; check with\n  node tools/onnxruntime/run_onnx.js "
             "{} {} {} {} {}\n",
             x.sizes(), y.sizes(), dir.string(), onnx_file, (dir / "input.bin").string(), fmt::join(x.sizes(), ","),
             (dir / "output.bin").string(), (dir / "expected.bin").string());
}

int run(const ExportCliOptions& o) {
  const BuiltModel built = build_model(o);
  const std::string out = o.out.empty() ? fmt::format("{}_{}.onnx", o.model, o.stage) : o.out;
  onnx::ExportOptions eo{.opset = o.opset, .dynamic_batch = !o.static_batch};
  const onnx::ExportSummary s = onnx::export_model(*built.gm, built.example, out, eo);
  fmt::print("qflow-export: {} ({}) -> {} ({:.1f} MB)\n", o.model, built.how, out,
             static_cast<double>(s.bytes.size()) / (1 << 20));
  fmt::print("  input  '{}' float32 {}\n", s.input_name, dims_text(s.input_shape, eo.batch_dim_name));
  fmt::print("  output '{}' float32 {}\n", s.output_name, dims_text(s.output_shape, eo.batch_dim_name));
  std::vector<std::string> ops;
  for (const auto& [op, n] : s.op_counts) ops.push_back(fmt::format("{} {}", n, op));
  fmt::print("  opset {}, {} nodes ({}), {} initializers\n", o.opset, s.num_nodes, fmt::join(ops, ", "),
             s.num_initializers);
  if (!o.save_example.empty()) save_example(o, *built.gm, out);
  return 0;
}

}  // namespace
}  // namespace qflow::tools

int main(int argc, char** argv) {
  CLI::App app{"qflow-export — write a qflow zoo model as ONNX (float, or deploy: Q/DQ with int8 weights and BN "
               "folded, for ONNX Runtime or TensorRT's trtexec --onnx=FILE --int8)"};
  qflow::tools::ExportCliOptions options;
  qflow::tools::add_export_options(app, options);
  CLI11_PARSE(app, argc, argv);
  try {
    return qflow::tools::run(options);
  } catch (const qflow::Error& e) {
    fmt::print(stderr, "qflow-export: error: {}\n", e.message());
    return 1;
  }
}
