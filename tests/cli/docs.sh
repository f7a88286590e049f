#!/bin/bash
# docs.sh: docs/cli.md names every command `lathe --help` lists (a heading
# "## lathe NAME" or "### lathe NAME") and every --option each command's
# help shows, so the reference cannot fall behind the tool.
set -u
doc="$LATHE_SOURCE_DIR/docs/cli.md"
fails=0
cmds=$("$LATHE" --help | awk '/^commands:/ {on = 1; next} on && /^  [a-z]/ {print $1} on && /^$/ {on = 0}')
[ -n "$cmds" ] || { echo "FAIL: no commands in lathe --help"; exit 1; }
for cmd in $cmds; do
    [ "$cmd" = help ] && continue
    if ! grep -qE "^##+ lathe $cmd\$" "$doc"; then
        echo "FAIL: docs/cli.md has no section for lathe $cmd"; fails=$((fails + 1))
    fi
    for opt in $("$LATHE" help "$cmd" | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u); do
        if ! grep -q -- "$opt" "$doc"; then
            echo "FAIL: docs/cli.md does not mention lathe $cmd $opt"; fails=$((fails + 1))
        fi
    done
done
[ "$fails" -eq 0 ] || { echo "$fails missing (docs/cli.md's Reference is lathe help's text)"; exit 1; }
echo "docs/cli.md covers every command and option"
