//! The seccomp filter of a sandboxed runtime: classic BPF that bubblewrap loads (`--seccomp
//! FD`) just before it runs the runtime, after `no_new_privs`.
//!
//! It is a deny list, as Docker's and Flatpak's are: an allow list would have to know every
//! system call of every runtime people host (Node, Python, a shell and whatever the model
//! installs), and one missing call breaks an agent in ways nobody can debug. What it
//! refuses, and how:
//!
//! - **Escape calls, with `EPERM`:** the calls sandbox escapes and host tampering use and no
//!   agent needs: tracing other processes, kernel modules and keyrings, mounting and
//!   namespaces, BPF and perf, `open_by_handle_at` (the classic container escape), clock and
//!   swap changes, reboot. Most of them also need a capability the sandbox does not have; the
//!   filter is the second lock. `EPERM` is what a process without the capability gets, so a
//!   runtime that probes (like Chromium does for its own sandbox) carries on.
//! - **io_uring, with `ENOSYS`:** `io_uring_setup`, `io_uring_enter`, `io_uring_register`.
//!   io_uring is a second way into the kernel that seccomp does not see (its operations,
//!   `openat`, `connect`, `socket` among them, run without a system call this filter could
//!   judge) and behind many recent kernel exploits; Docker's default profile refuses it
//!   too. `ENOSYS` is what a kernel built without io_uring answers: runtimes that probe for
//!   it (Node's libuv, liburing users) take that as "not here" and use their thread pool,
//!   where `EPERM` could read as a failure.
//! - **Sockets of other families, with `EAFNOSUPPORT`:** `socket` and `socketpair` are
//!   allowed for `AF_UNIX`, `AF_INET` and `AF_INET6` only (all an agent needs: the relay on
//!   loopback, and Unix sockets between its own processes). The others reach past the
//!   sandbox's network namespace (`AF_VSOCK` talks to the hypervisor or host, and is not
//!   namespaced) or open kernel attack surface the agent has no use for (`AF_NETLINK`,
//!   `AF_PACKET`, `AF_BLUETOOTH`, `AF_ALG`, …). `EAFNOSUPPORT` is what a kernel without that
//!   family answers, so a program that probes for one carries on. The filter compares the
//!   low 32 bits of the first argument: the kernel takes the family as an `int` and ignores
//!   the upper half, so the filter judges the family the kernel will see. One consequence:
//!   without netlink, `getifaddrs` fails inside the sandbox (glibc's `getaddrinfo` then
//!   assumes both IPv4 and IPv6, as it is written to).
//! - **Another ABI, with `EPERM`:** a call from 32-bit `int 0x80` or x32, whose numbers the
//!   lists do not cover (32-bit x86's `socketcall`, a second way to `socket`, among them),
//!   fails whatever it is.
//!
//! The program is written with labels (`Builder`) rather than counted offsets: it checks
//! the architecture, then the call number against each list, then, for the two socket
//! calls, the family.

/// One classic BPF instruction (`struct sock_filter`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

// `struct seccomp_data` offsets: `int nr; __u32 arch; __u64 instruction_pointer; __u64
// args[6];`.
const NR_OFFSET: u32 = 0;
const ARCH_OFFSET: u32 = 4;
/// The low 32 bits of `args[0]` (the half that comes first in memory on little-endian).
const FIRST_ARG_LOW_OFFSET: u32 = if cfg!(target_endian = "little") { 16 } else { 20 };

const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;

/// `SECCOMP_RET_ERRNO` with `errno` (a positive `errno` value, below 4096).
const fn fail_with(errno: libc::c_int) -> u32 {
    SECCOMP_RET_ERRNO | (errno as u32 & 0xffff)
}

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xc000_003e; // AUDIT_ARCH_X86_64
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xc000_00b7; // AUDIT_ARCH_AARCH64

/// x86-64's x32 ABI sets this bit in the call number.
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// The socket families `socket` and `socketpair` may use.
const ALLOWED_FAMILIES: [libc::c_int; 3] = [libc::AF_UNIX, libc::AF_INET, libc::AF_INET6];

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

/// The io_uring calls: refused as if the kernel had no io_uring.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn absent() -> [u32; 3] {
    use libc::*;
    [SYS_io_uring_setup, SYS_io_uring_enter, SYS_io_uring_register].map(|nr| nr as u32)
}

/// The calls whose first argument is a socket family.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn socket_calls() -> [u32; 2] {
    [libc::SYS_socket, libc::SYS_socketpair].map(|nr| nr as u32)
}

/// A place in the program that jumps name, set with [`Builder::place`].
#[derive(Debug, Clone, Copy)]
struct Label(usize);

/// Writes a program whose jumps go to labels; [`Builder::finish`] turns them into the
/// offsets classic BPF wants: forward only, and one byte (at most 255 instructions ahead).
#[derive(Debug, Default)]
struct Builder {
    instructions: Vec<Instruction>,
    /// Where each label was placed (an index into `instructions`).
    places: Vec<Option<usize>>,
    /// The jumps to fill in: at which instruction, to which label, and whether it is the
    /// jump taken when the comparison holds (`jt`) or when it does not (`jf`).
    jumps: Vec<(usize, Label, bool)>,
}

impl Builder {
    fn label(&mut self) -> Label {
        self.places.push(None);
        Label(self.places.len() - 1)
    }

    /// `label` is the next instruction.
    fn place(&mut self, label: Label) {
        let previous = self.places[label.0].replace(self.instructions.len());
        assert!(previous.is_none(), "a label is placed once");
    }

    /// Loads the 32-bit word of `struct seccomp_data` at `offset`.
    fn load(&mut self, offset: u32) {
        self.instructions.push(Instruction { code: BPF_LD_W_ABS, jt: 0, jf: 0, k: offset });
    }

    /// Goes to `to` when the loaded word compares (`code`: `BPF_JEQ_K`, `BPF_JGE_K`) true to
    /// `k`, else on to the next instruction.
    fn jump_if(&mut self, code: u16, k: u32, to: Label) {
        self.jumps.push((self.instructions.len(), to, true));
        self.instructions.push(Instruction { code, jt: 0, jf: 0, k });
    }

    /// Goes to `to` when the loaded word compares false to `k`, else on.
    fn jump_unless(&mut self, code: u16, k: u32, to: Label) {
        self.jumps.push((self.instructions.len(), to, false));
        self.instructions.push(Instruction { code, jt: 0, jf: 0, k });
    }

    /// Ends the program with `action` (`SECCOMP_RET_*`).
    fn ret(&mut self, action: u32) {
        self.instructions.push(Instruction { code: BPF_RET_K, jt: 0, jf: 0, k: action });
    }

    fn finish(mut self) -> Vec<Instruction> {
        for (at, label, taken) in self.jumps {
            let target = self.places[label.0].expect("every label is placed");
            let ahead = target.checked_sub(at + 1).expect("classic BPF only jumps forward");
            let ahead = u8::try_from(ahead).expect("a jump reaches at most 255 instructions ahead");
            let jump = &mut self.instructions[at];
            if taken { jump.jt = ahead } else { jump.jf = ahead }
        }
        self.instructions
    }
}

/// The filter's instructions.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn filter() -> Vec<Instruction> {
    let mut program = Builder::default();
    let allow = program.label();
    let check_family = program.label();
    let absent = program.label();
    let refuse = program.label();

    // Another ABI: its numbers mean other calls, so nothing of it is allowed.
    program.load(ARCH_OFFSET);
    program.jump_unless(BPF_JEQ_K, AUDIT_ARCH, refuse);
    program.load(NR_OFFSET);
    #[cfg(target_arch = "x86_64")]
    program.jump_if(BPF_JGE_K, X32_SYSCALL_BIT, refuse);
    for nr in denied() {
        program.jump_if(BPF_JEQ_K, nr, refuse);
    }
    for nr in self::absent() {
        program.jump_if(BPF_JEQ_K, nr, absent);
    }
    for nr in socket_calls() {
        program.jump_if(BPF_JEQ_K, nr, check_family);
    }
    program.ret(SECCOMP_RET_ALLOW);

    program.place(check_family);
    program.load(FIRST_ARG_LOW_OFFSET);
    for family in ALLOWED_FAMILIES {
        program.jump_if(BPF_JEQ_K, family as u32, allow);
    }
    program.ret(fail_with(libc::EAFNOSUPPORT));

    program.place(allow);
    program.ret(SECCOMP_RET_ALLOW);
    program.place(absent);
    program.ret(fail_with(libc::ENOSYS));
    program.place(refuse);
    program.ret(fail_with(libc::EPERM));
    program.finish()
}

/// The filter, as the bytes of a `struct sock_filter` array in native byte order (what
/// bubblewrap reads from the descriptor it is given).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub fn program() -> Vec<u8> {
    filter()
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
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
mod tests {
    use super::*;

    fn instructions() -> Vec<Instruction> {
        let bytes = program();
        assert_eq!(bytes.len() % 8, 0);
        bytes
            .chunks(8)
            .map(|c| Instruction {
                code: u16::from_ne_bytes([c[0], c[1]]),
                jt: c[2],
                jf: c[3],
                k: u32::from_ne_bytes([c[4], c[5], c[6], c[7]]),
            })
            .collect()
    }

    /// What the kernel would make of `program` for one call: a classic BPF interpreter for
    /// the four opcodes the filter uses, on a `struct seccomp_data` in native byte order.
    fn run(program: &[Instruction], arch: u32, nr: u32, first_arg: u64) -> u32 {
        let mut data = [0u8; 64];
        data[0..4].copy_from_slice(&nr.to_ne_bytes());
        data[4..8].copy_from_slice(&arch.to_ne_bytes());
        data[16..24].copy_from_slice(&first_arg.to_ne_bytes());
        let (mut pc, mut a) = (0usize, 0u32);
        loop {
            let i = program[pc];
            pc += 1;
            match i.code {
                BPF_LD_W_ABS => {
                    let at = i.k as usize;
                    a = u32::from_ne_bytes(data[at..at + 4].try_into().unwrap());
                }
                BPF_JEQ_K | BPF_JGE_K => {
                    let holds = if i.code == BPF_JEQ_K { a == i.k } else { a >= i.k };
                    pc += usize::from(if holds { i.jt } else { i.jf });
                }
                BPF_RET_K => return i.k,
                code => panic!("opcode {code:#x} at {}", pc - 1),
            }
        }
    }

    #[test]
    fn every_denied_call_jumps_to_the_final_deny() {
        let instructions = instructions();
        let last = instructions.len() - 1;
        assert_eq!(instructions[last], Instruction { code: BPF_RET_K, jt: 0, jf: 0, k: fail_with(libc::EPERM) });
        let denied = denied();
        let jumps: Vec<(usize, &Instruction)> =
            instructions.iter().enumerate().filter(|(_, i)| i.code == BPF_JEQ_K && denied.contains(&i.k)).collect();
        assert_eq!(jumps.len(), denied.len());
        for (at, jump) in jumps {
            assert_eq!(at + 1 + usize::from(jump.jt), last, "call {} jumps to the deny", jump.k);
        }
        assert!(denied.contains(&(libc::SYS_ptrace as u32)));
    }

    #[test]
    fn each_call_gets_the_answer_the_module_documents() {
        let program = instructions();
        let native = |nr: libc::c_long, arg: u64| run(&program, AUDIT_ARCH, nr as u32, arg);
        let (allow, eperm) = (SECCOMP_RET_ALLOW, fail_with(libc::EPERM));
        let (enosys, eafnosupport) = (fail_with(libc::ENOSYS), fail_with(libc::EAFNOSUPPORT));
        for nr in denied() {
            assert_eq!(native(nr.into(), 0), eperm, "call {nr}");
        }
        for nr in [libc::SYS_io_uring_setup, libc::SYS_io_uring_enter, libc::SYS_io_uring_register] {
            assert_eq!(native(nr, 0), enosys, "call {nr}");
        }
        for nr in [libc::SYS_read, libc::SYS_openat, libc::SYS_connect, libc::SYS_clone, libc::SYS_execve] {
            assert_eq!(native(nr, 0), allow, "call {nr}");
        }
        for call in [libc::SYS_socket, libc::SYS_socketpair] {
            for family in [libc::AF_UNIX, libc::AF_INET, libc::AF_INET6] {
                assert_eq!(native(call, family as u64), allow, "call {call}, family {family}");
            }
            for family in [
                libc::AF_UNSPEC,
                libc::AF_NETLINK,
                libc::AF_PACKET,
                libc::AF_VSOCK,
                libc::AF_BLUETOOTH,
                libc::AF_ALG,
                libc::AF_CAN,
                libc::AF_XDP,
                1000,
                -1,
            ] {
                assert_eq!(native(call, family as u32 as u64), eafnosupport, "call {call}, family {family}");
            }
            // The kernel reads an `int`: the upper half of the register does not count,
            // for the filter either.
            assert_eq!(native(call, 1 << 32 | libc::AF_INET as u64), allow);
            assert_eq!(native(call, 1 << 32 | libc::AF_NETLINK as u64), eafnosupport);
        }
        // Another ABI.
        assert_eq!(run(&program, AUDIT_ARCH ^ 1, libc::SYS_read as u32, 0), eperm);
        assert_eq!(run(&program, 0x4000_0003, libc::SYS_socket as u32, libc::AF_INET as u64), eperm); // i386
        #[cfg(target_arch = "x86_64")]
        assert_eq!(run(&program, AUDIT_ARCH, X32_SYSCALL_BIT | libc::SYS_read as u32, 0), eperm);
    }

    /// Tries the calls in Python (stdlib `socket` and `ctypes`) and prints each outcome
    /// (`ok` or the errno's name) as JSON; argv: the numbers of `io_uring_setup`,
    /// `io_uring_enter`, `io_uring_register`, `ptrace` and `socket`.
    const PROBE: &str = r#"
import ctypes, errno, json, os, socket, sys

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
uring_setup, uring_enter, uring_register, ptrace, sys_socket = map(int, sys.argv[1:6])

def raw(nr, *args):
    def call():
        if libc.syscall(ctypes.c_long(nr), *map(ctypes.c_long, args)) < 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code))
    return call

def sock(family, kind, pair=False):
    def call():
        for s in socket.socketpair(family, kind) if pair else [socket.socket(family, kind, 0)]:
            s.close()
    return call

params = ctypes.create_string_buffer(120)  # struct io_uring_params
probes = {
    "io_uring_setup": raw(uring_setup, 1, ctypes.addressof(params)),
    "io_uring_enter": raw(uring_enter, -1, 0, 0, 0, 0, 0),
    "io_uring_register": raw(uring_register, -1, 0, 0, 0),
    "ptrace": raw(ptrace, 3, os.getpid(), 0, 0),  # PTRACE_PEEKUSER of itself: ESRCH unfiltered
    "unix": sock(socket.AF_UNIX, socket.SOCK_STREAM),
    "unix_pair": sock(socket.AF_UNIX, socket.SOCK_STREAM, pair=True),
    "inet": sock(socket.AF_INET, socket.SOCK_STREAM),
    "inet_udp": sock(socket.AF_INET, socket.SOCK_DGRAM),
    "inet6": sock(socket.AF_INET6, socket.SOCK_STREAM),
    "netlink": sock(socket.AF_NETLINK, socket.SOCK_RAW),
    "netlink_pair": sock(socket.AF_NETLINK, socket.SOCK_RAW, pair=True),
    "netlink_upper_half_set": raw(sys_socket, (1 << 32) | socket.AF_NETLINK, socket.SOCK_RAW, 0),
    "vsock": sock(socket.AF_VSOCK, socket.SOCK_STREAM),
    "packet": sock(socket.AF_PACKET, socket.SOCK_RAW),
    "alg": sock(socket.AF_ALG, socket.SOCK_SEQPACKET),
}

def outcome(call):
    try:
        call()
        return "ok"
    except OSError as err:
        return errno.errorcode.get(err.errno, str(err.errno))

print(json.dumps({name: outcome(call) for name, call in probes.items()}))
"#;

    /// [`PROBE`]'s outcomes in a process bubblewrap starts, under the filter or not.
    async fn probe(bwrap: &str, filtered: bool) -> Result<serde_json::Value, String> {
        let mut command = tokio::process::Command::new(bwrap);
        command.args(["--dev-bind", "/", "/", "--die-with-parent"]);
        let filter = if filtered { Some(crate::sandbox::seccomp_fd().unwrap()) } else { None };
        let fd = filter.as_ref().map(std::os::fd::AsRawFd::as_raw_fd);
        if let Some(fd) = fd {
            command.args(["--seccomp".to_owned(), fd.to_string()]);
        }
        command.args(["/usr/bin/python3", "-c", PROBE]);
        let numbers = [
            libc::SYS_io_uring_setup,
            libc::SYS_io_uring_enter,
            libc::SYS_io_uring_register,
            libc::SYS_ptrace,
            libc::SYS_socket,
        ];
        command.args(numbers.map(|nr| nr.to_string()));
        crate::runtimes::pre_exec::enter_sandbox(&mut command, Vec::new(), fd.into_iter().collect());
        let output = command.output().await.map_err(|e| format!("cannot run {bwrap}: {e}"))?;
        let stderr = String::from_utf8_lossy(&output.stderr);
        if !output.status.success() {
            return Err(format!("{bwrap} exited with {}: {stderr}", output.status));
        }
        serde_json::from_slice(&output.stdout).map_err(|e| format!("{e}: {stderr}"))
    }

    /// The filter in the kernel, not just on paper: bubblewrap loads it the way roost makes
    /// and hands it over, and a process under it tries the calls. The same probe without the
    /// filter shows the refusals are the filter's.
    #[tokio::test]
    async fn the_kernel_refuses_what_the_filter_refuses() {
        let bwrap = "/usr/bin/bwrap";
        if !std::path::Path::new(bwrap).exists() || !std::path::Path::new("/usr/bin/python3").exists() {
            eprintln!("skipped: needs {bwrap} and /usr/bin/python3");
            return;
        }
        let without = probe(bwrap, false).await.unwrap();
        let with = probe(bwrap, true).await.unwrap();
        let expected = [
            ("io_uring_setup", "ENOSYS"),
            ("io_uring_enter", "ENOSYS"),
            ("io_uring_register", "ENOSYS"),
            ("ptrace", "EPERM"),
            ("unix", "ok"),
            ("unix_pair", "ok"),
            ("inet", "ok"),
            ("inet_udp", "ok"),
            ("netlink", "EAFNOSUPPORT"),
            ("netlink_pair", "EAFNOSUPPORT"),
            ("netlink_upper_half_set", "EAFNOSUPPORT"),
            ("vsock", "EAFNOSUPPORT"),
            ("packet", "EAFNOSUPPORT"),
            ("alg", "EAFNOSUPPORT"),
        ];
        for (call, outcome) in expected {
            assert_eq!(with[call], outcome, "{call} under the filter: {with} (without: {without})");
        }
        // IPv6 is as the host has it (a host can turn it off); here, and usually, that is ok.
        assert_eq!(with["inet6"], without["inet6"], "{with}");
        // Without the filter the same calls get other answers (vsock's, packet's and alg's
        // depend on the host's modules, io_uring_setup's on its kernel.io_uring_disabled).
        assert_eq!(without["netlink"], "ok", "{without}");
        assert_eq!(without["netlink_upper_half_set"], "ok", "{without}");
        assert_ne!(without["netlink_pair"], "EAFNOSUPPORT", "{without}");
        assert_eq!(without["ptrace"], "ESRCH", "{without}");
        if std::path::Path::new("/proc/sys/kernel/io_uring_disabled").exists() {
            // A kernel with io_uring judges the (bad) arguments instead.
            assert_ne!(without["io_uring_enter"], "ENOSYS", "{without}");
            assert_ne!(without["io_uring_register"], "ENOSYS", "{without}");
        }
    }
}
