// random_crop_flip_normalize on the GPU (Note [Augmentation on the device]): the CPU op's
// shape rule checks the arguments, the launcher (augment.cu) does the rest on the stream of
// the images' device; nothing is copied to or from the host.
#include <optional>

#include "kernels/augment.cuh"
#include "kernels/tensor_geometry.h"
#include "qflow/core/factory.h"

namespace qflow::cuda {
namespace {

// The parameters the shape rule has just checked.
augment::CropFlipParams params_of(const OpArgs& a) {
  const Tensor& images = a.tensor("images");
  augment::CropFlipParams p;
  p.channels = images.sizes()[1], p.height = images.sizes()[2], p.width = images.sizes()[3];
  const IntList crop = a.int_list("crop_size");
  p.crop = !crop.empty();
  p.out_h = p.crop ? crop[0] : p.height;
  p.out_w = p.crop ? crop[1] : p.width;
  p.padding = a.to_int("padding");
  p.fill = static_cast<uint8_t>(a.to_int("fill"));
  p.flip = !a.is_none("flip_p");
  p.flip_p = p.flip ? a.to_double("flip_p") : 0.0;
  p.flip_first = a.to_bool("flip_first");
  return p;
}

Stack random_crop_flip_normalize_kernel(OpArgs& a) {
  static const OpHandle op("random_crop_flip_normalize");
  const TensorMeta m = cpu_shape_rule(op, a)[0];
  const augment::CropFlipParams p = params_of(a);
  const Tensor images = contiguous(a.tensor("images"));
  const Tensor indices = contiguous(a.tensor("indices"));
  const std::optional<Tensor> mean = a.optional_tensor("mean"), std = a.optional_tensor("std");
  Tensor mean_c, std_c;
  if (mean) mean_c = contiguous(*mean), std_c = contiguous(*std);
  Tensor o = empty(m.sizes, m.dtype, images.device());
  Launch launch(o);
  launch_random_crop_flip_normalize(p, static_cast<uint64_t>(a.to_int("seed")), device_ptr_as<const uint8_t>(images),
                                    images.sizes()[0], device_ptr_as<const int64_t>(indices), indices.numel(),
                                    mean ? device_ptr_as<const float>(mean_c) : nullptr,
                                    mean ? device_ptr_as<const float>(std_c) : nullptr, mean ? mean_c.numel() : 0,
                                    device_ptr_as<float>(o), launch.stream);
  QFLOW_CUDA_CHECK_LAUNCH("random_crop_flip_normalize");
  return Stack{Value(std::move(o))};
}

}  // namespace
}  // namespace qflow::cuda

#include "cuda/kernels/augment_ops.cuda.inc"
