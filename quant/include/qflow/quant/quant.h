#pragma once
// qflow::quant — quantization aware training in one include.
//
//   QConfig                      qconfig.h     bits, scheme, formula, per_layer, momentum, ste
//   QConfigMapping               qconfig_mapping.h  per-layer QConfigs or float (Note [QConfig
//                                              mapping]); its JSON (--qconfig of the tools)
//   fake_quantize (op)           fake_quantize.h   registered op + STE backward, also F::fake_quantize
//   QParams, compute_qparams,    qparams.h     scale/zero_point from ranges (Note [Quantization
//   tensor_range, fake_quantize                numerics]), F-style fake_quantize(x, qparams, qconfig)
//   MinMaxObserver,              observer.h    range statistics in buffers; freeze_observers
//   MovingAverageMinMaxObserver
//   HistogramObserver            histogram_observer.h  PTQ: L2-optimal, percentile, MSE ranges
//   LsqQuantizer, TqtQuantizer   learned_quantizer.h   learned scales (Note [Learned scales]);
//   learned_quantization_parameters                   their parameters, for optimizer groups
//   QConv2d, QLinear, QConvBN    qconv.h, qlinear.h, qconvbn.h   QAT modules (Note [QAT module
//                                              layout], Note [Folding BN during QAT])
//   DConv2d, DLinear             deploy.h      deployable modules (Note [Deployed module layout])
//   upgrade_deploy_state_dict    deploy_upgrade.h  float deploy weights of older files -> integers
//   enable_fake_quant            quant_module.h   switch fake quantization in a whole tree
//   quantization_aware_training, passes.h    the graph passes (Note [QAT rewrite]): float -> QAT,
//   dequantization_aware_training,            QAT/PTQ -> deploy, PTQ preparation; PassSummary
//   prepare_ptq
//   calibrate, ModeGuard         calibrate.h   post-training calibration of the observers
//   annotate_quant_meta          quant_meta.h  "quant.*" node meta that fx::to_dot draws
//   compare, annotate_sqnr       compare.h     the numeric debugger: per-node SQNR, cosine, max
//                                              error of a quantized model against its float one
//
// Building the modules from float ones (what a graph pass does per matched node; each
// factory copies options, parameters and buffers, keeps the source's train/eval mode and
// leaves the float module untouched):
//
//   Conv2d followed by BatchNorm2d (the BN the conv's only user):
//       auto q = quant::QConvBN::from_float(conv, bn, qconfig);   // conv's weight/bias + bn.*
//   any other Conv2d:
//       auto q = quant::QConv2d::from_float(conv, qconfig);
//   Linear:
//       auto q = quant::QLinear::from_float(linear, qconfig);
//
// After training (or calibration), the deployable forms with every parameter fixed:
//       quant::DConv2d::from_qconvbn(*qconvbn)   // BN folded from the running statistics
//       quant::DConv2d::from_qconv2d(*qconv)
//       quant::DLinear::from_qlinear(*qlinear)
// Their eval outputs equal the Q modules' eval outputs. The factories throw if fake
// quantization is on and an observer never recorded anything.
//
// Modes. Observers record only in training mode and when not frozen:
//   - QAT: train the Q model like the float one; quant::freeze_observers(model) stops the
//     statistics late in training, QConvBN::freeze_bn() stops BN statistics (fold with the
//     running ones).
//   - Post-training calibration: model.eval(), then switch just the observers to training
//     (for each module m with dynamic_cast<quant::Observer*>(m) : m->train()), run batches,
//     then deploy.
//   - quant::enable_fake_quant(model, false) makes every Q module compute its float
//     counterpart exactly (QConvBN == Conv2d → BatchNorm2d) while observers keep recording.
// The Q, D and observer modules are fx leaf modules (call_module nodes in a traced graph).
#include "qflow/quant/calibrate.h"
#include "qflow/quant/compare.h"
#include "qflow/quant/deploy.h"
#include "qflow/quant/deploy_upgrade.h"
#include "qflow/quant/fake_quantize.h"
#include "qflow/quant/histogram_observer.h"
#include "qflow/quant/learned_quantizer.h"
#include "qflow/quant/observer.h"
#include "qflow/quant/passes.h"
#include "qflow/quant/qconfig.h"
#include "qflow/quant/qconfig_mapping.h"
#include "qflow/quant/qconv.h"
#include "qflow/quant/qconvbn.h"
#include "qflow/quant/qlinear.h"
#include "qflow/quant/qparams.h"
#include "qflow/quant/quant_meta.h"
#include "qflow/quant/quant_module.h"
#include "qflow/quant/sensitivity.h"
