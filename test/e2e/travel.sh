#!/usr/bin/env bash
# Issue 47: a checkpoint travels in chunks. Node A checkpoints a fake-CUDA process holding 1 GiB of
# written memory into its image store and pushes it (`image push --ctr`) to a registry on loopback
# (Debian's docker-registry) in 16 MiB chunks, 4 streams:
#   A  the memory travels as more than one chunk; checkpointed again after it ran on (its memory
#      the same), the second push sends under 5 % of the bytes and the registry's storage grows by
#      under 5 %; the same image pushed into another repository (a replica's own) is mounted from
#      the first (under 1 % sent, the storage does not grow)
#   B  (this script again, a second containerd with its own store) a pull killed half way (one
#      chunk held back in the registry, so that it cannot finish first) resumes with the chunks not
#      yet whole; the pull wrote the files in place (the store holds one copy); a chunk altered in
#      the registry is refused by a pull into a third store, which keeps no entry; then
#      `image pull --ctr` and `ctr c restore`: the restore finds the pulled entry (nothing fetched
#      again) and the process runs on from the checkpoint with every held page intact; checkpointed
#      there and pushed into a repository of its own, its chunks are mounted from the one B pulled
#      from (the registry's log shows the mounts, its storage grows by under 5 %).
#   containerd 1.6/1.7 fail a container's second `ctr c checkpoint --task` while the first's image
#   holds the same spec (their content store answers AlreadyExists, which ctr takes for success and
#   writes an index without the CRIU layer): there the first image goes (`ctr images rm --sync`)
#   before the second checkpoint, as the shim's refusal tells users to.
#   With zstd (travel.sh VER zstd): the chunks travel compressed (the held pages are a marker byte
#   and zeros): the registry holds a fraction of the image, its manifest names compressed layers,
#   and all of the above holds.
# Usage: travel.sh [1.7|2.3] [zstd]
set -euo pipefail
source "$(dirname "$0")/lib/shim-env.sh"
source "$(dirname "$0")/lib/fake-cuda.sh"
source "$(dirname "$0")/lib/registry.sh"
SHIM=$NVPROXY_SHIM_DIR/containerd-shim-nvproxy-v1
VER=${1:-2.3}
HOLD_MIB=1024
COMPRESS=none
[[ ${NV_TRAVEL_NODE:-A} == A && ${2:-} == zstd ]] && COMPRESS=zstd
[[ ${NV_TRAVEL_NODE:-A} == B ]] && COMPRESS=${NV_B_COMPRESS:-none}  # B pushes as A did
CFG="checkpoint:
  registry_timeout_s: 120
  registry_streams: 4
  registry_chunk_mib: 16
  registry_compression: $COMPRESS"
rounds() { cat "$FAKE/cuda/$P.checked" 2>/dev/null || echo 0; }
rounds_past() { (($(rounds) > $1)); }
app_pid() { P=$(nv_fake_cuda_pids | head -1); [[ -n $P ]]; }
# A number of bytes from the image command's report: "(S sent, K already in the registry, M mounted
# from other repositories)".
field() { sed -n "s/.*[(,] *\([0-9]*\) $1.*/\1/p" <<<"$2" | head -1; }
# The image's own bytes from that report's "pushed F files in C chunks, B bytes".
image_bytes() { sed -n 's/^pushed [0-9]* files in [0-9]* chunks, \([0-9]*\) bytes.*/\1/p' <<<"$1" | head -1; }

if [[ ${NV_TRAVEL_NODE:-A} == B ]]; then
  REF=$2 DATA=$3 NAME=$4
  nv_fake_cuda "$NV_B_FAKE"
  STORE_B=$(mktemp -d /var/tmp/nvproxy-travel-b.XXXXXX)
  STORE_C=$(mktemp -d /var/tmp/nvproxy-travel-c.XXXXXX)
  nv_defer rm -rf "$STORE_B" "$STORE_C"
  NV_SHIM_EXTRA="$NV_FAKE_CHECKPOINT
  image_store: $STORE_B
  registry_tls_verify: false
  registry_timeout_s: 120"
  export NV_SHIM_EXTRA
  nv_start_with_shim --containerd "$VER"
  printf '%s\n' "$CFG" >"$NV_DIR/pull.yaml"
  pull() { "$SHIM" image pull "$DATA" --store "$1" --tls-verify=false --config "$NV_DIR/pull.yaml" "${@:2}"; }

  nv_log "B: a pull killed half way, one chunk held back in the registry"
  held=$(nv_registry_blob "$NV_B_HELD")
  mv "$held" "$held.away"
  # The shim itself in the background (a function would run in a subshell, which kill would hit).
  "$SHIM" image pull "$DATA" --store "$STORE_B" --tls-verify=false --config "$NV_DIR/pull.yaml" --streams 2 \
    >"$NV_DIR/pull1.out" 2>&1 &
  pid=$!
  journal() { cat "$STORE_B"/registry/*/.incoming-*/.chunks-done 2>/dev/null | wc -l; }
  journal_past() { (($(journal) >= $1)); }
  nv_wait_for -t 60 journal_past 2 ||
    nv_fail "the pull wrote no whole chunk: $(cat "$NV_DIR/pull1.out")"
  kill -9 "$pid"
  wait "$pid" 2>/dev/null || true
  whole=$(journal)
  nv_log "killed with $whole chunks whole"
  [[ -z $(find "$STORE_B" -name .complete) ]] || nv_fail "a killed pull left an entry"
  mv "$held.away" "$held"
  out=$(pull "$STORE_B" 2>&1) || nv_fail "the resumed pull: $out"
  nv_log "$out"
  resumed=$(field "resumed" "$out")
  fetched=$(field "fetched" "$out")
  ((resumed > 0 && fetched < HOLD_MIB << 20)) ||
    nv_fail "the pull did not resume ($resumed bytes resumed, $fetched fetched, $whole chunks were whole): $out"
  entry=$(sed -n 's/^pulled into \([^ ]*\).*/\1/p' <<<"$out")
  [[ -d $entry ]] || nv_fail "no entry named in: $out"
  # In place: the store holds the image once (no layout, no assembly copy, no journal left).
  used=$(du -sm "$STORE_B" | cut -f1)
  ((used < HOLD_MIB * 3 / 2)) || nv_fail "B's store holds $used MiB for a $HOLD_MIB MiB image"
  [[ -z $(find "$STORE_B" -name '.incoming-*' -o -name .chunks-done) ]] || nv_fail "the pull left its work behind"

  nv_log "B: a chunk altered in the registry"
  nv_registry_alter_pages "$DATA"
  set +e
  err=$(pull "$STORE_C" 2>&1)
  rc=$?
  set -e
  nv_registry_unalter
  ((rc != 0)) || nv_fail "an altered chunk was taken"
  # A compressed chunk may fail to decode before its digest is known: either refusal will do.
  grep -Eq "the bytes that arrived are|pages-[0-9]+.img at [0-9]+: zstd: " <<<"$err" || nv_fail "the refusal: $err"
  [[ -z $(find "$STORE_C" -name .complete) ]] || nv_fail "an altered pull left an entry"

  nv_log "B: the restore"
  out=$("$SHIM" image pull --ctr "$REF" --address "$NV_SOCK" --namespace "$NV_NAMESPACE" --store "$STORE_B" \
    --tls-verify=false --config "$NV_DIR/pull.yaml" 2>&1) || nv_fail "image pull --ctr: $out"
  nv_assert_contains "$out" "imported containerd's checkpoint image $NAME" "the pull"
  # The fake driver's state as the image holds it (A's process checkpointed, the device closed).
  P=$NV_B_PID
  nv_fake_as_checkpointed "$P"
  gets_before=$(grep -c 'GET /v2/.*/blobs/' "$NV_REGISTRY_LOG" || true)
  nv_ctr c restore --live --rw c1 "$NAME" </dev/null
  nv_assert_eq RUNNING "$(nv_task_status c1)" "the container restored on B"
  gets_after=$(grep -c 'GET /v2/.*/blobs/' "$NV_REGISTRY_LOG" || true)
  ((gets_after - gets_before <= 1)) || nv_fail "the restore fetched $((gets_after - gets_before)) blobs again"
  nv_assert_eq running "$(cat "$FAKE/cuda/$P.state")" "the restored process's CUDA state"
  r0=$(rounds)
  nv_wait_for -t 60 rounds_past "$r0" || nv_fail "the restored app does not check its memory"
  [[ ! -e $FAKE/cuda/$P.corrupt ]] || nv_fail "the restored memory changed at $(cat "$FAKE/cuda/$P.corrupt")"

  nv_log "B: the restored replica checkpointed and pushed to its own repository (mounted from A's)"
  if [[ $VER == 1.* ]]; then
    timeout 60 "$NV_CTR" -a "$NV_SOCK" -n "$NV_NAMESPACE" images rm --sync "$NAME" >/dev/null ||
      nv_fail "ctr images rm --sync $NAME failed or took over 60 s"
  fi
  nv_ctr c checkpoint --task --rw c1 ckpt/c1:b
  grow0=$(du -sk "$NV_REGISTRY_DIR" | cut -f1)
  out=$("$SHIM" image push --ctr ckpt/c1:b "$NV_REGISTRY/ckpt/c1-b:v1" --address "$NV_SOCK" --namespace "$NV_NAMESPACE" \
    --store "$STORE_B" --tls-verify=false --config "$NV_DIR/pull.yaml" 2>&1) || nv_fail "image push --ctr from B: $out"
  nv_log "$out"
  sent=$(field "sent" "$out") mounted=$(field "mounted" "$out")
  bytes=$(image_bytes "$out")
  ((sent * 20 < bytes && mounted > 0)) || nv_fail "B's push sent $sent and mounted $mounted of $bytes bytes"
  grow=$(($(du -sk "$NV_REGISTRY_DIR" | cut -f1) - grow0))
  ((grow * 1024 * 20 < bytes)) || nv_fail "the registry grew by $grow KiB at B's push"
  grep -q "POST /v2/ckpt/c1-b/blobs/uploads/?mount=sha256.*from=ckpt" "$NV_REGISTRY_LOG" ||
    nv_fail "the registry's log has no mount into ckpt/c1-b"
  echo "PASS node B"
  exit 0
fi

nv_fake_cuda
STORE_A=$(mktemp -d /var/tmp/nvproxy-travel-a.XXXXXX)
nv_defer rm -rf "$STORE_A"
NV_SHIM_EXTRA="$NV_FAKE_CHECKPOINT
  image_store: $STORE_A
  image_store_keep: 5"
export NV_SHIM_EXTRA
nv_start_with_shim --containerd "$VER"
nv_registry_start
printf '%s\n' "$CFG" >"$NV_DIR/push.yaml"
nv_ctr run -d --runtime $NV_RT "${NV_FAKE_MOUNTS[@]}" "$NV_IMAGE" c1 \
  /fake/fake_cuda_app --dir /fakecuda --device /dev/fakegpu0 --map --hold-mib $HOLD_MIB
nv_wait_for -t 60 app_pid || nv_fail "the fake app did not register"
nv_wait_for -t 60 rounds_past 0 || nv_fail "the fake app never checked its memory"

push() {  # NAME REF: image push --ctr; its report in out
  nv_ctr c checkpoint --task --rw c1 "$1"
  out=$("$SHIM" image push --ctr "$1" "$2" --address "$NV_SOCK" --namespace "$NV_NAMESPACE" --store "$STORE_A" \
    --tls-verify=false --config "$NV_DIR/push.yaml" 2>&1) || nv_fail "image push --ctr $1: $out"
  nv_log "$out"
}
push ckpt/c1:1 "$NV_REGISTRY/ckpt/c1:v1"
unique=$(field "sent" "$out")  # the image's distinct chunks (its held pages repeat)
bytes=$(image_bytes "$out")
chunks=$(sed -n 's/^pushed [0-9]* files in \([0-9]*\) chunks.*/\1/p' <<<"$out" | head -1)
DATA=$(sed -n 's/^pushed .*: \([^ ]*@sha256:[0-9a-f]*\)$/\1/p' <<<"$out" | head -1)
((bytes >= HOLD_MIB << 20)) || nv_fail "the pushed memory is $bytes bytes: $out"
((chunks >= 64)) || nv_fail "1 GiB in chunks of 16 MiB at most: $chunks chunks"
grow0=$(du -sk "$NV_REGISTRY_DIR" | cut -f1)
if [[ $COMPRESS == zstd ]]; then
  nv_assert_contains "$out" "uploaded (zstd)" "the compressed push's report"
  ((grow0 < HOLD_MIB * 1024 / 4)) || nv_fail "compressed, the registry holds $grow0 KiB of a $HOLD_MIB MiB image"
  zlayers=$(curl -fsS -H 'Accept: application/vnd.oci.image.manifest.v1+json' "http://$NV_REGISTRY/v2/ckpt/c1/manifests/${DATA#*@}" |
    jq '[.layers[] | select(.mediaType | endswith("+zstd"))] | length')
  ((zlayers > 32)) || nv_fail "the manifest names $zlayers compressed layers"
  nv_log "compressed: $zlayers layers, the registry holds $grow0 KiB"
fi

nv_wait_for -t 60 rounds_past "$(rounds)" || nv_fail "the app did not go on after the checkpoint"
if [[ $VER == 1.* ]]; then
  timeout 60 "$NV_CTR" -a "$NV_SOCK" -n "$NV_NAMESPACE" images rm --sync ckpt/c1:1 >/dev/null ||
    nv_fail "ctr images rm --sync ckpt/c1:1 failed or took over 60 s"
fi
push ckpt/c1:2 "$NV_REGISTRY/ckpt/c1:v2"
sent=$(field "sent" "$out")
bytes2=$(image_bytes "$out")
((sent * 20 < bytes2)) || nv_fail "the second push sent $sent of $bytes2 bytes (5 % is the goal)"
grow=$(($(du -sk "$NV_REGISTRY_DIR" | cut -f1) - grow0))
((grow * 1024 * 20 < bytes2)) || nv_fail "the registry grew by $grow KiB at the second push"
nv_log "second push: $sent of $bytes2 bytes sent, the registry grew by $grow KiB"

# The same image into another repository of the registry (a replica's own): mounted, not sent.
grow0=$(du -sk "$NV_REGISTRY_DIR" | cut -f1)
out=$("$SHIM" image push --ctr ckpt/c1:2 "$NV_REGISTRY/ckpt/c1-copy:v1" --address "$NV_SOCK" --namespace "$NV_NAMESPACE" \
  --store "$STORE_A" --tls-verify=false --config "$NV_DIR/push.yaml" 2>&1) || nv_fail "image push --ctr to ckpt/c1-copy: $out"
nv_log "$out"
copied=$(field "sent" "$out") mounted=$(field "mounted" "$out")
((copied * 100 < bytes2 && mounted * 10 > unique * 9)) ||
  nv_fail "into ckpt/c1-copy $copied of $bytes2 bytes sent, $mounted mounted (the image's distinct chunks: $unique)"
grow=$(($(du -sk "$NV_REGISTRY_DIR" | cut -f1) - grow0))
((grow * 1024 * 100 < bytes2)) || nv_fail "the registry grew by $grow KiB for the copy"

# The chunk node B's first pull must wait for: a pages chunk of v2's data.
DATA2=$(sed -n 's/^pushed .*: \([^ ]*@sha256:[0-9a-f]*\)$/\1/p' <<<"$out" | head -1)
held=$(curl -fsS -H 'Accept: application/vnd.oci.image.manifest.v1+json' "http://$NV_REGISTRY/v2/ckpt/c1/manifests/${DATA2#*@}" |
  jq -r '[.layers[] | select(.annotations."org.opencontainers.image.title" | test("^pages-"))] | .[length / 2 | floor].digest')
nv_ctr task kill -s KILL c1
nv_wait_for -t 20 bash -c "[[ \$(ctr -a $NV_SOCK -n $NV_NAMESPACE task ls | awk '\$1==\"c1\"{print \$3}') == STOPPED ]]" ||
  nv_fail "c1 did not stop on A"
rm -rf "${STORE_A:?}"/*
env -u NV_DIR -u NV_SOCK -u NV_STATE_DIR -u NV_NAMESPACE NV_TRAVEL_NODE=B NV_B_COMPRESS="$COMPRESS" NV_B_FAKE="$FAKE" NV_B_HELD="$held" NV_B_PID="$P" \
  NV_REGISTRY="$NV_REGISTRY" NV_REGISTRY_DIR="$NV_REGISTRY_DIR" NV_REGISTRY_LOG="$NV_REGISTRY_LOG" \
  bash "$0" "$VER" "$NV_REGISTRY/ckpt/c1:v2" "$DATA2" ckpt/c1:2 || nv_fail "node B failed"
echo "PASS travel (containerd $NV_CONTAINERD_VERSION)"
