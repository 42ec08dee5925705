#!/bin/bash
# One fslab campaign as a Slurm array job: task i runs shard i+1 of 4, all
# shards write to one PostgreSQL store. Submit it with the job that builds
# the kernels once before it (from a checkout; the experiment file path
# below is relative to it):
#
#   deploy/slurm/submit.sh
#
# which runs `sbatch deploy/slurm/fslab-kernels.sh` and then this script
# with --dependency=afterok on it. Each task imports the kernels that job
# exported (FSLAB_KERNELS_TAR) into its node's kernel cache, so no task
# builds one. `sbatch deploy/slurm/fslab-array.sh` alone (no
# FSLAB_KERNELS_TAR) runs the shards without the import: right for a file
# whose variants boot no kernel of their own; otherwise every task would
# build the kernels itself.
#
# The PostgreSQL URL is the secret: keep it in a file only you can read
# (chmod 600 ~/.config/fslab/db-url), e.g.
#   postgresql://fslab:PASSWORD@db.example.org/fslab?sslmode=verify-full
# fslab never prints the password (errors show user:***@host).
#
# The campaign id defaults to the file's hash plus SLURM_ARRAY_JOB_ID, the
# same for every task of this array; resubmitting one task
# (`sbatch --array=2 …` with --campaign set to the old id) continues that shard.
#
# fslab needs root (loop devices, mkfs, mount): the nodes need a sudo rule
# for it. --exclusive: nothing else should run on a node that measures.
#SBATCH --job-name=fslab-campaign
#SBATCH --array=0-3
#SBATCH --nodes=1
#SBATCH --exclusive
#SBATCH --time=04:00:00
#SBATCH --output=fslab-%A_%a.log

set -euo pipefail

FSLAB_DB=$(cat "${FSLAB_DB_FILE:-$HOME/.config/fslab/db-url}")
export FSLAB_DB
SHARDS=$SLURM_ARRAY_TASK_COUNT
SHARD=$((SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN + 1))

# The experiment file: FSLAB_FILE (sbatch passes the submitting shell's
# environment), else the squashfs case (four kernels built from source).
FILE=${FSLAB_FILE:-examples/case-squashfs-readahead.toml}
# This node's kernel cache, kept across campaigns (`fslab kernel prune` trims it).
KERNELS=${FSLAB_KERNEL_CACHE:-/var/tmp/fslab-kernels}

if [ -n "${FSLAB_KERNELS_TAR:-}" ]; then
  sudo fslab kernel import "$FSLAB_KERNELS_TAR" --kernel-cache "$KERNELS"
fi
sudo --preserve-env=FSLAB_DB,SLURM_ARRAY_JOB_ID \
  fslab run "$FILE" --shard "$SHARD/$SHARDS" --workdir "/var/tmp/fslab-$SLURM_JOB_ID" --kernel-cache "$KERNELS"
