#!/usr/bin/env bash
# Before the suite: test/leftovers.sh.
exec bash "$(dirname "$0")/../leftovers.sh" mark
