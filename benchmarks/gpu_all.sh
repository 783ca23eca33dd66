#!/usr/bin/env bash
# Every check that needs a GPU, in one go, for a machine that has one for a short while.  The parts
# (ONLY="..." picks some, and runs them in the order given):
#   tests      tests/test_gpu.py (every CUDA kernel and a model on each set of ops against the reference);
#   graph      the step as one CUDA graph (train/graph_step.py) and with every product by cuBLAS through
#              ctypes, against minibert's own step and PyTorch: tiny, mini, small at 128 and small at 512,
#              both precisions, a process per form;
#   flash      mixed precision's attention fused (accel/cuda/flash.py): the step of small and base at 128
#              and 512 with and without it against PyTorch, and attention alone, forward and backward in
#              float16, unfused, fused and SDPA (bench_attention.py --training);
#   steps      the step table: bench_step.py --device cuda, tiny, mini, small and base at sequence length
#              128, small and base at 512, float32 and mixed precision, minibert against PyTorch eager
#              and SDPA;
#   before     the same table by an earlier minibert (BASELINE, below), on the same machine;
#   ladder     the attention ladder (accel/cuda/ladder.py) against PyTorch's SDPA: bench_attention.py;
#   notebooks  notebooks 07 and 10b executed on the GPU (into $OUT, the committed copies untouched): 07's
#              batch sweep, 10b's float32 against mixed step; by nbconvert, or where Jupyter is not
#              installed by benchmarks/run_notebook.py;
#   loop       pretrain's step against the bare step (bench_loop.py): mini 128 x 128 in both precisions,
#              base 64 x 128 mixed, the batches made by a data process (the default on a GPU); mini
#              128 x 128 float32 with them made by a thread; tiny 32 x 128 with --cuda-graph, both
#              precisions (the bare step beside it is the ordinary one);
#   profile    where a step goes (bench_step.py --profile): small at 512, tiny and mini at 128, both
#              precisions;
#   sweep      where a step stops being launch-bound (bench_sweep.py): tiny, mini, small x batch 8, 32,
#              128 x seq-len 128, 512, both precisions, one process each;
#   products   attention's four products at every preset's shapes, float16 by CuPy and by gemm.py's direct
#              cuBLAS call, float32 by CuPy (bench_attention.py --products);
#   ab         the lab sizes' step (tiny, mini, small at 128, both precisions, one process per form) by
#              the BASELINE copy's bench_step.py and by this one's, in turn, twice.
# BASELINE=DIR: a copy of an earlier minibert (`mkdir .baseline && git archive REV | tar -x -C .baseline`,
# about 10 MB; .baseline is ignored by git, so a machine that takes the working tree needs it named to
# carry); without it parts before and ab are skipped.
# Results go to $OUT (default runs/gpu): gpu.txt, the test log, one JSON and one table per bench setting,
# the executed notebooks, and parts.txt (each part: its time, or why it did not run).
# Usage: bash benchmarks/gpu_all.sh [--quick]
#   --quick: one round and 5 timed steps per form (about half the time); REPS and ROUNDS override.
#   INPROC=1: the step tables with bench_step.py --in-process (every form in one process per setting,
#   without a start-up of CuPy, torch and transformers per form and size).
#   BUDGET=SECONDS: the whole run ends within that time: a part starts only while its usual time (on an
#   H100 or H200, ESTIMATE below) is left, and every command is stopped at the budget, or where its part
#   has taken twice its usual time (a hang).  For a GPU held for a few minutes: the parts in ONLY in the
#   order they matter.
#   PACK=FILE.tar.gz: at the end, everything in $OUT in one archive (to copy off in one piece).
#   PYTHON: the interpreter (default python3, else python); minibert is imported from this tree.
set -u
[ -n "${PACK:-}" ] && case $PACK in /*) ;; *) PACK=$PWD/$PACK;; esac     # relative to the caller's folder
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"       # this tree's minibert, installed or not
export PYTHONUNBUFFERED=1
OUT=${OUT:-runs/gpu}
PY=${PYTHON:-$(command -v python3 || command -v python)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)       # absolute: parts before and ab run from another folder
reps=10; rounds=2
if [ "${1:-}" = "--quick" ]; then reps=5; rounds=1; fi
reps=${REPS:-$reps}; rounds=${ROUNDS:-$rounds}    # or set by hand: REPS=10 ROUNDS=1
ALL="tests graph flash steps before ladder notebooks loop profile sweep products ab"
ONLY=${ONLY:-$ALL}
BUDGET=${BUDGET:-0}
RESERVE=20                    # seconds kept at the end of a budget for parts.txt and the archive

# ESTIMATE PART: about how long the part takes on an H100 or H200, in seconds (its last measured time
# in parts.txt, rounded up; the first guesses for parts not yet timed that way)
ESTIMATE() {
  case $1 in
    tests) echo 120;; graph) echo 240;; flash) echo 150;; steps|before) echo 200;; ladder) echo 30;;
    notebooks) echo 120;; loop) echo 120;; profile) echo 90;; sweep) echo 300;; products) echo 40;; ab) echo 240;;
  esac
}
for p in $ONLY; do
  [ -n "$(ESTIMATE "$p")" ] || { echo "gpu_all.sh: no part '$p' (the parts: $ALL)" >&2; exit 2; }
done

left() { echo $((BUDGET - SECONDS - RESERVE)); }
FAILS=$OUT/.failed        # the commands of the part under way that failed (subshells write here too)
part_end=0
# py ARGS...: the interpreter, stopped at the end of the budget or at twice the part's usual time (with a
# budget); a failure noted in $FAILS
py() {
  local rc
  if [ "$BUDGET" -gt 0 ]; then
    local t; t=$(left)
    [ $((part_end - SECONDS)) -lt "$t" ] && t=$((part_end - SECONDS))     # a part that hangs: at twice its time
    if [ "$t" -gt 0 ]; then timeout --kill-after=5 "$t" "$PY" "$@"; rc=$?; else rc=124; fi
  else
    "$PY" "$@"; rc=$?
  fi
  [ "$rc" = 0 ] || echo "exit status $rc: python $*" >> "$FAILS"
  return "$rc"
}

warmed=""
# a GPU out of idle runs its first second or so at low clocks: warm it before the first timing
warm_gpu() {
  [ -n "$warmed" ] && return
  warmed=1
  py -c "import cupy as cp; a = cp.ones((4096, 4096), cp.float32)
for _ in range(1000): a @ a            # about 3 s
cp.cuda.Device().synchronize()"
}
# bench NAME ARGS...: one bench_step.py table on the GPU into $OUT/NAME.md and .json; its ratios shown
bench() {
  local name=$1; shift
  py benchmarks/bench_step.py --device cuda --reps "$reps" --wait-idle 0 "$@" --json "$OUT/$name.json" \
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
baseline() {       # the BASELINE folder, absolute; false (with a line) without one
  if [ -z "${BASELINE:-}" ] || [ ! -f "$BASELINE/benchmarks/bench_step.py" ]; then
    echo "   no earlier minibert to time (BASELINE=DIR, a copy with benchmarks/bench_step.py)"; return 1
  fi
  (cd "$BASELINE" && pwd)
}

part_tests() {
  echo "== tests/test_gpu.py"
  local limit=""     # with pytest-timeout, a test that hangs (a kernel that never ends) costs 2 minutes, not the run
  "$PY" -c "import pytest_timeout" 2>/dev/null && limit="--timeout=120"
  py -m pytest -q -p no:cacheprovider $limit tests/test_gpu.py > "$OUT/test_gpu.log" 2>&1
  tail -3 "$OUT/test_gpu.log"
}
part_graph() {      # minibert's step, its products through ctypes, as one CUDA graph; a process per form
  warm_gpu
  tables graph "tiny mini small" "small" --forms minibert minibert-direct minibert-graph torch-gathered torch-sdpa --rounds 1
}
part_flash() {      # mixed precision's attention fused, beside the unfused and PyTorch's; a process per form
  warm_gpu
  for seq in 128 512; do
    echo "== bench_step mixed seq-len $seq (flash)"
    bench "flash_mixed_$seq" --presets small base --seq-len "$seq" --mixed-precision \
        --forms minibert minibert-flash torch-gathered torch-sdpa --rounds 1
  done
  echo "== attention alone, float16 forward and backward: unfused, fused, SDPA"
  py benchmarks/bench_attention.py --training --reps "$((reps * 2))" --json "$OUT/attention_training.json" \
      > "$OUT/attention_training.md" 2>&1
  cat "$OUT/attention_training.md"
}
part_steps() {
  warm_gpu
  tables step "tiny mini small base" "small base" --forms minibert torch-gathered torch-sdpa --rounds "$rounds" \
      ${INPROC:+--in-process}
}
part_before() {     # the same table by the earlier minibert, from its own folder, importing its own minibert
  local base; base=$(baseline) || { echo "$base"; return 3; }
  warm_gpu
  (cd "$base" && export PYTHONPATH="$base" && tables before "tiny mini small base" "small base" --forms minibert torch-gathered torch-sdpa \
      --rounds "$rounds" ${INPROC:+--in-process})
}
part_ladder() {
  echo "== the attention ladder (v1 naive, v2a and v2 fused softmax by block and by warp, v3 online softmax, v4 tiled) against SDPA"
  py benchmarks/bench_attention.py --reps "$((reps * 2))" --json "$OUT/attention.json" > "$OUT/attention.md" 2>&1
  cat "$OUT/attention.md"
}
part_notebooks() {
  local nb
  for nb in 07_gpu_with_cupy 10b_mixed_precision_on_a_gpu; do
    echo "== notebook $nb"
    if "$PY" -c "import nbconvert" 2>/dev/null; then
      py -m nbconvert --to notebook --execute "notebooks/$nb.ipynb" --output-dir "$OUT" \
          --output "${nb}_on_this_gpu" > "$OUT/$nb.log" 2>&1
    else              # no Jupyter here: the cells run in order in one namespace
      py benchmarks/run_notebook.py "notebooks/$nb.ipynb" --out "$OUT/${nb}_on_this_gpu.ipynb" > "$OUT/$nb.log" 2>&1
    fi && echo "ran" || tail -5 "$OUT/$nb.log"
  done
}
part_loop() {
  local setting
  for setting in "mini 128 float32 process" "mini 128 mixed process" "base 64 mixed process" \
                 "mini 128 float32 thread" "tiny 32 float32 process graph" "tiny 32 mixed process graph"; do
    set -- $setting
    flag=""; [ "$3" = mixed ] && flag="--mixed-precision"
    [ "${5:-}" = graph ] && flag="$flag --cuda-graph"           # pretrain's steps as one CUDA graph each
    name="loop_$1_$3_$4${5:+_$5}"
    echo "== pretrain against the bare step: $1, batch $2 x 128, $3, batches by a $4 ${5:-}"
    py benchmarks/bench_loop.py --device cuda --config "$1" --batch-size "$2" --seq-len 128 $flag \
        --data-worker "$4" > "$OUT/$name.md" 2>&1
    tail -12 "$OUT/$name.md"
  done
}
part_profile() {
  local setting flag
  for setting in "small 512" "tiny 128" "mini 128"; do
    set -- $setting
    for flag in "" "--mixed-precision"; do
      name="profile_$1_$2${flag:+_mixed}"
      echo "== profile $1 seq-len $2 ${flag:-float32}"
      py benchmarks/bench_step.py --device cuda --profile "$1" --seq-len "$2" $flag > "$OUT/$name.md" 2>&1
      head -12 "$OUT/$name.md"
    done
  done
}
part_sweep() {
  local flag
  for flag in "" "--mixed-precision"; do
    name="sweep${flag:+_mixed}"
    echo "== sweep ${flag:-float32}"
    py benchmarks/bench_sweep.py --device cuda $flag --json "$OUT/$name.json" > "$OUT/$name.md" 2>&1
    cat "$OUT/$name.md"
  done
}
part_products() {
  echo "== attention's products: CuPy float16, cuBLAS float16 (gemm.py), CuPy float32"
  py benchmarks/bench_attention.py --products --reps "$((reps * 2))" --json "$OUT/products.json" > "$OUT/products.md" 2>&1
  cat "$OUT/products.md"
}
part_ab() {
  local base flag round tree trees which name; base=$(baseline) || { echo "$base"; return 3; }
  warm_gpu
  for flag in "" "--mixed-precision"; do
    for round in 1 2; do          # the two trees in turn, the other order the second time
      trees="$base $PWD"; [ "$round" = 2 ] && trees="$PWD $base"
      for tree in $trees; do
        which=after; [ "$tree" = "$base" ] && which=before
        name="ab_${which}${flag:+_mixed}_$round"
        echo "== $which (${tree}), ${flag:-float32}, round $round"
        (cd "$tree" && export PYTHONPATH="$tree" && py benchmarks/bench_step.py --device cuda --presets tiny mini small --seq-len 128 $flag \
            --forms minibert torch-gathered --rounds 1 --reps "$reps" --wait-idle 0 \
            --json "$OUT/$name.json") > "$OUT/$name.md" 2>&1
        sed -n '/## ratios/,$p' "$OUT/$name.md"
      done
    done
  done
}

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$OUT/gpu.txt" 2>&1
echo "== $(cat "$OUT/gpu.txt")"
[ "$BUDGET" -gt 0 ] && echo "== a budget of $BUDGET s"
: > "$OUT/parts.txt"
for p in $ONLY; do
  need=$(ESTIMATE "$p")
  if [ "$BUDGET" -gt 0 ] && [ "$(left)" -lt "$need" ]; then
    echo "$p: not run, $(left) s left of the budget, it takes about $need s" | tee -a "$OUT/parts.txt"
    continue
  fi
  start=$SECONDS
  part_end=$((SECONDS + 2 * need))
  : > "$FAILS"
  "part_$p"; rc=$?
  took=$((SECONDS - start))
  if [ "$BUDGET" -gt 0 ] && [ "$(left)" -le 0 ]; then
    status="stopped at the end of the budget"
  elif [ "$BUDGET" -gt 0 ] && [ "$SECONDS" -ge "$part_end" ]; then
    status="stopped at twice its usual time"
  elif [ "$rc" = 3 ]; then
    status="not run"
  elif [ -s "$FAILS" ]; then
    status="failed: $(head -1 "$FAILS")$( [ "$(wc -l < "$FAILS")" -gt 1 ] && echo " (and $(($(wc -l < "$FAILS") - 1)) more)")"
  else
    status="ran"
  fi
  echo "$p: $status, $took s" | tee -a "$OUT/parts.txt"
done
rm -f "$FAILS"
echo "== parts"; cat "$OUT/parts.txt"
if [ -n "${PACK:-}" ]; then
  tar -czf "$PACK" -C "$(dirname "$OUT")" "$(basename "$OUT")" && echo "== all of $OUT in $PACK"
fi
