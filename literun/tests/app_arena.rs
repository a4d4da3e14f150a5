//! `Interpreter::with_arena`: the app supplies the activation arena, and `invoke` allocates
//! nothing on the heap (counted by a global allocator, on this thread only).

use literun::{AlignedBytes, Interpreter, Model};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

struct Counting;

static ALLOCS: AtomicUsize = AtomicUsize::new(0);
thread_local! {
    static COUNT_HERE: Cell<bool> = const { Cell::new(false) };
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged, so `System`'s
// guarantees carry over; counting touches only an atomic and a thread-local flag.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNT_HERE.with(|c| c.get()) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNT_HERE.with(|c| c.get()) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Heap allocations made on this thread by `f`.
fn allocations(f: impl FnOnce()) -> usize {
    let before = ALLOCS.load(Ordering::Relaxed);
    COUNT_HERE.with(|c| c.set(true));
    f();
    COUNT_HERE.with(|c| c.set(false));
    ALLOCS.load(Ordering::Relaxed) - before
}

fn model(name: &str) -> AlignedBytes {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/models")
        .join(name);
    AlignedBytes::read_file(p).unwrap()
}

#[test]
fn app_arena_matches_owned_and_invoke_does_not_allocate() {
    for name in [
        "digits_cnn.lite",
        "digits_cnn.int8.lite",
        "mobilenetv2_block.int8.lite",
        "attention_block.int8.lite",
    ] {
        let bytes = model(name);
        let m = Model::from_bytes(&bytes).unwrap();
        let mut owned = Interpreter::new(&m).unwrap();
        let need = owned.arena_bytes();
        for (i, v) in owned.input_f32_mut(0).unwrap().iter_mut().enumerate() {
            *v = (i % 7) as f32 * 0.25 - 0.5;
        }
        owned.invoke().unwrap();
        let want = owned.output(0).unwrap().bytes().to_vec();

        // Too small: an error naming the size needed, not a panic.
        let mut small = vec![0u8; need.saturating_sub(1)];
        let err = Interpreter::with_arena(&m, &mut small).err().unwrap();
        assert!(err.to_string().contains(&need.to_string()), "{err}");

        // Misaligned on purpose: 15 spare bytes are always enough.
        let mut buf = vec![0u8; need + 16];
        let mut it = Interpreter::with_arena(&m, &mut buf[1..]).unwrap();
        assert_eq!(it.arena_bytes(), need);
        for (i, v) in it.input_f32_mut(0).unwrap().iter_mut().enumerate() {
            *v = (i % 7) as f32 * 0.25 - 0.5;
        }
        let n = allocations(|| it.invoke().unwrap());
        assert_eq!(n, 0, "{name}: invoke allocated {n} times");
        assert_eq!(it.output(0).unwrap().bytes(), &want[..], "{name}");
    }
}

/// RFFT2D's working memory is the kernel scratch and its twiddle factors are made when
/// preparing: TensorFlow's spectral front-end (STFT, RFFT2D, COMPLEX_ABS...) invokes without
/// allocating.
#[cfg(feature = "ops-fft")]
#[test]
fn spectral_front_end_invoke_does_not_allocate() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/tf/spectral_float.tflite");
    let bytes = AlignedBytes::read_file(p).unwrap();
    let m = Model::from_bytes(&bytes).unwrap();
    let need = Interpreter::new(&m).unwrap().arena_bytes();
    let mut buf = vec![0u8; need + 16];
    let mut it = Interpreter::with_arena(&m, &mut buf).unwrap();
    for (i, v) in it.input_f32_mut(0).unwrap().iter_mut().enumerate() {
        *v = ((i * 37) % 11) as f32 * 0.1 - 0.5;
    }
    let n = allocations(|| it.invoke().unwrap());
    assert_eq!(n, 0, "invoke allocated {n} times");
    assert!(it
        .output(0)
        .unwrap()
        .as_f32()
        .unwrap()
        .iter()
        .all(|v| v.is_finite()));
}
