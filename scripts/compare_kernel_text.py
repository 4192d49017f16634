#!/usr/bin/env python3
"""Whether kernels' code is the same in two builds: compares, kernel by kernel, the .text.<kernel>,
.nv.constant0.<kernel> and .nv.info.<kernel> sections of one-kernel (or any) cubins against the
same kernels in another cubin (a unit of many kernels). .nv.info holds symbol indices, which
differ between cubins of different kernel sets; the code and constants must not.

    python3 scripts/compare_kernel_text.py OLD.cubin [OLD.cubin ...] -- NEW.cubin
Exit 0 when every kernel's .text and .nv.constant0 are byte-identical."""
import struct
import sys


def sections(path):
    b = open(path, "rb").read()
    if b[:4] != b"\x7fELF" or b[4] != 2:
        sys.exit(f"{path}: not a 64-bit ELF")
    shoff = struct.unpack_from("<Q", b, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", b, 0x3A)
    hdrs = [struct.unpack_from("<IIQQQQIIQQ", b, shoff + i * shentsize) for i in range(shnum)]
    names = hdrs[shstrndx][4]
    out = {}
    for h in hdrs:
        name = b[names + h[0]:b.index(b"\0", names + h[0])].decode()
        out[name] = b[h[4]:h[4] + h[5]] if h[1] != 8 else b""  # 8: NOBITS
    return out


def main(argv):
    if "--" not in argv or argv.index("--") == 0 or argv.index("--") != len(argv) - 2:
        sys.exit(__doc__)
    olds, new = argv[:argv.index("--")], sections(argv[-1])
    ok = True
    for path in olds:
        old = sections(path)
        for text in [n for n in old if n.startswith(".text.")]:
            kernel = text[len(".text."):]
            for sec in (".text.", ".nv.constant0.", ".nv.info."):
                a, b = old.get(sec + kernel), new.get(sec + kernel)
                same = a is not None and a == b
                if sec != ".nv.info.":
                    ok &= same
                print(f"{kernel} {sec.strip('.')}: {'identical' if same else 'differs'} "
                      f"({len(a) if a is not None else '-'} / {len(b) if b is not None else '-'} bytes)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
