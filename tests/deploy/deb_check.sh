#!/usr/bin/env bash
# CI check of the Debian package (cmake/package.cmake): builds it with CPack from a build
# directory, installs it into a scratch root with dpkg (its maintainer scripts run against that
# root: DPKG_ROOT), and checks what an operator gets. Registered in ctest as `deb_package`.
#
#   bash tests/deploy/deb_check.sh [BUILD_DIR]     (default: build)
#
# Proves: the package builds; its dependencies come from dpkg-shlibdeps; the files are where
# Debian looks for them; /etc/lockwarden/config.toml is a conffile; postinst creates the user and
# group (sysusers) and applies the tmpfiles entries; the shipped config passes
# `lockwarden serve --check-config` with the installed binary; `systemd-analyze verify` accepts
# the installed unit inside the root (and refuses it once the binary is gone, so the check can
# fail); the man pages render without warnings; an upgrade keeps the operator's edit of the
# config; a plain `cmake --install` installs nothing; purge leaves no file of the package (nor
# the operator's secrets) behind.
# Not proved: the unit starting under a real systemd (no systemd as PID 1 on CI).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=$(realpath "${1:-$ROOT/build}")
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lw-deb.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "deb: FAIL: $*" >&2; failures=$((failures + 1)); }
ok() { echo "deb: ok: $*"; }

for tool in cpack dpkg dpkg-deb systemd-analyze systemd-sysusers systemd-tmpfiles man help2man; do
  command -v "$tool" >/dev/null || { echo "deb: missing $tool (bash .ci/deps.sh)" >&2; exit 1; }
done

# --- build --------------------------------------------------------------------------------------
grep -q '^LW_HELP2MAN:FILEPATH=/' "$BUILD/CMakeCache.txt" \
  || { echo "deb: $BUILD was configured without help2man: install it, then run cmake again" >&2
       exit 1; }
cmake --build "$BUILD" --target lockwarden lockwarden_man >/dev/null
(cd "$BUILD" && cpack -G DEB -B "$tmp/out" >"$tmp/cpack.log" 2>&1) \
  || { cat "$tmp/cpack.log"; echo "deb: cpack failed" >&2; exit 1; }
debs=("$tmp"/out/lockwarden_*.deb)
[[ -f ${debs[0]} && ${#debs[@]} == 1 ]] || { echo "deb: no single package in $tmp/out" >&2; exit 1; }
deb=${debs[0]}
ok "built $(basename "$deb") ($(stat -c %s "$deb") bytes)"

depends=$(dpkg-deb -f "$deb" Depends)
for lib in libhiredis0.14 libuv1 libprometheus-cpp-core1.0 libcpp-httplib0.11 systemd; do
  [[ $depends == *"$lib"* ]] || fail "Depends lacks $lib: $depends"
done
[[ $(dpkg-deb -I "$deb" conffiles) == /etc/lockwarden/config.toml ]] \
  || fail "conffiles is not exactly /etc/lockwarden/config.toml"
# The package's install rules are its own: a plain `cmake --install` writes nothing.
cmake --install "$BUILD" --prefix "$tmp/plain" >/dev/null
[[ ! -e $tmp/plain ]] || fail "cmake --install installed: $(cd "$tmp/plain" && find . -type f)"

# --- install into a scratch root ----------------------------------------------------------------
# An empty dpkg database; the libraries it depends on are the host's (--force-depends), the
# maintainer scripts run on the host against $root (DPKG_ROOT, --force-script-chrootless).
root=$tmp/root
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates" "$root/etc/lockwarden"
touch "$root/var/lib/dpkg/status"
# A secret the operator put there before installing, readable by all: postinst's tmpfiles run
# must make it root-only, and purge must remove it.
install -m 0644 /dev/null "$root/etc/lockwarden/admin-token"
dpkg_root() {
  dpkg --root="$root" --force-script-chrootless --force-depends --force-not-root \
    --log=/dev/null "$@"
}
dpkg_root --install "$deb" >"$tmp/install.log" 2>&1 \
  || { cat "$tmp/install.log"; fail "dpkg --install into the scratch root"; }
grep -q 'set the masters in /etc/lockwarden/config.toml' "$tmp/install.log" \
  || fail "postinst did not tell the operator what to do next"

for f in usr/bin/lockwarden usr/lib/systemd/system/lockwarden.service \
  usr/lib/sysusers.d/lockwarden.conf usr/lib/tmpfiles.d/lockwarden.conf \
  etc/lockwarden/config.toml usr/share/doc/lockwarden/copyright usr/share/man/man1/lockwarden.1.gz \
  usr/share/man/man1/lockwarden-serve.1.gz usr/share/man/man1/lockwarden-lock.1.gz; do
  [[ -e $root/$f ]] || fail "missing /$f"
done
[[ -x $root/usr/bin/lockwarden ]] || fail "/usr/bin/lockwarden is not executable"
[[ $(readelf -S "$root/usr/bin/lockwarden" 2>/dev/null) != *.debug_info* ]] \
  || fail "/usr/bin/lockwarden is not stripped"

# postinst ran sysusers against the root: the unit's User= and Group= exist there.
grep -q '^lockwarden:x:[0-9]*:[0-9]*:.*:/usr/sbin/nologin$' "$root/etc/passwd" 2>/dev/null \
  || fail "user lockwarden not created in the root's /etc/passwd"
grep -q '^lockers:x:' "$root/etc/group" 2>/dev/null || fail "group lockers not created"
# ... and tmpfiles: the secret left readable by all is root-only now.
[[ $(stat -c %a "$root/etc/lockwarden/admin-token") == 600 ]] \
  || fail "postinst's tmpfiles entry did not make admin-token 0600"

out=$("$root/usr/bin/lockwarden" serve --config "$root/etc/lockwarden/config.toml" \
  --check-config 2>&1) || fail "--check-config refused the shipped config: $out"
[[ $out == "configuration OK"* ]] || fail "--check-config said: $out"

unit=$root/usr/lib/systemd/system/lockwarden.service
grep -q '^ExecStart=/usr/bin/lockwarden serve --config /etc/lockwarden/config.toml$' "$unit" \
  || fail "ExecStart does not run the packaged binary with the packaged config"
! grep -q '^LoadCredential=' "$unit" || fail "an active LoadCredential= fails a fresh install"
# systemd-analyze resolves the unit's binary and dependencies inside the root; the root needs
# systemd's own units (sysinit.target, ...) as a real system has, so they are copied in. Its
# Documentation= man pages are looked up (by man) in the root's man pages.
verify_root=$tmp/verify
cp -a "$root" "$verify_root"
cp -rn /lib/systemd/system/. "$verify_root/usr/lib/systemd/system/"
export MANPATH=$verify_root/usr/share/man
if ! verify=$(systemd-analyze verify --root="$verify_root" lockwarden.service 2>&1) \
  || [[ -n $verify ]]; then
  fail "systemd-analyze verify: $verify"
fi
rm "$verify_root/usr/bin/lockwarden"
if systemd-analyze verify --root="$verify_root" lockwarden.service >/dev/null 2>&1; then
  fail "systemd-analyze verify passed without the binary: it does not check inside the root"
fi

for page in "$root"/usr/share/man/man1/*.1.gz; do
  warnings=$(man --warnings -l "$page" 2>&1 >/dev/null) || true
  [[ -z $warnings ]] || fail "$(basename "$page"): $warnings"
done
man -l "$root/usr/share/man/man1/lockwarden-serve.1.gz" 2>/dev/null | grep -q -- '--check-config' \
  || fail "lockwarden-serve(1) lacks --check-config"

# --- upgrade --------------------------------------------------------------------------------------
# The same package again: postinst runs as an upgrade (no first-install advice), and an edit of
# the conffile survives it.
echo '# edited by the operator' >>"$root/etc/lockwarden/config.toml"
dpkg_root --install "$deb" >"$tmp/upgrade.log" 2>&1 \
  || { cat "$tmp/upgrade.log"; fail "dpkg --install over the installed package"; }
! grep -q 'set the masters' "$tmp/upgrade.log" || fail "an upgrade repeated the first-install advice"
grep -q '^# edited by the operator$' "$root/etc/lockwarden/config.toml" \
  || fail "the upgrade lost the operator's edit of the conffile"

# --- remove -------------------------------------------------------------------------------------
dpkg_root --purge lockwarden >"$tmp/purge.log" 2>&1 \
  || { cat "$tmp/purge.log"; fail "dpkg --purge"; }
# What sysusers made stays, as Debian packages leave their users behind.
left=$(cd "$root" && find . -path ./var -prune -o -type f ! -path './etc/passwd*' \
  ! -path './etc/group*' ! -path './etc/shadow*' ! -path './etc/gshadow*' \
  ! -path ./etc/.pwd.lock -print)
[[ -z $left ]] || fail "purge left: $left"
[[ ! -e $root/etc/lockwarden ]] || fail "purge left /etc/lockwarden (with the operator's secret)"

if ((failures)); then
  echo "deb: $failures check(s) failed" >&2
  exit 1
fi
echo "deb: package ok: installed, verified and purged in a scratch root"
