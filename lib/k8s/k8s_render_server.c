/* k8s_render_server.c: what installs lathe into a cluster
 * (k8s_render_server, k8s.h), as `lathe render server --target k8s` prints
 * it. A pure function of the settings. In order:
 *
 *   CustomResourceDefinitions  k8s_render_crds
 *   Namespace           lathe-system (or the one asked for)
 *   ServiceAccount      lathe
 *   ClusterRole         lathe: exactly the verbs lathe uses, no wildcard:
 *                       batch jobs get list watch create patch delete;
 *                       pods get list watch delete; pods/log get; services
 *                       get create delete; nodes, namespaces,
 *                       resourcequotas, priorityclasses get list watch; the
 *                       CRDs and their /status get list watch patch update;
 *                       events create patch
 *   ClusterRoleBinding  lathe -> the ServiceAccount
 *   Role, RoleBinding   lathe-leader-election: coordination.k8s.io leases
 *                       get create update, in lathe's namespace only
 *   ConfigMap           lathe-config: server.yaml, the ServerConfig
 *                       (executor k8s, in-cluster credentials, listen
 *                       0.0.0.0:8740, dataDir /var/lib/lathe on an emptyDir,
 *                       the settings' other values); cluster.yaml, the
 *                       settings' Cluster file, when there is one
 *   Deployment          lathe: 2 replicas spread over nodes (preferred pod
 *                       anti-affinity), `lathe server --config
 *                       /etc/lathe/server.yaml`, /readyz and /healthz probes,
 *                       non-root, read-only root file system, requests;
 *                       the pods carry the SHA-256 of the ConfigMap's data,
 *                       so applying a changed config rolls them
 *   Service             lathe: port 8740 to the pods
 */
#include "k8s.h"

#include "base/base.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_NS "lathe-system"
#define NAME "lathe"
#define LEASE_ROLE "lathe-leader-election"
#define CONFIG_MAP "lathe-config"
#define CONFIG_DIR "/etc/lathe"
#define CONFIG_KEY "server.yaml"
#define CLUSTER_KEY "cluster.yaml"
#define DATA_DIR "/var/lib/lathe"
#define PORT 8740
#define REPLICAS 2
#define ANNOT_CONFIG "lathe.dev/config-sha256"

static const char *ns_of(const k8s_server_params *p)
{
    return p->namespace_ && *p->namespace_ ? p->namespace_ : DEFAULT_NS;
}

/* app.kubernetes.io labels of every object; the pods' selector is the
 * name and component. */
static json_t *labels(void)
{
    return json_pack("{s:s, s:s, s:s}", "app.kubernetes.io/name", NAME,
                     "app.kubernetes.io/component", "server", K8S_LABEL_MANAGED, NAME);
}

static json_t *selector(void)
{
    return json_pack("{s:s, s:s}", "app.kubernetes.io/name", NAME, "app.kubernetes.io/component",
                     "server");
}

static json_t *object(const char *api, const char *kind, const char *name, const char *ns)
{
    json_t *meta = json_pack("{s:s}", "name", name);
    if (ns) json_object_set_new(meta, "namespace", json_string(ns));
    json_object_set_new(meta, "labels", labels());
    return json_pack("{s:s, s:s, s:o}", "apiVersion", api, "kind", kind, "metadata", meta);
}

/* {apiGroups: [group...], resources: [resource...], verbs: [verb...]}
 * from NULL-terminated lists. */
static json_t *rule(const char *const *groups, const char *const *resources,
                    const char *const *verbs)
{
    json_t *g = json_array(), *r = json_array(), *v = json_array();
    for (; *groups; groups++) json_array_append_new(g, json_string(*groups));
    for (; *resources; resources++) json_array_append_new(r, json_string(*resources));
    for (; *verbs; verbs++) json_array_append_new(v, json_string(*verbs));
    return json_pack("{s:o, s:o, s:o}", "apiGroups", g, "resources", r, "verbs", v);
}

#define L(...) ((const char *const[]){__VA_ARGS__, NULL})

static json_t *cluster_role(void)
{
    json_t *rules = json_array();
    json_array_append_new(rules, rule(L("batch"), L("jobs"),
                                      L("get", "list", "watch", "create", "patch", "delete")));
    json_array_append_new(rules, rule(L(""), L("pods"), L("get", "list", "watch", "delete")));
    json_array_append_new(rules, rule(L(""), L("pods/log"), L("get")));
    json_array_append_new(rules, rule(L(""), L("services"), L("get", "create", "delete")));
    json_array_append_new(rules, rule(L(""), L("nodes", "namespaces", "resourcequotas"),
                                      L("get", "list", "watch")));
    json_array_append_new(rules, rule(L("scheduling.k8s.io"), L("priorityclasses"),
                                      L("get", "list", "watch")));
    json_array_append_new(rules, rule(L("training.example.com", "lathe.dev"),
                                      L("loratrainingjobs", "loratrainingjobs/status",
                                        "loraexperiments", "loraexperiments/status"),
                                      L("get", "list", "watch", "patch", "update")));
    /* an attempt's Job blocks its object's deletion (blockOwnerDeletion):
     * the OwnerReferencesPermissionEnforcement admission plugin asks for
     * update on the owner's finalizers */
    json_array_append_new(rules, rule(L("training.example.com", "lathe.dev"),
                                      L("loratrainingjobs/finalizers", "loraexperiments/finalizers"),
                                      L("update")));
    json_array_append_new(rules, rule(L(""), L("events"), L("create", "patch")));
    json_t *o = object("rbac.authorization.k8s.io/v1", "ClusterRole", NAME, NULL);
    json_object_set_new(o, "rules", rules);
    return o;
}

static json_t *lease_role(const char *ns)
{
    json_t *o = object("rbac.authorization.k8s.io/v1", "Role", LEASE_ROLE, ns);
    json_object_set_new(o, "rules", json_pack("[o]", rule(L("coordination.k8s.io"), L("leases"),
                                                          L("get", "create", "update"))));
    return o;
}

/* A (Cluster)RoleBinding of role to the ServiceAccount. */
static json_t *binding(const char *kind, const char *role_kind, const char *name, const char *ns,
                       const char *sa_ns)
{
    json_t *o = object("rbac.authorization.k8s.io/v1", kind, name, ns);
    json_object_set_new(o, "roleRef", json_pack("{s:s, s:s, s:s}", "apiGroup",
                                                "rbac.authorization.k8s.io", "kind", role_kind,
                                                "name", name));
    json_object_set_new(o, "subjects", json_pack("[{s:s, s:s, s:s}]", "kind", "ServiceAccount",
                                                 "name", NAME, "namespace", sa_ns));
    return o;
}

/* The server's image: the one asked for, else the settings' trainer image
 * (it holds lathe). */
static const char *server_image(const k8s_server_params *p, const spec_k8s *k)
{
    if (p->image && *p->image) return p->image;
    return k->image && *k->image ? k->image : "lathe:latest";
}

/* The namespaces the operator serves when the settings name none: those
 * of the Cluster file's teams, else "default". */
static json_t *served_namespaces(const k8s_server_params *p, const spec_server *s)
{
    json_t *list = json_array();
    if (p->cluster_yaml) {
        spec_file f;
        diag_list d;
        diag_list_init(&d);
        spec_load_string("cluster.yaml", p->cluster_yaml, strlen(p->cluster_yaml), &f, &d);
        const spec_cluster *c = spec_file_cluster(&f);
        for (size_t i = 0; c && i < c->n_teams; i++) {
            char *ns = spec_k8s_namespace(&s->k8s, c->teams[i].name);
            json_array_append_new(list, json_string(ns));
            free(ns);
        }
        spec_file_free(&f);
        diag_list_free(&d);
    }
    if (json_array_size(list) == 0) json_array_append_new(list, json_string("default"));
    return list;
}

/* Two replicas are safe only with the Lease: the rendered config is always
 * in operator mode (the settings' own operator values kept). */
static void operator_mode(const k8s_server_params *p, const spec_server *s, json_t *kube)
{
    json_t *op = json_object_get(kube, "operator");
    if (!op) {
        op = json_object();
        json_object_set_new(kube, "operator", op);
    }
    json_t *ordered = json_pack("{s:b}", "enabled", 1);
    if (!json_array_size(json_object_get(op, "namespaces")))
        json_object_set_new(ordered, "namespaces", served_namespaces(p, s));
    json_object_update_missing(ordered, op);
    json_object_set_new(kube, "operator", ordered);
}

json_t *k8s_server_config(const k8s_server_params *p)
{
    spec_server *dflt = p->settings ? NULL : spec_server_new_default();
    const spec_server *s = p->settings ? p->settings : dflt;
    json_t *doc = spec_server_to_json(s);
    json_t *spec = json_object_get(doc, "spec");
    if (!spec) {
        spec = json_object();
        json_object_set_new(doc, "spec", spec);
    }
    if (!json_object_get(doc, "metadata"))
        json_object_set_new(doc, "metadata", json_pack("{s:s}", "name", NAME));
    /* these three first, then the settings' own */
    json_t *ordered = json_pack("{s:s, s:s, s:s}", "executor", "k8s", "listen", "0.0.0.0:8740",
                                "dataDir", DATA_DIR);
    json_object_update_missing(ordered, spec);
    json_object_set_new(doc, "spec", ordered);
    spec = ordered;
    json_t *kube = json_object_get(spec, "kubernetes");
    if (!kube) {
        kube = json_object();
        json_object_set_new(spec, "kubernetes", kube);
    }
    /* in-cluster credentials: the pod's service account */
    json_object_del(kube, "kubeconfig");
    json_object_del(kube, "context");
    /* the trainers' image follows the server's when the settings leave it
     * at the built-in default */
    if (p->image && *p->image &&
        (!s->k8s.image || strcmp(s->k8s.image, "lathe:latest") == 0))
        json_object_set_new(kube, "image", json_string(p->image));
    operator_mode(p, s, kube);
    /* paths of the machine render ran on mean nothing in the pod */
    json_t *cluster = json_object_get(spec, "cluster");
    if (cluster) json_object_del(cluster, "file");
    if (p->cluster_yaml) {
        if (!cluster) {
            cluster = json_object();
            json_object_set_new(spec, "cluster", cluster);
        }
        json_object_set_new(cluster, "file", json_string(CONFIG_DIR "/" CLUSTER_KEY));
    }
    if (cluster && json_object_size(cluster) == 0) json_object_del(spec, "cluster");
    json_t *trainer = json_object_get(spec, "trainer");
    if (trainer) json_object_del(trainer, "program");
    if (trainer && json_object_size(trainer) == 0) json_object_del(spec, "trainer");
    spec_server_free(dflt);
    return doc;
}

static json_t *config_map(const k8s_server_params *p, const char *ns)
{
    json_t *cfg = k8s_server_config(p);
    char *yaml = spec_json_to_yaml(cfg, false);
    json_decref(cfg);
    json_t *data = json_pack("{s:s}", CONFIG_KEY, yaml);
    free(yaml);
    if (p->cluster_yaml) json_object_set_new(data, CLUSTER_KEY, json_string(p->cluster_yaml));
    json_t *o = object("v1", "ConfigMap", CONFIG_MAP, ns);
    json_object_set_new(o, "data", data);
    return o;
}

static json_t *probe(const char *path, int delay, int period, int failures)
{
    return json_pack("{s:{s:s, s:s}, s:i, s:i, s:i, s:i}", "httpGet", "path", path, "port", "http",
                     "initialDelaySeconds", delay, "periodSeconds", period, "timeoutSeconds", 2,
                     "failureThreshold", failures);
}

static json_t *container(const k8s_server_params *p, const spec_k8s *k)
{
    const char *lathe = k->lathe_path && *k->lathe_path ? k->lathe_path : "lathe";
    json_t *c = json_pack("{s:s, s:s}", "name", "server", "image", server_image(p, k));
    if (k->image_pull_policy && *k->image_pull_policy)
        json_object_set_new(c, "imagePullPolicy", json_string(k->image_pull_policy));
    json_object_set_new(c, "command", json_pack("[s, s, s, s]", lathe, "server", "--config",
                                                CONFIG_DIR "/" CONFIG_KEY));
    json_object_set_new(c, "ports", json_pack("[{s:s, s:i, s:s}]", "name", "http", "containerPort",
                                              PORT, "protocol", "TCP"));
    json_object_set_new(
        c, "env",
        json_pack("[{s:s, s:{s:{s:s}}}, {s:s, s:{s:{s:s}}}]", "name", "POD_NAME", "valueFrom",
                  "fieldRef", "fieldPath", "metadata.name", "name", "POD_NAMESPACE", "valueFrom",
                  "fieldRef", "fieldPath", "metadata.namespace"));
    json_object_set_new(c, "readinessProbe", probe("/readyz", 2, 5, 3));
    json_object_set_new(c, "livenessProbe", probe("/healthz", 10, 10, 6));
    json_object_set_new(c, "resources", json_pack("{s:{s:s, s:s}, s:{s:s}}", "requests", "cpu",
                                                  "250m", "memory", "256Mi", "limits", "memory",
                                                  "1Gi"));
    json_object_set_new(c, "securityContext",
                        json_pack("{s:b, s:b, s:{s:[s]}}", "allowPrivilegeEscalation", 0,
                                  "readOnlyRootFilesystem", 1, "capabilities", "drop", "ALL"));
    json_object_set_new(c, "volumeMounts",
                        json_pack("[{s:s, s:s, s:b}, {s:s, s:s}, {s:s, s:s}]", "name", "config",
                                  "mountPath", CONFIG_DIR, "readOnly", 1, "name", "data",
                                  "mountPath", DATA_DIR, "name", "tmp", "mountPath", "/tmp"));
    return c;
}

static json_t *pod_spec(const k8s_server_params *p, const spec_k8s *k)
{
    json_t *s = json_pack("{s:s, s:b}", "serviceAccountName", NAME, "automountServiceAccountToken",
                          1);
    json_object_set_new(
        s, "securityContext",
        json_pack("{s:b, s:I, s:I, s:I, s:{s:s}}", "runAsNonRoot", 1, "runAsUser",
                  (json_int_t)k->run_as_user, "runAsGroup", (json_int_t)k->run_as_group,
                  "fsGroup", (json_int_t)k->fs_group, "seccompProfile", "type", "RuntimeDefault"));
    /* preferred, not required: a one-node cluster still runs both */
    json_object_set_new(
        s, "affinity",
        json_pack("{s:{s:[{s:i, s:{s:{s:o}, s:s}}]}}", "podAntiAffinity",
                  "preferredDuringSchedulingIgnoredDuringExecution", "weight", 100,
                  "podAffinityTerm", "labelSelector", "matchLabels", selector(), "topologyKey",
                  "kubernetes.io/hostname"));
    json_object_set_new(s, "terminationGracePeriodSeconds", json_integer(30));
    json_object_set_new(s, "containers", json_pack("[o]", container(p, k)));
    json_object_set_new(s, "volumes",
                        json_pack("[{s:s, s:{s:s}}, {s:s, s:{}}, {s:s, s:{}}]", "name", "config",
                                  "configMap", "name", CONFIG_MAP, "name", "data", "emptyDir",
                                  "name", "tmp", "emptyDir"));
    return s;
}

/* SHA-256 (hex) of the ConfigMap's data, keys sorted. */
static void data_hash(const json_t *cm, char out[65])
{
    char *text = json_dumps(json_object_get(cm, "data"), JSON_SORT_KEYS | JSON_COMPACT);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    if (!text || !EVP_Digest(text, strlen(text), md, &n, EVP_sha256(), NULL)) n = 0;
    for (unsigned int i = 0; i < n && i < 32; i++) snprintf(out + 2 * i, 3, "%02x", md[i]);
    out[2 * (n < 32 ? n : 32)] = '\0';
    free(text);
}

static json_t *deployment(const k8s_server_params *p, const spec_k8s *k, const char *ns,
                          const json_t *cm)
{
    char hash[65];
    data_hash(cm, hash);
    json_t *o = object("apps/v1", "Deployment", NAME, ns);
    json_t *tmpl = json_pack("{s:{s:o, s:{s:s}}, s:o}", "metadata", "labels", labels(),
                             "annotations", ANNOT_CONFIG, hash, "spec", pod_spec(p, k));
    json_object_set_new(o, "spec", json_pack("{s:i, s:{s:o}, s:o}", "replicas", REPLICAS,
                                             "selector", "matchLabels", selector(), "template",
                                             tmpl));
    return o;
}

static json_t *service(const char *ns)
{
    json_t *o = object("v1", "Service", NAME, ns);
    json_object_set_new(o, "spec", json_pack("{s:s, s:o, s:[{s:s, s:i, s:s, s:s}]}", "type",
                                             "ClusterIP", "selector", selector(), "ports", "name",
                                             "http", "port", PORT, "targetPort", "http",
                                             "protocol", "TCP"));
    return o;
}

json_t *k8s_render_server(const k8s_server_params *p)
{
    spec_server *dflt = p->settings ? NULL : spec_server_new_default();
    const spec_k8s *k = p->settings ? &p->settings->k8s : &dflt->k8s;
    const char *ns = ns_of(p);
    json_t *out = k8s_render_crds();
    json_array_append_new(out, object("v1", "Namespace", ns, NULL));
    json_array_append_new(out, object("v1", "ServiceAccount", NAME, ns));
    json_array_append_new(out, cluster_role());
    json_array_append_new(out, binding("ClusterRoleBinding", "ClusterRole", NAME, NULL, ns));
    json_array_append_new(out, lease_role(ns));
    json_array_append_new(out, binding("RoleBinding", "Role", LEASE_ROLE, ns, ns));
    json_t *cm = config_map(p, ns);
    json_array_append_new(out, cm);
    json_array_append_new(out, deployment(p, k, ns, cm));
    json_array_append_new(out, service(ns));
    spec_server_free(dflt);
    return out;
}
