#!/bin/bash
# render_server.sh: `lathe render server --target k8s`, what installs lathe
# into a cluster. Rendered as YAML and as JSON, with the defaults and with
# --config (its Cluster file), --namespace and --image: every object passes
# validate-k8s ($LATHE_SHARED_DIR/tools, when there: the v1.32 strict schemas), the
# YAML reads back as the JSON List's items, and the objects hold what they
# must: the four CRDs, RBAC with exactly lathe's verbs (the Lease in a
# Role of lathe's namespace), the ConfigMap's ServerConfig, a Deployment of
# two replicas with /readyz and /healthz probes, non-root, spread over
# nodes, and the Service on 8740. (That the ServerConfig loads as `lathe
# server --config` reads it: test_k8s_render_server.c.) Then the errors.
. "$(dirname "$0")/harness/render.sh"

# render NAME ARGS...: `lathe render server --target k8s ARGS...`, 13 objects
render() { local name=$1; shift; RENDER_COUNT=13 render_both "$name" render server --target k8s "$@"; }

# query NAME PYTHON-EXPR: true over objs (the List's items)
query() {
    $PY - "$tmp/$1.json" "$2" <<'EOF'
import json, sys, yaml
objs = json.load(open(sys.argv[1]))["items"]
kinds = [o["kind"] for o in objs]
def one(kind, name=None):
    m = [o for o in objs if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert len(m) == 1, (kind, name, len(m))
    return m[0]
def rules(kind):
    return sorted((tuple(r["apiGroups"]), tuple(r["resources"]), tuple(r["verbs"]))
                  for r in one(kind)["rules"])
def verbs(kind, group, resource):
    return sorted(v for r in one(kind)["rules"] if group in r["apiGroups"]
                  and resource in r["resources"] for v in r["verbs"])
dep = one("Deployment", "lathe")
pod = dep["spec"]["template"]["spec"]
ctr = pod["containers"][0]
cm = one("ConfigMap", "lathe-config")
config = yaml.safe_load(cm["data"]["server.yaml"])
crds = [o for o in objs if o["kind"] == "CustomResourceDefinition"]
def crd(name):
    return one("CustomResourceDefinition", name)
def cols(name):
    return [(c["name"].upper(), c["jsonPath"]) for c in crd(name)["spec"]["versions"][0]["additionalPrinterColumns"] if not c.get("priority")]
namespaced = [o for o in objs if o["kind"] in ("ServiceAccount", "Role", "RoleBinding", "ConfigMap", "Deployment", "Service")]
sys.exit(0 if eval(sys.argv[2]) else 1)
EOF
    check "$1: $2" $?
}

render default
query default "kinds == ['CustomResourceDefinition'] * 4 + ['Namespace', 'ServiceAccount', 'ClusterRole', 'ClusterRoleBinding', 'Role', 'RoleBinding', 'ConfigMap', 'Deployment', 'Service']"
# the CRDs
query default "sorted(o['metadata']['name'] for o in crds) == ['loraexperiments.lathe.dev', 'loraexperiments.training.example.com', 'loratrainingjobs.lathe.dev', 'loratrainingjobs.training.example.com']"
query default "all(o['metadata']['name'] == o['spec']['names']['plural'] + '.' + o['spec']['group'] for o in crds)"
query default "'lorajobs' in crd('loratrainingjobs.training.example.com')['spec']['names']['shortNames']"
query default "all(o['spec']['scope'] == 'Namespaced' and o['spec']['versions'][0]['name'] == 'v1' for o in crds)"
query default "all(o['spec']['versions'][0]['subresources'] == {'status': {}} for o in crds)"
query default "cols('loratrainingjobs.training.example.com') == [('STATE', '.status.phase'), ('GPUS', '.status.placement.gpus'), ('LOSS', '.status.loss'), ('AGE', '.metadata.creationTimestamp')]"
query default "{'phase', 'conditions', 'attempts', 'placement', 'checkpoint', 'loss', 'tokensPerSecond', 'cost', 'gpuHours', 'waitReason', 'observedGeneration'} <= set(crd('loratrainingjobs.lathe.dev')['spec']['versions'][0]['schema']['openAPIV3Schema']['properties']['status']['properties'])"
query default "crd('loratrainingjobs.lathe.dev')['spec']['versions'][0]['schema']['openAPIV3Schema']['properties']['spec']['properties']['lora']['properties']['rank']['maximum'] == 1024"
query default "'matrix' in crd('loraexperiments.lathe.dev')['spec']['versions'][0]['schema']['openAPIV3Schema']['properties']['spec']['properties']"
# RBAC: exactly lathe's verbs, no wildcard
query default "verbs('ClusterRole', 'batch', 'jobs') == sorted(['get', 'list', 'watch', 'create', 'patch', 'delete'])"
query default "verbs('ClusterRole', '', 'pods') == sorted(['get', 'list', 'watch', 'delete'])"
query default "verbs('ClusterRole', '', 'pods/log') == ['get']"
query default "verbs('ClusterRole', '', 'services') == sorted(['get', 'create', 'delete'])"
query default "all(verbs('ClusterRole', '', r) == sorted(['get', 'list', 'watch']) for r in ('nodes', 'namespaces', 'resourcequotas'))"
query default "verbs('ClusterRole', 'scheduling.k8s.io', 'priorityclasses') == sorted(['get', 'list', 'watch'])"
query default "all(verbs('ClusterRole', g, r) == sorted(['get', 'list', 'watch', 'patch', 'update']) for g in ('training.example.com', 'lathe.dev') for r in ('loratrainingjobs', 'loratrainingjobs/status', 'loraexperiments', 'loraexperiments/status'))"
query default "all(verbs('ClusterRole', g, r) == ['update'] for g in ('training.example.com', 'lathe.dev') for r in ('loratrainingjobs/finalizers', 'loraexperiments/finalizers'))"
query default "verbs('ClusterRole', '', 'events') == sorted(['create', 'patch'])"
query default "len(one('ClusterRole')['rules']) == 9 and not any('*' in x for r in rules('ClusterRole') for x in r)"
query default "rules('Role') == [(('coordination.k8s.io',), ('leases',), ('create', 'get', 'update'))] or rules('Role') == [(('coordination.k8s.io',), ('leases',), ('get', 'create', 'update'))]"
query default "verbs('ClusterRole', 'coordination.k8s.io', 'leases') == []"
query default "one('ClusterRoleBinding')['roleRef']['name'] == 'lathe' and one('ClusterRoleBinding')['subjects'] == [{'kind': 'ServiceAccount', 'name': 'lathe', 'namespace': 'lathe-system'}]"
query default "one('RoleBinding')['roleRef'] == {'apiGroup': 'rbac.authorization.k8s.io', 'kind': 'Role', 'name': one('Role')['metadata']['name']}"
# the ServerConfig
query default "config['apiVersion'] == 'lathe/v1' and config['kind'] == 'ServerConfig'"
query default "config['spec']['executor'] == 'k8s' and config['spec']['listen'] == '0.0.0.0:8740'"
query default "config['spec']['dataDir'] == '/var/lib/lathe' and 'kubeconfig' not in config['spec'].get('kubernetes', {})"
query default "{'name': 'data', 'emptyDir': {}} in pod['volumes'] and {'name': 'data', 'mountPath': '/var/lib/lathe'} in ctr['volumeMounts']"
# the Deployment
query default "dep['spec']['replicas'] == 2"
query default "__import__('hashlib').sha256(json.dumps(cm['data'], sort_keys=True, separators=(',', ':')).encode()).hexdigest() == dep['spec']['template']['metadata']['annotations']['lathe.dev/config-sha256']"
query default "dep['spec']['selector']['matchLabels'].items() <= dep['spec']['template']['metadata']['labels'].items()"
query default "ctr['command'] == ['lathe', 'server', '--config', '/etc/lathe/server.yaml']"
query default "ctr['image'] == 'lathe:latest' and pod['serviceAccountName'] == 'lathe'"
query default "ctr['readinessProbe']['httpGet'] == {'path': '/readyz', 'port': 'http'} and ctr['livenessProbe']['httpGet'] == {'path': '/healthz', 'port': 'http'}"
query default "ctr['ports'] == [{'name': 'http', 'containerPort': 8740, 'protocol': 'TCP'}]"
query default "pod['securityContext']['runAsNonRoot'] is True and pod['securityContext']['runAsUser'] > 0"
query default "ctr['securityContext']['allowPrivilegeEscalation'] is False and ctr['securityContext']['capabilities']['drop'] == ['ALL']"
query default "'cpu' in ctr['resources']['requests'] and 'memory' in ctr['resources']['requests']"
query default "pod['affinity']['podAntiAffinity']['preferredDuringSchedulingIgnoredDuringExecution'][0]['podAffinityTerm']['topologyKey'] == 'kubernetes.io/hostname'"
query default "{'name': 'config', 'configMap': {'name': 'lathe-config'}} in pod['volumes'] and {'name': 'config', 'mountPath': '/etc/lathe', 'readOnly': True} in ctr['volumeMounts']"
query default "one('Service')['spec']['ports'][0]['port'] == 8740 and one('Service')['spec']['selector'] == dep['spec']['selector']['matchLabels']"
query default "all(o['metadata']['namespace'] == 'lathe-system' for o in namespaced) and one('Namespace')['metadata']['name'] == 'lathe-system'"

# --config (with a Cluster file beside it), --namespace, --image
cp "$LATHE_SOURCE_DIR/examples/cluster-example.yaml" "$tmp/cluster.yaml"
cat > "$tmp/server.yaml" <<'EOF'
apiVersion: lathe/v1
kind: ServerConfig
spec:
  listen: 127.0.0.1:9999
  dataDir: /home/me/lathe
  cluster:
    file: cluster.yaml
  tokens:
    - name: ci
      sha256: 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
      team: team-a
  scheduler:
    policy: easy
  kubernetes:
    kubeconfig: /home/me/.kube/config
    image: registry.example.com/lathe:1.2
    imagePullPolicy: Always
    runAsUser: 2000
EOF
render configured --config "$tmp/server.yaml" --namespace ops --image me/lathe:2
query configured "all(o['metadata']['namespace'] == 'ops' for o in namespaced) and one('Namespace')['metadata']['name'] == 'ops'"
query configured "one('ClusterRoleBinding')['subjects'][0]['namespace'] == 'ops'"
query configured "ctr['image'] == 'me/lathe:2' and ctr['imagePullPolicy'] == 'Always'"
query configured "{k: v for k, v in config['spec']['kubernetes'].items() if k != 'operator'} == {'image': 'registry.example.com/lathe:1.2', 'imagePullPolicy': 'Always', 'runAsUser': 2000}"
# two replicas are safe only behind the Lease: operator mode, serving the Cluster file's teams' namespaces
query configured "config['spec']['kubernetes']['operator']['enabled'] is True and config['spec']['kubernetes']['operator']['namespaces'] == [t['name'] for t in __import__('yaml').safe_load(open('$tmp/cluster.yaml'))['spec']['teams']]"
query configured "config['spec']['listen'] == '0.0.0.0:8740' and config['spec']['dataDir'] == '/var/lib/lathe'"
query configured "config['spec']['scheduler'] == {'policy': 'easy'} and config['spec']['tokens'][0]['team'] == 'team-a'"
query configured "config['spec']['cluster']['file'] == '/etc/lathe/cluster.yaml' and cm['data']['cluster.yaml'] == open('$tmp/cluster.yaml').read()"
query configured "pod['securityContext']['runAsUser'] == 2000"
query configured "dep['spec']['template']['metadata']['annotations']['lathe.dev/config-sha256'] != json.load(open('$tmp/default.json'))['items'][11]['spec']['template']['metadata']['annotations']['lathe.dev/config-sha256']"
# the settings' image is the server's when --image is not given
render image-from-settings --config "$tmp/server.yaml"
query image-from-settings "ctr['image'] == 'registry.example.com/lathe:1.2'"

# errors
"$LATHE" render server --target k8s --config "$tmp/missing.yaml" > /dev/null 2>&1
rc=$?
[ $rc -eq 4 ]; check "a missing --config exits 4 (got $rc)" $?
sed 's/cluster.yaml/no-such-cluster.yaml/' "$tmp/server.yaml" > "$tmp/nocluster.yaml"
"$LATHE" render server --config "$tmp/nocluster.yaml" > "$tmp/nocluster.out" 2>&1
rc=$?
[ $rc -eq 4 ]; check "a config whose Cluster file is missing exits 4 (got $rc)" $?
printf 'apiVersion: lathe/v1\nkind: ServerConfig\nspec:\n  lisen: x\n' > "$tmp/bad.yaml"
"$LATHE" render server --config "$tmp/bad.yaml" > "$tmp/bad.out" 2> "$tmp/bad.err"
rc=$?
[ $rc -eq 2 ]; check "an invalid --config exits 2 (got $rc)" $?
grep -q "bad.yaml:4:3" "$tmp/bad.err"; check "the config's error names file:line:col" $?
[ ! -s "$tmp/bad.out" ]; check "an invalid config prints no objects" $?
for args in "--namespace Bad_NS" "--namespace -x" "--image=" "--cluster $tmp/cluster.yaml" "--attempt 2" "-o text" "--target slurm"; do
    # shellcheck disable=SC2086
    "$LATHE" render server $args > /dev/null 2>&1
    rc=$?
    [ $rc -eq 1 ]; check "render server $args exits 1 (got $rc)" $?
done
"$LATHE" render "$LATHE_SOURCE_DIR/examples/seed-lora-job.yaml" --namespace x > /dev/null 2>&1
[ $? -eq 1 ]; check "--namespace with a job file exits 1" $?
"$LATHE" help render | grep -q -- "render server --target k8s"; check "lathe help render shows the server form" $?

[ "$fails" -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "lathe render server: every object valid"
