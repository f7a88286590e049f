/* commands.c: the table of `lathe` subcommands, in the order `lathe --help`
 * lists them. A new subcommand adds its cmd_<name>.c and one line in each
 * of the two lists below. */
#include "cli.h"

#include <stddef.h>

/* extern const cli_command cli_cmd_NAME; one line per command */
extern const cli_command cli_cmd_train;
extern const cli_command cli_cmd_init_model;
extern const cli_command cli_cmd_init_tokenizer;
extern const cli_command cli_cmd_generate;
extern const cli_command cli_cmd_serve;
extern const cli_command cli_cmd_tokenize;
extern const cli_command cli_cmd_export;
extern const cli_command cli_cmd_validate;
extern const cli_command cli_cmd_estimate;
extern const cli_command cli_cmd_plan;
extern const cli_command cli_cmd_render;
extern const cli_command cli_cmd_simulate;
extern const cli_command cli_cmd_trace_gen;
extern const cli_command cli_cmd_trace;
extern const cli_command cli_cmd_server;
extern const cli_command cli_cmd_demo;
extern const cli_command cli_cmd_submit;
extern const cli_command cli_cmd_get;
extern const cli_command cli_cmd_describe;
extern const cli_command cli_cmd_logs;
extern const cli_command cli_cmd_cancel;
extern const cli_command cli_cmd_wait;
extern const cli_command cli_cmd_top;
extern const cli_command cli_cmd_audit;
extern const cli_command cli_cmd_cost;
extern const cli_command cli_cmd_exec_shim;
extern const cli_command cli_cmd_slurm_step;

const cli_command *const cli_commands[] = {
    /* &cli_cmd_NAME, one line per command */
    &cli_cmd_train,
    &cli_cmd_init_model,
    &cli_cmd_init_tokenizer,
    &cli_cmd_generate,
    &cli_cmd_serve,
    &cli_cmd_tokenize,
    &cli_cmd_export,
    &cli_cmd_validate,
    &cli_cmd_estimate,
    &cli_cmd_plan,
    &cli_cmd_render,
    &cli_cmd_simulate,
    &cli_cmd_trace_gen,
    &cli_cmd_trace,
    &cli_cmd_server,
    &cli_cmd_demo,
    &cli_cmd_submit,
    &cli_cmd_get,
    &cli_cmd_describe,
    &cli_cmd_logs,
    &cli_cmd_cancel,
    &cli_cmd_wait,
    &cli_cmd_top,
    &cli_cmd_audit,
    &cli_cmd_cost,
    &cli_cmd_exec_shim,
    &cli_cmd_slurm_step,
    NULL,
};
