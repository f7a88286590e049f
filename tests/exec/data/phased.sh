#!/bin/sh
# A fake trainer for the log tests: prints step lines in two phases of $1
# lines each (about 100 bytes a line), waiting for a file named "go" in its
# working folder between them.
n=$1
total=$((2 * n))
i=1
pad=xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx
while [ "$i" -le "$total" ]; do
    printf '[lathe-train] step=%d/%d loss=1.5 pad=%s\n' "$i" "$total" "$pad"
    if [ "$i" -eq "$n" ]; then
        while [ ! -e go ]; do sleep 0.01; done
    fi
    i=$((i + 1))
done
