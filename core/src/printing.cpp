// PyTorch-style tensor printing, rule for rule after torch/_tensor_str.py (PyTorch 1.13) with
// the default print options, so a printed qflow tensor reads exactly like its PyTorch twin.
// The one deliberate difference: dtype suffixes say `dtype=float64`, not `dtype=torch.float64`.
#include <algorithm>
#include <cmath>
#include <ostream>
#include <string>
#include <vector>

#include "qflow/core/tensor.h"

namespace qflow {
namespace {

constexpr int kPrecision = 4;
constexpr int64_t kThreshold = 1000;  // more elements than this: summarise with "..."
constexpr int64_t kEdgeItems = 3;
constexpr int64_t kLineWidth = 80;

// Reads a tensor of any layout element by element and walks the elements that will be
// printed (all of them, or only the edge items of every dim when summarising).
class Reader {
 public:
  explicit Reader(const Tensor& t)
      : t_(t), base_(static_cast<const char*>(t.raw_data())), summarize_(t.numel() > kThreshold) {}

  const Tensor& tensor() const { return t_; }
  bool summarize() const { return summarize_; }
  /// True when dim `d` shows only its edge items.
  bool elided(int64_t d) const { return summarize_ && t_.sizes()[d] > 2 * kEdgeItems; }

  double real(int64_t offset) const {
    return visit_dtype(t_.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      return static_cast<double>(reinterpret_cast<const T*>(base_)[offset]);
    });
  }
  /// Python's "{}" of the element as tolist() would give it (ints and True/False).
  std::string exact(int64_t offset) const {
    return visit_dtype(t_.dtype(), [&](auto tag) -> std::string {
      using T = typename decltype(tag)::type;
      const T v = reinterpret_cast<const T*>(base_)[offset];
      if constexpr (std::is_same_v<T, bool>) return v ? "True" : "False";
      else if constexpr (std::is_floating_point_v<T>) return fmt::format("{}", v);
      else return fmt::format("{}", static_cast<int64_t>(v));
    });
  }

  /// Indices of dim `d` that are printed, in order; -1 marks the "..." gap.
  std::vector<int64_t> shown(int64_t d) const {
    const int64_t n = t_.sizes()[d];
    std::vector<int64_t> idx;
    for (int64_t i = 0; i < n; ++i) {
      if (elided(d) && i == kEdgeItems) {
        idx.push_back(-1);
        i = n - kEdgeItems;
      }
      idx.push_back(i);
    }
    return idx;
  }

  /// Calls fn(offset) for every printed element, in row-major order.
  template <typename Fn>
  void for_each_shown(int64_t d, int64_t offset, const Fn& fn) const {
    if (d == t_.dim()) return fn(offset);
    for (int64_t i : shown(d))
      if (i >= 0) for_each_shown(d + 1, offset + i * t_.strides()[d], fn);
  }

 private:
  const Tensor& t_;
  const char* base_;
  bool summarize_;
};

// torch._tensor_str._Formatter: picks fixed, integer or scientific notation and the common
// column width from the printed elements.
class Formatter {
 public:
  explicit Formatter(const Reader& r) : r_(r), floating_(r.tensor().is_floating_point()) {
    if (!floating_) {
      r.for_each_shown(0, 0, [&](int64_t o) { widen(r.exact(o)); });
      return;
    }
    std::vector<double> vals;  // nonzero finite values
    r.for_each_shown(0, 0, [&](int64_t o) {
      const double v = r.real(o);
      if (std::isfinite(v) && v != 0) vals.push_back(v);
    });
    if (vals.empty()) return;
    double lo = std::fabs(vals[0]), hi = lo;
    for (double v : vals) {
      lo = std::min(lo, std::fabs(v));
      hi = std::max(hi, std::fabs(v));
      int_mode_ = int_mode_ && v == std::ceil(v);
    }
    sci_mode_ = hi / lo > 1000.0 || hi > 1.0e8 || (!int_mode_ && lo < 1.0e-4);
    for (double v : vals) {
      if (sci_mode_) widen(fmt::format("{:.{}e}", v, kPrecision));
      else if (int_mode_) widen(fmt::format("{:.0f}", v) + ".");
      else widen(fmt::format("{:.{}f}", v, kPrecision));
    }
  }

  int64_t width() const { return width_; }

  /// The element at `offset`, right-aligned to the common width.
  std::string format(int64_t offset) const {
    std::string s;
    if (!floating_) {
      s = r_.exact(offset);
    } else {
      const double v = r_.real(offset);
      if (std::isnan(v)) s = "nan";  // Python never prints a sign on NaN
      else if (std::isinf(v)) s = v > 0 ? "inf" : "-inf";
      else if (sci_mode_) s = fmt::format("{:.{}e}", v, kPrecision);
      else if (int_mode_) s = fmt::format("{:.0f}.", v);
      else s = fmt::format("{:.{}f}", v, kPrecision);
    }
    const int64_t pad = width_ - static_cast<int64_t>(s.size());
    return pad > 0 ? std::string(static_cast<size_t>(pad), ' ') + s : s;
  }

 private:
  void widen(const std::string& s) { width_ = std::max(width_, static_cast<int64_t>(s.size())); }

  const Reader& r_;
  bool floating_;
  bool int_mode_ = true;
  bool sci_mode_ = false;
  int64_t width_ = 1;
};

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string s;
  for (size_t i = 0; i < parts.size(); ++i) s += (i ? sep : "") + parts[i];
  return s;
}

// _vector_str: a 1-D slice, wrapped so lines stay within the line width.
std::string vector_str(const Reader& r, const Formatter& f, int64_t d, int64_t offset, int64_t indent) {
  const int64_t element_length = f.width() + 2;
  const int64_t per_line = std::max<int64_t>(1, (kLineWidth - indent) / element_length);
  std::vector<std::string> data;
  for (int64_t i : r.shown(d)) data.push_back(i < 0 ? " ..." : f.format(offset + i * r.tensor().strides()[d]));
  std::vector<std::string> lines;
  for (size_t i = 0; i < data.size(); i += static_cast<size_t>(per_line)) {
    const auto end = data.begin() + static_cast<std::ptrdiff_t>(std::min(data.size(), i + static_cast<size_t>(per_line)));
    lines.push_back(join(std::vector<std::string>(data.begin() + static_cast<std::ptrdiff_t>(i), end), ", "));
  }
  return "[" + join(lines, ",\n" + std::string(static_cast<size_t>(indent + 1), ' ')) + "]";
}

// _tensor_str_with_formatter: nested brackets, one blank line more per extra dim.
std::string tensor_str(const Reader& r, const Formatter& f, int64_t d, int64_t offset, int64_t indent) {
  const int64_t ndim = r.tensor().dim();
  if (d == ndim) return f.format(offset);
  if (d == ndim - 1) return vector_str(r, f, d, offset, indent);
  std::vector<std::string> slices;
  for (int64_t i : r.shown(d))
    slices.push_back(i < 0 ? "..." : tensor_str(r, f, d + 1, offset + i * r.tensor().strides()[d], indent + 1));
  const std::string sep = "," + std::string(static_cast<size_t>(ndim - d - 1), '\n') + std::string(static_cast<size_t>(indent + 1), ' ');
  return "[" + join(slices, sep) + "]";
}

// _add_suffixes: ", suffix" on the last line, or on a new line when it would pass the width.
std::string add_suffixes(std::string s, const std::vector<std::string>& suffixes, int64_t indent) {
  const size_t nl = s.rfind('\n');
  int64_t last_line_len = static_cast<int64_t>(s.size()) - (nl == std::string::npos ? -1 : static_cast<int64_t>(nl)) + 1;
  for (const std::string& suffix : suffixes) {
    const auto len = static_cast<int64_t>(suffix.size());
    if (last_line_len + len + 2 > kLineWidth) {
      s += ",\n" + std::string(static_cast<size_t>(indent), ' ') + suffix;
      last_line_len = indent + len;
    } else {
      s += ", " + suffix;
      last_line_len += len + 2;
    }
  }
  return s + ")";
}

std::string shape_tuple(const std::vector<int64_t>& sizes) {
  std::vector<std::string> parts;
  for (int64_t s : sizes) parts.push_back(std::to_string(s));
  return "(" + join(parts, ", ") + (sizes.size() == 1 ? ",)" : ")");
}

}  // namespace

std::string to_string(const Tensor& t) {
  if (!t.defined()) return "tensor(undefined)";
  const std::string prefix = "tensor(";
  const auto indent = static_cast<int64_t>(prefix.size());
  std::vector<std::string> suffixes;
  std::string body;
  if (t.numel() == 0) {
    // Like NumPy: the shape unless it is (0,); the dtype always, nothing can imply it.
    if (t.dim() != 1) suffixes.push_back("size=" + shape_tuple(t.sizes()));
    if (t.dtype() != DType::Float32) suffixes.push_back(fmt::format("dtype={}", t.dtype()));
    body = "[]";
  } else {
    const DType dt = t.dtype();
    if (dt != DType::Float32 && dt != DType::Int64 && dt != DType::Bool) suffixes.push_back(fmt::format("dtype={}", dt));
    const Tensor host = t.device().is_cpu() ? t : t.detach().to(Device::cpu());
    const Reader reader(host);
    const Formatter formatter(reader);
    body = tensor_str(reader, formatter, 0, 0, indent);
  }
  // PyTorch's repr: the device first after the values, when it is not the CPU.
  if (!t.device().is_cpu()) suffixes.insert(suffixes.begin(), fmt::format("device='{}'", t.device()));
  const std::string grad_fn = t.grad_fn_name();
  if (!grad_fn.empty()) suffixes.push_back("grad_fn=<" + grad_fn + ">");
  else if (t.requires_grad()) suffixes.push_back("requires_grad=True");
  return add_suffixes(prefix + body, suffixes, indent);
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << to_string(t); }

}  // namespace qflow
