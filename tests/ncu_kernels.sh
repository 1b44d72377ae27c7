#!/bin/sh
# reports/anchors/ncu_kernels.py, the parser of Nsight Compute's kernel
# list that the nsys_profile section checks our kernel profile against,
# on a log shaped as ncu writes it (==PROF== lines, then quoted CSV with
# thousands separators): launches summed a kernel under kprof.cu's short
# name (no "void", no parameter list, template arguments and an anonymous
# namespace kept), ns summed to ms, ncu's version taken from its
# "Version X" line and not from the copyright years above it (or given
# bare), a second run appended under the same header; a file of another
# header and a metric other than gpu__time_duration.sum in ns refused.
# Skips (77) without python3.
. "${top_srcdir:-.}/tests/lib.sh"
command -v python3 > /dev/null 2>&1 || { echo "skip: no python3"; exit 77; }
py="$top_srcdir/reports/anchors/ncu_kernels.py"
hdr='"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"'
k() { # NAME NS [METRIC UNIT]
  printf '"0","42","worker","127.0.0.1","%s","1","7","(256, 1, 1)","(8, 1, 1)","0","9.0","Command line profiler metrics","%s","%s","%s"\n' \
    "$1" "${3:-gpu__time_duration.sum}" "${4:-ns}" "$2"
}
{
  echo '==PROF== Connected to process 42 (/tmp/worker)'
  echo '==PROF== Profiling "adamw_k": 0%....50%....100% - 1 pass'
  echo "$hdr"
  k 'void adamw_k<1, 1>(float *, const float *, float *, float *, long, float, float)' '1,500,000'
  k 'void (anonymous namespace)::softmax_fwd_k<32>(const float *, float *, int)' 2500
  k 'void adamw_k<1, 1>(float *, const float *, float *, float *, long, float, float)' 1000
  k 'sm90_xmma_gemm_f32f32_tn_n_tilesize128x128x8_execute_kernel__5x_cublas' 750
  echo '==PROF== Disconnected from process 42'
} > "$scratch/log"
banner='NVIDIA (R) Nsight Compute Command Line Profiler
Copyright (c) 2018-2025 NVIDIA Corporation
Version 2025.3.1.0 (build 36398880) (public-release)'
run() { NCU_VERSION="$1" NCU_UTC=2026-12-02T00:00:00Z python3 "$py" "$2" "$3" small 512 fp32 1 1 "NVIDIA H200" abc123; }
run "$banner" "$scratch/out.csv" "$scratch/log" > "$scratch/err" 2>&1 &&
  run "2025.3.1.0" "$scratch/out.csv" "$scratch/log" >> "$scratch/err" 2>&1
cat > "$scratch/want" <<'CSV'
source,gpu,size,context,precision,warmup,steps,kernel,launches,ms,ncu,commit,utc
reports/anchors/ncu_kernels.sh,NVIDIA H200,small,512,fp32,1,1,(anonymous namespace)::softmax_fwd_k<32>,1,0.002500,2025.3.1.0,abc123,2026-12-02T00:00:00Z
reports/anchors/ncu_kernels.sh,NVIDIA H200,small,512,fp32,1,1,"adamw_k<1, 1>",2,1.501000,2025.3.1.0,abc123,2026-12-02T00:00:00Z
reports/anchors/ncu_kernels.sh,NVIDIA H200,small,512,fp32,1,1,sm90_xmma_gemm_f32f32_tn_n_tilesize128x128x8_execute_kernel__5x_cublas,1,0.000750,2025.3.1.0,abc123,2026-12-02T00:00:00Z
CSV
sed 1d "$scratch/want" >> "$scratch/want"
check "ncu_kernels.py: short names, launches and ms summed, version, appended" \
  sh -c "cmp -s '$scratch/want' '$scratch/out.csv' || { cat '$scratch/err'; diff '$scratch/want' '$scratch/out.csv'; false; }"
echo "gpu,size" > "$scratch/other.csv"
check "ncu_kernels.py: a file of another header refused" \
  sh -c "NCU_VERSION=1.0 python3 '$py' '$scratch/other.csv' '$scratch/log' small 512 fp32 1 1 G c 2>&1 | grep -q 'another header' && [ \"\$(cat '$scratch/other.csv')\" = gpu,size ]"
{ echo "$hdr"; k 'void adamw_k<1, 1>(float *)' 12 sm__cycles_elapsed.sum cycle; } > "$scratch/badlog"
check "ncu_kernels.py: another metric refused" \
  sh -c "NCU_VERSION=1.0 python3 '$py' '$scratch/bad.csv' '$scratch/badlog' small 512 fp32 1 1 G c 2>&1 | grep -q 'unexpected metric sm__cycles_elapsed.sum (cycle)' && [ ! -s '$scratch/bad.csv' ]"
finish
