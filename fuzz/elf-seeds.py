#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""
Seeds for the ELF fuzzer (fuzz/elf_fuzz.c): a small, well-formed x86-64
shared library with everything the readers look at (.symtab, .dynsym,
a build-id note, RELA and RELR tables, __mcount_loc, ukp_nokprobe,
.dynamic), and variants of it each broken in one way a hostile or
damaged file could be.  Writes fuzz/elf-corpus/gen-*; run again after a
change here and check the files in.

    /usr/bin/python3 fuzz/elf-seeds.py [DIR]
"""
import os
import struct
import sys

EHDR, PHDR, SHDR, SYM, RELA = 64, 56, 64, 24, 24
ET_EXEC, ET_DYN = 2, 3
PT_LOAD, PT_DYNAMIC, PT_NOTE = 1, 2, 4
SHT_PROGBITS, SHT_SYMTAB, SHT_STRTAB, SHT_RELA = 1, 2, 3, 4
SHT_DYNAMIC, SHT_NOTE, SHT_DYNSYM, SHT_RELR = 6, 7, 11, 19
STT_OBJECT, STT_FUNC, STT_IFUNC = 1, 2, 10
STB_LOCAL, STB_GLOBAL, STB_WEAK = 0, 1, 2
DT_FLAGS_1, DF_1_PIE = 0x6ffffffb, 0x08000000
M64 = (1 << 64) - 1

# section indexes
TEXT, DYNSTR, DYNSYM, STRTAB, SYMTAB, SHSTRTAB, NOTE, RELADYN, RELRDYN, \
    MCOUNT, NOKPROBE, DYNAMIC = range(1, 13)
NAMES = [".text", ".dynstr", ".dynsym", ".strtab", ".symtab", ".shstrtab",
         ".note.gnu.build-id", ".rela.dyn", ".relr.dyn", "__mcount_loc",
         "ukp_nokprobe", ".dynamic"]


def strtab(names):
    data, at = b"\0", {}
    for n in names:
        at[n] = len(data)
        data += n.encode() + b"\0"
    return data, at


def sym(name, info, shndx, value, size):
    return struct.pack("<IBBHQQ", name, info, 0, shndx, value, size)


class Elf:
    """The base library; offsets of every header kept to break them."""

    def __init__(self, etype=ET_DYN, pie=False, shdr_pad=0, tail=None,
                 nsym_extra=0):
        self.secs = {}
        body = bytearray()
        layout = []		# (index, data, type, flags, link, info, align, entsize)

        def add(idx, data, typ, flags=0, link=0, info=0, entsize=0, align=8):
            layout.append((idx, bytes(data), typ, flags, link, info, align, entsize))

        text = bytes([0x55, 0x48, 0x89, 0xe5, 0x5d, 0xc3] + [0x90] * 10) * 4
        fnames = ["f", "g", "h", "dfr_data", "ifn", "f2@@V1", "f2@V0"]
        dynstr, dat = strtab(["f", "g", "dfr_data", "ifn"])
        strs, sat = strtab(fnames + ["x%d" % k for k in range(nsym_extra)])
        shstr, shat = strtab(NAMES)
        self.shat = shat
        # addresses = file offsets (one PT_LOAD from 0); fixed up below
        add(TEXT, text, SHT_PROGBITS, 6, align=16)
        add(DYNSTR, dynstr, SHT_STRTAB, 2, align=1)
        add(DYNSYM, b"", SHT_DYNSYM, 2, DYNSTR, 1, SYM)
        add(STRTAB, strs, SHT_STRTAB, align=1)
        add(SYMTAB, b"", SHT_SYMTAB, 0, STRTAB, 2, SYM)
        add(SHSTRTAB, shstr, SHT_STRTAB, align=1)
        note = struct.pack("<III", 4, 20, 3) + b"GNU\0" + bytes(range(0xa0, 0xb4))
        add(NOTE, note, SHT_NOTE, 2, align=4)
        add(RELADYN, b"", SHT_RELA, 2, DYNSYM, 0, RELA)
        add(RELRDYN, b"", SHT_RELR, 2, 0, 0, 8)
        add(MCOUNT, b"", SHT_PROGBITS, 2)
        add(NOKPROBE, b"", SHT_PROGBITS, 3)
        add(DYNAMIC, b"", SHT_DYNAMIC, 3, DYNSTR, 0, 16)
        # sizes are known now: place everything, then fill the tables
        nph = 3
        off = EHDR + nph * PHDR
        place = {}
        sizes = {TEXT: len(text), DYNSTR: len(dynstr), DYNSYM: 5 * SYM,
                 STRTAB: len(strs), SYMTAB: (8 + nsym_extra) * SYM,
                 SHSTRTAB: len(shstr), NOTE: len(note), RELADYN: 4 * RELA,
                 RELRDYN: 3 * 8, MCOUNT: 3 * 8, NOKPROBE: 2 * 8, DYNAMIC: 3 * 16}
        for (idx, data, typ, flags, link, info, align, entsize) in layout:
            off = (off + align - 1) // align * align
            place[idx] = off
            off += sizes[idx]
        t = place[TEXT]
        dynsym = (sym(0, 0, 0, 0, 0) + sym(dat["f"], 0x12, TEXT, t, 16) +
                  sym(dat["g"], 0x22, TEXT, t + 16, 0) +
                  sym(dat["dfr_data"], 0x11, NOKPROBE, place[NOKPROBE], 8) +
                  sym(dat["ifn"], 0x1a, TEXT, t + 48, 16))
        symtab = (sym(0, 0, 0, 0, 0) + sym(sat["h"], 0x02, TEXT, t + 32, 8) +
                  sym(sat["f"], 0x12, TEXT, t, 16) +
                  sym(sat["g"], 0x22, TEXT, t + 16, 0) +
                  sym(sat["dfr_data"], 0x11, NOKPROBE, place[NOKPROBE], 8) +
                  sym(sat["ifn"], 0x1a, TEXT, t + 48, 16) +
                  sym(sat["f2@@V1"], 0x12, TEXT, t + 16, 16) +
                  sym(sat["f2@V0"], 0x12, TEXT, t + 32, 16))
        for k in range(nsym_extra):
            symtab += sym(sat["x%d" % k], 0x12, TEXT, t + (k * 3) % 64, k % 5)
        rela = (struct.pack("<QQq", place[NOKPROBE], 8, t) +	# RELATIVE
                struct.pack("<QQq", place[NOKPROBE] + 8, 37, t + 48) +	# IRELATIVE
                struct.pack("<QQq", place[MCOUNT], (1 << 32) | 1, 0) +	# 64, f
                struct.pack("<QQq", place[MCOUNT], (9 << 32) | 1, 0))	# bad sym
        relr = struct.pack("<QQQ", place[MCOUNT], 0b1011, M64)
        mcount = struct.pack("<QQQ", t, 0, t + 16)
        nokprobe = struct.pack("<QQ", t + 32, t + 1000)
        dyn = struct.pack("<qQqQqQ", DT_FLAGS_1, DF_1_PIE if pie else 0, 0x1e, 0, 0, 0)
        fill = {DYNSYM: dynsym, SYMTAB: symtab, RELADYN: rela, RELRDYN: relr,
                MCOUNT: mcount, NOKPROBE: nokprobe, DYNAMIC: dyn}
        for idx in range(1, 13):
            data = fill.get(idx, [d for (i, d, *_r) in layout if i == idx][0])
            assert len(data) == sizes[idx], idx
            body += bytes(place[idx] - EHDR - nph * PHDR - len(body)) + data
        shoff = (EHDR + nph * PHDR + len(body) + 7) // 8 * 8 + shdr_pad
        body += bytes(shoff - EHDR - nph * PHDR - len(body))
        shdrs = bytes(SHDR)
        for (idx, data, typ, flags, link, info, align, entsize) in layout:
            shdrs += struct.pack("<IIQQQQIIQQ", shat[NAMES[idx - 1]], typ, flags,
                                 place[idx], place[idx], sizes[idx], link, info,
                                 align, entsize)
        size = shoff + len(shdrs)
        ph = (struct.pack("<IIQQQQQQ", PT_LOAD, 5, 0, 0, 0, size, size, 0x1000) +
              struct.pack("<IIQQQQQQ", PT_DYNAMIC, 6, place[DYNAMIC], place[DYNAMIC],
                          place[DYNAMIC], 48, 48, 8) +
              struct.pack("<IIQQQQQQ", PT_NOTE, 4, place[NOTE], place[NOTE],
                          place[NOTE], len(note), len(note), 4))
        eh = (b"\x7fELF\x02\x01\x01" + bytes(9) +
              struct.pack("<HHIQQQIHHHHHH", etype, 62, 1, t, EHDR, shoff, 0, EHDR,
                          PHDR, nph, SHDR, 13, SHSTRTAB))
        self.b = bytearray(eh + ph + body + shdrs)
        self.place, self.sizes, self.shoff = place, sizes, shoff
        if tail is not None:
            self.b += tail

    # patching one field
    def put(self, at, fmt, v):
        struct.pack_into("<" + fmt, self.b, at, v & ((1 << (8 * struct.calcsize(fmt))) - 1))

    def eh(self, field, v):
        f = {"e_type": (16, "H"), "e_phoff": (32, "Q"), "e_shoff": (40, "Q"),
             "e_phentsize": (54, "H"), "e_phnum": (56, "H"), "e_shentsize": (58, "H"),
             "e_shnum": (60, "H"), "e_shstrndx": (62, "H"), "class": (4, "B")}[field]
        self.put(f[0], f[1], v)

    def sh(self, idx, field, v):
        f = {"sh_name": (0, "I"), "sh_type": (4, "I"), "sh_addr": (16, "Q"),
             "sh_offset": (24, "Q"), "sh_size": (32, "Q"), "sh_link": (40, "I"),
             "sh_entsize": (56, "Q")}[field]
        self.put(self.shoff + idx * SHDR + f[0], f[1], v)

    def ph(self, idx, field, v):
        f = {"p_type": (0, "I"), "p_flags": (4, "I"), "p_offset": (8, "Q"),
             "p_vaddr": (16, "Q"), "p_filesz": (32, "Q"), "p_memsz": (40, "Q")}[field]
        self.put(EHDR + idx * PHDR + f[0], f[1], v)

    def sym(self, tab, k, field, v):
        f = {"st_name": (0, "I"), "st_info": (4, "B"), "st_shndx": (6, "H"),
             "st_value": (8, "Q"), "st_size": (16, "Q")}[field]
        self.put(self.place[tab] + k * SYM + f[0], f[1], v)


def variants():
    v = {}
    base = Elf()
    v["valid-lib"] = base.b
    v["valid-exec"] = Elf(etype=ET_EXEC).b
    v["pie"] = Elf(pie=True).b
    v["many-syms"] = Elf(nsym_extra=120).b
    n = len(base.b)
    for cut in (0, 1, 4, 16, 63, 64, 100, 64 + 3 * 56, n // 2, n - 65, n - 1):
        v["trunc-%d" % cut] = base.b[:cut]
    v["not-elf64"] = bytes(base.b[:4]) + b"\x01" + bytes(base.b[5:])

    def mk(name, fn, **kw):
        e = Elf(**kw)
        fn(e)
        v[name] = e.b

    # headers
    mk("shoff-past-end", lambda e: e.eh("e_shoff", len(e.b)))
    mk("shoff-wraps", lambda e: e.eh("e_shoff", M64 - 63))
    mk("shnum-huge", lambda e: e.eh("e_shnum", 0xffff))
    mk("shnum-zero", lambda e: e.eh("e_shnum", 0))
    mk("shentsize-wrong", lambda e: e.eh("e_shentsize", 40))
    mk("shoff-misaligned", lambda e: None, shdr_pad=4)
    mk("phoff-wraps", lambda e: e.eh("e_phoff", M64 - 55))
    mk("phoff-past-end", lambda e: e.eh("e_phoff", len(e.b) - 8))
    mk("phnum-huge", lambda e: e.eh("e_phnum", 0xffff))
    mk("phoff-misaligned", lambda e: e.eh("e_phoff", 65))
    mk("shstrndx-out", lambda e: e.eh("e_shstrndx", 0x4000))
    mk("shstrtab-huge", lambda e: e.sh(SHSTRTAB, "sh_size", M64))
    mk("shstrtab-past-end", lambda e: e.sh(SHSTRTAB, "sh_offset", len(e.b) - 2))

    def names_out(e):
        for k in range(1, 13):
            e.sh(k, "sh_name", 0xfffffff0 + k)
    mk("sh-names-out", names_out)

    def shstr_no_nul(e):	# the table ends in the middle of the last name
        e.sh(SHSTRTAB, "sh_size", e.sizes[SHSTRTAB] - 1)
        e.sh(SHSTRTAB, "sh_offset", len(e.b) - (e.sizes[SHSTRTAB] - 1))
        e.b[-(e.sizes[SHSTRTAB] - 1):] = bytes(e.b[e.place[SHSTRTAB]:][:e.sizes[SHSTRTAB] - 1])
    mk("shstrtab-no-nul", shstr_no_nul)
    # symbol and string tables
    for tab, name in ((SYMTAB, "symtab"), (DYNSYM, "dynsym")):
        mk(name + "-link-out", lambda e, t=tab: e.sh(t, "sh_link", 0xffff))
        mk(name + "-link-self", lambda e, t=tab: e.sh(t, "sh_link", t))
        mk(name + "-size-huge", lambda e, t=tab: e.sh(t, "sh_size", 1 << 62))
        mk(name + "-wraps", lambda e, t=tab: (e.sh(t, "sh_offset", M64 - 7),
                                                e.sh(t, "sh_size", 64)))
        mk(name + "-misaligned", lambda e, t=tab: e.sh(t, "sh_offset", e.place[t] + 4))
        mk(name + "-size-odd", lambda e, t=tab: e.sh(t, "sh_size", 2 * SYM + 5))
        mk(name + "-empty", lambda e, t=tab: e.sh(t, "sh_size", 0))
    for tab, name in ((STRTAB, "strtab"), (DYNSTR, "dynstr")):
        mk(name + "-size-huge", lambda e, t=tab: e.sh(t, "sh_size", M64 - 15))
        mk(name + "-wraps", lambda e, t=tab: (e.sh(t, "sh_offset", M64 - 3),
                                                e.sh(t, "sh_size", 16)))
        mk(name + "-empty", lambda e, t=tab: e.sh(t, "sh_size", 0))

        def no_nul(e, t=tab):	# moved to the end of the file, last NUL cut
            size = e.sizes[t] - 1
            e.b += bytes(e.b[e.place[t]:e.place[t] + size])
            e.sh(t, "sh_offset", len(e.b) - size)
            e.sh(t, "sh_size", size)
        mk(name + "-no-nul", no_nul)

    def sym_names_out(e):
        for k in range(1, 8):
            e.sym(SYMTAB, k, "st_name", 0xffffff00 + k)
        for k in range(1, 5):
            e.sym(DYNSYM, k, "st_name", e.sizes[DYNSTR] + k)
    mk("sym-names-out", sym_names_out)

    def sym_wrap(e):
        for tab in (SYMTAB, DYNSYM):
            e.sym(tab, 1, "st_value", M64 - 7)
            e.sym(tab, 1, "st_size", 64)
            e.sym(tab, 2, "st_value", M64)
            e.sym(tab, 2, "st_size", 0)
            e.sym(tab, 3, "st_size", M64)
    mk("sym-value-size-wrap", sym_wrap)

    def sym_odd(e):
        e.sym(SYMTAB, 2, "st_shndx", 0xfff1)	# SHN_ABS
        e.sym(SYMTAB, 3, "st_shndx", 0xffff)
        e.sym(SYMTAB, 4, "st_info", 0xff)
        e.sym(SYMTAB, 5, "st_value", 0)
    mk("sym-odd", sym_odd)
    # program headers
    mk("load-wraps", lambda e: (e.ph(0, "p_offset", M64 - 15), e.ph(0, "p_filesz", 64),
                                e.ph(0, "p_vaddr", M64 - 0xfff), e.ph(0, "p_memsz", 1 << 20)))
    mk("load-huge", lambda e: (e.ph(0, "p_filesz", M64), e.ph(0, "p_memsz", M64)))
    mk("load-noexec", lambda e: e.ph(0, "p_flags", 4))
    mk("dynamic-out", lambda e: (e.ph(1, "p_offset", M64 - 8), e.ph(1, "p_filesz", M64)))
    mk("dynamic-past-end", lambda e: e.ph(1, "p_offset", len(e.b) - 8))
    # notes
    mk("note-past-end", lambda e: (e.ph(2, "p_offset", len(e.b) - 4), e.ph(2, "p_filesz", 64)))
    mk("note-wraps", lambda e: (e.ph(2, "p_offset", M64 - 3), e.ph(2, "p_filesz", 16)))
    mk("note-misaligned", lambda e: e.ph(2, "p_offset", e.place[NOTE] + 1))

    def note_sizes(e):
        e.put(e.place[NOTE], "I", 0xfffffffe)	# n_namesz
        e.put(e.place[NOTE] + 4, "I", 0xffffffff)	# n_descsz
    mk("note-sizes-huge", note_sizes)
    mk("note-desc-out", lambda e: e.put(e.place[NOTE] + 4, "I", 64))
    mk("note-section-huge", lambda e: e.sh(NOTE, "sh_size", M64))
    # relocations
    mk("rela-huge", lambda e: e.sh(RELADYN, "sh_size", M64 - 23))
    mk("rela-misaligned", lambda e: e.sh(RELADYN, "sh_offset", e.place[RELADYN] + 4))
    mk("rela-link-out", lambda e: e.sh(RELADYN, "sh_link", 0xfffe))
    mk("relr-huge", lambda e: e.sh(RELRDYN, "sh_size", 1 << 40))
    mk("relr-wraps", lambda e: (e.sh(RELRDYN, "sh_offset", M64 - 7),
                                e.sh(RELRDYN, "sh_size", 24)))

    def many_relas(e):	# every section the one relocation table, read once
        for k in range(1, 13):
            for f, val in (("sh_type", SHT_RELA), ("sh_offset", e.place[RELADYN]),
                           ("sh_size", e.sizes[RELADYN]), ("sh_entsize", RELA)):
                e.sh(k, f, val)
    mk("rela-everywhere", many_relas)
    # the engine's own sections
    mk("mcount-huge", lambda e: e.sh(MCOUNT, "sh_size", 1 << 62))
    mk("mcount-misaligned", lambda e: e.sh(MCOUNT, "sh_offset", e.place[MCOUNT] + 3))

    def mcount_everywhere(e):
        for k in range(1, 13):
            e.sh(k, "sh_name", e.shat["__mcount_loc"])
            e.sh(k, "sh_type", SHT_PROGBITS)
    mk("mcount-everywhere", mcount_everywhere)
    mk("nokprobe-wild", lambda e: (e.sh(NOKPROBE, "sh_addr", M64 - 7),
                                   e.sh(NOKPROBE, "sh_size", 1 << 20)))
    mk("nokprobe-unmapped", lambda e: e.sh(NOKPROBE, "sh_addr", 0x40000000))
    return v


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "elf-corpus")
    os.makedirs(out, exist_ok=True)
    for name, data in sorted(variants().items()):
        with open(os.path.join(out, "gen-" + name), "wb") as f:
            f.write(bytes(data))


if __name__ == "__main__":
    main()
