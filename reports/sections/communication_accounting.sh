#!/bin/sh
# Writeup section communication_accounting (handout 2.4): the XXL model's
# memory and the FSDP x TP mesh, from DATA/communication_accounting.csv
# (kind comm_accounting evaluates model/accounting.h from the settings in
# each row, so every number below is read from a row, none typed here).
# Environment as for every section.
set -eu
. "$REPORT_LIB"

require_rows "$CSV" communication_accounting "(no GPU needed)"
# (a) asks about 80 GB devices, (b) to (d) about 95 GB ones: the
# experiment's rows for each (a sweep cut to one answers nothing)
for gb in 80 95; do
  [ "$(tool count "$CSV" --where status=ok --where device_gb=$gb)" -gt 0 ] ||
    not_measured communication_accounting "with its device_gb = $gb rows (the handout's question needs both 80 and 95)"
done
[ "$(tool count "$CSV" --where status=ok --where 'device_gb=80|95' --first-of device_gb)" -eq 2 ] || exit 0
v() { # v COL [--where ...]: the first ok row's value
  col=$1; shift
  x=$(tool value "$CSV" --col "$col" --where status=ok "$@")
  num "$col" "$x"
  printf '%s' "$x"
}
d_model=$(v d_model); d_ff=$(v d_ff); blocks=$(v blocks)
params=$(v params); master=$(v master_gb); grad=$(v grad_gb)
optim=$(v optim_gb); state=$(v state_gb); apt=$(v act_bytes_per_token)
h100=$(v devices_for_state --where device_gb=80)
n95=$(v fsdp_min_devices --where device_gb=95)
cat <<TEXT
The handout's XXL model: d_model $d_model, d_ff $d_ff, $blocks blocks of two
linear layers (attention, embeddings and the activation function left
out). Computed by the \`comm_accounting\` kind (\`model/accounting.h\` gives
the formulas; \`tests/test_accounting\` checks them against values worked
out by hand). GB = 10^9 bytes.

### (a) Memory on one device

Parameters: 2 x $d_model x $d_ff x $blocks = $params.

| fp32 item | bytes a parameter | GB |
|---|--:|--:|
| master weights | 4 | $master |
| accumulated gradients | 4 | $grad |
| AdamW state (m, v) | 8 | $optim |
| total | 16 | $state |

Backward keeps each linear layer's input in bf16: 2 x ($d_model + $d_ff) x
$blocks = $apt bytes a token.

The fp32 state alone takes $state GB, the memory of $(calc %.2f "$h100") H100s of 80 GB
(at least $(calc '%d' "$h100 == int($h100) ? $h100 : int($h100) + 1")) before any activation.

TEXT
tok=$(v tokens)
cat <<TEXT
### (b) Sharding over N_FSDP devices

With the state and half of the activations A sharded over N_FSDP
devices (the other half, every second layer, whole on each), a device holds
(16 P + A / 2) / N_FSDP + A / 2 bytes, with A = $apt bytes x tokens.

TEXT
tool table "$CSV" --cols n_fsdp,fsdp_gb_per_device \
  --head "N_FSDP,GB a device ($tok token of activations)" --where status=ok \
  --where device_gb=95 --where n_fsdp!=0 --sort n_fsdp --fmt fsdp_gb_per_device=%.1f
echo
echo "Below 95 GB a v5p chip: N_FSDP >= $n95 (the state alone: $state / 95 ="
echo "$(calc '%.2f' "$state / 95")); every token of activations adds $(calc '%.4f' "$apt / 2 / 1e9") GB a device that sharding cannot remove."
echo
bmin=$(v batch_min_tokens); pdev=$(v per_device_batch_min); ymax=$(v y_max)
x=$(v x); y=$(v y); mx=$(v m_x); my=$(v m_y); w=$(v w_ici); c=$(v flops)
tm=$(v t_math_ms); tf=$(v t_fsdp_ms); tt=$(v t_tp_ms)
cat <<TEXT
### (c) When the mesh is compute bound

Forward only, X = $x-way FSDP by Y = $y-way tensor parallelism, M_X =
$mx, M_Y = $my, W_ici = $w B/s, C = $c FLOP/s. For one block with B tokens
in all (D = d_model, F = d_ff, N = X Y):
T_math = 4 B D F / (N C), T_FSDP = 4 D F / (Y W_ici M_X) (gathering the bf16
weights), T_TP = 4 B D / (X W_ici M_Y). Compute bound needs T_math >= T_FSDP,
i.e. B / X >= C / (W_ici M_X) = $(calc '%.1f' "$c / ($w * $mx)"), and T_math >= T_TP, i.e. Y <= F W_ici M_Y / C =
$(calc '%.1f' "$ymax") (Y = $y holds).

The model is compute bound from $(calc '%.0f' "$pdev") tokens a device
($(calc '%.1f' "$pdev")), an overall batch of $(calc '%.0f' "$bmin") tokens
(at that batch a block takes $(calc '%.3f' "$tm") ms of math, $(calc '%.3f' "$tf") ms of weight gathering and $(calc '%.3f' "$tt") ms of
tensor-parallel traffic).

### (d) Smaller batches at full throughput

To train at a smaller overall batch without becoming communication
bound: overlap the FSDP weight gathers with the previous layer's compute
(prefetching), so the bound is the larger of the two times rather than
their sum; gather the weights in a lower precision (fp8 halves T_FSDP,
and with it the smallest batch); move degrees from FSDP to forms whose
traffic does not grow with the weights, such as pipeline parallelism (one
activation per stage boundary) or more tensor or sequence parallelism
while Y stays under its bound; and spread the FSDP dimension over more
mesh axes (a larger M_X), which divides the smallest batch per FSDP shard
by the same factor.

TEXT
