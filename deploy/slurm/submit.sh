#!/bin/bash
# Submit one fslab campaign: the kernels built once (fslab-kernels.sh), then
# the array of shards (fslab-array.sh), which Slurm starts only after the
# build succeeded (--dependency=afterok). From a checkout (the jobs run in
# this directory; the experiment file's path is relative to it):
#
#   deploy/slurm/submit.sh
#   FSLAB_FILE=my-experiment.toml deploy/slurm/submit.sh
#
# Both jobs get this shell's environment (sbatch's default --export=ALL):
# FSLAB_FILE, FSLAB_DB_FILE, FSLAB_KERNEL_CACHE and FSLAB_KERNELS_TAR, the
# archive that carries the kernels from the build to the shards. It must be
# on a filesystem every node sees (default: this directory, one archive per
# submission; remove it when the campaign is done).
set -euo pipefail
here=$(dirname "$0")

export FSLAB_KERNELS_TAR=${FSLAB_KERNELS_TAR:-$PWD/fslab-kernels-$(date +%Y%m%d-%H%M%S).tar}
build=$(sbatch --parsable "$here/fslab-kernels.sh")
# --parsable prints "id" or "id;cluster".
sbatch --dependency=afterok:"${build%%;*}" "$here/fslab-array.sh"
