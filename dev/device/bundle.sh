#!/bin/sh
# Here, before a GPU call: write .devgit/head.bundle (every commit of
# the branch checked out here, usually main), so the GPU machine, whose
# copy of the tree has no .git, can rebuild one (refresh.sh) and the runner's rows record the commit and
# git_dirty. Pass carry:
# [".devdeps", ".devgit"]. Once per checkout:
#   ../shared/device/mkdeps.sh && printf '/.devdeps/\n/.devgit/\n' >> .git/info/exclude
set -eu
top=$(git rev-parse --show-toplevel)
cd "$top"
mkdir -p .devgit
rm -f .devgit/head.bundle
git bundle create -q .devgit/head.bundle HEAD
git check-ignore -q .devgit/head.bundle ||
  echo "bundle.sh: .devgit is not ignored: add /.devgit/ to .git/info/exclude" >&2
echo "bundle of $(git rev-parse --abbrev-ref HEAD) at $(git rev-parse --short HEAD); uncommitted files: $(git status --porcelain --untracked-files=no | wc -l)"
