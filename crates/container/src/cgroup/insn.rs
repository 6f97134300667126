//! PURE: the eBPF instruction encoding the device-cgroup code needs, and the prefix program
//! that allows our device nodes before the runtime's own device program runs.
//!
//! Owns: [`Insn`] (one `struct bpf_insn`), its byte form, the few constructors used, the
//! check that a runtime's translated program can be loaded again unchanged, and
//! [`prefix`]. Must not: make syscalls, touch files, or change a single instruction of the
//! runtime's program (prepending keeps its relative jumps valid; editing it would not).
//!
//! The program context is `struct bpf_cgroup_dev_ctx { u32 access_type; u32 major; u32 minor; }`
//! with `access_type = (access << 16) | type`. The prefix reads R1 (the ctx pointer) and never
//! writes it; it uses only R0 and R2..R5, which the kernel's verifier guarantees the runtime's
//! program does not read before writing.

/// `BPF_DEVCG_DEV_CHAR`.
pub const DEV_CHAR: u32 = 2;
/// `BPF_DEVCG_ACC_READ`.
pub const ACC_READ: u32 = 2;
/// `BPF_DEVCG_ACC_WRITE`.
pub const ACC_WRITE: u32 = 4;

// Instruction classes, sizes, modes, operations (include/uapi/linux/bpf_common.h, bpf.h).
const LD: u8 = 0x00;
const LDX: u8 = 0x01;
const ALU: u8 = 0x04;
const JMP: u8 = 0x05;
const JMP32: u8 = 0x06;
const W: u8 = 0x00;
const DW: u8 = 0x18;
const MEM: u8 = 0x60;
const IMM: u8 = 0x00;
const K: u8 = 0x00;
const AND: u8 = 0x50;
const RSH: u8 = 0x70;
const MOV: u8 = 0xb0;
const JNE: u8 = 0x50;
const CALL: u8 = 0x80;
const EXIT: u8 = 0x90;

/// The highest register a loadable program may name (R10, the frame pointer). The verifier's
/// constant blinding uses an internal R11 ("AX") that user programs cannot.
const MAX_USER_REG: u8 = 10;

/// An eBPF register number, R0..R10.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reg(pub u8);
pub const R0: Reg = Reg(0);
pub const R1: Reg = Reg(1);
pub const R2: Reg = Reg(2);
pub const R3: Reg = Reg(3);
pub const R4: Reg = Reg(4);
pub const R5: Reg = Reg(5);

/// One `struct bpf_insn { u8 code; u8 dst_reg:4, src_reg:4; s16 off; s32 imm; }`. `regs` is
/// that second byte as the kernel lays it out on this machine (see [`Insn::dst`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Insn {
    pub code: u8,
    pub regs: u8,
    pub off: i16,
    pub imm: i32,
}

/// The size of one instruction in bytes.
pub const INSN_SIZE: usize = 8;

impl Insn {
    fn new(code: u8, dst: Reg, src: Reg, off: i16, imm: i32) -> Insn {
        // C bit-fields are allocated from the least significant bit on little-endian targets
        // and from the most significant bit on big-endian ones.
        let regs = if cfg!(target_endian = "little") {
            (src.0 << 4) | (dst.0 & 0x0f)
        } else {
            (dst.0 << 4) | (src.0 & 0x0f)
        };
        Insn {
            code,
            regs,
            off,
            imm,
        }
    }

    pub fn dst(self) -> u8 {
        if cfg!(target_endian = "little") {
            self.regs & 0x0f
        } else {
            self.regs >> 4
        }
    }

    pub fn src(self) -> u8 {
        if cfg!(target_endian = "little") {
            self.regs >> 4
        } else {
            self.regs & 0x0f
        }
    }

    /// `dst = *(u32 *)(src + off)`.
    pub fn ldx_w(dst: Reg, src: Reg, off: i16) -> Insn {
        Insn::new(LDX | MEM | W, dst, src, off, 0)
    }

    /// `dst = (u32)dst & imm` (upper half zeroed).
    pub fn and32(dst: Reg, imm: i32) -> Insn {
        Insn::new(ALU | AND | K, dst, R0, 0, imm)
    }

    /// `dst = (u32)dst >> imm`.
    pub fn rsh32(dst: Reg, imm: i32) -> Insn {
        Insn::new(ALU | RSH | K, dst, R0, 0, imm)
    }

    /// `dst = (u32)imm`.
    pub fn mov32(dst: Reg, imm: i32) -> Insn {
        Insn::new(ALU | MOV | K, dst, R0, 0, imm)
    }

    /// `if (u32)dst != (u32)imm goto +off`.
    pub fn jne32(dst: Reg, imm: u32, off: i16) -> Insn {
        Insn::new(JMP32 | JNE | K, dst, R0, off, imm as i32)
    }

    /// `return r0`.
    pub fn exit() -> Insn {
        Insn::new(JMP | EXIT, R0, R0, 0, 0)
    }

    /// The kernel's in-memory form (host byte order).
    pub fn to_bytes(self) -> [u8; INSN_SIZE] {
        let mut b = [0u8; INSN_SIZE];
        b[0] = self.code;
        b[1] = self.regs;
        b[2..4].copy_from_slice(&self.off.to_ne_bytes());
        b[4..8].copy_from_slice(&self.imm.to_ne_bytes());
        b
    }

    pub fn from_bytes(b: [u8; INSN_SIZE]) -> Insn {
        Insn {
            code: b[0],
            regs: b[1],
            off: i16::from_ne_bytes([b[2], b[3]]),
            imm: i32::from_ne_bytes([b[4], b[5], b[6], b[7]]),
        }
    }
}

/// A whole program as the bytes `BPF_PROG_LOAD` reads.
pub fn to_bytes(insns: &[Insn]) -> Vec<u8> {
    insns.iter().flat_map(|i| i.to_bytes()).collect()
}

/// Splits the bytes of `xlated_prog_insns` into instructions; `None` if the length is not a
/// multiple of 8.
pub fn from_bytes(bytes: &[u8]) -> Option<Vec<Insn>> {
    if !bytes.len().is_multiple_of(INSN_SIZE) {
        return None;
    }
    Some(
        bytes
            .chunks_exact(INSN_SIZE)
            .map(|c| Insn::from_bytes(c.try_into().expect("chunk of 8")))
            .collect(),
    )
}

/// Why a translated program cannot be loaded again as it is: the verifier rewrote something
/// that is only valid inside the kernel (helper call addresses, map pointers, the blinding
/// register).
pub fn check_reloadable(insns: &[Insn]) -> Result<(), String> {
    for (i, insn) in insns.iter().enumerate() {
        if insn.dst() > MAX_USER_REG || insn.src() > MAX_USER_REG {
            return Err(format!(
                "instruction {i} uses an internal register (constant blinding: is \
                 net.core.bpf_jit_harden set?)"
            ));
        }
        if insn.code == JMP | CALL || insn.code == JMP32 | CALL {
            return Err(format!("instruction {i} calls a helper or function"));
        }
        if insn.code == LD | IMM | DW && insn.src() != 0 {
            return Err(format!("instruction {i} loads a map or kernel pointer"));
        }
    }
    Ok(())
}

/// Our prefix: for each rule in order, `if (type == CHAR && (access & ~(READ|WRITE)) == 0 &&
/// major == M && minor == m) return 1;` then fall through to whatever follows. Empty for no
/// rules. R1 is only read.
pub fn prefix(rules: &[nvct_model::CgroupRule]) -> Vec<Insn> {
    if rules.is_empty() {
        return Vec::new();
    }
    let mut p = vec![
        Insn::ldx_w(R2, R1, 0),                            // r2 = access_type
        Insn::and32(R2, 0xffff),                           // r2 = type
        Insn::ldx_w(R3, R1, 0),                            // r3 = access_type
        Insn::rsh32(R3, 16),                               // r3 = access
        Insn::and32(R3, !((ACC_READ | ACC_WRITE) as i32)), // r3 = access other than rw
        Insn::ldx_w(R4, R1, 4),                            // r4 = major
        Insn::ldx_w(R5, R1, 8),                            // r5 = minor
    ];
    for r in rules {
        // Each jump skips the rest of this six-instruction block.
        p.extend([
            Insn::jne32(R2, DEV_CHAR, 5),
            Insn::jne32(R3, 0, 4),
            Insn::jne32(R4, r.major, 3),
            Insn::jne32(R5, r.minor, 2),
            Insn::mov32(R0, 1),
            Insn::exit(),
        ]);
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use nvct_model::CgroupRule;

    const DEV_BLOCK: u32 = 1;
    const ACC_MKNOD: u32 = 1;
    const ALU64: u8 = 0x07;
    const JA: u8 = 0x00;
    const JEQ: u8 = 0x10;

    // Forms runtimes emit (cilium/ebpf, runc's library) that the prefix does not use.
    impl Insn {
        fn mov64(dst: Reg, imm: i32) -> Insn {
            Insn::new(ALU64 | MOV | K, dst, R0, 0, imm)
        }
        fn jne64(dst: Reg, imm: i32, off: i16) -> Insn {
            Insn::new(JMP | JNE | K, dst, R0, off, imm)
        }
    }

    /// A test-only interpreter for exactly the subset above. `None` on anything else, a read
    /// outside the context, a jump out of the program, or more than 10,000 steps.
    fn run(prog: &[Insn], ctx: [u32; 3]) -> Option<u64> {
        let mut r = [0u64; 11];
        let mut pc = 0usize;
        for _ in 0..10_000 {
            let i = *prog.get(pc)?;
            let (d, s) = (i.dst() as usize, i.src() as usize);
            let imm32 = i.imm as u32;
            let imm64 = i.imm as i64 as u64;
            let mut next = pc + 1;
            let jump = |cond: bool| {
                if cond {
                    usize::try_from(pc as i64 + 1 + i.off as i64).ok()
                } else {
                    Some(pc + 1)
                }
            };
            match i.code {
                c if c == LDX | MEM | W => {
                    assert_eq!(s, 1, "loads only from the ctx pointer");
                    assert!(i.off >= 0 && i.off % 4 == 0 && i.off < 12);
                    r[d] = ctx[i.off as usize / 4] as u64;
                }
                c if c == ALU | AND | K => r[d] = ((r[d] as u32) & imm32) as u64,
                c if c == ALU | RSH | K => r[d] = ((r[d] as u32) >> imm32) as u64,
                c if c == ALU | MOV | K => r[d] = imm32 as u64,
                c if c == ALU64 | AND | K => r[d] &= imm64,
                c if c == ALU64 | RSH | K => r[d] >>= imm32,
                c if c == ALU64 | MOV | K => r[d] = imm64,
                c if c == JMP32 | JEQ | K => next = jump(r[d] as u32 == imm32)?,
                c if c == JMP32 | JNE | K => next = jump(r[d] as u32 != imm32)?,
                c if c == JMP | JEQ | K => next = jump(r[d] == imm64)?,
                c if c == JMP | JNE | K => next = jump(r[d] != imm64)?,
                c if c == JMP | JA => next = jump(true)?,
                c if c == JMP | EXIT => return Some(r[0]),
                _ => return None,
            }
            assert_ne!(d, 1, "nothing writes R1");
            pc = next;
        }
        None
    }

    fn ctx(ty: u32, access: u32, major: u32, minor: u32) -> [u32; 3] {
        [(access << 16) | ty, major, minor]
    }

    fn deny_tail() -> Vec<Insn> {
        vec![Insn::mov64(R0, 0), Insn::exit()]
    }

    /// What runc generates for a spec allowing only `c 1:3 rwm`, default deny (64-bit
    /// jumps and 32-bit ALU, as cilium/ebpf's asm emits them).
    pub fn runtime_tail() -> Vec<Insn> {
        vec![
            Insn::ldx_w(R2, R1, 0),
            Insn::and32(R2, 0xffff),
            Insn::ldx_w(R3, R1, 0),
            Insn::rsh32(R3, 16),
            Insn::ldx_w(R4, R1, 4),
            Insn::ldx_w(R5, R1, 8),
            Insn::jne64(R2, DEV_CHAR as i32, 4),
            Insn::jne64(R4, 1, 3),
            Insn::jne64(R5, 3, 2),
            Insn::mov32(R0, 1),
            Insn::exit(),
            Insn::mov32(R0, 0),
            Insn::exit(),
        ]
    }

    const GPU: [CgroupRule; 2] = [
        CgroupRule {
            major: 195,
            minor: 0,
        },
        CgroupRule {
            major: 195,
            minor: 255,
        },
    ];

    /// (name, rules, ctx, result with the deny tail, result with the runtime tail)
    type Case<'a> = (&'a str, &'a [CgroupRule], [u32; 3], u64, u64);

    #[test]
    fn prefix_over_tails() {
        let rw = ACC_READ | ACC_WRITE;
        #[rustfmt::skip]
        let cases: &[Case] = &[
            ("gpu read", &GPU, ctx(DEV_CHAR, ACC_READ, 195, 0), 1, 1),
            ("gpu write", &GPU, ctx(DEV_CHAR, ACC_WRITE, 195, 0), 1, 1),
            ("gpu read+write", &GPU, ctx(DEV_CHAR, rw, 195, 0), 1, 1),
            ("second rule", &GPU, ctx(DEV_CHAR, rw, 195, 255), 1, 1),
            ("mknod on an allowed node falls through", &GPU, ctx(DEV_CHAR, ACC_MKNOD, 195, 0), 0, 0),
            ("rw+mknod falls through", &GPU, ctx(DEV_CHAR, rw | ACC_MKNOD, 195, 0), 0, 0),
            ("other minor", &GPU, ctx(DEV_CHAR, rw, 195, 1), 0, 0),
            ("other major", &GPU, ctx(DEV_CHAR, rw, 196, 0), 0, 0),
            ("block device, same numbers", &GPU, ctx(DEV_BLOCK, rw, 195, 0), 0, 0),
            ("runtime's own rule still allows 1:3", &GPU, ctx(DEV_CHAR, rw, 1, 3), 0, 1),
            ("runtime's rule keeps mknod on 1:3", &GPU, ctx(DEV_CHAR, ACC_MKNOD, 1, 3), 0, 1),
            ("1:3 as a block device is denied", &GPU, ctx(DEV_BLOCK, rw, 1, 3), 0, 0),
            ("empty rules: gpu decided by the tail", &[], ctx(DEV_CHAR, rw, 195, 0), 0, 0),
            ("empty rules: 1:3 decided by the tail", &[], ctx(DEV_CHAR, rw, 1, 3), 0, 1),
            ("a rule for 1:3 itself", &[CgroupRule { major: 1, minor: 3 }], ctx(DEV_CHAR, ACC_READ, 1, 3), 1, 1),
            ("major above i32::MAX compares as u32", &[CgroupRule { major: u32::MAX, minor: 7 }],
                ctx(DEV_CHAR, ACC_READ, u32::MAX, 7), 1, 1),
        ];
        for (name, rules, c, want_deny, want_runtime) in cases {
            let mut p = prefix(rules);
            p.extend(deny_tail());
            assert_eq!(run(&p, *c), Some(*want_deny), "{name}: deny tail");
            let mut p = prefix(rules);
            p.extend(runtime_tail());
            assert_eq!(run(&p, *c), Some(*want_runtime), "{name}: runtime tail");
        }
    }

    #[test]
    fn rules_keep_their_order_and_first_match_returns() {
        // Blocks are laid out in rule order, and a match returns at once: keep only the first
        // block (plus a deny tail) and the first rule still allows while the second no longer
        // does; the later blocks and the tail are never reached for the first rule.
        let rules = [
            CgroupRule {
                major: 10,
                minor: 1,
            },
            CgroupRule {
                major: 10,
                minor: 2,
            },
        ];
        let p = prefix(&rules);
        assert_eq!(p.len(), 7 + 6 * 2);
        let first_block = [&p[..7 + 6], &deny_tail()[..]].concat();
        assert_eq!(run(&first_block, ctx(DEV_CHAR, ACC_READ, 10, 1)), Some(1));
        assert_eq!(run(&first_block, ctx(DEV_CHAR, ACC_READ, 10, 2)), Some(0));
        let whole = [&p[..], &deny_tail()[..]].concat();
        assert_eq!(run(&whole, ctx(DEV_CHAR, ACC_READ, 10, 2)), Some(1));
    }

    #[test]
    fn prefix_reads_r1_and_writes_only_r0_to_r5() {
        for i in prefix(&GPU) {
            if i.code == LDX | MEM | W {
                assert_eq!(i.src(), 1);
            }
            if i.code & 0x07 != JMP && i.code & 0x07 != JMP32 {
                assert!(matches!(i.dst(), 0 | 2..=5), "{i:?}");
            }
        }
    }

    #[test]
    fn bytes_round_trip_and_layout() {
        let i = Insn::jne32(R4, 195, -2);
        let b = i.to_bytes();
        assert_eq!(Insn::from_bytes(b), i);
        if cfg!(target_endian = "little") {
            assert_eq!(b, [0x56, 0x04, 0xfe, 0xff, 195, 0, 0, 0]);
            assert_eq!(
                Insn::ldx_w(R2, R1, 4).to_bytes(),
                [0x61, 0x12, 4, 0, 0, 0, 0, 0]
            );
        }
        let prog = [prefix(&GPU), runtime_tail()].concat();
        assert_eq!(from_bytes(&to_bytes(&prog)), Some(prog));
        assert_eq!(from_bytes(&[0; 7]), None);
    }

    #[test]
    fn reloadable() {
        let mut call = runtime_tail();
        call.insert(
            0,
            Insn {
                code: JMP | CALL,
                regs: 0,
                off: 0,
                imm: 14,
            },
        );
        let map = Insn {
            code: LD | IMM | DW,
            regs: Insn::mov32(R0, 0).regs
                | if cfg!(target_endian = "little") {
                    0x10
                } else {
                    0x01
                },
            off: 0,
            imm: 0,
        };
        let blinded = Insn {
            code: ALU64 | MOV | K,
            regs: if cfg!(target_endian = "little") {
                0x0b
            } else {
                0xb0
            },
            off: 0,
            imm: 5,
        };
        let cases: &[(&str, Vec<Insn>, bool)] = &[
            ("runc-like program", runtime_tail(), true),
            ("helper call", call, false),
            (
                "map pointer",
                vec![map, Insn::mov32(R0, 0), Insn::mov32(R0, 0), Insn::exit()],
                false,
            ),
            (
                "blinding register",
                vec![blinded, Insn::mov32(R0, 0), Insn::exit()],
                false,
            ),
        ];
        for (name, prog, ok) in cases {
            assert_eq!(check_reloadable(prog).is_ok(), *ok, "{name}");
        }
    }
}
