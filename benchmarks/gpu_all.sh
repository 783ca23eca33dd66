#!/usr/bin/env bash
# Every check that needs a GPU, in one go, for a machine that has one for a short while:
#   1. tests/test_gpu.py (every CUDA kernel and a model on each set of ops against the reference);
#   2. the step table: bench_step.py --device cuda, tiny, mini, small and base at sequence length
#      128, small and base at 512, float32 and mixed precision, minibert against PyTorch eager and SDPA;
#   3. the attention ladder (accel/cuda/ladder.py) against PyTorch's SDPA: bench_attention.py;
#   4. notebooks 07 and 10 executed on the GPU (into $OUT, the committed copies untouched): 07's batch
#      sweep (tiny, mini, small x batch 8, 32, 128 x 128 tokens), 10's float32 against mixed step;
#   5. pretrain's step against the bare step (bench_loop.py): mini 128 x 128 in both precisions,
#      base 64 x 128 mixed, the batches made by a data process (the default on a GPU); and mini
#      128 x 128 float32 with them made by a thread, as before the data process; tiny 32 x 128 with
#      --cuda-graph, both precisions (the bare step beside it is the ordinary one);
#   6. where a step goes (bench_step.py --profile): small at 512, tiny and mini at 128, both precisions;
#   7. where a step stops being launch-bound (bench_sweep.py): tiny, mini, small x batch 8, 32, 128
#      x seq-len 128, 512, both precisions, one process each;
#   8. attention's four products at every preset's shapes, float16 by CuPy and by gemm.py's direct
#      cuBLAS call, float32 by CuPy (bench_attention.py --products).
#  10. the step as one CUDA graph (train/graph_step.py) and with every product by cuBLAS through
#      ctypes, against minibert's own step and PyTorch: tiny, mini, small at 128 and small at 512,
#      both precisions, a process per form (part graph).
#  11. mixed precision's attention fused (accel/cuda/flash.py): the step of small and base at 128 and
#      512 with and without it against PyTorch, and attention alone, forward and backward in float16,
#      unfused, fused and SDPA (bench_attention.py --training) (part flash).
#   9. before and after on the same machine: with BASELINE=DIR, a copy of an earlier minibert
#      (`mkdir .baseline && git archive REV | tar -x -C .baseline`, about 10 MB; .baseline is
#      ignored by git, so a machine that takes the working tree needs it named to carry), the lab
#      sizes' step (tiny, mini, small at 128, both precisions, one process per form) by that copy's
#      bench_step.py and by this one's, in turn.
# Results go to $OUT (default runs/gpu): test log, one JSON and one table per bench setting,
# the executed notebooks.  Usage: bash benchmarks/gpu_all.sh [--quick]
#   --quick: one round and 5 timed steps per form (about half the time); REPS and ROUNDS override.
#   INPROC=1: the step table with bench_step.py --in-process (every form in one process per setting,
#   without a start-up of CuPy, torch and transformers per form and size).
#   ONLY="steps loop" (any of: tests graph flash steps ladder notebooks loop profile sweep products ab) runs those parts alone, so that
#   the whole can be split over several shorter calls.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-runs/gpu}
PY=${PYTHON:-python}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)       # absolute: part ab runs from another folder
reps=10; rounds=2
if [ "${1:-}" = "--quick" ]; then reps=5; rounds=1; fi
reps=${REPS:-$reps}; rounds=${ROUNDS:-$rounds}    # or set by hand: REPS=10 ROUNDS=1
ONLY=${ONLY:-tests graph flash steps ladder notebooks loop profile sweep products ab}
part() { case " $ONLY " in *" $1 "*) return 0;; *) return 1;; esac; }

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$OUT/gpu.txt" 2>&1
echo "== $(cat "$OUT/gpu.txt")"

if part tests; then
echo "== tests/test_gpu.py"
$PY -m pytest -q -p no:cacheprovider tests/test_gpu.py > "$OUT/test_gpu.log" 2>&1
tail -3 "$OUT/test_gpu.log"
fi

# a GPU out of idle runs its first second or so at low clocks: warm it before the first timing
{ part steps || part graph || part flash; } && $PY -c "import cupy as cp; a = cp.ones((4096, 4096), cp.float32)
for _ in range(1000): a @ a            # about 3 s
cp.cuda.Device().synchronize()"
# bench NAME ARGS...: one bench_step.py table on the GPU into $OUT/NAME.md and .json; its ratios shown
bench() {
  local name=$1; shift
  $PY benchmarks/bench_step.py --device cuda --reps "$reps" --wait-idle 0 "$@" --json "$OUT/$name.json" \
      > "$OUT/$name.md" 2>&1
  sed -n '/## ratios/,$p' "$OUT/$name.md"; grep -m3 "Error\|Traceback" "$OUT/$name.md"
}
# tables PREFIX "LAB PRESETS" "512 PRESETS" ARGS...: bench_step.py at 128 and 512, both precisions
tables() {
  local prefix=$1 at128=$2 at512=$3; shift 3
  for precision in float32 mixed; do
    flag=""; [ "$precision" = mixed ] && flag="--mixed-precision"
    for seq in 128 512; do
      presets=$at128; [ "$seq" = 512 ] && presets=$at512
      echo "== bench_step $precision seq-len $seq ($prefix)"
      bench "${prefix}_${precision}_${seq}" --presets $presets --seq-len "$seq" $flag "$@"
    done
  done
}
# minibert's step, its products through ctypes, as one CUDA graph; a process per form
part graph && tables graph "tiny mini small" "small" \
    --forms minibert minibert-direct minibert-graph torch-gathered torch-sdpa --rounds 1
# mixed precision's attention fused (accel/cuda/flash.py), beside the unfused and PyTorch's; a process per form
if part flash; then
  for seq in 128 512; do
    echo "== bench_step mixed seq-len $seq (flash)"
    bench "flash_mixed_$seq" --presets small base --seq-len "$seq" --mixed-precision \
        --forms minibert minibert-flash torch-gathered torch-sdpa --rounds 1
  done
  echo "== attention alone, float16 forward and backward: unfused, fused, SDPA"
  $PY benchmarks/bench_attention.py --training --reps "$((reps * 2))" --json "$OUT/attention_training.json" \
      > "$OUT/attention_training.md" 2>&1
  cat "$OUT/attention_training.md"
fi
part steps && tables step "tiny mini small base" "small base" \
    --forms minibert torch-gathered torch-sdpa --rounds "$rounds" ${INPROC:+--in-process}

if part ladder; then
echo "== the attention ladder (v1 naive, v2a and v2 fused softmax by block and by warp, v3 online softmax, v4 tiled) against SDPA"
$PY benchmarks/bench_attention.py --reps "$((reps * 2))" --json "$OUT/attention.json" > "$OUT/attention.md" 2>&1
cat "$OUT/attention.md"
fi

part notebooks && for nb in 07_gpu_with_cupy 10b_mixed_precision_on_a_gpu; do
  echo "== notebook $nb"
  $PY -m nbconvert --to notebook --execute "notebooks/$nb.ipynb" --output-dir "$OUT" \
      --output "${nb}_on_this_gpu" > "$OUT/$nb.log" 2>&1 && echo "ran" || tail -5 "$OUT/$nb.log"
done

part loop && for setting in "mini 128 float32 process" "mini 128 mixed process" "base 64 mixed process" \
                            "mini 128 float32 thread" "tiny 32 float32 process graph" "tiny 32 mixed process graph"; do
  set -- $setting
  flag=""; [ "$3" = mixed ] && flag="--mixed-precision"
  [ "${5:-}" = graph ] && flag="$flag --cuda-graph"           # pretrain's steps as one CUDA graph each
  name="loop_$1_$3_$4${5:+_$5}"
  echo "== pretrain against the bare step: $1, batch $2 x 128, $3, batches by a $4 ${5:-}"
  $PY benchmarks/bench_loop.py --device cuda --config "$1" --batch-size "$2" --seq-len 128 $flag \
      --data-worker "$4" > "$OUT/$name.md" 2>&1
  tail -12 "$OUT/$name.md"
done

part profile && for setting in "small 512" "tiny 128" "mini 128"; do
  set -- $setting
  for flag in "" "--mixed-precision"; do
    name="profile_$1_$2${flag:+_mixed}"
    echo "== profile $1 seq-len $2 ${flag:-float32}"
    $PY benchmarks/bench_step.py --device cuda --profile "$1" --seq-len "$2" $flag > "$OUT/$name.md" 2>&1
    head -12 "$OUT/$name.md"
  done
done

part sweep && for flag in "" "--mixed-precision"; do
  name="sweep${flag:+_mixed}"
  echo "== sweep ${flag:-float32}"
  $PY benchmarks/bench_sweep.py --device cuda $flag --json "$OUT/$name.json" > "$OUT/$name.md" 2>&1
  cat "$OUT/$name.md"
done

if part products; then
echo "== attention's products: CuPy float16, cuBLAS float16 (gemm.py), CuPy float32"
$PY benchmarks/bench_attention.py --products --reps "$((reps * 2))" --json "$OUT/products.json" > "$OUT/products.md" 2>&1
cat "$OUT/products.md"
fi

if part ab && [ -n "${BASELINE:-}" ]; then
for flag in "" "--mixed-precision"; do
  for round in 1 2; do          # the two trees in turn, the other order the second time
    trees="$BASELINE ."; [ "$round" = 2 ] && trees=". $BASELINE"
    for tree in $trees; do
      which=after; [ "$tree" = "$BASELINE" ] && which=before
      name="ab_${which}${flag:+_mixed}_$round"
      echo "== $which (${tree}), ${flag:-float32}, round $round"
      (cd "$tree" && $PY benchmarks/bench_step.py --device cuda --presets tiny mini small --seq-len 128 $flag \
          --forms minibert torch-gathered --rounds 1 --reps "$reps" --wait-idle 0 \
          --json "$OUT/$name.json") > "$OUT/$name.md" 2>&1
      sed -n '/## ratios/,$p' "$OUT/$name.md"
    done
  done
done
fi
