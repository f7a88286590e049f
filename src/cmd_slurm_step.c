/* cmd_slurm_step.c: `lathe slurm-step [--task] FILE`, what the Slurm
 * executor's batch script execs (lib/exec/exec_slurm_step.c;
 * docs/slurm.md). Not for people. */
#include "cli.h"

#include "exec/exec.h"

static const char slurm_step_help[] =
    "usage: lathe slurm-step [--task] FILE\n"
    "\n"
    "Internal: what the batch script of `lathe server`'s Slurm executor execs on the\n"
    "job's first node. FILE (JSON, written by the server) holds the trainer's argv and\n"
    "environment; the step runs the trainer (never through a shell), forwards SIGTERM\n"
    "from Slurm's --signal, and exits as the trainer did. A multi-node job runs\n"
    "`srun ... lathe slurm-step --task FILE`: one trainer per node with NNODES,\n"
    "NODE_RANK, MASTER_ADDR, MASTER_PORT and NPROC_PER_NODE set. See docs/slurm.md.\n";

static int run_slurm_step(int argc, char **argv)
{
    return exec_slurm_step_main(argc, argv);
}

const cli_command cli_cmd_slurm_step = {
    "slurm-step",
    "run one trainer inside a Slurm job for the Slurm executor (internal)",
    slurm_step_help,
    run_slurm_step,
};
