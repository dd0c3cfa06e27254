#!/usr/bin/env bash
# Builds the Java client's jar with the JDK alone (javac + jar, Java 17):
#   bash build.sh [OUTDIR]
# OUTDIR defaults to $LWTEST_WORKDIR/java when that is set, else ./build (git-ignored). Prints
# the jar's path. The jar is a named module (io.lockwarden.client) and works on the classpath.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${1:-${LWTEST_WORKDIR:+$LWTEST_WORKDIR/java}}
out=${out:-$here/build}
version=0.2.0
jar=$out/lockwarden-client-$version.jar

rm -rf "$out/classes"
mkdir -p "$out/classes"
mapfile -t sources < <(find "$here/src/main/java" -name '*.java' | sort)
javac --release 17 -encoding UTF-8 -Xlint:all -Xdoclint:all/protected -Werror -Xpkginfo:always \
  -d "$out/classes" "${sources[@]}"
cat > "$out/MANIFEST.MF" <<MF
Implementation-Title: lockwarden client
Implementation-Version: $version
Specification-Title: lockwarden socket protocol
MF
rm -f "$jar"
jar --create --file "$jar" --manifest "$out/MANIFEST.MF" --module-version "$version" \
  -C "$out/classes" .
echo "$jar"
