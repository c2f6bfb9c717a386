"""Lists the /proc/cpuinfo flags whose instructions occur in the given ELF files.

Usage: isa-flags.py FILE...   (needs objdump from binutils)

It disassembles each file with `objdump -d`, tells VEX from EVEX encodings by the instruction's
first byte after its prefixes (0x62 is EVEX, 0xc4/0xc5 VEX), and maps each instruction beyond
baseline x86-64 to the flag a CPU must report to run it (`avx_vnni` for the VEX form of `vpdpbusd`,
`avx512_vnni` for its EVEX form, and so on). It prints one line per flag: the flag, how many
instructions need it, and up to three example mnemonics. `real-model.sh` uses it only as the
record of how its flag lists were derived; rerun it when a pinned server changes.

The mapping covers the extensions that compilers emit for llama.cpp's CPU backend (SSSE3 to
AVX-512 and AMX); it is a reading aid, not a complete x86 decoder. An instruction may sit on a
path that is taken only after a run-time check (ggml's AMX code runs only if the kernel grants
the AMX state), so the list is what the files contain, not necessarily what a run executes.
"""

import collections
import re
import subprocess
import sys

LEGACY_PREFIXES = {"66", "67", "f0", "f2", "f3", "2e", "36", "3e", "26", "64", "65"}
# Not tzcnt: it shares its encoding with `rep bsf`, which compilers emit for any x86-64 and which
# CPUs without BMI1 run as bsf.
BMI1 = {"andn", "bextr", "blsi", "blsmsk", "blsr"}
BMI2 = {"bzhi", "mulx", "pdep", "pext", "rorx", "sarx", "shlx", "shrx"}
SSSE3 = re.compile(r"^(pshufb|palignr|pmaddubsw|phadd\w+|phsub\w+|pabs[bwd]|psign[bwd]|pmulhrsw)$")
SSE41 = re.compile(
    r"^(pmov[sz]x\w+|pminsb|pminsd|pminu[wd]|pmaxsb|pmaxsd|pmaxu[wd]|pmulld|pmuldq|pblendw|pblendvb|blendv?p[sd]|"
    r"pextr[bdq]|pinsr[bdq]|ptest|round[ps][sd]|dpp[sd]|insertps|extractps|pcmpeqq|packusdw|"
    r"movntdqa|mpsadbw|phminposuw)$"
)
SSE42 = re.compile(r"^(pcmpgtq|pcmp[ei]str[im]|crc32\w*)$")
FMA = re.compile(r"^vf(n?m(add|sub)(sub|add)?)\d{3}[ps][sd]$")
AVX2_ANY = re.compile(
    r"^(vpbroadcast[bwdq]|vbroadcasti128|vinserti128|vextracti128|vperm2i128|vpermd|vpermq|"
    r"vpermps|vpermpd|vpblendd|vpmaskmov[dq]|vps[lr]lv[dq]|vpsravd|vp?gather\w+)$"
)
AVX_VNNI = re.compile(r"^vpdp(busd|busds|wssd|wssds)$")
AMX = re.compile(r"^(tile\w+|tdp\w+|ldtilecfg|sttilecfg)$")
SCALAR = re.compile(
    r"^(v(?!p)\w*s[sdh]|vmov[dq]|vpextr[bwdq]|vpinsr[bwdq]|vextractps|vinsertps|vcvt\w*si\w*|"
    r"vcvtusi2s\w+)$"
)
EVEX_BW = re.compile(
    r"^(vp(add|sub)(s|us)?[bw]|vpavg[bw]|vp(min|max)[su][bw]|vpmul(l|h|hu|hrs)w|vpmaddubsw|"
    r"vpmaddwd|vp?sadbw|vdbpsadbw|vpabs[bw]|vpcmp\w*[bw]|vps(ll|rl|ra)v?w|vpbroadcast[bw]|"
    r"vpextr[bw]|vpinsr[bw]|vpunpck[lh](bw|wd)|vpack[su]s(wb|dw)|vpalignr|vpshuf(b|hw|lw)|"
    r"vpmov[sz]xbw|vpmovu?s?wb|vmovdqu(8|16)|vpblendm[bw]|vperm(t2|i2)?w|vpmov[bw]2m|"
    r"vpmovm2[bw]|vptestn?m[bw]|vps[lr]ldq)$"
)
EVEX_DQ = re.compile(
    r"^(vpmullq|v(extract|insert)[fi](64x2|32x8)|vbroadcast[fi](32x8|64x2|32x2)|vcvtt?\w*qq\w*|"
    r"vcvtu?qq2\w+|vpmov[dq]2m|vpmovm2[dq]|v(and|andn|or|xor)p[sd]|vrange\w+|vreduce\w+|"
    r"vfpclass\w+)$"
)
EVEX_ONLY_FLAGS = [
    (re.compile(r"^vpdp(busd|busds|wssd|wssds)$"), "avx512_vnni"),
    (re.compile(r"^(vdpbf16ps|vcvtne2?ps2bf16)$"), "avx512_bf16"),
    (re.compile(r"^(vpermb|vperm[ti]2b|vpmultishiftqb)$"), "avx512vbmi"),
    (re.compile(r"^(vpcompress[bw]|vpexpand[bw]|vpsh[lr]dv?[wdq])$"), "avx512_vbmi2"),
    (re.compile(r"^(vpopcnt[bw]|vpshufbitqmb)$"), "avx512_bitalg"),
    (re.compile(r"^vpopcnt[dq]$"), "avx512_vpopcntdq"),
    (re.compile(r"^vpmadd52[lh]uq$"), "avx512ifma"),
    (re.compile(r"^(vpconflict[dq]|vplzcnt[dq]|vpbroadcastm\w+)$"), "avx512cd"),
]


def mask_flag(mnemonic):
    """The flag of an AVX-512 mask instruction (VEX-encoded, named by its mask width)."""
    if mnemonic in {"kunpckbw"}:
        return "avx512f"
    if mnemonic in {"kunpckwd", "kunpckdq"}:
        return "avx512bw"
    if mnemonic in {"kaddw", "ktestw"}:
        return "avx512dq"
    return {"b": "avx512dq", "w": "avx512f", "d": "avx512bw", "q": "avx512bw"}[mnemonic[-1]]


def flags_of(raw, mnemonic, operands):
    """The cpuinfo flags one instruction needs beyond baseline x86-64 (SSE2)."""
    encoding = "legacy"
    for byte in raw:
        if byte in LEGACY_PREFIXES:
            continue
        encoding = {"62": "evex", "c4": "vex", "c5": "vex"}.get(byte, "legacy")
        break
    if mnemonic.startswith("{vex}"):
        mnemonic, encoding = mnemonic.split()[1], "vex"
    elif mnemonic.startswith("{evex}"):
        mnemonic, encoding = mnemonic.split()[1], "evex"
    if AMX.match(mnemonic):
        return {"amx_tile", "amx_int8" if mnemonic.startswith("tdpb") and "bf16" not in mnemonic
                else "amx_bf16" if "bf16" in mnemonic else "amx_tile"}
    if re.match(r"^k[a-z]+[bwdq]$", mnemonic) and re.search(r"%k[0-7]", operands):
        return {mask_flag(mnemonic)}
    if mnemonic in BMI1:
        return {"bmi1"}
    if mnemonic in BMI2:
        return {"bmi2"}
    if mnemonic == "lzcnt":
        return {"abm"}
    if mnemonic == "popcnt":
        return {"popcnt"}
    if mnemonic == "movbe":
        return {"movbe"}
    if encoding == "legacy":
        for pattern, flag in ((SSSE3, "ssse3"), (SSE41, "sse4_1"), (SSE42, "sse4_2")):
            if pattern.match(mnemonic):
                return {flag}
        return set()
    if encoding == "vex":
        if AVX_VNNI.match(mnemonic):
            return {"avx_vnni"}
        if FMA.match(mnemonic):
            return {"fma"}
        if mnemonic in {"vcvtph2ps", "vcvtps2ph"}:
            return {"f16c"}
        if AVX2_ANY.match(mnemonic) or (
            "%ymm" in operands
            and mnemonic.startswith("vp")
            and mnemonic not in {"vpermilps", "vpermilpd", "vperm2f128"}
        ):
            return {"avx2"}
        return {"avx"}
    flags = {"avx512f"}
    if EVEX_BW.match(mnemonic):
        flags.add("avx512bw")
    if EVEX_DQ.match(mnemonic):
        flags.add("avx512dq")
    for pattern, flag in EVEX_ONLY_FLAGS:
        if pattern.match(mnemonic):
            flags.add(flag)
    if re.match(r"^v\w*(ph|sh)$", mnemonic) and mnemonic not in {"vcvtps2ph"}:
        flags.add("avx512_fp16")
    if "%zmm" not in operands and not SCALAR.match(mnemonic):
        flags.add("avx512vl")
    return flags


def main():
    counts = collections.Counter()
    examples = collections.defaultdict(collections.Counter)
    for path in sys.argv[1:]:
        listing = subprocess.run(
            ["objdump", "-d", "--insn-width=16", path], check=True, capture_output=True, text=True
        ).stdout
        for line in listing.splitlines():
            parts = line.split("\t")
            if len(parts) < 3 or not parts[0].strip().endswith(":"):
                continue
            raw = parts[1].split()
            text = parts[2].strip()
            words = text.split(None, 2 if text.startswith("{") else 1)
            if text.startswith("{"):
                mnemonic, operands = " ".join(words[:2]), (words[2] if len(words) > 2 else "")
            else:
                mnemonic, operands = words[0], (words[1] if len(words) > 1 else "")
            for flag in flags_of(raw, mnemonic, operands):
                counts[flag] += 1
                examples[flag][mnemonic] += 1
    for flag in sorted(counts):
        sample = ", ".join(name for name, _ in examples[flag].most_common(3))
        print(f"{flag:<18} {counts[flag]:>7}  {sample}")


if __name__ == "__main__":
    main()
