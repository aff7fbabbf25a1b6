#!/usr/bin/env bash
# Issue 26: one copy of a checkpoint on disk. With checkpoint.image_store, runc + CRIU write the
# image into the shim's store and the directory containerd hands over gets a reference:
#   - `ctr c checkpoint --task --rw`: containerd's content store grows by less than 1 MiB while the
#     store's entry holds the process's memory (a shell holding 8 MB); the restore reads the entry
#     and the loop goes on;
#   - retention: after three checkpoints the container's two newest entries are left;
#   - `image pack` makes a self-contained copy of a referred image; once an entry is gone its
#     restore is refused with the reason, and nothing runs;
#   - containerd 2.x: `ctr task checkpoint --image-path DIR` leaves only the reference in DIR;
#   - zero pages (issue 36): 64 MiB of present zero pages are left out of the image by CRIU
#     (--skip-zero-pages, the patched CRIU of scripts/build-criu.sh) or by runsc, or punched out of
#     the entry's page files (an unpatched CRIU), and the restored process reads every page as it was;
#   - runsc (a version writing pages.img): the first restore, its pages file dropped from the page
#     cache, reads it with O_DIRECT.
# Usage: image_store.sh [1.6|1.7|2.3]   (NV_RUNTIME=runc|runsc)
set -euo pipefail
source "$(dirname "$0")/lib/shim-env.sh"
STORE=$(mktemp -d /tmp/nvproxy-store.XXXXXX)
nv_defer rm -rf "$STORE"
NV_SHIM_EXTRA="checkpoint:
  image_store: $STORE
  image_store_keep: 2
  runsc_direct_restore: true"
export NV_SHIM_EXTRA
nv_start_with_shim --containerd "${1:-1.6}"
SHIM=$NVPROXY_SHIM_DIR/containerd-shim-nvproxy-v1

content_bytes() { du -sb "$NV_DIR/root/io.containerd.content.v1.content" | awk '{print $1}'; }
entries() { find "$STORE" -mindepth 3 -maxdepth 3 -type d | sort; }
# The image's memory: CRIU's pages-*.img (runc), runsc's checkpoint.img and (current runsc) pages.img.
pages_bytes() { find "$1" \( -name 'pages-*.img' -o -name 'checkpoint.img' -o -name 'pages.img' \) -printf '%s\n' | awk '{s+=$1} END {print s+0}'; }

# A shell that holds 8 MB of random hex (memory no image format compresses away: runsc's does), and
# counts (its counter replaced by a rename).
nv_ctr run -d --runtime $NV_RT "$NV_IMAGE" st sh -c 'big=$(head -c 4000000 /dev/urandom | od -An -tx1 | tr -d " \n"); i=0
  while :; do i=$((i+1)); echo $i >/tmp/counter.new; mv /tmp/counter.new /tmp/counter; sleep 0.1; done'
nv_wait_for -t 30 nv_counter_above st 19 || nv_fail "the counter does not advance"

nv_log "ctr c checkpoint: the image goes to the store, containerd keeps a reference"
c0=$(content_bytes)
before=$(nv_counter st)
nv_ctr c checkpoint --task --rw st stref1
grown=$(($(content_bytes) - c0))
mapfile -t es < <(entries)
nv_assert_eq 1 "${#es[@]}" "store entries after one checkpoint"
[[ ${es[0]} == "$STORE/$NV_NAMESPACE/st/"* ]] || nv_fail "the entry is not the container's: ${es[0]}"
pages=$(pages_bytes "${es[0]}")
((pages > 4000000)) || nv_fail "the store's entry holds $pages bytes of pages, not the shell's 8 MB"
((grown < 1048576)) || nv_fail "containerd's content store grew by $grown bytes: the image was copied"
nv_log "store entry: $pages bytes of pages; containerd's content store grew by $grown bytes"
nv_assert_eq 700 "$(stat -c %a "$STORE")" "the store's mode"
nv_assert_eq RUNNING "$(nv_ctr task ls | awk '$1=="st"{print $3}')" "container after a leave-running checkpoint"

nv_log "restore from the reference"
nv_stop_rm st
# A runsc that writes its pages apart (pages.img; not 2024's, whose checkpoint.img holds them):
# out of the page cache (written back, then dropped), runsc reads the pages file with O_DIRECT
# (checkpoint.runsc_direct_restore: true above).
cold_pages=false
[[ ${NV_RUNTIME:-runc} == runsc && -f ${es[0]}/pages.img ]] && cold_pages=true
if $cold_pages; then
  sync "${es[0]}/pages.img"
  dd if="${es[0]}/pages.img" iflag=nocache count=0 status=none
fi
nv_ctr c restore --live --rw st stref1 </dev/null
grep -q "the image is the store's ${es[0]}" "$NV_DIR/containerd.log" || nv_fail "the restore did not read the store's entry"
if $cold_pages; then
  grep -q "pages.img is in the page cache: runsc reads it with O_DIRECT" "$NV_DIR/containerd.log" ||
    nv_fail "runsc did not read the cold pages file with O_DIRECT: $(grep -i 'page cache' "$NV_DIR/containerd.log" | tail -2)"
fi
nv_wait_for -t 10 nv_counter_above st 0 || nv_fail "cannot read the restored counter"
after=$(nv_counter st)
((after >= before)) || nv_fail "the restored loop did not go on from the checkpoint: before=$before after=$after"
nv_wait_for -t 10 nv_counter_above st "$after" || nv_fail "the restored loop does not run"

nv_log "retention: three checkpoints leave the newest two"
nv_ctr c checkpoint --task --rw st stref2
nv_ctr c checkpoint --task --rw st stref3
mapfile -t es2 < <(entries)
nv_assert_eq 2 "${#es2[@]}" "store entries after three checkpoints (image_store_keep: 2)"
[[ ! -d ${es[0]} ]] || nv_fail "the oldest entry ${es[0]} was kept"
grep -q "image store: removed ${es[0]}" "$NV_DIR/containerd.log" || nv_fail "the removal is not logged"

nv_log "the removed image's restore is refused with the reason; nothing runs"
nv_stop_rm st
set +e
err=$(nv_ctr c restore --live --rw st stref1 </dev/null 2>&1)
rc=$?
set -e
((rc != 0)) || nv_fail "a restore of a removed store entry succeeded"
nv_assert_contains "$err" "which is gone" "the refusal says the entry is gone"
if nv_ctr task ls | awk '$1=="st"{print $3}' | grep -qx RUNNING; then nv_fail "something of st runs"; fi
nv_ctr task rm -f st >/dev/null 2>&1 || true
nv_ctr c rm st >/dev/null 2>&1 || true

if [[ $NV_CONTAINERD_VERSION == 2.* ]]; then
  nv_log "containerd 2: ctr task checkpoint --image-path DIR keeps only the reference in DIR; image pack"
  nv_ctr c restore --live --rw st stref3 </dev/null
  nv_wait_for -t 10 nv_counter_above st 0 || nv_fail "cannot read the counter restored from stref3"
  dir=$NV_DIR/imgpath
  nv_ctr task checkpoint --image-path "$dir" st
  [[ -f $dir/nvproxy-image-ref.json ]] || nv_fail "no reference in $dir: $(ls "$dir")"
  [[ -z $(find "$dir" -name 'pages-*.img') ]] || nv_fail "pages in $dir: the image was written there"
  "$SHIM" image pack "$dir" "$NV_DIR/packed" --store "$STORE"
  (($(pages_bytes "$NV_DIR/packed") > 4000000)) || nv_fail "the packed image lacks the pages: $(ls "$NV_DIR/packed")"
  [[ -f $NV_DIR/packed/inventory.img || -f $NV_DIR/packed/checkpoint.img ]] || nv_fail "the packed image is not one: $(ls "$NV_DIR/packed")"
  nv_stop_rm st
fi

nv_log "zero pages: out of the store's entry, and the restored process reads the same bytes"
# The fake app (static) without CUDA: 8 MiB of marked pages and 64 MiB of present zero pages (what
# the driver stages for a pool nothing wrote), checked a few pages per loop (/tmp/1.checked counts
# full rounds, /tmp/1.corrupt names a page that changed).
nv_ctr run -d --runtime $NV_RT --mount "type=bind,src=${NVPROXY_FIXTURES_DIR:?},dst=/fake,options=rbind:ro" "$NV_IMAGE" zp \
  /fake/fake_cuda_app --no-cuda --device /dev/null --dir /tmp --hold-mib 8 --zero-mib 64
rounds() { nv_ctr task exec --exec-id "z$RANDOM" zp cat /tmp/1.checked 2>/dev/null || echo 0; }
rounds_past() { (($(rounds) > $1)); }
intact() { ! nv_ctr task exec --exec-id "z$RANDOM" zp test -e /tmp/1.corrupt; }
nv_wait_for -t 30 rounds_past 0 || nv_fail "the fake app never checked its memory"
nv_ctr c checkpoint --task --rw zp zpref
entry=$(find "$STORE/$NV_NAMESPACE/zp" -mindepth 1 -maxdepth 1 -type d | sort | tail -1)
apparent=$(pages_bytes "$entry")
on_disk=$(find "$entry" \( -name 'pages-*.img' -o -name 'checkpoint.img' \) -printf '%b\n' | awk '{s+=$1*512} END {print s+0}')
nv_log "zero pages: page files of $apparent bytes hold $on_disk bytes on disk"
if [[ ${NV_RUNTIME:-runc} != runsc ]] && criu --help 2>&1 | grep -q -- '^ *--skip-zero-pages'; then
  ((apparent < 40 * 1048576)) || nv_fail "CRIU wrote $apparent bytes of page files: the 64 MiB of zero pages were dumped"
  grep -q "MiB of zero pages out of the image (--skip-zero-pages)" "$NV_DIR/containerd.log" ||
    nv_fail "the shim does not log what CRIU left out"
  ! grep -q "MiB of zero pages punched out of" "$NV_DIR/containerd.log" || nv_fail "punched after CRIU left the zeros out"
elif [[ ${NV_RUNTIME:-runc} != runsc ]]; then
  ((apparent > 64 * 1048576)) || nv_fail "the page files hold $apparent bytes, not the 72 MiB of memory"
  ((on_disk < 24 * 1048576)) || nv_fail "$on_disk bytes of page files on disk: the 64 MiB of zero pages were kept"
  grep -q "MiB of zero pages punched out of" "$NV_DIR/containerd.log" || nv_fail "the punch is not logged"
else
  ((apparent < 40 * 1048576)) || nv_fail "runsc's image holds $apparent bytes: the zero pages were kept"
fi
nv_stop_rm zp
nv_ctr c restore --live --rw zp zpref </dev/null
r0=$(rounds)
nv_wait_for -t 30 rounds_past $((r0 + 2)) || nv_fail "the restored app does not check its memory (rounds $r0 -> $(rounds))"
intact || nv_fail "the restored memory differs: page at $(nv_ctr task exec --exec-id zc zp cat /tmp/1.corrupt)"
nv_stop_rm zp

nv_log "image prune removes entries by age"
"$SHIM" image prune --older-than 0 --store "$STORE"
nv_assert_eq "" "$(entries)" "store entries after image prune --older-than 0"
echo "PASS image_store (containerd $NV_CONTAINERD_VERSION)"
