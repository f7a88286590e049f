#!/bin/bash
# imagepull.sh: a trainer image that cannot be pulled (ErrImagePull, then
# ImagePullBackOff) fails the job at once with Kubernetes' message, without
# a retry; a missing Secret behind an env var would be the same
# (CreateContainerConfigError).
. "$(dirname "$0")/harness/lib.sh"

k8s_start
srv_start
write_job badimage team-a "$(printf '  trainer:\n    image: registry.example.com/does-not-exist:1.0\n    command: ["/bin/true"]')"
# the job file above has a trainer: section already; keep the last one
"$PY" - "$T/badimage.yaml" <<'PYEOF'
import sys, yaml
d = yaml.safe_load(open(sys.argv[1]))
d["spec"]["trainer"] = {"image": "registry.example.com/does-not-exist:1.0", "command": ["/bin/true"]}
yaml.safe_dump(d, open(sys.argv[1], "w"))
PYEOF
submit "$T/badimage.yaml"; check "submit" $?
wait_state badimage failed 120; check "failed" $?
"$LATHE" describe job badimage > "$T/describe" 2>&1
grep -Eq "ErrImagePull|ImagePullBackOff" "$T/describe"; check "the reason names the image pull" $?
grep -q "does-not-exist" "$T/describe"; check "and the image" $?
[ "$(job_field badimage attempt)" = "1" ]; check "not retried (attempts $(job_field badimage attempt))" $?
finish
