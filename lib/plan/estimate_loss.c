/* estimate_loss.c: how each stack computes the loss from the final hidden
 * states, as a plan of tensors (est_loss_plan) the replay allocates, and
 * the bytes per token and vocabulary entry alive at its peak
 * (docs/estimator.md, "Logits and loss"). At long sequences and large
 * vocabularies (Llama 3: 128,256; Qwen: 151,936) these are the largest
 * tensors of the step.
 *
 * The rules, from each stack's code:
 *   transformers >= 4.49 (ForCausalLMLoss): the model returns 16-bit
 *     logits; the loss function upcasts them (`logits.float()`), shifts the
 *     labels instead of the logits and takes the cross entropy in fp32
 *   transformers 4.46-4.48: the same function still shifted the logits,
 *     `logits[..., :-1, :].contiguous()` on the fp32 copy, until PR 35646
 *     (merged 2025-01-13, after 4.48.0) removed the copy: the 16-bit
 *     output, its fp32 upcast and the fp32 shifted copy meet the
 *     log-softmax
 *   transformers 4.36-4.45 (Llama family): `logits = logits.float()` in the
 *     model's forward, then `logits[..., :-1, :].contiguous()` (a copy)
 *   Qwen v1's modeling_qwen.py: the loss of the 16-bit logits, shifted with
 *     a copy; under autocast the cross entropy casts them to fp32
 *     (cross_entropy, log_softmax and nll_loss are on autocast's fp32 list)
 *   the Hugging Face Trainer outside DeepSpeed: accelerate wraps the
 *     forward in autocast and converts its outputs to fp32
 *     (convert_outputs_to_fp32): one more fp32 copy of 16-bit logits, until
 *     compute_loss returns; the Trainer drops the outputs before backward
 *   plain loops (`outputs = model(**batch); outputs.loss.backward()`) keep
 *     the outputs, and so the logits, through backward
 *   torchtune: TransformerDecoder returns `self.output(h).float()`; since
 *     July 2024 its configs use CEWithChunkedOutputLoss (8 chunks of 16-bit
 *     logits, each upcast and log-softmaxed in turn, every chunk's fp32
 *     log-softmax saved) and the recipes `del logits` before backward;
 *     before, the recipe shifted the logits with a copy and kept it
 *   LitGPT: `model(input_ids, lm_head_chunk_size=128)` returns the logits in
 *     128-token chunks, kept by the loop through backward, and
 *     chunked_cross_entropy saves each chunk's log-softmax in the logits'
 *     dtype; its full fine-tuning script takes the lm_head whole, so the
 *     logits' gradient is assembled whole
 *   Unsloth: Fast_CrossEntropyLoss (Triton) keeps the 16-bit logits and an
 *     fp32 log-sum-exp per row, and its backward writes the gradient into
 *     the logits' own memory: no other vocabulary-sized buffer
 *   Gemma-2 caps its logits, tanh(logits / 30) x 30 (transformers
 *     Gemma2ForCausalLM, LitGPT do_softcapping): the tanh output, in the
 *     logits' dtype, is saved for backward
 * In every unchunked case three buffers of the cross entropy's dtype meet
 * in its backward: the log-softmax it saved, nll_loss's gradient (a dense
 * zeros_like) and log_softmax's gradient. */
#include "plan/estimate_internal.h"

#include <math.h>
#include <string.h>

/* The dtype the cross entropy is computed in: fp32 when the model is,
 * under autocast, in torchtune, and in transformers' own models; the
 * logits' dtype in LitGPT and in model code that does not upcast (Qwen v1,
 * GaLore's Llama copy) outside autocast. */
static double ce_bytes(const est_ctx *x)
{
    if (x->a == 4 || x->autocast || x->in->stack == EST_STACK_TORCHTUNE) return 4.0;
    if (x->in->stack == EST_STACK_LITGPT || x->in->bf16_loss) return x->a;
    return 4.0;
}

void est_loss_plan_of(const est_ctx *x, est_loss_plan *lp)
{
    const est_input *in = x->in;
    double a = x->a;
    memset(lp, 0, sizeof *lp);
    lp->logits = a;
    lp->ce = ce_bytes(x);
    lp->save_lsm = true;
    lp->chunks = 1;
    lp->chunk_share = 1;
    lp->softcap = x->m->arch == MODEL_ARCH_GEMMA2 ? a : 0;
    if (in->fused_loss) {
        lp->fused = true;
        return;
    }
    if (in->stack == EST_STACK_LITGPT) {
        lp->keep_logits = true;
        /* chunked_cross_entropy takes the loss in 128-token chunks whether or
         * not the lm_head was chunked */
        lp->chunk_tokens = 128;
        lp->chunk_share = 128.0 / in->seq < 1 ? 128.0 / in->seq : 1;
        lp->grad_whole = !in->chunked_loss;
        lp->cast_in_loss = lp->ce > a;
        return;
    }
    if (in->chunked_loss) { /* torchtune's CEWithChunkedOutputLoss */
        lp->chunks = 8;
        lp->chunk_share = 1.0 / 8;
        lp->chunks_kept = true;
        lp->ce = 4.0;
        lp->cast_in_loss = a < 4;
        lp->save_lsm = !in->compiled; /* inductor recomputes the log-softmax */
        lp->keep_logits = in->logits_kept;
        return;
    }
    lp->keep_logits = in->logits_kept;
    if (in->stack == EST_STACK_TORCHTUNE) { /* the model upcasts; the recipe shifted with a copy */
        lp->upcast_in_model = a < 4;
        lp->shift_copy = true;
        lp->shift_in_loop = true;
        return;
    }
    lp->convert_outputs = x->autocast && a < 4;
    if (in->bf16_loss) {
        lp->shift_copy = true;
        lp->cast_in_loss = lp->ce > a;
    } else if (in->legacy_loss) {
        lp->upcast_in_model = a < 4;
        lp->shift_copy = true;
    } else if (in->loss_shift_copy) {
        lp->upcast_in_model = a < 4;
        lp->upcast_in_loss = a < 4;
        lp->shift_copy = true;
    } else {
        lp->cast_in_loss = a < 4;
    }
}

double est_loss_plan_peak(const est_loss_plan *lp)
{
    if (lp->fused) return lp->logits + lp->softcap;
    if (lp->chunk_tokens > 0)
        /* LitGPT, in the backward of a chunk: the kept logits, every chunk's
         * log-softmax, that chunk's two gradient buffers (and the logits'
         * whole gradient when the lm_head was not chunked) */
        return lp->logits + lp->ce + 2.0 * lp->ce * lp->chunk_share + (lp->grad_whole ? lp->logits : 0) +
               lp->softcap;
    if (lp->chunks > 1)
        /* at the last chunk: every chunk's 16-bit logits, the log-softmax of
         * every chunk (saved) or of this one (compiled: recomputed), and
         * this chunk's fp32 upcast */
        return lp->logits + (lp->save_lsm ? 4.0 : 4.0 * lp->chunk_share) + 4.0 * lp->chunk_share + lp->softcap;
    /* the output's logits: fp32 when the model upcast them */
    double out = lp->upcast_in_model && !lp->upcast_in_loss ? 4.0 : lp->logits;
    double kept = lp->keep_logits ? out : 0;
    double backward = 3.0 * lp->ce + kept + lp->softcap;
    if (lp->upcast_in_loss) /* the forward: output, its fp32 upcast, the shifted copy, the log-softmax */
        return fmax(backward, lp->logits + 4.0 + 4.0 + lp->ce + lp->softcap);
    return backward;
}
