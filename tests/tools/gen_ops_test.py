#!/usr/bin/env python3
"""tools/gen-ops (Note [One declaration per op]): what it writes from a declaration, and the
build-time errors that replace the first-call errors of hand-written ops. Run by ctest
(gen-ops:declarations); standalone: python3 tests/tools/gen_ops_test.py."""
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GEN_OPS = os.path.join(ROOT, "tools", "gen-ops")

KERNELS = """namespace qflow::kernels {
namespace {
template <int K> Stack scaled_kernel(OpArgs& a);
}  // namespace
}  // namespace qflow::kernels
"""

GOOD = """kernels = "kernels/scaled.cpp"
derivatives = "derivatives/scaled.cpp"
cuda_kernels = "kernels/scaled_cuda.cpp"
onnx_converters = "src/scaled_onnx.cpp"

[scaled]
schema = "scaled(Tensor self, float factor=0.5, int[2] window=1, Scalar? fill=None) -> Tensor"
doc = "self times factor."
kernel = "scaled_kernel<2>"
derivative = { node = "ScaledBackward", save = ["self"] }
cuda = "scaled_cuda<2>"
onnx = "unary"
onnx_arg = "Mul"

[scaled_pair]
schema = "scaled_pair(Tensor self) -> (Tensor, Tensor)"
doc = "Two copies."
derivative = { node = "PairBackward", rule = "pair_backward", save = "all", save_outputs = true }
device_generic = true
onnx = "scaled_pair"
"""


class GenOpsTest(unittest.TestCase):
    def run_gen(self, toml, kernel_text=KERNELS, family="fam", include=True, methods=False):
        if hasattr(self, "tmp"):
            self.tmp.cleanup()
        self.tmp = tempfile.TemporaryDirectory()
        d = self.tmp.name
        os.makedirs(os.path.join(d, "src", "ops"))
        os.makedirs(os.path.join(d, "src", "kernels"))
        path = os.path.join(d, "src", "ops", family + ".toml")
        with open(path, "w") as f:
            f.write(textwrap.dedent(toml))
        with open(os.path.join(d, "src", "kernels", "scaled.cpp"), "w") as f:
            f.write(kernel_text + (f'\n#include "core/ops/{family}.inc"\n' if include else ""))
        r = subprocess.run([sys.executable, GEN_OPS, "--layer", "core", "--src", os.path.join(d, "src"),
                            "--out", os.path.join(d, "out")] + (["--methods"] if methods else []) + [path],
                           capture_output=True, text=True)
        return r, os.path.join(d, "out")

    def tearDown(self):
        if hasattr(self, "tmp"):
            self.tmp.cleanup()

    def read(self, out, *parts):
        with open(os.path.join(out, *parts)) as f:
            return f.read()

    def test_writes_the_header_and_the_registration_from_the_schema(self):
        r, out = self.run_gen(GOOD)
        self.assertEqual(r.returncode, 0, r.stderr)
        header = self.read(out, "include", "qflow", "core", "ops", "fam.h")
        # C++ types and defaults derived from the schema, with the doc line.
        self.assertIn("/// self times factor.\nTensor scaled(const Tensor& self, double factor = 0.5, "
                      "const IntList& window = {1}, const std::optional<Scalar>& fill = std::nullopt);", header)
        self.assertIn("std::tuple<Tensor, Tensor> scaled_pair(const Tensor& self);", header)
        inc = self.read(out, "core", "ops", "fam.inc")
        self.assertIn('registry.def("scaled(Tensor self, float factor=0.5, int[2] window=1, Scalar? fill=None) -> Tensor", '
                      "scaled_meta, scaled_kernel<2>);", inc)
        self.assertIn("scaled_pair_meta, scaled_pair_kernel);", inc)
        self.assertIn("using namespace ::qflow::kernels;", inc)
        self.assertIn('static const OpHandle op("scaled");', inc)

    def test_device_declarations_become_registrations(self):
        toml = GOOD + """
[moved]
schema = "moved(Tensor self, ScalarType dtype=uint8) -> Tensor"
doc = "self converted."
mixes_devices = true
no_cuda = "the CPU's \\"int8\\" plans only"
non_differentiable = "integer outputs"
no_onnx = "kNoConverterYet"
"""
        r, out = self.run_gen(toml)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("Tensor moved(const Tensor& self, DType dtype = DType::UInt8);",
                      self.read(out, "include", "qflow", "core", "ops", "fam.h"))
        inc = self.read(out, "core", "ops", "fam.inc")
        self.assertIn('registry.mixes_devices("moved");', inc)
        self.assertIn('registry.no_kernel({"moved"}, ::qflow::DeviceType::CUDA, "the CPU\'s \\"int8\\" plans only");', inc)

    def test_tensor_methods(self):
        toml = GOOD.replace('kernel = "scaled_kernel<2>"', 'kernel = "scaled_kernel<2>"\nmethod = true') + """
[scaled_]
schema = "scaled_(Tensor(a!) self, float factor=0.5) -> Tensor(a!)"
doc = "self times factor, in place."
method = true
cuda = "scaled_cuda<3>"
no_onnx = "kInPlaceOp"
"""
        r, out = self.run_gen(toml, methods=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        methods = self.read(out, "include", "qflow", "core", "ops", "tensor_methods.h")
        # Without self; const unless the op writes self.
        self.assertIn("  /// self times factor.\n  Tensor scaled(double factor = 0.5, const IntList& window = {1}, "
                      "const std::optional<Scalar>& fill = std::nullopt) const;", methods)
        self.assertIn("  Tensor& scaled_(double factor = 0.5);", methods)
        inc = self.read(out, "core", "ops", "fam.inc")
        self.assertIn("Tensor Tensor::scaled(double factor, const IntList& window, const std::optional<Scalar>& fill) const "
                      "{ return ::qflow::scaled(*this, factor, window, fill); }", inc)
        self.assertIn("Tensor& Tensor::scaled_(double factor) { return ::qflow::scaled_(*this, factor); }", inc)
        # Only core's ops are methods (--methods), and a method needs `Tensor self` and a typed function.
        self.assertIn("only core's ops can be", self.error_of(toml))
        self.assertIn("must be `Tensor self`",
                      self.error_of(toml.replace('scaled_(Tensor(a!) self', 'scaled_(Tensor(a!) other'), methods=True))
        self.assertIn("has no typed function", self.error_of(toml + "api = false\n", methods=True))

    def error_of(self, toml, **kw):
        r, _ = self.run_gen(toml, **kw)
        self.assertNotEqual(r.returncode, 0, "gen-ops accepted it")
        return r.stderr

    def test_a_kernel_file_without_the_include_is_an_error(self):
        err = self.error_of(GOOD, include=False)
        self.assertIn('kernels/scaled.cpp registers no ops of', err)
        self.assertIn('#include "core/ops/fam.inc"', err)

    def test_a_family_without_its_kernel_file_is_an_error(self):
        self.assertIn("no `kernels", self.error_of(GOOD.replace('kernels = "kernels/scaled.cpp"', "")))
        self.assertIn("does not exist", self.error_of(GOOD.replace("scaled.cpp", "missing.cpp")))

    def test_an_unknown_schema_type_is_an_error(self):
        err = self.error_of(GOOD.replace("float factor=0.5", "complex factor"))
        self.assertIn("does not know the schema type 'complex'", err)

    def test_a_default_before_a_required_argument_is_an_error(self):
        err = self.error_of(GOOD.replace("Tensor self, float factor=0.5,", "Tensor self, float factor=0.5, int required,"))
        self.assertIn("'required' has no default after an argument with one", err)

    def test_a_table_naming_another_op_an_unknown_field_or_no_doc_is_an_error(self):
        self.assertIn("declares the schema of 'scale'", self.error_of(GOOD.replace('schema = "scaled(', 'schema = "scale(')))
        self.assertIn("unknown fields ['kernal']", self.error_of(GOOD.replace("kernel = ", "kernal = ")))
        self.assertIn("has no doc", self.error_of(GOOD.replace('doc = "Two copies."', "")))

    def test_an_unknown_family_setting_is_an_error(self):
        self.assertIn("unknown family settings ['kernel']",
                      self.error_of('kernel = "x"\n' + GOOD))

    def test_every_op_says_what_autograd_cuda_and_onnx_do_with_it(self):
        # Each part, left out, is an error naming the op and the declarations that would do.
        no_derivative = GOOD.replace('derivative = { node = "ScaledBackward", save = ["self"] }\n', "")
        self.assertIn("[scaled] says nothing of its derivative", self.error_of(no_derivative))
        self.assertIn("[scaled] says nothing of CUDA", self.error_of(GOOD.replace('cuda = "scaled_cuda<2>"\n', "")))
        self.assertIn("[scaled_pair] must declare exactly one of `onnx",
                      self.error_of(GOOD.replace('onnx = "scaled_pair"\n', "")))
        self.assertIn("must declare exactly one of `onnx",
                      self.error_of(GOOD.replace('onnx = "scaled_pair"', 'onnx = "scaled_pair"\nno_onnx = "why"')))
        self.assertIn("declares both derivative and non_differentiable",
                      self.error_of(GOOD.replace('save = ["self"] }', 'save = ["self"] }\nnon_differentiable = "x"')))
        self.assertIn("saves 'other', which the schema does not have",
                      self.error_of(GOOD.replace('save = ["self"]', 'save = ["other"]')))
        self.assertIn("`derivative` has unknown fields ['saves']",
                      self.error_of(GOOD.replace('save = ["self"]', 'saves = ["self"]')))
        # A factory (no tensor argument) is never recorded by autograd nor dispatched to CUDA; an
        # in-place op is differentiated through its out-of-place twin.
        factory = GOOD + """
[made]
schema = "made(int n) -> Tensor"
doc = "n zeros."
no_onnx = "kTensorFactory"

[scaled_]
schema = "scaled_(Tensor(a!) self) -> Tensor(a!)"
doc = "self times 0.5, in place."
cuda = "scaled_cuda<3>"
no_onnx = "kInPlaceOp"
"""
        r, _ = self.run_gen(factory)
        self.assertEqual(r.returncode, 0, r.stderr)

    def run_part(self, part, toml, layer_files, include=True):
        """gen-ops --part PART over `toml` (written by run_gen), with the registering layer's
        files `layer_files` (path -> text; each includes its .inc unless include is False)."""
        r, out = self.run_gen(toml)
        self.assertEqual(r.returncode, 0, r.stderr)
        layer_dir = os.path.join(self.tmp.name, "layer")
        for rel, text in layer_files.items():
            os.makedirs(os.path.dirname(os.path.join(layer_dir, rel)), exist_ok=True)
            stem = os.path.splitext(rel)[0]
            with open(os.path.join(layer_dir, rel), "w") as f:
                f.write(text + (f'#include "up/{stem}.{part}.inc"\n' if include else ""))
        return subprocess.run([sys.executable, GEN_OPS, "--part", part, "--layer", "up", "--src", layer_dir,
                               "--out", out, os.path.join(self.tmp.name, "src", "ops", "fam.toml")],
                              capture_output=True, text=True), out

    def test_the_parts_are_registered_where_the_family_says(self):
        toml = GOOD + """
[scaled_backward]
schema = "scaled_backward(Tensor grad_output, Tensor self) -> Tensor"
doc = "grad_output times the factor."
no_derivative = "kNoDoubleBackward"
cuda = "scaled_backward_cuda"
no_onnx = "a backward op; \\"eval\\" only"
"""
        r, out = self.run_part("derivatives", toml, {"derivatives/scaled.cpp": "// rules\n"})
        self.assertEqual(r.returncode, 0, r.stderr)
        inc = self.read(out, "up", "derivatives", "scaled.derivatives.inc")
        self.assertIn("QFLOW_REGISTER_DERIVATIVES(generated_scaled) {", inc)
        # The rule is NAME_rule unless named; saves, outputs and reasons as declared.
        self.assertIn('registry.def("scaled", {.node_name = "ScaledBackward", .save_inputs = save_inputs({"self"}), '
                      ".backward = scaled_rule});", inc)
        self.assertIn('registry.def("scaled_pair", {.node_name = "PairBackward", .save_inputs = kSaveAll, '
                      ".save_outputs = true, .backward = pair_backward});", inc)
        self.assertIn('registry.no_derivative({"scaled_backward"}, kNoDoubleBackward);', inc)

        r, out = self.run_part("cuda", toml, {"kernels/scaled_cuda.cpp": "// kernels\n"})
        self.assertEqual(r.returncode, 0, r.stderr)
        inc = self.read(out, "up", "kernels", "scaled_cuda.cuda.inc")
        self.assertIn('registry.impl("scaled", ::qflow::DeviceType::CUDA, scaled_cuda<2>);', inc)
        self.assertNotIn('"scaled_pair"', inc)  # device-generic: its CPU kernel runs everywhere

        r, out = self.run_part("onnx", toml, {"src/scaled_onnx.cpp": "// converters\n"})
        self.assertEqual(r.returncode, 0, r.stderr)
        inc = self.read(out, "up", "src", "scaled_onnx.onnx.inc")
        self.assertIn("void add_scaled_onnx_declared(", inc)
        self.assertIn('converters["scaled"] = [](ExportContext& c, const fx::Node& node, const NodeArgs& a) '
                      '{ unary(c, node, a, "Mul"); };', inc)
        self.assertIn('converters["scaled_pair"] = scaled_pair;', inc)
        self.assertIn('refusals["scaled_backward"] = "a backward op; \\"eval\\" only";', inc)

    def test_a_part_without_its_file_or_include_is_an_error(self):
        r, _ = self.run_part("derivatives", GOOD, {"derivatives/scaled.cpp": "// rules\n"}, include=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("up/derivatives/scaled.cpp registers no derivatives of", r.stderr)
        self.assertIn('#include "up/derivatives/scaled.derivatives.inc"', r.stderr)
        r, _ = self.run_part("derivatives", GOOD, {})
        self.assertIn("the derivatives file up/derivatives/scaled.cpp does not exist", r.stderr)
        r, _ = self.run_part("cuda", GOOD.replace('cuda_kernels = "kernels/scaled_cuda.cpp"\n', ""), {})
        self.assertIn("declares cuda but names no file for them: add `cuda_kernels", r.stderr)

    def test_an_unchanged_declaration_leaves_the_files_alone(self):
        r, out = self.run_gen(GOOD)
        self.assertEqual(r.returncode, 0, r.stderr)
        path = os.path.join(out, "core", "ops", "fam.inc")
        before = os.stat(path).st_mtime_ns
        src = os.path.join(self.tmp.name, "src")
        r = subprocess.run([sys.executable, GEN_OPS, "--layer", "core", "--src", src, "--out", out,
                            os.path.join(src, "ops", "fam.toml")], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(os.stat(path).st_mtime_ns, before)


if __name__ == "__main__":
    unittest.main()
