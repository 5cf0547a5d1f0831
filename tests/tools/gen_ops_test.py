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

[scaled]
schema = "scaled(Tensor self, float factor=0.5, int[2] window=1, Scalar? fill=None) -> Tensor"
doc = "self times factor."
kernel = "scaled_kernel<2>"

[scaled_pair]
schema = "scaled_pair(Tensor self) -> (Tensor, Tensor)"
doc = "Two copies."
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
