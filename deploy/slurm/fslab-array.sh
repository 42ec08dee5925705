#!/bin/bash
# One fslab campaign as a Slurm array job: task i runs shard i+1 of 4, all
# shards write to one PostgreSQL store. Submit with
#
#   sbatch deploy/slurm/fslab-array.sh
#
# from a checkout (the experiment file path below is relative to it).
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
# environment), else the shell1 example.
FILE=${FSLAB_FILE:-examples/shell1-ext4-vs-xfs.toml}

sudo --preserve-env=FSLAB_DB,SLURM_ARRAY_JOB_ID \
  fslab run "$FILE" --shard "$SHARD/$SHARDS" --workdir "/var/tmp/fslab-$SLURM_JOB_ID"
