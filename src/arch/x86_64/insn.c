/* SPDX-License-Identifier: MIT */
/*
 * The decoder wrapper: the only file that includes Zydis.  It turns a
 * Zydis decoding into struct ukp_insn, the arch-neutral facts the
 * relocator and the emulator need; Zydis types never leave this file.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <Zydis/Zydis.h>
#include "arch.h"

static ZydisDecoder decoder;
static int decoder_ready;

/* Zydis 64-bit register -> index into struct pt_regs viewed as ulong[] */
static int reg_index(ZydisRegister r)
{
	switch (r) {
	case ZYDIS_REGISTER_R15: return 0;
	case ZYDIS_REGISTER_R14: return 1;
	case ZYDIS_REGISTER_R13: return 2;
	case ZYDIS_REGISTER_R12: return 3;
	case ZYDIS_REGISTER_RBP: return 4;
	case ZYDIS_REGISTER_RBX: return 5;
	case ZYDIS_REGISTER_R11: return 6;
	case ZYDIS_REGISTER_R10: return 7;
	case ZYDIS_REGISTER_R9:  return 8;
	case ZYDIS_REGISTER_R8:  return 9;
	case ZYDIS_REGISTER_RAX: return 10;
	case ZYDIS_REGISTER_RCX: return 11;
	case ZYDIS_REGISTER_RDX: return 12;
	case ZYDIS_REGISTER_RSI: return 13;
	case ZYDIS_REGISTER_RDI: return 14;
	case ZYDIS_REGISTER_RSP: return 19;
	default: return -1;
	}
}

int ukp_arch_decode(const void *code, size_t avail, unsigned long addr,
		    struct ukp_insn *insn)
{
	ZydisDecodedInstruction d;
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];

	if (!decoder_ready) {
		/* benign race: both initialisations write the same bytes */
		ZydisDecoderInit(&decoder, ZYDIS_MACHINE_MODE_LONG_64,
				 ZYDIS_STACK_WIDTH_64);
		decoder_ready = 1;
	}
	memset(insn, 0, sizeof(*insn));
	insn->disp_off = -1;
	insn->ind_reg = -1;
	insn->mem.base = insn->mem.index = -1;
	if (avail > UKP_ARCH_MAX_INSN)
		avail = UKP_ARCH_MAX_INSN;
	if (ZYAN_FAILED(ZydisDecoderDecodeFull(&decoder, code, avail, &d, ops)))
		return -EILSEQ;

	insn->addr = addr;
	insn->len = d.length;
	memcpy(insn->bytes, code, d.length);
	strncpy(insn->mnemonic, ZydisMnemonicGetString(d.mnemonic) ?: "?",
		sizeof(insn->mnemonic) - 1);
	unsigned long next = addr + d.length;

	/* A memory operand: rip-relative displacement and address parts. */
	for (unsigned i = 0; i < d.operand_count_visible; i++) {
		const ZydisDecodedOperand *op = &ops[i];
		if (op->type != ZYDIS_OPERAND_TYPE_MEMORY)
			continue;
		if (op->mem.base == ZYDIS_REGISTER_RIP ||
		    op->mem.base == ZYDIS_REGISTER_EIP) {
			/* with 0x67, eip-relative: the address wraps at 4 GiB */
			insn->mem.rip_relative = 1;
			insn->mem.addr32 = op->mem.base == ZYDIS_REGISTER_EIP;
			insn->disp_off = d.raw.disp.offset;
		}
		if (op->mem.base == ZYDIS_REGISTER_RSP)
			insn->uses_rsp_base = 1;
		insn->mem.base = insn->mem.rip_relative ? -2 :
				 op->mem.base == ZYDIS_REGISTER_NONE ? -1 :
				 reg_index(op->mem.base);
		if (insn->mem.base == -1 && op->mem.base != ZYDIS_REGISTER_NONE)
			insn->mem.base = -3;	/* not a 64-bit register */
		insn->mem.index = op->mem.index == ZYDIS_REGISTER_NONE ? -1 :
				  reg_index(op->mem.index);
		if (insn->mem.index == -1 && op->mem.index != ZYDIS_REGISTER_NONE)
			insn->mem.index = -3;
		insn->mem.scale = op->mem.scale;
		insn->mem.disp = op->mem.disp.value;
		insn->mem.seg = op->mem.segment == ZYDIS_REGISTER_FS ? 1 :
				op->mem.segment == ZYDIS_REGISTER_GS ? 2 : 0;
		insn->ind_is_mem = 1;
	}
	if (insn->disp_off >= 0 && d.raw.disp.size != 32)
		return -EILSEQ;		/* rip-relative is always disp32 */

	/* Relative immediates (branches, xbegin). */
	for (int i = 0; i < 2; i++) {
		if (!d.raw.imm[i].is_relative)
			continue;
		insn->imm_size = d.raw.imm[i].size / 8;
		insn->imm_off = d.raw.imm[i].offset;
		insn->target = next + (unsigned long)d.raw.imm[i].value.s;
	}

	switch (d.meta.category) {
	case ZYDIS_CATEGORY_COND_BR:
		insn->flow = UKP_FLOW_JCC;
		break;
	case ZYDIS_CATEGORY_UNCOND_BR:
		if (d.mnemonic != ZYDIS_MNEMONIC_JMP)
			return -EILSEQ;
		if (insn->imm_size) {
			insn->flow = UKP_FLOW_JMP;
		} else {
			if (d.operand_width != 64)
				return -EILSEQ;	/* far jumps */
			insn->flow = UKP_FLOW_JMP_IND;
		}
		break;
	case ZYDIS_CATEGORY_CALL:
		if (d.mnemonic != ZYDIS_MNEMONIC_CALL)
			return -EILSEQ;
		if (insn->imm_size) {
			insn->flow = UKP_FLOW_CALL;
		} else {
			if (d.operand_width != 64)
				return -EILSEQ;	/* far calls */
			insn->flow = UKP_FLOW_CALL_IND;
		}
		break;
	case ZYDIS_CATEGORY_RET:
		if (d.mnemonic != ZYDIS_MNEMONIC_RET ||
		    d.meta.branch_type == ZYDIS_BRANCH_TYPE_FAR)
			return -EILSEQ;	/* iret, far ret: never in user code */
		insn->flow = UKP_FLOW_RET;
		if (d.raw.imm[0].size)
			insn->ret_pop = (uint16_t)d.raw.imm[0].value.u;
		break;
	case ZYDIS_CATEGORY_SYSCALL:
		insn->flow = d.mnemonic == ZYDIS_MNEMONIC_SYSCALL ?
			     UKP_FLOW_SYSCALL : UKP_FLOW_NONE;
		break;
	default:
		if (d.mnemonic == ZYDIS_MNEMONIC_UD0 || d.mnemonic == ZYDIS_MNEMONIC_UD1 ||
		    d.mnemonic == ZYDIS_MNEMONIC_UD2 || d.mnemonic == ZYDIS_MNEMONIC_HLT)
			insn->flow = UKP_FLOW_STOP;
		else if (insn->imm_size)
			insn->flow = UKP_FLOW_JCC;	/* xbegin: abort target or next */
		else
			insn->flow = UKP_FLOW_NONE;
		break;
	}
	if (d.mnemonic == ZYDIS_MNEMONIC_INT3)
		insn->is_int3 = 1;
	if (insn->flow == UKP_FLOW_JMP_IND || insn->flow == UKP_FLOW_CALL_IND) {
		if (!insn->ind_is_mem) {
			insn->ind_reg = reg_index(ops[0].reg.value);
			if (insn->ind_reg < 0)
				return -EILSEQ;
		}
		/* the relocator rewrites the ModRM reg field (/2 -> /6); with
		 * 0x66 and no REX.W that push would be 16-bit (and AMD reads
		 * such a call as 16-bit too): no compiler emits it, refuse */
		if (insn->flow == UKP_FLOW_CALL_IND &&
		    (d.attributes & ZYDIS_ATTRIB_HAS_OPERANDSIZE) &&
		    !(d.attributes & ZYDIS_ATTRIB_HAS_REX && (d.raw.rex.W)))
			return -EILSEQ;
		insn->modrm_off = d.raw.modrm.offset;
		if (insn->bytes[insn->modrm_off - 1] != 0xff)
			return -EILSEQ;
	}
	return d.length;
}

/*
 * Instruction boundaries of the function being probed, decoded once:
 * registering a probe on every instruction of a function would otherwise
 * decode it from the start for each one (quadratic).  Callers hold the
 * registry lock; ukp_arch_forget_boundaries() drops the cache when code
 * may have changed (an object was unloaded).
 */
static struct {
	unsigned long start, end, stop;	/* stop: first undecodable byte */
	uint8_t *bits;
} bcache;

void ukp_arch_forget_boundaries(void)
{
	free(bcache.bits);
	memset(&bcache, 0, sizeof(bcache));
}

static int fill_boundaries(unsigned long start, unsigned long end)
{
	size_t n = end - start;
	uint8_t *bits = calloc((n + 8) / 8, 1);
	uint8_t buf[UKP_ARCH_MAX_INSN];
	struct ukp_insn insn;
	unsigned long pc = start;

	if (!bits)
		return -ENOMEM;
	while (pc < end) {
		size_t avail = end - pc < sizeof(buf) ? end - pc : sizeof(buf);
		bits[(pc - start) / 8] |= (uint8_t)(1u << ((pc - start) % 8));
		ukp_arch_engine->read_text(pc, buf, avail);
		if (ukp_arch_decode(buf, avail, pc, &insn) < 0)
			break;
		pc += insn.len;
	}
	ukp_arch_forget_boundaries();
	bcache.start = start;
	bcache.end = end;
	bcache.stop = pc;
	bcache.bits = bits;
	return 0;
}

int ukp_arch_check_boundary(unsigned long func_start, unsigned long func_end,
			    unsigned long addr)
{
	if (addr < func_start || addr >= func_end)
		return -EILSEQ;
	if ((bcache.start != func_start || bcache.end != func_end || !bcache.bits) &&
	    fill_boundaries(func_start, func_end))
		return -ENOMEM;
	/* a boundary reached by decoding, not past an undecodable byte */
	if (addr > bcache.stop)
		return -EILSEQ;
	unsigned long o = addr - func_start;
	return bcache.bits[o / 8] & (1u << (o % 8)) ? 0 : -EILSEQ;
}
