#!/bin/bash
# Build once, boot anywhere: the job before the array (deploy/slurm/submit.sh
# submits both, the array with --dependency=afterok on this one). It builds
# (or finds in this node's kernel cache) every kernel the experiment's
# variants boot and writes them, with their cache keys, configs and build
# records, to FSLAB_KERNELS_TAR on a filesystem the array's nodes see (a few
# MiB per built kernel). Each array task imports that archive before its
# shard, so no task builds a kernel, needs its source or a compiler.
#
# This node needs the kernel build tools (build-essential, flex, bison, bc,
# libelf-dev, libssl-dev) and a sudo rule for fslab. --exclusive: the build
# uses every core.
#SBATCH --job-name=fslab-kernels
#SBATCH --nodes=1
#SBATCH --exclusive
#SBATCH --time=04:00:00
#SBATCH --output=fslab-kernels-%j.log

set -euo pipefail

# The experiment file, as fslab-array.sh reads it.
FILE=${FSLAB_FILE:-examples/case-squashfs-readahead.toml}
# This node's kernel cache: a second campaign rebuilds only what changed.
KERNELS=${FSLAB_KERNEL_CACHE:-/var/tmp/fslab-kernels}

sudo fslab kernel export "$FILE" -o "$FSLAB_KERNELS_TAR" --kernel-cache "$KERNELS"
