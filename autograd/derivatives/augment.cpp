// Derivatives of core/kernels/memory/augment.cpp: none (Note [Augmentation on the device]).
#include "qflow/autograd/derivatives.h"

namespace qflow::autograd {

QFLOW_REGISTER_DERIVATIVES(augment) {
  // The images are uint8 and mean/std are the pipeline's constants: a mean or std that
  // requires grad is a mistake autograd should name rather than silently drop.
  registry.no_derivative({"random_crop_flip_normalize"},
                         "data augmentation of uint8 images: qflow has no gradient with respect to its mean and std");
}

}  // namespace qflow::autograd
