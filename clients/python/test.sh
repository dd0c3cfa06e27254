#!/usr/bin/env bash
# The Python package's checks and tests (clients/README.md#tests). Installs it as a user does
# (pip, offline, into a fresh venv), type-checks it (mypy --strict, Debian package mypy), and runs
# tests/ (test_sync.py, test_aio.py against the live agent at $LOCKWARDEN_SOCKET;
# test_aio_blocks.py, test_protocol.py, and test_scripted.py against a stand-in agent the tests
# script) against the installed package, from a directory where the source tree is not
# importable. Writes only under $LWTEST_WORKDIR: the source tree is compared before and after.
set -euo pipefail
src=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=${LWTEST_WORKDIR:-$(mktemp -d)}/python
export PYTHONDONTWRITEBYTECODE=1 PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
rm -rf "$work"
mkdir -p "$work/dist" "$work/from-sdist"
tree() { (cd "$src" && find . -print | LC_ALL=C sort); }
tree >"$work/tree.before"
fail() { echo "test.sh: $*" >&2; exit 1; }

command -v mypy >/dev/null || fail "mypy not found: install the Debian package mypy"
python3 -m venv "$work/venv"
py=$work/venv/bin/python
"$py" --version

# The wheel pip builds from the tree (in-tree backend, isolated build, no index), and the one it
# builds from the backend's sdist: the same bytes, with py.typed and a RECORD that matches.
"$py" -m pip wheel --quiet --no-deps -w "$work/dist" "$src"
(cd "$work" && "$py" -c 'import sys; sys.path.insert(0, sys.argv[1] + "/_build")
import lockwarden_build; print(lockwarden_build.build_sdist(sys.argv[2]))' "$src" "$work/dist")
"$py" -m pip wheel --quiet --no-deps -w "$work/from-sdist" "$work"/dist/lockwarden-*.tar.gz
cmp "$work"/dist/lockwarden-*.whl "$work"/from-sdist/lockwarden-*.whl
"$py" - "$work"/dist/lockwarden-*.whl <<'EOF'
import base64, hashlib, sys, zipfile
wheel = zipfile.ZipFile(sys.argv[1])
names = set(wheel.namelist())
assert "lockwarden/py.typed" in names, "no py.typed in the wheel"
record = "lockwarden-0.2.0.dist-info/RECORD"
listed = set()
for line in wheel.read(record).decode().splitlines():
    path, digest, size = line.rsplit(",", 2)
    listed.add(path)
    if path != record:
        data = wheel.read(path)
        want = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        assert (digest, size) == (want, str(len(data))), "RECORD is wrong for " + path
assert listed == names, "RECORD lists %s, the wheel has %s" % (sorted(listed), sorted(names))
print("wheel ok:", ", ".join(sorted(names)))
EOF
# The backend's TOML subset reads pyproject.toml as tomllib (Python 3.11+) does.
(cd "$work" && "$py" -c 'import sys; sys.path.insert(0, sys.argv[1] + "/_build")
import lockwarden_build
if sys.version_info >= (3, 11):
    import tomllib
    text = open(sys.argv[1] + "/pyproject.toml").read()
    assert lockwarden_build.parse_toml(text) == tomllib.loads(text), "parse_toml != tomllib"' "$src")

"$py" -m pip install --quiet "$src"
(cd "$work" && "$py" -c 'import lockwarden, sys
assert lockwarden.__file__.startswith(sys.prefix), lockwarden.__file__
assert lockwarden.__version__ == "0.2.0", lockwarden.__version__')

# Types: the package (oldest supported Python, and 3.11 for its 3.11+ branches), then the
# examples as a user's code against the package as pip installs it (py.typed), in a venv of the
# Python mypy runs on (mypy reads the site-packages of an interpreter by running it).
mypy=(mypy --strict --cache-dir "$work/mypy-cache")
(cd "$work" && "${mypy[@]}" --python-version 3.9 "$src/src/lockwarden" "$src/_build")
(cd "$work" && "${mypy[@]}" --python-version 3.11 "$src/src/lockwarden")
mypy_python=$(sed -n '1s/^#! *//p' "$(command -v mypy)")
$mypy_python -m venv --without-pip "$work/typing"
"$py" -m pip install --quiet --no-deps --target "$("$work/typing/bin/python" -c \
  'import sysconfig; print(sysconfig.get_path("purelib"))')" "$work"/dist/lockwarden-*.whl
(cd "$work" && "${mypy[@]}" --python-executable "$work/typing/bin/python" \
  "$src/example.py" "$src/example_aio.py")

cp -r "$src/tests" "$work/tests"
# unittest's report (stderr) goes to a file, printed once the run ends: live, a test's "... ok"
# would come after its @@lw exchanges (stdout) and split its line, and the harness checks the
# tests clients/README.md names in whole lines.
status=0
(cd "$work/tests" && exec "$py" -m unittest -v 2>"$work/unittest.txt") || status=$?
cat "$work/unittest.txt" >&2
((status == 0))

# -e: the installed package is the source tree.
"$py" -m pip install --quiet -e "$src"
(cd "$work" && "$py" -c 'import lockwarden, sys
assert lockwarden.__file__ == sys.argv[1] + "/src/lockwarden/__init__.py", lockwarden.__file__' "$src")

tree >"$work/tree.after"
diff "$work/tree.before" "$work/tree.after" || fail "the source tree changed (above)"
