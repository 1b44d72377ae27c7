#!/bin/bash
# There: PyTorch's model anchors at the 2024 handout's shapes (context 128,
# batch 16, fp32), the course reference eager against torch.compile, for
# torch_compile_2024 (c); then, with REMEASURE="size:precision ...", those
# settings' eager reference rows at the 2025 shapes (context 512, batch 4)
# again. Rows go to /tmp/res/lm_pytorch.csv (to be merged into
# reports/anchors/lm_pytorch.csv by hand: the replaced rows removed).
#   WAIT=540 bash dev/device/bg.sh dev/device/torch_2024.sh
set -u
D=/tmp/res
mkdir -p "$D"
for sp in ${REMEASURE:-}; do
  python3 reports/anchors/torch_lm_reference.py "$D/lm_pytorch.csv" \
    --sizes "${sp%:*}" --contexts 512 --batch 4 --precisions "${sp#*:}"
done
for size in small medium large xl 2.7B; do
  python3 reports/anchors/torch_lm_reference.py "$D/lm_pytorch.csv" \
    --sizes "$size" --contexts 128 --batch 16 --precisions fp32 \
    --modes forward,train_step --configs reference,reference_compiled
done
