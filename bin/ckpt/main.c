/* SPDX-License-Identifier: MIT */
/* ptrain-ckpt: describe, verify and convert ptrain checkpoints.
 * See man/ptrain-ckpt.1; the modules are in bin/ckpt/ckpt_tool.h.
 *
 *   info DIR            the manifest's summary: model, plan, step, lr
 *                       schedule, files, tensors (no MPI, reads no tensor)
 *   verify DIR          every rank file's size and FNV-1a 64 against the
 *                       manifest, and the manifest's own consistency; one
 *                       line per problem, exit 0 (sound) or 1
 *   convert SRC DST     a checkpoint to llm.c's gpt2 .bin (version 3, fp32)
 *                       or to safetensors (Hugging Face GPT-2 names), and an
 *                       llm.c .bin or a Hugging Face GPT-2 model.safetensors
 *                       (lib/ckpt/safetensors.h reads it) to a checkpoint
 *                       ptrain-run --resume can fine-tune from (step 0,
 *                       fresh AdamW state) or to the other formats.
 *
 * Converting goes through a one-rank model: the checkpoint is loaded with
 * pt_ckpt_load, which reshards any saved plan (tp, pp, ZeRO, world size) to
 * the full tensors, so the tool needs no knowledge of layouts; an llm.c file
 * is written into a fresh model's registry and saved with pt_ckpt_save.
 * ptrain's weights are [out, in] (PyTorch nn.Linear, lib/core/core.h), as
 * llm.c's (train_gpt2.c, fill_in_parameter_sizes: wte [Vp, C], wpe [maxT,
 * C], ln1w [L, C], ln1b, qkvw [L, 3C, C], qkvb [L, 3C], attprojw [L, C, C],
 * attprojb, ln2w, ln2b, fcw [L, 4C, C], fcb [L, 4C], fcprojw [L, C, 4C],
 * fcprojb, lnfw [C], lnfb [C]), so llm.c's tensors are copied as they are;
 * Hugging Face's GPT-2 uses Conv1D ([in, out]) for c_attn, c_proj, c_fc and
 * mlp.c_proj, which are transposed (through the backend's copy2d).
 *
 * Exit status: 0 success; 1 a problem found by verify, or a failure while
 * converting; 2 bad command line, or a missing/unreadable/malformed input. */
#define _GNU_SOURCE
#include "config.h"
#include "ckpt_tool.h"
#include "bin/tool_util.h"

#include <string.h>

int main(int argc, char **argv)
{
    tool_name = "ptrain-ckpt";
    ckpt_cmdline cl;
    const int st = ckpt_options(argc, argv, &cl);
    if (st >= 0) return st;
    if (!strcmp(cl.cmd, "info")) return ckpt_info(cl.args[0]);
    if (!strcmp(cl.cmd, "verify")) return ckpt_verify(cl.args[0]);
    if (!strcmp(cl.cmd, "sample")) return ckpt_sample(cl.args[0], &cl.so);
    return ckpt_convert(cl.to, cl.dtype, cl.model, cl.max_shard, cl.args[0], cl.args[1]);
}
