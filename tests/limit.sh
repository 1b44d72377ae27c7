#!/bin/sh
# make check runs every test through this (LOG_COMPILER): a test that
# hangs fails after TEST_TIMEOUT seconds (default 3600, well above the
# slowest test, cuda_sanitizer.sh; 0: no limit) with a line saying so,
# instead of holding make check for ever. timeout(1) signals its whole
# process group, so a test's mpirun ranks stop too.
limit=${TEST_TIMEOUT:-3600}
[ "$limit" = 0 ] && exec "$@"
timeout -k 10 "$limit" "$@"
rc=$?
case $rc in
  124 | 137) echo "FAIL: ${1##*/} was still running after $limit s (TEST_TIMEOUT); stopped" ;;
esac
exit $rc
