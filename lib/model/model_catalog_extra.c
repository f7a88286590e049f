/* model_catalog_extra.c: shapes lathe knows that are not in
 * tests/ref/data/model_configs.json, each with its source (the calibration
 * rows' architectures, share/calibration/README.md), plus name aliases for checkpoints that share a shape
 * with a catalogue entry. intermediate is the width of one MLP projection
 * (Qwen v1's config.json stores twice that). Parameter counts are derived
 * from the dimensions with model_count_params (docs/models.md) and agree with
 * the param_count column of memory-calibration.jsonl. max_positions and
 * rope_theta are 0 where the sources do not state them. */
#include "model/model.h"

#define MLC "mlc-ai/mlc-llm python/mlc_llm/model/model_preset.py"

const model_catalog_entry model_catalog_extra[] = {
    {"Qwen/Qwen-1_8B", MODEL_ARCH_QWEN, 2048, 5504, 24, 16, 16, 128, 151936, 0, 0, false,
     1836828672ull,
     MLC " @01ced331 preset 'qwen'; HF iLYoungZ/Qwen-1_8B-Law config.json (_name_or_path "
         "Qwen/Qwen-1_8B); HF Qwen/Qwen-1_8B discussion #3 (MLP width 5504, config 11008)"},
    {"Qwen/Qwen-7B", MODEL_ARCH_QWEN, 4096, 11008, 32, 32, 32, 128, 151936, 0, 0, false,
     7721324544ull,
     "HF Qwen/Qwen-7B config.json @d4efd21e (intermediate_size 22016 = 2 x 11008); Qwen-7B-Chat "
     "copies wei123602/Qwen-7b-chat-FINETUNE4, TheBloke/Qwen-7B-Chat-AWQ"},
    {"Qwen/Qwen-14B", MODEL_ARCH_QWEN, 5120, 13696, 40, 40, 40, 128, 152064, 0, 0, false,
     14167290880ull,
     "HF TheBloke/Qwen-14B-Chat-AWQ and -GPTQ config.json (from qwen-14b-chat); "
     "Tongjilibo/bert4torch_config Qwen-14B-Chat (MLP width 13696, config 27392)"},
    {"Qwen/Qwen-72B", MODEL_ARCH_QWEN, 8192, 24576, 80, 64, 64, 128, 152064, 0, 0, false,
     72287920128ull,
     "HF FreedomIntelligence/Apollo-72B config.json (fine-tune of Qwen-72B; config "
     "intermediate_size 49152 = 2 x 24576)"},
    {"meta-llama/Llama-3.1-8B", MODEL_ARCH_LLAMA, 4096, 14336, 32, 32, 8, 128, 128256, 131072,
     500000.0, false, 8030261248ull,
     MLC " preset 'llama3_1_8b' (Llama-3-8B shapes; rope scaling differs)"},
    {"meta-llama/Llama-3.1-70B", MODEL_ARCH_LLAMA, 8192, 28672, 80, 64, 8, 128, 128256, 131072,
     500000.0, false, 70553706496ull, MLC " preset 'llama3_1_70b'"},
    {"meta-llama/Llama-3.3-70B-Instruct", MODEL_ARCH_LLAMA, 8192, 28672, 80, 64, 8, 128, 128256,
     131072, 500000.0, false, 70553706496ull,
     "HF relaxml/Llama-3.3-70B-Instruct-QTIP-3Bit config.json (_name_or_path "
     "meta-llama/Llama-3.3-70B-Instruct)"},
    {"meta-llama/Llama-3.1-405B", MODEL_ARCH_LLAMA, 16384, 53248, 126, 128, 8, 128, 128256, 131072,
     500000.0, false, 405853388800ull,
     "HF relaxml/Llama-3.1-405B-Instruct-QTIP-4Bit-TP8 and uiuc-convai/CoALM-405B config.json "
     "(8 kv heads, as torchtune's builder)"},
    {"01-ai/Yi-6B", MODEL_ARCH_LLAMA, 4096, 11008, 32, 32, 4, 128, 64000, 0, 0, false,
     6061035520ull, "HF 01-ai/Yi-6B config.json; Yi-6B-Chat copy pxltd/brain_v2"},
    {"01-ai/Yi-34B", MODEL_ARCH_LLAMA, 7168, 20480, 60, 56, 8, 128, 64000, 4096, 5000000.0, false,
     34388917248ull, "HF 01-ai/Yi-34B config.json (share/calibration/README.md)"},
    {"OpenBuddy/openbuddy-zephyr-7b-v14.1", MODEL_ARCH_MISTRAL, 4096, 14336, 32, 32, 8, 128, 36608,
     0, 0, false, 7279480832ull,
     "HF TheBloke/openbuddy-zephyr-7B-v14.1-GPTQ config.json (Mistral-7B shapes, vocab 36608)"},
    {"google/gemma-2b", MODEL_ARCH_GEMMA, 2048, 16384, 18, 8, 1, 256, 256000, 8192, 10000.0, true,
     2506172416ull, MLC " preset 'gemma_2b'"},
    {"google/gemma-7b", MODEL_ARCH_GEMMA, 3072, 24576, 28, 16, 16, 256, 256000, 8192, 10000.0, true,
     8537680896ull,
     "HF copies with _name_or_path google/gemma-7b (PrunaAI/google-gemma-7b-HQQ-4bit-smashed, "
     "lewtun/gemma-7b-sft-full-dolly-v0)"},
    {"mistralai/Mistral-7B-v0.3", MODEL_ARCH_MISTRAL, 4096, 14336, 32, 32, 8, 128, 32768, 32768,
     1000000.0, false, 7248023552ull,
     "model_configs.json (tests/ref/data) notes of mistralai/Mistral-7B-v0.1: v0.3 has vocab 32768, "
     "rope_theta 1e6 (" MLC " preset 'mistral_7b_v03')"},
};

const size_t model_catalog_extra_len = sizeof model_catalog_extra / sizeof model_catalog_extra[0];
