//! literun in Cortex-M firmware: `no_std`, the model `include_bytes!`-ed into flash and read in
//! place, the activation arena a `static` buffer owned by the app, one `invoke`.
//!
//! Built for `thumbv7em-none-eabihf` it is a bare-metal program (cortex-m-rt, `memory.x` for the
//! MPS2 AN386 Cortex-M4F board) that reports over semihosting and exits with the result; CI runs
//! it with `qemu-system-arm -machine mps2-an386`. Built for the host it runs the same `run` as an
//! ordinary program.
//!
//! literun needs `alloc` while preparing (the model's tensor table, per-operator parameters); here
//! a tiny bump allocator over a static buffer provides it, and counts allocations so the firmware
//! can check that `invoke` makes none.
#![cfg_attr(target_os = "none", no_std, no_main)]

use literun::{Interpreter, Model};

#[repr(C, align(16))]
struct Aligned<T: ?Sized>(T);

/// The model (digits CNN, full int8), in flash, 16-byte aligned so literun reads it in place.
static MODEL: &Aligned<[u8]> = &Aligned(*include_bytes!(
    "../../../literun/examples/models/digits_cnn.int8.lite"
));
/// One 8x8 test digit, float32, as `.npy`.
static INPUT_NPY: &[u8] = include_bytes!("../../../fixtures/digits_cnn.input.npy");
/// literun's output for it on x86-64: the firmware must produce the same bits.
static EXPECTED_NPY: &[u8] =
    include_bytes!("../../../literun/examples/models/digits_cnn.int8.expected.npy");

/// Activation arena: at least the model's arena bytes (`litecvt inspect` prints them; 2320 for
/// this model) + 15 for alignment.
const ARENA_BYTES: usize = 4096;

/// The data of a version-1 `.npy` file.
fn npy_data(npy: &[u8]) -> &[u8] {
    let header = u16::from_le_bytes([npy[8], npy[9]]) as usize;
    &npy[10 + header..]
}

pub struct Report {
    pub digit: usize,
    pub bit_exact: bool,
    pub arena_bytes: usize,
    pub allocs_in_invoke: usize,
}

/// Loads the model from flash, prepares it on `arena`, runs one digit.
fn run(arena: &mut [u8], allocs: fn() -> usize) -> Result<Report, literun::Error> {
    let model = Model::from_bytes(&MODEL.0)?;
    let mut it = Interpreter::with_arena(&model, arena)?;
    it.input_mut(0)?
        .bytes_mut()
        .copy_from_slice(npy_data(INPUT_NPY));
    let before = allocs();
    it.invoke()?;
    let allocs_in_invoke = allocs() - before;
    let out = it.output(0)?;
    let logits = out.as_f32()?;
    let mut digit = 0;
    for (i, &v) in logits.iter().enumerate() {
        if v > logits[digit] {
            digit = i;
        }
    }
    Ok(Report {
        digit,
        bit_exact: out.bytes() == npy_data(EXPECTED_NPY),
        arena_bytes: it.arena_bytes(),
        allocs_in_invoke,
    })
}

#[cfg(not(target_os = "none"))]
fn main() {
    let mut arena = vec![0u8; ARENA_BYTES];
    let r = run(&mut arena, || 0).unwrap_or_else(|e| panic!("{e}"));
    println!(
        "digit {} (bit-exact with x86-64: {}), arena {} bytes",
        r.digit, r.bit_exact, r.arena_bytes
    );
    if !r.bit_exact {
        std::process::exit(1);
    }
}

#[cfg(target_os = "none")]
mod bare {
    use core::alloc::{GlobalAlloc, Layout};
    use core::cell::UnsafeCell;
    use core::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    use cortex_m_rt::entry;
    use cortex_m_semihosting::{debug, hprintln};

    /// Preparing the digits model peaks at about 12 KiB (printed at the end).
    const HEAP_BYTES: usize = 16 * 1024;

    /// A bump allocator over a static buffer; freeing the most recent block gives it back.
    /// Single core, no allocation from interrupts: relaxed atomics are enough.
    struct Bump {
        mem: UnsafeCell<[u8; HEAP_BYTES]>,
        top: AtomicUsize,
        high: AtomicUsize,
        allocs: AtomicUsize,
    }

    unsafe impl Sync for Bump {}

    unsafe impl GlobalAlloc for Bump {
        unsafe fn alloc(&self, l: Layout) -> *mut u8 {
            let base = self.mem.get() as usize;
            let start = (base + self.top.load(Relaxed)).next_multiple_of(l.align()) - base;
            let end = start + l.size();
            if end > HEAP_BYTES {
                return core::ptr::null_mut();
            }
            self.top.store(end, Relaxed);
            self.high.fetch_max(end, Relaxed);
            self.allocs.fetch_add(1, Relaxed);
            (base + start) as *mut u8
        }
        unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
            let off = p as usize - self.mem.get() as usize;
            if off + l.size() == self.top.load(Relaxed) {
                self.top.store(off, Relaxed);
            }
        }
    }

    #[global_allocator]
    static HEAP: Bump = Bump {
        mem: UnsafeCell::new([0; HEAP_BYTES]),
        top: AtomicUsize::new(0),
        high: AtomicUsize::new(0),
        allocs: AtomicUsize::new(0),
    };

    #[entry]
    fn main() -> ! {
        // cortex-m-rt turns this into a `&'static mut` that only `main` sees.
        static mut ARENA: [u8; super::ARENA_BYTES] = [0; super::ARENA_BYTES];
        match super::run(ARENA, || HEAP.allocs.load(Relaxed)) {
            Ok(r) => {
                hprintln!(
                    "digit {} (bit-exact with x86-64: {}), arena {} bytes, heap high-water {} bytes, {} allocations in invoke",
                    r.digit,
                    r.bit_exact,
                    r.arena_bytes,
                    HEAP.high.load(Relaxed),
                    r.allocs_in_invoke
                );
                let ok = r.bit_exact && r.allocs_in_invoke == 0;
                debug::exit(if ok {
                    debug::EXIT_SUCCESS
                } else {
                    debug::EXIT_FAILURE
                });
            }
            Err(e) => {
                hprintln!("error: {}", e);
                debug::exit(debug::EXIT_FAILURE);
            }
        }
        loop {
            core::hint::spin_loop();
        }
    }

    #[panic_handler]
    fn panic(info: &core::panic::PanicInfo) -> ! {
        hprintln!("panic: {}", info);
        debug::exit(debug::EXIT_FAILURE);
        loop {
            core::hint::spin_loop();
        }
    }
}
