/* cmd_exec_shim.c: `lathe exec-shim FD`, the supervisor of one trainer
 * started by the local executor (lib/exec/exec_shim.c; docs/executors.md).
 * Not for people: the executor starts it detached, passes its config on
 * descriptor FD and reads its answer there. */
#include "cli.h"

#include "exec/exec.h"

static const char exec_shim_help[] =
    "usage: lathe exec-shim FD\n"
    "\n"
    "Internal: the supervisor of one attempt of a job, started by `lathe server`'s\n"
    "local executor, detached from the server so that the trainer outlives it.\n"
    "It reads its config from descriptor FD, takes the job's lock, runs the trainer\n"
    "in its own process group (never through a shell), copies its output into the\n"
    "attempt's rotated output.log and writes exit.json when the trainer has ended.\n"
    "See docs/executors.md.\n";

static int run_exec_shim(int argc, char **argv)
{
    return exec_shim_main(argc, argv);
}

const cli_command cli_cmd_exec_shim = {
    "exec-shim",
    "supervise one trainer for the local executor (internal)",
    exec_shim_help,
    run_exec_shim,
};
