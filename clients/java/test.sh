#!/usr/bin/env bash
# The Java client's tests (JUnit 5 with Debian's console launcher) against the live agent at
# $LOCKWARDEN_SOCKET (clients/README.md#tests). Builds the client both ways a user can: with the
# JDK alone (build.sh) and with Maven offline against Debian's repository (pom.xml,
# maven-settings.xml), checks that the two jars hold the same module and classes, and runs the
# tests Maven compiled against the jar Maven built. Everything it writes goes to
# $LWTEST_WORKDIR/java (else a temporary directory). Under the harness (LWTEST_CONTROL=stdio) a
# skipped or aborted test fails the run.
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
version=0.2.0

mkdir -p "$out"
bash "$here/build.sh" "$out/jdk" >"$out/jdk.jar.path" & # meanwhile, Maven
jdk_build=$!
if ! mvn -B -ntp -f "$here/pom.xml" -s "$here/maven-settings.xml" -Dmaven.repo.local="$out/m2" \
  -Dlw.buildDir="$out/maven" package >"$out/maven.log" 2>&1; then
  cat "$out/maven.log" >&2
  exit 1
fi
wait "$jdk_build"
jdk_jar=$(cat "$out/jdk.jar.path")
jar=$out/maven/lockwarden-client-$version.jar

contents() { # the module and the classes of a jar, without its META-INF
  jar --describe-module --file "$1" | sed 1s/' .*'//
  jar --list --file "$1" | grep -v '^META-INF/' | sort
}
if ! diff <(contents "$jdk_jar") <(contents "$jar"); then
  echo "test.sh: build.sh and Maven built different jars" >&2
  exit 1
fi

# The console launcher's stdin and stdout are the harness's pipes (the `@@lw` exchange); tee
# keeps a copy of the summary to check. The ASCII theme whatever the locale: each passed test's
# line ends in "[OK]", which clients_test.cc looks for next to the tests clients/README.md names.
status=0
java -jar "$junit" --disable-banner --disable-ansi-colors --details=tree --details-theme=ascii \
  --fail-if-no-tests --class-path "$out/maven/test-classes:$jar" \
  --select-package io.lockwarden.client \
  | tee "$out/junit.txt" || status=$?
# The example, from source, with the client on the module path (the tests used the classpath).
if [[ -n ${LOCKWARDEN_SOCKET:-} ]]; then
  if ! java --module-path "$jar" --add-modules io.lockwarden.client "$here/example/Example.java" \
    >"$out/example.txt" 2>&1 || ! grep -q '^done; releasing$' "$out/example.txt"; then
    cat "$out/example.txt" >&2
    echo "test.sh: the example failed" >&2
    status=1
  fi
fi
if [[ ${LWTEST_CONTROL:-} == stdio ]]; then
  for what in skipped aborted; do
    if ! grep -Eq "\[ +0 tests $what +\]" "$out/junit.txt"; then
      echo "test.sh: under the harness no test may be $what" >&2
      status=1
    fi
  done
fi
exit "$status"
