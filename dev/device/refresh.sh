#!/bin/sh
# There, first in each GPU call: make the copy a git checkout of the
# bundle's commit (the working tree as sent stays as it is), print whether
# it differs from that commit, and build it once per machine (the build
# outputs stay while the machine is warm).
#   . .devdeps/env.sh && sh .devgit/refresh.sh && ...
set -e
[ -d .git ] || git init -q
printf '/.devdeps/\n/.devgit/\n/.devres/\n/.devbuilt\n' > .git/info/exclude
git fetch -q .devgit/head.bundle HEAD
git reset -q FETCH_HEAD
echo "device HEAD $(git rev-parse --short HEAD), dirty: $(git status --porcelain --untracked-files=no | wc -l) files"
git status --porcelain --untracked-files=no | head
# .devbuilt: the commit the build outputs are of; a warm machine given
# another commit (an A/B's branch, say) builds again rather than run the
# last one's binaries
if [ ! -x runner ] || [ "$(cat .devbuilt 2> /dev/null)" != "$(git rev-parse HEAD)" ]; then
  rm -f .devbuilt
  { { [ -f Makefile ] || { autoreconf -fi && ./configure; }; } && make -j"$(nproc)"; } \
    > /tmp/build.log 2>&1 || { tail -40 /tmp/build.log; exit 1; }
  git rev-parse HEAD > .devbuilt
fi
echo "built; dirty after the build: $(git status --porcelain --untracked-files=no | wc -l) files"
