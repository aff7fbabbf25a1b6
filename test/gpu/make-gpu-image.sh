#!/bin/bash
# A skeleton image for the GPU tests, built offline: a merged-/usr layout (bin, sbin, lib, lib64 ->
# usr/...), empty /usr subdirs for the host's /usr/* bind mounts, an empty writable /usr/local (the
# shim's driver files are bound under /usr/local/nvidia there), /etc with passwd/group/hosts/ld.so.conf,
# a static busybox in /usr/bin, and the workloads in /probe. The host's /usr and /opt/torch come in as read-only bind mounts, so the
# image stays tiny and the container runs the GPU machine's own Python and PyTorch.
# Usage: make-gpu-image.sh OUT.tar [REF]
set -euo pipefail
out=${1:?usage: make-gpu-image.sh OUT.tar [REF]}
ref=${2:-docker.io/library/nvproxy-gpu:test}
here=$(cd "$(dirname "$0")" && pwd)
w=$(mktemp -d /var/tmp/nvproxy-gpu-image.XXXXXX)
trap 'rm -rf "$w"' EXIT
r=$w/rootfs
mkdir -p "$r"/usr/{bin,sbin,lib,lib64,libexec,share,include,local} "$r"/{etc/ld.so.conf.d,root,tmp/mg,tmp/nccl,var/tmp,proc,sys,dev,run,opt/torch,out,probe,log,vec}
chmod 1777 "$r/tmp" "$r/var/tmp" "$r/log"
for l in bin sbin lib lib64; do ln -s usr/$l "$r/$l"; done
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n' >"$r/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$r/etc/group"
printf '127.0.0.1 localhost\n::1 localhost\n' >"$r/etc/hosts"
echo 'include /etc/ld.so.conf.d/*.conf' >"$r/etc/ld.so.conf"
echo nvproxy-gpu >"$r/etc/hostname"
cp "$here"/workloads/*.py "$r/probe/"
# a static busybox in /usr/bin for the issue-4 container, which gets only /usr/lib* from the host (the
# workload containers bind the host's /usr/bin over it)
install -m 0755 /bin/busybox "$r/usr/bin/busybox"
for a in sh ls cat head grep sleep echo env readlink; do ln -s busybox "$r/usr/bin/$a"; done
det_tar() { (cd "$1" && LC_ALL=C ls -A | tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner --format=gnu -cf - -T -); }
sha() { sha256sum "$1" | cut -d' ' -f1; }
lay=$w/layout
mkdir -p "$lay/blobs/sha256"
det_tar "$r" >"$w/layer.tar"
diff_id=$(sha "$w/layer.tar")
gzip -n "$w/layer.tar"
lsz=$(stat -c %s "$w/layer.tar.gz"); l=$(sha "$w/layer.tar.gz"); mv "$w/layer.tar.gz" "$lay/blobs/sha256/$l"
jq -cn --arg d "sha256:$diff_id" '{created:"1970-01-01T00:00:00Z",architecture:"amd64",os:"linux",
  config:{Env:["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],Cmd:["sh"],WorkingDir:"/"},
  rootfs:{type:"layers",diff_ids:[$d]}}' | tr -d '\n' >"$w/c.json"
csz=$(stat -c %s "$w/c.json"); c=$(sha "$w/c.json"); mv "$w/c.json" "$lay/blobs/sha256/$c"
jq -cn --arg c "sha256:$c" --argjson cs "$csz" --arg l "sha256:$l" --argjson ls "$lsz" '{schemaVersion:2,
  mediaType:"application/vnd.oci.image.manifest.v1+json",
  config:{mediaType:"application/vnd.oci.image.config.v1+json",digest:$c,size:$cs},
  layers:[{mediaType:"application/vnd.oci.image.layer.v1.tar+gzip",digest:$l,size:$ls}]}' | tr -d '\n' >"$w/m.json"
msz=$(stat -c %s "$w/m.json"); m=$(sha "$w/m.json"); mv "$w/m.json" "$lay/blobs/sha256/$m"
echo '{"imageLayoutVersion":"1.0.0"}' | tr -d '\n' >"$lay/oci-layout"
jq -cn --arg m "sha256:$m" --argjson ms "$msz" --arg ref "$ref" '{schemaVersion:2,
  mediaType:"application/vnd.oci.image.index.v1+json",
  manifests:[{mediaType:"application/vnd.oci.image.manifest.v1+json",digest:$m,size:$ms,
    platform:{architecture:"amd64",os:"linux"},annotations:{"io.containerd.image.name":$ref,"org.opencontainers.image.ref.name":"test"}}]}' >"$lay/index.json"
mkdir -p "$(dirname "$out")"
det_tar "$lay" >"$out"
echo "make-gpu-image: wrote $out ($ref)"
