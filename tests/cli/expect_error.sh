#!/usr/bin/env bash
# expect_error.sh REGEX COMMAND...: passes when COMMAND exits non-zero and prints exactly one line on
# stderr that matches REGEX (and no crash: exit codes from signals, >= 128, fail).
regex=$1
shift
err=$("$@" 2>&1 >/dev/null)
code=$?
if [ "$code" -eq 0 ]; then echo "expected a non-zero exit, got 0"; exit 1; fi
if [ "$code" -ge 128 ]; then echo "crashed with exit code $code: $err"; exit 1; fi
lines=$(printf '%s\n' "$err" | grep -c .)
if [ "$lines" -ne 1 ]; then echo "expected one line on stderr, got $lines:"; printf '%s\n' "$err"; exit 1; fi
if ! printf '%s\n' "$err" | grep -Eq -- "$regex"; then echo "stderr '$err' does not match '$regex'"; exit 1; fi
echo "ok: $err"
