#!/usr/bin/env bash
#
# fetch-llmc.sh -- put the source of llm.c (karpathy/llm.c) and the headers of
# cudnn-frontend v1.18.0 (NVIDIA/cudnn-frontend) into a folder that travels to the GPU
# machine (it has no network), where bench/run-gpt.sh builds llm.c with cuDNN's fused
# attention (USE_CUDNN=1) for its llmc rows.
#
#   bench/peers/fetch-llmc.sh [DIR]
#
# Run on a machine with git and network access (or with the two repositories at hand).
# DIR (default .peers; keep it out of git: `echo /.peers/ >> .git/info/exclude`) receives:
#   llm.c/                     git archive of LLMC_COMMIT: Makefile, train_gpt2.cu, llmc/,
#                              LICENSE (what train_gpt2cu needs, about 0.35 MB)
#   cudnn-frontend/include/    git archive of the tag CUDNN_FRONTEND_TAG: the header-only
#                              C++ frontend (about 2.5 MB), with its LICENSE.txt
#   SOURCES                    the repositories, commits and tag the files came from
# v1.18.0 is the last tag that links with plain -lcudnn (later ones also need NVRTC).
#
# Variables: LLMC_REPO, CUDNN_FRONTEND_REPO (a git directory, a clone, or a URL; default
# the GitHub URLs), LLMC_COMMIT (default f1e2ace651495b74ae22d45d1723443fd00ecd3a, the
# master of 2025-05-10), CUDNN_FRONTEND_TAG (default v1.18.0).

set -euo pipefail

if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
    sed -n '3,21p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
fi
dir=${1:-.peers}
llmc_repo=${LLMC_REPO:-https://github.com/karpathy/llm.c}
fe_repo=${CUDNN_FRONTEND_REPO:-https://github.com/NVIDIA/cudnn-frontend}
llmc_commit=${LLMC_COMMIT:-f1e2ace651495b74ae22d45d1723443fd00ecd3a}
fe_tag=${CUDNN_FRONTEND_TAG:-v1.18.0}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# git_dir REPO NAME: a git directory holding REPO's objects (REPO itself when local)
git_dir() {
    local repo=$1 name=$2
    if [ -d "$repo" ] && git --git-dir="$repo" rev-parse --git-dir >/dev/null 2>&1; then
        echo "$repo"
    elif [ -d "$repo/.git" ]; then
        echo "$repo/.git"
    else
        git clone -q --bare --filter=blob:none "$repo" "$tmp/$name.git" >&2 || {
            echo "fetch-llmc.sh: cannot clone $repo" >&2
            return 1
        }
        echo "$tmp/$name.git"
    fi
}

llmc_git=$(git_dir "$llmc_repo" llmc) || exit 1
fe_git=$(git_dir "$fe_repo" cudnn-frontend) || exit 1
if ! git --git-dir="$llmc_git" cat-file -e "$llmc_commit^{commit}" 2>/dev/null; then
    echo "fetch-llmc.sh: commit $llmc_commit not in $llmc_repo" >&2
    exit 1
fi
if ! git --git-dir="$fe_git" cat-file -e "$fe_tag^{commit}" 2>/dev/null; then
    echo "fetch-llmc.sh: tag $fe_tag not in $fe_repo" >&2
    exit 1
fi

rm -rf "$dir/llm.c" "$dir/cudnn-frontend"
mkdir -p "$dir/llm.c" "$dir/cudnn-frontend"
git --git-dir="$llmc_git" archive "$llmc_commit" Makefile train_gpt2.cu llmc LICENSE |
    tar -x -C "$dir/llm.c"
git --git-dir="$fe_git" archive "$fe_tag" include LICENSE.txt | tar -x -C "$dir/cudnn-frontend"
{
    echo "llm.c: $llmc_repo $llmc_commit"
    echo "cudnn-frontend: $fe_repo $fe_tag ($(git --git-dir="$fe_git" rev-parse "$fe_tag^{commit}"))"
} >"$dir/SOURCES"
cat "$dir/SOURCES"
echo "fetch-llmc.sh: $(du -sh "$dir" | cut -f1) in $dir"
