/* render_monitor.c: `lathe render grafana` and `lathe render alerts` (the
 * words, as `lathe render server`): a Grafana dashboard and Prometheus
 * alert rules over the metrics `lathe server` exports (lib/monitor). Part
 * of `lathe render` (cmd_render.c hands these words here). */
#include "cli.h"

#include "base/base.h"
#include "monitor/monitor.h"
#include "spec/spec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --flag VALUE: a duration of at least min seconds. */
static bool duration_arg(const char *flag, const char *v, double min, double *out)
{
    if (units_parse_duration(v, out) && *out >= min) return true;
    cli_usage_error("render", "%s %s: expected a duration such as 30m, 2h (at least %gs)", flag, v,
                    min);
    return false;
}

static int grafana(int argc, char **argv)
{
    mon_grafana_opts o;
    mon_grafana_opts_default(&o);
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (i + 1 >= argc && a[0] == '-') return cli_usage_error("render", "%s needs a value", a);
        if (!strcmp(a, "--title")) o.title = argv[++i];
        else if (!strcmp(a, "--uid")) o.uid = argv[++i];
        else if (!strcmp(a, "--datasource")) o.datasource = argv[++i];
        else if (!strcmp(a, "--refresh")) {
            if (!duration_arg(a, argv[++i], 5, &o.refresh)) return LT_EXIT_USAGE;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (strcmp(argv[++i], "json") != 0)
                return cli_usage_error("render", "grafana: -o takes json (Grafana's model)");
        } else {
            return cli_usage_error("render", "grafana: unknown argument '%s'", a);
        }
    }
    json_t *d = mon_grafana_dashboard(&o);
    char *text = json_dumps(d, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
    json_decref(d);
    printf("%s\n", text);
    free(text);
    return LT_EXIT_OK;
}

static int alerts(int argc, char **argv)
{
    mon_alert_opts o;
    mon_alert_opts_default(&o);
    bool json = false;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (i + 1 >= argc && a[0] == '-') return cli_usage_error("render", "%s needs a value", a);
        const char *v = argv[i + 1];
        bool ok = true;
        if (!strcmp(a, "--no-progress")) ok = duration_arg(a, v, 60, &o.no_progress);
        else if (!strcmp(a, "--idle")) ok = duration_arg(a, v, 60, &o.idle_for);
        else if (!strcmp(a, "--queue-wait")) ok = duration_arg(a, v, 60, &o.queue_wait);
        else if (!strcmp(a, "--idle-below")) {
            char *end;
            o.idle_util = strtod(v, &end);
            if (*end || end == v || !(o.idle_util > 0 && o.idle_util <= 100))
                return cli_usage_error("render", "--idle-below %s: expected a percentage above 0, "
                                                 "at most 100", v);
        } else if (!strcmp(a, "--group")) o.group = v;
        else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (strcmp(v, "json") && strcmp(v, "yaml"))
                return cli_usage_error("render", "alerts: -o takes yaml or json");
            json = !strcmp(v, "json");
        } else {
            return cli_usage_error("render", "alerts: unknown argument '%s'", a);
        }
        if (!ok) return LT_EXIT_USAGE;
        i++;
    }
    json_t *rules = mon_alert_rules(&o);
    char *text = json ? json_dumps(rules, JSON_INDENT(2)) : spec_json_to_yaml(rules, false);
    json_decref(rules);
    if (json) printf("%s\n", text);
    else fputs(text, stdout);
    free(text);
    return LT_EXIT_OK;
}

bool render_monitor_word(const char *word)
{
    return word && (!strcmp(word, "grafana") || !strcmp(word, "alerts"));
}

int render_monitor(int argc, char **argv)
{
    return !strcmp(argv[1], "grafana") ? grafana(argc, argv) : alerts(argc, argv);
}
