/* estimate_seed.c: the seed article's memory estimator, exactly as the
 * issue quotes it, kept as the baseline bench/estimator compares against.
 * All figures in GiB, P in billions of parameters:
 *   model = P x 2 x 1.2
 *   loraParams = P x 2 x r x numTargetModules / hidden
 *   lora = loraParams x 2;  optimizer = loraParams x 12
 *   activations = batch x seq x hidden x layers x 2 (bytes, here in GiB)
 *   total = (model + lora + optimizer + activations) x 1.2
 *   GPUs: <= 40 -> 1, <= 80 -> 2, <= 160 -> 4, else ceil(total / 80)
 *   type: <= 24 L4-24GB, <= 40 A100-40GB, <= 80 A100-80GB, else H100-80GB
 * The seed has no full fine-tuning branch; lathe counts every parameter as
 * trainable there (loraParams = P). */
#include "plan/plan.h"

#include <math.h>
#include <string.h>

void est_seed_formula(double params, int rank, int n_targets, bool full, int batch, int seq,
                      int64_t hidden, int64_t layers, est_seed *out)
{
    memset(out, 0, sizeof *out);
    double P = params / 1e9;
    out->model_gib = P * 2 * 1.2;
    out->lora_params_b = full ? P : P * 2 * rank * n_targets / (double)hidden;
    out->lora_gib = out->lora_params_b * 2;
    out->optimizer_gib = out->lora_params_b * 12;
    out->activations_gib = (double)batch * seq * (double)hidden * (double)layers * 2 / GIB;
    out->total_gib = (out->model_gib + out->lora_gib + out->optimizer_gib + out->activations_gib) * 1.2;
    double t = out->total_gib;
    out->gpus = t <= 40 ? 1 : t <= 80 ? 2 : t <= 160 ? 4 : (int)ceil(t / 80);
    out->gpu_type = t <= 24 ? "L4-24GB" : t <= 40 ? "A100-40GB" : t <= 80 ? "A100-80GB" : "H100-80GB";
}
