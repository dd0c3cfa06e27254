#!/usr/bin/env bash
# The Java client's tests (JUnit 5, Debian's console launcher) against the live agent at
# $LOCKWARDEN_SOCKET (clients/README.md#tests). Builds the jar with build.sh, compiles the tests
# against it and runs them; everything it writes goes to $LWTEST_WORKDIR/java (else a temporary
# directory). With LWTEST_CONTROL=stdio (the harness) a skipped or aborted test fails the run.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [[ -n ${LWTEST_WORKDIR:-} ]]; then
  work=$LWTEST_WORKDIR
else
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi
out=$work/java
junit=/usr/share/java/junit-platform-console-standalone.jar

jar=$(bash "$here/build.sh" "$out")
rm -rf "$out/test-classes"
mkdir -p "$out/test-classes"
mapfile -t sources < <(find "$here/src/test/java" -name '*.java' | sort)
javac --release 17 -encoding UTF-8 -Xlint:all -Werror -cp "$jar:$junit" \
  -d "$out/test-classes" "${sources[@]}"

# The console launcher's stdin and stdout are the harness's pipes (the `@@lw` exchange); tee
# keeps a copy of the summary to check.
status=0
java -jar "$junit" --disable-banner --disable-ansi-colors --details=tree --fail-if-no-tests \
  --class-path "$out/test-classes:$jar" --select-package io.lockwarden.client \
  | tee "$out/junit.txt" || status=$?
if [[ ${LWTEST_CONTROL:-} == stdio ]]; then
  for what in skipped aborted; do
    if ! grep -Eq "\[ +0 tests $what +\]" "$out/junit.txt"; then
      echo "test.sh: under the harness no test may be $what" >&2
      status=1
    fi
  done
fi
exit "$status"
