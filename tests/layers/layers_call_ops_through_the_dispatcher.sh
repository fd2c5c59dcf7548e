#!/usr/bin/env bash
# Layers, modules, models, the trainer, the tasks, the CLI and the Python bindings reach the ops only through their
# dispatched entry points (ops::gla, ops::gla_step, ...: include/seqmix/ops/operators.h, generated from the
# schemas), never an operator's own function (ops::*_op, declared in src/ops/<family>/internal.h) or a kernel
# (ops::kernel::*, ops::*_fused, *_naive, ...): a direct call would skip reduced precision, autocast and, on a GPU,
# the device's kernel.
set -euo pipefail
cd "$(dirname "$0")/../.."
pattern='ops::(native::|kernel::|[a-z_0-9]+_(fused|naive|dense|blocked|forward|backward|op)\()|#include "[./]*ops/[a-z_]+/internal\.h"'
if hits=$(grep -rnE "$pattern" src/layers src/modules src/models src/train src/tasks src/dist src/python apps); then
  echo "these call an op's kernel directly instead of its entry point (include/seqmix/ops/operators.h):"
  echo "$hits"
  exit 1
fi
echo "no layer calls an op's kernel directly"
