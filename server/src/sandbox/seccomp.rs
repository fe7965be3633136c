//! The seccomp filter of a sandboxed runtime: classic BPF that bubblewrap loads (`--seccomp
//! FD`) just before it runs the runtime, after `no_new_privs`.
//!
//! It is a deny list, as Docker's and Flatpak's are: an allow list would have to know every
//! system call of every runtime people host (Node, Python, a shell and whatever the model
//! installs), and one missing call breaks an agent in ways nobody can debug. What it denies
//! are the calls sandbox escapes and host tampering use and no agent needs: tracing other
//! processes, kernel modules and keyrings, mounting and namespaces, BPF and perf,
//! `open_by_handle_at` (the classic container escape), clock and swap changes, reboot.
//! Most of them also need a capability the sandbox does not have; the filter is the second
//! lock. Denied calls fail with `EPERM` (a runtime that probes, like Chromium does for its
//! own sandbox, carries on); a call from another ABI (32-bit `int 0x80`, x32), whose
//! numbers the list does not cover, fails too.

/// One classic BPF instruction (`struct sock_filter`).
#[derive(Debug, Clone, Copy)]
struct Instruction {
    code: u16,
    jt: u8,
    jf: u8,
    k: u32,
}

// Opcodes (linux/bpf_common.h).
const BPF_LD_W_ABS: u16 = 0x20; // BPF_LD (0) | BPF_W (0) | BPF_ABS (0x20)
const BPF_JEQ_K: u16 = 0x05 | 0x10; // BPF_JMP | BPF_JEQ | BPF_K
const BPF_JGE_K: u16 = 0x05 | 0x30; // BPF_JMP | BPF_JGE | BPF_K
const BPF_RET_K: u16 = 0x06; // BPF_RET | BPF_K

// `struct seccomp_data` offsets.
const NR_OFFSET: u32 = 0;
const ARCH_OFFSET: u32 = 4;

const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
const EPERM: u32 = 1;

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xc000_003e; // AUDIT_ARCH_X86_64
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xc000_00b7; // AUDIT_ARCH_AARCH64

/// x86-64's x32 ABI sets this bit in the call number.
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// The denied calls, by number on this architecture.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn denied() -> Vec<u32> {
    use libc::*;
    let mut calls: Vec<c_long> = vec![
        // Other processes' memory.
        SYS_ptrace,
        SYS_process_vm_readv,
        SYS_process_vm_writev,
        SYS_kcmp,
        // The kernel itself.
        SYS_init_module,
        SYS_finit_module,
        SYS_delete_module,
        SYS_kexec_load,
        SYS_kexec_file_load,
        SYS_reboot,
        SYS_swapon,
        SYS_swapoff,
        SYS_syslog,
        SYS_acct,
        SYS_quotactl,
        SYS_bpf,
        SYS_perf_event_open,
        SYS_userfaultfd,
        SYS_fanotify_init,
        // Keyrings are not namespaced.
        SYS_keyctl,
        SYS_add_key,
        SYS_request_key,
        // Mounts and namespaces: the sandbox's shape is bubblewrap's to make.
        SYS_mount,
        SYS_umount2,
        SYS_pivot_root,
        SYS_setns,
        SYS_unshare,
        SYS_open_tree,
        SYS_move_mount,
        SYS_fsopen,
        SYS_fsconfig,
        SYS_fsmount,
        SYS_fspick,
        SYS_mount_setattr,
        // File handles reach files outside the sandbox's mounts.
        SYS_open_by_handle_at,
        SYS_name_to_handle_at,
        // The host's clocks.
        SYS_settimeofday,
        SYS_clock_settime,
        SYS_clock_adjtime,
        SYS_adjtimex,
        SYS_vhangup,
    ];
    #[cfg(target_arch = "x86_64")]
    calls.extend([SYS_iopl, SYS_ioperm, SYS_lookup_dcookie, SYS_uselib]);
    calls.into_iter().filter_map(|nr| u32::try_from(nr).ok()).collect()
}

/// The filter, as the bytes of a `struct sock_filter` array in native byte order (what
/// bubblewrap reads from the descriptor it is given).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub fn program() -> Vec<u8> {
    let denied = denied();
    let mut program = Vec::with_capacity(denied.len() + 8);
    let deny = Instruction { code: BPF_RET_K, jt: 0, jf: 0, k: SECCOMP_RET_ERRNO | EPERM };
    // Another ABI: its numbers mean other calls, so nothing of it is allowed.
    program.push(Instruction { code: BPF_LD_W_ABS, jt: 0, jf: 0, k: ARCH_OFFSET });
    program.push(Instruction { code: BPF_JEQ_K, jt: 1, jf: 0, k: AUDIT_ARCH });
    program.push(deny);
    program.push(Instruction { code: BPF_LD_W_ABS, jt: 0, jf: 0, k: NR_OFFSET });
    #[cfg(target_arch = "x86_64")]
    {
        program.push(Instruction { code: BPF_JGE_K, jt: 0, jf: 1, k: X32_SYSCALL_BIT });
        program.push(deny);
    }
    // Each denied call jumps to the `deny` at the end; the distance shrinks as we go.
    let count = denied.len();
    for (i, nr) in denied.into_iter().enumerate() {
        let to_deny = u8::try_from(count - i).expect("the deny list fits a jump");
        program.push(Instruction { code: BPF_JEQ_K, jt: to_deny, jf: 0, k: nr });
    }
    program.push(Instruction { code: BPF_RET_K, jt: 0, jf: 0, k: SECCOMP_RET_ALLOW });
    program.push(deny);
    program
        .iter()
        .flat_map(|i| {
            let mut bytes = [0u8; 8];
            bytes[..2].copy_from_slice(&i.code.to_ne_bytes());
            bytes[2] = i.jt;
            bytes[3] = i.jf;
            bytes[4..].copy_from_slice(&i.k.to_ne_bytes());
            bytes
        })
        .collect()
}

/// Elsewhere roost has no filter to offer: the sandbox reports itself unavailable.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub fn program() -> Vec<u8> {
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_denied_call_jumps_to_the_final_deny() {
        let bytes = program();
        assert_eq!(bytes.len() % 8, 0);
        let instructions: Vec<Instruction> = bytes
            .chunks(8)
            .map(|c| Instruction {
                code: u16::from_ne_bytes([c[0], c[1]]),
                jt: c[2],
                jf: c[3],
                k: u32::from_ne_bytes([c[4], c[5], c[6], c[7]]),
            })
            .collect();
        let last = instructions.len() - 1;
        assert_eq!(instructions[last].k, SECCOMP_RET_ERRNO | EPERM);
        assert_eq!(instructions[last - 1].k, SECCOMP_RET_ALLOW);
        let jumps: Vec<(usize, &Instruction)> =
            instructions.iter().enumerate().filter(|(_, i)| i.code == BPF_JEQ_K && i.k != AUDIT_ARCH).collect();
        assert_eq!(jumps.len(), denied().len());
        for (at, jump) in jumps {
            assert_eq!(at + 1 + usize::from(jump.jt), last, "call {} jumps to the deny", jump.k);
        }
        assert!(denied().contains(&(libc::SYS_ptrace as u32)));
    }
}
